"""Hostile-input count: run the robustness suite (tests/robustness, and the sweep harness's hostile
cases in tests/ablation/test_hostile_sweeps.py and test_reaper.py) and record how many cases were
tried, how many end as rlkit promises (one-line error, exit 2, nothing lost; or handled), and how
many defects are left.

    python checks/robustness.py            # prints the table; --write FILE puts it in FILE too

Exit status 1 when a case fails.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from rlkit.ablation.measurements import write_section

ROOT = Path(__file__).parents[1]
SUITES = ["tests/robustness", "tests/ablation/test_hostile_sweeps.py", "tests/ablation/test_reaper.py"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", default="", metavar="FILE",
                        help="markdown file whose robustness section the table replaces (default: print only)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *SUITES,
                        f"--junitxml={report}"], cwd=ROOT, check=False)
        seconds = time.perf_counter() - start
        cases = list(ET.parse(report).getroot().iter("testcase"))
    failed = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
    skipped = [c for c in cases if c.find("skipped") is not None]
    files: dict[str, list[int]] = {}
    for c in cases:
        name = c.get("classname", "").rsplit(".", 1)[-1]
        files.setdefault(name, [0, 0])[0] += 1
        files[name][1] += c in failed
    lines = [f"### Robustness (hostile input, interrupts, damaged files) — {time.strftime('%Y-%m-%d %H:%M')}",
             "Command: `python checks/robustness.py`  ",
             f"Machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} cores, "
             f"Python {platform.python_version()}; {seconds:.0f} s\n",
             "| group | cases | as promised | defects |", "|---|---|---|---|"]
    for name, (n, bad) in sorted(files.items()):
        lines.append(f"| {name} | {n} | {n - bad} | {bad} |")
    lines.append(f"| **all** | **{len(cases)}** | **{len(cases) - len(failed) - len(skipped)}** | **{len(failed)}** |")
    if skipped:
        lines.append(f"\n{len(skipped)} skipped (needs a machine without CUDA or with the LLM extras).")
    lines.append(f"\nEach case is a test in {', '.join(SUITES)}: a one-line error with exit 2 and nothing written, "
                 "or the run handled as documented (interrupt checkpoints, fallbacks, extended resumes).")
    print("\n".join(lines))
    if args.write:
        write_section(args.write, "\n".join(lines), "robustness")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
