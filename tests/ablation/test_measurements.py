"""A results file's figure sections: ``write_section`` with a key replaces what stands between that
key's markers and nothing else, adds a section the file lacks at its end, refuses a file whose
markers are broken without touching it, and without a key appends."""

import pytest

from rlkit.ablation.measurements import markers, write_section
from rlkit.errors import OutputError

README = """# Benchmarks

Text before; a mention of `<!-- bench:a -->` inside a line is not a marker.

## a
<!-- bench:a -->
### A — old
| x |
<!-- /bench:a -->

## b
<!-- bench:b -->
### B — old
<!-- /bench:b -->

Text after.
"""


def test_a_section_is_replaced_in_place_and_the_rest_stays_byte_for_byte(tmp_path):
    path = tmp_path / "README.md"
    path.write_text(README)
    write_section(path, "\n### A — new\n| y |\n| z |\n", "a")
    expected = README.replace("### A — old\n| x |\n", "### A — new\n| y |\n| z |\n")
    assert path.read_text() == expected
    write_section(path, "### A — newer", "a")  # again: replaced, not appended
    assert path.read_text() == README.replace("### A — old\n| x |\n", "### A — newer\n")
    assert path.read_text().count("<!-- bench:a -->\n") == 1


def test_a_key_without_a_section_gets_one_at_the_end(tmp_path):
    path = tmp_path / "README.md"
    path.write_text("# Benchmarks\nno final newline")
    write_section(path, "### C", "c")
    begin, end = markers("c")
    assert path.read_text() == f"# Benchmarks\nno final newline\n\n{begin}\n### C\n{end}\n"
    new = tmp_path / "new.md"
    write_section(new, "### D\n", "d")
    assert new.read_text() == "<!-- bench:d -->\n### D\n<!-- /bench:d -->\n"


@pytest.mark.parametrize("broken", [
    "<!-- bench:a -->\n### A\n",  # never closed
    "<!-- /bench:a -->\n### A\n<!-- bench:a -->\n",  # closed before it opens
    "<!-- bench:a -->\n<!-- bench:a -->\n<!-- /bench:a -->\n",  # opened twice
    "<!-- bench:a -->\n<!-- /bench:a -->\n<!-- bench:a -->\n<!-- /bench:a -->\n",  # two sections
])
def test_broken_markers_are_refused_in_one_line_and_the_file_is_untouched(tmp_path, broken):
    path = tmp_path / "README.md"
    path.write_text("# kept\n" + broken)
    with pytest.raises(OutputError) as refused:
        write_section(path, "### A — new", "a")
    assert "nothing written" in str(refused.value) and "\n" not in str(refused.value)
    assert path.read_text() == "# kept\n" + broken
    assert [p.name for p in tmp_path.iterdir()] == ["README.md"]  # no temporary file left


def test_without_a_key_the_section_is_appended(tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("# earlier\nno final newline")
    write_section(path, "\n### Section\n| 1 |\n")
    write_section(path, "### Second")
    assert path.read_text() == "# earlier\nno final newline\n### Section\n| 1 |\n### Second\n"
