"""Long validation runs (``pytest -m slow``): full a9a, 100 clients, exact gradients."""
import numpy as np
import pytest

import fedtheory as ft
import problems
import validation


@pytest.mark.slow
def test_a9a_scaffold_reaches_certified_optimum_fedavg_floors(data_dir):
    """SCAFFOLD (exact method) reaches F* to 1e-12 on a9a; FedAvg and FedProx stop at a drift floor
    that shrinks with the step size (client drift ~ eta^2 (K-1)^2)."""
    p = problems.libsvm("a9a", n_clients=100, l2=1e-2, data_dir=data_dir)
    gt = validation.ground_truth(p)
    c = validation.constants(p, gt)
    # the certified precision (README: ~1e-12); a fresh solve gives 1.58e-13 here, old code and new alike
    # (the former 1e-13 bound held only for an entry cached by an earlier solve)
    assert gt.residual < 1e-12 and np.all(gt.client_attained)
    lr = 1.0 / c.L
    sc = ft.run(p, "scaffold", rounds=1500, local_steps=5, lr=lr, reference=gt, eval_every=100)
    assert sc.history.suboptimality.iloc[-1] < 1e-12
    floors = []
    for scale in (1.0, 0.5):
        fa = ft.run(p, "fedavg", rounds=3000, local_steps=5, lr=scale * lr, reference=gt, eval_every=500)
        h = fa.history.suboptimality
        assert abs(h.iloc[-1] - h.iloc[-2]) < 1e-3 * h.iloc[-1]   # plateaued
        floors.append(h.iloc[-1])
    assert floors[0] > 1e-8 and floors[1] < floors[0] / 2.5          # roughly quadratic in eta


@pytest.mark.slow
def test_fedspeed_experiments_quick(tmp_path):
    """spec/fedspeed.md §7 predictions on the quick variant of validation/fedspeed_experiments.py."""
    from validation import fedspeed_experiments as fx
    t = fx.main(["--quick", "--out", str(tmp_path)])
    assert (tmp_path / "e6_theorem_audit.csv").exists()
    # E3: FedSpeed(alpha=0, lam L = 2) reaches ||grad F|| <= 1e-8 for K >= 5; FedAvg stalls at a floor
    e3 = t["e3_no_drift"]
    fs = e3[(e3.method == "fedspeed lam*L=2") & (e3.K >= 5)]
    assert (fs.final_grad_norm < 1e-8).all()
    fa = e3[(e3.method == "fedavg") & (e3.K >= 5)]
    assert (fa.final_grad_norm > 1e-3).all()
    # E4: raw perturbation converges to x_pred of P14; a shared Hessian has no bias; SAM keeps one
    e4 = t["e4_perturbation_bias"]
    assert (e4[e4.perturbation == "raw"].dist_to_x_pred < 1e-12).all()
    assert (e4[(e4.hessian == "shared") & (e4.perturbation == "raw")].dist_to_x_star < 1e-12).all()
    assert (e4[e4.perturbation == "sam"].dist_to_x_pred > 1e-4).all()
    # E5: alg1 floor under S < n, growing with lambda; dyn converges; equal at S = n
    e5 = t["e5_server_rule"]
    a1 = e5[(e5.server == "alg1") & (e5.S < 20)]
    assert (a1.mean_dist_last200 > 1e-2).all()
    by_lam = a1.groupby("lam_L").mean_dist_last200.mean()
    assert by_lam.is_monotonic_increasing
    assert (e5[(e5.S == 20)].mean_dist_last200 < 1e-6).all()
    assert (e5[(e5.server == "dyn") & (e5.lam_L == 0.5)].mean_dist_last200 < 1e-8).all()
    # E6: C1 all bounds hold; C2, C3, C5 violate printed and derived, corrected holds; C4 fails H2
    e6 = t["e6_theorem_audit"].set_index("case")
    assert e6.loc["C1", ["printed_holds", "derived_holds", "corrected_holds"]].all()
    for c in ("C2", "C3", "C5"):
        assert e6.loc[c, "stated_ok"] and e6.loc[c, "hidden_failed"] == "-"
        assert not e6.loc[c, "printed_holds"] and not e6.loc[c, "derived_holds"]
        assert e6.loc[c, "corrected_holds"]
    assert e6.loc["C4", "hidden_failed"] == "H2"
    # E7: the floor scales as 1/K (K * floor within 25% of its mean) and matches the heuristic
    e7 = t["e7_noise_floor"]
    kf = e7.K_times_floor
    assert (abs(kf / kf.mean() - 1) < 0.25).all()
    assert (abs(e7.floor / e7.heuristic - 1) < 0.3).all()


@pytest.mark.slow
def test_localdescent_experiments_quick(tmp_path):
    """spec/localdescent.md §7 predictions on the quick variant of validation/localdescent_experiments.py."""
    from validation import localdescent_experiments as lx
    t = lx.main(["--quick", "--out", str(tmp_path)])
    e1 = t["e1_lfgd_validity"]
    conforming = e1[e1.condition.isin(["46", "43"])]
    assert conforming.holds.all()                                    # item 1: bound holds at every round
    assert not e1[e1.condition.str.startswith("negative")].holds.any()   # the check can fail
    # eta = 1/L at E = 20 is outside (43) and (46), yet the bound holds (local GD contracts f - f* by
    # (1 - mu/L)^2 per step, the bound by 1 - mu eta), compared only where it exceeds 1e-13 f0
    outside = e1[e1.condition.str.startswith("outside")]
    assert len(outside) == 1 and outside.holds.all()
    e2 = t["e2_distinct_minimizers"]                                 # item 2: plateau = f(x_E) - f*
    assert not e2.theorem_4_1_applicable.any()
    big = e2[e2.E > 1]
    assert (abs(big.plateau_measured / big.plateau_predicted - 1) < 1e-3).all()
    e3 = t["e3_admissible_eta"]                                      # item 3: (43) and (46) conservative
    assert (e3.conservatism_43 >= 1).all() and (e3.conservatism_46 >= e3.conservatism_43).all()
    e5 = t["e5_lfsgd_pl"]
    assert e5[e5.part == "a validity"].holds.all()
    cx = e5[e5.part.str.startswith("b")].iloc[0]
    assert cx.applicable and not cx.holds                            # item 5b: counterexample reproduced
    e6 = t["e6_lfsgd_nonconvex"]                                     # item 6: (24) holds, linear speed-up
    assert (e6.measured <= e6.bound).all()
    sp = e6[e6.S == 2].set_index("E").measured / e6[e6.S == 8].set_index("E").measured
    assert ((sp > 1.7) & (sp < 2.3)).all()
    e8 = t["e8_duplicates"]                                          # item 8: shared-duplicate variance
    assert (abs(e8.ratio / e8.predicted_ratio - 1) < 0.1).all()
    e9 = t["e9_nonuniform_q"].set_index("W")
    assert e9.iloc[0].dist_to_q_minimiser < 1e-8 and e9.iloc[1].dist_to_uniform_minimiser < 1e-8


@pytest.mark.slow
def test_fedsps_reproduction_quick(tmp_path, data_dir):
    """The LIBSVM reproduction runs end to end; the cap binds on every step, so FedSPS equals FedAvg(1)."""
    from validation import fedsps_reproduction as fr
    t = fr.main(["--quick", "--out", str(tmp_path), "--data-dir", data_dir, "--datasets", "mushrooms"])
    s = t["summary"][t["summary"].dataset == "mushrooms"].set_index("method")
    sps = s.loc["FedSPS (c=0.5, gb=1)"]
    assert sps.capped_frac_all_steps > 0.999                      # the cap binds on (almost) every step
    avg = s[s.index.str.startswith("FedAvg tuned {'lr': 1.0, 'server_lr': 1.0}")]
    if len(avg):                                                  # ... so FedSPS is FedAvg(1)
        assert abs(avg.final_loss.iloc[0] - sps.final_loss) < 1e-2 * sps.final_loss
    assert (tmp_path / "curves.csv").exists() and (tmp_path / "sensitivity.csv").exists()


@pytest.mark.slow
def test_feddeper_experiments_quick(tmp_path):
    """spec/feddeper.md §7 predictions (E3 bias vs rho K, E4 steady step, E5 instability) on the quick variant."""
    from validation import feddeper_experiments as fx
    t = fx.main(["--quick", "--out", str(tmp_path)])
    e3 = t["e3_fixed_point_bias"]
    d = e3[(e3.hessian == "distinct") & (e3.method == "feddeper") & (e3.lam == 0.5)].set_index("rhoK")
    assert d.ratio_to_fedavg.idxmin() in (0.1, 0.112)                 # drift-cancelling rho* K ~ 0.11
    assert d.ratio_to_fedavg.loc[0.3] > 1                             # the paper's rho K = 0.3: worse than FedAvg
    sc = e3[(e3.hessian == "distinct") & (e3.method == "scaffold")].grad_norm.iloc[0]
    assert sc < 1e-10                                                 # SCAFFOLD removes the drift
    e4 = t["e4_effective_step"]
    assert (abs(e4.step_over_etaK_measured - e4.h_moving_over_etaK) < 1e-4).all()
    e5 = t["e5_instability"]
    runs = e5[e5.multiple.notna()]
    assert (runs[runs.multiple == 3.0].final_dist > 1e6).all()        # 3x the threshold blows up
    assert (runs[runs.multiple == 0.5].final_dist < 10).all()         # 0.5x stays bounded


@pytest.mark.slow
def test_pfedfbe_reproduction_quick(tmp_path):
    """Setting (II): MSE diverges, 1/2-MSE personalization moves < 0.01 (recall capped at 0.8), cheap == FedMiD."""
    from validation import pfedfbe_reproduction as pr
    s = pr.main(["--quick", "--out", str(tmp_path)])["summary"].set_index(["setting", "normalization", "method"])
    assert s.loc[("II", "mse", "pFedFBE full (lam=2000)")].objective > 100     # growing: 16 at x0 = 0
    half = s.loc[("II", "half_mse", "pFedFBE full (lam=2000)")]
    assert half.pm_shift_inf < 0.01                              # below the support threshold ...
    assert abs(half.pm_recall - half.gm_recall) < 0.02          # ... so personalization adds no support
    cheap = s.loc[("II", "half_mse", "pFedFBE cheap (lam=2000)")].objective
    assert abs(cheap - s.loc[("II", "half_mse", "FedMiD")].objective) < 1e-12 * cheap


@pytest.mark.slow
def test_deep_reproduction_script_smoke_offline(tmp_path):
    """The deep reproduction script end to end on the offline digits stand-in: it stores a results
    table that ``fedtheory plot`` reads (the paper-scale runs need the data sets and a GPU)."""
    pytest.importorskip("torch")
    import pandas as pd
    from validation import deep_reproduction
    d = deep_reproduction.run_experiment("fedsps_lenet_mnist", quick=True, dataset="digits", out=tmp_path,
                                         log=lambda *a: None)
    df = pd.read_parquet(d / "results.parquet")
    assert df.run_id.nunique() == 8 and {"test_acc", "train_acc", "param_algorithm"} <= set(df.columns)
    from fedtheory.__main__ import main
    assert main(["plot", str(d), "--y", "test_acc", "--out", str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "p.png").stat().st_size > 0
