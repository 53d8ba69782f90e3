"""The report of ``fedtheory verify``: the verdict table as aligned text, a terminal table of at most
120 columns with a count per verdict, and Markdown; the ratios figure; the Markdown report with its
figures (PNG, and PDF beside each); and :func:`verify_all`, which runs the default cases
(:func:`fedtheory.reporting.verification.run_cases`) and writes all of it.
"""
from __future__ import annotations

import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..theory.verdicts import is_not_applicable, is_violated, NOT_APPLICABLE, UNRESOLVED
from .verification import BEYOND_STATED, _fmt, run_cases, VACUOUS
from .. import __version__
from ..plotting import MAX_DECADES, bound_style, log_ticks, bound_vs_T, save_figure as save
from ..plotting.axes import _usable_mask
from ..theory import SPECS
from ..theory.tightness import tightness_rows, uncovered
from ..theory.verdicts import DOCUMENTED_VIOLATION, WORDS, word


def format_table(df, markdown=False):
    """The verdict table as aligned text or a Markdown pipe table.

    Parameters
    ----------
    df : pandas.DataFrame
        The verdict table.
    markdown : bool, default False
        A Markdown pipe table instead of aligned text.

    Returns
    -------
    str
        The table.
    """
    cells = [[_fmt(v) for v in row] for row in df.itertuples(index=False)]
    if markdown:
        lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
        return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in cells])
    widths = [max(len(str(h)), *(len(c[j]) for c in cells)) if cells else len(h) for j, h in enumerate(df.columns)]
    out = ["  ".join(str(h).ljust(w) for h, w in zip(df.columns, widths))]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(out)


#: The columns of the terminal table (report.md keeps every column of :data:`COLUMNS`).
TERMINAL_COLUMNS = ("theorem", "case", "variant", "measured", "bound", "ratio", "verdict")


def _shorten(text, width):
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:max(width - 3, 0)] + "..."


def terminal_table(df, width=120):
    """The verdict table for a terminal: at most ``width`` characters a line, then the count of each
    verdict (:func:`verdict_counts`).

    Only :data:`TERMINAL_COLUMNS` are shown; the case and the verdict's reason are abbreviated
    with "..." where they do not fit (report.md and verdicts.csv keep every column in full).

    Parameters
    ----------
    df : pandas.DataFrame
        The verdict table of :func:`run_cases`.
    width : int, default 120
        The longest line, in characters (at least 80).

    Returns
    -------
    str
        The table, at most 120 columns wide.

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame(dict(theorem=["a.t1"] * 2, case=["C1: " + "x" * 200] * 2, variant=["printed", "corrected"],
    ...                       measured=[2.0, 1.0], bound=[1.0, 2.0], ratio=[2.0, 0.5],
    ...                       verdict=["VIOLATED (documented counterexample)", "holds"]))
    >>> text = terminal_table(t)
    >>> max(map(len, text.splitlines())) <= 120
    True
    >>> text.splitlines()[-1]
    '2 rows: 1 holds, 1 VIOLATED (documented counterexample)'
    """
    width = max(int(width), 80)
    cols = [c for c in TERMINAL_COLUMNS if c in df.columns]
    cells = [[_fmt(getattr(r, c)) for c in cols] for r in df.itertuples(index=False)]
    widths = {c: max([len(c)] + [len(row[j]) for row in cells]) for j, c in enumerate(cols)}
    caps = {"theorem": 26, "variant": 22}             # long names abbreviated before the free text
    for c, cap in caps.items():
        if c in widths:
            widths[c] = min(widths[c], cap)
    free = [c for c in ("case", "verdict") if c in widths]
    fixed = sum(w for c, w in widths.items() if c not in free) + 2 * (len(cols) - 1)
    room = max(width - fixed, 10 * len(free))
    if free and sum(widths[c] for c in free) > room:       # share what is left: the verdict first
        if "verdict" in widths:
            widths["verdict"] = min(widths["verdict"], max(room - (widths.get("case", 0) and 20), room // 2))
        if "case" in widths:
            widths["case"] = max(room - widths.get("verdict", 0), 4)
    numeric = {"measured", "bound", "ratio"}

    def line(values):
        parts = [(_shorten(v, widths[c]).rjust(widths[c]) if c in numeric else _shorten(v, widths[c]).ljust(widths[c]))
                 for c, v in zip(cols, values)]
        return "  ".join(parts).rstrip()
    out = [line(cols), "  ".join("-" * widths[c] for c in cols)]
    out += [line(row) for row in cells]
    out.append(verdict_counts(df))
    return "\n".join(out)


def verdict_counts(df):
    """One line counting the rows of each verdict: "47 rows: 30 holds, 4 VIOLATED (documented
    counterexample), ...".

    Parameters
    ----------
    df : pandas.DataFrame
        A verdict table (its ``verdict`` column).

    Returns
    -------
    str
        The counts line.
    """
    counts = {}
    for cell in df.verdict.astype(str):
        key = DOCUMENTED_VIOLATION if cell.startswith(DOCUMENTED_VIOLATION) else (word(cell) or "other")
        counts[key] = counts.get(key, 0) + 1
    order = [w for w in (WORDS[0], WORDS[1], DOCUMENTED_VIOLATION, *WORDS[2:], "other") if w in counts]
    return f"{len(df)} rows: " + ", ".join(f"{counts[w]} {w}" for w in order)



def save_figure(fig, path, dpi=150):
    """Save a report figure as PNG at ``dpi`` (lowered where needed so that no side exceeds
    :data:`fedtheory.plotting.MAX_PIXELS`) and as PDF beside it, for papers; close it
    (:func:`fedtheory.plotting.save_figure`, the one save helper of every figure).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    path : str or Path
        The PNG's path (the PDF is written beside it).
    dpi : int, default 150
        The resolution, lowered where needed.

    Returns
    -------
    list of pathlib.Path
        The files written (the PNG and the PDF).
    """
    return save(fig, path, dpi=dpi, pdf=True)


def _case_label(case):
    """A case label as a figure shows it: in full, without file paths ("docs/papers/fedsps.md,
    §8 rescaled problem" -> "§8 rescaled problem")."""
    import re
    text = re.sub(r"(?:[\w.-]+/)+[\w.-]+\.(?:md|py|toml|csv|txt)\b,?\s*", "", str(case)).strip()
    return text or str(case)


def ratios_figure(df):
    r"""Measured left-hand side over the bound, one panel per theorem, one horizontal bar per case
    and variant.

    Each case is named in full (without file paths) above its bars; each bar is labelled with its
    variant. Bars take the neutral colour of their variant
    (:func:`fedtheory.plotting.bound_style`, as in every figure): the colour never says whether
    the bound holds. A violated bound (verdict VIOLATED) is marked by a hatch, a black edge and the
    word "violated" after its value; a ratio above 1 whose verdict is UNRESOLVED (within the
    resolution floor or the seeds' noise) says "unresolved", unhatched; the vertical line marks
    ratio 1. A theorem whose ratios span more than two decades is drawn on a logarithmic axis (at
    most about 36 decades below the largest ratio; the value of a bar further below is still
    written), else on a linear one. A row that
    is not applicable (a required condition fails) is written "n/a" with its reason instead of a
    bar; a ratio that is not a finite positive number within 1e-300..1e300 is written, not drawn.

    Parameters
    ----------
    df : pandas.DataFrame
        The verdict table of :func:`run_cases`.

    Returns
    -------
    matplotlib.figure.Figure
        About 9 inches wide, 0.2 inch per row (:func:`save_figure` keeps it under
        :data:`fedtheory.plotting.MAX_PIXELS`).

    Examples
    --------
    >>> import pandas as pd
    >>> from fedtheory.reporting.verify_report import ratios_figure
    >>> t = pd.DataFrame(dict(theorem=["a.t1"] * 3, case=["C1: x", "C1: x", "docs/papers/fedsps.md, §8: y"],
    ...                       kind="conforming", variant=["printed", "corrected", "printed"],
    ...                       ratio=[2.0, 0.5, float("nan")],
    ...                       verdict=["VIOLATED", "holds", "NOT APPLICABLE: S1 fails"]))
    >>> fig = ratios_figure(t)
    >>> [tk.get_text() for tk in fig.axes[0].get_yticklabels()]
    ['printed', 'corrected', 'printed']
    >>> [tx.get_text() for tx in fig.axes[0].texts]
    ['C1: x', '§8: y', '2  violated', '0.5', 'n/a: S1 fails']
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.transforms import blended_transform_factory
    theorems = list(dict.fromkeys(df.theorem))
    layouts = []
    for name in theorems:                      # row positions: a header row (or two) per case, then its bars
        rows = df[df.theorem == name].reset_index(drop=True)
        ys, headers, pos = [], [], 0.0
        for j, r in rows.iterrows():
            if j == 0 or str(r.case) != str(rows.case[j - 1]):
                text = "\n".join(textwrap.wrap(_case_label(r.case), 150)) or "(no label)"
                lines = text.count("\n") + 1
                headers.append((pos + 0.35 * (lines - 1), text))
                pos += 0.7 * lines + 0.35
            ys.append(pos)
            pos += 1.0
        layouts.append((name, rows, np.array(ys), headers, pos))
    units = [lay[4] for lay in layouts]
    height = 0.2 * sum(units) + 0.55 * len(theorems) + 0.9
    fig, axes = plt.subplots(len(theorems), 1, figsize=(9, height), squeeze=False, layout="constrained",
                             gridspec_kw=dict(height_ratios=[u + 1.2 for u in units]))
    variants = []
    for ax, (name, rows, ys, headers, total) in zip(axes[:, 0], layouts):
        ratio = pd.to_numeric(rows.ratio, errors="coerce").to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            ok = (_usable_mask(ratio)            # finite, positive, within 1e-300..1e300
                  & ~rows.verdict.map(is_not_applicable).to_numpy(dtype=bool))
        good = ratio[ok]
        with np.errstate(over="ignore"):
            logx = bool(good.size) and max(good.max(), 1.0) / min(good.min(), 1.0) > 100
        if logx:                                # limits before the bars: no autoscaling over the data
            top = np.log10(max(good.max(), 1.0))
            bot = max(np.log10(min(good.min(), 1.0)), top - 0.9 * MAX_DECADES)
            span = top - bot
            lo, hi = 10.0 ** (bot - 0.05 * span - 0.3), 10.0 ** (top + 0.12 * span + 0.3)
            ax.set_xscale("log")
            ax.set_xlim(lo, hi)                 # room for the value at the bar's end
        else:
            lo = 0.0
            ax.set_xlim(0, 1.25 * max(good.max() if good.size else 1.0, 1.0))
        ax.set_ylim(total - 0.5, -0.55)
        trans = blended_transform_factory(ax.transAxes, ax.transData)
        for yh, text in headers:
            ax.text(0.005, yh, text, transform=trans, va="center", fontsize=7, color="0.1",
                    bbox=dict(facecolor="white", edgecolor="none", alpha=0.85, pad=0.2), zorder=4)
        for j, r in rows.iterrows():
            if r.variant not in variants:
                variants.append(r.variant)
            if not ok[j]:
                continue
            st = bound_style(r.variant)
            verdict = str(r.verdict)
            # the verdict decides, not ratio > 1: above the bound by no more than the floor or the seeds'
            # noise is UNRESOLVED, never violated (fedtheory.theory.engine)
            violated = is_violated(verdict)
            unresolved = verdict.startswith(UNRESOLVED) and ratio[j] > 1
            ax.barh(ys[j], ratio[j], height=0.7, color=st["color"], alpha=0.85, hatch="///" if violated else None,
                    edgecolor="black" if violated else "white", lw=0.8 if violated else 0.5)
            ax.annotate(f"{ratio[j]:.3g}" + ("  violated" if violated else "  unresolved" if unresolved else ""),
                        (max(ratio[j], lo), ys[j]),
                        xytext=(3, 0), textcoords="offset points", va="center", fontsize=6.5,
                        fontweight="bold" if violated else "normal",
                        bbox=dict(facecolor="white", edgecolor="none", alpha=0.85, pad=0.3))
        for j in np.flatnonzero(~ok):
            verdict = str(rows.verdict[j])
            if is_not_applicable(verdict):
                why = verdict.removeprefix(NOT_APPLICABLE).lstrip(": ")
                text = "n/a" + (f": {textwrap.shorten(why, 90, placeholder=' ...')}" if why and why != "nan" else "")
            else:
                text = "no ratio" if np.isnan(ratio[j]) else f"ratio {ratio[j]:.3g}: not drawn"
            ax.text(0.01, ys[j], text, transform=trans, va="center", fontsize=6.5, color="0.35", style="italic")
        ax.axvline(1.0, color="k", lw=0.8)
        if logx:
            log_ticks(ax, "x")
        ax.set_yticks(ys, [str(r.variant) for r in rows.itertuples()], fontsize=7)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(True, axis="x", which="major", alpha=0.3)
        ax.set_title(name, fontsize=9, loc="left", fontweight="bold")
    axes[-1, 0].set_xlabel("measured / bound  (> 1: the bound is violated)", fontsize=8)
    handles = [Patch(color=bound_style(v)["color"], label=v) for v in variants]
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="///", label="violated (ratio > 1)"))
    fig.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 5), fontsize=7, frameon=False)
    return fig


def left_hand_side(theorem, width=40):
    """The quantity a theorem bounds, for an axis label.

    Parameters
    ----------
    theorem : str
        A registered theorem name.
    width : int
        Wrap the text at this many characters.

    Returns
    -------
    str
        The left-hand side of the theorem's registered statement ("(1/T) sum_t
        E||grad f(x^t)||^2"); "left-hand side of the theorem" for an unknown theorem or a
        statement that does not split at "<=".

    Examples
    --------
    >>> from fedtheory.reporting.verify_report import left_hand_side
    >>> left_hand_side("localdescent.theorem_4_1")
    'E[f(xbar^T) - f*]'
    >>> left_hand_side("no.such_theorem")
    'left-hand side of the theorem'
    """
    spec = SPECS.get(theorem)
    statement = getattr(spec, "statement", "") or ""
    if "<=" not in statement:
        return "left-hand side of the theorem"
    return "\n".join(textwrap.wrap(statement.split("<=")[0].strip(), width)) or "left-hand side of the theorem"


def write_report(df, studies, out, quick, seconds, extra_lines=()):
    """Markdown report and figures in ``out`` (PNG, and PDF beside each; ``extra_lines``
    appended); returns the report path.

    Parameters
    ----------
    df : pandas.DataFrame
        The verdict table.
    studies : list of dict
        The rate-study records.
    out : str or Path
        The report's directory.
    quick : bool
        Whether the quick cases ran.
    seconds : float
        The time the checks took.
    extra_lines : sequence of str
        Lines appended to the report.

    Returns
    -------
    pathlib.Path
        The report's path.
    """
    import matplotlib
    matplotlib.use("Agg")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    figs = []
    for k, s in enumerate(studies):
        na = s.get("not_applicable") or {}
        na_line = ("not drawn, NOT APPLICABLE: " + "; ".join(f"{var} ({why})" for var, why in na.items())) if na else ""
        fig = bound_vs_T(s["T"], s["measured"], s["stderr"], s["bounds"],
                         s["predicted"] if s.get("form", "power") == "power" else None,
                         title="\n".join([s["theorem"], *textwrap.wrap(s["label"], 70), *textwrap.wrap(na_line, 70)]),
                         ylabel=left_hand_side(s["theorem"]))
        fname = f"rate_{s['theorem'].replace('.', '_')}_{k}.png"
        save_figure(fig, out / fname)
        figs.append((fname, s))
    cases = df[df.case.astype(str) != "(no default cases registered)"]
    if len(cases):
        save_figure(ratios_figure(cases), out / "ratios.png")
    lines = [f"# fedtheory verify ({'quick' if quick else 'full'})", "",
             f"fedtheory {__version__}; {time.strftime('%Y-%m-%d %H:%M:%S')}; {seconds:.0f} s.", "",
             "Each registered theorem runs its default configurations: conforming cases (every stated "
             "condition holds) and documented counterexamples. `measured` is the theorem's left-hand side "
             "(mean over seeds, with its standard error), `bound` the right-hand side of the variant "
             "(`printed` as in the paper, `corrected` with the errata of the docs/papers/ pages), `ratio` = measured / bound. "
             "Rate studies fit the measured left-hand side against T in the form the theorem predicts: "
             "the log-log slope over the last three T values for a power of T, the contraction factor per "
             "unit of T (least squares of log measured vs T) for a linear rate, with its 95% confidence "
             "interval (`rate_ci`), beside the predicted rate. A case whose variant requires a "
             "condition that fails is NOT APPLICABLE (no verdict); `failing_conditions` names every failing "
             "condition with its role (stated, hidden, info). Every variant of a theorem has a row; variants "
             "whose rows are identical share one (`printed = corrected`). `quantity` names the measured "
             "left-hand side. A row is `conforming` only when every stated condition holds (a conforming case "
             f"in which one fails is `{BEYOND_STATED}`). A bound more than {VACUOUS:g} times the measurement "
             "is marked vacuous; a measurement that exceeds its bound by no more than its rounding level, or "
             "cannot be resolved, is UNRESOLVED with the reason. One seed has no spread (`stderr` -).", "",
             format_table(df, markdown=True), ""]
    if len(cases):
        lines += ["![ratios](ratios.png)", "", "Every figure is also written as PDF beside its PNG (ratios.pdf, ...).", ""]
    for fname, s in figs:
        if s.get("form") == "geometric":
            fit = (f"Fitted contraction factor {s['fit']['rate']:.4g} per unit of T (95% CI {s['fit']['ci']}, "
                   f"{s['fit']['n']} T above the resolution floor); predicted {s['predicted']:.4g}.")
        else:
            fit = (f"Fitted slope {s['slope']:.2f} overall, {s['tail_slope']:.2f} over the last three T "
                   f"(95% CI {s['fit']['ci']}); predicted {s['predicted']:g}.")
        lines += [f"## {s['theorem']}: {s['label']}", "", f"{fit} {s['note']}", "", f"![{s['label']}]({fname})", ""]
    lines += list(extra_lines)
    path = out / "report.md"
    path.write_text("\n".join(lines))
    df.to_csv(out / "verdicts.csv", index=False)
    return path


def verify_all(quick=False, out="verify-report", theorems=None, progress=None, echo=print, tightness=False, jobs=1,
               lemmas=False):
    """Run, print and write the verification report; returns (table, report path). With
    ``tightness``, one more row per theorem with a PEP: measured <= worst case <= bound and the
    looseness (:func:`fedtheory.theory.tightness.tightness_rows`), with its figures. ``jobs``:
    worker processes for the cases (:func:`run_cases`; the same table).

    Parameters
    ----------
    quick : bool, default False
        The quick cases.
    out : str or Path, default "verify-report"
        The report's directory.
    theorems : list of str, optional
        The theorems or lemmas to check (default every theorem).
    progress : bool, optional
        Show progress (default: on a terminal).
    echo : callable, default print
        Where the table is printed.
    tightness : bool, default False
        One more row per theorem with a PEP.
    jobs : int, default 1
        Worker processes.
    lemmas : bool, default False
        Also check each theorem's lemmas.

    Returns
    -------
    tuple
        ``(table, report path)``.
    """
    t0 = time.perf_counter()
    df, studies = run_cases(quick, theorems, progress, jobs=jobs, lemmas=lemmas)
    extra = []
    if tightness:
        rows, extra = tightness_rows(quick, theorems, out)
        for name, why in uncovered(theorems).items():
            echo(f"tightness: no row for {name}: {why}")
        df = pd.concat([df, pd.DataFrame(rows)], ignore_index=True)
    echo(terminal_table(df))
    path = write_report(df, studies, out, quick, time.perf_counter() - t0, extra)
    echo(f"\nreport: {path}")
    return df, path
