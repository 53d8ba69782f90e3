"""``fedtheory verify``: every registered theorem on its default configurations, as a report.

For each theorem (:data:`fedtheory.theory.THEOREMS`) its default cases
(:data:`fedtheory.theory.CASES`: conforming configurations and documented counterexamples)
are run once and evaluated for every bound variant; rate studies fit the measured left-hand side
against T in the form the theorem predicts (a log-log slope, or a geometric contraction factor
with its confidence interval) and compare it with the predicted rate. The verdict table
is printed and written with figures to a Markdown report.
"""
from __future__ import annotations

import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..theory import CASES, SPECS, THEOREMS
from ..theory.verdicts import (DOCUMENTED_VIOLATION, HOLDS, NOT_APPLICABLE, UNRESOLVED, VIOLATED, is_not_applicable,
                              is_violated, unexpected)
from .._progress import bar as progress_bar
from .._threads import cpus, limit_worker_threads

COLUMNS = ["theorem", "case", "kind", "variant", "conditions_ok", "quantity", "measured", "stderr", "bound", "ratio",
           "fitted_rate", "rate_ci", "predicted_rate", "verdict", "failing_conditions"]

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
        return HOLDS if holds else VIOLATED
    if holds == expected:
        return HOLDS if holds else DOCUMENTED_VIOLATION
    return unexpected(holds)


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
        return f"{NOT_APPLICABLE}: {v.reason}"
    if v.verdict() == UNRESOLVED:
        return f"{UNRESOLVED}: {v.unresolved_reason}"
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
                   fitted_rate=np.nan, rate_ci="-", predicted_rate=np.nan,
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


def _check_item(name, item, lemmas=False):
    """Rows (and the rate-study record, or None) of one default case or rate study of theorem ``name``;
    with ``lemmas``, a case's rows are followed by one row per lemma of the theorem's proof, checked on
    the same runs (their theorem column names the lemma, their case ends in "(proof of NAME)")."""
    fn = THEOREMS[name]
    problem = item.build()
    if hasattr(item, "expect"):               # a Case: every variant of the theorem
        prev, done = None, []
        for variant in _variants(name, item.expect):
            extra = {"lemmas": True} if lemmas and not done else {}     # a user's plain theorem function has none
            v = fn(problem, variant=variant, measurement=prev, **extra, **item.kwargs)
            prev = v.details.get("measurement") or prev
            done.append((variant, v))
        rows = case_rows(name, item, done, item.expect)
        for lv in done[0][1].lemmas:
            for row in case_rows(lv.name, item, [(lv.variant, lv)], {}):
                rows.append(dict(row, case=f"{item.label} (proof of {name})", kind="lemma"))
        return rows, None
    done = {var: [] for var in item.variants}                             # a RateStudy: each variant's checks
    for T in item.Ts:
        prev = None
        for variant in item.variants:
            v = fn(problem, variant=variant, measurement=prev, **item.kwargs_for(T))
            prev = v.details.get("measurement")
            done[variant].append(v)
    rows, fits = [], {}
    for variant, vs in done.items():
        meas = [v.measured for v in vs]                 # each variant's own quantity (Variant.values)
        last = vs[-1]
        n_ok = min(sum(c.ok for c in v.conditions) for v in vs)
        na = [(T, v) for T, v in zip(item.Ts, vs) if not v.applicable]
        fit = fits[variant] = (rate_fit(item, meas, vs) if not na else
                               dict(rate=np.nan, slope=np.nan, predicted=np.nan, as_predicted=None, ci="-", n=0,
                                    what="contraction factor" if item.form == "geometric" else "rate"))
        verdicts = [v.verdict() for v in vs]
        if na:                                          # no verdict where the theorem does not apply
            T0, v0 = na[0]
            verdict = f"{NOT_APPLICABLE}: {v0.reason} (T = {', '.join(str(T) for T, _ in na)})"
        elif VIOLATED in verdicts:
            verdict = VIOLATED
        elif UNRESOLVED in verdicts:
            verdict = f"{UNRESOLVED}: {vs[verdicts.index(UNRESOLVED)].unresolved_reason}"
        else:
            verdict = HOLDS + (VACUOUS_NOTE if vacuous(last.measured, last.bound) else "")
        if not na:
            if fit["as_predicted"] is None:
                verdict += f", {fit['what']} not resolved (every measurement at rounding level)"
            else:
                verdict += f", {fit['what']} " + ("as predicted" if fit["as_predicted"] else "SLOWER than predicted")
        rows.append(dict(theorem=name, case=item.label, kind="rate", variant=variant,
                         conditions_ok=f"{n_ok}/{len(vs[0].conditions)}", quantity=last.quantity or "-",
                         measured=last.measured, stderr=last.stderr, bound=last.bound,
                         ratio=np.nan if na else last.ratio,
                         fitted_rate=fit["rate"], rate_ci=fit["ci"], predicted_rate=fit["predicted"],
                         verdict=verdict, failing_conditions=failing_conditions([c for v in vs for c in v.conditions])))
    first = item.variants[0]
    fit = fits[first]
    study = dict(theorem=name, label=item.label, T=list(item.Ts), measured=[v.measured for v in done[first]],
                 stderr=[v.stderr for v in done[first]],
                 # a variant not applicable at some T has no bound to draw (it was drawn as an ordinary line)
                 bounds={var: [v.bound for v in vs] for var, vs in done.items() if all(v.applicable for v in vs)},
                 not_applicable={var: next(v.reason for v in vs if not v.applicable) for var, vs in done.items()
                                 if not all(v.applicable for v in vs)},
                 measured_by_variant={var: [v.measured for v in vs] for var, vs in done.items()},
                 slope=fit["slope"], tail_slope=fit["rate"], predicted=fit["predicted"], note=item.note, form=item.form,
                 fit=fit)
    return rows, study


def _items(name, quick):
    cases, rates = CASES[name](quick)
    return list(cases) + list(rates)


def _by_algorithm(names):
    """The theorems ``names`` grouped by the algorithm their runs execute (``TheoremSpec.algorithm``;
    a theorem without a spec is a group of its own), in the order of ``names``. ``run_cases`` gives
    each group to one worker: a worker compiles the rounds of the algorithms of its own groups, where
    theorems of one algorithm checked in two workers at once compiled the same rounds in both (with an
    empty cache: FedSPS's, 12 s of each worker)."""
    groups = {}
    for n in names:
        spec = SPECS.get(n)
        groups.setdefault(getattr(spec, "algorithm", None) or n, []).append(n)
    return groups


def _check_theorems(names, quick, lemmas=False):
    """``{name: _check_theorem(name, ...)}`` for the theorems ``names``, in one process."""
    return {n: _check_theorem(n, quick, None, lemmas) for n in names}


def _check_theorem(name, quick, step=None, lemmas=False):
    """(rows, studies) of every default case of theorem ``name`` (a worker's share of ``run_cases``);
    ``step()`` after each case (the progress bar of a single process)."""
    rows, studies = [], []
    for item in _items(name, quick):
        r, study = _check_item(name, item, lemmas)
        rows += r
        if study is not None:
            studies.append(study)
        if step is not None:
            step()
    return rows, studies


def _worker_init(n_workers):
    """A verify worker: Ctrl-C is left to the parent, BLAS to this worker's share of the CPUs."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    limit_worker_threads(n_workers)


def default_jobs():
    """Worker processes ``run_cases`` uses by default: the CPUs this process may run on, at most 4."""
    return max(1, min(4, cpus()))


def run_cases(quick=False, theorems=None, progress=None, jobs=1, lemmas=False):
    """Run the default cases; return (table, rate-study records) for the report.

    ``progress``: a bar on stderr over the cases, naming the theorem being checked (None: only
    when stderr is a terminal; see :mod:`fedtheory._progress`). ``jobs`` > 1 checks the theorems
    in that many worker processes (forked: they see the modules this process imported), the
    theorems of one algorithm in one worker (:func:`_by_algorithm`), the most cases first; every
    case is deterministic, so the table is the one a single process gives, in the same order (each
    worker compiles the kernels of its own theorems, and the compiled code is shared through
    Numba's disk cache). ``lemmas``: each case's lemmas too, on
    its runs (:func:`_check_item`); a lemma is run on its own cases only when named in ``theorems``."""
    from ..theory import is_lemma
    names = [n for n in sorted(THEOREMS) if (n in theorems if theorems is not None else not is_lemma(n))]
    checked = [n for n in names if n in CASES]
    items = {n: _items(n, quick) for n in checked}
    results = {}
    bar = progress_bar(progress, total=sum(len(v) for v in items.values()), desc="verify", unit="case")
    if jobs > 1 and len(checked) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed
        ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
        groups = _by_algorithm(checked)
        order = sorted(groups, key=lambda g: -sum(len(items[n]) for n in groups[g]))   # the most cases first
        pool = None
        try:
            # the workers ignore Ctrl-C: this process stops them (no traceback from each of them)
            n_workers = min(jobs, len(groups))
            pool = ProcessPoolExecutor(max_workers=n_workers, mp_context=ctx, initializer=_worker_init,
                                       initargs=(n_workers,))
            futures = {pool.submit(_check_theorems, groups[g], quick, lemmas): g for g in order}
            for fut in as_completed(futures):
                group = futures[fut]
                results.update(fut.result())
                bar.set_postfix_str(group, refresh=False)
                bar.update(sum(len(items[n]) for n in groups[group]))
        except BaseException:                  # Ctrl-C or a failed case: stop the workers now, not after their cases
            if pool is not None:
                for proc in list((getattr(pool, "_processes", None) or {}).values()):
                    proc.terminate()
                pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
    else:
        for name in checked:
            bar.set_postfix_str(name, refresh=False)
            results[name] = _check_theorem(name, quick, step=lambda: bar.update(1), lemmas=lemmas)
    bar.close()
    rows, studies = [], []
    for name in names:
        if name not in CASES:
            rows.append(dict(theorem=name, case="(no default cases registered)", kind="-", variant="-",
                             conditions_ok="-", verdict="not checked"))
            continue
        rows += results[name][0]
        studies += results[name][1]
    return pd.DataFrame(rows, columns=COLUMNS), studies


def rate_fit(study, measured, verifications):
    """The fit of a :class:`~fedtheory.theory.RateStudy`'s measurements in its form
    (:func:`fedtheory.theory.fit_rate`), beside the predicted rate.

    A power rate: the log-log slope over the last three T (``rate``) and over every T
    (``slope``), as predicted when ``rate <= predicted + 0.25``. A geometric rate: the
    contraction factor per unit of T, as predicted unless its 95% interval lies wholly above the
    predicted factor. Both fit only the T whose measurement is above its resolution floor (a
    measurement at rounding level has no rate), and give no verdict (``as_predicted`` None, "not
    resolved") without enough of them: fewer than three for the geometric interval (with two, the
    factor through them has no interval, and a slower contraction was called as predicted), fewer
    than two for the power slope. ``ci`` is the interval as text; ``what`` names the rate in the
    verdict ("rate" or "contraction factor")."""
    from ..theory import fit_rate
    T = np.asarray(study.Ts, dtype=float)
    m = np.asarray(measured, dtype=float)
    predicted = study.predicted(verifications[-1])
    above = np.array([v.measured > v.floor for v in verifications])
    if study.form == "geometric":
        f = fit_rate(T[above], m[above], "geometric")
        ok = None if (f.rate != f.rate or f.lo != f.lo) else bool(not (f.lo > predicted))
        return dict(rate=f.rate, slope=f.rate, predicted=predicted, as_predicted=ok, what="contraction factor",
                    ci=f"[{f.lo:.4g}, {f.hi:.4g}]" if f.lo == f.lo else "-", lo=f.lo, hi=f.hi, n=f.n)
    Ta, ma = T[above], m[above]
    whole = fit_rate(Ta, ma)
    tail = fit_rate(Ta[-3:], ma[-3:])
    return dict(rate=tail.rate, slope=whole.rate, predicted=predicted,
                as_predicted=None if tail.rate != tail.rate else bool(tail.rate <= predicted + 0.25),
                what="rate", ci=f"[{tail.lo:.3g}, {tail.hi:.3g}]" if tail.lo == tail.lo else "-", lo=tail.lo,
                hi=tail.hi, n=tail.n)


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
    """
    from ..theory.verdicts import DOCUMENTED_VIOLATION, WORDS, word
    counts = {}
    for cell in df.verdict.astype(str):
        key = DOCUMENTED_VIOLATION if cell.startswith(DOCUMENTED_VIOLATION) else (word(cell) or "other")
        counts[key] = counts.get(key, 0) + 1
    order = [w for w in (WORDS[0], WORDS[1], DOCUMENTED_VIOLATION, *WORDS[2:], "other") if w in counts]
    return f"{len(df)} rows: " + ", ".join(f"{counts[w]} {w}" for w in order)


from ..plotting import MAX_PIXELS  # noqa: E402  (the largest side, in pixels, of a report figure)


def save_figure(fig, path, dpi=150):
    """Save a report figure as PNG at ``dpi`` (lowered where needed so that no side exceeds
    :data:`MAX_PIXELS`) and as PDF beside it, for papers; close it
    (:func:`fedtheory.plotting.save_figure`, the one save helper of every figure)."""
    from ..plotting import save_figure as save
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
        :data:`MAX_PIXELS`).

    Examples
    --------
    >>> import pandas as pd
    >>> from fedtheory.reporting.verification import ratios_figure
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
    from ..plotting import MAX_DECADES, bound_style, log_ticks
    from ..plotting.axes import _usable_mask
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
    >>> from fedtheory.reporting.verification import left_hand_side
    >>> left_hand_side("localdescent.theorem_4_1")
    'E[f(xbar^T) - f*]'
    >>> left_hand_side("no.such_theorem")
    'left-hand side of the theorem'
    """
    from ..theory import SPECS
    spec = SPECS.get(theorem)
    statement = getattr(spec, "statement", "") or ""
    if "<=" not in statement:
        return "left-hand side of the theorem"
    return "\n".join(textwrap.wrap(statement.split("<=")[0].strip(), width)) or "left-hand side of the theorem"


def write_report(df, studies, out, quick, seconds, extra_lines=()):
    """Markdown report and figures in ``out`` (PNG, and PDF beside each; ``extra_lines``
    appended); returns the report path."""
    import matplotlib
    matplotlib.use("Agg")
    from .. import __version__
    from ..plotting import bound_vs_T
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
    worker processes for the cases (:func:`run_cases`; the same table)."""
    t0 = time.perf_counter()
    df, studies = run_cases(quick, theorems, progress, jobs=jobs, lemmas=lemmas)
    extra = []
    if tightness:
        from ..theory.tightness import tightness_rows, uncovered
        rows, extra = tightness_rows(quick, theorems, out)
        for name, why in uncovered(theorems).items():
            echo(f"tightness: no row for {name}: {why}")
        df = pd.concat([df, pd.DataFrame(rows)], ignore_index=True)
    echo(terminal_table(df))
    path = write_report(df, studies, out, quick, time.perf_counter() - t0, extra)
    echo(f"\nreport: {path}")
    return df, path
