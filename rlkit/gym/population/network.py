"""A population's networks as one: ``K`` members' MLP actor-critics with their parameters stacked
on a leading member axis and run with batched matmuls (acting in numpy, the update in torch), as
PureJaxRL trains many seeds as one vectorized program (Lu et al. 2022).

Member k's flat parameter vector (:class:`rlkit.core.optim.FlatParameters`, actor first) is row k
of one ``[K, P]`` matrix and its gradient row k of another; the member's modules' parameters are
views of that row, so its own model, optimizer, checkpoints and evaluation see the population's
numbers without copies. Every batched op computes member k's slice with the same kernel and shapes
whatever ``K`` is (one matrix product, one reduction per member): a member's numbers do not depend
on who else is in the population."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.func import functional_call, vmap

from rlkit.core.buffer import Batch
from rlkit.core.config import PPOConfig
from rlkit.core.heads import DiagGaussianHead, PolicyHead, gaussian_entropy, gaussian_full_params, gaussian_log_prob
from rlkit.core.loss import LossOutput, loss_coefficients, ppo_loss_terms, ratio_stats
from rlkit.core.objective import CLIPPED_SURROGATE, Objective, ObjectiveInputs, ObjectiveTerms, mean_stats
from rlkit.core.optim import FlatParameters
from rlkit.core.update import loss_scalars
from rlkit.errors import ConfigError
from rlkit.fast.adam import AdamsTogether
from rlkit.fast.categorical import categorical_log_prob_entropy
from rlkit.fast.loss import fused_loss_terms
from rlkit.fast.stacked_mlp import StackedFusedMLP
from rlkit.fast.stacked_step import DirectStep, covers
from rlkit.gym.policies import MLPActorCritic, NumpyActor


@dataclass(frozen=True)
class Layer:
    """One linear layer's place in the flat parameter vector."""

    weight: slice
    bias: slice
    shape: tuple[int, int]
    """``(out, in)``, as ``nn.Linear`` stores its weight."""


def _layers(seq: nn.Sequential, flat: FlatParameters, index: dict[int, int]) -> list[Layer]:
    return [Layer(flat.slices[index[id(m.weight)]], flat.slices[index[id(m.bias)]], tuple(m.weight.shape))
            for m in seq if isinstance(m, nn.Linear)]


def stacked_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x [K, B, in] @ weight[K, out, in]^T + bias [K, 1, out]``, member by member. A width of 1 is
    padded with a zero to 2: torch's batched matmul takes another path for a single column or
    contraction (a matrix-vector product), whose numbers for member k depend on ``K``; the zeros
    add exactly nothing."""
    out, inp = weight.shape[1:]
    if inp == 1:
        x, weight = F.pad(x, (0, 1)), F.pad(weight, (0, 1))
    if out == 1:
        weight, bias = F.pad(weight, (0, 0, 0, 1)), F.pad(bias, (0, 1))
    y = torch.baddbmm(bias, x, weight.transpose(1, 2))
    return y[..., :1] if out == 1 else y


class StackedParameters:
    """``theta [K, P]`` holding every member's parameters (and ``theta.grad [K, P]`` their
    gradients); ``forward`` runs all members on their own observations at once.

    The forward reads each layer's weight and bias as a leaf ``[K, ...]`` view of ``theta`` with its
    ``.grad`` a view of ``theta.grad``: backward accumulates into ``theta.grad`` in place, with no
    full-size zero tensor per slice (as indexing ``theta`` in the graph would build). Tanh layers."""

    def __init__(self, flats: list[FlatParameters], model: MLPActorCritic, fused: bool = False) -> None:
        """``fused``: the forward and backward as one node (:class:`rlkit.fast.stacked_mlp.StackedFusedMLP`)."""
        if model.activation != "tanh":  # refused before a population starts; the kernels' own guard
            raise ConfigError(f"a population's stacked MLPs compute tanh layers, not {model.activation}")
        sizes = {f.data.numel() for f in flats}
        if len(sizes) != 1:
            raise ValueError(f"members' parameter vectors differ in size: {sorted(sizes)}")
        self.theta = torch.zeros(len(flats), sizes.pop(), dtype=flats[0].data.dtype, device=flats[0].data.device,
                                 requires_grad=True)
        self.theta.grad = torch.zeros_like(self.theta)
        for k, flat in enumerate(flats):
            flat.move_to(self.theta.data[k], self.theta.grad[k])
        index = {id(p): i for i, p in enumerate(model.ordered_parameters())}
        actor, critic = _layers(model.actor, flats[0], index), _layers(model.critic, flats[0], index)
        self.actor = [self._layer(layer) for layer in actor]
        self.critic = [self._layer(layer) for layer in critic]
        self.fused = StackedFusedMLP(self.theta, [(la.weight, la.bias, la.shape) for la in actor],
                                     [(la.weight, la.bias, la.shape) for la in critic]) if fused else None
        self.heads = {f"head.{name}": self._leaf(flats[0].slices[index[id(p)]], tuple(p.shape))
                      for name, p in model.head.named_parameters()}
        """The head's own parameters (a Gaussian's log-std), ``[K, *shape]`` leaves."""

    def _leaf(self, part: slice, shape: tuple[int, ...]) -> torch.Tensor:
        k = self.size
        leaf = self.theta.data[:, part].view(k, *shape).requires_grad_()
        leaf.grad = self.theta.grad[:, part].view(k, *shape)  # type: ignore[index]
        return leaf

    def _layer(self, layer: Layer) -> tuple[torch.Tensor, torch.Tensor]:
        out, inp = layer.shape
        return self._leaf(layer.weight, (out, inp)), self._leaf(layer.bias, (1, out))

    @property
    def size(self) -> int:
        return self.theta.shape[0]

    def zero_grad(self) -> None:
        self.theta.grad.zero_()  # type: ignore[union-attr]

    @staticmethod
    def _mlp(x: torch.Tensor, layers: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        for i, (weight, bias) in enumerate(layers):
            x = stacked_linear(x, weight, bias)
            if i < len(layers) - 1:
                x = torch.tanh(x)
        return x

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``obs [K, B, obs_dim]`` -> (distribution params ``[K, B, out_dim]``, values ``[K, B]``)."""
        if self.fused is not None:
            return self.fused(obs)
        return self._mlp(obs, self.actor), self._mlp(obs, self.critic).squeeze(-1)

    def head_tensors(self) -> dict[str, torch.Tensor]:
        """The head's parameters stacked, ``{"head.<name>": [K, *shape]}`` (views of ``theta``)."""
        return self.heads


class _HeadCall(nn.Module):
    """A head's ``log_prob_entropy`` as a module call, so ``functional_call`` can swap in one
    member's head parameters."""

    def __init__(self, head: PolicyHead) -> None:
        super().__init__()
        self.head = head

    def forward(self, dist_params: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.head.log_prob_entropy(dist_params, actions)


class StackedLoss:
    """The run's objective for every member at once, each member's means its own (``dim=1``). A
    head declaring softmax logits (``fused_kind == "categorical"``) reads ``[K, B, A]`` as it is; a
    diagonal Gaussian's formulas take each member's log-std; any other head runs per member under
    ``torch.func.vmap``. The default objective is :func:`rlkit.core.loss.ppo_loss_terms`, with
    ``fused`` the single run's fast kernels over the member axis (:mod:`rlkit.fast.loss`); any
    other objective is called with ``[K, B]`` :class:`ObjectiveInputs` through autograd."""

    def __init__(self, head: PolicyHead, hp: PPOConfig, fused: bool = False,
                 objective: Objective = CLIPPED_SURROGATE) -> None:
        self.hp = hp
        self.objective = objective
        self.fused = fused and objective.is_default
        self.head = head
        self.direct = getattr(head, "fused_kind", None) == "categorical"
        self.gaussian = isinstance(head, DiagGaussianHead)
        module = _HeadCall(head)

        def one(head_params: dict[str, torch.Tensor], dist_params: torch.Tensor,
                actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return functional_call(module, head_params, (dist_params, actions))

        self._per_member = vmap(one)

    def __call__(self, head_params: dict[str, torch.Tensor], dist_params: torch.Tensor, values: torch.Tensor,
                 mb: Batch) -> LossOutput | ObjectiveTerms:
        """Per-member ``[K]`` losses (and ``[K, B]`` log-ratios) for ``[K, B, ...]`` inputs."""
        if self.direct:
            log_probs, entropy = categorical_log_prob_entropy(dist_params, mb.actions) if self.fused \
                else self.head.log_prob_entropy(dist_params, mb.actions)
        elif self.gaussian:  # each member's log-std [K, 1, A] broadcast over its rows
            log_std = head_params["head.log_std"][:, None, :]
            log_probs, entropy = gaussian_log_prob(dist_params, log_std, mb.actions), gaussian_entropy(dist_params, log_std)
        else:
            log_probs, entropy = self._per_member(head_params, dist_params, mb.actions)
        hp = self.hp
        if not self.objective.is_default:
            dists = (self.full_params(head_params, dist_params), mb.behaviour_params) \
                if self.objective.needs_dist_params else ()
            inputs = ObjectiveInputs(log_probs, mb.log_probs, mb.advantages, values, mb.values, mb.returns, entropy,
                                     *dists)
            return self.objective(inputs, hp, dim=1)
        terms = fused_loss_terms if self.fused else ppo_loss_terms
        return terms(log_probs, entropy, values, mb, **loss_coefficients(hp), dim=1)

    def full_params(self, head_params: dict[str, torch.Tensor], dist_params: torch.Tensor) -> torch.Tensor:
        """``[K, B, P]`` every member's head's ``full_params`` (a Gaussian's with its own log-std)."""
        if self.gaussian:
            return gaussian_full_params(dist_params, head_params["head.log_std"][:, None, :])
        if self.direct:
            return self.head.full_params(dist_params)  # type: ignore[attr-defined]
        raise ConfigError(f"the objective {self.objective.name!r} needs the analytic KL, which a population "
                          f"offers for categorical and diagonal Gaussian heads only")


class StackedActor:
    """Members' numpy snapshots (:class:`NumpyActor`) stacked layer by layer, for acting on all
    members' observations with one batched matmul per layer."""

    def __init__(self, actors: list[NumpyActor]) -> None:
        self.layers = [(np.stack([a.actor[i][0] for a in actors]), np.stack([a.actor[i][1] for a in actors])[:, None])
                       for i in range(len(actors[0].actor))]

    def params(self, obs: np.ndarray) -> np.ndarray:
        """``obs [K, N, obs_dim]`` float32 -> ``[K, N, out_dim]`` distribution parameters."""
        x = obs
        for w, b in self.layers[:-1]:
            x = np.tanh(np.matmul(x, w) + b)
        w, b = self.layers[-1]
        return np.matmul(x, w) + b


@dataclass(frozen=True)
class MemberBatch:
    """What one member brings to a stacked update."""

    batch: Batch
    """Its rollout's ``[T*N]`` batch (advantages computed)."""
    generator: torch.Generator
    """Its minibatch shuffling stream (drawn as a single run draws it)."""
    flat: FlatParameters
    optimizer: torch.optim.Optimizer


def _pack(batch: Batch) -> torch.Tensor:
    """``[b, C]``: observations, actions (as floats), log-probs, advantages, returns, values."""
    b = batch.obs.shape[0]
    return torch.cat([batch.obs, batch.actions.reshape(b, -1).float(), batch.log_probs[:, None],
                      batch.advantages[:, None], batch.returns[:, None], batch.values[:, None]], dim=1)


def _unpack(mb: torch.Tensor, like: Batch, behaviour: bool = False) -> Batch:
    """``[K, s, C]`` packed rows as a :class:`Batch` of ``[K, s, ...]`` fields (``behaviour``: and the last columns)."""
    k, s, _ = mb.shape
    d, shape = like.obs.shape[1], like.actions.shape[1:]
    a = int(np.prod(shape))
    actions = mb[:, :, d:d + a].to(like.actions.dtype).reshape(k, s, *shape)
    tail = mb[:, :, d + a:]
    return Batch(mb[:, :, :d], actions, tail[..., 0], tail[..., 1], tail[..., 2], tail[..., 3],
                 tail[..., 4:] if behaviour else None)


def _with_behaviour(stacked: StackedParameters, loss_fn: StackedLoss, packed: torch.Tensor, obs_dim: int,
                    size: int, orders: torch.Tensor) -> torch.Tensor:
    """``packed [K, b, C]`` with the behaviour policy's distribution parameters appended where the
    objective needs them: a forward before the first epoch on that epoch's minibatches (``orders
    [K, b]``, chunks of ``size``), whose forward before its first step has the same bits."""
    if not loss_fn.objective.needs_dist_params:
        return packed
    index = orders.to(packed.device)[:, :, None]
    obs = packed.gather(1, index.expand(-1, -1, packed.shape[2]))[:, :, :obs_dim]
    with torch.no_grad():
        chunks = [stacked.forward(obs[:, start:start + size])[0] for start in range(0, obs.shape[1], size)]
        shuffled = loss_fn.full_params(stacked.head_tensors(), torch.cat(chunks, dim=1)).to(packed.dtype)
    behaviour = torch.empty_like(shuffled).scatter_(1, index.expand(-1, -1, shuffled.shape[2]), shuffled)
    return torch.cat([packed, behaviour], dim=2)


class MemberStats(NamedTuple):
    """One member's share of a stacked update."""

    steps: torch.Tensor
    """``[S, 5]`` loss, policy loss, value loss, entropy and grad norm of each of its minibatch steps."""
    approx_kl: torch.Tensor
    """Of its last epoch."""
    clipfrac: torch.Tensor
    epochs: int
    extra: dict[str, torch.Tensor]
    """The objective's own statistics of its last epoch (scalars)."""

    def scalars(self, update_number: int) -> dict[str, float]:
        """The ``losses/`` scalars a single run logs (:func:`rlkit.core.update.loss_scalars`)."""
        return loss_scalars(self.steps, self.approx_kl, self.clipfrac, self.epochs, update_number, self.extra)


class Steppers(NamedTuple):
    """The live members' optimizers for one epoch: stepped together in one kernel call where
    :class:`rlkit.fast.adam.AdamsTogether` applies, else one by one."""

    optimizers: list[torch.optim.Optimizer]
    together: AdamsTogether | None
    fresh: bool
    """Some optimizer has no state yet (its first step makes it): asked again after a step."""

    @classmethod
    def of(cls, members: list[MemberBatch | None], live: list[int]) -> Steppers:
        return cls.made([members[k].optimizer for k in live])  # type: ignore[union-attr]

    @classmethod
    def made(cls, optimizers: list[torch.optim.Optimizer]) -> Steppers:
        return cls(optimizers, AdamsTogether.of(optimizers), any(not o.state for o in optimizers))

    def step(self) -> Steppers:
        """Step every optimizer; returns what steps them next."""
        if self.together is not None:
            self.together.step()
            return self
        for optimizer in self.optimizers:
            optimizer.step()
        return Steppers.made(self.optimizers) if self.fresh else self


def clip_and_step(stacked: StackedParameters, steppers: Steppers, max_norm: float, mask: torch.Tensor,
                  all_live: bool) -> tuple[torch.Tensor, Steppers]:
    """Clip each live member's gradient (row of ``theta.grad``) to norm ``max_norm`` (as
    :meth:`rlkit.core.optim.FlatParameters.clip_grad_norm_` clips one) and step its Adam, all
    members in a few batched calls; returns the ``[K]`` norms before clipping (0 for the others,
    ``mask [K]`` False) and what steps the optimizers next."""
    grad = stacked.theta.grad
    norms = torch.linalg.vector_norm(grad, dim=1)  # type: ignore[arg-type]
    if not all_live:
        norms = torch.where(mask, norms, 0.0)
    grad.mul_((max_norm / (norms + 1e-6)).clamp(max=1.0)[:, None])  # type: ignore[union-attr]
    return norms, steppers.step()


def direct_step(stacked: StackedParameters, loss_fn: StackedLoss) -> DirectStep | None:
    """The autograd-free minibatch step (:mod:`rlkit.fast.stacked_step`: the fused path's bits)
    where it applies: the numpy node, a softmax head on the fused loss (the default objective
    only), no head parameters, the layers covering theta; None elsewhere (autograd through the nodes)."""
    mlp = stacked.fused
    if (mlp is None or not mlp.numpy or not (loss_fn.fused and loss_fn.direct) or stacked.heads
            or not covers(mlp, stacked.theta.shape[1])):
        return None
    return DirectStep(mlp, stacked.theta.grad, loss_fn.hp)  # type: ignore[arg-type]


def _gradient(stacked: StackedParameters, loss_fn: StackedLoss, step: DirectStep | None, mb: Batch,
              mask: torch.Tensor, all_live: bool) -> LossOutput | ObjectiveTerms:
    """Every member's loss on its minibatch rows ``mb [K, s, ...]`` and the gradient of the live
    ones' (``mask [K]``) in ``theta.grad`` (the others' rows are left to be ignored)."""
    if step is not None and mb.obs.dtype == torch.float32:  # the numpy node's dtype
        return step(mb, mask.to(stacked.theta.dtype))
    dist_params, values = stacked.forward(mb.obs)
    out = loss_fn(stacked.head_tensors(), dist_params, values, mb)
    stacked.zero_grad()
    (out.loss if all_live else torch.where(mask, out.loss, 0.0)).sum().backward()
    return out


def _orders(members: list[MemberBatch | None], running: list[bool], b: int) -> torch.Tensor:
    """``[K, b]`` each running member's shuffle of its ``b`` rows for an epoch (its own generator)."""
    return torch.stack([torch.randperm(b, generator=members[k].generator) if running[k]  # type: ignore[union-attr]
                        else torch.arange(b) for k in range(len(members))])


def stacked_epochs(stacked: StackedParameters, loss_fn: StackedLoss, members: list[MemberBatch | None],
                   hp: PPOConfig, num_minibatches: int, step: DirectStep | None = None) -> list[MemberStats | None]:
    """PPO's epochs (:func:`rlkit.core.update.ppo_epochs`, ``loss_fn``'s objective) for every member
    at once: each member shuffles with its own generator, clips its own gradient, steps its own
    Adam and stops early on its own approx_kl; None members (failed ones) are carried along
    untouched. ``step``: the autograd-free minibatch step (:func:`direct_step`) where it applies."""
    like = next(m.batch for m in members if m is not None)
    device = stacked.theta.device
    packed = torch.stack([_pack(m.batch if m is not None else like) for m in members]).to(device)
    b, running = packed.shape[1], [m is not None for m in members]
    count, orders = min(num_minibatches, b), _orders(members, running, b)
    size = b // count
    packed = _with_behaviour(stacked, loss_fn, packed, like.obs.shape[1], size, orders)
    width = packed.shape[2]
    steps: list[torch.Tensor] = []
    """``[K]`` loss, policy loss, value loss, entropy and grad norm of each minibatch step, in turn."""
    ends: list[tuple[int, torch.Tensor, torch.Tensor, int, dict[str, torch.Tensor]] | None] = [None] * len(members)
    """Per member: its steps taken, and approx_kl, clipfrac, number and objective statistics of its last epoch."""
    with warnings.catch_warnings():  # the leaves' gradients are strided views of theta.grad, by design
        warnings.filterwarnings("ignore", message="grad and param do not obey the gradient layout contract")
        for epoch in range(hp.update_epochs):
            live = [k for k, on in enumerate(running) if on]
            if not live:
                break
            orders = orders if epoch == 0 else _orders(members, running, b)
            shuffled = _unpack(packed.gather(1, orders.to(device)[:, :, None].expand(-1, -1, width)), like,
                               loss_fn.objective.needs_dist_params)
            mask, all_live = torch.tensor(running, device=device), len(live) == len(members)
            steppers = Steppers.of(members, live)
            log_ratios, extra = [], []
            for start in range(0, size * count, size):
                mb = shuffled.map(lambda field: field[:, start:start + size])
                out = _gradient(stacked, loss_fn, step, mb, mask, all_live)
                norms, steppers = clip_and_step(stacked, steppers, hp.max_grad_norm, mask, all_live)
                steps += [out.loss.detach(), out.pg_loss.detach(), out.v_loss.detach(), out.entropy.detach(), norms]
                log_ratios.append(out.log_ratio)
                if isinstance(out, ObjectiveTerms) and out.stats:
                    extra.append(out.stats)
            kl = ratio_stats(torch.cat(log_ratios, dim=1), hp.clip_coef, dim=1)
            approx_kl, own = kl.approx_kl.tolist(), mean_stats(extra)
            for k in live:
                ends[k] = (len(steps) // 5, kl.approx_kl[k], kl.clipfrac[k], epoch + 1,
                           {key: v[k] for key, v in own.items()})
                running[k] = not (hp.target_kl is not None and approx_kl[k] > hp.target_kl)
    table = torch.stack(steps).view(-1, 5, len(members)).permute(2, 0, 1).contiguous() if steps \
        else torch.zeros(len(members), 0, 5)
    return [MemberStats(table[k, :end[0]], *end[1:]) if end is not None else None  # type: ignore[arg-type]
            for k, end in enumerate(ends)]
