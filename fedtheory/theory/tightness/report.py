"""The tightness report of ``fedtheory verify --tightness``: per round curves, the contraction
against the step, the figure and the verdict rows of every registered configuration
(:data:`TIGHTNESS_CASES`, registered by the theorem modules)."""
from __future__ import annotations

import math

import numpy as np

from ..verdicts import OK, UNEXPECTED, UNRESOLVED
from .api import _spec, covered, form_of, tightness
from .solve import worst_case
from .instances import worst_case_instance
from .pepit_adapter import TIGHTNESS_CASES, require_pepit
from ...plotting import PREDICTED_COLOR, bound_style, linear_limits, log_limits, log_ticks, mark_off_axis, save_figure
from ...plotting.axes import _legend_entries, _usable_mask


TIGHTNESS_COLUMNS = ["worst_case_lower", "worst_case_upper", "looseness"]


def curves(name, *, rounds, variant="printed", solver="CLARABEL", time_limit=3.0, known=None, **consts):
    """Measured (the largest over the class quadratics and the extracted worst-case instance,
    :func:`worst_case_instance`, when there is one), worst case (bracket) and bound after
    1..rounds rounds: a dict of arrays ``rounds``, ``measured``, ``lower``, ``upper``, ``bound``.
    ``known`` maps rounds r to a bracket already solved (e.g. :func:`tightness`'s), used as is.

    Parameters
    ----------
    name : str
        The theorem.
    rounds : int
        The largest number of rounds.
    variant : str, default "printed"
        The bound's variant.
    solver : str, default "CLARABEL"
        The SDP solver.
    time_limit : float, default 3
        Seconds per worst case.
    known : dict, optional
        Worst cases already solved.
    **consts
        The class's constants and the method's parameters.

    Returns
    -------
    dict
        Arrays ``rounds``, ``measured``, ``lower``, ``upper``, ``bound``.
    """
    spec = _spec(name)
    var = spec.variants[variant]
    form = form_of(name, rounds=rounds, **consts)
    meas = form.instances(rounds).max(axis=0) if form.instances is not None else np.full(rounds, np.nan)
    inst = worst_case_instance(form) if form.instances is not None else None
    if inst is not None:                       # the extracted worst-case quadratic, run the same way
        meas = np.maximum(meas, form.instances(rounds, [inst])[0])
    lo, hi, bd = [], [], []
    for r in range(1, rounds + 1):
        f = form_of(name, rounds=r, **consts)
        if known and r in known:
            a, b = known[r]
        elif f.n_adaptive:
            a, b, _ = worst_case(f, "theorem", solver, time_limit=time_limit)
        else:
            a, b, _ = worst_case(f, "theorem", solver)
        lo.append(a)
        hi.append(b)
        bd.append(float(var.bound(*f.bound_args(r))))
    return dict(rounds=np.arange(1, rounds + 1), measured=np.asarray(meas), lower=np.array(lo), upper=np.array(hi),
                bound=np.array(bd))


def contraction_curve(name, *, lrs, solver="CLARABEL", time_limit=1.0, **consts):
    """One-round worst-case contraction (bracket) of the form's Lyapunov quantity at each step in
    ``lrs``: arrays ``lr``, ``lower``, ``upper``.

    Parameters
    ----------
    name : str
        The theorem.
    lrs : sequence of float
        The steps.
    solver : str, default "CLARABEL"
        The SDP solver.
    time_limit : float, default 1
        Seconds per worst case.
    **consts
        The class's constants and the method's parameters.

    Returns
    -------
    dict
        Arrays ``lr``, ``lower``, ``upper``.
    """
    lo, hi = [], []
    for lr in lrs:
        f = form_of(name, rounds=1, lr=float(lr), **consts)
        try:
            a, b, _ = worst_case(f, "contraction", solver, time_limit=time_limit, max_nodes=40) if f.n_adaptive \
                else worst_case(f, "contraction", solver)
        except Exception:                          # solver failure on a huge worst case
            a = b = math.nan
        lo.append(a)
        hi.append(b)
    return dict(lr=np.asarray(lrs, dtype=float), lower=np.array(lo), upper=np.array(hi))


def figure(t, cur, con):
    """The tightness figure of one theorem: measured, worst case and bound against rounds (left);
    the one-round worst-case contraction (its bracket: the band) against the step with the
    theorem's step conditions and the threshold marked (right). Returns a matplotlib Figure
    (never shown).

    Both value axes are logarithmic (linear when their values span less than a factor 3 or none
    is positive), placed by :func:`fedtheory.plotting.log_limits`; a value at or below 0 is marked
    at the axis' bottom and +inf at its top (:func:`fedtheory.plotting.mark_off_axis`), a NaN
    (a solver failure) is left out.

    Parameters
    ----------
    t : Tightness
        The theorem's tightness record.
    cur : dict
        :func:`curves`.
    con : dict
        :func:`contraction_curve`.

    Returns
    -------
    matplotlib.figure.Figure
        The figure.
    """
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")

    def value_axis(ax, *arrays):
        """Scale and limits before drawing (no autoscaling over the data); returns the limits of
        a log axis, or None for a linear one."""
        lim = log_limits(*arrays)
        if lim is not None and lim[1] >= 3 * lim[0] * 10 ** 0.3:    # (log_limits pads 0.15 decade a side)
            ax.set_yscale("log")
            ax.set_ylim(*lim)
            return lim
        ax.set_ylim(*linear_limits(*arrays))
        return None

    def shown(v, lim):
        v = np.asarray(v, dtype=float)
        return np.where(_usable_mask(v) if lim is not None else np.isfinite(v), v, np.nan)

    r = np.asarray(cur["rounds"], dtype=float)
    bound, lower, upper, measured = (np.asarray(cur[k], dtype=float) for k in ("bound", "lower", "upper", "measured"))
    lim1 = value_axis(a1, bound, lower, upper, measured)
    st = bound_style(t.variant)                  # the variant's colour, as in every figure
    a1.plot(r, shown(bound, lim1), color=st["color"], ls="--", marker="x", ms=7, label=f"bound ({t.variant})")
    ok = np.isfinite(shown(lower, lim1)) & np.isfinite(shown(upper, lim1))
    if ok.any():
        a1.fill_between(r, np.where(ok, lower, np.nan), np.where(ok, upper, np.nan), color="C0", alpha=0.3)
    # open circles around filled squares: the measured value can equal the worst case (its instance)
    a1.plot(r, shown(upper, lim1), color="C0", marker="o", ms=9, mfc="none", label="worst case (PEP)")
    a1.plot(r, shown(measured, lim1), color="black", ls=":", marker="s", ms=4,
            label="measured (fedtheory.run, class quadratics)")
    if lim1 is not None:
        for v, c in ((bound, st["color"]), (upper, "C0"), (measured, "black")):
            mark_off_axis(a1, r, v, *lim1, color=c)
        log_ticks(a1, "y")
    if np.isfinite(r).any():
        a1.set_xticks(r[np.isfinite(r)])
        a1.set_xlim(np.nanmin(r) - 0.5, np.nanmax(r) + 0.5)
    a1.set_xlabel("rounds R")
    a1.set_ylabel(t.metric)
    h, lab = _legend_entries(a1)
    a1.legend(h, lab, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncols=2, frameon=False)
    a1.set_title(f"{t.name}: looseness {t.looseness:.3g}", fontsize=9)
    lr = np.asarray(con["lr"], dtype=float)
    c_lo, c_hi = np.asarray(con["lower"], dtype=float), np.asarray(con["upper"], dtype=float)
    ok = np.isfinite(c_hi) & np.isfinite(lr)
    lim2 = value_axis(a2, c_lo[ok], c_hi[ok], [1.0])
    lr_max = np.nanmax(lr) if np.isfinite(lr).any() else -math.inf
    marked = [v for v in list(t.lr_conditions.values()) + [t.lr_threshold] if math.isfinite(v) and v <= lr_max]
    a2.set_xlim(*linear_limits(lr, [t.constants["lr"]], marked, margin=0.03))    # every step marked is shown
    band = ok & np.isfinite(shown(c_lo, lim2)) & np.isfinite(shown(c_hi, lim2))
    if band.any():
        a2.fill_between(lr, np.where(band, c_lo, np.nan), np.where(band, c_hi, np.nan), color="C0", alpha=0.3)
    a2.plot(lr[ok], shown(c_lo[ok], lim2), "C0-o", ms=3, label="one-round worst case (lower end)")
    with np.errstate(invalid="ignore"):
        wide = np.any(c_hi[ok] > c_lo[ok] * (1 + 1e-6))
    if wide:
        a2.plot(lr[ok], shown(c_hi[ok], lim2), "C0--", lw=0.8, label="upper end (branch and bound)")
    if lim2 is not None:
        mark_off_axis(a2, lr[ok], c_lo[ok], *lim2, color="C0")
    a2.axhline(1.0, color="k", lw=0.8)
    steps = {}                # conditions at steps that one line cannot tell apart (0.5 % of the axis) share it
    width = 0.005 * (np.nanmax(lr) - np.nanmin(lr)) if np.isfinite(lr).any() else 0.0
    for cname, val in t.lr_conditions.items():
        if math.isfinite(val) and val <= lr_max:
            key = next((v for v in steps if abs(v - val) <= width), val)
            steps.setdefault(key, []).append(f"{cname} (lr <= {val:.4g})")
    for k, (val, names) in enumerate(steps.items()):
        a2.axvline(val, color=("tab:red", "tab:brown", "tab:pink", "tab:gray")[k % 4],
                   ls=(":", "-.", "--", (0, (1, 3)))[k % 4], lw=1.4, label="theorem: " + ";\n".join(names))
    if math.isfinite(t.lr_threshold):
        a2.axvline(t.lr_threshold, color=PREDICTED_COLOR, ls="--", label=f"threshold {t.lr_threshold:.3g}"
                   + ("" if t.lr_threshold_exact else " (lower estimate)"))
    a2.axvline(t.constants["lr"], color="0.5", lw=0.8, label=f"lr = {t.constants['lr']:.3g}")
    if lim2 is not None:
        log_ticks(a2, "y")
    a2.set_xlabel("step (lr; gamma_b for FedSPS)")
    a2.set_ylabel("worst-case contraction per round")
    h, lab = _legend_entries(a2)
    a2.legend(h, lab, fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncols=2, frameon=False)
    return fig


def uncovered(theorems):
    """Why each theorem of ``theorems`` gets no ``fedtheory verify --tightness`` row.

    Parameters
    ----------
    theorems : iterable of str or None
        Registered theorem names (None or empty: none asked for, so none is listed).

    Returns
    -------
    dict
        ``{theorem: reason}``: "no PEP: ..." (the theorem's own reason, its ``pep`` string) for
        a theorem without a PEP, and for one with a PEP but no configuration registered with
        :func:`tightness_case`, what to register.

    Examples
    --------
    >>> uncovered(["fedsps.theorem_6b"])["fedsps.theorem_6b"].startswith("no PEP: ")
    True
    >>> uncovered(["localdescent.theorem_4_1"])
    {}
    """
    out = {}
    for n, r in covered().items():
        if not theorems or n not in theorems:
            continue
        if r is not True:
            out[n] = f"no PEP: {r}"
        elif n not in TIGHTNESS_CASES:
            out[n] = ("a PEP but no configuration to solve it at: register a function quick -> constants with "
                      "fedtheory.theory.tightness.tightness_case")
    return out


def tightness_rows(quick=False, theorems=None, out=None, echo=None):
    """``fedtheory verify --tightness``: one verdict-table row per covered theorem (its
    :data:`TIGHTNESS_CASES` configuration) with measured <= worst case <= bound checked, the
    figures written to ``out``, and the report's section (list of Markdown lines).

    Parameters
    ----------
    quick : bool, default False
        Fewer rounds.
    theorems : list of str, optional
        The theorems (default every covered one).
    out : str or Path, optional
        Where the figures go.
    echo : callable, optional
        Where progress goes.

    Returns
    -------
    rows : list of dict
        The verdict table's columns plus :data:`TIGHTNESS_COLUMNS`.
    lines : list of str
        The report's section, as Markdown lines.
    """
    require_pepit()
    from pathlib import Path
    rows, lines = [], ["## Tightness: exact worst cases by performance estimation", "",
                       "For each theorem with a PEP (docs/tightness.md), the worst case of its method over its "
                       "function class (PEPit, Clarabel) beside the bound of the printed variant, for the "
                       "configuration below: `measured` is the largest left-hand side of the registered "
                       "algorithm on quadratics of the class, and the verdict checks measured <= worst case "
                       "<= bound.", "",
                       "| theorem | configuration | measured | worst case | bound | looseness | exponent ratio "
                       "| lr threshold | theorem's step conditions | class | seconds |", "|" + "---|" * 11]
    figs = []
    for name, case in TIGHTNESS_CASES.items():
        if theorems and name not in theorems:
            continue
        c = case(quick)
        t = tightness(name, time_limit=5.0 if quick else 8.0, **c)
        other = {k: v for k, v in c.items() if k not in ("rounds", "lr")}
        cur = curves(name, rounds=c["rounds"], lr=c["lr"], time_limit=2.0 if quick else 4.0,
                     known={c["rounds"]: t.worst_case}, **other)       # the last round: tightness's bracket
        lr_top = max([c["lr"], t.lr_threshold if math.isfinite(t.lr_threshold) else 0.0]
                     + [v for v in t.lr_conditions.values() if math.isfinite(v)]) * 1.5
        con = contraction_curve(name, lrs=np.linspace(lr_top / (8 if quick else 16), lr_top, 8 if quick else 16),
                                **other)
        meas = float(cur["measured"][-1])           # nan: the PEP declares no instances to run
        lo, hi = t.worst_case
        tol = 1e-6 * max(1.0, hi)
        unmeasured = math.isnan(meas)
        ok = (unmeasured or meas <= hi + tol) and hi <= t.bound
        cfg = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in c.items())
        if ok:
            verdict = (f"{OK}: worst case <= bound (nothing measured: the PEP declares no instances)" if unmeasured
                       else f"{OK}: measured <= worst case <= bound")
        elif meas > hi + tol:
            verdict = f"{UNEXPECTED}: measured > worst case"      # the PEP or the registered method is wrong
        elif lo <= t.bound:                                    # the bracket straddles the bound: no claim
            verdict = (f"{UNRESOLVED}: the worst case lies in [{lo:.6g}, {hi:.6g}], which contains the bound "
                       f"{t.bound:.6g} (a longer solve narrows it)")
        elif t.conditions_ok:
            verdict = f"{UNEXPECTED}: worst case > bound"         # a refutation of the theorem
        else:                                                  # the step is outside the theorem: no claim
            verdict = ("worst case > bound outside the theorem's conditions (no refutation): "
                       + "; ".join(map(str, t.failing_conditions)))
        rows.append(dict(theorem=name, case=f"tightness: {cfg}", kind="tightness", variant=t.variant,
                         conditions_ok=(f"{sum(c['lr'] <= v for v in t.lr_conditions.values())}/{len(t.lr_conditions)} "
                                        "step conditions" if t.lr_conditions else "-"), measured=meas,
                         stderr=math.nan, bound=t.bound, ratio=meas / t.bound, fitted_rate=math.nan,
                         predicted_rate=math.nan, verdict=verdict, failing_conditions="",
                         worst_case_lower=lo, worst_case_upper=hi, looseness=t.looseness))
        conds = "; ".join(f"{k}: lr <= {v:.4g}" for k, v in t.lr_conditions.items()) or "-"
        thr = f"{t.lr_threshold:.4g}" + ("" if t.lr_threshold_exact else " (lower estimate)")
        lines.append(f"| {name} | {cfg} | {meas:.4g} | [{lo:.6g}, {hi:.6g}] | {t.bound:.4g} | {t.looseness:.3g} | "
                     f"{t.exponent_ratio:.3g} | {thr} | {conds} | {t.function_class} | {t.solve_time:.1f} |")
        if out is not None:
            import matplotlib
            matplotlib.use("Agg")
            fname = f"tightness_{name.replace('.', '_')}.png"
            Path(out).mkdir(parents=True, exist_ok=True)
            save_figure(figure(t, cur, con), Path(out) / fname, dpi=130, pdf=True)     # as every report figure
            figs.append((name, fname))
        if echo is not None:
            echo(t.summary())
    reasons = [f"* `{n}`: {r}" for n, r in uncovered(theorems).items()]
    if not rows:                               # no covered theorem asked for: the reasons, not an empty table
        lines = lines[:2] + ["No theorem asked for has a PEP (docs/tightness.md):", ""]
    elif reasons:
        lines += ["", "Without a PEP (docs/tightness.md):", ""]
    lines += reasons
    lines.append("")
    for name, fname in figs:
        lines += [f"![{name}]({fname})", ""]
    return rows, lines
