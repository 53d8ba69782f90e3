"""``fedtheory verify``: every registered theorem on its default configurations, as a report.

For each theorem (:data:`fedtheory.theory.THEOREMS`) its default cases
(:data:`fedtheory.theory.CASES`: conforming configurations and documented counterexamples)
are run once and evaluated for every bound variant; rate studies fit the log-log slope of the
measured left-hand side against T and compare it with the predicted order. The verdict table
is printed and written with figures to a Markdown report.
"""
from __future__ import annotations

import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .theory import CASES, SPECS, THEOREMS

COLUMNS = ["theorem", "case", "kind", "variant", "conditions_ok", "quantity", "measured", "stderr", "bound", "ratio",
           "fitted_rate", "predicted_rate", "verdict", "failing_conditions"]

#: A bound more than this many times the measurement holds, but says little: its row is "vacuous".
VACUOUS = 1e3
#: Kind of a row of a "conforming" case in which a condition the paper states fails (the variant
#: measured requires other conditions, e.g. a corrected one): never called conforming.
BEYOND_STATED = "beyond stated conditions"
#: What a vacuous row's verdict says after "holds".
VACUOUS_NOTE = f" (vacuous: bound > {VACUOUS:.0e} x measured)".replace("e+0", "e")


def failing_conditions(conditions):
    """The failing conditions by name, each tagged with its role: "[stated] S1: ...; [info] H2 ..."."""
    tag = {"stated": "stated", "hidden": "hidden", "informational": "info"}
    out = []
    for c in conditions:
        if not c.ok:
            name = f"[{tag.get(getattr(c, 'role', 'stated'), 'stated')}] {c.name}"
            if name not in out:
                out.append(name)
    return "; ".join(out) or "-"


def _verdict(holds, expected, kind):
    if expected is None:
        return "holds" if holds else "VIOLATED"
    if holds == expected:
        return "holds" if holds else "violated (documented counterexample)"
    return "UNEXPECTED: " + ("holds" if holds else "violated")


def vacuous(measured, bound):
    """Whether a bound that holds is more than :data:`VACUOUS` times the measurement.

    Examples
    --------
    >>> vacuous(1.0, 2e3), vacuous(1.0, 10.0), vacuous(0.0, 0.0)
    (True, False, False)
    """
    return bool(bound > 0 and bound > VACUOUS * measured)


def verdict_cell(v, expected=None, kind="conforming"):
    """The verdict column of a Verification: NOT APPLICABLE or UNRESOLVED with the reason, a
    documented counterexample against its expectation, "vacuous" for a bound that holds by
    more than :data:`VACUOUS` times the measurement."""
    if not v.applicable:
        return f"NOT APPLICABLE: {v.reason}"
    if v.verdict() == "UNRESOLVED":
        return f"UNRESOLVED: {v.unresolved_reason}"
    cell = _verdict(v.holds, expected, kind)
    if v.holds and vacuous(v.measured, v.bound):
        cell += VACUOUS_NOTE
    return cell


def row_kind(v, kind):
    """A case's kind for one row: a "conforming" case whose row has a failing stated condition is
    :data:`BEYOND_STATED` (a row called conforming has every stated condition true)."""
    stated_ok = all(c.ok for c in v.conditions if getattr(c, "role", "stated") == "stated")
    return BEYOND_STATED if kind == "conforming" and not stated_ok else kind


def case_rows(name, case, verifications, expect=None):
    """The table rows of one case: one per variant, ``verifications`` = [(variant, Verification)];
    variants whose rows are identical (same measurement, bound, verdict and conditions) are
    shown once, labelled with every name ("printed = corrected")."""
    expect = expect or {}
    rows, keys = [], []
    for variant, v in verifications:
        n_ok = sum(bool(c.ok) for c in v.conditions)
        row = dict(theorem=name, case=case.label, kind=row_kind(v, case.kind), variant=variant,
                   conditions_ok=f"{n_ok}/{len(v.conditions)}" + ("" if v.applicable else " (n/a)"),
                   quantity=v.quantity or "-", measured=v.measured, stderr=v.stderr,
                   bound=v.bound if v.applicable else np.nan, ratio=v.ratio if v.applicable else np.nan,
                   fitted_rate=np.nan, predicted_rate=np.nan,
                   verdict=verdict_cell(v, expect.get(variant), case.kind),
                   failing_conditions=failing_conditions(v.conditions))
        key = tuple(_fmt(row[k]) for k in ("kind", "conditions_ok", "quantity", "measured", "stderr", "bound",
                                            "verdict", "failing_conditions")) + (repr(v.bound), repr(v.measured))
        if key in keys:
            first = rows[keys.index(key)]
            first["variant"] = f"{first['variant']} = {variant}"
            continue
        keys.append(key)
        rows.append(row)
    return rows


def _variants(name, expect):
    """Every variant of theorem ``name``: printed first, then those the case expects, then the theorem's others."""
    spec = SPECS.get(name)
    names = list(dict.fromkeys([*expect, *(spec.variants if spec is not None else ())]))
    return sorted(names, key=lambda v: v != "printed")          # printed first, the others as declared


def run_cases(quick=False, theorems=None, progress=None):
    """Run the default cases; return (table, rate-study records) for the report.

    ``progress``: a bar on stderr over the cases, naming the theorem being checked (None: only
    when stderr is a terminal; see :mod:`fedtheory._progress`)."""
    from ._progress import bar as progress_bar
    rows, studies = [], []
    names = [n for n in sorted(THEOREMS) if theorems is None or n in theorems]
    work = []
    for name in names:
        if name not in CASES:
            rows.append(dict(theorem=name, case="(no default cases registered)", kind="-", variant="-",
                             conditions_ok="-", verdict="not checked"))
            continue
        cases, rates = CASES[name](quick)
        work += [(name, c) for c in cases] + [(name, r) for r in rates]
    bar = progress_bar(progress, iterable=work, desc="verify", unit="case")
    for name, item in bar:
        bar.set_postfix_str(name, refresh=False)
        fn = THEOREMS[name]
        problem = item.build()
        if hasattr(item, "expect"):               # a Case: every variant of the theorem
            prev, done = None, []
            for variant in _variants(name, item.expect):
                v = fn(problem, variant=variant, measurement=prev, **item.kwargs)
                prev = v.details.get("measurement") or prev
                done.append((variant, v))
            rows += case_rows(name, item, done, item.expect)
        else:                                     # a RateStudy
            meas, se, bounds = [], [], {var: [] for var in item.variants}
            conds = []
            for T in item.Ts:
                prev = None
                for variant in item.variants:
                    v = fn(problem, variant=variant, measurement=prev, **item.kwargs_for(T))
                    prev = v.details.get("measurement")
                    bounds[variant].append(v.bound)
                meas.append(v.measured)
                se.append(v.stderr)
                conds.append(v)
            slope = float(np.polyfit(np.log(item.Ts), np.log(meas), 1)[0])
            tail = float(np.polyfit(np.log(item.Ts[-3:]), np.log(meas[-3:]), 1)[0])
            ok_rate = tail <= item.predicted_slope + 0.25
            failing = failing_conditions([c for v in conds for c in v.conditions])
            for variant in item.variants:
                held = all(m <= b for m, b in zip(meas, bounds[variant]))
                n_ok = min(sum(c.ok for c in v.conditions) for v in conds)
                rows.append(dict(theorem=name, case=item.label, kind="rate", variant=variant,
                                 conditions_ok=f"{n_ok}/{len(conds[0].conditions)}", quantity=v.quantity or "-",
                                 measured=meas[-1], stderr=se[-1], bound=bounds[variant][-1],
                                 ratio=meas[-1] / bounds[variant][-1], fitted_rate=tail,
                                 predicted_rate=item.predicted_slope,
                                 verdict=("holds" if held else "VIOLATED")
                                 + (VACUOUS_NOTE if held and vacuous(meas[-1], bounds[variant][-1]) else "")
                                 + (", rate as predicted" if ok_rate else ", rate SLOWER than predicted"),
                                 failing_conditions=failing))
            studies.append(dict(theorem=name, label=item.label, T=list(item.Ts), measured=meas, stderr=se,
                                bounds=bounds, slope=slope, tail_slope=tail, predicted=item.predicted_slope,
                                note=item.note))
    bar.close()
    return pd.DataFrame(rows, columns=COLUMNS), studies


def _fmt(v):
    if isinstance(v, (float, np.floating)):
        return "-" if np.isnan(v) else f"{v:.3g}"
    return str(v)


def format_table(df, markdown=False):
    """The verdict table as aligned text or a Markdown pipe table."""
    cells = [[_fmt(v) for v in row] for row in df.itertuples(index=False)]
    if markdown:
        lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
        return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in cells])
    widths = [max(len(str(h)), *(len(c[j]) for c in cells)) if cells else len(h) for j, h in enumerate(df.columns)]
    out = ["  ".join(str(h).ljust(w) for h, w in zip(df.columns, widths))]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(out)


#: The largest side, in pixels, of a report figure (:func:`save_figure`).
MAX_PIXELS = 2400


def save_figure(fig, path, dpi=150):
    """Save a report figure at ``dpi``, lowered where needed so that no side exceeds
    :data:`MAX_PIXELS`; close it."""
    import matplotlib.pyplot as plt
    w, h = fig.get_size_inches()
    fig.savefig(path, dpi=min(dpi, MAX_PIXELS / max(w, h)))
    plt.close(fig)


def _short(case, width=56):
    """A case label for an axis: its tag ("C2") when it has one, else the label cut at ``width``."""
    case = str(case)
    head = case.split(":")[0]
    if ":" in case and len(head) <= 12:
        return head
    return case if len(case) <= width else case[:width - 1].rstrip() + "\u2026"


def ratios_figure(df):
    r"""Measured left-hand side over the bound, one panel per theorem, one horizontal bar per case
    and variant.

    Bars take the colour of their variant (:func:`fedtheory.plotting.bound_style`, as in every
    figure); a violated bound (ratio > 1) is hatched and the vertical line marks ratio 1. A
    theorem whose ratios span more than two decades is drawn on a logarithmic axis, else on a
    linear one. A row that is not applicable (a required condition fails) or has no finite ratio
    is written "n/a" with its reason instead of a bar. The value is written at the end of each bar.

    Parameters
    ----------
    df : pandas.DataFrame
        The verdict table of :func:`run_cases`.

    Returns
    -------
    matplotlib.figure.Figure
        About 9 inches wide, 0.2 inch per row (:func:`save_figure` keeps it under
        :data:`MAX_PIXELS`).

    Examples
    --------
    >>> import pandas as pd
    >>> from fedtheory.verification import ratios_figure
    >>> t = pd.DataFrame(dict(theorem=["a.t1"] * 3, case=["C1: x", "C1: x", "C2: y"], kind="conforming",
    ...                       variant=["printed", "corrected", "printed"], ratio=[2.0, 0.5, float("nan")],
    ...                       verdict=["VIOLATED", "holds", "NOT APPLICABLE: S1 fails"]))
    >>> fig = ratios_figure(t)
    >>> [tk.get_text() for tk in fig.axes[0].get_yticklabels()]
    ['C1 · printed', 'C1 · corrected', 'C2 · printed']
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.transforms import blended_transform_factory
    from .plotting import bound_style, log_ticks
    theorems = list(dict.fromkeys(df.theorem))
    sizes = [int((df.theorem == t).sum()) for t in theorems]
    height = 0.2 * sum(sizes) + 0.55 * len(theorems) + 0.9
    fig, axes = plt.subplots(len(theorems), 1, figsize=(9, height), squeeze=False, layout="constrained",
                             gridspec_kw=dict(height_ratios=[n + 1.2 for n in sizes]))
    variants = []
    for ax, name in zip(axes[:, 0], theorems):
        rows = df[df.theorem == name].reset_index(drop=True)
        ratio = pd.to_numeric(rows.ratio, errors="coerce").to_numpy(dtype=float)
        ok = np.isfinite(ratio) & (ratio > 0) & ~rows.verdict.astype(str).str.startswith("NOT APPLICABLE").to_numpy()
        good = ratio[ok]
        logx = bool(good.size) and max(good.max(), 1.0) / min(good.min(), 1.0) > 100
        y = np.arange(len(rows))
        for j, r in rows.iterrows():
            if r.variant not in variants:
                variants.append(r.variant)
            if not ok[j]:
                continue
            st = bound_style(r.variant)
            ax.barh(j, ratio[j], height=0.7, color=st["color"], alpha=0.85,
                    hatch="///" if ratio[j] > 1 else None, edgecolor="white" if ratio[j] <= 1 else "black", lw=0.5)
            ax.annotate(f"{ratio[j]:.3g}", (ratio[j], j), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=6.5,
                        bbox=dict(facecolor="white", edgecolor="none", alpha=0.85, pad=0.3))
        trans = blended_transform_factory(ax.transAxes, ax.transData)
        for j in np.flatnonzero(~ok):
            why = str(rows.verdict[j]).removeprefix("NOT APPLICABLE: ")
            text = "n/a" + (f": {textwrap.shorten(why, 90, placeholder=' ...')}" if why and why != "nan" else "")
            ax.text(0.01, j, text, transform=trans, va="center", fontsize=6.5, color="0.35", style="italic")
        ax.axvline(1.0, color="k", lw=0.8)
        if logx:
            ax.set_xscale("log")
            lo, hi = min(good.min(), 1.0), max(good.max(), 1.0)
            ax.set_xlim(lo / 3, hi * 3 * (hi / lo) ** 0.15)     # room for the value at the bar's end
            log_ticks(ax, "x")
        else:
            ax.set_xlim(0, 1.25 * max(good.max() if good.size else 1.0, 1.0))
        ax.set_yticks(y, [f"{_short(r.case)} \u00b7 {r.variant}" for r in rows.itertuples()], fontsize=7)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(True, axis="x", which="major", alpha=0.3)
        ax.set_title(name, fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("measured / bound  (> 1: the bound is violated)", fontsize=8)
    handles = [Patch(color=bound_style(v)["color"], label=v) for v in variants]
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="///", label="violated (ratio > 1)"))
    fig.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 5), fontsize=7, frameon=False)
    return fig


def write_report(df, studies, out, quick, seconds, extra_lines=()):
    """Markdown report and PNG figures in ``out`` (``extra_lines`` appended); returns the report path."""
    import matplotlib
    matplotlib.use("Agg")
    from . import __version__
    from .plotting import bound_vs_T
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    figs = []
    for k, s in enumerate(studies):
        fig = bound_vs_T(s["T"], s["measured"], s["stderr"], s["bounds"], s["predicted"],
                         title=f"{s['theorem']}\n" + "\n".join(textwrap.wrap(s["label"], 70)))
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
             "Rate studies fit the log-log slope of the measured left-hand side against T over the last "
             "three T values, and compare it with the predicted order. A case whose variant requires a "
             "condition that fails is NOT APPLICABLE (no verdict); `failing_conditions` names every failing "
             "condition with its role (stated, hidden, info). Every variant of a theorem has a row; variants "
             "whose rows are identical share one (`printed = corrected`). `quantity` names the measured "
             "left-hand side. A row is `conforming` only when every stated condition holds (a conforming case "
             f"in which one fails is `{BEYOND_STATED}`). A bound more than {VACUOUS:g} times the measurement "
             "is marked vacuous; a measurement that exceeds its bound by no more than its rounding level, or "
             "cannot be resolved, is UNRESOLVED with the reason. One seed has no spread (`stderr` -).", "",
             format_table(df, markdown=True), ""]
    if len(cases):
        lines += ["![ratios](ratios.png)", ""]
    for fname, s in figs:
        lines += [f"## {s['theorem']}: {s['label']}", "",
                  f"Fitted slope {s['slope']:.2f} overall, {s['tail_slope']:.2f} over the last three T; "
                  f"predicted {s['predicted']:g}. {s['note']}", "", f"![{s['label']}]({fname})", ""]
    lines += list(extra_lines)
    path = out / "report.md"
    path.write_text("\n".join(lines))
    df.to_csv(out / "verdicts.csv", index=False)
    return path


def verify_all(quick=False, out="verify-report", theorems=None, progress=None, echo=print, tightness=False):
    """Run, print and write the verification report; returns (table, report path). With
    ``tightness``, one more row per theorem with a PEP: measured <= worst case <= bound and the
    looseness (:func:`fedtheory.theory.tightness.tightness_rows`), with its figures."""
    t0 = time.perf_counter()
    df, studies = run_cases(quick, theorems, progress)
    extra = []
    if tightness:
        from .theory.tightness import tightness_rows
        rows, extra = tightness_rows(quick, theorems, out)
        df = pd.concat([df, pd.DataFrame(rows)], ignore_index=True)
    echo(format_table(df))
    path = write_report(df, studies, out, quick, time.perf_counter() - t0, extra)
    echo(f"\nreport: {path}")
    return df, path
