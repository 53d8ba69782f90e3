"""A corrupt Numba cache never stops a run: unreadable entries are dropped and recompiled.

Numba's on-disk cache (``__pycache__/*.nbi`` index and ``*.nbc`` data files) is unpickled on the
first call of a kernel; a truncated or garbled file raises there, and every later run would fail
the same way. :func:`harden_all` wraps the cache loader of every kernel of this package: a load
that raises is reported once with a warning, the kernel's index is reset and the kernel is
compiled afresh (and cached again).
"""
import importlib
import pkgutil
import sys
import warnings
from pathlib import Path

from numba.core.registry import CPUDispatcher


def _harden(disp):
    cache = getattr(disp, "_cache", None)
    if cache is None or getattr(cache, "_fedtheory_safe", False) or not hasattr(cache, "load_overload"):
        return
    load = cache.load_overload

    def load_overload(sig, target_context):
        try:
            return load(sig, target_context)
        except Exception as e:       # unpickling errors, EOF, OS errors of a damaged cache file
            warnings.warn(f"fedtheory: the Numba cache of {disp.py_func.__name__} is unreadable "
                          f"({type(e).__name__}: {e}); it is reset and the kernel recompiled.", RuntimeWarning,
                          stacklevel=2)
            try:
                cache.flush()                        # an empty index replaces the damaged one
            except Exception:                        # the index itself cannot be written: drop it
                for f in Path(cache.cache_path).glob(f"*{disp.py_func.__name__}*.nb[ic]"):
                    try:
                        f.unlink()
                    except OSError:
                        pass
            return None

    cache.load_overload = load_overload
    cache._fedtheory_safe = True


def harden_all():
    """Import every kernel module of the package and harden the cache of each of its kernels."""
    pkg = sys.modules[__package__]
    for info in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"{__package__}.{info.name}")
        for obj in list(vars(mod).values()):
            if isinstance(obj, CPUDispatcher):
                _harden(obj)
