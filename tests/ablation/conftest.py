"""Shared fixtures of the ablation tests."""

import pytest

from rlkit.cli import main


@pytest.fixture
def report_tool(capsys):
    """``tool(name)``: a function running ``rlkit report NAME ARGS`` in this process, returning its
    exit code and what it printed to stdout and stderr."""

    def tool(name: str):
        def run(*args):
            code = main(["report", name, *map(str, args)])
            out = capsys.readouterr()
            return code, out.out, out.err
        return run
    return tool
