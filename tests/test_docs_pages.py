"""Every example in docs/ and the README runs (the pages users read are tested): Python blocks are
executed, TOML blocks are loaded and checked as configurations, console transcripts are run and
their output compared; and every link between the pages and from the README points to a file in
the repository.

A block that is not meant to run here (a GPU run, a download) is preceded by a line
``<!-- not run: the reason -->``; every other ``python``, ``toml`` and ``console`` block runs.
"""
import re
import shlex
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
README = DOCS.parent / "README.md"
_BLOCK = re.compile(r"(?:<!-- not run: (?P<why>[^\n]*?) -->\n)?```(?P<lang>[a-z]*)\n(?P<code>.*?)```", re.S)


def _all_blocks(path, lang):
    """``[(code, reason not run or None)]`` of the ``lang`` blocks of a page."""
    return [(m.group("code"), m.group("why")) for m in _BLOCK.finditer(path.read_text())
            if m.group("lang") == lang]


def _blocks(path, lang="python"):
    """The blocks of a page that are meant to run."""
    return [code for code, why in _all_blocks(path, lang) if why is None]


def _ids(p):
    return "README.md" if p == README else str(p.relative_to(DOCS))


def test_blocks_not_run_say_why():
    found = [(p, lang, why) for p in (README, *PAGES) for lang in ("python", "toml", "console")
             for _, why in _all_blocks(p, lang) if why is not None]
    assert all(len(why.split()) >= 3 for _, _, why in found), found
    assert _blocks(README) and _blocks(DOCS / "README.md")
    assert len(_blocks(DOCS / "configuration.md", "toml")) >= 4
    assert _blocks(DOCS / "user-guide.md") and _blocks(DOCS / "implemented.md")


# The user guide solves a9a's optimum with 100 clients and runs SCAFFOLD on it; the page of what is
# implemented runs a theorem check of 20000 rounds (the two took 83 s on 2 shared cores with cold
# caches): their examples run with the slow tests. The README's quickstart and the other pages run in the default suite.
SLOW_PAGES = {DOCS / "user-guide.md", DOCS / "implemented.md"}


def _page_param(page):
    return pytest.param(page, marks=pytest.mark.slow) if page in SLOW_PAGES else page


@pytest.mark.parametrize("page", [_page_param(p) for p in (README, *PAGES)], ids=_ids)
def test_examples_of_page_run(page, monkeypatch):
    from fedtheory import algorithms
    from fedtheory.registry import ALGORITHMS, PROBLEMS
    from fedtheory.theory import CASES, SPECS, THEOREMS
    from fedtheory.theory.tightness import TIGHTNESS_CASES
    algorithms()                            # the built-in algorithms are registered before the page runs
    for name in list(THEOREMS):            # a page may register its own example theorem or algorithm
        monkeypatch.setitem(THEOREMS, name, THEOREMS[name])
    before, before_algs, before_cases = set(THEOREMS), set(ALGORITHMS), set(CASES)
    for spec in SPECS.values():             # a page's lemma may join a built-in theorem's proof
        monkeypatch.setattr(spec, "proof", spec.proof)
    before_tables = [(table, set(table)) for table in (PROBLEMS, TIGHTNESS_CASES)]
    import sys
    import types
    mod = types.ModuleType(f"docs_{page.stem}")      # the page runs as a module of its own
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    ns = mod.__dict__
    try:
        for code in _blocks(page):
            exec(compile(code, str(page), "exec"), ns)
    finally:
        for name in set(THEOREMS) - before:
            THEOREMS.pop(name, None)
            SPECS.pop(name, None)
        for name in set(CASES) - before_cases:      # and its default cases
            CASES.pop(name, None)
        for name in set(ALGORITHMS) - before_algs:
            ALGORITHMS.pop(name, None)
        for table, names in before_tables:              # its problem factories, tightness configurations
            for name in set(table) - names:
                table.pop(name, None)


_TOML_PAGES = [(p, i) for p in (README, *PAGES) for i, _ in enumerate(_blocks(p, "toml"))]


@pytest.mark.parametrize("page,i", _TOML_PAGES, ids=[f"{_ids(p)}-{i}" for p, i in _TOML_PAGES])
def test_toml_examples_are_valid_configurations(page, i, data_dir, monkeypatch):
    """Each TOML block loads and passes every check of fedtheory.reporting.config.load (its problem built)."""
    from fedtheory import registry
    from fedtheory.reporting.config import load
    monkeypatch.setattr(registry, "_IMPORTED", [])      # a block's import = [...] stays in this test
    text = _blocks(page, "toml")[i]
    if "vision." in text:
        pytest.importorskip("torch")
    cfg = load(text)
    assert cfg.points()


def _console_dir(tmp):
    """The directory console transcripts run in: sweep.toml (valid), results/ (a finished sweep),
    results.txt (a file), figs/ (a directory)."""
    from fedtheory.__main__ import main
    (tmp / "sweep.toml").write_text('[problem]\nfactory = "quadratic"\nn_clients = 4\ndim = 3\n\n'
                                    '[run]\nalgorithm = "fedavg"\nrounds = 3\neval_every = 1\n')
    (tmp / "results.txt").write_text("a file\n")
    (tmp / "figs").mkdir()
    assert main(["sweep", "sweep.toml", "--out", "results", "-j", "1", "--quiet"]) == 0


def _expected(line):
    """A transcript's output line as a regular expression ('...' stands for any text)."""
    return "^" + ".*".join(re.escape(part) for part in line.split("...")) + "$"


_CONSOLE_PAGES = [(p, i) for p in (README, *PAGES) for i, _ in enumerate(_blocks(p, "console"))]


@pytest.mark.parametrize("page,i", _CONSOLE_PAGES, ids=[f"{_ids(p)}-{i}" for p, i in _CONSOLE_PAGES])
def test_console_transcripts_print_what_they_show(page, i, tmp_path, monkeypatch, capsys):
    """``$ fedtheory ARGS  # comment`` lines are run (fedtheory.__main__.main) and the lines after
    each one are its output, stdout then stderr."""
    from fedtheory import registry
    from fedtheory.__main__ import main
    monkeypatch.setattr(registry, "_IMPORTED", [])      # the transcripts run with no user module
    monkeypatch.chdir(tmp_path)
    _console_dir(tmp_path)
    capsys.readouterr()
    commands = []
    for line in _blocks(page, "console")[i].splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            assert commands, f"output before the first command: {line!r}"
            commands[-1][1].append(line)
    assert commands
    for cmd, want in commands:
        argv = shlex.split(cmd, comments=True)
        assert argv[0] == "fedtheory", cmd
        try:
            main(argv[1:])
        except SystemExit:                   # --help, --version
            pass
        cap = capsys.readouterr()
        got = (cap.out + cap.err).splitlines()
        assert len(got) == len(want), (cmd, got)
        for g, w in zip(got, want):
            assert re.match(_expected(w), g), (cmd, w, g)


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


# -- citations of the users' pages in the code -------------------------------------------------------
# The code cites the pages users read as ``docs/papers/<paper>.md, <label>[, <label> ...]`` (labels:
# a section "§4.2" or a range "§2.2-§2.4", an ambiguity/identity/case/hidden condition "A5", "P14",
# "C2", "H1", an erratum "E3" or "erratum 6", a validation run "run E6" or "run 7") and
# ``docs/baselines.md, <method>``. Every label is written in bold (``**§4.2**``) on the cited page.
ROOT = DOCS.parent
_SEC = r"§\d+(?:\.\d+)*"
_PAPER_LABEL = rf"(?:{_SEC}(?:-{_SEC})?|run E?\d+|erratum \d+|[ACEHP]\d+[a-z]?)"
_METHOD_LABEL = r"[A-Za-z][\w-]*(?: (?:/|[A-Z][\w-]*))*"
_CITATION = re.compile(r"(docs/[\w/-]+\.md), ")
_DEV_NOTES = re.compile(r"spec/|spec §|\bspec (?:[ACEHP]\d|erratum)|the spec's|\bAPI\.md|\bDESIGN\.md")


def _cited_files():
    py = [f for top in ("fedtheory", "problems", "validation") for f in sorted((ROOT / top).rglob("*.py"))]
    md = [ROOT / "README.md", *PAGES, *sorted((ROOT / "validation" / "results").rglob("*.md")),
          *sorted((ROOT / "figures").rglob("*.md"))]
    return py + md


def citations(text):
    """(page, [labels]) of every ``docs/<page>.md, <label>, <label> and <label>`` in ``text``."""
    out = []
    for m in _CITATION.finditer(text):
        page, rest = m.group(1), text[m.end():]
        pattern = _METHOD_LABEL if page == "docs/baselines.md" else _PAPER_LABEL
        labels = []
        while (lab := re.match(pattern, rest)):
            labels.append(lab.group(0))
            rest = rest[lab.end():]
            sep = re.match(r", | and ", rest)
            if not sep:
                break
            rest = rest[sep.end():]
        out.append((page, labels))
    return out


def test_citation_parser_reads_lists_ranges_and_method_names():
    text = ('(docs/papers/fedspeed.md, §2.5, A5, P15) while; "docs/papers/fedsps.md, §2.3 and §2.7." '
            "docs/papers/x.md, run E4, erratum 6, Fig. 3; docs/baselines.md, Mime / MimeLite.")
    assert citations(text) == [("docs/papers/fedspeed.md", ["§2.5", "A5", "P15"]),
                               ("docs/papers/fedsps.md", ["§2.3", "§2.7"]),
                               ("docs/papers/x.md", ["run E4", "erratum 6"]),
                               ("docs/baselines.md", ["Mime / MimeLite"])]


def test_no_file_users_read_cites_the_developers_notes():
    """The spec, API.md and DESIGN.md are development notes users never see: neither the code nor
    the pages and result READMEs cite them."""
    found = [f"{f.relative_to(ROOT)}:{i}: {line.strip()}" for f in _cited_files()
             for i, line in enumerate(f.read_text().splitlines(), 1) if _DEV_NOTES.search(line)]
    assert not found, "\n".join(found)


def test_every_label_cited_in_the_code_is_explained_on_its_page():
    seen, missing = 0, []
    for f in _cited_files():
        for page, labels in citations(f.read_text()):
            where = f"{f.relative_to(ROOT)} -> {page}"
            if not (ROOT / page).exists():
                missing.append(f"{where}: no such page")
                continue
            if not labels:
                missing.append(f"{where}: a citation without a label")
            text = (ROOT / page).read_text()
            for label in labels:
                for part in (label.split("-") if label.startswith("§") else [label]):
                    seen += 1
                    if f"**{part}**" not in text:
                        missing.append(f"{where}: **{part}** is not on the page")
    pages = {p for f in _cited_files() for p in re.findall(r"docs/[\w/-]+\.md", f.read_text())}
    missing += [f"{p}: no such page" for p in sorted(pages) if not (ROOT / p).exists()]
    assert not missing, "\n".join(missing)
    assert seen > 200                        # the scan found the citations (about 280 labels)


def test_reference_strings_cite_existing_docs_pages():
    """The ``reference`` of every registered algorithm and theorem (what ``fedtheory describe``
    prints) and the theorems' statements and variant descriptions cite no development notes, and
    every algorithm and theorem reference names a page users have."""
    from fedtheory import algorithms
    from fedtheory.registry import ALGORITHMS
    from fedtheory.theory import SPECS
    algorithms()
    texts = {f"algorithm {n}": cls.reference for n, cls in ALGORITHMS.items()}
    for name, spec in SPECS.items():
        texts[f"theorem {name}"] = spec.reference
        texts[f"theorem {name} statement"] = spec.statement
        texts.update({f"theorem {name} variant {v}": var.description for v, var in spec.variants.items()})
    bad = [k for k, t in texts.items() if _DEV_NOTES.search(t)]
    assert not bad, bad
    refs = {k: t for k, t in texts.items() if k.startswith("algorithm") or k.count(" ") == 1}
    uncited = [k for k, t in refs.items() if not citations(t)]
    assert not uncited, uncited


@pytest.mark.parametrize("name", ["fedspeed", "fedadmm", "fedsps.theorem_3b", "feddeper.theorem_1",
                                  "pfedfbe.theorem_1"])
def test_describe_cites_the_docs_pages_not_the_spec(name, capsys):
    from fedtheory.__main__ import main
    assert main(["describe", name]) == 0
    out = capsys.readouterr().out
    assert "spec/" not in out and "spec §" not in out
    assert "docs/papers/" in out or "docs/baselines.md" in out


# -- the project speaks for itself ------------------------------------------------------------------
# The words of a development tracker ("issue" followed by a number, a number in parentheses after a
# hash sign, "PR" or "fixes" with a hash-number) mean nothing to users: the code, tests, benchmarks,
# docs and result READMEs state the fact, measurement or reason instead. The papers' own numbering
# (Theorem 4.4, eq. (19)) and the identities' numbers on the docs pages are not tracker references.
_TRACKER = re.compile(r"\bissues?[ \t#-]*\d+|\(#\d+\)|\b(?:PR|pull request|fix(?:es|ed)?|closes)[ \t]*#\d+",
                      re.I)


def _tracked_text_files():
    import subprocess
    try:
        names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True,
                               timeout=60).stdout.decode().split("\0")
    except (OSError, subprocess.SubprocessError):         # not a git checkout (an sdist): every file
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if ".git" not in p.parts]
    out = []
    for name in filter(None, names):
        path = ROOT / name
        if path.is_file() and path.suffix in (".py", ".md", ".toml", ".cfg", ".txt", ".rst", ".tex", ".csv", ""):
            try:
                out.append((name, path.read_text(encoding="utf-8")))
            except UnicodeDecodeError:                    # a binary file
                pass
    return out


def test_tracker_pattern_finds_references_and_spares_the_papers_numbering():
    hits = ["see " + "iss" + "ue 17", "Iss" + "ue #3", "issues" + "-12", "the fix (" + "#12)", "PR " + "#4",
            "fixes " + "#9"]          # written in two parts: this file is scanned too
    spared = ["Theorem 4.4", "eq. (19)", "identity #11", "Algorithm 1, line 16", "an issue with 3 clients"]
    assert all(_TRACKER.search(t) for t in hits)
    assert not any(_TRACKER.search(t) for t in spared)


def _tracked_lines_matching(pattern):
    """``file:line: text`` of every line of a tracked text file that ``pattern`` finds."""
    files = _tracked_text_files()
    assert len(files) > 100                               # the scan saw the repository
    return [f"{name}:{i}: {line.strip()[:120]}" for name, text in files
            for i, line in enumerate(text.splitlines(), 1) if pattern.search(line)]


def test_no_tracked_file_cites_the_trackers_issue_numbers():
    found = _tracked_lines_matching(_TRACKER)
    assert not found, "\n".join(found)


# Nor do the words of the process that built the project: what a tracker's ticket asked for, the
# numbered sittings of its developers, a diary of numbered results, a log of the work. A file states
# the measurement, the requirement or the reason itself. English that merely contains the word ("an
# issue with 3 clients", "it issues a warning", pytest's scope="session") is not process talk.
_PROCESS = re.compile(
    r"\bthe\s+issue\b"                                     # the ticket: its target, what it measured
    r"|\bissue's\b|'s\s+issue\b|\bissue\s+case\b"           # the ticket's requirement, a part's ticket
    r"|\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth)\s+(?:session|results)\b"
    r"|\b(?:this|next|previous|last|earlier|later)\s+session\b"
    r"|\bwork(?:ing)?\s+sessions?\b|\bwork\s*log\b",
    re.I)


def test_process_pattern_finds_process_words_and_spares_ordinary_english():
    # each phrase kept as separate words here, joined below: this file is scanned too
    words = [("the", "iss" + "ue's", "target"), ("the", "size", "the", "iss" + "ue", "measured"),
             ("the", "torch", "backend's", "iss" + "ue"), ("Iss" + "ue", "case", "(a)"), ("Eighth", "sess" + "ion"),
             ("the", "fifth", "sess" + "ion's", "reviews"), ("third", "res" + "ults"), ("this", "sess" + "ion"),
             ("the", "work", "lo" + "g"), ("two", "working", "sess" + "ions"), ("the", "next", "sess" + "ion")]
    hits = [" ".join(w) for w in words]
    spared = ["an issue with 3 clients", "it issues a warning", "numerical issues at rounding level",
              '@pytest.fixture(scope="session")', "Popen(cmd, start_new_session=True)",
              "the same colour for the rest of the session", "the results of the first run",
              "Theorem 4.4", "logarithmic axis"]
    assert all(_PROCESS.search(t) for t in hits), [t for t in hits if not _PROCESS.search(t)]
    assert not any(_PROCESS.search(t) for t in spared), [t for t in spared if _PROCESS.search(t)]


def test_no_tracked_file_speaks_of_the_process_that_built_it():
    found = _tracked_lines_matching(_PROCESS)
    assert not found, "\n".join(found)
