"""List flags of rlkit and of its measuring scripts extend when given twice (``--seeds 1 2 --seeds 3``
is three seeds), as ``rlkit train --preset`` does, rather than keeping the last list alone."""

import argparse
from pathlib import Path

from rlkit.ablation.measurements import ExtendList

ROOT = Path(__file__).parents[2]


def test_a_repeated_list_flag_extends_and_its_default_stands_only_when_it_is_not_given():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", nargs="+", type=int, action=ExtendList, default=[1, 2, 3])
    parser.add_argument("--envs", nargs="+", action=ExtendList, default=["a"], choices=["a", "b", "c"])
    assert vars(parser.parse_args([])) == {"seeds": [1, 2, 3], "envs": ["a"]}
    assert parser.parse_args(["--seeds", "4", "--seeds", "5", "6"]).seeds == [4, 5, 6]
    assert parser.parse_args(["--envs", "b", "--envs", "c"]).envs == ["b", "c"]


def test_every_list_flag_of_rlkit_and_the_scripts_names_how_a_repetition_adds_up():
    """A ``nargs`` flag without an action keeps only the last of its repetitions."""
    files = [*ROOT.glob("benchmarks/*.py"), *ROOT.glob("checks/*.py"), *ROOT.glob("experiments/**/*.py"),
             *ROOT.glob("rlkit/**/*.py"), ROOT / "rlkit_launch.py"]
    lacking = [f"{path.relative_to(ROOT)}:{number}" for path in files
               for number, line in enumerate(path.read_text().splitlines(), 1)
               if "nargs=" in line and "action=" not in line]
    assert len(files) > 40 and lacking == []
