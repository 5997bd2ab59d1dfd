"""``RLKIT_VARIANTS`` takes ``.py`` paths as well as module names, and a module that is not on the
path is one line saying what to do."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
OTHER = """from dataclasses import dataclass
from rlkit.variants import Plug, Variant, register_variant
@dataclass(frozen=True)
class O:
    other_x: float = 1.0
    enabled = property(lambda self: self.other_x != 1.0)
    def validate(self): pass
register_variant(Variant("other", O, lambda o: "other", builders={"gym": lambda o, c: Plug()}))
"""


COMMAND = Path(sys.executable).with_name("rlkit")
"""The installed ``rlkit`` command: unlike ``python -m``, it puts no working directory on the path."""


def rlkit(cwd, plugins, *args):
    """``rlkit ARGS`` in ``cwd`` with ``RLKIT_VARIANTS=plugins`` and only rlkit's own folder on PYTHONPATH."""
    env = {**os.environ, "RLKIT_VARIANTS": plugins, "PYTHONPATH": str(ROOT)}
    return subprocess.run([str(COMMAND), *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_variant_files_by_path_plug_in(tmp_path):
    """Two files, one by a relative path and one absolute, neither folder on PYTHONPATH: their
    options are flags, and a run with one of them trains under its label."""
    (tmp_path / "lab").mkdir()
    shutil.copy(ROOT / "tests" / "variants" / "toy_variant.py", tmp_path / "lab" / "myvariant.py")
    (tmp_path / "other_variant.py").write_text(OTHER)
    plugins = f"./lab/myvariant.py, {tmp_path / 'other_variant.py'}"
    help_text = rlkit(tmp_path, plugins, "train", "--help").stdout
    assert "--toy-scale" in help_text and "--other-x" in help_text
    done = rlkit(tmp_path, plugins, "train", "--toy-scale", "0.5", "--total-steps", "512", "--num-envs", "2",
                 "--num-steps", "256", "--eval-episodes", "0", "--logdir", "runs", "--run-name", "t", "--no-progress")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1])["variant"] == "toy0.5"


def test_a_module_not_on_the_path_is_one_line_saying_so(tmp_path):
    (tmp_path / "mylab").mkdir()
    shutil.copy(ROOT / "tests" / "variants" / "toy_variant.py", tmp_path / "mylab" / "myvariant.py")
    args = ("train", "--total-steps", "512", "--logdir", "runs")
    missing = rlkit(tmp_path, "mylab.myvariant", *args)  # its folder, tmp_path, is not on the path
    assert missing.returncode == 2
    assert missing.stderr.strip() == ("rlkit: error: RLKIT_VARIANTS: no module 'mylab.myvariant' (is its folder on "
                                      "PYTHONPATH? a .py path works too)")
    no_file = rlkit(tmp_path, "./mylab/nothere.py", *args)
    assert no_file.returncode == 2
    assert no_file.stderr.strip() == ("rlkit: error: RLKIT_VARIANTS: no file './mylab/nothere.py' (a variant file is "
                                      "a .py path)")
    (tmp_path / "mylab" / "good.txt").write_text("")
    not_py = rlkit(tmp_path, "./mylab/good.txt", *args)
    assert not_py.returncode == 2
    assert not_py.stderr.strip() == ("rlkit: error: RLKIT_VARIANTS: './mylab/good.txt' is not a .py file; name a "
                                     "variant's .py file or its module")
    assert not (tmp_path / "runs").exists()


def test_a_missing_import_inside_the_module_is_not_blamed_on_the_path(tmp_path):
    (tmp_path / "needs.py").write_text("import no_such_dependency_of_the_variant\n")
    done = rlkit(tmp_path, "./needs.py", "train", "--total-steps", "512", "--logdir", "runs")
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0
    assert "cannot import variant module './needs.py': ModuleNotFoundError" in done.stderr
    assert "no_such_dependency_of_the_variant" in done.stderr and "PYTHONPATH" not in done.stderr
