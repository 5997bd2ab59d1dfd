"""The layout's rules, checked on every run: no import cycles between modules, no file over
400 lines and no function over 60 lines in library code, no ``print`` in the library, no issue
numbers in its text. (The layers themselves are `lint-imports` contracts in pyproject.toml,
run by `make test`.)"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
LIBRARY = sorted([*ROOT.glob("rlkit/**/*.py"), *ROOT.glob("envs/**/*.py")])


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycles_between_modules():
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("rlkit", "rlkit_envs")
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m)} for m in graph.modules}
    assert _cycle(edges) is None, f"import cycle: {' -> '.join(_cycle(edges) or [])}"


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: str(p.relative_to(ROOT)))
def test_library_file_limits(path):
    text = path.read_text()
    assert len(text.splitlines()) <= 400, "file over 400 lines"
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            assert length <= 60, f"{node.name} is {length} lines"
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
            assert path.name == "cli.py", f"print in library code at line {node.lineno}"
    assert not re.search(r"issue #\d", text, re.IGNORECASE), "cite the paper or say what the code does"
