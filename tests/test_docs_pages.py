"""Every Python example in docs/ runs (the pages users read are tested), and every link between the
pages and from the README points to a file in the repository."""
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(DOCS.rglob("*.md"))


def _blocks(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_examples_of_page_run(page, monkeypatch):
    from fedtheory import algorithms
    from fedtheory.registry import ALGORITHMS
    from fedtheory.theory import SPECS, THEOREMS
    algorithms()                            # the built-in algorithms are registered before the page runs
    for name in list(THEOREMS):            # a page may register its own example theorem or algorithm
        monkeypatch.setitem(THEOREMS, name, THEOREMS[name])
    before, before_algs = set(THEOREMS), set(ALGORITHMS)
    ns = {"__name__": f"docs_{page.stem}"}
    try:
        for code in _blocks(page):
            exec(compile(code, str(page), "exec"), ns)
    finally:
        for name in set(THEOREMS) - before:
            THEOREMS.pop(name, None)
            SPECS.pop(name, None)
        for name in set(ALGORITHMS) - before_algs:
            ALGORITHMS.pop(name, None)


def _links(path):
    """Relative Markdown link targets of a page (no URLs, no anchors-only)."""
    out = []
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
        target = target.split("#")[0]
        if target and not re.match(r"[a-z]+:", target):
            out.append(target)
    return out


@pytest.mark.parametrize("page", [DOCS.parent / "README.md", *PAGES], ids=lambda p: p.name)
def test_links_point_to_files_in_the_repository(page):
    missing = [t for t in _links(page) if not (page.parent / t).exists()]
    assert not missing, f"{page.name}: {missing}"


def test_docs_index_lists_every_page():
    index = (DOCS / "README.md").read_text()
    for page in PAGES:
        if page.name != "README.md":
            assert str(page.relative_to(DOCS)) in index, page


def test_theorem_page_exists_with_an_example():
    page = DOCS / "how-a-theorem-is-checked.md"
    assert page.exists() and _blocks(page)


def test_readme_names_only_files_in_the_repository():
    """Every file path the README names (in backticks, ending .md/.py/.toml) exists in the repository:
    users do not have the development notes beside it."""
    root = DOCS.parent
    text = (root / "README.md").read_text()
    paths = set(re.findall(r"`([\w./-]+\.(?:md|py|toml))`", text))
    outputs = ("verify-report/",)                  # written by the commands the README shows
    missing = sorted(p for p in paths if "/" in p and not p.startswith(outputs) and not (root / p).exists())
    assert not missing, missing
    assert "spec/" not in text and "API.md" not in text
