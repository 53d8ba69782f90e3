"""Search power and throughput of the falsifier, for this checkout and another commit in the same run.

Two measurements, each in fresh processes (``python -c ...`` with the checkout first on ``sys.path``):

* **searches**: ``validation.falsify(NAME, variant="printed", seed=S)`` at each checkout's default
  budget, for the four printed theorems known to fail (FedDeper Theorem 2, FedSpeed Theorem 4.4,
  FedSPS Theorem 6(a), local descent Theorem 4.2) and seeds 0, 1, 2: whether a counterexample is
  found, the largest measured/bound, the evaluations and the wall time;
* **fixed cases**: ``validation.verify`` on a fixed list of 50 cases (``benchmarks/cases/falsify_50.json``:
  5 conforming cases of each of 10 theorems, drawn once from their spaces and kept as the problem's
  recipe and the parameters), one untimed pass to fill the caches, then the best of ``--repeat``
  timed passes, in ``--alternations`` processes per checkout run in turn (this checkout, the other,
  this checkout, ...), the best of all: verifications per second. The verdicts of both checkouts
  are compared.

Usage::

    python benchmarks/bench_falsify.py                      # against c7f13ca
    python benchmarks/bench_falsify.py --baseline HEAD~3 --repeat 5 --skip-searches
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = Path(__file__).resolve().parent / "cases" / "falsify_50.json"
FOUR = ("feddeper.theorem_2", "fedspeed.theorem_4_4", "fedsps.theorem_6a", "localdescent.theorem_4_2")

SEARCH = textwrap.dedent('''
    import json, sys, time
    sys.path.insert(0, {root!r})
    import validation
    t = time.perf_counter()
    f = validation.falsify({name!r}, variant="printed", seed={seed}, progress=False)
    case = f.counterexample or f.worst
    print(json.dumps(dict(found=f.counterexample is not None, ratio=None if case is None else case.ratio,
                          evaluations=f.evaluations, budget=f.budget, seconds=time.perf_counter() - t)))
''')

FIXED = textwrap.dedent('''
    import json, sys, time
    import numpy as np
    sys.path.insert(0, {root!r})
    import fedtheory, problems, validation
    cases = json.load(open({cases!r}))
    built = [(c["theorem"], eval(c["recipe"], {{"problems": problems, "fedtheory": fedtheory}}),
              {{k: (np.array(v) if isinstance(v, list) else v) for k, v in c["params"].items()}}) for c in cases]

    def one_pass():
        return [validation.verify(name, p, **kw) for name, p, kw in built]
    one_pass()
    best = float("inf")
    for _ in range({repeat}):
        t = time.perf_counter()
        vs = one_pass()
        best = min(best, time.perf_counter() - t)
    print(json.dumps(dict(seconds=best, per_second=len(built) / best, verdicts=[v.verdict() for v in vs],
                          measured=[v.measured for v in vs])))
''')


def _python(code):
    env = dict(os.environ, PYTHONPATH="")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="c7f13ca", help="the other commit (default c7f13ca)")
    ap.add_argument("--repeat", type=int, default=3, help="timed passes over the fixed cases (default 3)")
    ap.add_argument("--alternations", type=int, default=3,
                    help="processes per checkout for the fixed cases, the checkouts in turn (default 3)")
    ap.add_argument("--skip-searches", action="store_true", help="only the fixed cases")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-f", "--detach", str(base), args.baseline],
                       check=True, capture_output=True)
        try:
            roots = {"this checkout": str(ROOT), args.baseline: str(base)}
            if not args.skip_searches:
                print("| theorem | seed | checkout | found | measured/bound | evaluations (budget) | seconds |")
                print("|---|---:|---|---|---:|---:|---:|")
                for name in FOUR:
                    for seed in (0, 1, 2):
                        for label, root in roots.items():
                            r = _python(SEARCH.format(root=root, name=name, seed=seed))
                            ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3g}"
                            print(f"| {name} | {seed} | {label} | {'yes' if r['found'] else 'no'} | {ratio} | "
                                  f"{r['evaluations']} ({r['budget']}) | {r['seconds']:.1f} |", flush=True)
            print()
            out = {}
            for _ in range(args.alternations):      # the checkouts in turn: a slow spell of the machine hits both
                for label, root in roots.items():
                    r = _python(FIXED.format(root=root, cases=str(CASES), repeat=args.repeat))
                    if label not in out or r["seconds"] < out[label]["seconds"]:
                        out[label] = r
            print("| checkout | 50 verifications, best pass (s) | verifications per second |")
            print("|---|---:|---:|")
            for label, r in out.items():
                print(f"| {label} | {r['seconds']:.3f} | {r['per_second']:.1f} |")
            a, b = out["this checkout"], out[args.baseline]
            same = sum(x == y for x, y in zip(a["verdicts"], b["verdicts"]))
            print(f"\nratio (this checkout / {args.baseline}): {a['per_second'] / b['per_second']:.2f}x; "
                  f"the same verdict on {same} of {len(a['verdicts'])} cases")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], capture_output=True)


if __name__ == "__main__":
    main()
