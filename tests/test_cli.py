"""The command line, configs, sweeps (local, Dask), the crash-safe results store, verify, plot."""
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from fedtheory.__main__ import main
from fedtheory.reporting.config import ConfigError, load
from fedtheory.reporting.sweep import sweep

CFG = """\
[problem]
factory = "quadratic"
n_clients = 6
dim = 4
L = 1.0

[run]
record_iterates = false
rounds = 40
local_steps = 3
lr = 0.1
eval_every = 10
reference = true

[grid]
algorithm = ["fedavg", "scaffold", "fedspeed"]
seed = [0, 1]
clients_per_round = [2, 6]
"problem.heterogeneity" = [0.5, 2.0]
"""


def _write(tmp_path, text, name="cfg.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _sorted(df):
    return df.drop(columns=["time"]).sort_values(["run_id", "round"]).reset_index(drop=True)


COMMANDS = ["list", "describe", "run", "sweep", "verify", "errata", "falsify", "plot", "demo"]


def test_every_command_is_in_the_help_examples_list(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = re.search(r"\{([a-z,]+)\}", capsys.readouterr().out).group(1).split(",")
    assert sorted(listed) == sorted(COMMANDS)


@pytest.mark.parametrize("cmd", COMMANDS)
def test_help_shows_examples(cmd, capsys):
    """Every command's --help shows examples (docs/user-guide.md: "fedtheory COMMAND --help shows examples")."""
    with pytest.raises(SystemExit):
        main([cmd, "--help"])
    out = capsys.readouterr().out
    assert "example" in out and f"fedtheory {cmd}" in out


def test_config_errors_name_key_line_and_expectation(tmp_path):
    bad_key = CFG.replace("lr = 0.1", "lrr = 0.1")
    with pytest.raises(ConfigError, match=r"cfg.toml, line 11: \[run\] key 'lrr': is neither an argument "
                                          r"of fedtheory.run nor a hyperparameter"):
        load(_write(tmp_path, bad_key))
    with pytest.raises(ConfigError, match=r"line 17: \[grid\] key 'seed': expected a non-empty list"):
        load(_write(tmp_path, CFG.replace("seed = [0, 1]", "seed = 3")))
    with pytest.raises(ConfigError, match=r"line 2: \[problem\] key 'factory': expected a problems factory, one of "):
        load(_write(tmp_path, CFG.replace('"quadratic"', '"quadratik"')))
    with pytest.raises(ConfigError, match=r"\[grid\] key 'algorithm' \(grid value \"fedsped\"\): expected a registered algorithm"):
        load(_write(tmp_path, CFG.replace('"fedspeed"]', '"fedsped"]')))
    with pytest.raises(ConfigError, match=r"line 19: \[grid\] key 'problem.heterogenity': is not an argument"):
        load(_write(tmp_path, CFG.replace('"problem.heterogeneity"', '"problem.heterogenity"')))
    with pytest.raises(ConfigError, match=r"cfg.toml, line 3, column 13: invalid TOML"):
        load(_write(tmp_path, CFG.replace("n_clients = 6", "n_clients = ")))
    with pytest.raises(ConfigError, match=r"unknown table"):
        load(_write(tmp_path, CFG + "\n[runs]\nx = 1\n"))
    # the CLI prints the message and exits with 2
    assert main(["sweep", str(_write(tmp_path, bad_key)), "--out", str(tmp_path / "o")]) == 2


def test_run_command(tmp_path, capsys):
    one = CFG.split("[grid]")[0].replace("record_iterates = false", 'algorithm = "fedavg"')
    assert main(["run", str(_write(tmp_path, one)), "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "status max_rounds" in out and "suboptimality" in out
    df = pd.read_parquet(tmp_path / "r" / "results.parquet")
    assert df.run_id.nunique() == 1 and len(df) == 5
    assert main(["run", str(_write(tmp_path, CFG, "grid.toml"))]) == 2      # a grid needs sweep


def test_sweep_table_schema_and_resume(tmp_path):
    out = tmp_path / "s"
    df = sweep(CFG, out, n_jobs=2, progress=False)
    assert df.run_id.nunique() == 24 and len(df) == 24 * 5
    for col in ("param_algorithm", "param_seed", "param_problem_heterogeneity", "param_clients_per_round",
                "version", "seed", "status", "round", "suboptimality", "comm_up", "grad_evals"):
        assert col in df, col
    assert not df.duplicated(["run_id", "round"]).any()
    # identical to running the points one by one in this process
    serial = sweep(CFG, tmp_path / "serial", n_jobs=1, progress=False)
    pd.testing.assert_frame_equal(_sorted(df), _sorted(serial))
    again = sweep(CFG, out, n_jobs=2, progress=False)                    # nothing left to run
    assert len(again) == len(df)


def test_killed_sweep_restarts_without_loss_or_duplicates(tmp_path):
    """A real sweep process, killed (SIGKILL) mid-way and restarted: 24 runs, no duplicates."""
    slow = CFG.replace("rounds = 40", "rounds = 6000").replace("eval_every = 10", "eval_every = 1500")
    cfg = _write(tmp_path, slow)
    out = tmp_path / "k"
    env = dict(os.environ)
    cmd = [sys.executable, "-m", "fedtheory", "sweep", str(cfg), "--out", str(out), "-j", "1"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    parts = out / "runs"
    t0 = time.time()
    while time.time() - t0 < 300:            # (a cold compile on a loaded machine)
        if parts.exists() and len(list(parts.glob("*.parquet"))) >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    n_before = len(list(parts.glob("*.parquet")))
    assert 3 <= n_before < 24, n_before
    mid = pd.read_parquet(out / "results.parquet")       # never a corrupt file; holds finished runs only
    assert set(mid.run_id) <= {p.stem for p in parts.glob("*.parquet")} and mid.run_id.nunique() >= 1
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert f"{n_before} of 24 runs already stored" in res.stderr + res.stdout
    final = pd.read_parquet(out / "results.parquet")
    assert final.run_id.nunique() == 24
    assert not final.duplicated(["run_id", "round"]).any()
    assert len(final) == 24 * 5
    assert "it/s" not in res.stderr                                          # no progress bar off a TTY


def test_dask_local_cluster_gives_the_local_table(tmp_path):
    distributed = pytest.importorskip("distributed")
    local = sweep(CFG, tmp_path / "local", n_jobs=1, progress=False)
    # thread workers (the sweep's runs on Dask's scheduler and workers; process workers, whose runs
    # are pickled and which import the user's modules: test_user_modules.py)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp",
                                  host="127.0.0.1", dashboard_address=":0") as cluster:
        viadask = sweep(CFG, tmp_path / "dask", backend="dask", scheduler=cluster.scheduler_address,
                        progress=False)
    pd.testing.assert_frame_equal(_sorted(local), _sorted(viadask))


def test_verify_quick_prints_table_and_writes_report(tmp_path, capsys):
    assert main(["verify", "--quick", "--out", str(tmp_path / "v")]) == 0
    out = capsys.readouterr().out
    for word in ("theorem", "variant", "measured", "bound", "ratio", "verdict", "fedspeed.theorem_4_4",
                 "VIOLATED (documented counterexample)"):
        assert word in out, word
    assert "UNEXPECTED" not in out
    table = out.split("\nreport: ")[0].splitlines()
    assert max(map(len, table)) <= 120, max(table, key=len)        # a terminal wraps no row
    v = pd.read_csv(tmp_path / "v" / "verdicts.csv")
    total, counts = table[-1].split(" rows: ")                      # then the count of each verdict
    assert int(total) == len(v)
    assert sum(int(part.split(" ", 1)[0]) for part in counts.split(", ")) == len(v)
    assert f"{(v.verdict == 'VIOLATED (documented counterexample)').sum()} VIOLATED (documented" in counts
    rep = tmp_path / "v" / "report.md"
    text = rep.read_text()
    assert rep.exists() and "| theorem |" in text
    for column in ("conditions_ok", "fitted_rate", "predicted_rate", "failing_conditions"):   # every column kept
        assert f"| {column} |" in text or f" {column} |" in text, column
    assert (tmp_path / "v" / "ratios.png").exists()
    assert list((tmp_path / "v").glob("rate_*.png"))
    from PIL import Image
    for png in (tmp_path / "v").glob("*.png"):               # report figures at most 2400 px a side
        assert max(Image.open(png).size) <= 2400, png.name
    c2 = v[v.case.str.startswith("C2")].set_index("variant")
    assert c2.loc["printed", "ratio"] > 1 > c2.loc["corrected", "ratio"]


def test_plot_command(tmp_path):
    sweep(CFG, tmp_path / "p", n_jobs=1, progress=False)
    assert main(["plot", str(tmp_path / "p")]) == 0
    assert (tmp_path / "p" / "rates.png").stat().st_size > 10000
    assert main(["plot", str(tmp_path / "p"), "--out", str(tmp_path / "r.pdf"), "--y", "grad_mapping_sq"]) == 0
    assert (tmp_path / "r.pdf").exists()
    assert main(["plot", str(tmp_path / "nothing")]) == 2


def test_rate_plot_mean_and_spread_over_seeds():
    """The drawn curve is the mean over seeds; the band spans min..max."""
    import matplotlib
    matplotlib.use("Agg")
    from fedtheory.plotting import rate_plot
    rows = []
    for seed, scale in ((0, 1.0), (1, 3.0)):
        rows.append(pd.DataFrame({"run_id": f"r{seed}", "param_seed": seed, "param_algorithm": "a",
                                  "round": [0, 1, 2], "comm_up": [0, 2, 4], "suboptimality": scale * np.array([1.0, 0.1, 0.01])}))
    fig = rate_plot(pd.concat(rows), x="comm_up")
    line = fig.axes[0].lines[0]
    assert np.allclose(line.get_xdata(), [0, 2, 4])
    assert np.allclose(line.get_ydata(), [2.0, 0.2, 0.02])
    band = fig.axes[0].collections[0].get_paths()[0].vertices
    assert np.isclose(band[:, 1].max(), 3.0) and np.isclose(band[:, 1].min(), 0.01)
    with pytest.raises(ValueError, match="'y' parameter of rate_plot"):
        rate_plot(pd.concat(rows), y="nope")


def _worker_cache_stats(i):
    from fedtheory._kernels import local_steps as ls
    from fedtheory.reporting.points import run_point
    run_point({"name": "quadratic", "n_clients": 4, "dim": 3, "seed": i}, {"algorithm": "fedspeed", "rounds": 2})
    d = ls.perturbed_local_sgd
    return sum(d.stats.cache_hits.values()), sum(d.stats.cache_misses.values())


def test_workers_load_compiled_kernels_after_warm_up():
    """After the driver's warm-up, worker processes load the kernels from Numba's disk cache
    (a cache hit) and compile nothing (no cache miss)."""
    from joblib import Parallel, delayed
    from fedtheory.reporting.points import warm_up
    warm_up([({"name": "quadratic", "n_clients": 4, "dim": 3, "seed": 0}, {"algorithm": "fedspeed"})])
    stats = Parallel(n_jobs=2, backend="loky")(delayed(_worker_cache_stats)(i) for i in range(4))
    assert all(misses == 0 for _, misses in stats), stats
