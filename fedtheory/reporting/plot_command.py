"""The ``plot`` command of the ``fedtheory`` command line: rate plots from a results directory. It takes
the parsed arguments and returns the exit status, or raises
:class:`~fedtheory.reporting.commands.UsageError`."""
from __future__ import annotations

from pathlib import Path

import matplotlib
import pandas as pd

from .commands import UsageError, _one_line, _out_file
from .results import ResultsStore, _read_table
from .._argcheck import did_you_mean
from ..plotting import X_ALIASES, results_figure


def _plot(args):
    """Draw the rate figure of a results directory (or table); exit 0."""
    matplotlib.use("Agg")
    src = Path(args.dir)
    path = src / "results.parquet" if src.is_dir() else src
    if src.is_dir() and (src / "runs").is_dir():
        df = ResultsStore(src).table()            # the run files: current even after a killed sweep
    elif path.exists():
        try:
            df = _read_table(path).to_pandas(use_threads=False)      # results._NO_THREADS
        except Exception as e:                      # pyarrow's errors for a file that is not Parquet
            raise UsageError(f"{path}: not a results table (a Parquet file written by 'fedtheory sweep'): "
                             f"{_one_line(e)}") from None
    else:
        raise UsageError(f"no results table at {path} (run 'fedtheory sweep CONFIG --out {args.dir}' first)")
    if not len(df):
        raise UsageError(f"{path}: no runs stored yet (run 'fedtheory sweep CONFIG --out {args.dir}')")
    skip = {"run_id", "status", "seed", "version", "round"}
    numeric = [c for c in df.columns if not c.startswith("param_") and pd.api.types.is_numeric_dtype(df[c])]
    # a flag (reference_certified) is numeric to pandas but no metric to plot on a log axis
    metrics = [c for c in numeric if c not in skip and not pd.api.types.is_bool_dtype(df[c])]
    if args.y is not None and args.y not in metrics:
        raise UsageError(f"--y {args.y}: no such metric in {path}; metrics: {', '.join(metrics)}."
                         f"{did_you_mean(args.y, metrics)}")
    axes = ("round", "comm_up", "grad_evals")
    if args.x is not None and X_ALIASES.get(args.x, args.x) not in numeric:
        raise UsageError(f"--x {args.x}: not a numeric column of {path}; e.g. {', '.join(c for c in axes if c in numeric)}")
    xs = [args.x] if args.x else [c for c in axes if c in numeric] or ["round"]
    out = Path(_out_file(args.out) if args.out is not None else (src if src.is_dir() else src.parent) / "rates.png")
    try:
        fig = results_figure(df, y=args.y, title=args.title, filters=args.filter, xs=xs)
    except ValueError as e:          # a --filter naming no parameter, or matching no run
        raise UsageError(f"--filter: {e}" if args.filter else f"plot: {e}") from None
    fig.savefig(out, dpi=150)
    print(f"figure: {out}")
    return 0
