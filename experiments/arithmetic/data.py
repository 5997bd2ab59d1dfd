"""Arithmetic problems with known answers, for RL with a verifiable reward.

Each row is ``{"prompt": ..., "answer": ..., "kind": ...}``; the prompt asks for the number only, and
the answer is the exact result (``rlkit.rlhf.verifiers.correct_number`` scores a completion by its
last number). The train and held-out sets come from fixed seeds and share no problem.

    python experiments/arithmetic/data.py --out experiments/arithmetic/data   # train.jsonl, heldout.jsonl

Kinds: ``add1`` (one-digit + one-digit), ``add2`` (two-digit + two-digit), ``mul1`` (one-digit x
one-digit), ``mul21`` (two-digit x one-digit).
"""

from __future__ import annotations

import argparse
import json
import os
import random
from pathlib import Path

KINDS = {"add1": ((0, 9), (0, 9), "+"), "add2": ((10, 99), (10, 99), "+"), "mul1": ((2, 9), (2, 9), "*"),
         "mul21": ((10, 99), (2, 9), "*")}
INSTRUCTION = "Answer with the number only."


def problem(kind: str, rng: random.Random) -> dict:
    (lo_a, hi_a), (lo_b, hi_b), op = KINDS[kind]
    a, b = rng.randint(lo_a, hi_a), rng.randint(lo_b, hi_b)
    answer = a + b if op == "+" else a * b
    shown = "+" if op == "+" else "×"
    return {"prompt": f"What is {a} {shown} {b}? {INSTRUCTION}", "answer": answer, "kind": kind}


def problems(kind: str, n: int, seed: int, exclude: set[str] = frozenset()) -> list[dict]:
    """``n`` distinct problems of ``kind`` drawn with ``seed``, none of whose prompts is in ``exclude``."""
    rng, rows, seen = random.Random(f"{kind}:{seed}"), [], set(exclude)
    space = (KINDS[kind][0][1] - KINDS[kind][0][0] + 1) * (KINDS[kind][1][1] - KINDS[kind][1][0] + 1)
    if n > space - len(exclude):
        raise ValueError(f"{kind} has {space} problems; {n} distinct ones beside {len(exclude)} excluded are too many")
    while len(rows) < n:
        row = problem(kind, rng)
        if row["prompt"] not in seen:
            seen.add(row["prompt"])
            rows.append(row)
    return rows


def write_sets(out: Path, kind: str = "add2", train: int = 2000, heldout: int = 200) -> tuple[Path, Path]:
    """``out/train.jsonl`` (seed 1) and ``out/heldout.jsonl`` (seed 2, no train problem's prompt).
    A file that exists with these problems is kept as it is (so a write cut off by a kill completes
    on the next call); one with other contents is refused, never replaced."""
    if train < 1 or heldout < 1:
        raise SystemExit(f"--train and --heldout must be >= 1, got {train} and {heldout}")
    try:
        train_rows = problems(kind, train, seed=1)
        held_rows = problems(kind, heldout, seed=2, exclude={r["prompt"] for r in train_rows})
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    paths = out / "train.jsonl", out / "heldout.jsonl"
    texts = ["".join(json.dumps(r) + "\n" for r in rows) for rows in (train_rows, held_rows)]
    for path, text in zip(paths, texts):
        if path.exists() and (not path.is_file() or path.read_text() != text):
            raise SystemExit(f"{path} holds other problems; choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    for path, text in zip(paths, texts):
        if not path.exists():
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(text)
            os.replace(tmp, path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="experiments/arithmetic/data", help="folder for train.jsonl and heldout.jsonl")
    parser.add_argument("--kind", default="add2", choices=sorted(KINDS), help="problem kind (default: add2)")
    parser.add_argument("--train", type=int, default=2000, help="training problems (default: 2000)")
    parser.add_argument("--heldout", type=int, default=200, help="held-out problems (default: 200)")
    args = parser.parse_args()
    for path in write_sets(Path(args.out), args.kind, args.train, args.heldout):
        print(path)


if __name__ == "__main__":
    main()
