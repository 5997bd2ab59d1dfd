"""README.md and docs/ hold together: every relative link and image resolves (files and #anchors),
every page is reachable from the README, each page reads in one sitting, no page carries dates or
machine names, and every sweep spec a page shows is one `rlkit sweep` accepts."""

import re
from pathlib import Path

import pytest

from rlkit.ablation.spec import load_spec
from tests.docs.recipes import ROOT, fenced_blocks, recipes

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
PAGE_BYTES = 15 * 1024
"""A docs page reads in one sitting: at most 15 KiB."""


def prose(text: str) -> str:
    """``text`` without its fenced code blocks (a link inside code is not a link)."""
    return re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in re.findall(r"^#+ (.+)$", prose(page.read_text()), re.M)}


def links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text())) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or (anchor and (file.suffix != ".md" or anchor not in anchors(file))):
            broken.append(target)
    assert not broken, f"{page.name}: {broken}"


def test_every_docs_page_is_reachable_from_the_readme():
    seen, todo = set(), [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        if page in seen or not page.exists():
            continue
        seen.add(page)
        todo += [(page.parent / t.partition("#")[0]).resolve() for t in links(page)
                 if t.partition("#")[0].endswith(".md") and (ROOT / "docs") in (page.parent / t).resolve().parents]
    assert set(PAGES) - seen == set()


@pytest.mark.parametrize("page", PAGES[1:], ids=lambda p: p.name)
def test_each_docs_page_reads_in_one_sitting(page):
    assert len(page.read_bytes()) <= PAGE_BYTES, len(page.read_bytes())
    cells = [c.strip() for line in page.read_text().splitlines() if line.startswith("|") for c in line.split("|")]
    assert max(map(len, cells), default=0) <= 300, max(cells, key=len)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_carries_dates_or_machine_names(page):
    text = page.read_text()
    assert not re.findall(r"\b20\d\d-\d\d-\d\d\b", text)
    assert not re.findall(r"\b(EPYC|Xeon|Zen ?\d|Ryzen|AVX-?512|Core i\d|H100|H200|A100|RESULTS\.md)\b", text)


def specs():
    """The sweep specs pages show outside their recipes and listings (those are swept by their tests)."""
    for page in PAGES:
        text = page.read_text()
        run = {b.text for blocks in recipes(text).values() for b in blocks}
        run |= set(re.findall(r"<!-- listing: [^>]*-->\n```toml\n(.*?)```", text, re.S))  # run by their page's test
        for block in fenced_blocks(text):
            if block.lang == "toml" and block.text not in run:
                yield pytest.param(block.text, id=f"{page.name}:{block.text.split(chr(10))[0][:30]}")


@pytest.mark.parametrize("text", list(specs()))
def test_every_spec_a_page_shows_is_accepted(text, tmp_path):
    """With both budgets; its smoke budget is a smoke test's."""
    (tmp_path / "spec.toml").write_text(text)
    full, smoke = load_spec(str(tmp_path / "spec.toml")), load_spec(str(tmp_path / "spec.toml"), "smoke")
    assert full.runs and len(smoke.runs) <= len(full.runs)
    assert max(r.config["total_steps"] for r in smoke.runs) <= 10_000
