r"""The group-lasso penalty :math:`h(x) = \tau \sum_g \|x_g\|_2`."""
import numpy as np

from .._kernels.regularizers import REG_GROUP
from ..exceptions import DataError
from .base import Regularizer
from .catalog import register_regularizer


@register_regularizer
class GroupL2(Regularizer):
    r""":math:`h_0(x) = \sum_g \|x_g\|_2` over the groups of ``groups`` (one id per coordinate, ids 0, 1,
    ...; -1 marks an unpenalized coordinate such as an intercept). Prox: block soft thresholding
    :math:`u_g \max(1 - t/\|u_g\|, 0)` (Numba: ``prox_group``).

    Parameters
    ----------
    weight : float, default 0
        The penalty's weight tau in h = tau h_0 (>= 0).
    groups : array of int
        The group id of every coordinate (-1: unpenalized).

    Examples
    --------
    >>> import numpy as np
    >>> GroupL2(weight=1.0, groups=[0, 0, -1]).prox(np.array([3.0, 4.0, 7.0]), 1.0).round(12).tolist()
    [2.4, 3.2, 7.0]
    """

    name = "group"
    code = REG_GROUP

    def __init__(self, weight=0.0, groups=None):
        super().__init__(weight)
        self.groups = None if groups is None else _group_ids(groups)

    def check(self, dim, caller):
        g = self.groups
        if g is None or g.shape != (dim,):
            raise DataError(f"{caller}: reg='group' needs 'groups', one group id per coordinate "
                            f"(length {dim}); got {None if g is None else g.shape}.")

    def coercive(self):
        """Coercive with a positive weight when every coordinate is in a penalised group (id >= 0)."""
        return bool(self.weight > 0 and self.groups is not None and (self.groups >= 0).all())

    def _ids(self):
        return [g for g in np.unique(self.groups) if g >= 0]

    def h0(self, x):
        return sum(np.linalg.norm(x[self.groups == g]) for g in self._ids())

    def prox_t(self, u, t):
        out = u.copy()
        for g in self._ids():
            m = self.groups == g
            nrm = np.linalg.norm(u[m])
            out[m] = 0.0 if nrm <= t else u[m] * (1 - t / nrm)
        return out

    def torch_prox_t(self, u, t):
        import torch
        groups = torch.as_tensor(self.groups, device=u.device)
        pen = groups >= 0
        ng = int(groups.max()) + 1 if bool(pen.any()) else 0
        sq = torch.zeros(ng, dtype=u.dtype, device=u.device).index_add_(0, groups[pen], u[pen] * u[pen])
        nrm = sq.sqrt()
        scale = torch.where(nrm <= t, torch.zeros_like(nrm), 1.0 - t / nrm)
        out = u.clone()
        out[pen] = u[pen] * scale[groups[pen]]
        return out

    def cvxpy_h0(self, x):
        import cvxpy as cp
        return cp.sum([cp.norm(x[np.flatnonzero(self.groups == g)], 2) for g in self._ids()])

    def kernel_args(self):
        return self.groups, 0, 0

    def hash_extra(self):
        return b"|group|None" + self.groups.tobytes()

    @classmethod
    def example(cls, rng, dim):
        groups = np.arange(dim) // 2
        groups[-1] = -1
        return cls(weight=0.3, groups=groups)


def _group_ids(groups):
    """The group ids as int64, refusing what a cast would change: ids that are not integers (0.7 was
    read as group 0) and ids below -1 (only -1 marks an unpenalised coordinate)."""
    try:
        g = np.asarray(groups)
    except ValueError:                  # ragged nesting, e.g. [[0], [1, 2, 3]]
        g = np.asarray(None)
    if g.ndim != 1:
        raise DataError(f"group: 'groups' must be one integer group id per coordinate (a flat list, -1 for an "
                        f"unpenalised coordinate), not the groups' members; got {groups!r}")
    if g.dtype.kind not in "iub":
        if g.dtype.kind != "f" or not np.all(np.isfinite(g)) or not np.all(g == np.round(g)):
            raise DataError(f"group: 'groups' must be integer group ids (0, 1, ..., or -1 for an unpenalised "
                            f"coordinate); got {groups!r}")
    g = np.ascontiguousarray(g, dtype=np.int64)
    if g.size and g.min() < -1:
        raise DataError(f"group: 'groups' ids must be >= -1 (-1 marks an unpenalised coordinate); got "
                        f"{int(g.min())} in {groups!r}")
    return g

