"""``validation.errata`` and ``fedtheory errata``: every erratum declared on the theorem specs is a
complete row, measured now; the replay commands reproduce it; errata.tex compiles (booktabs)."""
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import validation
from fedtheory.__main__ import main
from fedtheory.reporting.errata import FIELDS, render_tex, tex_escape
from fedtheory.exceptions import InvalidParameterError
from fedtheory.theory import CASES, SPECS, Erratum, TheoremSpec, Variant, case, register_spec

ROOT = Path(__file__).resolve().parent.parent
# one worker measures the rows once (the module's ``out``) for every test that reads them
pytestmark = pytest.mark.xdist_group("errata")

# Variants other than "printed" that correct no erratum of their own, and why. A new variant must be
# declared as an erratum on its spec (TheoremSpec.errata) or listed here.
NOT_ERRATA = {
    ("fedsps.theorem_3a", "corrected"): "the pathwise form (eq. 31) of the same theorem, not a correction",
    ("fedsps.theorem_6b", "corrected"): "the same shape check (an O-statement)",
    ("localdescent.theorem_4_1", "proof"): "the proof's own bound (45) under the printed condition",
    ("pfedfbe.theorem_1", "lemmas_corrected"): "errata 6 and 7 together",
    ("pfedfbe.theorem_1", "corrected"): "errata 6, 7 and 9 together",
    ("pfedfbe.lemma_3", "lemma3_proof"): "the proof's coefficient on a true statement (erratum 7 is at its step)",
}


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    d = tmp_path_factory.mktemp("errata")
    rows = validation.errata(out=d, progress=False)
    return d, rows


def test_every_declared_erratum_is_one_complete_row(out):
    _, rows = out
    declared = [(n, e.label) for n, s in sorted(SPECS.items()) for e in s.errata]
    assert [(r["theorem"], r["label"]) for r in rows] == declared
    assert len(rows) >= 14
    for r in rows:
        assert list(r) == list(FIELDS)
        for k in ("paper", "where", "printed", "corrected", "why", "case", "problem", "params", "replay", "pep_note"):
            assert isinstance(r[k], str) and r[k].strip(), (r["theorem"], k)
        assert math.isfinite(r["printed_measured"]) and math.isfinite(r["corrected_measured"])
        assert r["case"] in [c.label for c in CASES[_at(r)](True)[0]]
        assert r["separated"] == (r["printed_verdict"] == "VIOLATED" and r["corrected_verdict"] == "holds")
        assert bool(r["why_not"]) != r["separated"]          # a row not separated says why


def _at(row):
    """The theorem, or the lemma, at which a row compares printed and corrected."""
    return row["theorem"] if row["level"] == "theorem" else row["level"]


def test_errata_are_separated_by_a_computation_or_say_why(out):
    _, rows = out
    separated = [r for r in rows if r["separated"]]
    assert len(separated) >= 12, [(r["theorem"], r["label"]) for r in rows if not r["separated"]]
    for r in rows:
        assert r["separated"] or len(r["why_not"]) > 40, (r["theorem"], r["label"])


def test_an_erratum_in_a_lemma_is_separated_at_the_lemma():
    rows = validation.errata(theorems="fedsps.theorem_3b", tightness=False)
    (r,) = rows
    assert r["level"] == "fedsps.lemma_8" and r["separated"] and r["why_not"] == ""
    assert r["printed_ratio"] > 1 >= r["corrected_ratio"]
    # the theorem itself holds on every registered case: no theorem-level check shows this erratum
    c = case("fedsps.theorem_3b", 0)
    assert validation.verify("fedsps.theorem_3b", c.build(), variant="printed", **c.kwargs).verdict() == "holds"


def test_every_variant_beside_printed_is_an_erratum_or_says_why_not():
    for name, spec in SPECS.items():
        # a lemma's correction is declared as an erratum of its theorem, compared at the lemma (level)
        fixed = {e.variant for e in spec.errata} | {e.variant for s in SPECS.values() for e in s.errata
                                                      if e.level == name}
        for v in spec.variants:
            if v != "printed":
                assert v in fixed or (name, v) in NOT_ERRATA, f"{name} variant {v!r}: declare its Erratum"
    for name, v in NOT_ERRATA:
        assert v in SPECS[name].variants and v not in {e.variant for e in SPECS[name].errata}


def test_counterexamples_violate_the_printed_bound_inside_its_conditions(out):
    _, rows = out
    bad = [r for r in rows if r["case_kind"] == "counterexample"]
    assert {r["theorem"] for r in bad} >= {"feddeper.theorem_2", "fedspeed.theorem_4_4", "fedsps.theorem_6a",
                                           "localdescent.theorem_4_2"}
    for r in bad:
        assert r["printed_verdict"] == "VIOLATED" and r["printed_ratio"] > 1, r["theorem"]
        assert r["printed_measured"] > r["printed_bound"] > 0
        c = case(_at(r), r["case"])
        if r["variant"] in c.expect:                       # the verdict the case documents for the correction
            assert (r["corrected_verdict"] == "holds") == c.expect[r["variant"]], r["theorem"]
    e3 = next(r for r in rows if r["label"] == "E3")
    assert e3["corrected_verdict"] == "holds" and e3["corrected_ratio"] < 1 < e3["printed_ratio"]
    lemma = next(r for r in rows if r["theorem"] == "localdescent.theorem_4_2")
    assert lemma["corrected_verdict"].startswith("NOT APPLICABLE: fails Lemma B.6")   # the correction rejects it


def test_theorems_without_a_counterexample_say_so(out):
    _, rows = out
    for r in rows:
        has = any(c.expect.get("printed") is False for c in CASES[_at(r)](True)[0])
        assert (r["case_kind"] == "counterexample") == has
        if not has:
            assert r["case_kind"].startswith("no counterexample registered")


def test_worst_case_where_the_theorem_has_a_pep_and_the_reason_where_not(out):
    _, rows = out
    try:
        import PEPit  # noqa: F401
        have = True
    except ImportError:
        have = False
    for r in rows:
        lo, hi = r["worst_case"]
        if not callable(SPECS[r["theorem"]].pep):
            assert r["pep_note"].startswith("no PEP form: ") and math.isnan(hi)
        elif not have:
            assert r["pep_note"].startswith("skipped: ") and "pep" in r["pep_note"]
        else:
            assert 0 < lo <= hi * (1 + 1e-6) and r["pep_config"], r["theorem"]
            assert math.isfinite(r["pep_bound_printed"]) and math.isfinite(r["pep_bound_corrected"])
    if have:
        pep = {r["theorem"] for r in rows if not math.isnan(r["worst_case"][1])}
        assert pep == {"fedsps.theorem_3b", "fedsps.theorem_6a", "localdescent.theorem_4_1"}


# "measured" is followed by the quantity's name (which may contain digits), then the value
_LINE = re.compile(r"^(\S+) \[(\w+)\]: (holds|VIOLATED|NOT APPLICABLE|UNRESOLVED)(?:.*?\(measured (?:.*? )??"
                   r"([-+]?[0-9][-+0-9.e]*)(?:(?: \+- \S+)?, bound ([-+0-9.e]+)|[;)]))?")


def _replay_and_compare(rows):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for r in rows:
        assert r["replay"].startswith("python -c ")
        cmd = shlex.quote(sys.executable) + r["replay"][len("python"):]     # this interpreter is the user's python
        res = subprocess.run(cmd, shell=True, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert res.returncode == 0, (r["replay"], res.stderr[-2000:])
        lines = [m for m in map(_LINE.match, res.stdout.splitlines()) if m]
        assert [m.group(2) for m in lines] == ["printed", r["variant"]], res.stdout
        for m, w in zip(lines, ("printed", "corrected")):
            assert m.group(1) == _at(r)
            assert r[f"{w}_verdict"].startswith(m.group(3)), (r["theorem"], w, res.stdout)
            assert math.isclose(float(m.group(4)), r[f"{w}_measured"], rel_tol=1e-3), (r["theorem"], w)
            if m.group(5) is not None:
                assert math.isclose(float(m.group(5)), r[f"{w}_bound"], rel_tol=1e-3), (r["theorem"], w)
            else:
                assert math.isnan(r[f"{w}_bound"])


def test_one_replay_command_per_paper_runs_and_reproduces_its_row(out):
    """The first erratum of each paper, replayed by its one-line command in a fresh interpreter
    (each costs an interpreter start and a verification: all of them run with -m slow)."""
    _, rows = out
    first = {}
    for r in rows:
        first.setdefault(r["theorem"].split(".")[0], r)
    assert len(first) >= 4
    _replay_and_compare(list(first.values()))


@pytest.mark.slow
def test_each_replay_command_runs_and_reproduces_its_row(out):
    _replay_and_compare(out[1])


def _strip_math(tex):
    return re.sub(r"\$[^$]*\$", "", tex.replace(r"\$", ""))


def test_tex_structure(out):
    d, rows = out
    tex = (d / "errata.tex").read_text()
    assert tex.startswith(r"\documentclass{article}") and r"\usepackage{booktabs}" in tex
    assert tex.rstrip().endswith(r"\end{document}")
    begins, ends = re.findall(r"\\begin\{(\w+)\}", tex), re.findall(r"\\end\{(\w+)\}", tex)
    assert sorted(begins) == sorted(ends)
    stack = []
    for m in re.finditer(r"\\(begin|end)\{(\w+)\}", tex):
        if m.group(1) == "begin":
            stack.append(m.group(2))
        else:
            assert stack.pop() == m.group(2)
    assert not stack
    unescaped = re.sub(r"\\[{}]", "", tex)
    assert unescaped.count("{") == unescaped.count("}")
    tables = re.findall(r"\\begin\{tabularx\}(.*?)\\end\{tabularx\}", tex, flags=re.S)
    assert len(tables) == len(rows)
    for r, t in zip(rows, tables):
        assert t.count(r"\toprule") == t.count(r"\midrule") == t.count(r"\bottomrule") == 1
        body = t.split(r"\midrule")[1].split(r"\bottomrule")[0]
        cells = [ln.rstrip("\\ ").split(" & ", 1) for ln in body.strip().splitlines()]
        assert len(cells) == 14 and all(len(c) == 2 and c[1].strip() for c in cells), r["theorem"]
        assert tex_escape(r["theorem"]) in tex and r["printed"] in t and r["corrected"] in t
        text = _strip_math(t)
        assert not re.search(r"(?<!\\)[_^#%~]", text.replace(r"\textasciicircum{}", "").replace(
            r"\textasciitilde{}", "")), r["theorem"]


def test_tex_escape_keeps_every_special_literal():
    assert tex_escape(r"a_b & 50% #1 $x$ {y} ~ ^ \ ") == (r"a\_b \& 50\% \#1 \$x\$ \{y\} \textasciitilde{} "
                                                          r"\textasciicircum{} \textbackslash{} ")


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not on PATH")
def test_tex_compiles_with_pdflatex_and_every_table_fits(out, tmp_path):
    d, rows = out
    shutil.copy(d / "errata.tex", tmp_path / "errata.tex")
    res = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "errata.tex"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    log = (tmp_path / "errata.log").read_text(errors="replace")
    assert res.returncode == 0, log[-3000:]
    assert (tmp_path / "errata.pdf").stat().st_size > 0
    bad = re.findall(r"(?:Overfull|Underfull) \\[hv]box.*", log)
    assert not bad, bad[:5]
    if shutil.which("pdffonts"):                 # every font a vector font: no bitmap (Type 3) text in a paper
        fonts = subprocess.run(["pdffonts", "errata.pdf"], cwd=tmp_path, capture_output=True, text=True).stdout
        assert "Type 3" not in fonts, fonts


def test_markdown_has_every_erratum_and_its_replay(out):
    d, rows = out
    md = (d / "errata.md").read_text(encoding="utf-8")
    assert re.findall(r"```sh\n(.*?)\n```", md) == [r["replay"] for r in rows]
    for j, r in enumerate(rows, 1):
        assert f"## {j}. `{r['theorem']}`" in md
        assert f"${r['printed']}$" in md and f"${r['corrected']}$" in md


def test_cli_writes_both_files_and_one_line_errors(tmp_path, capsys):
    assert main(["errata", "--out", str(tmp_path / "e"), "--no-tightness", "-q"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "e" / "errata.md").exists() and (tmp_path / "e" / "errata.tex").exists()
    assert "feddeper.theorem_2 [§4.6]: printed VIOLATED" in out
    f = tmp_path / "file"
    f.write_text("")
    assert main(["errata", "--out", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a file; a directory is expected" in err


def test_errata_parameters_are_checked():
    with pytest.raises(InvalidParameterError, match="The 'theorems' parameter of errata"):
        validation.errata(theorems=["no.such"])
    with pytest.raises(InvalidParameterError, match="The 'quick' parameter of errata"):
        validation.errata(quick="yes")


def test_case_lookup_by_index_label_and_errors():
    c = case("fedspeed.theorem_4_4", "C2")
    assert c is not None and c.label.startswith("C2") and case("fedspeed.theorem_4_4", 1).label == c.label
    with pytest.raises(InvalidParameterError, match=r"The 'which' parameter of case must be an int in the range"):
        case("fedspeed.theorem_4_4", 7)
    with pytest.raises(InvalidParameterError, match="exactly one case"):
        case("fedspeed.theorem_4_4", "C")
    with pytest.raises(InvalidParameterError, match="The 'name' parameter of case"):
        case("nope", 0)


def test_an_erratum_must_name_a_corrected_variant_of_its_spec():
    spec = dict(name="example.bad_erratum", algorithm="fedavg", statement="s", setup=None, run_kwargs=None,
                measure=None, conditions=None, variants={"printed": Variant("p", None)})
    with pytest.raises(ValueError, match="names variant 'printed'"):
        register_spec(TheoremSpec(**spec, errata=(Erratum("printed", "x", "w", "a", "b", "c"),)))
    with pytest.raises(ValueError, match="names variant 'fixed'"):
        register_spec(TheoremSpec(**spec, errata=(Erratum("fixed", "x", "w", "a", "b", "c"),)))
    assert "example.bad_erratum" not in SPECS


def test_render_tex_escapes_text_fields():
    row = {f: "-" for f in FIELDS}
    row.update(theorem="a.b_c", label="§1", printed=r"x^2", corrected=r"x_1", why="50% & #", case="k~1 'q'",
               variant="corrected", replay="python -c \"print('a_b')\"", worst_case=(math.nan, math.nan),
               **{f"{w}_{k}": math.nan for w in ("printed", "corrected") for k in ("measured", "bound", "ratio")})
    tex = render_tex([row])
    assert r"50\% \& \#" in tex and r"k\textasciitilde{}1" in tex and r"a.b\_c: \ensuremath{\S}1" in tex
    assert r"$\displaystyle x^2$" in tex and r"print('a\_b')" in tex


def test_describe_lists_the_theorems_errata(capsys):
    import fedtheory as ft
    info = ft.describe("fedspeed.theorem_4_4", conditions=False)
    assert [(e["label"], e["variant"]) for e in info["errata"]] == [("E1, E2", "derived"), ("E3", "corrected")]
    assert ft.describe("fedsps.theorem_3a", conditions=False)["errata"] == []
    assert main(["describe", "fedsps.theorem_6a"]) == 0
    assert "erratum 2, Theorem 6(a), eq. (37): the drift term needs L^2" in capsys.readouterr().out


def test_without_pepit_the_worst_case_is_skipped_with_the_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "PEPit", None)           # import PEPit now raises ImportError
    (r,) = validation.errata(theorems="fedsps.theorem_6a", progress=False)
    assert r["pep_note"].startswith("skipped: validation.tightness needs the optional PEPit package")
    assert all(math.isnan(v) for v in (*r["worst_case"], r["pep_bound_printed"], r["pep_bound_corrected"]))
    assert r["printed_verdict"] == "VIOLATED"                   # the measurement does not need PEPit
