"""Paper ablations: ``rlkit sweep`` runs variants x environments x seeds (:mod:`~rlkit.ablation.sweep`,
:mod:`~rlkit.ablation.spec`, :mod:`~rlkit.ablation.runner`, :mod:`~rlkit.ablation.baselines`,
:mod:`~rlkit.ablation.results`) and ``rlkit report`` compares them with sound statistics
(:mod:`~rlkit.ablation.stats`, :mod:`~rlkit.ablation.figures`, :mod:`~rlkit.ablation.report`)."""
