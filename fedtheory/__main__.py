"""The ``fedtheory`` command line (also ``python -m fedtheory``), docs/user-guide.md: "Command line".

Subcommands: ``list``, ``describe NAME``, ``run CONFIG``, ``sweep CONFIG --out DIR``,
``verify [--quick]``, ``plot DIR``, ``demo``, ``errata [--out DIR]``, ``falsify NAME``. ``fedtheory COMMAND --help`` shows examples;
``fedtheory --version`` prints the version. Every subcommand takes ``--import MODULE``
(repeatable): a user's module, imported first, that registers algorithms, problem factories,
components or theorems.

Exit status (:data:`EXIT_STATUS`): 0 ok, 1 a check failed (``verify``: an unexpected verdict; a
counterexample found), 2 a usage or input error (one line on stderr), 3 a run diverged
(``fedtheory run``), 130 interrupted (Ctrl-C).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

EXAMPLE_CONFIG = """\
  # examples/sweep.toml: 3 algorithms x 2 heterogeneity levels x 2 seeds = 12 runs
  [problem]                 # factory = a problems factory; every other key is its argument
  factory = "quadratic"
  n_clients = 20
  dim = 10
  L = 1.0
  mu = 0.1
  hessian = "distinct"      # client-specific Hessians: local steps drift (shared ones would not)

  [run]                     # fedtheory.run arguments, the algorithm and its hyperparameters
  rounds = 150
  local_steps = 10
  lr = 0.1
  clients_per_round = 5     # partial participation: the seed changes the sampled clients
  eval_every = 5
  reference = true          # measure against the certified optimum (suboptimality, dist_sq)

  [grid]                    # lists: the sweep runs their Cartesian product
  algorithm = ["fedavg", "scaffold", "feddyn"]
  "problem.heterogeneity" = [0.1, 10.0]
  seed = [0, 1]
"""

EPILOGS = {
    "main": "examples:\n  fedtheory list\n  fedtheory describe fedspeed\n  fedtheory verify --quick --out report\n"
            "  fedtheory sweep sweep.toml --out results -j 4\n  fedtheory plot results --out rates.png",
    "run": "example:\n  fedtheory run one.toml --out results\n\n" + EXAMPLE_CONFIG.replace("[grid]", "[grid]  (optional; run takes one point)"),
    "sweep": "examples:\n  fedtheory sweep examples/sweep.toml --out results   # all cores, joblib/loky\n"
             "  fedtheory sweep sweep.toml --out results -j 2\n"
             "  fedtheory sweep sweep.toml --out results --backend dask --scheduler tcp://10.0.0.5:8786\n"
             "  (killed and restarted: finished runs are skipped, none is lost or duplicated)\n\n" + EXAMPLE_CONFIG,
    "verify": "examples:\n  fedtheory verify --quick            # 6-14 s on 2 cores (30 s when the kernels compile)\n"
              "  fedtheory verify --out verify-report # full run: report.md, verdicts.csv, PNGs\n"
              "  fedtheory verify --theorem fedspeed.theorem_4_4\n"
              "  fedtheory verify -j 1                # in this process only (default: one worker per CPU, <= 4)",
    "errata": "examples:\n  fedtheory errata                    # errata/errata.md and errata/errata.tex\n"
              "  fedtheory errata --out paper/errata --no-tightness",
    "falsify": "examples:\n  fedtheory falsify feddeper.theorem_2 --variant printed             # exit 1: a counterexample\n"
               "  fedtheory falsify fedsps.theorem_3a --budget 20 --seed 1 --out falsify-report",
    "plot": "examples:\n  fedtheory plot results                       # results/rates.png\n"
            "  fedtheory plot results --out rates.pdf --y grad_mapping_sq\n"
            "  fedtheory plot results --filter algorithm=scaffold --filter lr=0.1 --x comm",
    "describe": "examples:\n  fedtheory describe scaffold                 # an algorithm\n"
                "  fedtheory describe libsvm                   # a problem factory\n"
                "  fedtheory describe fedspeed.theorem_4_4     # a theorem: variants, conditions with roles\n"
                "  fedtheory describe fedprox --json",
    "list": "example:\n  fedtheory list                              # every name, by kind\n"
            "  fedtheory list --import mymethods           # with your own registrations",
    "demo": "examples:\n  fedtheory demo                              # a9a (LIBSVM data dir or download), l2 = 0.01\n"
            "  fedtheory demo --dataset w8a --rounds 200 --data-dir ../shared/data/libsvm\n"
            "  fedtheory demo --l2 0.1                     # a stronger ridge: a faster rate\n"
            "(no LIBSVM file and no internet: scikit-learn's breast cancer data instead)",
}


EXIT_STATUS = {0: "success",
               1: "a check failed: verify found an unexpected verdict, or a counterexample was found",
               2: "usage or input error: bad arguments, configuration, name or output path (one line on stderr)",
               3: "the run diverged (fedtheory run): the round, the client when known and a step-size hint "
                  "on stderr",
               130: "interrupted (Ctrl-C); a sweep keeps its finished runs and prints the command that resumes"}


EPILOG_EXIT = ("\n\nexit status:\n" + "\n".join(f"  {k:<4} {v}" for k, v in EXIT_STATUS.items())
               + "\n\nevery subcommand takes --import MODULE (repeatable): your own algorithms, problem factories, "
                 "components, theorems")


from . import __version__, _progress
from .exceptions import ConfigError, DataError, IncompatibleProblemError, InvalidParameterError, UncertifiedOptimumError
from .reporting.commands import UsageError, _one_line, _os_error

#: Each subcommand's function, as (module of fedtheory.reporting, function): loaded on dispatch by
#: :func:`_command`, so that ``fedtheory --help`` and ``--version`` load no command module (and with
#: them NumPy, Numba or pandas; tests/test_architecture.py keeps it so).
COMMANDS = {"list": ("theory_commands", "_list"), "describe": ("theory_commands", "_describe"),
            "verify": ("theory_commands", "_verify"), "errata": ("theory_commands", "_errata"),
            "falsify": ("theory_commands", "_falsify"), "demo": ("run_commands", "_demo"),
            "run": ("run_commands", "_run"), "sweep": ("run_commands", "_sweep"), "plot": ("plot_command", "_plot")}

#: The exceptions that are input errors: exit status 2, one line.
INPUT_ERRORS = (UsageError, ConfigError, InvalidParameterError, IncompatibleProblemError, DataError,
                UncertifiedOptimumError)


def _command(name):
    """The function that runs subcommand ``name`` (:data:`COMMANDS`), its module imported now."""
    module, function = COMMANDS[name]
    return getattr(importlib.import_module(f"{__package__}.reporting.{module}"), function)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (raised, so that main() prints them and returns 2)."""

    def error(self, message):
        raise UsageError(f"{self.prog}: error: {message}{self._suggest(message)} (see '{self.prog} --help')")

    def _suggest(self, message):
        """" Did you mean ...?" for a misspelled subcommand, choice or option."""
        import re

        from ._argcheck import did_you_mean          # (on a usage error only: it loads NumPy, --help does not)
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if m:
            return did_you_mean(m.group(1), re.findall(r"'([^']*)'", m.group(2)))
        m = re.search(r"unrecognized arguments: (.*)", message)
        if m:
            return "".join(did_you_mean(a.split("=")[0], self._option_string_actions, n=1)
                           for a in m.group(1).split() if a.startswith("-"))
        return ""


def _jobs(text):
    """``-j``: a positive number of workers, or a negative one counted back from all CPUs (joblib's
    convention, down to -(the CPUs): below that joblib would silently take one worker)."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    cpus = os.cpu_count() or 1
    if n == 0 or n < -cpus:
        raise argparse.ArgumentTypeError(f"expected a nonzero int (workers), at least -{cpus} (counted back from "
                                         f"this machine's {cpus} CPUs: -1 all of them, -2 all but one); "
                                         f"got {text!r}")
    return n


def main(argv=None):
    """Entry point of the ``fedtheory`` console command.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status (:data:`EXIT_STATUS`): 0 on success, 1 when a check fails (``verify``
        finds an unexpected verdict, ``falsify`` a counterexample) or a ``sweep`` cannot finish
        (one line with the command that resumes it: Dask cluster lost or unreachable,
        KilledWorker, dead local workers; the finished runs are stored), 2 for a usage or input mistake
        (one line on stderr, never a traceback: bad arguments, a bad or missing configuration,
        an unknown name, an output path that cannot be written, a module ``--import`` cannot
        import), 3 when ``fedtheory run``'s run diverges, 130 on Ctrl-C (one line).

    Examples
    --------
    >>> from fedtheory.__main__ import main
    >>> main(["describe", "fedavgg"])
    2
    """
    try:
        return _main(argv)
    except KeyboardInterrupt:
        cmd = next((a for a in (argv if argv is not None else sys.argv[1:]) if not a.startswith("-")), "")
        print(f"fedtheory{' ' + cmd if cmd else ''}: interrupted (Ctrl-C)", file=sys.stderr)
        return 130




def _where_raised(e):
    """" at FILE, line N: CODE" for the innermost frame of an exception raised by a user's module
    (a SyntaxError names its own line), or ""."""
    import traceback
    if isinstance(e, SyntaxError):
        return f" at {e.filename}, line {e.lineno}: {(e.text or '').strip()}" if e.filename else ""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith("<frozen")]
    if not frames:
        return ""
    f = frames[-1]
    return f" at {f.filename}, line {f.lineno}" + (f": {f.line.strip()}" if f.line else "")


def _main(argv):
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog="fedtheory", description="fedtheory: federated-optimization theory testbed",
                                     epilog=EPILOGS["main"] + EPILOG_EXIT, formatter_class=fmt)
    parser.add_argument("--version", action="version", version=f"fedtheory {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="algorithms, problems and theorems", epilog=EPILOGS["list"], formatter_class=fmt)
    d = sub.add_parser("describe", help="an algorithm, a problem factory or a theorem (conditions, variants)",
                       epilog=EPILOGS["describe"], formatter_class=fmt)
    d.add_argument("name")
    d.add_argument("--json", action="store_true", help="the description as JSON (UTF-8)")
    r = sub.add_parser("run", help="one run from a TOML config", epilog=EPILOGS["run"], formatter_class=fmt)
    r.add_argument("config")
    r.add_argument("--out", help="results directory (results.parquet)")
    s = sub.add_parser("sweep", help="a grid of runs in parallel, resumable", epilog=EPILOGS["sweep"],
                       formatter_class=fmt)
    s.add_argument("config")
    s.add_argument("--out", required=True, help="results directory")
    s.add_argument("-j", "--jobs", type=_jobs, default=None, help="local worker processes (default: all CPUs)")
    s.add_argument("--backend", choices=("local", "dask"), default="local")
    s.add_argument("--scheduler", help="Dask scheduler address (tcp://host:port)")
    v = sub.add_parser("verify", help="every registered theorem: verdict table and report", epilog=EPILOGS["verify"],
                       formatter_class=fmt)
    v.add_argument("--quick", action="store_true", help="fewer rounds and seeds (seconds: 6-14 s measured on 2 cores, "
                   "30 s when the Numba kernels compile on first use)")
    v.add_argument("--out", default="verify-report", help="report directory (default verify-report)")
    v.add_argument("--theorem", action="append", help="only this theorem or lemma (repeatable)")
    v.add_argument("--lemmas", action="store_true",
                   help="also check each case's proof, lemma by lemma, on the same runs")
    v.add_argument("-j", "--jobs", type=_jobs, default=None,
                   help="worker processes for the theorems' cases (default: the CPUs, at most 4; 1: this process "
                        "only); the report is the same")
    v.add_argument("--tightness", action="store_true",
                   help="also the exact worst case by performance estimation (extra [pep]): measured <= worst case "
                        "<= bound, looseness, figures")
    e = sub.add_parser("errata", help="every documented erratum, measured now: DIR/errata.md and DIR/errata.tex",
                       epilog=EPILOGS["errata"], formatter_class=fmt)
    e.add_argument("--out", default="errata", help="output directory (default errata)")
    e.add_argument("--no-tightness", action="store_true", help="skip the exact worst cases (PEP)")
    fa = sub.add_parser("falsify", help="search a theorem's conforming cases for a counterexample (exit 1 when found)",
                        epilog=EPILOGS["falsify"], formatter_class=fmt)
    fa.add_argument("name", help="a registered theorem (fedtheory list)")
    fa.add_argument("--variant", default=None, help="the bound variant (default: the theorem's default variant)")
    fa.add_argument("--budget", type=int, default=200, help="the most verifications to run (default 200)")
    fa.add_argument("--seed", type=int, default=0, help="seed of the search (default 0)")
    fa.add_argument("--no-shrink", action="store_true",
                    help="report a counterexample the draws find as drawn, without shrinking it")
    fa.add_argument("--out", default=None, help="report directory: report.md and falsify.png")
    pl = sub.add_parser("plot", help="rate plots from a results directory", epilog=EPILOGS["plot"], formatter_class=fmt)
    pl.add_argument("dir")
    pl.add_argument("--out", help="output file (PNG, PDF, SVG; default DIR/rates.png)")
    pl.add_argument("--y", default=None, help="metric (default: suboptimality if measured, else grad_mapping_sq)")
    pl.add_argument("--title", default=None)
    pl.add_argument("--filter", action="append", metavar="KEY=VALUE",
                    help="only the runs whose parameter KEY equals VALUE (repeatable; e.g. algorithm=fedavg, "
                         "problem.heterogeneity=2.0)")
    pl.add_argument("--x", choices=("rounds", "comm", "grad_evals"), default=None,
                    help="one panel against this axis (default: three panels, one per axis)")
    demo = sub.add_parser("demo", help="a small run that prints a suboptimality table", epilog=EPILOGS["demo"],
                          formatter_class=fmt)
    demo.add_argument("--dataset", default="a9a", help="a LIBSVM data set (default a9a)")
    demo.add_argument("--data-dir", default=None, help="directory of the LIBSVM files (default: FEDTHEORY_DATA)")
    demo.add_argument("--rounds", type=int, default=1000, help="rounds of each run (default 1000)")
    demo.add_argument("--l2", type=float, default=1e-2, help="ridge weight, > 0 (default 0.01)")
    for p in sub.choices.values():
        p.add_argument("-q", "--quiet", action="store_true",
                       help="no progress bars (bars go to stderr, only on a terminal; also FEDTHEORY_QUIET=1)")
        p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                       help="import this module first (repeatable): your algorithms, problem factories, components "
                            "and theorems register themselves; sweep workers import it too (the current directory "
                            "is searched)")
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:                   # reported by the subcommand, which suggests its own options
            sub.choices[args.cmd].error(f"unrecognized arguments: {' '.join(extra)}")
    except UsageError as e:
        print(_one_line(e), file=sys.stderr)
        return 2
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())          # as 'python -m fedtheory' does (the console script does not): for
    if args.imports:                          # --import and for a configuration's import = [...] alike
        from .registry import import_modules    # (--import only: the registry loads NumPy, --help does not)
        try:
            import_modules(args.imports)
        except (ImportError, ValueError) as e:
            print(f"fedtheory {args.cmd}: error: {_one_line(e)}", file=sys.stderr)
            return 2
        except Exception as e:                  # the user's module raised: one line naming where, exit 2 (an
            print(f"fedtheory {args.cmd}: error: importing {', '.join(args.imports)} (--import) raised "  # input
                  f"{type(e).__name__}: {_one_line(e)}{_where_raised(e)}", file=sys.stderr)  # error; 1 = a check
            return 2
    _utf8_stdout()
    if args.quiet:
        _progress._QUIET.append(True)
    try:
        return _command(args.cmd)(args)
    except BrokenPipeError:                     # `fedtheory list | head`: the reader left; not an error
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())   # Python's flush at exit would fail again
        except (OSError, ValueError):
            pass
        return 0
    except OSError as e:
        print(f"fedtheory {args.cmd}: error: {_one_line(_os_error(e))}", file=sys.stderr)
        return 2
    except INPUT_ERRORS as e:
        print(f"fedtheory {args.cmd}: error: {_one_line(e)}", file=sys.stderr)
        return 2
    finally:
        if args.quiet:
            _progress._QUIET.pop()


def _utf8_stdout():
    """Print real UTF-8 (e.g. the section sign of references) whatever the locale says."""
    enc = (getattr(sys.stdout, "encoding", None) or "").lower().replace("-", "")
    if enc != "utf8" and hasattr(sys.stdout, "reconfigure"):
        try:
            sys.stdout.reconfigure(encoding="utf-8")
        except (ValueError, OSError):          # pragma: no cover  (a stream that cannot be changed)
            pass


if __name__ == "__main__":
    sys.exit(main())
