"""Every Python example in docs/*.md runs (the pages users read are tested)."""
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(DOCS.glob("*.md"))


def _blocks(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_examples_of_page_run(page, monkeypatch):
    from fedtheory.theory import SPECS, THEOREMS
    for name in list(THEOREMS):            # a page may register its own example theorem
        monkeypatch.setitem(THEOREMS, name, THEOREMS[name])
    before = set(THEOREMS)
    ns = {"__name__": f"docs_{page.stem}"}
    try:
        for code in _blocks(page):
            exec(compile(code, str(page), "exec"), ns)
    finally:
        for name in set(THEOREMS) - before:
            THEOREMS.pop(name, None)
            SPECS.pop(name, None)


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
