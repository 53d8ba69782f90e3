"""Start-up latency: ``import fedtheory``, ``fedtheory --version`` and ``--help``, and the first run of
a newly registered algorithm with the library's kernels cached, for this checkout and for another
commit in the same run.

Each command runs as a fresh process (``python -c ...`` with the checkout first on ``sys.path``), a
few times in turn for both checkouts; the table gives the best and the median wall time of each.
The other commit is checked out with ``git worktree`` into a temporary directory.

"New algorithm" registers a one-file algorithm with rules of its own (local SGD, a server taking half
the averaged step; new code in every sample, so its driver is generated and compiled), after one
untimed run has cached the library's kernels and drivers for that checkout; the time is that of
the first ``ft.run`` alone. (A subclass of a built-in that keeps its rules runs the built-in's
cached driver: milliseconds.)

Usage::

    python benchmarks/bench_startup.py                       # against c7f13ca, 7 repeats
    python benchmarks/bench_startup.py --baseline HEAD~3 --repeat 11
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

NEW_ALGORITHM = '''
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from fedtheory._kernels import rounds as ops
from fedtheory.algorithms.base import Algorithm
from fedtheory.registry import register

State = namedtuple("HalfState{tag}", "x")
Messages = namedtuple("HalfMessages{tag}", "y")


def local(pk, rd, hp, st, rng):
    x = ops.row(st.x)
    Y, bad = ops.local_sgd(pk, rd, x, x, 1.0, 0.0, ops.empty2())
    return Messages(Y), bad


def server(pk, rd, hp, st, m):
    # half the averaged step ({tag}: each sample's rules are new code, so its driver compiles)
    return State(st.x + 0.5 * (rd.weights @ m.y - rd.weights.sum() * st.x))


@register
@dataclass(frozen=True)
class HalfStep(Algorithm):
    """Local SGD whose server takes half the averaged step: a user's own algorithm, one file."""
    name: ClassVar[str] = "bench_half_step_{tag}"
    constraints: ClassVar[dict] = {{}}
    compiled_rules: ClassVar[bool] = True

    def local_round_reference(self, state, ctx):
        x = state["x"]
        Y = np.empty((ctx.S, x.shape[0]))
        for s in range(ctx.S):
            y = x.copy()
            for k in range(ctx.K):
                y = y - ctx.lrs[k] * ctx.grad(s, k, y)
            Y[s] = y
        return {{"y": Y}}
'''

FIRST_RUN = """
import sys, time
sys.path.insert(0, {pkg!r})
import fedtheory as ft, problems, bench_new_alg_{tag}
p = problems.quadratic(4, 3, seed=0)
t = time.perf_counter()
ft.run(p, "bench_half_step_{tag}", rounds=5, local_steps=2, lr=0.1)
print(time.perf_counter() - t)
"""

COMMANDS = {
    "import fedtheory": "import fedtheory",
    "fedtheory --version": "import sys; sys.argv = ['fedtheory', '--version']\n"
                           "from fedtheory.__main__ import main\ntry:\n    main()\nexcept SystemExit:\n    pass",
    "fedtheory --help": "import sys; sys.argv = ['fedtheory', '--help']\n"
                        "from fedtheory.__main__ import main\ntry:\n    main()\nexcept SystemExit:\n    pass",
}


def _env(tree, **extra):
    env = dict(os.environ, PYTHONPATH=str(tree), **extra)
    return env


def _wall(tree, code, env=None):
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=tree, env=env or _env(tree), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def _first_run(tree, tag, work):
    """Seconds of the first ft.run of a new algorithm, the library's kernels already cached."""
    pkg = work / f"pkg_{tag}"
    pkg.mkdir(exist_ok=True)
    (pkg / f"bench_new_alg_{tag}.py").write_text(NEW_ALGORITHM.format(tag=tag))
    env = _env(tree, FEDTHEORY_DRIVER_DIR=str(work / f"drivers_{tree.name}"))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(FIRST_RUN.format(pkg=str(pkg), tag=tag))],
                         cwd=tree, env=env, check=True, capture_output=True, text=True)
    return float(out.stdout.split()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", default="c7f13ca", help="the commit to compare with (default c7f13ca)")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    base = work / "base"
    subprocess.run(["git", "worktree", "add", "--detach", str(base), args.baseline], cwd=ROOT, check=True,
                   capture_output=True)
    trees = {"this checkout": ROOT, f"base ({args.baseline})": base}
    try:
        for tree in trees.values():            # untimed: byte-compile, and cache the library's kernels
            subprocess.run([sys.executable, "-c", "import fedtheory as ft, problems\n"
                            "ft.run(problems.quadratic(4, 3, seed=0), 'fedavg', rounds=5, local_steps=2, lr=0.1)"],
                           cwd=tree, env=_env(tree, FEDTHEORY_DRIVER_DIR=str(work / f"drivers_{tree.name}")),
                           check=True, capture_output=True)
        times = {(name, what): [] for name in trees for what in [*COMMANDS, "new algorithm, first run"]}
        for k in range(args.repeat):
            for name, tree in trees.items():
                for what, code in COMMANDS.items():
                    times[name, what].append(_wall(tree, code))
                if k < 3:                       # each compiles a driver: three samples
                    times[name, "new algorithm, first run"].append(_first_run(tree, f"{k}_{len(name)}", work))
        print(f"| command | {' | '.join(trees)} |")
        print("|---|" + "---:|" * len(trees))
        for what in [*COMMANDS, "new algorithm, first run"]:
            cells = [f"{min(times[n, what]):.3f} s (median {statistics.median(times[n, what]):.3f})" for n in trees]
            print(f"| {what} | {' | '.join(cells)} |")
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, capture_output=True)


if __name__ == "__main__":
    main()
