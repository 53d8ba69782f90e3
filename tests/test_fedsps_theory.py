"""FedSPS theorems as code (fedtheory.theory.fedsps): 3(a), 3(b), 6(a), 6(b), 18, measured on ft.run."""
import math

import numpy as np
import pytest

import fedtheory as ft
import problems
import validation
from fedtheory.theory import fedsps as th
from fedtheory.theory import fedsps_quantities as fq
from fedtheory.theory import fedsps_theorem6 as th6
from test_update_rules import _data

NAMES = ("fedsps.theorem_3a", "fedsps.theorem_3b", "fedsps.theorem_6a", "fedsps.theorem_6b", "fedsps.theorem_18")


def _interp_lb(p):
    return [p.client_value(i, p.info["x_star"]) for i in range(p.n_clients)]


def _small_kwargs(name, p):
    """Small, valid parameters of each theorem on a quadratic with n = 4, d = 3."""
    if name in ("fedsps.theorem_3a", "fedsps.theorem_3b"):
        return dict(rounds=10, local_steps=2, lower_bound=_interp_lb(p), seeds=1, x0=np.ones(3))
    if name == "fedsps.theorem_6b":
        return dict(rounds=50, local_steps=2, seeds=1, x0=np.ones(3))
    return dict(rounds=10, local_steps=2, seeds=1, x0=np.ones(3))


# ------------------------------------------------------------------ the measured algorithm --
def test_every_theorem_is_a_spec_measured_on_the_registered_fedsps():
    shared = problems.quadratic(4, 3, L=1.0, mu=0.3, heterogeneity=0.5, noise=0.2, seed=2)
    interp = th.interpolating_quadratic(0)
    for name in NAMES:
        p = shared if name == "fedsps.theorem_18" else interp
        v = validation.verify(name, p, **_small_kwargs(name, p))
        assert v.applicable, v.report()
        assert v.algorithm == "fedsps" and len(v.runs) == 1
        assert np.array_equal(ft.run(p, v.algorithm, **v.run_kwargs).x, v.runs[0].x), name
        assert v.run_kwargs.get("clients_per_round") is None            # full participation, as stated
        assert not hasattr(th, "simulate")


def test_virtual_average_at_round_ends_is_the_server_model():
    A, b = _data("logistic", False, seed=21)
    p = problems.logistic(A, b, l2=0.01)
    res = ft.run(p, "fedsps", rounds=6, local_steps=3, c=0.5, gamma_b=2.0, trace="local")
    xb = fq.virtual_averages(res)
    assert xb.shape == (18, p.dim)
    for r in range(1, 6):
        assert np.abs(xb[3 * r] - res.trace[r].x).max() <= 1e-14      # t = r tau: x_t^i = xbar_t = x^r


# ------------------------------------------------- left-hand sides computed by hand from traces --
def _logistic_loss(a, y, x, l2):
    """Mean logistic loss of the rows (a, y) at x plus the ridge term, written out."""
    tot = 0.0
    for aj, yj in zip(a, y):
        tot += math.log(1.0 + math.exp(-yj * sum(aj[k] * x[k] for k in range(len(x)))))
    return tot / len(y) + 0.5 * l2 * sum(v * v for v in x)


def test_theorem_3a_lhs_equals_hand_computation_from_the_trace():
    """Tiny logistic problem with minibatches: the printed LHS (f_i at local iterates), the pathwise
    LHS (F_i on the drawn rows) and sigma_hat, recomputed by hand from an independent run."""
    A, b = _data("logistic", False, seed=22, n=3, d=2)
    l2, tau, R, B = 0.05, 2, 4, 3
    p = problems.logistic(A, b, l2=l2)
    v = validation.verify("fedsps.theorem_3a", p, rounds=R, local_steps=tau, gamma_b=1.0, batch_size=B, seeds=2)
    vp = validation.verify("fedsps.theorem_3a", p, rounds=R, local_steps=tau, gamma_b=1.0, batch_size=B, seeds=2,
                           variant="corrected", measurement=v.details["measurement"])
    assert v.applicable and vp.applicable
    offsets = np.concatenate([[0], np.cumsum([a.shape[0] for a in A])])
    rows_all = np.vstack(A)
    y_all = np.concatenate(b)
    xs = v.details["x_star"]
    lhs, path, sig = [], [], []
    for seed in range(2):
        res = ft.run(p, "fedsps", rounds=R, local_steps=tau, c=2.0 * tau ** 2, gamma_b=1.0, lower_bound=0.0,
                     batch_size=B, seed=seed, trace=("local",))
        a_tot = p_tot = s_tot = 0.0
        for rt in res.trace:
            for i in range(3):
                for k in range(tau):
                    x = rt["local"][i, k]
                    rows = rt.idx[i, k]
                    assert np.all((rows >= offsets[i]) & (rows < offsets[i + 1]))
                    a_tot += _logistic_loss(A[i], b[i], x, l2)
                    p_tot += _logistic_loss(rows_all[rows], y_all[rows], x, l2)
                    s_tot += _logistic_loss(rows_all[rows], y_all[rows], xs, l2)
        lhs.append(a_tot / (R * tau * 3))
        path.append(p_tot / (R * tau * 3))
        sig.append(s_tot / (R * tau * 3))
    assert v.measured == pytest.approx(np.mean(lhs), rel=1e-12)
    assert v.stderr == pytest.approx(np.std(lhs, ddof=1) / math.sqrt(2), rel=1e-9)
    alpha, D0, T = v.details["alpha"], v.details["D0"], R * tau
    bounds = [2 * D0 / (T * alpha) + 4 * 1.0 / alpha * s for s in sig]
    worst = int(np.argmax(np.array(path) / np.array(bounds)))
    assert vp.measured == pytest.approx(path[worst], rel=1e-12)
    assert vp.bound == pytest.approx(bounds[worst], rel=1e-12)
    assert v.details["pathwise"]["path_lhs"] == pytest.approx(path, rel=1e-12)


def test_theorem_6a_and_18_lhs_equal_hand_computation_from_the_trace():
    """x̄_t as the plain mean of the traced local iterates, f and grad f from the quadratic's data."""
    Q = np.array([np.diag([1.0, 0.5]), np.diag([0.4, 1.2]), np.diag([0.8, 0.9])])
    C = np.array([[1.0, -0.5], [0.3, 0.2], [-0.7, 1.1]])
    p = problems.explicit_quadratic(Q, C)
    R, tau = 5, 3
    v = validation.verify("fedsps.theorem_6a", p, rounds=R, local_steps=tau, x0=[2.0, -1.0])
    res = ft.run(p, "fedsps", **v.run_kwargs)
    f = lambda x: sum((0.5 * x @ Q[i] @ x - C[i] @ x) / 3 for i in range(3))      # noqa: E731
    f_star = f(np.linalg.solve(Q.sum(0), C.sum(0)))
    gaps = []
    for rt in res.trace:
        for k in range(tau):
            xbar = (rt["local"][0, k] + rt["local"][1, k] + rt["local"][2, k]) / 3
            gaps.append(f(xbar) - f_star)
    assert len(gaps) == R * tau
    assert v.measured == pytest.approx(sum(gaps) / len(gaps), rel=1e-10)

    A = np.diag([0.6, 1.0])
    Cs = np.array([[0.5, -0.2], [-0.1, 0.4], [0.3, 0.3], [-0.6, 0.1]])
    p = problems.explicit_quadratic(A, Cs, noise=0.3)
    v = validation.verify("fedsps.theorem_18", p, rounds=R, local_steps=tau, seeds=2, x0=[1.0, 1.0],
                          lower_bound=-10.0)
    vals = []
    for seed in range(2):
        res = ft.run(p, "fedsps", **dict(v.run_kwargs, seed=seed))
        tot = 0.0
        for rt in res.trace:
            for k in range(tau):
                xbar = sum(rt["local"][i, k] for i in range(4)) / 4
                g = A @ xbar - Cs.mean(0)
                tot += float(g @ g)
        vals.append(tot / (R * tau))
    assert v.measured == pytest.approx(np.mean(vals), rel=1e-10)


# --------------------------------------------------- fix (b): noise; fix (g): client weights --
@pytest.mark.parametrize("name", ["fedsps.theorem_3a", "fedsps.theorem_3b", "fedsps.theorem_6a",
                                  "fedsps.theorem_6b"])
def test_additive_gradient_noise_is_not_applicable(name):
    """With a noisy oracle the sampled loss is unbounded below (F_i* = -inf): no valid ell_i*, no
    interpolation; the noise-free f_i* the bound would use is not the algorithm's."""
    p = problems.quadratic(4, 3, L=1.0, mu=0.3, shared_minimizer=True, hessian="distinct", seed=0, noise=0.1)
    v = validation.verify(name, p, **_small_kwargs(name, p))
    assert not v.applicable
    assert "noise" in v.reason
    bad = [c for c in v.conditions if not c.ok]
    assert any("noise" in c.name and c.role == "stated" and c.value == 0.1 for c in bad), v.report()
    clean = problems.quadratic(4, 3, L=1.0, mu=0.3, shared_minimizer=True, hessian="distinct", seed=0)
    assert validation.verify(name, clean, **_small_kwargs(name, clean)).applicable


@pytest.mark.parametrize("name", NAMES)
def test_non_uniform_client_weights_are_not_applicable(name):
    kw = dict(L=1.0, mu=0.3, heterogeneity=0.5, seed=2) if name == "fedsps.theorem_18" else \
        dict(L=1.0, mu=0.3, shared_minimizer=True, hessian="distinct", seed=0)
    p = problems.quadratic(4, 3, weights=[1.0, 2.0, 3.0, 4.0], **kw)
    v = validation.verify(name, p, **_small_kwargs(name, p))
    assert not v.applicable
    assert "uniform client weights" in v.reason
    bad = [c for c in v.conditions if not c.ok]
    assert any("uniform client weights" in c.name and c.role == "stated" for c in bad), v.report()
    uniform = problems.quadratic(4, 3, **kw)
    assert validation.verify(name, uniform, **_small_kwargs(name, uniform)).applicable


# ------------------------------------------------------------------------ verdicts --
def test_theorem_3a_and_3b_hold_on_interpolating_quadratics():
    p = th.interpolating_quadratic(0)
    lb = _interp_lb(p)
    for variant in ("printed", "corrected"):
        v = validation.verify("fedsps.theorem_3a", p, rounds=30, local_steps=2, lower_bound=lb, seeds=2,
                              x0=np.ones(3), variant=variant)
        assert v.applicable and v.holds, v.report()
        assert any(c.name == "c >= 2 tau^2" for c in v.conditions)
        lemma14 = [c for c in v.conditions if c.name.startswith("Lemma 14")]
        assert lemma14 and lemma14[0].ok and lemma14[0].role == "informational"
    p = th.interpolating_quadratic(1)
    v = validation.verify("fedsps.theorem_3b", p, rounds=40, local_steps=2, gamma_b=1.0, lower_bound=_interp_lb(p),
                          seeds=1, x0=np.ones(3))
    assert v.applicable and v.holds, v.report()
    assert v.measured < 0.5 * v.details["D0"]     # Corollary 5: contraction towards x*
    assert v.measured == pytest.approx(float(np.sum((v.runs[0].x - v.details["x_star"]) ** 2)), rel=1e-10)


def test_theorem_3a_pathwise_on_logistic_minibatches():
    """The pathwise form (eq. 31) holds on every seed for ridge logistic regression with minibatches."""
    A, b = _data("logistic", False, seed=22, n=4)
    p = problems.logistic(A, b, l2=0.05)
    for tau in (1, 2):
        v = validation.verify("fedsps.theorem_3a", p, rounds=15, local_steps=tau, gamma_b=1.0, batch_size=4,
                              seeds=3, variant="corrected")
        assert v.applicable and v.holds, v.report()
        pw = v.details["pathwise"]
        assert all(lh <= bd for lh, bd in zip(pw["path_lhs"], pw["path_bounds"]))
        assert v.runs[0].trace[0].idx.shape == (4, tau, 4)                # the drawn rows were used


def test_theorem_3_conditions_reported():
    p = th.interpolating_quadratic(0)
    v = validation.verify("fedsps.theorem_3a", p, rounds=5, local_steps=3, c=0.5, lower_bound=0.0, seeds=1)
    assert not v.applicable
    assert "c >= 2 tau^2" in v.reason and "ell_i* <= f_i*" in v.reason     # 0 is not a lower bound here
    lb = _interp_lb(p)
    v = validation.verify("fedsps.theorem_3b", p, rounds=5, local_steps=1, gamma_b=100.0, lower_bound=lb, seeds=1)
    printed = validation.verify("fedsps.theorem_3b", p, rounds=5, local_steps=1, gamma_b=100.0, variant="printed",
                                lower_bound=lb, seeds=1)
    assert printed.applicable and not v.applicable and "gamma_b <= 1/(2 mu)" in v.reason
    assert [c.role for c in v.conditions if not c.ok] == ["hidden"]


def test_theorem_6a_printed_fails_corrected_holds_on_rescaled_problem():
    """spec §8 erratum 2 / P13b: LHS 8.2e-5 > printed RHS 6.0e-5; the corrected (L^2) RHS holds."""
    p = th6.rescaled_thm6_problem()
    kw = th6._thm6_case(False)
    printed = validation.verify("fedsps.theorem_6a", p, variant="printed", **kw)
    corrected = validation.verify("fedsps.theorem_6a", p, variant="corrected",
                                  measurement=printed.details["measurement"], **kw)
    assert printed.details["periodic"] and printed.applicable and corrected.applicable
    assert printed.measured == pytest.approx(8.2e-5, rel=0.02)
    assert printed.bound == pytest.approx(6.0e-5, rel=0.02)
    assert not printed.holds and corrected.holds
    assert printed.runs[0].rounds == 1 and len(printed.runs[0].trace) == 1   # one traced round, extrapolated
    pinned = [c for c in printed.conditions if c.name.startswith("every step at gamma_b")][0]
    assert pinned.ok and pinned.value == 1.0                                 # FedSPS = FedAvg(gamma_b) here


def test_theorem_6a_extrapolation_needs_a_periodic_run():
    p = th6.rescaled_thm6_problem()
    kw = dict(th6._thm6_case(False), x0=np.array([0.0]))     # not the fixed point: no periodic orbit
    v = validation.verify("fedsps.theorem_6a", p, **kw)
    assert not v.applicable and "periodic run" in v.reason


def test_theorem_6a_is_fedavg_and_holds_on_least_squares():
    A, b = _data("least_squares", False, seed=23, n=3)
    p = problems.least_squares(A, b)
    v = validation.verify("fedsps.theorem_6a", p, rounds=20, local_steps=5, seeds=1)
    assert v.applicable and v.holds, v.report()
    G = np.concatenate([rt["gammas"].ravel() for rt in v.runs[0].trace])
    assert np.all(G == v.details["gamma_b"])                                  # pinned at gamma_b: FedAvg
    fedavg = ft.run(p, "fedavg", rounds=20, local_steps=5, lr=v.details["gamma_b"], x0=v.details["x0"])
    assert np.abs(fedavg.x - v.runs[0].x).max() <= 1e-12 * max(1.0, np.abs(fedavg.x).max())


def test_theorem_6b_plateau_shrinks_linearly():
    p = problems.quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=1.0, seed=3, hessian="distinct", noise=0.0)
    v = validation.verify("fedsps.theorem_6b", p, rounds=3000, local_steps=4, seeds=1)
    assert v.applicable and v.holds, v.report()
    mu = [c for c in v.conditions if c.name.startswith("mu > 0")][0]
    assert mu.ok and mu.value > 0
    half = ft.run(p, "fedsps", **dict(v.run_kwargs, gamma_b=v.details["gamma_b"] / 2))
    d = [float(np.sum((x - v.details["x_star"]) ** 2)) for x in (v.runs[0].x, half.x)]
    assert v.measured == pytest.approx(d[1] / d[0], rel=1e-12)


def test_theorem_6b_needs_strong_convexity():
    """A least-squares client with a singular Hessian: mu = 0, so 6(b) does not apply."""
    rng = np.random.default_rng(4)
    A = [rng.normal(size=(6, 3)), rng.normal(size=(6, 3))]
    A[1][:, 2] = 0.0                                     # client 1 never sees coordinate 2
    p = problems.least_squares(A, [rng.normal(size=6), rng.normal(size=6)])
    v = validation.verify("fedsps.theorem_6b", p, rounds=5, local_steps=2)
    assert not v.applicable and "mu > 0" in v.reason


def test_theorem_18_holds_and_is_not_applicable_elsewhere():
    p = problems.quadratic(4, 3, L=1.0, mu=0.1, heterogeneity=0.5, noise=0.5, seed=2)
    for variant in ("printed", "corrected"):
        v = validation.verify("fedsps.theorem_18", p, rounds=60, local_steps=5, seeds=4, x0=np.full(3, 2.0),
                              lower_bound=-10.0, variant=variant)
        assert v.applicable and v.holds and v.stderr > 0, v.report()
    d = problems.quadratic(4, 3, heterogeneity=0.5, seed=2, hessian="distinct")
    assert not validation.verify("fedsps.theorem_18", d, rounds=5).applicable


# ------------------------------------------------------- verdicts never rest on rounding --
@pytest.mark.parametrize("kw, build", [
    (dict(local_steps=1), lambda: problems.quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=1.0, seed=3,
                                                     hessian="distinct")),
    (dict(local_steps=4), lambda: problems.quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=1.0, seed=3))],
    ids=["one local step", "shared Hessian"])
def test_theorem_6b_plateaus_at_rounding_level_hold(kw, build):
    """No client drift: both plateaus are rounding noise (within 100 floors of zero). Zero to
    rounding, plateau(gamma_b/2) is below any positive term of the theorem at gamma_b/2, so the
    shape holds (it was UNRESOLVED); the note says why, and nothing reads as a violation."""
    v = validation.verify("fedsps.theorem_6b", build(), rounds=3000, seeds=1, **kw)
    pl, fl = v.details["plateaus"], v.details["plateau_floor"]
    assert max(pl) <= th6.PLATEAU_RESOLUTION * fl                     # the setting: both at rounding level
    assert v.applicable and v.verdict() == "holds" and v.measured == 0.0
    assert "zero to rounding" in v.details["note"] and "VIOLATED" not in v.report()


def test_theorem_6b_bound_carries_the_transient():
    p = problems.quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=1.0, seed=3, hessian="distinct")
    short = validation.verify("fedsps.theorem_6b", p, rounds=20, local_steps=4, seeds=1, x0=np.full(2, 5.0))
    long = validation.verify("fedsps.theorem_6b", p, rounds=3000, local_steps=4, seeds=1)
    assert long.verdict() == "holds" and long.bound < 0.56                  # transient decayed: 0.55
    # after 80 steps the transient at gamma_b/2 dominates: the bound grows past the bare 0.55 by it
    assert short.bound - 0.55 == pytest.approx(short.details["transient_half"] / short.details["plateaus"][0])
    assert short.bound > 1.0 and short.verdict() == "holds"


def test_zero_measurement_under_a_zero_bound_holds():
    # x^0 = x* = 0 with c_i = 0: every gradient is exactly 0, the iterates never move; D0 = sigma_f^2 = 0
    h = np.array([[[1.0, 0.0], [0.0, 0.5]], [[0.4, 0.1], [0.1, 0.9]]])
    p = problems.explicit_quadratic(h, np.zeros((2, 2)), name="zero")
    v = validation.verify("fedsps.theorem_3b", p, rounds=5, local_steps=2, lower_bound=0.0, seeds=1,
                          x0=np.zeros(2), gamma_b=1.0)
    assert (v.measured, v.bound, v.applicable, v.verdict(), v.ratio) == (0.0, 0.0, True, "holds", 0.0)


# ------------------------------------------------------- every stated condition checked --
@pytest.mark.parametrize("name", ["fedsps.theorem_6b", "fedsps.theorem_18"])
def test_small_step_theorems_check_the_sampled_loss_lower_bound(name):
    p = (problems.quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=1.0, seed=3, hessian="distinct")
         if name.endswith("6b") else problems.quadratic(4, 3, L=1.0, mu=0.1, heterogeneity=0.5, seed=2))
    fi = fq.client_minima(p)
    assert (fi < 0).all()                      # so the old default lower_bound = 0 was no lower bound
    bad = validation.verify(name, p, rounds=60, local_steps=4, seeds=1, lower_bound=0.0)
    assert not bad.applicable and "ell_i* <= f_i*" in bad.reason
    ok = validation.verify(name, p, rounds=60, local_steps=4, seeds=1)    # default: ell_i* = f_i*
    lb = [c for c in ok.conditions if c.name.startswith("ell_i*")]
    assert ok.applicable and len(lb) == 1 and lb[0].ok and lb[0].role == "stated"


def test_minibatch_lower_bound_is_the_minimum_over_minibatch_losses():
    A, b = _data("least_squares", False)
    p = problems.least_squares(A, b, l2=0.1)
    fi = fq.client_minima(p)
    assert (fi > 0).all()
    # f_i* is a lower bound of f_i, not of a minibatch loss (a minibatch can be fitted better)
    v = validation.verify("fedsps.theorem_6a", p, rounds=3, local_steps=2, seeds=1, batch_size=2, lower_bound=fi)
    assert not v.applicable and "min over minibatch losses" in v.reason
    v = validation.verify("fedsps.theorem_6a", p, rounds=3, local_steps=2, seeds=1, batch_size=2, lower_bound=0.0)
    assert v.applicable


def test_a_run_that_is_not_fedavg_gets_no_verdict():
    # Theorem 18 with additive gradient noise and the tight lower bound: noisy gradients push the
    # Polyak ratio below the cap, so FedSPS is not FedAvg(gamma_b), the regime the theorem analyses
    p = problems.quadratic(4, 3, L=1.0, mu=0.1, heterogeneity=0.5, noise=20.0, seed=2)
    v = validation.verify("fedsps.theorem_18", p, rounds=30, local_steps=5, seeds=2, x0=p.info["x_star"])
    pinned = [c for c in v.conditions if c.name.startswith("every step at gamma_b")][0]
    assert pinned.role == "stated" and not pinned.ok and pinned.value < 0.5
    assert v.reason == f"fails {pinned.name}" and v.verdict() == "NOT APPLICABLE"
    # with small noise far from x* every Polyak ratio is above the cap: a verdict
    p = problems.quadratic(4, 3, L=1.0, mu=0.1, heterogeneity=0.5, noise=0.5, seed=2)
    v = validation.verify("fedsps.theorem_18", p, rounds=30, local_steps=5, seeds=2, x0=np.full(3, 2.0))
    assert v.applicable and v.verdict() == "holds"


@pytest.mark.parametrize("name", NAMES)
def test_lasso_fails_assumption_a1_from_its_components(name):
    p = problems.federated_lasso("II", n_clients=3, dim=12, samples=8, seed=0)
    v = validation.verify(name, p, rounds=3, local_steps=2, seeds=1)
    assert not v.applicable and v.runs == [] and v.reason == "fails A1 (L-smoothness of every sample function)"
    assert v.verdict() == "NOT APPLICABLE"
    # the assumption is read from the components: the l1 regularizer declares no smoothness
    from fedtheory.components import capabilities
    assert not capabilities(p)["smooth"]


def test_theorem_6b_shape_failure_below_the_theorems_own_terms_is_not_a_violation():
    """Theorem 6(b) is an upper bound, O(gb L sigma_f^2/mu + gb^2 L^2 tau^2 sigma_f^2/mu); the check reads
    it as a shape, plateau(gb/2)/plateau(gb) <= 0.55. Here FedAvg's fixed-point bias nearly cancels at
    gb (1-D clients, b chosen orthogonal to the bias direction at gb), so plateau(gb) = 8e-20 while
    plateau(gb/2) = 1.5e-13: the ratio was VIOLATED (1.8e6) although both plateaus are 1e9 below the
    theorem's terms. A ratio above the shape with plateau(gb/2) below those terms (constant 1) is
    UNRESOLVED, saying why."""
    import validation
    h = np.array([1.0, 0.3, 0.6])
    tau, c = 4, 0.5
    gb = min(1 / (2 * c * h.max()), 1 / (20 * h.max() * tau))

    def v(g):
        q = (1 - g * h) ** tau
        return (1 - q) / np.sum(1 - q) - h / np.sum(h)
    b0, vb = np.array([1.0, -0.5, 0.2]), v(gb)
    b = b0 - (b0 @ vb) / (vb @ vb) * vb + 1e-7 * vb / np.linalg.norm(vb)
    p = problems.explicit_quadratic(h[:, None, None], (h * b)[:, None])
    r = validation.verify("fedsps.theorem_6b", p, rounds=4000, local_steps=tau, c=c, gamma_b=gb,
                          x0=np.array(p.info["x_star"], dtype=float), seeds=1)
    pl = r.details["plateaus"]
    assert pl[1] / pl[0] > 1e3 and pl[0] > 1e6 * r.details["plateau_floor"]      # a resolved, failed shape
    assert r.verdict() == "UNRESOLVED" and "below the theorem's own terms" in r.report()


def test_a_converged_run_stays_in_the_pinned_regime():
    """Theorem 6(a) on a conforming interpolating quadratic held at R = 20 and 200 and was NOT
    APPLICABLE at R = 2000, "fails every step at gamma_b": once f_i - ell_i* is a rounding residue
    (||x - x*|| ~ sqrt(eps)) the Polyak ratio is noise and steps drop below the cap. Such steps count
    as the theorem's regime now; a step below the cap with a resolved numerator still does not."""
    import validation
    from fedtheory.theory.fedsps_quantities import _gamma_stats
    p = problems.quadratic(3, 2, L=1.0, mu=0.5, hessian="distinct", shared_minimizer=True, seed=0)
    x0 = np.array(p.info["x_star"]) + 1.0
    v = validation.verify("fedsps.theorem_6a", p, rounds=2000, local_steps=2, seeds=1, x0=x0)
    m = v.details["measurement"]
    assert m["gamma_min"] < v.details["gamma_b"] and m["pinned_frac"] == 1.0
    assert v.verdict() == "holds", v.reason
    # a resolved step below the cap is not pinned: a short run (no step at rounding) read against a
    # larger cap has none pinned
    short = validation.verify("fedsps.theorem_6a", p, rounds=20, local_steps=2, seeds=1, x0=x0)
    st = dict(short.details, problem=p)
    assert _gamma_stats(short.runs, short.details["gamma_b"], st)["pinned_frac"] == 1.0
    assert _gamma_stats(short.runs, 2 * short.details["gamma_b"], st)["pinned_frac"] == 0.0


# --------------------------------------------------------------- bounds and plateaus at rounding level
@pytest.mark.parametrize("name", ["fedsps.theorem_3a", "fedsps.theorem_3b", "fedsps.theorem_6a"])
@pytest.mark.parametrize("seed", [0, 3, 4])
def test_a_bound_within_rounding_of_zero_is_zero_and_a_zero_measurement_under_it_holds(name, seed):
    """At x^0 = x* under interpolation (clients sharing a minimiser, ell_i* = f_i(x*)) every bound is 0:
    sigma_f^2 = f* - mean ell_i* came out as -7.9e-15 by rounding, and the check said NOT APPLICABLE
    ("a condition of the theorem fails", none did) or UNRESOLVED (a measurement of 1e-17 over a bound
    of -1e-15). Seeds 3 and 4 gave those verdicts before."""
    p = problems.quadratic(4, 3, L=1.0, mu=0.1, shared_minimizer=True, seed=seed)
    kw = dict(rounds=3, local_steps=2, x0=p.info["x_star"], seeds=1)
    if name != "fedsps.theorem_6a":
        kw["lower_bound"] = fq.client_minima(p)
    v = validation.verify(name, p, **kw)
    assert v.applicable, v.reason
    assert v.verdict() == "holds" and v.bound == 0.0 and v.measured == 0.0 and v.ratio == 0.0
