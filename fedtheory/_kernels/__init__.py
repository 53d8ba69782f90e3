"""Numba kernels: the only package of fedtheory that imports numba.

Every kernel is a plain ``@njit(cache=True)`` function over contiguous float64/int64
arrays (no jitclass, no function arguments, no ``fastmath``: it would break the NaN
checks that detect divergence). A loop that inlines a client oracle is a ``@loop_kernel``
(:data:`.oracles.loop_kernel`: the same with NumPy's error model, which spares each local step
the reference counting that the raise paths of Numba's default model kept; a test checks every
such loop). Data are passed as a *data pack*::

    sparse (bool), A (m, d) dense or (0, 0), data/indices/indptr (CSR or empty),
    b (m,), kind (a tuple, oracles.kernel_form), client_ptr (n + 1,)

The CSR ``indices``/``indptr`` are uint32 (int64 past 2**32 stored entries): an unsigned index
needs none of the negative-index wraparound Numba adds to signed ones. ``data`` is empty for a
binary matrix (every stored value 1.0): the row loops then add ``x[j]`` instead of ``1.0 * x[j]``
(the same numbers). See ``ClientData.kernel_arrays``.

Dense and CSR data take separate specialised loops (one branch per gradient call, never
per row: a per-row branch made the CSR gradient four times slower).

Numba's on-disk cache is invalidated only by the timestamp of the file that defines a cached
function, so after an edit of a helper in ``oracles.py`` kernels in other files would keep the
old helper inlined. :func:`sync_cache` runs at import: it hashes every kernel source file and
clears the cache when the hash changed, wherever Numba keeps it (beside the sources, below
``NUMBA_CACHE_DIR``, or in the per-user cache of a read-only installation).

``kind`` is the id of the problem's datafit component in its static form (``kind[0]`` the id,
the tuple's length naming the kernel and the storage: each datafit compiles with its own kernel
only, :func:`.oracles.kernel_form`) and ``reg`` (``problem.reg_pack()``) the id of its
regularizer (:mod:`fedtheory.components`). Each component's kernels live in
:mod:`.datafits` (0 least squares, 1 logistic, 2 explicit quadratic: then the rows of client i
are the d rows of Q_i and b holds c_i) and :mod:`.regularizers` (prox kernels); :mod:`.oracles`
is the one module that dispatches on the ids (``client_grad``, ``client_value_grad``,
``client_hvp``, ``prox_vec``), at compile time for the datafit. The local-step loops call only those.

May import numba, NumPy, the foundations (``fedtheory.exceptions``) and, for a registered datafit
without a kernel of its own, the components' catalog (its NumPy fallback, in object mode); nothing
else of the library imports numba.
"""
import hashlib
from pathlib import Path


def numba_cache_dir(directory):
    """The directory in which Numba caches the functions compiled from the sources in ``directory``.

    Numba asks its cache locators in turn and uses the first that accepts the source file:
    ``NUMBA_CACHE_DIR`` when it is set (a mirror of the source path below it), else ``__pycache__``
    beside the sources when it is writable, else a per-user cache directory (a read-only
    installation). The same question is asked here, for a source file of ``directory``.
    """
    directory = Path(directory)
    sources = sorted(directory.glob("*.py"))
    if sources:
        from numba.core.caching import CacheImpl
        for cls in CacheImpl._locator_classes:
            try:
                loc = cls.from_function(numba_cache_dir, str(sources[0]))
            except Exception:           # a locator that cannot serve this file (e.g. unwritable)
                continue
            if loc is not None:
                return Path(loc.get_cache_path())
    return directory / "__pycache__"


def sync_cache(directory):
    """Delete the Numba cache files of the kernels in ``directory`` if any ``*.py`` there changed.

    The cache is where Numba keeps it (:func:`numba_cache_dir`: ``__pycache__``, or below
    ``NUMBA_CACHE_DIR``, or the per-user cache of a read-only installation); the SHA-256 of the
    sorted kernel sources is kept there in ``kernels.sha256``. Returns True when the cache was
    cleared; a cache directory that cannot be written is left alone.
    """
    directory = Path(directory)
    h = hashlib.sha256()
    for f in sorted(directory.glob("*.py")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    digest = h.hexdigest()
    cache = numba_cache_dir(directory)
    stamp = cache / "kernels.sha256"
    try:
        if stamp.is_file() and stamp.read_text() == digest:
            return False
        cache.mkdir(parents=True, exist_ok=True)
        for f in list(cache.glob("*.nbi")) + list(cache.glob("*.nbc")):
            f.unlink()
        stamp.write_text(digest)
    except OSError:
        return False
    return True


sync_cache(Path(__file__).parent)

from .datafits import KIND_LEAST_SQUARES, KIND_LOGISTIC, KIND_QUADRATIC  # noqa: E402,F401
