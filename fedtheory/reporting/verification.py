"""``fedtheory verify``: every registered theorem on its default configurations, as a report.

For each theorem (:data:`fedtheory.theory.THEOREMS`) its default cases
(:data:`fedtheory.theory.CASES`: conforming configurations and documented counterexamples)
are run once and evaluated for every bound variant; rate studies fit the measured left-hand side
against T in the form the theorem predicts (a log-log slope, or a geometric contraction factor
with its confidence interval) and compare it with the predicted rate. The verdict table
is printed and written with figures to a Markdown report.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..theory import CASES, SPECS, THEOREMS, fit_rate, is_lemma
from ..theory.verdicts import DOCUMENTED_VIOLATION, HOLDS, NOT_APPLICABLE, unexpected, UNRESOLVED, VIOLATED
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
    """The failing conditions by name, each tagged with its role: "[stated] S1: ...; [info] H2 ...".

    Parameters
    ----------
    conditions : list of Condition
        A check's conditions.

    Returns
    -------
    str
        The failing ones, each tagged with its role ("-" when none fails).
    """
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

    Parameters
    ----------
    measured, bound : float
        The measurement and the bound.

    Returns
    -------
    bool
        True when the bound exceeds :data:`VACUOUS` times the measurement.

    Examples
    --------
    >>> vacuous(1.0, 2e3), vacuous(1.0, 10.0), vacuous(0.0, 0.0)
    (True, False, False)
    """
    return bool(bound > 0 and bound > VACUOUS * measured)


def verdict_cell(v, expected=None, kind="conforming"):
    """The verdict column of a Verification: NOT APPLICABLE or UNRESOLVED with the reason, a
    documented counterexample against its expectation, "vacuous" for a bound that holds by
    more than :data:`VACUOUS` times the measurement.

    Parameters
    ----------
    v : Verification
        The check.
    expected : bool, optional
        Whether the case's registered expectation says the variant holds.
    kind : str, default "conforming"
        The case's kind.

    Returns
    -------
    str
        The verdict text.
    """
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
    :data:`BEYOND_STATED` (a row called conforming has every stated condition true).

    Parameters
    ----------
    v : Verification
        The check.
    kind : str
        The case's kind.

    Returns
    -------
    str
        The row's kind.
    """
    stated_ok = all(c.ok for c in v.conditions if getattr(c, "role", "stated") == "stated")
    return BEYOND_STATED if kind == "conforming" and not stated_ok else kind


def case_rows(name, case, verifications, expect=None):
    """The table rows of one case: one per variant, ``verifications`` = [(variant, Verification)];
    variants whose rows are identical (same measurement, bound, verdict and conditions) are
    shown once, labelled with every name ("printed = corrected").

    Parameters
    ----------
    name : str
        The theorem or lemma.
    case : Case
        The case.
    verifications : list of tuple
        ``(variant, Verification)`` pairs.
    expect : dict, optional
        The case's expectation per variant.

    Returns
    -------
    list of dict
        One row per distinct variant.
    """
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
    """Worker processes ``run_cases`` uses by default: the CPUs this process may run on, at most 4.

    Returns
    -------
    int
        Between 1 and 4.
    """
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
    its runs (:func:`_check_item`); a lemma is run on its own cases only when named in ``theorems``.

    Parameters
    ----------
    quick : bool, default False
        The quick cases (fewer rounds and seeds).
    theorems : list of str, optional
        The theorems or lemmas to check (default every theorem).
    progress : bool, optional
        Show progress (default: on a terminal).
    jobs : int, default 1
        Worker processes.
    lemmas : bool, default False
        Also check each theorem's lemmas on the same runs.

    Returns
    -------
    tuple
        ``(table, rate-study records)``.
    """
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
    verdict ("rate" or "contraction factor").

    Parameters
    ----------
    study : RateStudy
        The rate study.
    measured : sequence of float
        The measured values, one per horizon.
    verifications : list of Verification
        The checks of the horizons.

    Returns
    -------
    dict
        The fitted and the predicted rate, and whether they agree.
    """
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
