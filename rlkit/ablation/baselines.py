"""Reference implementations in a sweep: Stable-Baselines3 PPO (``sb3:ppo``), sb3-contrib TRPO
(``sb3-contrib:trpo``, the trust-region method both Outer-PPO and HP3O argue against),
sb3-contrib MaskablePPO (``sb3-contrib:maskable-ppo``, for envs with action masks) and
RecurrentPPO (``sb3-contrib:recurrent-ppo``, an LSTM policy, for ``--memory lstm``), trained on
the same env, seed and step budget as the rlkit runs, from the same config record where the two
libraries share a setting, and evaluated with rlkit's deterministic protocol
(:func:`rlkit.gym.agent.run_episodes`: greedy actions, env seeds ``seed + 10000 + i``).

They write what an rlkit run writes for the sweep: ``result.json`` (the same keys) and TensorBoard
``eval/`` scalars, with the library's own training statistics in the same event file under
``sb3/`` (SB3's names: ``sb3/train/approx_kl``, ``sb3/train/clip_fraction``,
``sb3/train/explained_variance``, ``sb3/time/fps``, ``sb3/rollout/ep_rew_mean``; SB3 averages
approx_kl and the clip fraction over every epoch where rlkit's ``losses/`` report the last, and it
writes an update's statistics after the next rollout, one rollout later than rlkit does, so the
last update's never). SB3's default log folder in the temp directory (an empty ``SB3-<time>`` per
run) is not made. They keep no checkpoints: an interrupted baseline run starts again.
"""

from __future__ import annotations

import json
import math
import time
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from rlkit.core.loop import EVAL_SEED_OFFSET
from rlkit.errors import ConfigError
from rlkit.gym.evaluation import run_episodes
from rlkit.gym.envs import check_env_id
from rlkit.gym.action_masks import env_mask
from rlkit.gym.wrappers import make_kwargs, wrap
from rlkit.io.files import write_json
from rlkit.io.logger import Logger


def _common(cfg: dict[str, Any]) -> dict[str, Any]:
    import torch

    lr = cfg["learning_rate"]
    return dict(learning_rate=_annealed(lr) if cfg["anneal_lr"] else lr, n_steps=cfg["num_steps"],
                batch_size=cfg["num_envs"] * cfg["num_steps"] // cfg["num_minibatches"], gamma=cfg["gamma"],
                gae_lambda=cfg["gae_lambda"], normalize_advantage=cfg["norm_adv"], seed=cfg["seed"], device="cpu",
                verbose=0, policy_kwargs=dict(net_arch=dict(pi=list(cfg["hidden_sizes"]), vf=list(cfg["hidden_sizes"])),
                                              activation_fn=torch.nn.ReLU if cfg.get("activation") == "relu"
                                              else torch.nn.Tanh, ortho_init=cfg.get("ortho_init", True),
                                              optimizer_kwargs=dict(eps=cfg.get("adam_eps", 1e-5))))


def _annealed(value: float) -> Any:
    """SB3's linear schedule of ``value`` (its argument: the share of training left, read after each
    rollout, so one update later than rlkit's; below 0 on a last rollout past the budget, where
    the schedule stays at 0)."""
    return lambda left: value * max(left, 0.0)


def _env_kwargs(cfg: dict[str, Any]) -> dict[str, Any]:
    """The record's ``gymnasium.make`` keyword arguments (a record without the field: none)."""
    return json.loads(cfg.get("env_kwargs") or "{}")


def _policy(space: Any) -> str:
    """SB3's policy for an observation space: ``MultiInputPolicy`` for a Dict, ``CnnPolicy`` for
    what SB3 takes as an image (uint8 frames its NatureCNN reads), ``MlpPolicy`` otherwise (a small
    grid such as MinAtar's planes is flattened, as SB3 users run it)."""
    import gymnasium as gym
    from stable_baselines3.common.preprocessing import is_image_space

    if isinstance(space, gym.spaces.Dict):
        return "MultiInputPolicy"
    if is_image_space(space) and min(space.shape[:2] if space.shape[-1] <= 4 else space.shape[1:]) >= 36:
        return "CnnPolicy"
    return "MlpPolicy"


MASKABLE = "sb3-contrib:maskable-ppo"
RECURRENT = "sb3-contrib:recurrent-ppo"


class _Masks(gym.Wrapper):
    """The env's action masks as sb3-contrib's ``action_masks()`` (read by rlkit's rules: the env's
    own ``action_masks()``, else ``info["action_mask"]`` of the last reset or step)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.info: dict[str, Any] = {}

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, self.info = self.env.reset(**kwargs)
        return obs, self.info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, self.info = self.env.step(action)
        return obs, reward, terminated, truncated, self.info

    def action_masks(self) -> np.ndarray:
        return env_mask(self.env, self.info, int(self.action_space.n))


def _wrapped(env: gym.Env, stack: str, masks: bool) -> gym.Env:
    env = wrap(env, stack, training=True)
    return _Masks(env) if masks else env


def build_model(kind: str, cfg: dict[str, Any]) -> Any:
    """The SB3 model for a run's config record (``sb3:ppo`` matches PPO's settings field by field,
    except the value loss: SB3's is always ``vloss_form="clipped-mse"``, whatever the record says)."""
    try:
        from stable_baselines3.common.env_util import make_vec_env
        from stable_baselines3.common.vec_env import VecNormalize
    except ImportError:
        raise ConfigError("baselines need the optional extra: pip install 'rlkit[baselines]'") from None
    stack = cfg.get("env_wrappers") or ""  # the run's wrapper stack, its training side on SB3's envs too
    check_env_id(cfg["env"])  # registers the id's namespace (MinAtar/, ALE/) in this process
    env = make_vec_env(cfg["env"], n_envs=cfg["num_envs"], seed=cfg["seed"],
                       env_kwargs=make_kwargs(stack, _env_kwargs(cfg)),
                       wrapper_class=partial(_wrapped, stack=stack, masks=kind == MASKABLE))
    if cfg["norm_obs"] or cfg["norm_reward"]:
        env = VecNormalize(env, norm_obs=cfg["norm_obs"], norm_reward=cfg["norm_reward"], gamma=cfg["gamma"],
                           clip_obs=10.0, clip_reward=10.0)
    policy = _policy(env.observation_space)
    clip = cfg["clip_coef"]
    if cfg.get("anneal_clip"):  # SB3 takes a schedule of the progress left, 1 -> 0, as for the lr
        clip = _annealed(clip)
    ppo = dict(n_epochs=cfg["update_epochs"], clip_range=clip,
               clip_range_vf=clip if cfg["clip_vloss"] else None, ent_coef=cfg["ent_coef"],
               vf_coef=cfg["vf_coef"], max_grad_norm=cfg["max_grad_norm"], target_kl=cfg["target_kl"], **_common(cfg))
    if kind == "sb3:ppo":
        from stable_baselines3 import PPO

        return PPO(policy, env, **ppo)
    if kind == MASKABLE:
        try:
            from sb3_contrib import MaskablePPO
        except ImportError:
            raise ConfigError(f"{kind} needs the optional extra: pip install 'rlkit[baselines]'") from None
        return MaskablePPO(policy, env, **ppo)  # PPO's settings, invalid actions masked (Huang & Ontañón 2022)
    if kind == RECURRENT:
        try:
            from sb3_contrib import RecurrentPPO
        except ImportError:
            raise ConfigError(f"{kind} needs the optional extra: pip install 'rlkit[baselines]'") from None
        # An LSTM of the record's memory_size in front of the actor's and the critic's MLPs, each its own
        # (RecurrentPPO's defaults shared_lstm=False, enable_critic_lstm=True): rlkit's --memory lstm.
        lstm = dict(lstm_hidden_size=cfg.get("memory_size", 64), n_lstm_layers=1, shared_lstm=False,
                    enable_critic_lstm=True)
        ppo["policy_kwargs"] = {**ppo["policy_kwargs"], **lstm}
        return RecurrentPPO(policy.replace("Policy", "LstmPolicy"), env, **ppo)
    try:
        from sb3_contrib import TRPO
    except ImportError:
        raise ConfigError("sb3-contrib:trpo needs the optional extra: pip install 'rlkit[baselines]'") from None
    return TRPO(policy, env, **_common(cfg))  # its own trust region (target_kl 0.01) and critic updates


def sb3_logger(logger: Logger) -> Any:
    """An SB3 logger whose one output is ``logger``: every numeric statistic SB3 records, at SB3's
    step, as ``sb3/<SB3's key>`` (booleans and text are left out)."""
    from stable_baselines3.common.logger import KVWriter
    from stable_baselines3.common.logger import Logger as SB3Logger

    class Forward(KVWriter):
        def write(self, key_values: dict[str, Any], key_excluded: dict[str, Any], step: int = 0) -> None:
            values = {f"sb3/{key}": float(value) for key, value in key_values.items()
                      if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)}
            if values:
                logger.scalars(values, step)

        def close(self) -> None:
            """The run's logger is closed by its owner."""

    return SB3Logger(folder=None, output_formats=[Forward()])


def _greedy(model: Any, kind: str) -> tuple[Any, Any]:
    """(``act(obs, action_mask=None)``: the model's deterministic action, ``start_episode()``: called
    before each evaluation episode, which zeroes RecurrentPPO's LSTM state)."""
    from stable_baselines3.common.vec_env import VecNormalize

    memory: dict[str, Any] = {"state": None, "start": True}  # RecurrentPPO's LSTM state within an episode

    def start_episode() -> None:
        memory.update(state=None, start=True)

    def act(obs: np.ndarray, action_mask: np.ndarray | None = None) -> np.ndarray:
        env = model.get_env()
        x = env.normalize_obs(obs) if isinstance(env, VecNormalize) else obs
        masks = {} if action_mask is None else {"action_masks": action_mask}
        if kind == RECURRENT:
            masks = {"state": memory["state"], "episode_start": np.array([memory["start"]])}
        action, state = model.predict(x, deterministic=True, **masks)
        memory.update(state=state, start=False)
        space = env.action_space
        if hasattr(space, "low"):
            return np.clip(action, space.low, space.high)
        return action.item() if np.ndim(action) == 0 else action  # a Discrete action as a Python int (dict-keyed envs)

    return act, start_episode


def train_baseline(kind: str, cfg: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """Train and evaluate one baseline run; returns (and writes) its ``result.json``."""
    from stable_baselines3.common.callbacks import BaseCallback

    model = build_model(kind, cfg)
    # A baseline keeps no checkpoints: a stopped one starts again from step 0, and its new event file
    # tells TensorBoard to drop the earlier attempt's events (the file itself stays on disk).
    restarted = any(run_dir.glob("events.out.tfevents.*"))
    logger = Logger(str(run_dir), purge_step=0 if restarted else None)
    logger.hparams({"variant": kind, **{k: cfg[k] for k in cfg.get("hparams", ()) if k in cfg}})  # the sweep's fields
    model.set_logger(sb3_logger(logger))
    history: list[tuple[int, float, float]] = []
    seconds: list[float] = []
    clock = {"start": time.perf_counter(), "eval": 0.0}

    act, start_episode = _greedy(model, kind)

    def evaluate(step: int) -> None:
        start = time.perf_counter()
        seconds.append(start - clock["start"] - clock["eval"])  # training time so far
        result = run_episodes(act, cfg["env"], cfg["eval_episodes"], cfg["seed"] + EVAL_SEED_OFFSET,
                              cfg["eval_max_steps"] or None, env_kwargs=_env_kwargs(cfg), masked=kind == MASKABLE,
                              wrappers=cfg.get("env_wrappers") or "", start_episode=start_episode)
        clock["eval"] += time.perf_counter() - start
        history.append((step, result.mean, result.std))
        logger.scalars({"eval/return_mean": result.mean, "eval/return_std": result.std}, step)

    class Periodic(BaseCallback):
        def _on_step(self) -> bool:
            every, n = cfg["eval_every"], self.num_timesteps
            if every and cfg["eval_episodes"] and n // every > (n - model.n_envs) // every and n < cfg["total_steps"]:
                evaluate(n)
            return True

    model.learn(total_timesteps=cfg["total_steps"], callback=Periodic())
    train_seconds = time.perf_counter() - clock["start"] - clock["eval"]
    steps = int(model.num_timesteps)
    if cfg["eval_episodes"]:
        evaluate(steps)
    logger.close()
    mean, std = (history[-1][1], history[-1][2]) if history else (math.nan, math.nan)
    result = {"env": cfg["env"], "seed": cfg["seed"], "total_steps": steps, "steps_per_second": steps / train_seconds,
              "eval_return_mean": None if math.isnan(mean) else mean, "eval_return_std": None if math.isnan(std) else std,
              "run_dir": str(run_dir), "variant": kind, "updates": steps // (cfg["num_envs"] * cfg["num_steps"]),
              "eval_history": history, "eval_seconds": seconds}
    write_json(run_dir / "result.json", result)
    return result
