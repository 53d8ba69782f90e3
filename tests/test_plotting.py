"""Rate plots: one curve per setting (never settings averaged as seeds), filters, axes, styles,
legends outside the data; the verify report's figures (size, labels, one colour per variant)."""
import itertools

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from fedtheory.plotting import (BOUND_STYLES, bound_style, bound_vs_T, curve_groups, filter_table,  # noqa: E402
                                rate_plot, results_figure)
from fedtheory.plotting import MAX_PIXELS  # noqa: E402
from fedtheory.reporting.verify_report import ratios_figure, save_figure  # noqa: E402

ROUNDS = np.array([0, 1, 2, 3])


@pytest.fixture(autouse=True)
def _close_figures():
    """Every test starts and ends with no open figure (the library returns them open, to the caller)."""
    import matplotlib.pyplot as plt
    plt.close("all")
    yield
    plt.close("all")


def _run(run_id, seed, values, **params):
    """One run's rows: ``values`` per round, communication 2 vectors and 5 gradients per round."""
    values = np.asarray(values, float)
    return pd.DataFrame({"run_id": run_id, "param_seed": seed, **{f"param_{k}": v for k, v in params.items()},
                         "round": ROUNDS, "comm_up": 2 * ROUNDS, "grad_evals": 5 * ROUNDS,
                         "suboptimality": values, "test_acc": 1 - values / (1 + values)})


def _feddeper_table():
    """FedDeper and FedDeper* (``star`` set on the second only, as the deep reproduction stores it),
    two seeds each, and a FedAvg run (which has neither ``star`` nor ``mix``)."""
    base = np.array([1.0, 0.1, 0.01, 0.001])
    return pd.concat([
        _run("d0", 0, base, algorithm="feddeper", mix=0.5),
        _run("d1", 1, 3 * base, algorithm="feddeper", mix=0.5),
        _run("s0", 0, 10 * base, algorithm="feddeper", mix=0.5, star=True),
        _run("s1", 1, 30 * base, algorithm="feddeper", mix=0.5, star=True),
        _run("a0", 0, 100 * base, algorithm="fedavg"),
    ], ignore_index=True)


def test_settings_that_differ_in_a_non_seed_parameter_are_distinct_curves():
    df = _feddeper_table()
    labels = [label for label, _ in curve_groups(df)]
    assert labels == ["fedavg", "feddeper, mix=0.5", "feddeper, mix=0.5, star=True"]
    fig = rate_plot(df)
    lines = fig.axes[0].lines
    # the legend writes the algorithms' display names and the parameters in words
    assert [ln.get_label() for ln in lines] == ["FedAvg", "FedDeper, mix = 0.5 (2 seeds)",
                                                "FedDeper, mix = 0.5, star = True (2 seeds)"]
    base = np.array([1.0, 0.1, 0.01, 0.001])
    # each curve is the mean over its own seeds only: FedDeper (1 and 3) and FedDeper* (10 and 30)
    assert np.allclose(lines[1].get_ydata(), 2 * base)
    assert np.allclose(lines[2].get_ydata(), 20 * base)
    assert np.allclose(lines[0].get_ydata(), 100 * base)


def test_seeds_of_one_setting_are_one_curve_with_a_min_max_band():
    df = _feddeper_table()
    fig = rate_plot(df, filters=["star=True"])
    ax = fig.axes[0]
    assert len(ax.lines) == 1
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    base = np.array([1.0, 0.1, 0.01, 0.001])
    assert np.isclose(band.max(), 30 * base.max()) and np.isclose(band.min(), 10 * base.min())


def test_filter_selects_runs_by_parameter_and_names_unknown_keys():
    df = _feddeper_table()
    assert sorted(filter_table(df, ["algorithm=feddeper"]).run_id.unique()) == ["d0", "d1", "s0", "s1"]
    assert sorted(filter_table(df, {"algorithm": "feddeper", "mix": "5e-1"}).run_id.unique()) == ["d0", "d1", "s0", "s1"]
    assert sorted(filter_table(df, ["algorithm=fedavg", "algorithm=feddeper", "seed=1"]).run_id.unique()) == ["d1", "s1"]
    with pytest.raises(ValueError, match="Unknown parameter 'lr'.*'algorithm'"):
        filter_table(df, ["lr=0.1"])
    with pytest.raises(ValueError, match="key=value"):
        filter_table(df, ["algorithm"])
    with pytest.raises(ValueError, match="No run matches"):
        filter_table(df, ["algorithm=scaffold"])


def test_exact_zero_is_marked_at_the_floor_not_stretching_the_axis():
    """A run reaching exactly 0 (SCAFFOLD on some CPUs) beside one at 1e-16: the log axis spans
    the positive values only (not 300 decades down to the smallest float), the round where the
    mean is not positive is marked at the axis' bottom, and the legend says what the mark means."""
    import warnings
    base = [1.0, 1e-3, 1e-9]
    df = pd.concat([_run("z", 0, base + [0.0], algorithm="scaffold"), _run("y", 1, base + [1e-16], algorithm="scaffold"),
                    _run("n", 0, base + [-1e-17], algorithm="fedavg")], ignore_index=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        fig = results_figure(df)
        fig.canvas.draw()
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    assert 1e-19 < lo < 5e-17 and 1.0 < hi < 10.0            # 5e-17 (the SCAFFOLD mean) is shown
    scaffold = [ln for ln in ax.lines if ln.get_label().startswith("SCAFFOLD")][0]
    assert np.isclose(scaffold.get_ydata()[-1], 5e-17)         # the mean over both seeds, 0 included
    fedavg = [ln for ln in ax.lines if ln.get_label() == "FedAvg"][0]
    assert np.isnan(fedavg.get_ydata()[-1])                    # -1e-17: not on the line ...
    marks = [ln for ln in ax.lines if ln.get_label() == "_off_axis"]
    assert len(marks) == 1 and marks[0].get_marker() == "v" and marks[0].get_xdata()[0] == 3
    assert lo < marks[0].get_ydata()[0] < 5e-17                # ... but marked below every value drawn
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "0 or below (rounding level), at the bottom" in labels
    assert len([t for t in ax.get_yticklabels() if t.get_text()]) >= 3


def test_x_axis_names_of_the_command_line():
    df = _feddeper_table()
    for x, col, factor in (("rounds", "round", 1), ("comm", "comm_up", 2), ("grad_evals", "grad_evals", 5)):
        ax = rate_plot(df, x=x).axes[0]
        assert np.allclose(ax.lines[0].get_xdata(), factor * ROUNDS), x
        assert ax.get_xlabel() == {"round": "communication rounds", "comm_up": "vectors sent to the server",
                                   "grad_evals": "stochastic gradient evaluations"}[col]
    with pytest.raises(ValueError, match="'x' parameter of rate_plot"):
        rate_plot(df, x="epochs")


def test_accuracy_on_a_linear_axis_suboptimality_on_a_log_axis():
    df = _feddeper_table()
    assert rate_plot(df, y="test_acc").axes[0].get_yscale() == "linear"
    assert rate_plot(df, y="suboptimality").axes[0].get_yscale() == "log"


def test_twenty_curves_have_distinct_colour_and_line_style_pairs():
    df = pd.concat([_run(f"r{j}", 0, [1, 0.5, 0.2, 0.1], algorithm="fedavg", lr=0.01 * (j + 1))
                    for j in range(20)], ignore_index=True)
    lines = rate_plot(df).axes[0].lines
    assert len(lines) == 20
    pairs = [(matplotlib.colors.to_hex(ln.get_color()), ln.get_linestyle()) for ln in lines]
    assert len(set(pairs)) == 20
    # curves that share a colour differ in line style (the pair, not the colour alone, is unique)
    for a, b in itertools.combinations(pairs, 2):
        assert a != b


def test_legend_lies_outside_the_data():
    df = _feddeper_table()
    for fig in (rate_plot(df), results_figure(df)):
        fig.canvas.draw()
        legend = (fig.axes[0].get_legend() or fig.legends[0]).get_window_extent()
        for ax in fig.axes:
            assert not legend.overlaps(ax.get_window_extent())


def test_cli_plot_filter_and_x(tmp_path):
    from fedtheory.__main__ import main
    (tmp_path / "r").mkdir()
    _feddeper_table().to_parquet(tmp_path / "r" / "results.parquet")
    out = tmp_path / "one.png"
    import fedtheory.reporting.plot_command as plotting      # where the command calls it
    figures = []
    real = plotting.results_figure

    def keep(*a, **k):                      # the figure the command saves, kept for inspection
        figures.append(real(*a, **k))
        return figures[-1]
    import unittest.mock
    with unittest.mock.patch.object(plotting, "results_figure", keep):
        assert main(["plot", str(tmp_path / "r"), "--filter", "algorithm=feddeper", "--x", "comm",
                     "--out", str(out), "--y", "test_acc"]) == 0
    assert out.stat().st_size > 5000
    (fig,) = figures
    (ax,) = [a for a in fig.axes if a.lines]                          # --x comm: one panel
    assert ax.get_xlabel() == "vectors sent to the server" and ax.get_yscale() == "linear"  # accuracy: linear
    labels = [ln.get_label() for ln in ax.lines if not ln.get_label().startswith("_")]
    assert labels and all(lb.startswith("FedDeper") for lb in labels)  # the filter dropped fedavg
    assert fig.legends[0].get_title().get_text() == "runs with algorithm = FedDeper"   # and is stated


# ------------------------------------------------------------------ verify report figures

def _verdicts(n_theorems=12, rows=8):
    """A verdict table as large as a full verify: ratios over 40 decades, not-applicable rows, long labels."""
    recs = []
    for t in range(n_theorems):
        for r in range(rows):
            variant = ("printed", "corrected", "derived")[r % 3]
            ratio = 10.0 ** (32 * (r == 0 and t == 1) - 7 * (r == 1) + 0.3 * r - 1)
            na = r == rows - 1
            recs.append(dict(theorem=f"paper{t}.theorem_{t}", case=f"a long case label describing the problem, "
                             f"case number {r} of theorem {t}, with its step size and rounds", kind="conforming",
                             variant=variant, ratio=np.nan if na else ratio,
                             verdict="NOT APPLICABLE: [stated] S1 fails" if na else "holds"))
    return pd.DataFrame(recs)


def test_report_figures_at_most_2400_pixels(tmp_path):
    from PIL import Image
    save_figure(ratios_figure(_verdicts()), tmp_path / "ratios.png")
    save_figure(bound_vs_T([10, 20, 40, 80], [1, 0.5, 0.25, 0.12], [0.01] * 4,
                           {"printed": [0.5, 0.3, 0.2, 0.1], "corrected": [4, 2, 1, 0.5]}, -1,
                           title="a.theorem\nstudy"), tmp_path / "rate.png")
    for name in ("ratios.png", "rate.png"):
        w, h = Image.open(tmp_path / name).size
        assert max(w, h) <= MAX_PIXELS, (name, w, h)


def test_ratio_figure_one_horizontal_panel_per_theorem_no_overlapping_labels():
    df = _verdicts(n_theorems=4)
    fig = ratios_figure(df)
    assert len(fig.axes) == 4
    fig.canvas.draw()
    boxes = [t.get_window_extent() for ax in fig.axes for t in ax.get_yticklabels()]
    boxes += [ax.title.get_window_extent() for ax in fig.axes]
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b)
    wide = fig.axes[1]                     # the 1e31 ratio: decades apart, so a log axis
    assert wide.get_xscale() == "log"
    patches = [p for p in wide.patches if p.get_width() > 0]
    assert len(patches) == 7                # 8 rows, one of them not applicable
    texts = [t.get_text() for t in wide.texts]
    assert any(t.startswith("n/a") for t in texts)


def test_one_colour_per_bound_variant_in_every_figure():
    """The printed and corrected bounds have the colour of BOUND_STYLES in the rate figures and the
    ratio bars alike."""
    fig = bound_vs_T([10, 20], [1, 0.5], bounds={"corrected": [4, 2], "printed": [0.5, 0.4]})
    by_label = {ln.get_label(): ln.get_color() for ln in fig.axes[0].lines}
    bars = ratios_figure(_verdicts(n_theorems=1, rows=4)).axes[0].patches   # the 4th row: n/a
    for variant in ("printed", "corrected"):
        want = matplotlib.colors.to_hex(BOUND_STYLES[variant]["color"])
        assert matplotlib.colors.to_hex(by_label[f"bound: {variant}"]) == want
        assert bound_style(variant)["color"] == BOUND_STYLES[variant]["color"]
    colours = {matplotlib.colors.to_hex(p.get_facecolor()[:3]) for p in bars}
    assert colours == {matplotlib.colors.to_hex(BOUND_STYLES[v]["color"]) for v in ("printed", "corrected", "derived")}


def test_violation_is_marked_by_a_hatch_not_by_the_variant_colour():
    """A printed bound that holds and one that is violated have the same (neutral) colour; only the
    violated bar is hatched, black-edged and says "violated" after its value."""
    t = pd.DataFrame(dict(theorem="a.t1", case=["C1: holds", "C2: fails"], kind="conforming",
                          variant="printed", ratio=[0.5, 3.0], verdict=["holds", "VIOLATED"]))
    ax = ratios_figure(t).axes[0]
    held, violated = sorted(ax.patches, key=lambda p: p.get_width())
    assert matplotlib.colors.to_hex(held.get_facecolor()[:3]) == matplotlib.colors.to_hex(violated.get_facecolor()[:3])
    for colour in ("tab:red", "tab:green", "red", "green"):     # a colour never says holds / violated
        assert matplotlib.colors.to_hex(held.get_facecolor()[:3]) != matplotlib.colors.to_hex(colour)
    assert not held.get_hatch() and violated.get_hatch() == "///"
    texts = [tx.get_text() for tx in ax.texts]
    assert "3  violated" in texts and "0.5" in texts


@pytest.mark.parametrize("holds, expected", [(False, False), (False, True), (False, None), (True, True)])
def test_every_violated_verdict_verify_writes_is_hatched(holds, expected):
    """The figure read "VIOLATED" while verify wrote "violated (documented counterexample)": none of the
    documented counterexamples' bars above 1 was hatched. Cells made by verify's own verdict_cell."""
    from types import SimpleNamespace

    from fedtheory.theory.verdicts import is_violated
    from fedtheory.reporting.verification import verdict_cell
    ratio = 0.5 if holds else 3.0
    v = SimpleNamespace(applicable=True, holds=holds, measured=ratio, bound=1.0, verdict=lambda: "holds" if holds
                        else "VIOLATED")
    cell = verdict_cell(v, expected, "counterexample" if expected is False else "conforming")
    assert is_violated(cell) == (not holds)
    t = pd.DataFrame(dict(theorem="a.t1", case=["C1"], kind="conforming", variant="printed", ratio=[ratio],
                          verdict=[cell]))
    ax = ratios_figure(t).axes[0]
    (bar,) = ax.patches
    assert (bar.get_hatch() == "///") == (not holds), cell
    assert any(tx.get_text().endswith("violated") for tx in ax.texts) == (not holds)


def test_ratio_figure_names_cases_in_full_without_file_paths():
    long = ("docs/papers/fedsps.md, §8 rescaled 1-D problem (s = 1000, tau = 1e4), periodic from the "
            "FedAvg fixed point, with a label long enough to need a second line in the figure")
    t = pd.DataFrame(dict(theorem="a.t1", case=[long, long], kind="counterexample", variant=["printed", "corrected"],
                          ratio=[1.36, 8.7e-5], verdict=["VIOLATED (documented counterexample)", "holds"]))
    fig = ratios_figure(t)
    ax = fig.axes[0]
    (header,) = [tx.get_text() for tx in ax.texts if tx.get_text().startswith("§8")]
    assert header.replace("\n", " ") == long.removeprefix("docs/papers/fedsps.md, ")   # in full: no "..."
    assert [tk.get_text() for tk in ax.get_yticklabels()] == ["printed", "corrected"]
    fig.canvas.draw()
    boxes = [tx.get_window_extent() for tx in ax.texts] + [tk.get_window_extent() for tk in ax.get_yticklabels()]
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b)


def test_report_figures_are_written_as_png_and_pdf(tmp_path):
    save_figure(ratios_figure(_verdicts(n_theorems=1, rows=3)), tmp_path / "ratios.png")
    assert (tmp_path / "ratios.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "ratios.pdf").read_bytes()[:4] == b"%PDF"


def test_bound_vs_T_names_the_quantity_and_shows_the_predicted_order_above_the_measured_curve():
    T = [10, 20, 40, 80]
    fig = bound_vs_T(T, [1.0, 0.5, 0.25, 0.125], bounds={"printed": [4, 2, 1, 0.5]}, predicted_slope=-1,
                     ylabel="(1/T) sum_t ||grad f(x^t)||^2")
    ax = fig.axes[0]
    assert ax.get_ylabel() == "(1/T) sum_t ||grad f(x^t)||^2"
    measured = [ln for ln in ax.lines if ln.get_label().startswith("measured")][0]
    (pred,) = [ln for ln in ax.lines if ln.get_label().startswith("predicted order")]
    assert "anchored at T = 80" in pred.get_label()
    assert np.allclose(pred.get_ydata(), [1.0, 0.5, 0.25, 0.125])         # here it coincides with the data ...
    assert pred.get_zorder() > measured.get_zorder() and pred.get_linestyle() == "--"   # ... and stays visible
    assert matplotlib.colors.to_hex(pred.get_color()) != matplotlib.colors.to_hex(measured.get_color())
    fig.canvas.draw()
    assert len([t for t in ax.get_yticklabels() if t.get_text()]) >= 3   # 1.5 decades: 1-2-5 labels


def test_a_point_between_gaps_is_drawn():
    """A positive mean with values at or below 0 on both sides has no line through it: it is
    drawn as a marker of its own (it used to vanish unless the staggered markers fell on it)."""
    df = _run("a", 0, [1.0, -1e-17, 0.01, 0.0], algorithm="scaffold")
    ax = rate_plot(df).axes[0]
    alone = [ln for ln in ax.lines if ln.get_label() == "_alone"]
    assert len(alone) == 1                    # round 0 (no round before it) and round 2
    assert list(alone[0].get_xdata()) == [0, 2] and list(alone[0].get_ydata()) == [1.0, 0.01]
    marks = [ln for ln in ax.lines if ln.get_label() == "_off_axis"]
    assert sorted(marks[0].get_xdata()) == [1, 3]


def _hist_rows(scale, run_id, seed, rounds=range(11)):
    r = np.asarray(list(rounds))
    return pd.DataFrame({"round": r, "comm_up": 4 * r, "grad_evals": 10 * r, "grad_mapping_sq": scale * 0.5 ** r,
                         "run_id": run_id, "param_algorithm": "fedavg", "param_seed": seed})


def test_rate_plot_refuses_a_run_id_shared_by_two_runs_and_a_table_without_run_ids():
    """Two seeds under one run_id were merged silently (the first row of each round kept: one seed
    drawn as the mean); a table without run_id was a bare KeyError."""
    from fedtheory.plotting import rate_plot
    with pytest.raises(ValueError, match="run_id 'fedavg' has several rows at round 0"):
        rate_plot(pd.concat([_hist_rows(1.0, "fedavg", 0), _hist_rows(100.0, "fedavg", 1)]), y="grad_mapping_sq")
    with pytest.raises(ValueError, match="rate_plot needs a 'run_id' column"):
        rate_plot(_hist_rows(1.0, "x", 0).drop(columns="run_id"), y="grad_mapping_sq")
    fig = rate_plot(pd.concat([_hist_rows(1.0, "a", 0), _hist_rows(100.0, "b", 1)]), y="grad_mapping_sq")
    np.testing.assert_allclose(fig.axes[0].lines[0].get_ydata(), 50.5 * 0.5 ** np.arange(11))


def test_rate_plot_stops_the_mean_where_a_seed_ends_and_says_so():
    """A seed whose history ends (a diverged run keeps its finite rows) left the mean of the survivors
    beyond, a 100x drop the legend ('2 seeds') did not explain: the mean now stops there, labelled."""
    from fedtheory.plotting import rate_plot
    fig = rate_plot(pd.concat([_hist_rows(1.0, "a", 0), _hist_rows(100.0, "b", 1, rounds=range(5))]),
                    y="grad_mapping_sq")
    y = fig.axes[0].lines[0].get_ydata()
    np.testing.assert_allclose(y[:5], 50.5 * 0.5 ** np.arange(5))
    assert np.isnan(y[5:]).all()
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == [
        "FedAvg (mean up to round 4, where 1 of 2 seeds end)"]


def test_legend_labels_of_distinct_settings_stay_distinct():
    """Four significant digits merged lr = 0.1 and 0.100004 into one legend text for two curves; the
    labels of a plot now keep the digits that tell them apart (and only then)."""
    from fedtheory.plotting import curve_groups
    t = pd.DataFrame({"run_id": list("abcd"), "param_algorithm": ["fedavg"] * 4,
                      "param_lr": [0.1, 0.100004, 1e-5, 1.00004e-5]})
    labels = [label for label, _ in curve_groups(t, readable=True)]
    assert len(set(labels)) == 4 and "FedAvg, lr = 0.100004" in labels
    t2 = t.assign(param_lr=[0.1, 0.2, 0.123456789, 0.3])
    assert "FedAvg, lr = 0.1235" in [label for label, _ in curve_groups(t2, readable=True)]


# ------------------------------------------------------------ one step off the documented path --
def test_seeds_evaluated_at_different_rounds_are_averaged_where_all_were():
    """The mean at each round was over whichever seeds were evaluated there: with seeds at rounds
    (0, 10, 15, 20, 30) and (0, 5, 15, 25, 30) it jumped between them by two decades."""
    rounds = [np.array([0, 10, 15, 20, 30]), np.array([0, 5, 15, 25, 30])]
    rows = [pd.DataFrame({"run_id": f"r{s}", "param_seed": s, "param_algorithm": "fedavg", "round": r,
                          "comm_up": r, "grad_evals": r, "suboptimality": (10.0 ** (2 * s)) * 0.8 ** r})
            for s, r in enumerate(rounds)]
    ax = rate_plot(pd.concat(rows, ignore_index=True), y="suboptimality").axes[0]
    (line,) = [ln for ln in ax.lines if not ln.get_label().startswith("_")]
    assert list(line.get_xdata()) == [0, 15, 30] and "rounds every seed evaluated" in line.get_label()
    np.testing.assert_allclose(line.get_ydata(), [(1 + 100) / 2 * 0.8 ** r for r in (0, 15, 30)], rtol=1e-12)


def test_values_beyond_the_log_axis_are_marked_not_dropped():
    """A run that converged to 1e-279 (or blew up to 1e301, finite) lost those points from the line
    with no mark; 0 and inf were marked at the axis' edge. All are marked now."""
    for tail, where in ((1e-310, "v"), (1e301, "^")):
        vals = np.r_[0.5 ** np.arange(10), tail, tail]
        df = pd.DataFrame({"run_id": "a", "param_seed": 0, "param_algorithm": "fedavg", "round": np.arange(12),
                           "comm_up": np.arange(12), "grad_evals": np.arange(12), "suboptimality": vals})
        ax = rate_plot(df, y="suboptimality").axes[0]
        marks = [ln for ln in ax.lines if ln.get_marker() == where]
        assert sum(len(ln.get_xdata()) for ln in marks) == 2, tail


def test_cli_plot_y_must_be_a_metric_and_errors_are_not_blamed_on_filter(tmp_path, capsys):
    from fedtheory.__main__ import main
    (tmp_path / "r").mkdir()
    _feddeper_table().to_parquet(tmp_path / "r" / "results.parquet")
    for y in ("round", "run_id", "param_algorithm"):
        assert main(["plot", str(tmp_path / "r"), "--y", y, "--out", str(tmp_path / "o.png")]) == 2
        err = capsys.readouterr().err
        assert f"--y {y}: no such metric" in err and "--filter" not in err
    # a flag column (a run's reference_certified) is numeric to pandas, but neither a metric nor listed as one
    _feddeper_table().assign(reference_certified=True).to_parquet(tmp_path / "r" / "results.parquet")
    assert main(["plot", str(tmp_path / "r"), "--y", "reference_certified", "--out", str(tmp_path / "o.png")]) == 2
    err = capsys.readouterr().err
    assert "--y reference_certified: no such metric" in err and "reference_certified" not in err.split("metrics:")[1]
    # a table without grad_evals: the default panels it has, no error
    _feddeper_table().drop(columns="grad_evals").to_parquet(tmp_path / "r" / "results.parquet")
    assert main(["plot", str(tmp_path / "r"), "--out", str(tmp_path / "o.png")]) == 0


def test_ratios_figure_marks_violations_by_the_verdict():
    """A ratio of 1 + 1e-12 that is UNRESOLVED (within the floor) was hatched and labelled "violated"."""
    df = pd.DataFrame(dict(theorem=["t", "t"], case=["C1: x", "C1: x"], variant=["printed", "corrected"],
                           ratio=[1 + 1e-12, 0.5],
                           verdict=["UNRESOLVED: measured exceeds the bound by less than its floor", "holds"]))
    fig = ratios_figure(df)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "1  unresolved" in texts and not any("violated" in t for t in texts)
    assert all(p.get_hatch() is None for ax in fig.axes for p in ax.patches)


def test_plotting_inputs_a_user_can_get_wrong_are_named():
    df = _feddeper_table()
    ok = rate_plot(df, y="suboptimality", by=["algorithm"])           # filters' names, without param_
    assert {ln.get_label().split(" (")[0] for ln in ok.axes[0].lines if not ln.get_label().startswith("_")} \
        == {"FedDeper", "FedAvg"}
    rate_plot(df, y="suboptimality", by="param_algorithm")
    cases = [(dict(y="run_id"), "'y' parameter"), (dict(y="round"), "'y' parameter"),
             (dict(y="suboptimality", x="run_id"), "'x' parameter"), (dict(y="suboptimality", by=["nope"]), "'by'"),
             (dict(y="suboptimality", bound=([0, 1, 2], [1, 0.1])), "'bound'"),
             (dict(y="suboptimality", bound=0.5), "'bound'"),
             (dict(y="suboptimality", bound=lambda r: np.ones(2)), "'bound'")]
    for kw, what in cases:
        with pytest.raises(ValueError, match=what):
            rate_plot(df, **kw)
    with pytest.raises(ValueError, match="no rows"):
        rate_plot(df.iloc[:0], y="suboptimality")
    with pytest.raises(ValueError, match="'xs' parameter"):
        results_figure(df, y="suboptimality", xs=())
    with pytest.warns(UserWarning, match="logy=True but no value"):
        rate_plot(df.assign(suboptimality=-df["suboptimality"]), y="suboptimality", logy=True)
    with pytest.raises(ValueError, match="'stderr' parameter"):
        bound_vs_T([10, 20, 40], [1, 0.5, 0.25], stderr=[0.1, 0.1])
    for T in ([-1, 20, 40], []):
        with pytest.raises(ValueError, match="'T' parameter"):
            bound_vs_T(T, [1.0] * len(T))


def test_linear_limits_stay_ordered_at_the_largest_floats():
    """One value above ~2.8e306 gave (9e307, 1.1e307): an inverted axis."""
    from fedtheory.plotting import linear_limits
    for v in ([1e308], [-1e308], [1e308, 1.5e308], [3e306], [-3e306, 1e308]):
        lo, hi = linear_limits(v)
        assert np.isfinite(lo) and np.isfinite(hi) and lo < hi, v
