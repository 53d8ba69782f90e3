"""Ground truth is certified or refused: checked against independent high-precision solvers
(exact rationals, mpmath), on badly scaled and degenerate data, and through the runner and the command line."""
import warnings
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

import fedtheory as ft
import problems
import validation
from fedtheory.exceptions import UncertifiedOptimumError, UncertifiedOptimumWarning
from fedtheory.truth import certificate

TOL = 1e-9


# ------------------------------------------------------------------ independent solvers (mpmath)
def _mp_weighted(p, dps):
    """The weighted rows, targets and row weights of p as mpmath numbers (exact copies of the floats)."""
    M = p.M.toarray() if p.sparse else np.asarray(p.M)
    w = np.repeat(p.weights / p.client_sizes, p.client_sizes)
    with mp.workdps(dps):
        return ([[mp.mpf(float(v)) for v in row] for row in M], [mp.mpf(float(v)) for v in p.b],
                [mp.mpf(float(v)) for v in w])


def exact_least_squares_fstar(p):
    """min_x sum_j w_j (a_j x - b_j)^2 / 2 + l2/2 ||x||^2 in exact rational arithmetic: the normal
    equations (consistent, singular or not) by Gauss-Jordan elimination over Fractions, free
    variables 0, then F at that solution. Data and row weights are the problem's floats."""
    M = p.M.toarray() if p.sparse else np.asarray(p.M)
    w = np.repeat(p.weights / p.client_sizes, p.client_sizes)
    d = p.dim
    rows = [[Fraction(float(v)) for v in row] for row in M]
    t = [Fraction(float(v)) for v in p.b]
    wf = [Fraction(float(v)) for v in w]
    l2 = Fraction(float(p.l2))
    H = [[sum(wj * r[i] * r[k] for r, wj in zip(rows, wf)) + (l2 if i == k else 0) for k in range(d)]
         for i in range(d)]
    c = [sum(wj * tj * r[i] for r, tj, wj in zip(rows, t, wf)) for i in range(d)]
    aug = [H[i] + [c[i]] for i in range(d)]
    pivots, row = [], 0
    for col in range(d):
        piv = next((i for i in range(row, d) if aug[i][col] != 0), None)
        if piv is None:
            continue
        aug[row], aug[piv] = aug[piv], aug[row]
        pv = aug[row][col]
        aug[row] = [v / pv for v in aug[row]]
        for i in range(d):
            if i != row and aug[i][col] != 0:
                f = aug[i][col]
                aug[i] = [a - f * b for a, b in zip(aug[i], aug[row])]
        pivots.append(col)
        row += 1
    x = [Fraction(0)] * d
    for i, col in enumerate(pivots):
        x[col] = aug[i][d]
    res = [sum(a * v for a, v in zip(r, x)) - tj for r, tj in zip(rows, t)]
    return sum(wj * v * v for wj, v in zip(wf, res)) / 2 + l2 / 2 * sum(v * v for v in x)


def _mp_newton(fgh, x, done, iters=100):
    """Damped Newton (Armijo backtracking) in mpmath from x until ``done(F, g)``; ``fgh(x)`` returns
    (F, gradient list, Hessian matrix)."""
    for _ in range(iters):
        F, g, H = fgh(x)
        if done(F, g):
            break
        step = mp.lu_solve(H, mp.matrix(g))
        dec = sum(g[i] * step[i] for i in range(len(g)))
        t = mp.mpf(1)
        for _ in range(400):
            xn = [xi - t * step[i] for i, xi in enumerate(x)]
            if fgh(xn)[0] <= F - t * dec / 10000:
                break
            t /= 2
        x = xn
    return x


def mp_logistic_fstar(p, x0, dps=60):
    """(F*, F* - lower): damped Newton from x0 at ``dps`` digits on logistic + l2, then the strong-convexity
    bracket F(x) - ||grad F(x)||^2 / (2 l2) <= F* <= F(x) at the polished point."""
    rows, t, w = _mp_weighted(p, dps)
    d = p.dim
    with mp.workdps(dps):
        l2 = mp.mpf(float(p.l2))

        def fgh(xm):
            F = l2 / 2 * sum(v * v for v in xm)
            g = [l2 * v for v in xm]
            H = mp.matrix(d, d)
            for k in range(d):
                H[k, k] = l2
            for row, tj, wj in zip(rows, t, w):
                z = sum(a * v for a, v in zip(row, xm))
                F += wj * mp.log1p(mp.exp(-tj * z))
                sig = 1 / (1 + mp.exp(tj * z))
                c2 = wj * sig * (1 - sig)
                for k, a in enumerate(row):
                    g[k] += wj * (-tj) * sig * a
                    for l, a2 in enumerate(row):
                        H[k, l] += c2 * a * a2
            return F, g, H

        def done(F, g):                          # the bracket is 1e-30 wide
            return sum(v * v for v in g) / (2 * l2) <= mp.mpf(10) ** -30 * max(1, abs(F))

        x = _mp_newton(fgh, [mp.mpf(float(v)) for v in x0], done)
        F, g, _ = fgh(x)
        return F, sum(v * v for v in g) / (2 * l2)


def mp_lasso_fstar(p, x0, dps=60):
    """(F*, proven): the lasso optimum at ``dps`` digits: Newton on the support and signs of x0, then
    the KKT conditions checked exactly (proven=True); when they fail (x0's support is not the
    optimum's), the duality gap at the point bounds F* instead (F* in [dual, primal])."""
    rows, t, w = _mp_weighted(p, dps)
    d = p.dim
    with mp.workdps(dps):
        lam, l2 = mp.mpf(float(p.l1)), mp.mpf(float(p.l2))
        A = [[mp.sqrt(wj) * v for v in row] for row, wj in zip(rows, w)]
        b = [mp.sqrt(wj) * tj for tj, wj in zip(t, w)]
        if p.l2:
            A += [[mp.sqrt(l2) if k == j else mp.mpf(0) for k in range(d)] for j in range(d)]
            b += [mp.mpf(0)] * d
        S = [k for k in range(d) if x0[k] != 0]
        sg = {k: mp.sign(mp.mpf(float(x0[k]))) for k in S}
        x = [mp.mpf(0)] * d
        if S:                                  # quadratic on the support: one exact solve
            As = mp.matrix([[row[k] for k in S] for row in A])
            rhs = As.T * mp.matrix(b) - mp.matrix([lam * sg[k] for k in S])
            try:
                z = mp.lu_solve(As.T * As, rhs)
                for i, k in enumerate(S):
                    x[k] = z[i]
            except ZeroDivisionError:
                x = [mp.mpf(float(v)) for v in x0]
        r = [bj - sum(a * v for a, v in zip(row, x)) for row, bj in zip(A, b)]
        c = [sum(A[j][k] * r[j] for j in range(len(A))) for k in range(d)]
        primal = sum(v * v for v in r) / 2 + lam * sum(abs(v) for v in x)
        slack = lam * mp.mpf(10) ** (-dps // 2)
        kkt = all((abs(c[k] - lam * sg[k]) <= slack and mp.sign(x[k]) == sg[k]) if k in sg
                  else abs(c[k]) <= lam + slack for k in range(d))
        if kkt:
            return primal, True
        g = max([abs(v) for v in c] + [mp.mpf(0)])
        th = [v / max(mp.mpf(1), g / lam) for v in r]
        dual = sum(bj * tj for bj, tj in zip(b, th)) - sum(v * v for v in th) / 2
        return (primal, dual), False


def _gt(p, **kw):
    """ground_truth with certify="warn", its warnings recorded: (gt, [messages])."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        gt = validation.ground_truth(p, cache=False, certify="warn", **kw)
    return gt, [str(w.message) for w in rec if issubclass(w.category, UncertifiedOptimumWarning)]


def _audit_data(scale):
    rng = np.random.default_rng(0)
    A = [rng.normal(size=(4, 3)) for _ in range(3)]
    b = [rng.normal(size=4) for _ in range(3)]
    A[1][0] *= scale
    return A, b


# ------------------------------------------------------------------ the audit's two cases
def test_ill_conditioned_least_squares_is_right_to_1e9():
    """One row scaled by 1e10: the old solver (CVXPY + Newton) returned 0.58917 with residual 0.08
    and no warning; the exact F* is 0.5820215314404840..."""
    p = problems.least_squares(*_audit_data(1e10))
    gt = validation.ground_truth(p, cache=False)
    exact = exact_least_squares_fstar(p)
    assert gt.certified and gt.reason == ""
    assert abs(gt.f - float(exact)) <= TOL * max(1.0, abs(float(exact)))
    s = 1e-15 * max(1.0, abs(gt.f))
    assert gt.f_lower - s <= float(exact) <= gt.f_upper + s
    assert gt.f_upper - gt.f_lower <= TOL * max(1.0, abs(gt.f))
    assert gt.f <= p.value(np.zeros(p.dim))
    for i in range(p.n_clients):                            # every client optimum too
        sub = problems.least_squares([_audit_data(1e10)[0][i]], [_audit_data(1e10)[1][i]])
        ex = float(exact_least_squares_fstar(sub))
        assert abs(gt.client_f[i] - ex) <= TOL * max(1.0, abs(ex))


def test_row_scaled_1e150_is_refused_naming_least_squares():
    """Scaled by 1e150, F cannot be evaluated in double precision near x*: refused, and the message
    names the least-squares problem, the residual and the reason (never separable logistic data)."""
    p = problems.least_squares(*_audit_data(1e150))
    with pytest.raises(UncertifiedOptimumError) as e:
        validation.ground_truth(p, cache=False)
    msg = str(e.value)
    assert "least_squares datafit" in msg and "residual" in msg and "not certified" in msg
    assert "logistic" not in msg and "separable" not in msg
    gt, msgs = _gt(p)
    assert not gt.certified and gt.reason and len(msgs) == 1 and "least_squares datafit" in msgs[0]
    assert "separable" not in msgs[0]


def test_runner_shows_uncertified_reference_as_nan():
    """A run against an uncertified reference: suboptimality and dist_sq NaN in every row, the
    run is not declared diverged, and the history says the reference is not certified."""
    p = problems.least_squares(*_audit_data(1e150))
    gt, _ = _gt(p, clients=False)
    res = ft.run(p, "fedavg", rounds=4, local_steps=2, lr=1e-310, reference=gt, eval_every=2)
    h = res.history
    assert res.status == "max_rounds" and len(h) == 3
    assert h.suboptimality.isna().all() and h.dist_sq.isna().all()
    assert (h.reference_certified == False).all()          # noqa: E712


def test_runner_never_reports_negative_suboptimality():
    """Run to convergence: F(x) ends within the reference's accuracy of F*, where suboptimality
    is reported as 0, never below."""
    p = problems.quadratic(4, 3, heterogeneity=1.0, seed=0)
    gt = validation.ground_truth(p, cache=False)
    res = ft.run(p, "scaffold", rounds=300, local_steps=5, lr=0.1, reference=gt, eval_every=20)
    h = res.history
    assert (h.suboptimality >= 0).all() and h.reference_certified.all()
    assert h.suboptimality.iloc[-1] <= 1e-12


def test_reference_above_an_evaluated_value_is_caught():
    """F* above F at a point a run evaluates is impossible: the run raises, naming both values."""
    p = problems.quadratic(4, 3, heterogeneity=1.0, seed=0)
    gt = validation.ground_truth(p, cache=False)
    wrong = validation.GroundTruth(x=gt.x, f=gt.f + 0.1, residual=0.0, client_f=gt.client_f,
                                   client_x=gt.client_x, client_residual=gt.client_residual,
                                   client_attained=gt.client_attained, f_lower=gt.f + 0.1, f_upper=gt.f + 0.1)
    with pytest.raises(UncertifiedOptimumError, match="lies below the reference optimum"):
        ft.run(p, "fedavg", rounds=200, local_steps=5, lr=0.1, reference=wrong, eval_every=50)


def test_f_star_above_f_at_zero_is_refused():
    """The verdict refuses an F* above F(0) (what the old solver returned at 1e150: 7.7e270)."""
    ok, why = certificate.verdict(f=7.7e270, f0=1.42, f_lower=np.nan, f_upper=7.7e270, rel_residual=0.0,
                                  f_err=0.0, tol=TOL)
    assert not ok and "above F(0)" in why


def test_certify_and_tol_are_validated():
    p = problems.quadratic(4, 3, seed=0)
    with pytest.raises(ft.InvalidParameterError, match=r"'certify' parameter of ground_truth .* Got 'no'"):
        validation.ground_truth(p, cache=False, certify="no")
    with pytest.raises(ft.InvalidParameterError, match=r"'tol' parameter of ground_truth must be a float in the range \(0, 1\)"):
        validation.ground_truth(p, cache=False, tol=0.0)


def test_cached_entry_keeps_its_certificate(tmp_path):
    p = problems.least_squares(*_audit_data(1e10))
    a = validation.ground_truth(p, cache_dir=tmp_path)
    b = validation.ground_truth(p, cache_dir=tmp_path)
    assert b.info["cached"] and b.certified
    assert (b.f, b.f_lower, b.f_upper, b.tol) == (a.f, a.f_lower, a.f_upper, a.tol)


def test_uncertified_results_are_not_cached(tmp_path):
    p = problems.least_squares(*_audit_data(1e150))
    _gt_cached = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedOptimumWarning)
        _gt_cached = validation.ground_truth(p, cache_dir=tmp_path, certify="warn")
    assert not _gt_cached.certified and not list(tmp_path.glob("*.npz"))


# ------------------------------------------------------------------ property tests
def _scaled_clients(draw, d, kind):
    n = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    A, b = [], []
    for _ in range(n):
        m = draw(st.integers(1, 6))
        a = rng.normal(size=(m, d))
        if draw(st.booleans()):                        # one row per client badly scaled
            a[0] *= 10.0 ** draw(st.integers(-8, 12))
        if draw(st.booleans()) and m > 1:              # a client with identical rows
            a[:] = a[0]
        A.append(a)
        b.append(np.where(rng.random(m) < 0.5, -1.0, 1.0) if kind == "logistic" else rng.normal(size=m))
    if d > 1 and draw(st.booleans()):                  # duplicated column
        for a in A:
            a[:, d - 1] = a[:, 0]
    if d > 1 and draw(st.booleans()):                  # zero column
        for a in A:
            a[:, 1 % d] = 0.0
    return A, b


@st.composite
def least_squares_problems(draw):
    d = draw(st.integers(1, 8))
    A, b = _scaled_clients(draw, d, "ls")
    l2 = draw(st.sampled_from([0.0, 0.0, 1e-12, 1.0, 1e6]))
    return problems.least_squares(A, b, l2=l2)


@st.composite
def logistic_problems(draw):
    d = draw(st.integers(1, 8))
    A, b = _scaled_clients(draw, d, "logistic")
    return problems.logistic(A, b, l2=draw(st.sampled_from([1e-12, 1e-3, 1.0, 1e6])))


@st.composite
def lasso_problems(draw):
    d = draw(st.integers(1, 8))
    A, b = _scaled_clients(draw, d, "ls")
    return problems.lasso(A, b, l1=draw(st.sampled_from([1e-6, 0.1, 10.0])),
                          l2=draw(st.sampled_from([0.0, 1e-3])))


def _refused_cleanly(gt, msgs, datafit):
    assert not gt.certified and gt.reason
    assert len(msgs) == 1 and f"{datafit} datafit" in msgs[0] and "residual" in msgs[0]
    if datafit != "logistic":
        assert "separable" not in msgs[0]


@settings(max_examples=25, deadline=None)
@given(least_squares_problems())
@example(problems.least_squares(*_audit_data(1e10)))
def test_least_squares_certified_or_refused(p):
    """Certified: F* agrees with the exact rational solution to tol, inside the stated bracket."""
    gt, msgs = _gt(p, clients=False)
    if not gt.certified:
        _refused_cleanly(gt, msgs, "least_squares")
        return
    exact = float(exact_least_squares_fstar(p))
    s = max(1.0, abs(exact))
    assert abs(gt.f - exact) <= TOL * s
    assert gt.f_lower - 1e-15 * s <= exact <= gt.f_upper + 1e-15 * s


@settings(max_examples=20, deadline=None)
@given(logistic_problems())
def test_logistic_certified_or_refused(p):
    """Certified: Newton at 60 digits from x*, whose gradient bounds F* to 1e-30, agrees with gt.f."""
    gt, msgs = _gt(p, clients=False)
    if not gt.certified:
        _refused_cleanly(gt, msgs, "logistic")
        return
    F, width = mp_logistic_fstar(p, gt.x)
    exact, s = float(F), max(1.0, abs(float(F)))
    assert float(width) <= 1e-20 * s                    # the independent value is proven
    assert abs(gt.f - exact) <= TOL * s
    assert gt.f_lower - 1e-15 * s <= exact <= gt.f_upper + 1e-15 * s


@settings(max_examples=15, deadline=None)
@given(lasso_problems())
def test_lasso_certified_or_refused(p):
    """Certified: the optimum at 60 digits (Newton on the support, KKT checked exactly) agrees with
    gt.f to tol, inside the stated bracket."""
    gt, msgs = _gt(p, clients=False)
    if not gt.certified:
        _refused_cleanly(gt, msgs, "least_squares")
        return
    F, proven = mp_lasso_fstar(p, gt.x)
    if proven:
        exact, s = float(F), max(1.0, abs(float(F)))
        assert abs(gt.f - exact) <= TOL * s
        assert gt.f_lower - 1e-15 * s <= exact <= gt.f_upper + 1e-15 * s
    else:                                               # only a bracket [dual, primal] is proven
        hi, lo = (float(v) for v in F)
        s = max(1.0, abs(hi))
        assert lo - TOL * s <= gt.f <= hi + TOL * s


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(least_squares_problems())
def test_least_squares_certified_or_refused_large_search(p):
    test_least_squares_certified_or_refused.hypothesis.inner_test(p)


def test_well_scaled_problems_are_certified():
    """Refusal is for bad data only: ordinary problems of each class are certified, with a bracket."""
    rng = np.random.default_rng(1)
    A = [rng.normal(size=(6, 4)) for _ in range(3)]
    y = [np.where(rng.random(6) < 0.5, -1.0, 1.0) for _ in range(3)]
    b = [rng.normal(size=6) for _ in range(3)]
    for p in (problems.least_squares(A, b), problems.logistic(A, y, l2=1e-3), problems.lasso(A, b, l1=0.1),
              problems.quadratic(5, 4, seed=0)):
        gt = validation.ground_truth(p, cache=False)
        assert gt.certified and np.isfinite(gt.f_lower), p.name
        assert gt.f_upper - gt.f_lower <= TOL * max(1.0, abs(gt.f))


# ------------------------------------------------------------------ command line
def _toml(tmp_path, scale):
    A, b = _audit_data(scale)
    cfg = tmp_path / f"ls{scale:g}.toml"
    cfg.write_text('[problem]\nfactory = "least_squares"\n'
                   f"A = {[a.tolist() for a in A]!r}\nb = {[v.tolist() for v in b]!r}\n"
                   '[run]\nalgorithm = "fedavg"\nrounds = 6\nlocal_steps = 2\nlr = 1e-25\neval_every = 3\n'
                   "reference = true\n")
    return str(cfg)


def test_cli_run_states_the_certification(tmp_path, capsys):
    from fedtheory.__main__ import main
    assert main(["run", _toml(tmp_path, 1e10), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "reference: F* = 0.58202153144048" in out and "certified to 1e-09" in out and "QR residual" in out
    table = out[out.index(" round"):].splitlines()
    sub = [float(line.split()[2]) for line in table[1:]]
    assert len(sub) == 3 and min(sub) > 0.07           # lr ~ 0: F(x) stays F(0) = 0.655, F* = 0.582


def test_cli_run_refuses_an_uncertified_reference_in_one_line(tmp_path, capsys):
    from fedtheory.__main__ import main
    assert main(["run", _toml(tmp_path, 1e150), "--quiet"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and len(cap.err.strip().splitlines()) == 1
    assert "not certified" in cap.err and "least_squares datafit" in cap.err and "separable" not in cap.err


# ------------------------------------------------------------------ constants on degenerate data
def _degenerate(kind, datafit="least_squares"):
    rng = np.random.default_rng(3)
    A = [rng.normal(size=(6, 3)) for _ in range(2)]
    b = [rng.normal(size=6) for _ in range(2)]
    if kind == "zero column":
        for a in A:
            a[:, 1] = 0.0
    elif kind == "duplicated column":
        for a in A:
            a[:, 2] = a[:, 0]
    elif kind == "identical rows":
        A[0][:] = A[0][0]
    elif kind == "all zero":
        A = [np.zeros_like(a) for a in A]
    elif kind.startswith("scale "):
        A = [a * float(kind[6:]) for a in A]
    if datafit == "logistic":
        return problems.logistic(A, [np.where(v > 0, 1.0, -1.0) for v in b], l2=1e-3)
    return problems.least_squares(A, b)


@pytest.mark.parametrize("datafit", ["least_squares", "logistic"])
@pytest.mark.parametrize("kind", ["zero column", "duplicated column", "identical rows", "all zero",
                                  "scale 1e77", "scale 1e-150", "scale 1e160", "scale 1e-200"])
def test_constants_on_degenerate_data(kind, datafit):
    """A correct value or an error naming the problem and the reason: never a bare LinAlgError or
    OverflowError. Checked: mu = 0 exactly when the problem is not strongly convex, and L, mu
    scale as the square of the data."""
    p = _degenerate(kind, datafit)
    try:
        c = validation.constants(p)
    except (UncertifiedOptimumError, ft.DataError) as e:
        assert f"{datafit} datafit" in str(e) and ("not certified" in str(e) or "rescale the data" in str(e))
        assert kind.startswith("scale ")                      # the other degeneracies get values
        return
    ref = validation.constants(_degenerate("none", datafit))
    assert np.isfinite(c.L) and c.L >= 0 and np.isfinite(c.f_star)
    if datafit == "least_squares" and kind in ("zero column", "duplicated column", "all zero"):
        assert c.mu == 0.0 and c.kappa == np.inf              # not strongly convex
    else:
        assert c.mu > 0
    if kind.startswith("scale ") and datafit == "least_squares":
        s2 = float(kind[6:]) ** 2
        assert c.L == pytest.approx(ref.L * s2, rel=1e-9) and c.mu == pytest.approx(ref.mu * s2, rel=1e-6)
        assert c.f_star == pytest.approx(ref.f_star, rel=1e-9)   # F* does not depend on the scale
        assert c.gradient_diversity_kind == ref.gradient_diversity_kind
        assert c.sigma_g_sq_kind == ref.sigma_g_sq_kind
    if kind == "all zero" and datafit == "least_squares":
        assert c.L == 0 and c.zeta_star_sq == 0 and c.gradient_diversity == 1.0


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), power=st.integers(-3, 3), col=st.integers(0, 2))
def test_least_squares_with_a_column_an_exact_multiple_of_another_is_certified(seed, power, col):
    """A column that is exactly 2^k times another (a unit change of one feature): the span is that of
    the data without it, so F* is theirs, certified (it was refused: QR met a rounding-level pivot
    along a direction the data do not have, and the refusal advised rescaling the data)."""
    from fedtheory.components import LeastSquares
    from fedtheory.problem import FederatedProblem
    rng = np.random.default_rng(seed)
    A = [rng.standard_normal((8, 3)) for _ in range(2)]
    b = [rng.standard_normal(8) for _ in range(2)]
    wide = [np.hstack([a, 2.0 ** power * a[:, [col]]]) for a in A]
    base = validation.ground_truth(FederatedProblem.from_clients(A, b, LeastSquares()), cache=False, clients=False)
    gt = validation.ground_truth(FederatedProblem.from_clients(wide, b, LeastSquares()), cache=False, clients=False)
    assert gt.certified, gt.reason
    assert abs(gt.f - base.f) <= 1e-14 * abs(base.f)


# ------------------------------------------------ exact linear dependencies (one-hot designs)
def _dependent_design(seed, n_base, n_dep, denom, power, rows):
    """Integer columns, and columns that are exactly sum_i p_i c_i / denom (the base columns are
    multiples of denom, so every entry is an integer), all times 2^power, columns shuffled."""
    rng = np.random.default_rng(seed)
    base = denom * rng.integers(-3, 4, size=(rows, n_base)).astype(float)
    coef = rng.integers(-2, 3, size=(n_base, n_dep)).astype(float)
    dep = base @ coef / denom                               # exact: small integers
    A = np.hstack([base, dep])[:, rng.permutation(n_base + n_dep)] * 2.0 ** power
    return A, rng.standard_normal(rows)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_base=st.integers(1, 4), n_dep=st.integers(1, 3),
       denom=st.sampled_from([1, 3, 7]), power=st.integers(-4, 4), clients=st.integers(1, 3))
def test_least_squares_with_exact_linear_dependencies_is_certified_to_the_exact_optimum(
        seed, n_base, n_dep, denom, power, clients):
    """Columns that are exactly a rational combination of others (one-hot groups of LIBSVM data sum
    to the same column): F* is that of the data without them. It was refused ("F cannot be
    evaluated ... rounding error up to 312") because QR met a rounding-level pivot along a direction
    the data do not have. Checked against F* in exact rational arithmetic (singular normal
    equations solved over Fractions), for F and every client's optimum."""
    rows = 6 * clients
    A, b = _dependent_design(seed, n_base, n_dep, denom, power, rows)
    p = problems.least_squares(np.array_split(A, clients), np.array_split(b, clients))
    gt = validation.ground_truth(p, cache=False)
    exact = float(exact_least_squares_fstar(p))
    assert gt.certified, gt.reason
    assert abs(gt.f - exact) <= TOL * max(1.0, abs(exact))
    s = 1e-15 * max(1.0, abs(exact))
    assert gt.f_lower - s <= exact <= gt.f_upper + s
    for i, (Ai, bi) in enumerate(zip(np.array_split(A, clients), np.array_split(b, clients))):
        ex = float(exact_least_squares_fstar(problems.least_squares([Ai], [bi])))
        assert abs(gt.client_f[i] - ex) <= TOL * max(1.0, abs(ex))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), c1=st.sampled_from([1.0, 0.1, 1 / 3, -2.5]),
       c2=st.sampled_from([1.0, 0.7, -1 / 7]))
def test_a_column_equal_to_a_combination_only_after_rounding_is_never_dropped(seed, c1, c2):
    """a_3 = fl(c1 a_1 + c2 a_2) is a combination in floating point but not exactly: its direction is
    in the data (a singular value near 1e-16), so dropping it could overstate F*. It is kept, unless
    the rounded column happens to be an exact combination; whatever is certified holds against F*
    in exact arithmetic."""
    from fedtheory.truth.exact import _drop_exact_combinations
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((12, 2))
    col = c1 * A[:, 0] + c2 * A[:, 1]
    A = np.hstack([A, col[:, None]])
    exact_dep = all(Fraction(float(v)) == Fraction(c1).limit_denominator(4096) * Fraction(float(a0))
                    + Fraction(c2).limit_denominator(4096) * Fraction(float(a1)) for v, a0, a1 in zip(col, *A[:, :2].T))
    kept = _drop_exact_combinations(A, np.arange(3))
    assert kept.size == (2 if exact_dep else 3)
    p = problems.least_squares([A[:6], A[6:]], [rng.standard_normal(6), rng.standard_normal(6)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncertifiedOptimumWarning)
        gt = validation.ground_truth(p, cache=False, certify="warn", clients=False)
    assert "rescale the data; rescale the data" not in gt.reason
    if gt.certified:
        exact = float(exact_least_squares_fstar(p))
        s = 1e-15 * max(1.0, abs(exact))
        assert gt.f_lower - s <= exact <= gt.f_upper + s


def test_least_squares_on_a9a_one_hot_features_is_certified(data_dir):
    """a9a's features are one-hot groups (each group sums to the all-ones column, so the groups are
    exactly dependent): its least-squares F* is certified, and agrees with NumPy's SVD
    least-squares solution (an independent solver), its F evaluated in extended precision."""
    q = problems.libsvm("a9a", n_clients=4, data_dir=data_dir, max_samples=1000)
    M = q.M.toarray()
    b = np.asarray(q.b, dtype=np.float64)
    parts = np.array_split(np.arange(M.shape[0]), 4)
    p = problems.least_squares([M[i] for i in parts], [b[i] for i in parts])
    gt = validation.ground_truth(p, cache=False, clients=False)
    assert gt.certified, gt.reason
    Mo, bo = np.vstack([M[i] for i in parts]), np.concatenate([b[i] for i in parts])
    w = np.repeat(p.weights / p.client_sizes, p.client_sizes)
    sw = np.sqrt(w)
    x = np.linalg.lstsq(Mo * sw[:, None], bo * sw, rcond=None)[0]
    r = Mo.astype(np.longdouble) @ x.astype(np.longdouble) - bo
    f_svd = float(0.5 * np.sum(w * r * r))
    assert np.linalg.matrix_rank(Mo) < np.count_nonzero(np.any(Mo != 0, axis=0))    # really rank-deficient
    assert abs(gt.f - f_svd) <= 1e-10 * max(1.0, abs(f_svd))
    assert gt.f_lower <= f_svd + 1e-15


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_base=st.integers(1, 3), n_dep=st.integers(1, 2),
       denom=st.sampled_from([1, 3]), power=st.integers(-2, 2))
def test_logistic_with_exact_linear_dependencies_is_certified(seed, n_base, n_dep, denom, power):
    """Logistic regression without ridge on exactly dependent columns (one-hot groups): F is constant
    along the dependencies, so F* is that of the data without the dependent columns. It was refused:
    the search of the Hessian's flat directions stepped 1e12 along them and took the rounding of
    the margins for a decrease of F ("the minimiser lies far along it or is not attained"). Every
    row also appears with the opposite label, so a minimiser exists."""
    A, _ = _dependent_design(seed, n_base, n_dep, denom, power, 8)
    rng = np.random.default_rng(seed + 1)
    extra = A[rng.integers(0, 8, size=6)]
    X = np.vstack([A, A, extra])
    y = np.concatenate([np.ones(8), -np.ones(8), rng.choice([-1.0, 1.0], size=6)])
    independent = [j for j in range(X.shape[1]) if np.linalg.matrix_rank(X[:, :j + 1]) > np.linalg.matrix_rank(X[:, :j])]
    gt = validation.ground_truth(problems.logistic([X[:11], X[11:]], [y[:11], y[11:]]), cache=False,
                                 clients=False)
    ref = validation.ground_truth(problems.logistic([X[:11, independent], X[11:, independent]], [y[:11], y[11:]]),
                                  cache=False, clients=False)
    assert gt.certified, gt.reason
    assert ref.certified, ref.reason
    assert abs(gt.f - ref.f) <= TOL * max(1.0, abs(ref.f))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), rows=st.integers(1, 6), dim=st.integers(1, 4), clients=st.integers(1, 3),
       scale=st.sampled_from([1e-3, 1.0, 1e3]))
def test_logistic_whose_optimum_is_exactly_zero_is_certified(seed, rows, dim, clients, scale):
    """Every row with both labels: the two losses log(1 + e^-z) + log(1 + e^z) are least at z = 0,
    so x* = 0 and F* = log 2 exactly. It was refused ("the relative KKT residual 1 exceeds 1e-10"):
    the gradient at 0 is a rounding residue (or exactly 0), and the residual was measured relative
    to it; it is now measured against the size of the gradient's terms."""
    rng = np.random.default_rng(seed)
    A = [scale * rng.standard_normal((rows, dim)) for _ in range(clients)]
    X = [np.vstack([a, a]) for a in A]
    y = [np.concatenate([np.ones(rows), -np.ones(rows)]) for _ in range(clients)]
    gt = validation.ground_truth(problems.logistic(X, y), cache=False)
    assert gt.certified, gt.reason
    assert abs(gt.f - np.log(2.0)) <= TOL
    assert np.all(np.abs(np.asarray(gt.client_f) - np.log(2.0)) <= TOL)
