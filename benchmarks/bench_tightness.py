"""Time of ``validation.tightness`` for every covered theorem with local_steps x rounds <= 8.

Each call is complete: the worst case (one SDP, or a branch and bound over the Polyak step sizes
with its default 8 s budget), the one-round contraction, the bound and the step threshold (bisection).
The constants are those of ``fedtheory verify --tightness`` (``TIGHTNESS_CASES``, full), two
clients. Run on two cores with nothing else to measure the "at most 30 s" target:

    python benchmarks/bench_tightness.py [--out FILE] [--theorem NAME] [--pairs 1x8,2x4,4x2,8x1]
"""
import argparse
import time

from _report import report

from fedtheory.theory.tightness import TIGHTNESS_CASES, tightness


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    ap.add_argument("--theorem", action="append")
    ap.add_argument("--pairs", default="1x1,2x2,1x8,2x4,4x2,8x1", help="local_steps x rounds pairs")
    args = ap.parse_args()
    pairs = [tuple(int(v) for v in p.split("x")) for p in args.pairs.split(",")]
    rows = []
    for name, case in TIGHTNESS_CASES.items():
        if args.theorem and name not in args.theorem:
            continue
        for K, R in pairs:
            kw = dict(case(False, local_steps=K), rounds=R)     # the case's step for this K
            t0 = time.perf_counter()
            t = tightness(name, **kw)
            wall = time.perf_counter() - t0
            rows.append(dict(theorem=name, local_steps=K, rounds=R, lr=kw["lr"], seconds=round(wall, 2),
                             worst_case=[t.worst_case[0], t.worst_case[1]], gap=t.gap, nodes=t.nodes,
                             bound=t.bound, looseness=t.looseness, exponent_ratio=t.exponent_ratio,
                             lr_threshold=t.lr_threshold, lr_threshold_exact=t.lr_threshold_exact,
                             lr_conditions=t.lr_conditions))
            print(f"{name} K={K} R={R}: {wall:.1f} s; {t.summary()}; gap {t.gap:.2g}; nodes {t.nodes}", flush=True)
    report(dict(benchmark="tightness", rows=rows), args.out)


if __name__ == "__main__":
    main()
