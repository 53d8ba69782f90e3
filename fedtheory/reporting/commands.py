"""The commands of the ``fedtheory`` command line (:mod:`fedtheory.__main__` parses the arguments and
runs them) share: their usage error, one-line messages and the checks of their output paths. The
commands themselves live in ``run_commands`` (demo, run, sweep), ``theory_commands`` (list,
describe, verify, errata, falsify) and ``plot_command`` (plot), which the command line imports when
it dispatches to them; this module imports nothing of the library, so that ``fedtheory --help`` and
``--version`` load none of it."""
from __future__ import annotations

import os

#: Exit status of ``fedtheory run`` when its run diverged.
DIVERGED = 3


def _one_line(e):
    """An error's text on one line."""
    return " ".join(str(e).split())


class UsageError(Exception):
    """A usage mistake: printed as one line ``fedtheory CMD: error: ...``, exit status 2."""


def _out_dir(path, flag="--out"):
    """Refuse an output directory that cannot be written (one-line error, before any work).

    An empty path, an existing file, a file among its parents, or a directory where nothing can
    be created (read-only, permission denied: tried by creating and removing a probe directory
    in the closest existing directory, so nothing is left behind).
    """
    from pathlib import Path
    if not str(path).strip():
        raise UsageError(f"{flag} {path!r}: an empty path; a directory name is expected")
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{flag} {path}: is a file; a directory is expected")
    for parent in p.parents:
        if parent.exists() and not parent.is_dir():
            raise UsageError(f"{flag} {path}: {parent} is a file; a directory is expected")
    _probe_writable(next(q for q in (p, *p.parents) if q.is_dir()), path, flag)
    return path


def _probe_writable(directory, path, flag):
    """UsageError unless a directory can be created (and is removed again) in ``directory``."""
    import tempfile
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".fedtheory-probe-", dir=directory))
    except OSError as e:
        where = "" if str(directory) == str(path) else f" (in {directory})"
        raise UsageError(f"{flag} {path}: cannot write there{where}: {(e.strerror or str(e)).lower()}") from None


def _os_error(e):
    """An OSError as one line without the errno: ``PATH: reason`` (``[Errno 13] ...`` otherwise)."""
    if e.strerror and e.filename:
        return f"{e.filename}: {e.strerror.lower()}"
    return str(e)


def _out_file(path, flag="--out"):
    """Refuse an output file that is a directory, in a missing directory, or of an unknown format."""
    from pathlib import Path
    if not str(path).strip():
        raise UsageError(f"{flag} {path!r}: an empty path; a file name is expected (e.g. rates.png)")
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; a file name is expected (e.g. {p / 'rates.png'})")
    for parent in p.parents:
        if parent.exists() and not parent.is_dir():
            raise UsageError(f"{flag} {path}: {parent} is a file; a directory is expected")
    if not p.parent.is_dir():
        raise UsageError(f"{flag} {path}: the directory {p.parent} does not exist")
    _probe_writable(p.parent, path, flag)
    from matplotlib.figure import Figure
    kinds = Figure().canvas.get_supported_filetypes()
    if p.suffix.lstrip(".").lower() not in kinds:
        raise UsageError(f"{flag} {path}: unknown figure format {p.suffix or '(no suffix)'!r}; "
                         f"expected one of {', '.join('.' + k for k in sorted(kinds))}")
    return path
