"""The user guide's sweep example (examples/sweep.toml, shown in docs/user-guide.md) runs, and its grid
points give distinct curves."""
import re
from pathlib import Path

import numpy as np
import pandas as pd

from fedtheory.__main__ import EXAMPLE_CONFIG, main
from fedtheory.reporting.config import load

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "sweep.toml"
GUIDE = ROOT / "docs" / "user-guide.md"           # the page that shows the example and its commands


def _guide_block():
    text = GUIDE.read_text()
    m = re.search(r"<!-- sweep-example: start.*?-->\n```toml\n(.*?)```\n<!-- sweep-example: end -->", text, re.S)
    assert m, "docs/user-guide.md lost its sweep-example markers"
    return m.group(1)


def test_guide_and_help_show_the_example_file():
    assert _guide_block() == EXAMPLE.read_text()
    assert "\n".join(ln[2:] for ln in EXAMPLE_CONFIG.splitlines()) == EXAMPLE.read_text().rstrip("\n")
    assert len(load(EXAMPLE).points()) == 12


def _guide_commands():
    """The commands the user guide shows right after the example (run as written, in a directory
    that holds examples/)."""
    import shlex
    text = GUIDE.read_text()
    m = re.search(r"<!-- sweep-example: end -->\n\n```\n(.*?)```", text, re.S)
    assert m, "docs/user-guide.md lost the commands after its sweep example"
    return [shlex.split(line, comments=True) for line in m.group(1).splitlines() if line.strip()]


def test_guide_sweep_gives_distinct_curves(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    commands = _guide_commands()
    assert [c[:2] for c in commands] == [["fedtheory", "sweep"], ["fedtheory", "plot"]]
    for argv in commands:
        assert main(argv[1:] + ["--quiet"]) == 0, argv
    out = tmp_path / "results"
    assert (out / "rates.png").stat().st_size > 10000
    df = pd.read_parquet(out / "results.parquet")
    assert df.run_id.nunique() == 12 and (df.status == "max_rounds").all()
    keys = ["param_algorithm", "param_problem_heterogeneity"]
    curves = {k: g.groupby("round").suboptimality.mean() for k, g in df.groupby(keys)}   # mean over seeds
    assert len(curves) == 6
    logs = {k: np.log10(np.maximum(c.to_numpy(), 1e-17)) for k, c in curves.items()}
    names = sorted(logs)
    for i, a in enumerate(names):          # every pair of curves is a decade apart somewhere
        for b in names[i + 1:]:
            assert np.abs(logs[a] - logs[b]).max() >= 1.0, (a, b)
    for k, g in df.groupby(keys):          # and the two seeds differ (sampled clients)
        s0, s1 = (h.set_index("round").suboptimality for _, h in g.groupby("param_seed"))
        assert not np.allclose(s0, s1, rtol=1e-3), k
    final = {k: c.iloc[-1] for k, c in curves.items()}
    for alg in ("fedavg", "feddyn"):       # the drift floor grows with the heterogeneity
        assert final[(alg, 10.0)] > 30 * final[(alg, 0.1)]
    assert max(final[("scaffold", h)] for h in (0.1, 10.0)) < 1e-12 < min(final[("fedavg", h)] for h in (0.1, 10.0))
