"""A population's rollout stepped as one: every member's step in ``[K, N]`` arrays.

The members' rollout buffers are rows of one ``[K, T, N, ...]`` storage
(:func:`rlkit.core.buffer.stack_buffers`), so a step of the whole population is one write per
field; the members act from one batched forward (:class:`StackedActor`), sample from their own
random streams, and step their envs in one call (:mod:`rlkit.gym.population.envs`). What keeps
running statistics (observation normalization, reward scaling) runs member by member on the
member's own rows, so each member's numbers are those of its rollout alone. A member whose envs
fail, or return what does not fit or is not finite, is failed with its single run's one-line
error; the others go on.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import gymnasium as gym
import numpy as np

from rlkit.core.buffer import stack_buffers
from rlkit.core.heads import GaussianStack, NumpyCategorical, sample_stacked_gaussians, stack_gaussians
from rlkit.core.normalization import StackedStats, normalize_stacked, scale_stacked
from rlkit.errors import RlkitError
from rlkit.gym.envs import close_envs
from rlkit.gym.policies import NumpyActor
from rlkit.gym.population.envs import EachMembersEnvs, Elsewhere, Group, SharedCartPole, StackedStep
from rlkit.gym.population.host import HostedEnvs, HostedSpec
from rlkit.gym.population.network import StackedActor
from rlkit.gym.trainer import PPOTrainer


TOGETHER = 2
"""From this many live members in a group, their normalizations and Gaussian samples run in one
numpy pass (their statistics kept stacked between steps); one alone runs member by member, which
costs less for one. Each member gets the same bits either way (tested), so the choice never changes
a member's numbers."""


class Acts(NamedTuple):
    """What the members did at one step (rows of members that did not act hold zeros)."""

    actions: np.ndarray
    """``[K, N, ...]`` samples as the buffer stores them."""
    log_probs: np.ndarray
    """``[K, N]``."""


def population_envs(members: list[PPOTrainer]) -> EachMembersEnvs | SharedCartPole:
    """The members' envs as one (for two members or more): CartPole's vectorized implementation
    shared by all (each member's own envs closed and replaced by its group) with
    ``env_backend="vector"``; with ``async_envs`` the last ``K - K // 2`` members' envs remade in one
    worker process
    (:mod:`rlkit.gym.population.host`), a group that steps there while this process acts for the
    others and steps their own envs (such members are built with in-process envs); else their own.
    The worker takes the larger half: this process also samples, normalizes and records for all."""
    cfg = members[0].cfg
    if cfg.env_backend == "vector" and len(members) > 1:
        shared = SharedCartPole(cfg.env, len(members), cfg.num_envs, cfg.env_options)
        for k, m in enumerate(members):
            close_envs(m.envs, cfg.env)
            m.envs = shared.member(k, m.episode_seed())
        return shared
    if not cfg.async_envs or len(members) < 2:
        return EachMembersEnvs([m.envs for m in members], cfg.env, cfg.num_envs)
    hosted = list(range(len(members) // 2, len(members)))
    spec = HostedSpec(cfg.env, cfg.num_envs, cfg.env_wrappers, dict(cfg.env_options),
                      [members[k].episode_seed() for k in hosted])
    host = HostedEnvs(spec, hosted)
    for k in hosted:  # the others keep their own envs, made in this process for the population
        own = members[k].envs
        members[k].envs = Elsewhere(own, host, k)
        close_envs(own, cfg.env)
    return EachMembersEnvs([m.envs for m in members], cfg.env, cfg.num_envs, host)


class StackedRollout:
    """Collects one rollout of every live member. ``fail(k, error)`` fails member ``k``;
    ``live()`` lists the members still training."""

    def __init__(self, members: list[PPOTrainer], fail: Callable[[int, BaseException], None],
                 live: Callable[[], list[int]]) -> None:
        self.members, self.fail, self.live = members, fail, live
        first = members[0]
        self.cfg, self.head = first.cfg, first.head
        self.envs = population_envs(members)
        try:
            self.store = stack_buffers([m.buffer for m in members])
        except BaseException:
            self.envs.close(abort=True)  # the env worker with it
            raise
        for k, error in (self.envs.failed_at_start if isinstance(self.envs, EachMembersEnvs) else {}).items():
            fail(k, error)
        self.categorical = NumpyCategorical() if getattr(first.head, "fused_kind", None) == "categorical" else None
        """Softmax logits: every member sampled in one pass from its own uniforms."""
        self.uniforms = np.zeros((len(members), self.cfg.num_steps, self.cfg.num_envs), np.float32)
        """``[K, T, N]``: each live member's uniforms of a whole rollout, drawn at its start in one call
        (a generator's float32 stream is the same however it is split into calls, so each step's
        row is what a single run draws at that step)."""
        space = first.agent.encoder.space
        self.box = isinstance(space, gym.spaces.Box)
        """Box observations: all members' batches encoded in one pass."""
        self.alone = len(members) == 1 and isinstance(self.envs, EachMembersEnvs) and self.envs.hosted is None
        """One member stepping its own envs in this process."""
        self.rows = {g: (StackedStats(), StackedStats()) for g in self.envs.groups}
        """Each group's observation and reward statistics, stacked from one step to the next."""
        self.gaussians: dict[Group, GaussianStack | None] = {}
        """Each group's Gaussian samplers of this rollout's snapshots, stacked."""

    def close(self, abort: bool = False) -> None:
        """The population's shared envs or env worker (``abort``: without waiting long for it)."""
        self.envs.close(abort)

    def collect(self, actors: list[NumpyActor]) -> dict[int, np.ndarray]:
        """A rollout of every live member with its snapshot ``actors[k]``; returns V of their last
        observations (members that failed on the way are left out). Each step starts every group's
        (its actions sampled, its envs set stepping) before it finishes any: the hosted group's envs
        step in their worker while this process steps and records the others', and the hosted
        group's rewards of one step are recorded during its next (its next actions need only its
        observations; each member's rewards and observations are recorded on statistics of their
        own, so the order between them changes no number)."""
        if self.alone:
            return self._collect_alone(actors[0])
        groups = self.envs.groups
        stacked = [StackedActor(actors[g.lo:g.hi]) for g in groups]
        self.gaussians = {g: stack_gaussians([a.sampler for a in actors[g.lo:g.hi]]) for g in groups} \
            if self.categorical is None else {}
        obs = np.stack([m.obs for m in self.members])
        if self.categorical is not None:
            for k in self.live():
                self.members[k].learner.rng.random(self.uniforms.shape[1:], dtype=np.float32, out=self.uniforms[k])
        deferred: tuple[int, Group, StackedStep] | None = None
        for t in range(self.cfg.num_steps):
            started = []
            for g, actor in zip(groups, stacked):
                live = self._where(g)[0]
                if live:
                    acts = self._sample(g, t, actors, actor.params(obs[g.rows]), live)
                    shape = acts.actions.shape
                    self.envs.start(g, self.head.to_env(acts.actions.reshape(-1, *shape[2:])).reshape(shape), live)
                    started.append((g, acts, live))
            if not started:
                return {}
            if deferred is not None:
                self._rewards(*deferred)
                deferred = None
            for g, acts, live in reversed(started):
                stepped = self.envs.finish(g, live)
                obs[g.rows] = self._step(t, g, obs[g.rows], acts, actors, stepped, live)
                if g.hosted:  # its rewards are recorded while its envs step again
                    deferred = (t, g, stepped)
                else:
                    self._rewards(t, g, stepped)
        if deferred is not None:
            self._rewards(*deferred)
        out = {}
        for k in self.live():
            self.members[k].obs = obs[k].copy()
            try:
                out[k] = self.members[k].end_rollout(actors[k])
            except RlkitError as exc:
                self.fail(k, exc)
        return out

    def _collect_alone(self, actor: NumpyActor) -> dict[int, np.ndarray]:
        """A population of one with its own envs collects as its single run does (its own code: the
        same numbers, none of the population's bookkeeping)."""
        m = self.members[0]
        if not self.live():
            return {}
        try:
            for t in range(self.cfg.num_steps):
                m.record_step(t, actor.act(m.obs, m.learner.rng, with_values=False), actor)
            return {0: m.end_rollout(actor)}
        except RlkitError as exc:
            self.fail(0, exc)
            return {}

    def _sample(self, g: Group, t: int, actors: list[NumpyActor], params: np.ndarray, live: list[int]) -> Acts:
        """Group ``g``'s ``live`` members' actions at step ``t`` from their ``params [G, N, out]`` rows,
        each drawn from its own random stream. A head of softmax logits samples all members in one
        pass from their uniforms of step ``t``, a diagonal Gaussian from their noise (each drawn as
        its sampler draws it); any other, member by member."""
        rows, n = params.shape[:2]
        at = [k - g.lo for k in live]
        if self.categorical is None:
            rngs = [m.learner.rng for m in self.members]
            stack = self.gaussians[g]
            if stack is not None and len(live) == rows >= TOGETHER:  # the whole group, stacked once
                return Acts(*stack.sample(params, rngs[g.lo:g.hi]))
            acts = self._blank(rows, n)
            drawn = sample_stacked_gaussians([actors[k].sampler for k in live], params[at], [rngs[k] for k in live]) \
                if len(live) >= TOGETHER else None
            if drawn is not None:
                acts.actions[at], acts.log_probs[at] = drawn.actions, drawn.log_probs
                return acts
            for k, i in zip(live, at):
                drawn = actors[k].sampler.sample(params[i], rngs[k])
                acts.actions[i], acts.log_probs[i] = drawn.actions, drawn.log_probs
            return acts
        u = self.uniforms[g.rows, t]
        if len(live) == rows:
            return Acts(*self.categorical.sample_from_uniforms(params, u))
        drawn, acts = self.categorical.sample_from_uniforms(params[at], u[at]), self._blank(rows, n)
        acts.actions[at], acts.log_probs[at] = drawn.actions, drawn.log_probs
        return acts

    def _blank(self, k: int, n: int) -> Acts:
        """Zeros for ``k`` members' ``n`` envs."""
        return Acts(np.zeros((k, n, *self.head.action_shape), self.store["actions"].dtype), np.zeros((k, n), np.float32))

    def _step(self, t: int, g: Group, obs: np.ndarray, acts: Acts, actors: list[NumpyActor], out: StackedStep,
              live: list[int]) -> np.ndarray:
        """Step ``t`` of group ``g``'s ``live`` members (as :meth:`PPOTrainer.record_step` for one,
        but for the rewards: :meth:`_rewards`): store their observations ``obs [G, N, d]`` and actions,
        fail those whose envs raised or returned what does not fit, bootstrap a time-out from the
        member's V(final observation); returns the next ``[G, N, d]``."""
        s, rows = self.store, g.rows
        s["obs"][rows, t], s["actions"][rows, t], s["log_probs"][rows, t] = obs, acts.actions, acts.log_probs
        now = set(self.live())  # a hosted member may have failed since its step began (its rewards)
        for k, error in out.errors.items():
            if k in now:
                self.fail(k, error)
        raw = self._encode(g, out.obs, [k for k in live if k in now and k not in out.errors])
        timeouts = out.truncated & ~out.terminated
        live = self._where(g)[0] if timeouts.any() else []
        for i in np.flatnonzero(timeouts.any(axis=1)) if live else ():  # bootstrap from V(final obs)
            if g.lo + i in live:
                self._bootstrap(g.lo + i, t, np.flatnonzero(timeouts[i]), out.finals[g.lo + i], actors[g.lo + i])
        return raw.astype(np.float32, copy=False) if not self.cfg.norm_obs else self._normalized(g, raw)

    def _rewards(self, t: int, g: Group, out: StackedStep) -> None:
        """Step ``t``'s rewards and episode ends of group ``g``'s live members: stored (rewards scaled
        by each member's own scaler); a member whose rewards are not finite is failed."""
        s, members, rows = self.store, self.members, g.rows
        live, at, idx = self._where(g)
        if not np.isfinite(out.rewards).all() and not np.isfinite(out.rewards[at]).all():
            for k in live:
                self._check(k, members[k].check_finite, out.rewards[k - g.lo], "rewards")
            live, at, idx = self._where(g)
        dones = out.terminated | out.truncated
        if self.cfg.norm_reward and len(live) >= TOGETHER:
            s["rewards"][idx, t] = scale_stacked([members[k].parts.rew_scaler for k in live], out.rewards[at],
                                                 dones[at], self.rows[g][1])
        elif self.cfg.norm_reward:
            for k in live:
                s["rewards"][k, t] = members[k].parts.rew_scaler(out.rewards[k - g.lo], dones[k - g.lo], update=True)
        else:
            s["rewards"][rows, t] = out.rewards
        s["raw_rewards"][rows, t], s["terminated"][rows, t], s["dones"][rows, t] = out.rewards, out.terminated, dones

    def _normalized(self, g: Group, raw: np.ndarray) -> np.ndarray:
        """Group ``g``'s next observations ``raw [G, N, d]`` normalized, each live member's by its own
        normalizer (updated); rows of others are zeros."""
        live, at, _ = self._where(g)
        norms = [self.members[k].parts.obs_norm for k in live]
        if len(live) >= TOGETHER and isinstance(at, slice):
            return normalize_stacked(norms, raw, self.rows[g][0])
        nxt = np.zeros(raw.shape, np.float32)
        if len(live) >= TOGETHER:
            nxt[at] = normalize_stacked(norms, raw[at], self.rows[g][0])
        for k, norm in zip(live, norms) if len(live) < TOGETHER else ():
            nxt[k - g.lo] = norm(raw[k - g.lo], update=True)
        return nxt

    def _where(self, g: Group) -> tuple[list[int], slice | list[int], slice | list[int]]:
        """Group ``g``'s live members, their rows in the group's arrays and in the population's
        (slices where all of them live)."""
        live = [k for k in self.live() if g.lo <= k < g.hi]
        if len(live) == g.hi - g.lo:
            return live, slice(None), g.rows
        return live, [k - g.lo for k in live], live

    def _bootstrap(self, k: int, t: int, ids: np.ndarray, finals: np.ndarray, actor: NumpyActor) -> None:
        m = self.members[k]
        try:
            final = m.parts.obs_norm(m.encode([finals[i] for i in ids], items=True), update=False)
        except RlkitError as exc:
            self.fail(k, exc)
            return
        self.store["final_obs"][k, t, ids] = final
        self.store["final_values"][k, t, ids] = actor.value(final)

    def _encode(self, g: Group, raw: np.ndarray | list, stepped: list[int]) -> np.ndarray:
        """``[G, N, d]`` encoded observations of group ``g``'s ``stepped`` members (others' rows are
        zeros); one that does not fit or is not finite fails its member with its single run's error."""
        first, n, at = self.members[0], self.cfg.num_envs, [k - g.lo for k in stepped]
        stacked = _float_rows(raw, at) if self.box and stepped else None
        if stacked is not None:
            k = stacked.shape[0]
            try:
                encoded = first.agent.encoder.batch(stacked.reshape(k * n, *stacked.shape[2:]), k * n).reshape(k, n, -1)
            except ValueError:
                encoded = None
            if encoded is not None and (np.isfinite(encoded).all() or np.isfinite(encoded[at]).all()):
                return encoded
        out = np.zeros((g.hi - g.lo, n, first.model.obs_dim), np.float64)
        for k, i in zip(stepped, at):
            encoded = self._check(k, self.members[k].encode, raw[i])
            if encoded is not None:
                out[i] = encoded
        return out

    def _check(self, k: int, fn: Callable, *args: object) -> np.ndarray | None:
        try:
            return fn(*args)
        except RlkitError as exc:
            self.fail(k, exc)
            return None


def _float_rows(raw: np.ndarray | list, stepped: list[int]) -> np.ndarray | None:
    """``raw`` as one ``[K, N, ...]`` float array (rows of members not stepped: zeros), or None
    where a stepped member's batch is not a float array of the first one's shape."""
    if isinstance(raw, np.ndarray):
        return raw if raw.dtype.kind == "f" else None
    rows = [raw[k] for k in stepped]
    first = rows[0]
    if not all(type(r) is np.ndarray and r.dtype == first.dtype and r.shape == first.shape for r in rows) \
            or first.dtype.kind != "f":
        return None
    if len(rows) == len(raw):
        return np.stack(rows)
    out = np.zeros((len(raw), *first.shape), first.dtype)
    out[stepped] = rows
    return out
