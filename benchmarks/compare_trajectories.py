"""Are the runs of this checkout bit for bit those of another commit? (a check for refactors of the run core)

Every registered algorithm of both checkouts is run on the common suite's fused-path configurations
(``fedtheory.testing.checks._fused_cases``: every sampling mode, minibatches, noise, step-size
schedules, the released-code options), on three paths each: numba fused, numba with a callback (one
compiled call per round) and the python backend. Each checkout runs in its own process with its
``fedtheory`` first on ``PYTHONPATH``. The iterates, the history (the ``time`` column excluded), the
participants, the status, the counters and the final state of the two checkouts are compared exactly.

Usage::

    python benchmarks/compare_trajectories.py --baseline c7f13ca
    python benchmarks/compare_trajectories.py --baseline-tree ../fedtheory-c7f13ca   # a checkout of it

A fresh worktree compiles its kernels cold (minutes); ``--baseline-tree`` reuses a checkout's cache.
"""
import argparse
import os
import pickle
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

DUMP = textwrap.dedent('''
    import pickle, sys, warnings
    import numpy as np
    warnings.simplefilter("ignore")
    import fedtheory as ft
    from fedtheory.testing import checks
    ps = checks.suite_problems()
    if hasattr(checks, "_noisy_quadratic"):
        ps["noisy_quadratic"] = checks._noisy_quadratic()
    two = checks._fused_cases.__code__.co_argcount > 1
    out = {}
    for name in ft.algorithms():
        for key, extra in (checks._fused_cases(name, ("dense", "csr")) if two else checks._fused_cases(name)):
            if key not in ps:
                continue
            args = checks._params(name, rounds=7, local_steps=3, seed=5, record_iterates=True, **extra)
            for path in ("numba", "callback", "python"):
                kw = dict(args, backend="python" if path == "python" else "numba")
                if path == "callback":
                    kw["callback"] = lambda r, x: False
                where = (name, key, str(sorted(extra.items())), path)
                try:
                    res = ft.run(ps[key], name, **kw)
                except Exception as e:
                    out[where] = ("error", type(e).__name__, str(e)[:200])
                    continue
                out[where] = (res.iterates, res.history.drop(columns="time").to_dict("list"),
                              [list(a) for a in res.sampled], res.status, res.grad_evals, res.sample_grads,
                              res.comm_up, res.comm_down, {k: np.asarray(v) for k, v in res.state.items()})
    pickle.dump(out, open(sys.argv[1], "wb"))
''')


def _dump(tree, path):
    env = dict(os.environ, PYTHONPATH=str(tree))
    subprocess.run([sys.executable, "-c", DUMP, str(path)], check=True, env=env, cwd=tempfile.gettempdir())
    with open(path, "rb") as f:
        runs = pickle.load(f)
    # a lambda's address in a step-size schedule's repr differs between processes
    return {tuple(re.sub(r" at 0x[0-9a-f]+", "", str(x)) for x in k): v for k, v in runs.items()}


def _same(x, y):
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)):
        return len(x) == len(y) and all(_same(p, q) for p, q in zip(x, y))
    if isinstance(x, float) and isinstance(y, float):
        return x == y or (x != x and y != y)
    return x == y


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="c7f13ca", help="the commit to compare with (default: c7f13ca)")
    ap.add_argument("--baseline-tree", help="a checkout of the commit to compare with, used as it is")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        ours = _dump(ROOT, Path(tmp) / "new.pkl")
        if args.baseline_tree:
            theirs = _dump(Path(args.baseline_tree).resolve(), Path(tmp) / "base.pkl")
        else:
            base = Path(tmp) / "base"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(base), args.baseline],
                           check=True)
            try:
                theirs = _dump(base, Path(tmp) / "base.pkl")
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
    common = sorted(set(ours) & set(theirs))
    differ = [k for k in common if not _same(ours[k], theirs[k])]
    print(f"{len(common)} runs compared ({len(set(ours) - set(theirs))} only here, "
          f"{len(set(theirs) - set(ours))} only in {args.baseline_tree or args.baseline}); {len(differ)} differ")
    for k in differ[:20]:
        print("  differs:", k)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
