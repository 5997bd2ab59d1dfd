"""Where, on this machine, a population member's bits part from the same seed's run alone.

Trains each variant's seeds as one population (K = len(seeds)), each seed as a population of one,
each member resumed alone from the population's checkpoint at update ``--cut``, and each seed as a
single run (``rlkit.train``: its own unstacked kernels, so not a member's bits); then compares
every checkpoint update by update and writes, per (variant, seed, way), the first update whose
tensors differ and which tensors. The configuration is the packed-sweep test's (CartPole, 2 envs,
128 steps, a checkpoint every update). A diagnosis, not a timing: run it on a machine whose CPU
gives a failing bit test.

    python checks/pack_bits.py --write OUT.md [--variants ppo outer-nesterov] [--seeds 1 2]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file

import rlkit
import rlkit.gym.checkpoint
from rlkit.ablation.measurements import ExtendList, cpu_model, write_section
from rlkit.gym.population import resume_population, train_population

BASE = dict(env="CartPole-v1", total_steps=8192, num_envs=2, num_steps=128, eval_every=512, eval_episodes=2,
            checkpoint_every=256, device="cpu", torch_threads=1, progress=False)


def keep_every_checkpoint() -> None:
    """Runs keep all their checkpoints (a run keeps its two newest), so updates can be compared."""
    save = rlkit.gym.checkpoint.save_checkpoint
    rlkit.gym.checkpoint.save_checkpoint = lambda *a, **k: save(*a, **{**k, "keep": 0})


def checkpoints(run_dir: Path) -> dict[str, dict[str, torch.Tensor]]:
    """Every checkpoint of a run, by its folder name (update-NNNNNN)."""
    found = sorted(p for p in (run_dir / "checkpoints").iterdir() if (p / "tensors.safetensors").is_file())
    return {p.name: load_file(str(p / "tensors.safetensors")) for p in found}


def first_difference(a: Path, b: Path) -> str:
    """The first checkpoint (in update order) where the two runs' tensors differ, and which."""
    ca, cb = checkpoints(a), checkpoints(b)
    for name in sorted(set(ca) & set(cb)):
        differ = sorted(k for k in ca[name] if k in cb[name] and not torch.equal(ca[name][k], cb[name][k]))
        if differ:
            worst = max(differ, key=lambda k: float((ca[name][k].double() - cb[name][k].double()).abs().max()))
            gap = float((ca[name][worst].double() - cb[name][worst].double()).abs().max())
            return f"{name}: {len(differ)} tensors ({', '.join(differ[:4])}{', ...' if len(differ) > 4 else ''}); " \
                   f"largest gap {gap:.3g} in {worst}"
    return f"same bits at all {len(set(ca) & set(cb))} shared checkpoints"


def cut_copy(run_dir: Path, to: Path, cut: int) -> Path:
    """A copy of a member's run directory holding only its checkpoints up to update ``cut``."""
    shutil.copytree(run_dir, to)
    for p in (to / "checkpoints").iterdir():
        if p.is_dir() and p.name.startswith("update-") and int(p.name.split("-")[1]) > cut:
            shutil.rmtree(p)
    for name in ("result.json",):
        (to / name).unlink(missing_ok=True)
    return to


def diagnose(variant: str, seeds: list[int], cut: int, root: Path) -> list[str]:
    presets = ("cartpole",) if variant == "ppo" else ("cartpole", variant)
    cfg = rlkit.preset(*presets, **BASE, logdir=str(root))
    pop = train_population(cfg.replace(run_name=f"{variant}-pop"), seeds)
    lines = []
    for seed, member in zip(seeds, pop):
        (alone,) = train_population(cfg.replace(run_name=f"{variant}-alone"), [seed])
        copy = cut_copy(Path(member.run_dir), root / f"{variant}-cut__s{seed}", cut)
        (resumed,) = resume_population([copy])
        rlkit.train(cfg.replace(seed=seed, run_name=f"{variant}-single__s{seed}"))
        single = root / f"{variant}-single__s{seed}"
        for way, other, error in (("alone from the start", alone.run_dir, alone.error),
                                  (f"resumed alone at update {cut}", resumed.run_dir, resumed.error),
                                  ("a single run (not a member: expected to differ)", single, None)):
            found = f"failed: {error}" if error else first_difference(Path(member.run_dir), Path(other))
            lines.append(f"| {variant} | {seed} | {way} | {found} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", nargs="+", action=ExtendList, default=["ppo", "outer-nesterov"],
                    help="variants to compare (each a population of --seeds)")
    ap.add_argument("--seeds", nargs="+", action=ExtendList, type=int, default=[1, 2], help="the population's seeds")
    ap.add_argument("--cut", type=int, default=12, help="the update the resumed copies continue from")
    ap.add_argument("--write", default="", metavar="FILE",
                    help="markdown file whose pack_bits section the table replaces (default: print only)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    keep_every_checkpoint()
    head = [f"Machine: {cpu_model()}, torch {torch.__version__}, "
            f"cpu capability {torch.backends.cpu.get_cpu_capability()}, K = {len(args.seeds)}", "",
            "| variant | seed | member vs | first difference |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        rows = [line for v in args.variants for line in diagnose(v, args.seeds, args.cut, Path(tmp))]
    text = "\n".join(head + rows)
    print(text)
    if args.write:
        write_section(args.write, text, "pack_bits")


if __name__ == "__main__":
    main()
