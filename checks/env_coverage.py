"""Which Gymnasium env ids rlkit trains on: every registered id (Gymnasium's built-ins, rlkit's own,
plus the families whose packages are installed: ale-py, minatar, minigrid) tried with a tiny budget
(one env, 128 steps, one evaluation episode of at most 200 steps), each in this process, one after
another. An id runs, or is refused with rlkit's one-line reason. A family with a wrapper stack is
tried under it, as its users run it: ALE ids under ``atari`` (only the ``ALE/*-v5`` ids; ale-py's
v0/v4/NoFrameskip ids are the same games under older settings), MiniGrid and BabyAI under
``minigrid``.

    python checks/env_coverage.py                     # every id
    python checks/env_coverage.py --ids FrozenLake-v1 Taxi-v4

Exit status 1 when an id crashes (an error that is not rlkit's one-line refusal).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
import warnings

from rlkit.ablation.measurements import ExtendList, write_section


def family_ids() -> list[str]:
    import gymnasium as gym

    import importlib

    for module in ("ale_py", "minatar.gym", "minigrid", "rlkit_envs"):
        try:
            registered = importlib.import_module(module)
        except ImportError:
            continue
        if module in ("minatar.gym", "rlkit_envs"):
            registered.register_envs()
        else:
            gym.register_envs(registered)
    ale = [i for i in gym.registry if gym.spec(i).entry_point == "ale_py.env:AtariEnv"]
    return [i for i in gym.registry if i not in ale or (i.startswith("ALE/") and i.endswith("-v5"))]


def family_stack(env_id: str) -> str:
    """The wrapper stack a family's ids are tried under ("" none)."""
    if env_id.startswith("ALE/"):
        return "atari"
    return "minigrid" if env_id.startswith(("MiniGrid-", "BabyAI-")) else ""


def try_id(env_id: str, logdir: str) -> tuple[str, str]:
    import rlkit
    from rlkit.errors import RlkitError, one_line

    cfg = dict(env=env_id, env_wrappers=family_stack(env_id), total_steps=128, num_envs=1, num_steps=64, num_minibatches=2, update_epochs=1,
               eval_episodes=1, eval_max_steps=200, logdir=logdir, progress=False, checkpoint_every=10**9)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = rlkit.train(rlkit.TrainConfig(**cfg))
        return "runs", f"eval return {result.eval_return_mean:.1f}"
    except RlkitError as exc:
        return "refused", one_line(exc)
    except Exception as exc:  # not a one-line rlkit error: a defect to report
        return "CRASH", f"{type(exc).__name__}: {one_line(exc)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", nargs="+", action=ExtendList, default=None, help="these ids only (default: every registered id)")
    parser.add_argument("--write", default="", metavar="FILE",
                        help="markdown file whose env_coverage section the table replaces (default: print only)")
    args = parser.parse_args()
    ids = args.ids or family_ids()
    rows = []
    with tempfile.TemporaryDirectory() as logdir:
        for env_id in ids:
            status, detail = try_id(env_id, logdir)
            stack = family_stack(env_id)
            detail = f"{detail} (--env-wrappers {stack})" if stack else detail
            rows.append((env_id, status, detail.replace("|", "/")[:220]))
            print(f"{env_id}: {status} ({detail[:160]})", flush=True)
    counts = {s: sum(r[1] == s for r in rows) for s in ("runs", "refused", "CRASH")}
    lines = [f"{len(rows)} ids: {counts['runs']} run, {counts['refused']} refused with a one-line reason, "
             f"{counts['CRASH']} crashed (not a one-line error).", "",
             "| env id | outcome | detail |", "|---|---|---|"]
    lines += [f"| {i} | {s} | {d} |" for i, s, d in rows]
    header = [f"### Env coverage: every registered Gymnasium id with a tiny budget — {time.strftime('%Y-%m-%d %H:%M')}",
              f"Command: `python checks/env_coverage.py {' '.join(sys.argv[1:])}`  ",
              f"Machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} cores, "
              f"Python {platform.python_version()}\n"]
    text = "\n".join(header + lines)
    print(text)
    if args.write:
        write_section(args.write, text, "env_coverage")
    sys.exit(1 if counts["CRASH"] else 0)


if __name__ == "__main__":
    main()
