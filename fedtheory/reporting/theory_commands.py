"""The commands of the ``fedtheory`` command line about names and theorems: ``list``, ``describe``,
``verify``, ``errata`` and ``falsify``. Each takes the parsed arguments and returns the exit status,
or raises :class:`~fedtheory.reporting.commands.UsageError`."""
from __future__ import annotations

import json
import os
from pathlib import Path

from .commands import UsageError, _out_dir
from .config import factories
from .describe import describe, describe_text
from .errata import _num, errata, write_errata
from .verification import default_jobs
from .verify_report import save_figure, verify_all
from .._argcheck import did_you_mean
from ..exceptions import InvalidParameterError
from ..registry import algorithms, import_hint
from ..theory import THEOREMS, is_lemma
from ..theory.falsify import falsify
from ..theory.verdicts import is_failure
from ..theory.tightness import require_pepit


def _list(args):
    """Every registered name, by kind."""
    print("algorithms:", ", ".join(algorithms()))
    print("problems:  ", ", ".join(factories()))
    print("theorems:  ", ", ".join(sorted(n for n in THEOREMS if not is_lemma(n))) or "(none registered yet)")
    print("lemmas:    ", ", ".join(sorted(n for n in THEOREMS if is_lemma(n))) or "(none registered yet)")
    return 0


def _describe(args):
    """What a name is (:func:`~fedtheory.reporting.describe.describe`), as text or JSON."""
    info = describe(args.name)
    print(json.dumps(info, indent=2, default=str, ensure_ascii=False) if args.json else describe_text(info))
    return 0


def _registered(names):
    """"registered theorems: ...; lemmas: ..." of the theorem checks ``names``."""
    theorems = ", ".join(sorted(n for n in names if not is_lemma(n)))
    lemmas = ", ".join(sorted(n for n in names if is_lemma(n)))
    return f"registered theorems: {theorems}" + (f"; lemmas: {lemmas}" if lemmas else "")


def _verify(args):
    unknown = [t for t in (args.theorem or []) if t not in THEOREMS]
    if unknown:
        raise UsageError(f"unknown theorem {', '.join(map(repr, unknown))}; {_registered(THEOREMS)}."
                         f"{''.join(did_you_mean(t, THEOREMS) for t in unknown)}{import_hint()}")
    if args.tightness:                 # before the regular cases: no traceback after minutes of work
        try:
            require_pepit()
        except ImportError as e:
            raise UsageError(f"--tightness: {e}") from None
    _out_dir(args.out)
    jobs = default_jobs() if args.jobs is None else args.jobs
    if jobs < 0:                                       # joblib's convention: -1 all CPUs, -2 all but one
        jobs = max(1, (os.cpu_count() or 1) + 1 + jobs)
    df, _ = verify_all(quick=args.quick, out=args.out, theorems=args.theorem or None, tightness=args.tightness,
                       jobs=jobs, lemmas=args.lemmas)
    return 1 if df.verdict.map(is_failure).any() else 0      # a violation no expectation covers fails too


def _errata(args):
    _out_dir(args.out)
    rows = errata(tightness=not args.no_tightness)
    md, tex = write_errata(rows, args.out)
    for r in rows:
        said = [f"{w} {r[k + '_verdict'].split(':')[0]}" + (f" (measured/bound {_num(r[k + '_ratio'])})"
                                                             if r[k + "_ratio"] == r[k + "_ratio"] else "")
                for w, k in (("printed", "printed"), (r["variant"], "corrected"))]
        where = "" if r["level"] == "theorem" else f" at {r['level']}"
        print(f"{r['theorem']} [{r['label']}]: {', '.join(said)}{where}"
              + ("" if r["separated"] else " (not separated)"))
    n_sep = sum(bool(r["separated"]) for r in rows)
    print(f"{len(rows)} errata, {n_sep} separated by a computation: {md}, {tex}")
    return 0


def _falsify(args):
    """Exit 1 when a counterexample is found, 0 otherwise; the report (and its figure) in --out."""
    if args.name not in THEOREMS:
        raise UsageError(f"unknown theorem {args.name!r}; {_registered(THEOREMS)}."
                         f"{did_you_mean(args.name, THEOREMS)}{import_hint()}")
    if args.out:
        _out_dir(args.out)
    try:
        from hypothesis.errors import HypothesisException
    except ImportError:
        raise UsageError("falsify needs hypothesis (the 'test' extra): pip install -e \".[test]\"") from None
    try:
        f = falsify(args.name, variant=args.variant, budget=args.budget, seed=args.seed, progress=None,
                    shrink=not args.no_shrink)
    except InvalidParameterError:
        raise
    except Exception as e:
        case = getattr(e, "fedtheory_case", None)
        if case is not None:                             # the user's theorem raised on a drawn case
            raise UsageError(f"the theorem raised {type(e).__name__}: {e} (on the drawn case {case})") from None
        if not isinstance(e, (ValueError, HypothesisException)):
            raise
        # no conforming space, or none could be drawn
        raise UsageError(f"{type(e).__name__}: {e}" if isinstance(e, HypothesisException) else str(e)) from None
    text = f.report()
    print(text)
    if args.out:
        import matplotlib
        matplotlib.use("Agg")
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        save_figure(f.figure(), out / "falsify.png")
        (out / "report.md").write_text(f"# falsify {args.name}\n\n```\n{text}\n```\n\n![search](falsify.png)\n")
        print(f"\nreport: {out / 'report.md'}")
    return 1 if f.counterexample is not None else 0
