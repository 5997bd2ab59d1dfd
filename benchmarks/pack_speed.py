"""A committed recipe end to end, run alone per seed (``--pack 1``, the pool as before) and packed
(``--pack auto``: each (variant, env)'s seeds as one population), at the same worker count.

Both sweeps start from empty directories, one after the other, nothing else running; the wall time
of each ``rlkit sweep`` command is measured, then ``rlkit report`` of each, and every variant's IQM
95% interval is set beside the committed report's (``--committed``): the statistics must overlap.

    python benchmarks/pack_speed.py                      # experiments/outer_ppo/cartpole.toml, 2 workers
    python benchmarks/pack_speed.py --spec experiments/outer_ppo/cartpole.toml --budget smoke --write ""
    python benchmarks/pack_speed.py --vector     # and a third sweep: packed, every env on CartPole's vector backend

``--vector`` runs a copy of the spec with ``env_backend = "vector"`` packed: the populations step all
members' envs as one vectorized CartPole. Its runs are other runs than the committed ones (the
vector env draws its resets otherwise), so only its statistics are comparable.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import README, WRITE_HELP, emit

ROOT = Path(__file__).parents[1]
CLI = "import sys, rlkit_launch; sys.argv[0] = 'rlkit'; sys.exit(rlkit_launch.main())"


def rlkit(*args: str) -> float:
    """Run ``rlkit ARGS`` from the repository root; returns its wall time."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", CLI, *args], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def intervals(summary: Path) -> dict[str, tuple[float, float, float]]:
    """variant -> (IQM, low, high) of a report's summary.json (one env)."""
    rows = json.loads(summary.read_text())["per_env"]
    return {r["variant"]: (r["iqm"], r["iqm_low"], r["iqm_high"]) for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", default="experiments/outer_ppo/cartpole.toml")
    parser.add_argument("--committed", default="experiments/outer_ppo/results/summary.json")
    parser.add_argument("--workers", default="2")
    parser.add_argument("--budget", default=None, help="a spec budget (smoke) for a quick look")
    parser.add_argument("--write", default=README, help=WRITE_HELP)
    parser.add_argument("--vector", action="store_true", help="also a packed sweep on the vector env backend")
    args = parser.parse_args()
    budget = ["--budget", args.budget] if args.budget else []
    out = Path(tempfile.mkdtemp(prefix="rlkit-pack-speed-"))
    seconds, stats = {}, {}
    specs = {"1": args.spec, "auto": args.spec}
    if args.vector:
        specs["vector"] = str(out / "vector.toml")
        text = Path(args.spec).read_text()
        Path(specs["vector"]).write_text(text.replace("\n[", '\nenv_backend = "vector"\n\n[', 1))
    for pack, spec in specs.items():
        sweep = out / f"pack-{pack}"
        seconds[pack] = rlkit("sweep", spec, "--out", str(sweep), "--workers", args.workers, "--pack",
                              "1" if pack == "1" else "auto", *budget)
        rlkit("report", str(sweep))
        stats[pack] = intervals(sweep / "report" / "summary.json")
        print(f"{pack}: {seconds[pack]:.0f} s", flush=True)
    committed = intervals(ROOT / args.committed) if not args.budget else {}
    lines = [f"### A recipe packed vs alone (`--pack auto` vs `--pack 1`) — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `python benchmarks/pack_speed.py {' '.join(sys.argv[1:])}` (spec {args.spec}, "
             f"{args.workers} workers{', budget ' + args.budget if args.budget else ''})  ",
             f"Machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}, sweeps one after the other\n",
             f"Wall time: `--pack 1` {seconds['1']:.0f} s, `--pack auto` {seconds['auto']:.0f} s: "
             f"{seconds['1'] / seconds['auto']:.2f}× faster packed"
             + (f"; packed on the vector backend {seconds['vector']:.0f} s: {seconds['1'] / seconds['vector']:.2f}×"
                if args.vector else "") + ".\n",
             "| variant | IQM [95% CI], alone | IQM [95% CI], packed | " + ("packed, vector | " if args.vector else "")
             + "committed | packed overlaps committed |" + (" vector overlaps |" if args.vector else ""),
             "|---|---|---|---|---|" + ("---|---|" if args.vector else "")]
    for variant in stats["1"]:
        lines.append(_row(variant, stats, committed.get(variant), args.vector))
    emit(lines, args.write, "pack_speed")


def _fmt(s: tuple[float, float, float] | None) -> str:
    return "–" if s is None else f"{s[0]:.1f} [{s[1]:.1f}, {s[2]:.1f}]"


def _overlap(s: tuple[float, float, float] | None, c: tuple[float, float, float] | None) -> str:
    return "–" if c is None or s is None else ("yes" if s[1] <= c[2] and c[1] <= s[2] else "no")


def _row(variant: str, stats: dict, c: tuple[float, float, float] | None, vector: bool) -> str:
    packed, vec = stats["auto"].get(variant), stats.get("vector", {}).get(variant)
    cells = [variant, _fmt(stats["1"][variant]), _fmt(packed)] + ([_fmt(vec)] if vector else [])
    cells += [_fmt(c), _overlap(packed, c)] + ([_overlap(vec, c)] if vector else [])
    return "| " + " | ".join(cells) + " |"


if __name__ == "__main__":
    main()
