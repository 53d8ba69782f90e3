"""When to show progress bars: one rule for every long step (ground truth, sweeps, verify).

A bar goes to stderr. It is shown when asked for (``progress=True``), never when asked not to
(``progress=False``), and otherwise (``progress=None``) only when stderr is a terminal. The
command line's ``--quiet`` and the environment variable ``FEDTHEORY_QUIET=1`` turn every bar
off, even an asked-for one.
"""
from __future__ import annotations

import os
import sys

_QUIET = []          # set by ``fedtheory --quiet`` for the duration of a command


def quiet():
    """True when bars are switched off (``--quiet`` or ``FEDTHEORY_QUIET`` set to a non-empty, non-0 value)."""
    env = os.environ.get("FEDTHEORY_QUIET", "").strip()
    return bool(_QUIET) or env not in ("", "0")


def enabled(progress=None):
    """Whether to show a bar: ``progress`` if given, else whether stderr is a terminal; always
    False when :func:`quiet`."""
    if quiet():
        return False
    if progress is not None:
        return bool(progress)
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def bar(progress=None, **kwargs):
    """A tqdm bar on stderr, disabled unless :func:`enabled`."""
    from tqdm.auto import tqdm
    return tqdm(disable=not enabled(progress), file=sys.stderr, **kwargs)
