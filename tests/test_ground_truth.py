"""Certified optimum: agreement with independent high-precision solvers, caching, client optima."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.optimize import minimize

import problems
import validation
from fedtheory.exceptions import UncertifiedOptimumError


def test_a9a_logistic_matches_independent_solver(data_dir):
    """F* on a9a (10 clients, l2=1e-4) agrees with scipy trust-exact on our own formula to 1e-10."""
    p = problems.libsvm("a9a", n_clients=10, l2=1e-4, data_dir=data_dir, partition="quantity_skew")
    gt = validation.ground_truth(p, cache=False, clients=False)
    assert gt.info["cvxpy_status"] == "optimal" and gt.residual < 1e-12
    X, y = p.M.toarray(), p.b
    w = np.repeat(p.weights / p.client_sizes, p.client_sizes)

    def f(x):
        return w @ np.logaddexp(0, -y * (X @ x)) + 0.5e-4 * x @ x

    def g(x):
        s = 1 / (1 + np.exp(y * (X @ x)))
        return -X.T @ (w * y * s) + 1e-4 * x

    def h(x):
        s = 1 / (1 + np.exp(-y * (X @ x)))
        return (X * (w * s * (1 - s))[:, None]).T @ X + 1e-4 * np.eye(X.shape[1])

    ref = minimize(f, np.zeros(X.shape[1]), jac=g, hess=h, method="trust-exact", options={"gtol": 1e-13})
    assert abs(gt.f - ref.fun) <= 1e-10
    assert np.linalg.norm(gt.x - ref.x) <= 1e-7


def test_lasso_matches_sklearn_coordinate_descent():
    from sklearn.linear_model import Lasso
    rng = np.random.default_rng(0)
    A = [rng.normal(size=(40, 15)) for _ in range(5)]
    xt = rng.normal(size=15) * (rng.random(15) < 0.4)
    b = [a @ xt + 0.1 * rng.normal(size=40) for a in A]
    p = problems.lasso(A, b, l1=0.05)
    gt = validation.ground_truth(p, cache=False)
    assert gt.info["kkt_verified"] and gt.residual < 1e-12
    X, Y = np.vstack(A), np.concatenate(b)
    sk = Lasso(alpha=0.05, fit_intercept=False, tol=1e-15, max_iter=200000).fit(X, Y)
    f_sk = 0.5 * np.mean((X @ sk.coef_ - Y) ** 2) + 0.05 * np.abs(sk.coef_).sum()
    assert abs(gt.f - f_sk) <= 1e-10
    assert np.array_equal(gt.x != 0, sk.coef_ != 0)
    # every client's own lasso optimum is certified the same way
    assert np.all(gt.client_attained) and np.all(gt.client_residual < 1e-10)
    for i in (0, 3):
        ski = Lasso(alpha=0.05, fit_intercept=False, tol=1e-15, max_iter=200000).fit(A[i], b[i])
        fi = 0.5 * np.mean((A[i] @ ski.coef_ - b[i]) ** 2) + 0.05 * np.abs(ski.coef_).sum()
        assert abs(gt.client_f[i] - fi) <= 1e-10


def test_least_squares_and_quadratic_closed_forms():
    rng = np.random.default_rng(1)
    A = [rng.normal(size=(20, 6)) for _ in range(3)]
    b = [rng.normal(size=20) for _ in range(3)]
    p = problems.least_squares(A, b, l2=0.1)
    gt = validation.ground_truth(p, cache=False)
    H = sum(a.T @ a / 20 for a in A) / 3 + 0.1 * np.eye(6)
    x = np.linalg.solve(H, sum(a.T @ t / 20 for a, t in zip(A, b)) / 3)
    assert np.abs(gt.x - x).max() < 1e-13
    for i in range(3):
        xi = np.linalg.solve(A[i].T @ A[i] / 20 + 0.1 * np.eye(6), A[i].T @ b[i] / 20)
        assert abs(gt.client_f[i] - p.client_value(i, xi)) < 1e-14
    q = problems.quadratic(5, 4, heterogeneity=0.4, seed=2, hessian="distinct")
    gq = validation.ground_truth(q, cache=False)
    assert np.abs(gq.x - q.info["x_star"]).max() < 1e-13 and abs(gq.f - q.info["f_star"]) < 1e-14


def test_cache_roundtrip(tmp_path):
    p = problems.breast_cancer(n_clients=3, l2=1e-2)
    a = validation.ground_truth(p, cache_dir=tmp_path)
    b = validation.ground_truth(p, cache_dir=tmp_path)
    assert not a.info["cached"] and b.info["cached"]
    assert np.array_equal(a.x, b.x) and a.f == b.f and np.array_equal(a.client_f, b.client_f)
    assert len(list(tmp_path.glob("*.npz"))) == 1
    p2 = problems.breast_cancer(n_clients=3, l2=2e-2)
    validation.ground_truth(p2, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 2


def test_unattained_client_optimum_is_flagged():
    """Separable client data with l2 = 0: the infimum 0 is not attained, and this is reported."""
    A = [np.array([[1.0, 0.2], [2.0, -0.1], [-1.0, 0.3]]), np.array([[1.0, 0.0], [-1.0, 0.5], [0.5, 1.0]])]
    y = [np.array([1.0, 1.0, -1.0]), np.array([1.0, 1.0, -1.0])]
    p = problems.logistic(A, y)
    with pytest.warns(RuntimeWarning, match="not attained"):
        gt = validation.ground_truth(p, cache=False)
    assert not gt.client_attained[0] and np.isnan(gt.client_x[0]).all()
    assert gt.client_f[0] == 0.0
    assert gt.client_attained[1] and gt.client_residual[1] < 1e-12
    with pytest.raises(ValueError, match="no minimiser: its data are linearly separable and l2 = 0"):
        validation.ground_truth(problems.logistic(A[:1], y[:1]), cache=False)


def test_cache_without_clients_is_completed_when_clients_are_asked_for(tmp_path):
    p = problems.breast_cancer(n_clients=3, l2=1e-2)
    a = validation.ground_truth(p, cache_dir=tmp_path, clients=False)
    assert np.isnan(a.client_f).all()
    b = validation.ground_truth(p, cache_dir=tmp_path)           # must compute the client optima now
    assert np.all(np.isfinite(b.client_f)) and np.all(b.client_attained)
    assert b.f == a.f
    c = validation.ground_truth(p, cache_dir=tmp_path, clients=False)  # the full entry serves both
    assert c.info["cached"] and np.all(np.isfinite(c.client_f))


def test_client_optima_in_worker_processes_equal_the_serial_ones():
    """From 64 clients on the client optima are solved in worker processes (started while the global
    optimum is solved); every client's optimum is the one the serial path finds, bit for bit."""
    from fedtheory.truth import ground_truth
    rng = np.random.default_rng(4)
    A = [rng.normal(size=(12, 5)) for _ in range(70)]
    y = [np.where(a @ rng.normal(size=5) + 0.5 * rng.normal(size=12) > 0, 1.0, -1.0) for a in A]
    p = problems.logistic(A, y, l2=1e-2)
    par = ground_truth(p, cache=False, progress=False)
    ser = ground_truth(p, cache=False, progress=False, n_jobs=1)
    assert par.client_attained.all()
    assert np.array_equal(par.client_f, ser.client_f) and np.array_equal(par.client_x, ser.client_x)
    assert par.x.tolist() == ser.x.tolist()


def test_newton_polish_converges_when_F_cannot_resolve_the_decrease():
    """Near x*, the decrease Newton predicts is below F's rounding error (a sum over many samples),
    so an Armijo test on F accepts or refuses by rounding noise: on one CPU a9a's polish crawled for
    200 iterations at residual 1.2e-9, on another it took 8. Here F carries a rounding error that
    is adversarial (points nearer x* evaluate 1e-9 higher, as rounding may round them), and the
    polish must still reach the gradient's rounding floor."""
    from fedtheory.truth.solvers import _newton_smooth
    rng = np.random.default_rng(3)
    A = [rng.normal(size=(30, 6)) for _ in range(3)]
    y = [np.sign(rng.normal(size=30)) for _ in range(3)]
    p = problems.logistic(A, y, l2=1e-2)
    xs, _ = _newton_smooth(p, np.zeros(6))
    assert np.linalg.norm(p.grad(xs)) < 1e-14

    class RoundedUp:
        """``p`` with F one (adversarial) rounding error higher within 1e-6 of x*."""
        def __getattr__(self, name):
            return getattr(p, name)

        def value(self, x):
            return p.value(x) + (1e-9 if np.linalg.norm(x - xs) < 1e-6 else 0.0)

    start = xs + 1e-5 * rng.normal(size=6)
    x, it = _newton_smooth(RoundedUp(), start)
    assert np.linalg.norm(p.grad(x)) < 1e-14, (np.linalg.norm(p.grad(x)), it)


def test_quasi_separable_logistic_data_are_never_an_attained_optimum():
    """Quasi-complete separation with l2 = 0 (every margin >= 0 along a direction, some > 0: here a
    zero row, or a feature seen in positive rows only): F decreases for ever along that direction,
    so there is no minimiser, and the infimum is not 0. The global problem is refused with the
    reason; a quasi-separable client is not attained, its client_f is NaN and it is not certified
    (it was marked attained, with an arbitrary far-away x_i* and the problem certified)."""
    a = np.array([[1.0, 0.3], [0.5, -1.0], [-0.7, 0.2], [0.2, 0.9], [-1.0, -0.4]])
    y = np.array([1.0, -1.0, -1.0, 1.0, 1.0])            # overlapping: the optimum is attained
    quasi = np.vstack([np.hstack([a, np.zeros((5, 1))]), [[0.0, 0.0, 1.0]]])   # feature 3: one positive row
    yq = np.append(y, 1.0)
    with pytest.raises(ValueError, match="no minimiser: its data are quasi-separable"):
        validation.ground_truth(problems.logistic([quasi], [yq]), cache=False)
    zero_row = np.vstack([np.array([[1.0, 0.0, 0.0], [-1.0, 0.5, 0.0]]), np.zeros((1, 3))])
    with pytest.raises(ValueError, match="no minimiser: its data are quasi-separable"):
        validation.ground_truth(problems.logistic([zero_row], [np.array([1.0, -1.0, 1.0])]), cache=False)
    first = np.hstack([a, np.array([[1.0], [1.0], [0.0], [0.0], [0.0]])])   # feature 3: rows of both labels
    p = problems.logistic([first, quasi], [y, yq])                                   # so the union overlaps
    with pytest.warns(RuntimeWarning, match="not attained"):
        gt = validation.ground_truth(p, cache=False, certify="warn")
    assert gt.client_attained.tolist() == [True, False] and np.isnan(gt.client_f[1])
    assert not gt.client_certified[1] and not gt.certified and "quasi-separable" in gt.reason
    assert np.isnan(gt.client_x[1]).all()
    # the global optimum of the overlapping union is attained: no direction leaves every margin >= 0
    assert np.linalg.norm(gt.x) < 1e3 and gt.residual < 1e-9


@pytest.mark.parametrize("sparse", [False, True])
def test_a_client_with_all_zero_rows_under_a_regularizer_is_certified(sparse):
    """A client whose rows are all zero has a constant smooth part (L_i = 0) and, with an l1 term, its
    optimum at 0 with f_i* = ||b_i||^2 / (2 m_i). The proximal polish divided by L_i = 0 (a bare
    ZeroDivisionError); it uses L = 1 there now."""
    import scipy.sparse as sps
    rng = np.random.default_rng(0)
    A = [rng.normal(size=(5, 3)), np.zeros((2, 3)), rng.normal(size=(4, 3))]
    b = [rng.normal(size=5), rng.normal(size=2), rng.normal(size=4)]
    if sparse:
        A = [sps.csr_matrix(a) for a in A]
    gt = validation.ground_truth(problems.lasso(A, b, l1=0.1), cache=False)
    assert gt.certified and gt.client_certified.all()
    assert abs(gt.client_f[1] - b[1] @ b[1] / 4) <= 1e-12 and np.array_equal(gt.client_x[1], np.zeros(3))


def test_a_strongly_convex_regularizer_gives_the_strong_convexity_bracket():
    """Logistic without ridge plus L2(weight=0.5) is the objective of Logistic(l2=0.5): the certificate
    counted the datafit's mu only, so on data of scale 1e3 client optima were refused (relative KKT
    residual 2e-10). The regularizer's modulus now joins mu: the same bracket, the same values."""
    from fedtheory.components import L2, Logistic
    from fedtheory.problem import FederatedProblem
    rng = np.random.default_rng(0)
    A = [1e3 * rng.normal(size=(6, 4)) for _ in range(3)]
    y = [np.where(rng.random(6) < 0.5, 1.0, -1.0) for _ in range(3)]
    ridge = validation.ground_truth(FederatedProblem.from_clients(A, y, Logistic(l2=0.5), name="ridge"), cache=False)
    reg = validation.ground_truth(FederatedProblem.from_clients(A, y, Logistic(l2=0.0), L2(weight=0.5), name="reg"),
                                  cache=False)
    assert reg.certified and reg.client_certified.all() and reg.info["certificate"] == "strong convexity"
    assert np.isfinite(reg.f_lower) and reg.f_upper - reg.f_lower <= 1e-9 * max(1.0, abs(reg.f))
    assert abs(reg.f - ridge.f) <= 1e-12 * max(1.0, abs(ridge.f))
    assert np.abs(reg.client_f - ridge.client_f).max() <= 1e-12 * max(1.0, np.abs(ridge.client_f).max())


def test_rows_of_a_zero_weight_client_do_not_decide_whether_the_minimum_is_attained():
    """Logistic, l2 = 0: client 0 (weight 1) is separable, client 1 (weight 0, not part of F) is not.
    The separability LP read every row, found none separating, and a minimiser that does not exist
    was certified (x* = [9619, -2861], F* = 0). Rows of weight 0 are left out of the LP now: the
    documented "no minimiser" refusal, as without the client."""
    A0 = np.array([[1.0, 0.5], [2.0, -1.0], [-1.0, 0.3], [-2.0, 1.0]])
    y0 = np.array([1.0, 1.0, -1.0, -1.0])                      # separated by x = (1, 0)
    A1, y1 = np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([1.0, -1.0])
    p = problems.logistic([A0, A1], [y0, y1], l2=0.0, weights=[1.0, 0.0])
    assert p.value(np.array([100.0, 0.0])) < 1e-40             # inf F = 0, approached, never attained
    with pytest.raises(ValueError, match="no minimiser: its data are linearly separable"):
        validation.ground_truth(p, cache=False)
    # quasi-separable: the zero rows of client 0 stay on the boundary, client 1 breaks separation
    A0q = np.vstack([A0, [[0.0, 1.0], [0.0, 1.0]]])
    y0q = np.r_[y0, 1.0, -1.0]
    pq = problems.logistic([A0q, np.array([[-1.0, 0.0], [1.0, 0.0]])], [y0q, np.array([1.0, -1.0])], l2=0.0,
                           weights=[1.0, 0.0])
    with pytest.raises(ValueError, match="no minimiser: its data are quasi-separable"):
        validation.ground_truth(pq, cache=False, clients=False)
    # with a positive weight the same client makes the minimum attained (and certified)
    ok = problems.logistic([A0, A1], [y0, y1], l2=0.0, weights=[1.0, 0.5])
    gt = validation.ground_truth(ok, cache=False, clients=False)
    assert np.all(np.isfinite(gt.x)) and np.linalg.norm(ok.grad(gt.x)) < 1e-10


def test_a_badly_scaled_separability_lp_is_solved_not_a_runtime_error():
    """Two nearly collinear columns of scales 1e5 and 1e-1: HiGHS failed on the separability LP
    ("Solve error") and ground_truth raised a bare RuntimeError. The LP's columns are equilibrated
    now, and these data (completely separable) get the documented "no minimiser" refusal."""
    X = np.array(np.array([[-1.8950941720767818, 58941.92507150469, 0.3716042094866597, 0.15801042470656032], [-0.3417294476238055, -45994.881569663325, -0.24403343433351288, -0.12330222947822415], [0.7738045799337923, 15259.432108187322, 0.14247537856169784, 0.040907203916124395], [0.5403909464383887, -43272.8560467692, -1.2660068064585215, -0.11600507370434732], [0.5166500726645507, 50255.63616936753, -0.019283637224550603, 0.13472438175943513], [-2.171407396081257, -36914.85231299217, -0.6225072533094268, -0.09896065465922364], [-0.27388836614103773, 36281.6958915765, -0.6565846455422846, 0.09726330061084447], [-1.3176297388465676, 7772.327038330497, -0.48449204755070396, 0.020835910852429952], [-1.8433021410608323, 33133.74261645664, -0.6847099776889374, 0.08882432558144125], [-2.046235349764072, 6913.860953355771, -0.28135561040897783, 0.018534550818726056], [-2.327474923714538, 54648.406983398374, 0.45916837413374567, 0.1465004406706107], [-0.9053617974783416, 23383.75778020041, 0.09593349303090885, 0.0626867462091938], [-0.19414386049795973, 23399.179104856164, -0.9360536610278318, 0.06272808741234512], [1.4048593103652411, 18850.821114643713, -0.15713705707868028, 0.0505349332713069], [0.2388331056184624, 48909.19318623439, 0.5863509076545463, 0.13111486226389324], [-1.2431583815539755, -6218.628305410315, 0.028363606431114873, -0.01667078396909188], [0.8464094592992258, -11927.521044979498, 0.2566464654486257, -0.03197507824369982], [-0.031918738134400354, -11954.041534894122, 0.01159031479690462, -0.032046173883450484], [1.1010833667150715, 32232.80949404596, 0.2736933064177977, 0.0864091206973017], [-1.9088484140337794, -37672.30490276163, 1.264646365313465, -0.10099121958119613], [2.3005705925636875, 24560.246530633354, -0.3823346089676805, 0.06584065553374314], [-0.5461040718486042, 15927.30942133396, 0.08389583866835759, 0.042697637090369556], [0.7989064978994352, 20856.253575753373, -1.1120493348080742, 0.055911059594714346], [1.1835356598397095, -49653.58111291401, 0.4312723785902282, -0.1331104036778867]]))
    y = np.array(np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0, -1.0, -1.0, 1.0, -1.0, 1.0, 1.0, 1.0, -1.0]))
    ptr = [0, 8, 17, 24]
    p = problems.logistic([X[ptr[i]:ptr[i + 1]] for i in range(3)], [y[ptr[i]:ptr[i + 1]] for i in range(3)],
                          l2=0.0)
    with pytest.raises(ValueError, match="no minimiser: its data are linearly separable"):
        validation.ground_truth(p, cache=False, clients=False)


def test_a_failed_separability_lp_is_an_uncertified_optimum(monkeypatch):
    """Any other failure of the LP is an UncertifiedOptimumError naming it, never a raw error."""
    import scipy.optimize
    from fedtheory.exceptions import UncertifiedOptimumError

    class Failed:
        status, message, fun = 4, "Solve error", 0.0
    monkeypatch.setattr(scipy.optimize, "linprog", lambda *a, **k: Failed())
    p = problems.logistic([np.array([[1.0, 0.0], [0.0, 1.0]])], [np.array([1.0, -1.0])], l2=0.0)
    with pytest.raises(UncertifiedOptimumError, match="linear program .* failed .*HiGHS status 4"):
        validation.ground_truth(p, cache=False, clients=False)


def test_a_quadratic_with_huge_constants_is_not_an_overflow_error():
    """L = 1e200: the strong-convexity bracket squared a Python float and raised OverflowError; F* is
    representable (about -3.8e199) and is certified."""
    p = problems.quadratic(2, 3, L=1e200, mu=1e199, seed=0)
    gt = validation.ground_truth(p, cache=False, clients=False)
    assert gt.f == pytest.approx(p.info["f_star"], rel=1e-12)


@pytest.mark.parametrize("l2", [0.0, 0.1])
def test_least_squares_with_an_all_zero_row_is_certified(l2):
    """A row a_j = 0 with a target b_j != 0 adds the constant b_j^2 / 2 to F. Kept in the QR system it
    made the certificate's basis of range(A) one dimension too large, and the exact F* was refused
    (bracket [0, F*]). It now goes into the constant, with the merged rows' spread."""
    A = np.array([[0.0, 1, 0, 1], [0, 0, 0, 0], [1, 0, 1, 1], [0, 0, 0, 0]])
    b = np.array([-0.8482, -0.4172, 1.7104, 0.3])
    p = problems.least_squares([A[:2], A[2:]], [b[:2], b[2:]], l2=l2)
    gt = validation.ground_truth(p, cache=False, clients=False)
    # the exact F*: weighted rows (1/2 per client, 1/2 per row within a client), the ridge as rows
    Aw = np.vstack([A * 0.5, np.sqrt(l2) * np.eye(4)])
    bw = np.r_[b * 0.5, np.zeros(4)]
    x = np.linalg.lstsq(Aw, bw, rcond=None)[0]
    f_exact = 0.5 * np.sum((Aw @ x - bw) ** 2)
    assert gt.f == pytest.approx(f_exact, rel=1e-13)
    assert gt.f == pytest.approx(p.value(x), rel=1e-13)


@settings(max_examples=15, deadline=None)
@given(scale=st.floats(0.01, 100.0), extra=st.integers(0, 3), w0=st.floats(0.1, 0.9))
def test_infimum_of_quasi_separable_logistic_data(scale, extra, w0):
    """validation.infimum: feature 0 is seen in positive rows only (a direction of recession: their
    losses tend to 0, F has no minimiser), feature 1 in a positive and a negative row of each
    client, so inf F = sum_i w_i (2 log 2) / m_i exactly; the separated rows are those of feature 0."""
    import math
    A0 = np.array([[scale, 0.0]] * (1 + extra) + [[0.0, 1.0], [0.0, 1.0]])
    y0 = np.array([1.0] * (1 + extra) + [1.0, -1.0])
    A1 = np.array([[0.0, 2.0], [0.0, 2.0], [scale, 0.0]])
    y1 = np.array([1.0, -1.0, 1.0])
    p = problems.logistic([A0, A1], [y0, y1], weights=np.array([w0, 1 - w0]))
    with pytest.raises(ValueError, match="quasi-separable.*validation.infimum"):
        validation.ground_truth(p)
    inf = validation.infimum(p, cache=False)
    assert not inf.attained and inf.x is None and inf.rows_removed == 2 + extra
    assert inf.separated.tolist() == [True] * (1 + extra) + [False, False] + [False, False, True]
    want = w0 * 2 * math.log(2) / len(y0) + (1 - w0) * 2 * math.log(2) / len(y1)
    assert abs(inf.f - want) <= inf.error and inf.error <= 1e-8
    # F stays above inf F along any path, and reaches it along the direction of recession
    x = np.array([0.0, 0.0])
    assert p.value(x) > inf.f and p.value(np.array([60.0 / scale, 0.0])) - inf.f < 1e-12


def test_infimum_where_attained_is_the_ground_truth_and_complete_separation_is_zero():
    rng = np.random.default_rng(3)
    A = [rng.normal(size=(8, 3)) for _ in range(2)]
    y = [np.where(rng.random(8) < 0.5, 1.0, -1.0) for _ in range(2)]
    p = problems.logistic(A, y, l2=0.1)
    inf, gt = validation.infimum(p, cache=False), validation.ground_truth(p, cache=False)
    assert inf.attained and inf.f == gt.f and np.array_equal(inf.x, gt.x) and inf.rows_removed == 0
    assert 0 < inf.error <= 1e-9 * max(1.0, abs(gt.f)) + gt.f_eval_error
    w = rng.normal(size=3)
    sep = problems.logistic(A, [np.where(a @ w >= 0, 1.0, -1.0) for a in A])      # labels of a hyperplane
    with pytest.raises(ValueError, match="linearly separable"):
        validation.ground_truth(sep, cache=False)
    inf = validation.infimum(sep, cache=False)
    assert (inf.f, inf.attained, inf.rows_removed, inf.reduced, inf.error) == (0.0, False, 16, None, 0.0)


def test_infimum_leaves_out_the_rows_of_a_client_of_weight_zero():
    """A client of weight 0 is no part of F: its rows are neither separated nor kept."""
    A0 = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    y0 = np.array([1.0, 1.0, -1.0])
    A1 = np.array([[-1.0, 0.0], [1.0, 0.0]])                  # would make feature 0 inseparable
    y1 = np.array([1.0, -1.0])
    p = problems.logistic([A0, A1], [y0, y1], weights=np.array([1.0, 0.0]))
    inf = validation.infimum(p, cache=False)
    assert inf.separated.tolist() == [True, False, False, False, False]
    assert abs(inf.f - 2 * np.log(2) / 3) <= inf.error


@settings(deadline=None)
@given(seed=st.integers(0, 10 ** 6), n=st.integers(1, 4), d=st.integers(1, 4), k=st.integers(0, 2),
       sparse=st.booleans())
def test_infimum_is_a_lower_bound_that_minimisation_approaches(seed, n, d, k, sparse):
    """On random logistic data without ridge, some features seen in one class only (quasi-separation)
    and some rows without features: F(x) >= inf F - error at random points and at L-BFGS's last
    iterate, and L-BFGS (no knowledge of the separated rows) gets within 1e-4 of inf F."""
    import scipy.sparse as sp
    from scipy.optimize import minimize
    rng = np.random.default_rng(seed)
    A, y = [], []
    for i in range(n):
        m = int(rng.integers(2, 9))
        a = np.zeros((m, d + k))
        a[:, :d] = rng.normal(size=(m, d))
        t = np.where(rng.random(m) < 0.5, 1.0, -1.0)
        for j in range(d, d + k):                           # feature j: in some rows of one class only
            rows = np.flatnonzero((t == (1.0 if j % 2 else -1.0)) & (rng.random(m) < 0.5))
            a[rows, j] = rng.random(rows.size) + 0.1
        if rng.random() < 0.3:
            a[0] = 0.0                                      # a row without features: loss log 2 for ever
        A.append(sp.csr_matrix(a) if sparse else a)
        y.append(t)
    w = rng.random(n) + 0.05
    p = problems.logistic(A, y, weights=w / w.sum())
    inf = validation.infimum(p, cache=False)
    for _ in range(5):
        x = 3.0 * rng.normal(size=p.dim)
        assert p.value(x) >= inf.f - inf.error
    r = minimize(p.value, np.zeros(p.dim), jac=p.grad, method="L-BFGS-B",
                 options=dict(maxiter=5000, ftol=1e-15, gtol=1e-12))
    assert inf.f - inf.error <= r.fun <= inf.f + 1e-4 * max(1.0, inf.f)
    assert inf.attained == (inf.rows_removed == 0)


def test_infimum_refuses_a_direction_that_holds_only_on_the_equilibrated_columns():
    """One column spanning ten decades (2e9 and 1): on the equilibrated columns HiGHS saw a direction
    of recession that the data do not have (rows +1 and -1 of the same feature), and infimum returned
    0.279 as certified where the minimum, attained, is 0.635. The direction is now checked on the
    unscaled rows: refused."""
    A = np.array([[2e9]] + [[1.0]] * 11)
    y = np.array([1.0] + [-1.0] * 10 + [1.0])
    p = problems.logistic([A], [y])
    with pytest.raises(UncertifiedOptimumError, match="does not hold on the unscaled data"):
        validation.infimum(p, cache=False)
    # with the scales within nine decades the same data are certified, and agree with L-BFGS
    from scipy.optimize import minimize
    q = problems.logistic([np.array([[2e3]] + [[1.0]] * 11)], [y])
    inf = validation.infimum(q, cache=False)
    r = minimize(q.value, np.zeros(1), jac=q.grad, method="L-BFGS-B", options=dict(ftol=1e-15, gtol=1e-12))
    assert inf.attained and abs(inf.f - r.fun) <= 1e-7


def test_a_regularizer_that_leaves_a_separating_direction_unpenalised_is_refused():
    """Feature 0 only in positive rows and left out of every group: F = f + h decreases for ever along
    it, yet ground_truth certified x* = (23.7, 0) and infimum said attained. A regularizer that is
    not coercive with a datafit without minimiser is now refused; a coercive one has a minimiser."""
    from fedtheory.components import Logistic
    from fedtheory.components.group import GroupL2
    from fedtheory.components.l1 import L1
    from fedtheory.problem import FederatedProblem
    A, y = [np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])], [np.array([1.0, 1.0, -1.0])]
    open_ = FederatedProblem.from_clients(A, y, Logistic(l2=0.0), GroupL2(0.1, groups=[-1, 0]))
    for f in (validation.ground_truth, validation.infimum):
        with pytest.raises(ValueError, match="not coercive"):
            f(open_, cache=False)
    assert Logistic(l2=0.1).recession_rows(problems.logistic(A, y, l2=0.1)).tolist() == [False] * 3
    for reg in (GroupL2(0.1, groups=[0, 0]), GroupL2(0.1, groups=[0, 1]), L1(0.1)):
        assert reg.coercive()
        p = FederatedProblem.from_clients(A, y, Logistic(l2=0.0), reg)
        gt = validation.ground_truth(p, cache=False, clients=False)
        inf = validation.infimum(p, cache=False)
        assert gt.certified and inf.attained and inf.f == gt.f and np.all(np.isfinite(gt.x))
    assert not GroupL2(0.0, groups=[0, 0]).coercive() and not L1(0.0).coercive()
