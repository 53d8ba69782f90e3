"""``fedtheory verify``: every registered theorem on its default configurations, as a report.

For each theorem (:data:`fedtheory.theory.THEOREMS`) its default cases
(:data:`fedtheory.theory.CASES`: conforming configurations and documented counterexamples)
are run once and evaluated for every bound variant; rate studies fit the log-log slope of the
measured left-hand side against T and compare it with the predicted order. The verdict table
is printed and written with figures to a Markdown report.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from .theory import CASES, THEOREMS

COLUMNS = ["theorem", "case", "kind", "variant", "conditions_ok", "measured", "stderr", "bound", "ratio",
           "fitted_rate", "predicted_rate", "verdict", "failing_conditions"]


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


def run_cases(quick=False, theorems=None, progress=None):
    """Run the default cases; return (table, rate-study records) for the report."""
    from tqdm.auto import tqdm
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
    bar = tqdm(work, desc="verify", disable=(None if progress is None else not progress))
    for name, item in bar:
        fn = THEOREMS[name]
        problem = item.build()
        if hasattr(item, "expect"):               # a Case
            prev = None
            for variant, expected in item.expect.items():
                v = fn(problem, variant=variant, measurement=prev, **item.kwargs)
                prev = v.details.get("measurement")
                n_ok = sum(c.ok for c in v.conditions)
                rows.append(dict(theorem=name, case=item.label, kind=item.kind, variant=variant,
                                 conditions_ok=f"{n_ok}/{len(v.conditions)}" + ("" if v.applicable else " (n/a)"),
                                 measured=v.measured, stderr=v.stderr,
                                 bound=v.bound if v.applicable else np.nan,
                                 ratio=v.ratio if v.applicable else np.nan,
                                 fitted_rate=np.nan, predicted_rate=np.nan,
                                 verdict=_verdict(v.holds, expected, item.kind) if v.applicable
                                 else f"NOT APPLICABLE: {v.reason}",
                                 failing_conditions=failing_conditions(v.conditions)))
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
                                 conditions_ok=f"{n_ok}/{len(conds[0].conditions)}",
                                 measured=meas[-1], stderr=se[-1], bound=bounds[variant][-1],
                                 ratio=meas[-1] / bounds[variant][-1], fitted_rate=tail,
                                 predicted_rate=item.predicted_slope,
                                 verdict=("holds" if held else "VIOLATED") + (", rate as predicted" if ok_rate
                                                                                 else ", rate SLOWER than predicted"),
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


def write_report(df, studies, out, quick, seconds, extra_lines=()):
    """Markdown report and PNG figures in ``out`` (``extra_lines`` appended); returns the report path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from . import __version__
    from .plotting import bound_vs_T
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    figs = []
    for k, s in enumerate(studies):
        fig = bound_vs_T(s["T"], s["measured"], s["stderr"], s["bounds"], s["predicted"],
                         title=f"{s['theorem']}\n{s['label']}")
        fname = f"rate_{s['theorem'].replace('.', '_')}_{k}.png"
        fig.savefig(out / fname, dpi=150)
        plt.close(fig)
        figs.append((fname, s))
    cases = df[(df.kind != "rate") & df.ratio.notna() & ~df.verdict.astype(str).str.startswith("NOT APPLICABLE")]
    if len(cases):
        fig, ax = plt.subplots(figsize=(max(5, 1.3 * len(cases)), 4))
        labels = [f"{r.case.split(':')[0]}\n{r.variant}" for r in cases.itertuples()]
        colors = ["C2" if r.ratio <= 1 else "C3" for r in cases.itertuples()]
        ax.bar(range(len(cases)), cases.ratio, color=colors)
        ax.axhline(1.0, color="k", lw=1)
        ax.set_yscale("log")
        ax.set_xticks(range(len(cases)), labels, fontsize=7)
        ax.set_ylabel("measured / bound (> 1: violated)")
        ax.set_title("Theorem checks: measured left-hand side over the bound", fontsize=10)
        fig.tight_layout()
        fig.savefig(out / "ratios.png", dpi=150)
        plt.close(fig)
    lines = [f"# fedtheory verify ({'quick' if quick else 'full'})", "",
             f"fedtheory {__version__}; {time.strftime('%Y-%m-%d %H:%M:%S')}; {seconds:.0f} s.", "",
             "Each registered theorem runs its default configurations: conforming cases (every stated "
             "condition holds) and documented counterexamples. `measured` is the theorem's left-hand side "
             "(mean over seeds, with its standard error), `bound` the right-hand side of the variant "
             "(`printed` as in the paper, `corrected` per the spec's errata), `ratio` = measured / bound. "
             "Rate studies fit the log-log slope of the measured left-hand side against T over the last "
             "three T values, and compare it with the predicted order. A case whose variant requires a "
             "condition that fails is NOT APPLICABLE (no verdict); `failing_conditions` names every failing "
             "condition with its role (stated, hidden, info).", "",
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
