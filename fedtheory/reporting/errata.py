r"""``fedtheory errata``: every documented erratum of the registered theorems, measured now.

The list is derived from the theorem specs: each :class:`~fedtheory.theory.engine.Erratum`
declared on a spec (``TheoremSpec.errata``) names the variant that corrects it. For each one,
:func:`errata` runs the smallest registered counterexample of the theorem (a case of
``fedtheory verify`` whose printed bound is expected to fail; when the theorem has none, its
smallest registered case, said so) with ``validation.verify`` for the printed and the corrected
variant, solves the exact worst case by performance estimation where the theorem has a PEP form
(``validation.tightness``; skipped with the reason otherwise), and builds a one-line replay
command. :func:`write_errata` writes the rows as ``errata.md`` and ``errata.tex`` (one booktabs
table per erratum; compiles in a plain ``article`` with ``booktabs``, ``tabularx`` and ``amsmath``).
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from ..theory.verdicts import HOLDS, NOT_APPLICABLE, VIOLATED
from .._argcheck import Bool, check_param, NoneOk, Options
from .._progress import bar as progress_bar
from ..theory import CASES, SPECS, THEOREMS, case
from ..theory.tightness import TIGHTNESS_CASES, form_of, tightness, require_pepit

#: The fields of a row of :func:`errata`, in order.
FIELDS = ("theorem", "paper", "label", "where", "variant", "printed", "corrected", "why", "case", "case_kind",
          "problem", "params", "printed_measured", "printed_bound", "printed_ratio", "printed_verdict",
          "corrected_measured", "corrected_bound", "corrected_ratio", "corrected_verdict", "worst_case",
          "pep_bound_printed", "pep_bound_corrected", "pep_config", "pep_note", "replay", "seconds", "level",
          "separated", "why_not")

#: What a row says when its erratum declares no reason and no computation separates it.
NOT_SEPARATED = ("no registered case separates them yet: the printed form holds on every case registered for "
                 "this theorem (a loose step elsewhere in the proof absorbs the error at the theorem's level)")

#: Seconds for the branch and bound of a PEP with adaptive steps (``validation.tightness``'s
#: ``time_limit``; fixed-step PEPs are one SDP each).
PEP_TIME_LIMIT = 2.0


def _cost(c):
    """How much running a case costs, roughly: steps x seeds (x sampled clients when given)."""
    kw = c.kwargs
    rounds = kw.get("simulate_rounds") or kw.get("rounds", 100)
    return rounds * kw.get("local_steps", 1) * kw.get("seeds", 1) * (kw.get("clients_per_round") or 1)


def smallest_case(name, quick=True):
    """The registered case an erratum of ``name`` is shown on: the cheapest case whose printed bound
    is expected to fail (a documented counterexample), else the cheapest case of the theorem.

    Parameters
    ----------
    name : str
        A registered theorem.
    quick : bool, default True
        Choose among the cases of ``fedtheory verify --quick``.

    Returns
    -------
    (int, Case) or None
        Its position in ``CASES[name](quick)`` (what :func:`fedtheory.theory.case` takes) and the
        case; None when the theorem registers no case.

    Examples
    --------
    >>> from fedtheory.reporting.errata import smallest_case
    >>> k, c = smallest_case("fedspeed.theorem_4_4")
    >>> k, c.label.split(":")[0], c.expect["printed"]
    (1, 'C2', False)
    """
    if name not in CASES:
        return None
    cases = list(enumerate(CASES[name](quick)[0]))
    if not cases:
        return None
    bad = [(k, c) for k, c in cases if c.expect.get("printed") is False]
    return min(bad or cases, key=lambda kc: (_cost(kc[1]), kc[0]))


def _fmt_value(v):
    if isinstance(v, (bool, str)) or v is None:
        return repr(v)
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.4g}"
    a = np.asarray(v, dtype=float) if not isinstance(v, dict) else None
    if a is not None and a.size <= 6:
        return "[" + ", ".join(f"{x:.4g}" for x in a.ravel()) + "]"
    if a is not None:
        return f"array of shape {a.shape} (see the replay)"
    return repr(v)


def format_params(kwargs):
    """The parameters of a case as ``key=value`` text (numbers to 4 significant digits, short
    arrays written out, longer ones by their shape).

    Parameters
    ----------
    kwargs : dict
        The case's parameters.

    Returns
    -------
    str
        The text.

    Examples
    --------
    >>> from fedtheory.reporting.errata import format_params
    >>> format_params(dict(rounds=5, lr=0.123456, x0=[2.0, 2.0, 2.0]))
    'rounds=5, lr=0.1235, x0=[2, 2, 2]'
    """
    return ", ".join(f"{k}={_fmt_value(v)}" for k, v in kwargs.items())


def replay_command(name, index, variant, quick=True):
    """A one-line shell command that re-runs case ``index`` of theorem ``name`` for the printed
    variant and ``variant`` and prints each verdict line (measured, bound, ratio).

    Parameters
    ----------
    name : str
        The theorem or lemma.
    index : int
        The case.
    variant : str
        The variant compared with the printed one.
    quick : bool, default True
        The quick case.

    Returns
    -------
    str
        The command.

    Examples
    --------
    >>> from fedtheory.reporting.errata import replay_command
    >>> print(replay_command("feddeper.theorem_2", 0, "corrected"))  # doctest: +NORMALIZE_WHITESPACE
    python -c "import validation; from fedtheory.theory import case; c = case('feddeper.theorem_2', 0,
    quick=True); [print(validation.verify('feddeper.theorem_2', c.build(), variant=v,
    **c.kwargs).report().splitlines()[0]) for v in ('printed', 'corrected')]"
    """
    return (f"python -c \"import validation; from fedtheory.theory import case; c = case('{name}', {index}, "
            f"quick={quick}); [print(validation.verify('{name}', c.build(), variant=v, "
            f"**c.kwargs).report().splitlines()[0]) for v in ('printed', '{variant}')]\"")


def _verdict(v):
    return v.verdict() if v.applicable else f"{NOT_APPLICABLE}: {v.reason}"


def _pep(spec, erratum, solved):
    """(worst case, printed bound, corrected bound, configuration, note) of the theorem's PEP;
    ``solved`` keeps the solved PEP of each theorem (several errata of one theorem share it)."""
    nan = (math.nan, math.nan)
    if not callable(spec.pep):
        return nan, math.nan, math.nan, "", f"no PEP form: {spec.pep or 'none registered'}"
    try:
        require_pepit()
    except ImportError as e:
        return nan, math.nan, math.nan, "", f"skipped: {e}"
    if spec.name not in TIGHTNESS_CASES:
        return nan, math.nan, math.nan, "", "skipped: no tightness configuration registered (TIGHTNESS_CASES)"
    cfg = TIGHTNESS_CASES[spec.name](True)
    if spec.name not in solved:
        solved[spec.name] = (tightness(spec.name, variant="printed", threshold=False, time_limit=PEP_TIME_LIMIT,
                                       **cfg), form_of(spec.name, **cfg))
    t, form = solved[spec.name]
    corrected = float(spec.variants[erratum.variant].bound(*form.bound_args(cfg["rounds"])))
    conf = ", ".join(f"{k}={_fmt_value(v)}" for k, v in cfg.items())
    note = (f"{t.function_class}; metric {t.metric}, {t.initial}; "
            + ("lr meets the theorem's step conditions" if t.conditions_ok
               else "outside the theorem's conditions (" + "; ".join(t.failing_conditions) + ")"))
    if math.isclose(t.bound, corrected, rel_tol=1e-12):
        note += "; the printed and corrected bounds coincide at these constants"
    return tuple(t.worst_case), t.bound, corrected, conf, note


def errata(out=None, quick=True, tightness=True, theorems=None, progress=None):
    r"""Every documented erratum of the registered theorems, each measured now.

    The errata are those declared on the theorem specs (``TheoremSpec.errata``, one
    :class:`~fedtheory.theory.engine.Erratum` each). For each one the smallest registered
    counterexample (:func:`smallest_case`) of the theorem, or of the lemma the erratum is in, is run
    by ``validation.verify`` for the printed variant and the erratum's corrected variant (the runs
    are shared), and where the theorem has a PEP
    form its exact worst case is solved by ``validation.tightness`` for the theorem's
    ``fedtheory verify --tightness`` configuration.

    Parameters
    ----------
    out : str or path-like, optional
        A directory: ``errata.md`` and ``errata.tex`` are written there (:func:`write_errata`).
    quick : bool, default True
        Run the cases of ``fedtheory verify --quick`` (fewer rounds and seeds; seconds).
    tightness : bool, default True
        Solve the PEPs (needs the optional PEPit, extra ``[pep]``; without it the rows say so).
    theorems : str or list of str, optional
        Only the errata of these theorems.
    progress : bool, optional
        A progress bar on stderr (None: only on a terminal).

    Returns
    -------
    list of dict
        One row per erratum with the keys :data:`FIELDS`: the theorem, its paper reference, the
        erratum's label, ``where`` (theorem, equation), ``printed`` and ``corrected`` (LaTeX),
        ``why``; the case (``case``, ``case_kind``: ``"counterexample"``, or a sentence saying that
        none is registered and the theorem's smallest case is shown, ``problem``, ``params``);
        measured, bound, ratio and verdict of both
        variants; ``worst_case`` (the PEP's certified bracket, nan when skipped) with the printed
        and corrected bounds at the PEP's constants and ``pep_note`` (what was solved, or why
        not); ``replay`` (a one-line command reproducing the two verdicts) and ``seconds``;
        ``level``, where printed and corrected are compared: ``"theorem"``, or the lemma or
        proof step the erratum is in (:attr:`~fedtheory.theory.engine.Erratum.level`; the case,
        the verdicts and ``variant`` are then the lemma's); ``separated``, True when printed is
        VIOLATED and corrected holds there; ``why_not``, the reason when it is not ("" when it is).

    Examples
    --------
    >>> import validation
    >>> rows = validation.errata(theorems=["feddeper.theorem_2"], tightness=False)
    >>> r = rows[0]
    >>> r["label"], r["case_kind"], r["printed_verdict"], r["corrected_verdict"]
    ('§4.6', 'counterexample', 'VIOLATED', 'holds')
    >>> r["printed_ratio"] > 1 >= r["corrected_ratio"]
    True
    """
    check_param("quick", quick, [Bool()], "errata")
    check_param("tightness", tightness, [Bool()], "errata")
    if isinstance(theorems, str):
        theorems = [theorems]
    if theorems is not None:
        for t in theorems:
            check_param("theorems", t, [Options(*sorted(SPECS))], "errata")
    check_param("progress", progress, [NoneOk(), Bool()], "errata")
    work = [(name, e) for name, spec in sorted(SPECS.items()) for e in spec.errata
            if theorems is None or name in theorems]
    rows = []
    bar = progress_bar(progress, iterable=work, desc="errata", unit="erratum")
    measured, solved = {}, {}
    for name, e in bar:
        bar.set_postfix_str(name, refresh=False)
        t0 = time.perf_counter()
        spec = SPECS[name]
        row = dict(theorem=name, paper=spec.reference.split("; docs/")[0], label=e.label, where=e.where,
                   variant=e.variant, printed=e.printed, corrected=e.corrected, why=e.why, level=e.level)
        at = name if e.level == "theorem" else e.level           # the theorem, or the lemma the erratum is in
        variant = e.variant if e.variant in SPECS[at].variants else SPECS[at].default_variant
        row["variant"] = variant                                  # the corrected variant compared there
        picked = smallest_case(at, quick)
        if picked is None:
            row.update(case="(no registered case)", case_kind="-", problem="-", params="-", replay="-",
                       **{f"{w}_{k}": math.nan for w in ("printed", "corrected") for k in ("measured", "bound",
                                                                                          "ratio")},
                       printed_verdict="not run", corrected_verdict="not run")
        else:
            k, c = picked
            problem = c.build()
            if (at, k) not in measured:
                measured[(at, k)] = THEOREMS[at](problem, variant="printed", **c.kwargs)
            vp = measured[(at, k)]
            vc = THEOREMS[at](problem, variant=variant, measurement=vp.details.get("measurement"), **c.kwargs)
            row.update(case=case(at, k, quick).label, case_kind="counterexample" if c.expect.get("printed") is False
                       else "no counterexample registered: the theorem's smallest case",
                       problem=f"{getattr(problem, 'name', '') or type(problem).__name__}: "
                               f"n={problem.n_clients} clients, d={problem.dim}",
                       params=format_params(c.kwargs), replay=replay_command(at, k, variant, quick))
            for w, v in (("printed", vp), ("corrected", vc)):
                row.update({f"{w}_measured": v.measured, f"{w}_bound": v.bound if v.applicable else math.nan,
                            f"{w}_ratio": v.ratio if v.applicable else math.nan, f"{w}_verdict": _verdict(v)})
        if tightness:
            wc, bp, bc, conf, note = _pep(spec, e, solved)
        else:
            wc, bp, bc, conf, note = (math.nan, math.nan), math.nan, math.nan, "", "skipped: tightness=False"
        separated = (str(row["printed_verdict"]) == VIOLATED and str(row["corrected_verdict"]) == HOLDS)
        row.update(worst_case=wc, pep_bound_printed=bp, pep_bound_corrected=bc, pep_config=conf, pep_note=note,
                   seconds=time.perf_counter() - t0, separated=separated,
                   why_not="" if separated else (e.why_not or NOT_SEPARATED))
        rows.append({f: row[f] for f in FIELDS})
    bar.close()
    if out is not None:
        write_errata(rows, out)
    return rows


# ------------------------------------------------------------------------------ rendering --
def _num(v):
    """A number to 4 significant digits, with as many more as it takes to tell it from a whole number
    it is not (a ratio of 1 + 2.2e-7 is not written "1").

    Examples
    --------
    >>> _num(0.123456), _num(1.000000224), _num(1.0), _num(float("nan"))
    ('0.1235', '1.000000224', '1', '-')
    """
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    digits, text = 4, f"{v:.4g}"
    while float(text) != v and float(text) == round(float(text)) and digits < 17:
        digits = min(digits + 3, 17)   # a whole number that the value is not: the digits that tell them apart
        text = f"{v:.{digits}g}"
    return text


def _pair(r, w):
    return f"{_num(r[f'{w}_measured'])} / {_num(r[f'{w}_bound'])} = {_num(r[f'{w}_ratio'])}"


def _worst(r):
    lo, hi = r["worst_case"]
    if math.isnan(hi):
        return None
    return (f"[{lo:.6g}, {hi:.6g}] at {r['pep_config']}; printed bound {_num(r['pep_bound_printed'])}, corrected "
            f"bound {_num(r['pep_bound_corrected'])}")


_TEX_TEXT = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
             "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
             ">": r"\textgreater{}", "|": r"\textbar{}",
             "§": r"\ensuremath{\S}"}       # math's section sign: Type 1 (the text one needs the TS1 fonts)


def tex_escape(text):
    r"""``text`` safe in LaTeX text mode: the ten specials, ``<``, ``>``, ``|`` and ``§`` (quotes stay:
    the default OT1 fonts are Type 1, and their quote glyphs read as quotes).

    Parameters
    ----------
    text : str
        Plain text.

    Returns
    -------
    str
        The escaped text.

    Examples
    --------
    >>> from fedtheory.reporting.errata import tex_escape
    >>> print(tex_escape("50% of x_1 & {y}^2 ~ §4"))
    50\% of x\_1 \& \{y\}\textasciicircum{}2 \textasciitilde{} \ensuremath{\S}4
    """
    return "".join(_TEX_TEXT.get(ch, ch) for ch in str(text))


def _md_text(text):
    return str(text).replace("|", r"\|").replace("*", r"\*").replace("_", r"\_")


def _md_math(tex):
    return "$" + tex.replace("|", r"\vert ") + "$"


def _noun(rows):
    return "erratum" if len(rows) == 1 else "errata"


def render_markdown(rows):
    """``errata.md``: a summary table, then one section per erratum (field | value, with the
    replay command as a code block).

    Parameters
    ----------
    rows : list of dict
        The errata rows.

    Returns
    -------
    str
        The Markdown.
    """
    lines = ["# Errata of the theorems checked by fedtheory", "",
             f"{len(rows)} documented {_noun(rows)}, each measured when this file was written "
             f"({time.strftime('%Y-%m-%d %H:%M:%S')}) by `validation.verify` on the smallest registered "
             "counterexample, or on its smallest registered case where it has none, as the row says (`fedtheory "
             "errata`; the list comes from the `errata` declared on the theorem specs). "
             "`measured / bound = ratio`: the theorem's left-hand side (mean over seeds) over its right-hand side; "
             "ratio > 1 means the bound is violated. The exact worst case is solved by performance estimation "
             "(`validation.tightness`) where the theorem has a PEP form.", "",
             "| # | theorem | erratum | where | printed: measured / bound | corrected: measured / bound |",
             "|---|---|---|---|---|---|"]
    for j, r in enumerate(rows, 1):
        lines.append(f"| {j} | `{r['theorem']}` | {_md_text(r['label'])} | {_md_text(r['where'])} | "
                     f"{_pair(r, 'printed')} ({r['printed_verdict']}) | "
                     f"{_pair(r, 'corrected')} ({r['corrected_verdict']}) |")
    lines.append("")
    for j, r in enumerate(rows, 1):
        lines += [f"## {j}. `{r['theorem']}`: {_md_text(r['label'])}", "", "| field | value |", "|---|---|",
                  f"| paper | {_md_text(r['paper'])} |",
                  f"| where | {_md_text(r['where'])} |",
                  f"| printed | {_md_math(r['printed'])} |",
                  f"| corrected (variant `{r['variant']}`) | {_md_math(r['corrected'])} |",
                  f"| what is wrong | {_md_text(r['why'])} |",
                  f"| case ({r['case_kind']}) | {_md_text(r['case'])} |",
                  f"| problem | {_md_text(r['problem'])} |",
                  f"| parameters | {_md_text(r['params'])} |",
                  f"| printed: measured / bound | {_pair(r, 'printed')}: {_md_text(r['printed_verdict'])} |",
                  f"| corrected: measured / bound | {_pair(r, 'corrected')}: {_md_text(r['corrected_verdict'])} |",
                  f"| compared at | {_md_text(r['level'])}: "
                  + ("separated (printed fails, corrected holds)" if r["separated"]
                     else f"not separated: {_md_text(r['why_not'])}") + " |",
                  f"| exact worst case (PEP) | {_md_text(_worst(r) or '-')} |",
                  f"| PEP note | {_md_text(r['pep_note'])} |", "",
                  "Replay:", "", "```sh", r["replay"], "```", ""]
    return "\n".join(lines)


def render_tex(rows):
    r"""``errata.tex``: a complete document (``article`` with ``booktabs``, ``tabularx``, ``amsmath``, ``geometry``),
    one two-column table per erratum with booktabs rules.

    Parameters
    ----------
    rows : list of dict
        The errata rows.

    Returns
    -------
    str
        The LaTeX document.
    """
    out = [r"\documentclass{article}", r"\usepackage{amsmath,amssymb}",
           r"\usepackage{booktabs}", r"\usepackage{tabularx}", r"\usepackage[margin=2cm]{geometry}", "",
           r"\begin{document}", r"\section*{Errata of the theorems checked by fedtheory}",
           tex_escape(f"{len(rows)} documented {_noun(rows)}, each measured when this file was written "
                      f"({time.strftime('%Y-%m-%d %H:%M:%S')}) by validation.verify on the smallest registered "
                      "counterexample, or on its smallest registered case where it has none, as the table says "
                      "(fedtheory errata). measured / bound = ratio: the theorem's left-hand side "
                      "(mean over seeds) over its right-hand side; a ratio above 1 means the bound is violated. "
                      "The exact worst case is solved by performance estimation (validation.tightness) where the "
                      "theorem has a PEP form."), ""]
    col = r">{\raggedright\arraybackslash}p{3.4cm}>{\raggedright\arraybackslash}X"

    def row(k, v):
        return f"{k} & {v} \\\\"

    def math_cell(t):       # struts: a tall first or last line of a p-cell would overlap the rows around it
        return r"\rule[-2.4ex]{0pt}{5ex}$\displaystyle " + t + r"$\rule[-2.4ex]{0pt}{2.4ex}"

    for j, r in enumerate(rows, 1):
        out += [r"\subsection*{" + tex_escape(f"{j}. {r['theorem']}: {r['label']}") + "}",
                r"\begin{footnotesize}\noindent%", r"\begin{tabularx}{\textwidth}{" + col + "}", r"\toprule",
                row(r"\textbf{field}", r"\textbf{value}"), r"\midrule",
                row("paper", tex_escape(r["paper"])),
                row("where", tex_escape(r["where"])),
                row("printed", math_cell(r["printed"])),
                row("corrected (variant " + tex_escape(r["variant"]) + ")", math_cell(r["corrected"])),
                row("what is wrong", tex_escape(r["why"])),
                row("case (" + tex_escape(r["case_kind"]) + ")", tex_escape(r["case"])),
                row("problem", tex_escape(r["problem"])),
                row("parameters", tex_escape(r["params"])),
                row("printed: measured / bound", tex_escape(f"{_pair(r, 'printed')}: {r['printed_verdict']}")),
                row("corrected: measured / bound", tex_escape(f"{_pair(r, 'corrected')}: {r['corrected_verdict']}")),
                row("compared at", tex_escape(f"{r['level']}: " + ("separated (printed fails, corrected holds)"
                                                                   if r["separated"] else
                                                                   f"not separated: {r['why_not']}"))),
                row("exact worst case (PEP)", tex_escape(_worst(r) or "-")),
                row("PEP note", tex_escape(r["pep_note"])),
                row("replay", r"{\footnotesize\ttfamily " + tex_escape(r["replay"]) + "}"),
                r"\bottomrule", r"\end{tabularx}\par", r"\end{footnotesize}", ""]
    out += [r"\end{document}", ""]
    return "\n".join(out)


def write_errata(rows, out):
    r"""Write ``errata.md`` and ``errata.tex`` into the directory ``out`` (created); return both paths.

    Parameters
    ----------
    rows : list of dict
        The rows of :func:`errata`.
    out : str or path-like
        The directory.

    Returns
    -------
    (Path, Path)
        The Markdown and LaTeX files written.

    Examples
    --------
    >>> import tempfile, validation
    >>> from fedtheory.reporting.errata import write_errata
    >>> rows = validation.errata(theorems=["feddeper.theorem_2"], tightness=False)
    >>> md, tex = write_errata(rows, tempfile.mkdtemp())
    >>> md.name, tex.read_text().count(r"\begin{tabularx}")
    ('errata.md', 1)
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    md, tex = out / "errata.md", out / "errata.tex"
    md.write_text(render_markdown(rows), encoding="utf-8")
    tex.write_text(render_tex(rows), encoding="utf-8")
    return md, tex
