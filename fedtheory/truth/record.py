"""The certified optimum of a problem (:class:`GroundTruth`) and the check of a reference
given to a run (:func:`check_reference`).

Part of the ground truth (:mod:`fedtheory.truth.optimum`)."""
from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
import warnings

import numpy as np

from ..exceptions import InvalidParameterError
from .numerics import _norm


@dataclass
class GroundTruth:
    """Optimum of a federated problem.

    Attributes
    ----------
    x : ndarray (d,)
        The minimiser x*.
    f : float
        F* = F(x*).
    residual : float
        Norm of the gradient mapping at x* (about 1e-13 after the polish).
    client_f : ndarray (n,)
        Each client's own optimal value f_i* = inf_x f_i(x) + h(x).
    client_x : ndarray (n, d)
        Each client's minimiser (NaN rows where the infimum is not attained).
    client_residual : ndarray (n,)
        Gradient-mapping norm at each client minimiser.
    client_attained : ndarray of bool (n,)
        False where the client's infimum is not attained: (quasi-)separable logistic data without
        ridge (decided by an LP), where client_f is the exact infimum 0 under complete separation
        and NaN, with the client not certified, under quasi-complete separation.
    info : dict
        Solver statistics: CVXPY status and value, polish iterations, timings.
    certified : bool
        True when F* is proven to the tolerance ``tol`` (see :mod:`fedtheory.truth.certificate`);
        False only with ``certify="warn"`` (``certify="raise"``, the default, raises instead).
    f_lower, f_upper : float
        A bracket f_lower <= F* <= f_upper: f_upper = F(x*) evaluated with extended-precision
        residuals where possible, f_lower from the QR residual (least squares), the duality gap
        (lasso) or strong convexity (mu > 0); NaN where no lower bound is known.
    rel_residual : float
        The gradient-mapping norm at x* divided by the one at 0 (what is left of the initial
        optimality residual).
    f_eval_error : float
        A bound on the rounding error of F evaluated in double precision near x* (what a run's
        ``value`` column can resolve).
    tol : float
        The relative tolerance of the certificate: ``|F* - f| <= tol max(1, |F*|)`` when certified.
    reason : str
        Why the result is not certified ('' when it is).
    client_certified : ndarray of bool (n,)
        The same verdict for every client optimum f_i* (all True when certified).
    problem_hash : str
        ``problem.data_hash()`` of the problem it is the optimum of: ``run(reference=...)`` and
        :func:`validation.constants` refuse it for another problem ('' for one built by hand).
    """

    x: np.ndarray
    f: float
    residual: float
    client_f: np.ndarray
    client_x: np.ndarray
    client_residual: np.ndarray
    client_attained: np.ndarray
    info: dict = field(default_factory=dict)
    certified: bool = True
    f_lower: float = np.nan
    f_upper: float = np.nan
    rel_residual: float = np.nan
    f_eval_error: float = np.nan
    tol: float = 1e-9
    reason: str = ""
    client_certified: np.ndarray = None
    problem_hash: str = ""

    @property
    def accuracy(self):
        """f_upper - f_lower: the proven width of the bracket on F* (NaN where no lower bound is known)."""
        return float(self.f_upper - self.f_lower)

    def __repr__(self):
        """One line: F*, the residual, the dimension and what was certified."""
        n = np.shape(self.client_f)[0]
        clients = (f"{int(np.sum(self.client_attained))}/{n} client optima attained"
                   if self.info.get("clients_computed", True) else "client optima not computed")
        cert = (f"certified to {self.tol:g}" + (f" (bracket width {self.accuracy:.1e})"
                                                 if np.isfinite(self.f_lower) else " (by the KKT residual)")
                if self.certified else "NOT CERTIFIED")
        return (f"GroundTruth(f={self.f:.17g}, residual={self.residual:.2e}, {cert}, d={np.shape(self.x)[0]}, "
                f"n_clients={n}, {clients}{', cached' if self.info.get('cached') else ''})")

    def summary(self):
        """Every detail as text: x*, F*, the client optima and the solver's statistics."""
        x = np.asarray(self.x)
        lines = [f"F* = {self.f:.17g}", f"residual (gradient-mapping norm at x*) = {self.residual:.3e}",
                 f"relative residual (vs at x = 0) = {self.rel_residual:.3e}",
                 f"bracket: {self.f_lower:.17g} <= F* <= {self.f_upper:.17g}; rounding of F in double "
                 f"precision near x*: {self.f_eval_error:.3e}",
                 ("certified" if self.certified else f"NOT CERTIFIED: {self.reason}") + f" (tolerance {self.tol:g})",
                 f"x*: d={x.shape[0]}, ||x*||={_norm(x):.6g}, "
                 f"{np.array2string(x, precision=6, threshold=8, edgeitems=3)}"]
        cf = np.asarray(self.client_f)
        if cf.size and np.isfinite(cf).any():
            lines.append(f"client optima f_i*: n={cf.size}, min {np.nanmin(cf):.6g}, max {np.nanmax(cf):.6g}; "
                         f"attained by {int(np.sum(self.client_attained))}; max client residual "
                         f"{np.nanmax(self.client_residual):.3e}")
        else:
            lines.append(f"client optima f_i*: not computed (n={cf.size})")
        lines += [f"info: {k} = {v}" for k, v in self.info.items()]
        return "\n".join(lines)


def check_reference(problem, reference, caller, name="reference"):
    """Refuse a ground truth that is not ``problem``'s optimum: another dimension, or (a
    :class:`GroundTruth`) another problem's data hash. A reference built by hand (an object with
    ``f`` and ``x``, no hash) is checked by its value: F(x) must be its ``f``, else a warning.
    Suboptimality, distances and the heterogeneity constants measured against another problem's
    x* and F* are silently wrong numbers.

    Parameters
    ----------
    problem : FederatedProblem
        The problem.
    reference : GroundTruth or object with f and x
        The reference.
    caller : str
        The function that checks (for the error).
    name : str, default "reference"
        The parameter's name (for the error).
    """
    x = np.asarray(reference.x, dtype=np.float64) if getattr(reference, "x", None) is not None else None
    if x is None or x.shape != (problem.dim,):
        raise InvalidParameterError(f"The '{name}' parameter of {caller} must be the ground truth of this "
                                    f"problem (dimension {problem.dim}); got one whose x has shape "
                                    f"{None if x is None else x.shape}.")
    own = getattr(reference, "problem_hash", "")
    if not hasattr(problem, "data_hash"):
        return
    if own:
        if own != problem.data_hash():
            raise InvalidParameterError(
                f"The '{name}' parameter of {caller} is the ground truth of another problem (data hash "
                f"{own[:12]}..., this problem {problem.data_hash()[:12]}...): its x* and F* would make every "
                f"suboptimality and constant wrong. Compute validation.ground_truth(problem) for this one.")
        return
    with np.errstate(all="ignore"):
        fx = float(problem.value(x))
    f = float(reference.f)
    if not (np.isfinite(fx) and abs(fx - f) <= 1e-6 * max(1.0, abs(f))):
        warnings.warn(f"{caller}: the '{name}' given (F* = {f!r}) does not match this problem at its x* "
                      f"(F(x*) = {fx!r}); is it the optimum of another problem?", UserWarning, stacklevel=3)
