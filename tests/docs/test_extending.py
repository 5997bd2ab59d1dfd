"""docs/extending.md's variant runs as printed: its listing registered through RLKIT_VARIANTS, its
--help group, a run with its flag and one with its preset, and a sweep and report of it."""

import importlib.util
import itertools
import json

import pytest

from rlkit.errors import ConfigError
from tests.docs.recipes import ROOT, Shell, logged, recipes
from tests.docs.test_readme import SMOKE

DOC = (ROOT / "docs" / "extending.md").read_text()


def test_the_variant_of_the_extending_page_runs_in_train_sweep_and_report(tmp_path):
    listing, commands, spec, sweep = recipes(DOC)["capstep"]
    shell = Shell(tmp_path, {**SMOKE, "rlkit sweep": ["--budget", "smoke", "--out", "sweeps/cap"]})
    shell.run([listing, commands, spec, sweep])
    helped, capped, swept, reported = shell.printed
    assert "variants.cap options" in helped and "--cap-norm" in helped and "--cap-anneal" in helped
    capped, swept, reported = (json.loads(out.strip().splitlines()[-1]) for out in (capped, swept, reported))
    assert capped["run_dir"] == "runs/capped" and capped["variant"] == "cap0.1"
    events = logged(tmp_path / capped["run_dir"])
    norms, counts = ([e.value for e in events.Scalars(tag)] for tag in ("cap/update_norm", "cap/capped_updates"))
    assert len(norms) == capped["updates"] == 4
    assert counts == list(itertools.accumulate(float(n > 0.1) for n in norms))  # a step over 0.1 is capped
    newest = tmp_path / capped["run_dir"] / "checkpoints" / "update-0000004" / "state.json"
    assert json.loads(newest.read_text())["variants"]["cap"] == {"capped": counts[-1]}
    tight = (tmp_path / "sweeps" / "cap" / "runs").glob("cap-tight__*/config.json")
    configs = {json.loads(p.read_text())["update_epochs"] for p in tight}
    assert swept["done"] == swept["total"] == 3 * 2 and not swept["failed"] and configs == {8}
    assert reported["runs"] == {"done": 6} and (tmp_path / reported["report"]).is_file()


def test_the_refusal_the_page_states_is_the_listings(tmp_path):
    (tmp_path / "capstep_doc.py").write_text(recipes(DOC)["capstep"][0].text.replace("register_variant(Variant(",
                                                                                      "(Variant("))
    spec = importlib.util.spec_from_file_location("capstep_doc", tmp_path / "capstep_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    stated = DOC.split("`--cap-anneal`\nalone is refused in one line (`", 1)[1].split("`", 1)[0]
    with pytest.raises(ConfigError, match=stated):
        module.CapOptions(cap_anneal=True)
