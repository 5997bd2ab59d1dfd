"""Do the committed sweep recipes expand to the same runs as at an earlier commit?

Expands every ``experiments/**/*.toml`` with this checkout's code and with the code of ``--base``
(a git worktree in a temporary folder, the same Python environment), and compares run names, kinds
and full run configs. Fields added since ``--base`` are reported apart: a sweep compares run
configs with such fields at their defaults, so they do not change which runs a sweep holds.

    python checks/recipes_expand.py --base HEAD~3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DUMP = """
import json, sys
from rlkit.ablation.spec import load_spec
print(json.dumps({f: [[r.name, r.kind, r.config] for r in load_spec(f).runs] for f in sys.argv[1:]}, default=str))
"""


def expand(code_dir: Path, recipes: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-c", DUMP, *recipes], capture_output=True, text=True, check=True,
                         cwd=code_dir, env={"PYTHONPATH": str(code_dir), "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="git revision to compare with")
    args = parser.parse_args()
    recipes = sorted(str(p) for p in (ROOT / "experiments").rglob("*.toml"))
    with tempfile.TemporaryDirectory() as tmp:
        base_dir = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(base_dir), args.base],
                       check=True)
        try:
            before = expand(base_dir, recipes)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_dir)], check=True)
    after = expand(ROOT, recipes)
    runs = differing = 0
    added: set[str] = set()
    for recipe in recipes:
        old, new = before[recipe], after[recipe]
        if [r[:2] for r in old] != [r[:2] for r in new]:
            raise SystemExit(f"{recipe}: the run list differs")
        for (_, _, a), (_, _, b) in zip(old, new):
            runs += 1
            added |= set(b) - set(a)
            differing += {k: v for k, v in b.items() if k in a} != a
    print(f"{len(recipes)} recipes, {runs} runs: same names and kinds; {differing} run configs differ in a field "
          f"both versions have; fields added since {args.base}: {', '.join(sorted(added)) or 'none'}")
    sys.exit(1 if differing else 0)


if __name__ == "__main__":
    main()
