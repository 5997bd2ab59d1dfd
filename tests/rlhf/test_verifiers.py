"""Verifiable rewards (rlkit.rlhf.verifiers) and the arithmetic problems of experiments/arithmetic."""

import re

import pytest

from experiments.arithmetic.data import KINDS, problems, write_sets
from rlkit.rlhf.verifiers import correct_expression, correct_number, last_number, number_only


@pytest.mark.parametrize("text,value", [("The answer is 1,234.5.", 1234.5), ("7 + 7 = 14", 14.0), ("-3", -3.0),
                                        ("it is .5", 0.5), ("no number here", None), ("", None),
                                        ("12 apples, then 30", 30.0)])
def test_the_last_number_is_read_tolerantly(text, value):
    assert last_number(text) == value


def test_correctness_and_format_rewards():
    completions = ["The sum is 42.", "42", " 41 ", "forty-two", "42.0"]
    assert correct_number(completions, [42] * 5) == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert number_only(completions) == [0.0, 1.0, 1.0, 0.0, 1.0]
    big = ["2000000000", "2,000,000,001", "3.50", "0.1"]  # exact: no relative tolerance near 1e9
    assert correct_number(big, [2000000001, 2000000001, 3.5, 0.1]) == [0.0, 1.0, 1.0, 1.0]
    for answer in (None, [42], "forty-two"):
        with pytest.raises(ValueError, match="is not a number"):
            correct_number(["42"], [answer])
    pytest.importorskip("math_verify")
    assert correct_expression(["so x = 1/2", "$\\frac{1}{2}$", "0.4"], ["1/2"] * 3) == [1.0, 1.0, 0.0]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_problems_are_exact_distinct_seeded_and_held_out_sets_share_none(kind):
    rows = problems(kind, 30, seed=1)
    for row in rows:
        a, op, b = re.search(r"What is (\d+) ([+×]) (\d+)\?", row["prompt"]).groups()
        assert row["answer"] == (int(a) + int(b) if op == "+" else int(a) * int(b)) and row["kind"] == kind
    assert len({r["prompt"] for r in rows}) == 30 and problems(kind, 30, seed=1) == rows
    held = problems(kind, 10, seed=2, exclude={r["prompt"] for r in rows})
    assert not {r["prompt"] for r in held} & {r["prompt"] for r in rows}
    with pytest.raises(ValueError, match="too many"):
        problems(kind, 100_000, seed=1)


def test_write_sets_never_overwrites_and_completes_a_cut_off_write(tmp_path):
    train, held = write_sets(tmp_path / "d", "add1", train=50, heldout=20)
    assert len(train.read_text().splitlines()) == 50 and len(held.read_text().splitlines()) == 20
    before, held_before = train.read_text(), held.read_text()
    with pytest.raises(SystemExit, match="holds other problems"):
        write_sets(tmp_path / "d", "add1", train=10, heldout=5)
    assert train.read_text() == before
    held.unlink()  # a kill between the two files
    assert write_sets(tmp_path / "d", "add1", train=50, heldout=20) == (train, held)
    assert train.read_text() == before and held.read_text() == held_before
    for n, words in [(0, "must be >= 1"), (200, "add1 has 100 problems")]:
        with pytest.raises(SystemExit, match=words):
            write_sets(tmp_path / "e", "add1", train=n, heldout=20)
    assert not (tmp_path / "e").exists()
