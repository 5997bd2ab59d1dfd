"""Persistence and the run around the update loop: checkpoints (safetensors + JSON), TensorBoard
logging, run directories and their locks (:mod:`~rlkit.io.run`), signals (:mod:`~rlkit.io.signals`),
seeds and threads (:mod:`~rlkit.io.threads`) and a worker's pipe messages (:mod:`~rlkit.io.wire`)."""
