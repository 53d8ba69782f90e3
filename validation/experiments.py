"""Shared driver of the per-paper validation scripts (``validation/*_experiments.py``).

Each script defines ``EXPERIMENTS = {name: fn(quick) -> DataFrame}``; :func:`run_experiments`
parses ``--quick``, ``--out`` and ``--only``, runs them, and writes ``name.csv`` and ``name.md``
(the experiment's docstring and a pipe table) to the output directory.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np


def markdown(df, digits=3):
    """A pipe table (no extra dependency).

    Parameters
    ----------
    df : pandas.DataFrame
        The table.
    digits : int, default 3
        Significant digits of floats.

    Returns
    -------
    str
        A Markdown pipe table.
    """
    def fmt(v):
        if isinstance(v, (float, np.floating)):
            return "nan" if np.isnan(v) else f"{v:.{digits}g}"
        return str(v)
    head = "| " + " | ".join(df.columns) + " |"
    sep = "|" + "---|" * len(df.columns)
    body = ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, sep] + body)


def run_experiments(experiments, default_out, description, argv=None, shown=None):
    """Run ``experiments`` from the command line ``argv``; return {name: table}.

    ``shown(name, df)`` may return the table to print and write as Markdown (default: ``df``).

    Parameters
    ----------
    experiments : dict
        ``{name: function(quick) -> DataFrame}``.
    default_out : Path
        The results directory by default.
    description : str
        The command's description.
    argv : list of str, optional
        The command line.
    shown : list of str, optional
        The columns printed.

    Returns
    -------
    dict
        The tables written, by experiment name.
    """
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help="fewer rounds and seeds")
    ap.add_argument("--out", default=str(default_out))
    ap.add_argument("--only", nargs="*", choices=sorted(experiments), help="subset of experiments")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tables = {}
    for name in args.only or experiments:
        t0 = time.perf_counter()
        tables[name] = df = experiments[name](args.quick)
        df.to_csv(out / f"{name}.csv", index=False)
        view = shown(name, df) if shown else df
        print(f"{name}: {time.perf_counter() - t0:.1f} s\n{view.to_string(index=False)}\n", flush=True)
        (out / f"{name}.md").write_text(f"### {name} ({'quick' if args.quick else 'full'})\n\n"
                                        f"{experiments[name].__doc__.strip()}\n\n{markdown(view)}\n")
    return tables
