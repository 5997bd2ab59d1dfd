"""The policy objective as a slot: what one minibatch's loss is computed from
(:class:`ObjectiveInputs`), what it returns (:class:`ObjectiveTerms`), what an objective declares
(:class:`Objective`), and PPO's clipped surrogate (Schulman et al. 2017, eq. 9) as the default.

An objective is a callable ``objective(inputs, hp, dim=None) -> ObjectiveTerms`` with

- ``name``: recorded in every checkpoint; a run resumes only under the objective it was trained with;
- ``is_default``: True only for :class:`ClippedSurrogate`. The fused kernels of :mod:`rlkit.fast`
  (the single run's fused loss node, the population's stacked fused loss and its autograd-free
  step) compute the default's numbers and are used only while it is the objective; any other
  objective runs through autograd on the same minibatches;
- ``needs_dist_params``: the update then passes the policy's full distribution parameters, new and
  behaviour (:attr:`ObjectiveInputs.new_dist`, :attr:`ObjectiveInputs.old_dist`), for an analytic KL.

``dim`` is None for one policy's ``[B]`` minibatch (scalar terms) and 1 for ``K`` policies'
minibatches on a leading member axis (``[K, B]`` inputs, ``[K]`` terms, each row its own: a
population). A variant brings an objective in its :class:`rlkit.variants.Plug`. Optional members:
``state()``/``load_state()`` (checkpointed as an update hook's are, under the objective's name) and
``stack(members)``, the objective of a population whose members hold their own numbers (an
adaptive coefficient each; without it the first member's objective serves all of them).
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple, Protocol, Sequence

import torch

from rlkit.core.buffer import Batch, FullBatch
from rlkit.core.config import PPOConfig
from rlkit.core.heads import PolicyHead
from rlkit.core.loss import LossFn, LossOutput, loss_coefficients, normalize_advantages, policy_loss_terms, ppo_loss_terms
from rlkit.errors import ConfigError


class Targets(NamedTuple):
    """The minibatch's constants as :func:`rlkit.core.loss.ppo_loss_terms` reads them."""

    log_probs: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    values: torch.Tensor


class ObjectiveInputs(NamedTuple):
    """One minibatch as an objective reads it: ``[B]`` tensors, or ``[K, B]`` with a leading member axis."""

    new_log_probs: torch.Tensor
    """log pi(a|s) of the stored actions under the policy being trained (differentiable)."""
    old_log_probs: torch.Tensor
    """log pi_behaviour(a|s), recorded when the actions were sampled."""
    advantages: torch.Tensor
    """Raw GAE advantages; :func:`whitened` normalizes them as ``--norm-adv`` says."""
    new_values: torch.Tensor
    """V(s) of the critic being trained (differentiable)."""
    old_values: torch.Tensor
    """V(s) at collection (the centre of the value clip)."""
    returns: torch.Tensor
    """Value targets."""
    entropy: torch.Tensor
    """Per-sample entropy of the policy being trained (differentiable)."""
    new_dist: torch.Tensor | None = None
    """``[B, P]`` (``[K, B, P]``) the policy's full distribution parameters (the head's
    ``full_params``, differentiable); None unless the objective ``needs_dist_params``."""
    old_dist: torch.Tensor | None = None
    """The same of the behaviour policy, computed once per update before its first epoch; None
    unless the objective ``needs_dist_params``."""
    segments: torch.Tensor | None = None
    """``[B]`` the sequence of the minibatch each sample belongs to (:attr:`Batch.segments`), where
    the trainer has sequences."""

    @property
    def targets(self) -> Targets:
        return Targets(self.old_log_probs, self.advantages, self.returns, self.old_values)


class ObjectiveTerms(NamedTuple):
    """What an objective returns for one minibatch (scalars, or ``[K]`` with ``dim``)."""

    loss: torch.Tensor
    """What the optimizer minimizes (differentiable)."""
    pg_loss: torch.Tensor
    """The policy part, detached (logged as ``losses/policy_loss``)."""
    v_loss: torch.Tensor
    """The value part, detached."""
    entropy: torch.Tensor
    """Mean entropy, detached."""
    log_ratio: torch.Tensor
    """``[B]`` (``[K, B]``) log(pi_new / pi_behaviour), detached (approx_kl and clipfrac)."""
    stats: dict[str, torch.Tensor]
    """Further scalars (``[K]`` with ``dim``), detached; each is logged as ``losses/<key>``, the mean
    over the minibatches of the update's last epoch (as approx_kl), and update hooks read them."""


class Objective(Protocol):
    """What the update needs of an objective (see the module's docstring)."""

    name: str
    is_default: bool
    needs_dist_params: bool

    def __call__(self, inputs: ObjectiveInputs, hp: PPOConfig, dim: int | None = None) -> ObjectiveTerms: ...


def whitened(advantages: torch.Tensor, hp: PPOConfig, dim: int | None = None) -> torch.Tensor:
    """The advantages the policy loss uses: normalized over the minibatch (over ``dim``) when
    ``hp.norm_adv``, as the default objective uses them; raw otherwise."""
    return normalize_advantages(advantages, dim) if hp.norm_adv else advantages


def objective_terms(pg_loss: torch.Tensor, log_ratio: torch.Tensor, inputs: ObjectiveInputs, hp: PPOConfig,
                    dim: int | None = None, stats: dict[str, torch.Tensor] | None = None) -> ObjectiveTerms:
    """An objective's terms from its policy loss ``pg_loss``: the core's value loss (``--clip-vloss``
    with ``--clip-coef`` as its range, ``--vloss-form``, ``--vf-coef``) and entropy bonus
    (``--ent-coef``) are added as the default objective adds them."""
    out = policy_loss_terms(pg_loss, log_ratio, inputs.entropy, inputs.new_values, inputs.targets, clip_coef=hp.clip_coef,
                            clip_vloss=hp.clip_vloss, ent_coef=hp.ent_coef, vf_coef=hp.vf_coef,
                            vloss_form=hp.vloss_form, dim=dim)
    return ObjectiveTerms(**out._asdict(), stats=stats if stats is not None else {})


class ClippedSurrogate:
    """PPO's clipped surrogate with the core's value loss and entropy bonus: the default objective
    (:func:`rlkit.core.loss.ppo_loss_terms`, with ``--clip-coef`` as epsilon)."""

    name = "clip"
    is_default = True
    needs_dist_params = False

    def __call__(self, inputs: ObjectiveInputs, hp: PPOConfig, dim: int | None = None) -> ObjectiveTerms:
        out = ppo_loss_terms(inputs.new_log_probs, inputs.entropy, inputs.new_values, inputs.targets,
                             **loss_coefficients(hp), dim=dim)
        return ObjectiveTerms(**out._asdict(), stats={})


CLIPPED_SURROGATE = ClippedSurrogate()
"""The objective of every run whose variants bring none."""

MinibatchLoss = Callable[[torch.Tensor, torch.Tensor, Batch], "LossOutput | ObjectiveTerms"]
"""``(dist_params [B, out_dim], values [B], targets)`` -> the minibatch's loss terms."""


def objective_inputs(head: PolicyHead, dist_params: torch.Tensor, values: torch.Tensor, mb: Batch,
                     needs_dist_params: bool = False) -> ObjectiveInputs:
    """What an objective reads of a minibatch ``mb`` given the policy's outputs on it."""
    new_log_probs, entropy = head.log_prob_entropy(dist_params, mb.actions)
    if not needs_dist_params:
        return ObjectiveInputs(new_log_probs, mb.log_probs, mb.advantages, values, mb.values, mb.returns, entropy,
                               segments=mb.segments)
    if mb.behaviour_params is None:
        raise ValueError("the objective needs the behaviour policy's distribution parameters; the minibatch has none")
    return ObjectiveInputs(new_log_probs, mb.log_probs, mb.advantages, values, mb.values, mb.returns, entropy,
                           head.full_params(dist_params), mb.behaviour_params,  # type: ignore[attr-defined]
                           segments=mb.segments)


def minibatch_loss(objective: Objective, head: PolicyHead, hp: PPOConfig, default_loss: LossFn) -> MinibatchLoss:
    """How each minibatch's loss is computed: by ``default_loss`` (a kernel of the default
    objective: :func:`rlkit.core.loss.ppo_loss`, or the fused node of :mod:`rlkit.fast`) while the
    objective is the default, else by the objective itself, through autograd."""
    if objective.is_default:
        return functools.partial(default_loss, head, **loss_coefficients(hp))

    def loss(dist_params: torch.Tensor, values: torch.Tensor, mb: Batch) -> ObjectiveTerms:
        return objective(objective_inputs(head, dist_params, values, mb, objective.needs_dist_params), hp)
    return loss


def stack_objectives(objectives: Sequence[Objective]) -> Objective:
    """The objective of ``K`` members trained as one stacked network (``dim=1``): the first one's
    ``stack(objectives)`` where it has it, else the first one itself."""
    first = objectives[0]
    stack = getattr(first, "stack", None)
    return stack(list(objectives)) if callable(stack) else first


def mean_stats(per_minibatch: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Each key's mean over the minibatches (scalars, or ``[K]`` rows each their own)."""
    if not per_minibatch:
        return {}
    return {key: torch.stack([s[key] for s in per_minibatch]).mean(0) for key in per_minibatch[0]}


class Trains(Protocol):
    """What :func:`with_behaviour_params` reads of a learner."""

    objective: Objective
    source: object
    generator: torch.Generator


def with_behaviour_params(selected: object, learner: Trains, actor: Callable[[torch.Tensor], torch.Tensor],
                          head: PolicyHead, num_minibatches: int) -> object:
    """What the epochs train on, with the behaviour policy's full distribution parameters
    (:attr:`Batch.behaviour_params`) where the learner's objective needs them: ``actor(obs) [N,
    out_dim]`` is the policy before the epochs, the one that collected the latest rollout. It runs
    on the first epoch's minibatches (the learner's generator is read ahead, not advanced), so the
    forward of each minibatch before the first step has the same bits and the KL is 0 until the
    policy moves. Only the latest rollout (:class:`FullBatch`) has a behaviour policy to ask; a
    batch source that trains on other data is a one-line :class:`ConfigError`. ``selected`` as it
    is otherwise."""
    if not learner.objective.needs_dist_params:
        return selected
    if not isinstance(selected, FullBatch):
        raise ConfigError(f"the objective {learner.objective.name!r} needs the behaviour policy's distribution of "
                          f"every sample; the batch source {getattr(learner.source, 'name', '?')!r} trains on "
                          "other data")
    batch = selected.pooled
    b = batch.obs.shape[0]
    state = learner.generator.get_state()
    order = torch.randperm(b, generator=learner.generator)  # the first epoch's, as iterate_minibatches draws it
    learner.generator.set_state(state)
    size = b // min(num_minibatches, b)
    obs = batch.obs.index_select(0, order.to(batch.obs.device))
    with torch.no_grad():
        shuffled = torch.cat([head.full_params(actor(obs[start:start + size]))  # type: ignore[attr-defined]
                              for start in range(0, b, size)])
    params = torch.empty_like(shuffled).index_copy_(0, order.to(shuffled.device), shuffled)
    return FullBatch(batch._replace(behaviour_params=params.to(batch.obs.device)))
