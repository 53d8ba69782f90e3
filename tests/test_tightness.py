"""validation.tightness: PEP worst cases against closed forms, the registered algorithms and the bounds.

Every PEP here is tiny (local_steps x rounds <= 4); longer ones are marked slow.
"""
import doctest
import math
import sys

import numpy as np
import pytest

pytest.importorskip("PEPit")

import validation  # noqa: E402
from fedtheory.theory import SPECS, is_lemma, tightness as T  # noqa: E402
from fedtheory.theory.tightness import solve as solve_module  # noqa: E402

COVERED = ["localdescent.theorem_4_1", "fedsps.theorem_3a", "fedsps.theorem_3b", "fedsps.theorem_6a"]


def _gd_pep(L, mu, lr, steps, metric):
    """Centralized gradient descent over one L-smooth mu-strongly convex function, written directly with PEPit."""
    from PEPit import PEP
    from PEPit.functions import SmoothStronglyConvexFunction
    pep = PEP()
    f = pep.declare_function(SmoothStronglyConvexFunction, mu=mu, L=L)
    xs = f.stationary_point()
    fs = f(xs)
    x = x0 = pep.set_initial_point()
    for _ in range(steps):
        x = x - lr * f.gradient(x)
    if metric == "gap":
        pep.set_initial_condition(f(x0) - fs <= 1)
        pep.set_performance_metric(f(x) - fs)
    else:
        pep.set_initial_condition((x0 - xs) ** 2 <= 1)
        pep.set_performance_metric((x - xs) ** 2)
    return T.solve_pep(pep)


@pytest.mark.parametrize("lr", [0.5, 1.5, 1.9])
def test_one_gradient_step_distance_matches_closed_form(lr):
    """FedSPS with a cap below every Polyak ratio (c tiny) is gradient descent with step gamma_b: one step
    on an L-smooth mu-strongly convex function contracts the squared distance by max(|1-lr mu|, |1-lr L|)^2."""
    L, mu = 1.0, 0.1
    t = validation.tightness("fedsps.theorem_3b", L=L, mu=mu, local_steps=1, rounds=1, lr=lr, n_clients=1,
                             c=1e-3, threshold=False)
    exact = max(abs(1 - lr * mu), abs(1 - lr * L)) ** 2
    lo, hi = t.worst_case
    assert t.nodes == 1                        # every step is capped: no step variable
    assert lo - 1e-7 <= exact <= hi + 1e-7
    assert hi - lo <= 1e-6


@pytest.mark.parametrize("lr", [0.5, 1.5, 1.9])
def test_one_local_gd_step_function_gap_matches_closed_form(lr):
    """One gradient step (local GD, one client, E = R = 1) on L-smooth mu-strongly convex functions contracts
    the gap f - f* by max(|1-lr mu|, |1-lr L|)^2 in the worst case (Taylor, Hendrickx, Glineur 2017)."""
    t = validation.tightness("localdescent.theorem_4_1", L=1.0, mu=0.1, local_steps=1, rounds=1, lr=lr, n_clients=1,
                             threshold=False)
    exact = max(abs(1 - lr * 0.1), abs(1 - lr * 1.0)) ** 2
    lo, hi = t.worst_case
    assert lo - 1e-6 <= exact <= hi + 1e-6        # the solver's accuracy (~1e-7)


def test_local_gd_with_one_client_equals_centralized_gd():
    """LFGD with one client, E local steps and R rounds is E R steps of gradient descent."""
    t = validation.tightness("localdescent.theorem_4_1", L=1.0, mu=0.1, local_steps=2, rounds=2, lr=0.7,
                             n_clients=1, threshold=False)
    gd = _gd_pep(1.0, 0.1, 0.7, 4, "gap")
    assert t.worst_case[0] <= gd.upper + 1e-7 and gd.lower <= t.worst_case[1] + 1e-7
    assert abs(t.worst_case[1] - gd.upper) <= 1e-6


@pytest.mark.parametrize("rounds", [1, 3])
def test_two_and_three_clients_agree_with_one_local_step(rounds):
    """With one local step the average of the clients' steps is a gradient step on f = mean f_i, and every
    L-smooth mu-strongly convex f is the mean of n copies of itself: the worst case is that of centralized
    gradient descent whatever n (symmetry of uniform weights)."""
    kw = dict(L=1.0, mu=0.2, local_steps=1, rounds=rounds, lr=1.2, threshold=False)
    two = validation.tightness("localdescent.theorem_4_1", n_clients=2, **kw).worst_case
    three = validation.tightness("localdescent.theorem_4_1", n_clients=3, **kw).worst_case
    gd = _gd_pep(1.0, 0.2, 1.2, rounds, "gap")
    for lo, hi in (two, three):
        assert abs(hi - gd.upper) <= 1e-6 and abs(lo - gd.lower) <= 1e-6


def test_local_gd_worst_case_is_attained_on_a_quadratic_of_the_class():
    """measured <= worst case for lfd run by fedtheory.run on quadratics of the class, and at a small step the
    identical clients with curvature mu attain it: (1 - lr mu)^(2 E R)."""
    L, mu, E, R, lr = 1.0, 0.1, 2, 2, 0.4
    form = T.form_of("localdescent.theorem_4_1", L=L, mu=mu, local_steps=E, rounds=R, lr=lr, n_clients=2)
    lo, hi, info = T.worst_case(form)
    measured = form.instances(R)
    assert measured.shape == (5, R)
    assert np.all(measured[:, -1] <= hi + 1e-7)
    assert abs(measured[:, -1].max() - (1 - lr * mu) ** (2 * E * R)) <= 1e-12
    assert abs(measured[:, -1].max() - hi) <= 1e-6


@pytest.mark.parametrize("name,consts", [
    ("fedsps.theorem_3a", dict(L=1.0, mu=0.0, local_steps=2, rounds=1, lr=1.0)),
    ("fedsps.theorem_3b", dict(L=1.0, mu=0.1, local_steps=1, rounds=2, lr=1.0)),
    ("fedsps.theorem_6a", dict(L=1.0, mu=0.0, local_steps=2, rounds=2, lr=0.025)),
    ("fedsps.theorem_6a", dict(L=1.0, mu=0.0, local_steps=1, rounds=2, lr=2.0)),
])
def test_fedsps_measured_below_worst_case_below_bound(name, consts):
    """fedsps run by fedtheory.run on quadratics of the class stays below the branch-and-bound bracket's upper
    end, and the bracket's lower end (a function of the class) stays below the theorem's bound."""
    form = T.form_of(name, n_clients=2, **consts)
    lo, hi, info = T.worst_case(form, time_limit=60.0, max_nodes=10)     # node-bounded: deterministic
    assert lo <= hi
    measured = form.instances(consts["rounds"])[:, -1]
    assert np.all(measured <= hi + 1e-7)
    bound = SPECS[name].variants["printed"].bound(*form.bound_args(consts["rounds"]))
    assert lo <= bound


def test_branch_and_bound_upper_end_covers_every_fixed_step_choice():
    """The relaxation's upper end bounds the exact PEP at any step sizes in the box (here a grid of corners
    and midpoints), and the lower end is attained by one of them (it is an exact PEP's value)."""
    form = T.form_of("fedsps.theorem_3b", L=1.0, mu=0.1, local_steps=1, rounds=1, lr=1.0, n_clients=2, c=1.0)
    lo0, hi0, cap = form.step_box
    assert form.n_adaptive == 2 and hi0 <= cap
    lo, hi, info = T.branch_and_bound(form, rtol=1e-3, time_limit=10.0)
    grid = np.linspace(lo0, hi0, 3)
    for g1 in grid:
        for g2 in grid:
            s = T.solve_pep(form.build(T.PolyakSteps([(g1, g1), (g2, g2)], cap, fixed=[g1, g2]), "theorem"))
            assert s.lower <= hi + 1e-7
    s = T.solve_pep(form.build(T.PolyakSteps([(g, g) for g in info["steps"]], cap, fixed=info["steps"]),
                               "theorem"))
    assert abs(s.lower - lo) <= 1e-7


def test_tightness_fields_for_local_gd():
    """Every field against a value computed by hand for these constants: the printed bound of Theorem 4.1 is
    exp(-mu eta T) f0 with T = E R local steps and f0 = 1 (the proof's (1 - mu eta)^T); at this small step the
    worst case is the quadratic of curvature mu shared by every client, (1 - eta mu)^(2 E R), so the looseness
    is exp(-mu eta E R) / (1 - eta mu)^(2 E R) and the exponent ratio 2 ln(1 - eta mu) / (-mu eta); the step
    threshold of local GD is 2/L (the worst case is a quadratic of curvature L beyond it)."""
    from fedtheory.theory.localdescent import lfgd_eta_max
    L, mu, E, R, lr = 1.0, 0.1, 2, 2, 0.3
    t = validation.tightness("localdescent.theorem_4_1", L=L, mu=mu, local_steps=E, rounds=R, lr=lr)
    assert t.bound == pytest.approx(math.exp(-0.1 * 0.3 * 4), rel=1e-12)
    worst = 0.97 ** 8                                   # (1 - eta mu)^(2 E R)
    assert t.worst_case[0] - 1e-7 <= worst <= t.worst_case[1] + 1e-7
    assert t.looseness == pytest.approx(math.exp(-0.12) / worst, rel=1e-6)
    assert t.contraction[1] == pytest.approx(0.97 ** 4, abs=1e-7)     # one round: (1 - eta mu)^(2 E)
    assert t.exponent_ratio == pytest.approx(2 * math.log(0.97) / -0.03, rel=1e-5)
    assert t.lr_threshold_exact and abs(t.lr_threshold - 2 / L) <= 2e-3 * 2 / L
    assert t.lr_conditions["(43) of the proof, lambda = 1"] == lfgd_eta_max(L, mu, 1.0, E, "43")
    assert t.variant == "printed" and not t.exact and t.solve_time > 0
    proof = validation.tightness("localdescent.theorem_4_1", L=L, mu=mu, local_steps=E, rounds=R, lr=lr,
                                 variant="proof", threshold=False)
    assert proof.bound == pytest.approx(0.97 ** 4, rel=1e-12)


@pytest.mark.parametrize("lr", [0.4, 1.9])
def test_two_three_and_four_clients_with_two_local_steps(lr):
    """K = 2 local steps, one round. Symmetry (an instance of n clients is one of k n clients: k copies of each)
    proves only W(1) <= W(n) and W(2) <= W(4); that two and three clients agree is not implied by it for K >= 2
    (the clients' local maps differ), so it is checked here, cheaply (<= 48 constraints). At lr = 0.4 every
    worst case is the shared curvature-mu quadratic, (1 - lr mu)^(2K); at lr = 1.9 heterogeneity matters: the
    federated worst case exceeds one client's (centralized GD, 2 steps)."""
    W = {n: validation.tightness("localdescent.theorem_4_1", L=1.0, mu=0.1, local_steps=2, rounds=1, lr=lr,
                                 n_clients=n, threshold=False).worst_case[1] for n in (1, 2, 3, 4)}
    assert W[1] <= W[2] + 1e-7 and W[2] <= W[4] + 1e-7 and W[1] <= W[3] + 1e-7
    assert abs(W[2] - W[3]) <= 1e-6 and abs(W[3] - W[4]) <= 1e-6
    if lr == 0.4:
        assert abs(W[1] - 0.96 ** 4) <= 1e-6 and abs(W[2] - 0.96 ** 4) <= 1e-6
    else:
        assert abs(W[1] - _gd_pep(1.0, 0.1, 1.9, 2, "gap").upper) <= 1e-6
        assert W[2] > W[1] + 1e-2


def test_every_theorem_has_a_pep_or_a_reason():
    cov = T.covered()
    assert set(cov) == {n for n in SPECS if not is_lemma(n)}
    assert sorted(k for k, v in cov.items() if v is True) == sorted(COVERED)
    import fedtheory as ft
    for name, v in cov.items():
        assert ft.describe(name)["tightness"] == (v if v is not True else "validation.tightness (PEP registered)")
        if v is not True:
            assert isinstance(v, str) and len(v) > 40
            with pytest.raises(T.NotExpressible, match="no PEP"):
                validation.tightness(name, L=1.0, mu=0.1, local_steps=1, rounds=1, lr=0.1)


def test_missing_pepit_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "PEPit", None)          # import PEPit now raises ImportError
    with pytest.raises(ImportError, match=r"\[pep\]"):
        validation.tightness("localdescent.theorem_4_1", L=1.0, mu=0.1, local_steps=1, rounds=1, lr=0.5)


@pytest.mark.parametrize("kw,param", [(dict(L=-1.0), "'L'"), (dict(mu=2.0), "'mu'"), (dict(local_steps=0),
                                      "'local_steps'"), (dict(lr=0.0), "'lr'"), (dict(solver="MOSEK"), "'solver'"),
                                      (dict(variant="nope"), "'variant'"),
                                      (dict(mu=1.0), r"'mu' .* range \[0, L=1.0\)")])
def test_bad_input_names_the_parameter(kw, param):
    """Every bad input is an InvalidParameterError naming the parameter (mu = L too: it used to reach PEPit
    and fail with a ZeroDivisionError)."""
    from fedtheory.exceptions import InvalidParameterError
    args = dict(L=1.0, mu=0.1, local_steps=1, rounds=1, lr=0.5)
    args.update(kw)
    with pytest.raises(InvalidParameterError, match=param):
        validation.tightness("localdescent.theorem_4_1", **args)
    with pytest.raises(InvalidParameterError, match="'name'"):
        validation.tightness("nope.theorem", L=1.0, mu=0.1, local_steps=1, rounds=1, lr=0.5)


@pytest.mark.parametrize("name,own", [("localdescent.theorem_4_1", "lam, server_lr"), ("fedsps.theorem_3b", "c")])
def test_unknown_keyword_names_the_accepted_ones(name, own):
    from fedtheory.exceptions import InvalidParameterError
    with pytest.raises(InvalidParameterError, match=rf"Unknown keyword 'lamda' .* theorem's own {own}\. "
                       r"Got lamda=2\.0"):
        validation.tightness(name, L=1.0, mu=0.1, local_steps=1, rounds=1, lr=0.5, lamda=2.0)


def test_solver_failure_at_a_huge_step_names_lr():
    """lr = 30 over 2 x 2 local steps: the worst case is finite (of order 29^8) but beyond the solver's
    accuracy; the failure is one PEPSolveError naming lr and asking for a smaller one."""
    with pytest.raises(T.PEPSolveError, match=r"at lr=30 .*numerical failure.*smaller lr"):
        validation.tightness("localdescent.theorem_4_1", L=1.0, mu=0.1, local_steps=2, rounds=2, lr=30.0,
                             threshold=False)


@pytest.mark.parametrize("name,kw,param", [("localdescent.theorem_4_1", dict(mu=0.0), "'mu'"),
                                           ("localdescent.theorem_4_1", dict(lam=0.5), "'lam'"),
                                           ("fedsps.theorem_3b", dict(mu=0.0), "'mu'"),
                                           ("fedsps.theorem_3a", dict(c=-1.0), "'c'")])
def test_theorem_constants_outside_the_theorem_name_the_parameter(name, kw, param):
    args = dict(L=1.0, mu=0.1, local_steps=1, rounds=1, lr=0.5)
    args.update(kw)
    with pytest.raises(ValueError, match=param):
        validation.tightness(name, **args)


def test_figure_has_both_panels(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    name, c = "localdescent.theorem_4_1", dict(L=1.0, mu=0.1, local_steps=1, n_clients=2)
    t = validation.tightness(name, rounds=2, lr=0.5, **c)
    cur = T.curves(name, rounds=2, lr=0.5, **c)
    assert np.all(cur["measured"] <= cur["upper"] + 1e-7) and np.all(cur["upper"] <= cur["bound"])
    con = T.contraction_curve(name, lrs=[0.5, 1.0, 2.5], **c)
    assert con["upper"][0] < 1 < con["upper"][2]
    fig = T.figure(t, cur, con)
    assert len(fig.axes) == 2
    fig.savefig(tmp_path / "f.png")


def test_doctests_of_the_module():
    res = doctest.testmod(T, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0 and res.attempted > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", COVERED)
def test_verify_tightness_rows(name, tmp_path):
    rows, lines = T.tightness_rows(quick=True, theorems=[name], out=tmp_path)
    assert len(rows) == 1 and rows[0]["verdict"].startswith("OK")
    assert (tmp_path / f"tightness_{name.replace('.', '_')}.png").exists()


@pytest.mark.slow
def test_local_gd_two_and_three_clients_with_local_steps():
    """Several local steps: at these constants the worst case is a quadratic shared by every client, so n = 2
    and n = 3 agree (measured)."""
    kw = dict(L=1.0, mu=0.1, local_steps=4, rounds=2, lr=0.5, threshold=False)
    two = validation.tightness("localdescent.theorem_4_1", n_clients=2, **kw).worst_case[1]
    three = validation.tightness("localdescent.theorem_4_1", n_clients=3, **kw).worst_case[1]
    assert abs(two - three) <= 1e-6


@pytest.mark.slow
def test_verify_cli_with_tightness(tmp_path, capsys):
    import pandas as pd
    from fedtheory.__main__ import main
    out = tmp_path / "v"
    assert main(["verify", "--quick", "--theorem", "localdescent.theorem_4_1", "--tightness", "--out", str(out)]) == 0
    assert "worst_case_upper" in capsys.readouterr().out
    v = pd.read_csv(out / "verdicts.csv")
    row = v[v.kind == "tightness"].iloc[0]
    assert row.verdict.startswith("OK") and row.measured <= row.worst_case_upper + 1e-7 <= row.bound + 1e-7
    assert row.looseness == pytest.approx(row.bound / row.worst_case_upper)
    rep = (out / "report.md").read_text()
    assert "## Tightness" in rep and (out / "tightness_localdescent_theorem_4_1.png").exists()


@pytest.mark.parametrize("lr,E,R", [(0.4, 2, 2), (1.0, 1, 3), (1.9, 1, 3)])
def test_extracted_worst_case_instance_attains_the_worst_case(lr, E, R):
    """The PEP's low-rank worst case of local GD is a quadratic of the class; lfd run on it by fedtheory.run
    measures the PEP's worst case (to the solver's accuracy)."""
    form = T.form_of("localdescent.theorem_4_1", L=1.0, mu=0.1, local_steps=E, rounds=R, lr=lr, n_clients=2)
    lo, hi, _ = T.worst_case(form)
    inst = T.worst_case_instance(form)
    assert inst is not None
    p, x0 = inst
    assert p.value(x0) == pytest.approx(1.0)
    measured = form.instances(R, [inst])[0, -1]
    assert abs(measured - hi) <= 1e-7 * max(1.0, hi)


def test_fedsps_worst_case_instance_is_extracted_too():
    """The initial point of the worst-case instance is read from PEPit's record of the builder's
    ``set_initial_point()``, whatever the builder (FedSPS's recorded none of its own, and ``curves``
    crashed on a fixed-step FedSPS form); the instance attains the worst case."""
    cur = T.curves("fedsps.theorem_6a", rounds=1, lr=0.025, L=1.0, mu=0.0, local_steps=1, n_clients=2)
    assert cur["lower"][0] <= cur["measured"][0] <= cur["upper"][0] + 1e-7
    form = T.form_of("fedsps.theorem_6a", L=1.0, mu=0.0, local_steps=1, rounds=1, lr=0.025, n_clients=2)
    p, x0 = T.worst_case_instance(form)
    assert abs(form.instances(1, [(p, x0)])[0, -1] - cur["upper"][0]) <= 1e-6 * max(1.0, cur["upper"][0])


def test_verify_tightness_without_pepit_is_a_usage_error_before_any_case(tmp_path, capsys, monkeypatch):
    """Without PEPit, `fedtheory verify --tightness` stops at once: one line, exit 2, no regular case run."""
    from fedtheory.reporting import verification
    from fedtheory.__main__ import main
    ran = []
    monkeypatch.setattr(verification, "run_cases", lambda *a, **k: ran.append(1))
    monkeypatch.setitem(sys.modules, "PEPit", None)
    out = tmp_path / "v"
    rc = main(["verify", "--quick", "--tightness", "--theorem", "localdescent.theorem_4_1", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and not ran and not out.exists()
    assert err.startswith("fedtheory verify: error: --tightness:") and "[pep]" in err and "\n" not in err


def test_pep_size_estimate_counts_the_built_pep_points():
    """pep_size's points are those the built PEP of local GD evaluates its clients at (no solve)."""
    for E, R, n in ((1, 1, 1), (2, 2, 2), (3, 2, 3)):
        form = T.form_of("localdescent.theorem_4_1", L=1.0, mu=0.1, local_steps=E, rounds=R, lr=0.3, n_clients=n)
        pep = form.build(None, "theorem")
        points, cons = T.pep_size(E, R, n)
        assert sum(len(f.list_of_points) for f in pep.fedtheory_clients) == points
        assert cons == sum(len(f.list_of_points) * (len(f.list_of_points) - 1) for f in pep.fedtheory_clients)


def test_too_large_pep_is_refused_up_front_unless_allowed():
    """local_steps*rounds = 200 was killed for memory: refused at once, naming K*R, the limit and the estimate;
    an explicit max_constraints lets a PEP above the default through."""
    from fedtheory.exceptions import InvalidParameterError
    with pytest.raises(InvalidParameterError, match=rf"local_steps\*rounds = 200 .* {2 * 202 * 201} interpolation "
                       rf"constraints, above max_constraints={2 * 18 * 17}"):
        validation.tightness("localdescent.theorem_4_1", L=1.0, mu=0.1, local_steps=10, rounds=20, lr=0.1,
                             threshold=False)
    small = T.pep_size(1, 2, 1)[1]
    with pytest.raises(InvalidParameterError, match=r"local_steps\*rounds = 3"):
        validation.tightness("localdescent.theorem_4_1", L=1.0, mu=0.1, local_steps=1, rounds=3, lr=0.5, n_clients=1,
                             threshold=False, max_constraints=small)
    t = validation.tightness("localdescent.theorem_4_1", L=1.0, mu=0.1, local_steps=1, rounds=3, lr=0.5, n_clients=1,
                             threshold=False, max_constraints=T.pep_size(1, 3, 1)[1])
    assert t.worst_case[1] == pytest.approx(0.95 ** 6, abs=1e-6)    # GD on the curvature-mu quadratic


def _failing_exact_solves(monkeypatch, form, keep):
    """Make every exact (fixed-step) PEP of ``form`` fail on every solver unless ``keep(steps)``."""
    build, solve = form.build, T.solve_pep

    def tagged(steps, metric):
        pep = build(steps, metric)
        pep.test_fixed = None if steps is None else steps.fixed
        return pep

    def failing(pep, solver="CLARABEL"):
        if pep.test_fixed is not None and not keep(list(pep.test_fixed)):
            raise RuntimeError("injected solver failure")
        return solve(pep, solver)
    monkeypatch.setattr(form, "build", tagged)
    monkeypatch.setattr(solve_module, "solve_pep", failing)


def test_branch_and_bound_keeps_children_whose_exact_solve_fails(monkeypatch):
    """A child whose exact PEP fails keeps its relaxation's upper bound in the queue: the upper end still
    bounds the worst case (at least the exact PEP value an undisturbed search finds). Before the fix only
    the root's poorest candidate (every step at its box's lower end) survived and the 'upper' end was its
    value, far below the worst case."""
    form = T.form_of("fedsps.theorem_3b", L=1.0, mu=0.1, local_steps=1, rounds=1, lr=1.0, n_clients=2, c=1.0)
    ref, _, _ = T.branch_and_bound(form, rtol=1e-3, time_limit=5.0)      # an exact PEP's value: <= worst case
    lo0 = form.step_box[0]
    _failing_exact_solves(monkeypatch, form, keep=lambda g: g == [lo0] * form.n_adaptive)
    lo, hi, info = T.branch_and_bound(form, rtol=1e-3, time_limit=5.0, max_nodes=30)
    assert hi >= ref - 1e-7 and lo <= hi
    assert info["exact_failures"] > 0 and info["lower_certified"]


def test_branch_and_bound_with_every_exact_solve_failing_reports_no_lower_bound(monkeypatch):
    form = T.form_of("fedsps.theorem_3b", L=1.0, mu=0.1, local_steps=1, rounds=1, lr=1.0, n_clients=2, c=1.0)
    ref, _, _ = T.branch_and_bound(form, rtol=1e-3, time_limit=5.0)
    _failing_exact_solves(monkeypatch, form, keep=lambda g: False)
    lo, hi, info = T.branch_and_bound(form, rtol=1e-3, time_limit=5.0, max_nodes=3)
    assert lo == -math.inf and not info["lower_certified"] and info["gap"] == math.inf
    assert hi >= ref - 1e-7 and math.isfinite(hi)


def test_step_outside_the_theorems_conditions_is_flagged():
    """lr = 1.9 exceeds both (19) and (43) of Theorem 4.1: the worst case exceeds the bound there (looseness
    < 1), which is no refutation, and the result says so; a step within both conditions is not flagged."""
    from fedtheory.theory.localdescent import lfgd_eta_max
    kw = dict(L=1.0, mu=0.1, local_steps=2, rounds=2, threshold=False)
    t = validation.tightness("localdescent.theorem_4_1", lr=1.9, **kw)
    assert 1.9 > lfgd_eta_max(1.0, 0.1, 1.0, 2, "43") > lfgd_eta_max(1.0, 0.1, 1.0, 2, "19")
    assert t.looseness < 1 and not t.conditions_ok
    assert [c.split(" ")[0] for c in t.failing_conditions] == ["(19)", "(43)"]
    for text in (repr(t), t.summary()):
        assert "\n" not in text and "(19)" in text and "(43)" in text
    assert "conditions_ok=False" in repr(t) and "no refutation" in t.summary()
    ok = validation.tightness("localdescent.theorem_4_1", lr=lfgd_eta_max(1.0, 0.1, 1.0, 2, "19"), **kw)
    assert ok.conditions_ok and ok.failing_conditions == () and "conditions_ok=True" in repr(ok)


@pytest.mark.parametrize("name", ["localdescent.theorem_4_1", "fedsps.theorem_6b"])
def test_describe_text_shows_pep_coverage(name, capsys):
    from fedtheory.__main__ import main
    assert main(["describe", name]) == 0
    text = capsys.readouterr().out.splitlines()
    cov = T.covered()[name]
    assert f"  tightness: {'validation.tightness (PEP registered)' if cov is True else cov}" in text


def test_verify_tightness_for_a_theorem_without_pep_writes_the_reason():
    """`verify --tightness --theorem fedsps.theorem_6b`: no solve, no empty table, the spec's reason instead."""
    rows, lines = T.tightness_rows(quick=True, theorems=["fedsps.theorem_6b"])
    assert rows == []
    assert not any(line.startswith("| theorem |") for line in lines)
    assert f"* `fedsps.theorem_6b`: no PEP: {SPECS['fedsps.theorem_6b'].pep}" in lines


def test_verify_row_outside_the_step_conditions_is_no_refutation(monkeypatch):
    """A worst case above the bound at a step the theorem does not allow is reported as such, not as
    UNEXPECTED (which would claim a refutation)."""
    from fedtheory.theory import tightness as T
    from fedtheory.theory.tightness import report
    cfg = dict(L=1.0, mu=0.1, local_steps=2, rounds=2, lr=1.9, n_clients=2)    # outside (19) and (43)
    monkeypatch.setattr(report, "TIGHTNESS_CASES", {"localdescent.theorem_4_1": lambda quick: cfg})
    rows, _ = T.tightness_rows(quick=True, theorems=["localdescent.theorem_4_1"])
    (row,) = rows
    assert row["worst_case_lower"] > row["bound"]                 # the bound does not hold at this step...
    assert row["verdict"].startswith("worst case > bound outside the theorem's conditions (no refutation)")
    assert not row["verdict"].startswith("UNEXPECTED")            # ...and the theorem does not claim it does


def test_a_condition_on_constants_other_than_lr_is_part_of_conditions_ok():
    """FedSPS Theorem 3(a) with c = 0.05 (the theorem needs c >= 2 tau^2 = 8): a worst case above the
    bound (0.375 > 0.263) came with conditions_ok=True and "no step condition", reading as a
    refutation. So did LFD's Theorem 4.1 with a server step other than the paper's 1 (0.99992 >
    0.9996), and server_lr = -1 was accepted."""
    t = validation.tightness("fedsps.theorem_3a", L=1.0, mu=0.0, local_steps=2, rounds=2, lr=1.9, n_clients=2,
                             c=0.05, threshold=False, time_limit=4.0)
    assert not t.conditions_ok and t.failing_conditions == ("c >= 2 tau^2 = 8 (c = 0.05)",)
    assert "outside the theorem's conditions (c >= 2 tau^2 = 8 (c = 0.05))" in t.summary()
    # the bracket's upper end is certified whenever the branch and bound stops (its root relaxation
    # at the least): 0.42 here after 0.5 s, against a bound of 8
    ok = validation.tightness("fedsps.theorem_3a", L=1.0, mu=0.0, local_steps=2, rounds=2, lr=1.9, n_clients=2,
                              c=8.0, threshold=False, time_limit=0.5)
    assert ok.conditions_ok and ok.worst_case[1] <= ok.bound
    kw = dict(L=1.0, mu=0.1, local_steps=2, rounds=2, lr=0.001, n_clients=2, threshold=False, time_limit=4.0)
    t = validation.tightness("localdescent.theorem_4_1", server_lr=0.1, **kw)
    assert not t.conditions_ok and t.failing_conditions[-1].startswith("server_lr = 1, the theorem's method")
    assert validation.tightness("localdescent.theorem_4_1", **kw).conditions_ok
    from fedtheory.exceptions import InvalidParameterError
    with pytest.raises(InvalidParameterError, match="'server_lr' parameter of localdescent.theorem_4_1"):
        validation.tightness("localdescent.theorem_4_1", server_lr=-1.0, **kw)


def test_verify_row_whose_bracket_straddles_the_bound_is_unresolved(monkeypatch):
    """``verify --tightness`` said "OK: measured <= worst case <= bound" when only the bracket's lower
    end was below the bound: a worst case in [lo, hi] with lo <= bound < hi is not certified below it."""
    import dataclasses
    from fedtheory.theory.tightness import report
    real = report.tightness

    def wide(name, **kw):                    # the real result, its bracket's upper end moved above the bound
        t = real(name, **kw)
        return dataclasses.replace(t, worst_case=(t.worst_case[0], 2.0 * t.bound))

    monkeypatch.setattr(report, "tightness", wide)
    (row,), _ = T.tightness_rows(quick=True, theorems=["localdescent.theorem_4_1"])
    assert row["worst_case_lower"] <= row["bound"] < row["worst_case_upper"]
    assert row["verdict"].startswith("UNRESOLVED: the worst case lies in ["), row["verdict"]
