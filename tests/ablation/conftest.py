"""Shared fixtures of the ablation tests."""

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.fixture
def benchmark_script(monkeypatch, capsys):
    """``script(name)``: a function running ``benchmarks/<name>.py``'s ``main()`` in this process with
    the given arguments, returning its exit code and what it printed to stdout and stderr."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))

    def script(name: str):
        module = importlib.import_module(name)

        def run(*args):
            monkeypatch.setattr(sys, "argv", [f"{name}.py", *map(str, args)])
            with pytest.raises(SystemExit) as done:
                module.main()
                sys.exit(0)
            out = capsys.readouterr()
            return done.value.code, out.out, out.err
        return run
    return script
