r"""Problem constants: smoothness, strong convexity and each paper's heterogeneity measure.

All quantities are computed from the data and the certified optimum, never guessed:

=====================  ==========================================================================
``L``                  :math:`\sup_x \lambda_{\max}\nabla^2 F_{smooth}(x)` (exact, see fedtheory.constants)
``L_i``, ``L_max``     the same for every client objective f_i, and their maximum
``L_sample_max``       largest per-sample smoothness: curvature_bound ||a||^2 + l2 (least squares c = 1, logistic 1/4)
``mu``                 :math:`\inf_x \lambda_{\min}\nabla^2 F_{smooth}(x)` (logistic: the ridge l2)
``mu_star``            :math:`\lambda_{\min}\nabla^2 F_{smooth}(x^*)` (local curvature at the optimum)
``zeta_star_sq``       :math:`\sum_i w_i\|\nabla f_i(x^*)\|^2` (sigma_*^2 of docs/implemented.md; zeta_*^2 of FedSPS)
``gamma_gap``          :math:`\Gamma = F^* - \sum_i w_i f_i^*` (Li et al. 2020; FedSPS sigma_f^2 with l_i* = f_i*)
``sigma_f_sq_zero``    FedSPS :math:`\sigma_f^2` with :math:`\ell_i^* = 0`: F* (non-negative losses only)
``sigma_sq``           variance of the additive gradient noise, d * noise^2
``sigma_g_sq``         FedSpeed's :math:`\sup_x \sum_i w_i\|\nabla f_i(x) - \nabla F(x)\|^2`
                       (``sigma_g_sq_kind``: "exact", "bound" or "unbounded")
``gradient_diversity`` Haddadpour & Mahdavi's :math:`\lambda = \sup_x \Lambda(x, q)`
                       (``gradient_diversity_kind``: "exact", "bound" or "unbounded")
=====================  ==========================================================================
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


from ..exceptions import DataError
from .numerics import _norm
from .optimum import ground_truth
from ..constants import (client_smoothness, diversity, feddeper_assumptions as problem_constants,
                         quadratic_diversity_sup, smoothness, strong_convexity)
from .certificate import describe
from .record import check_reference


@dataclass
class Constants:
    r"""Constants of a federated problem, from :func:`constants` (definitions in the module docstring).

    Attributes
    ----------
    L : float
        :math:`\sup_x \lambda_{\max}\nabla^2 F_{smooth}(x)`.
    L_i : ndarray of shape (n,)
        The same for every client objective f_i.
    L_max : float
        Their maximum.
    L_sample_max : float
        Largest per-sample smoothness.
    mu : float
        :math:`\inf_x \lambda_{\min}\nabla^2 F_{smooth}(x)` (logistic: the ridge l2).
    mu_star : float
        :math:`\lambda_{\min}\nabla^2 F_{smooth}(x^*)`.
    kappa : float
        L / mu (inf when mu = 0).
    f_star : float
        F*, the certified optimal value.
    zeta_star_sq : float
        :math:`\sum_i w_i\|\nabla f_i(x^*)\|^2`.
    gamma_gap : float
        :math:`\Gamma = F^* - \sum_i w_i f_i^*`.
    sigma_f_sq_zero : float
        FedSPS :math:`\sigma_f^2` with :math:`\ell_i^* = 0`.
    sigma_sq : float
        Variance of the additive gradient noise, d * noise^2.
    sigma_g_sq : float
        FedSpeed's :math:`\sup_x \sum_i w_i\|\nabla f_i(x) - \nabla F(x)\|^2`.
    sigma_g_sq_kind : str
        "exact", "bound" or "unbounded".
    gradient_diversity : float
        Haddadpour & Mahdavi's :math:`\lambda = \sup_x \Lambda(x, q)`.
    gradient_diversity_kind : str
        "exact", "bound" or "unbounded".
    notes : dict
        Why a constant is a bound, unbounded or not meaningful for this problem, by name.
    """

    L: float
    L_i: np.ndarray
    L_max: float
    L_sample_max: float
    mu: float
    mu_star: float
    kappa: float
    f_star: float
    zeta_star_sq: float
    gamma_gap: float
    sigma_f_sq_zero: float
    sigma_sq: float
    sigma_g_sq: float
    sigma_g_sq_kind: str
    gradient_diversity: float
    gradient_diversity_kind: str
    notes: dict = field(default_factory=dict)

    def __repr__(self):
        """One line: smoothness, strong convexity, conditioning and heterogeneity."""
        return (f"Constants(L={self.L:.6g}, L_max={self.L_max:.6g}, mu={self.mu:.6g}, kappa={self.kappa:.6g}, "
                f"f_star={self.f_star:.10g}, zeta_star_sq={self.zeta_star_sq:.6g}, "
                f"sigma_g_sq={self.sigma_g_sq:.6g} ({self.sigma_g_sq_kind}), n_clients={np.shape(self.L_i)[0]})")

    def summary(self):
        """Every constant on its own line (L_i summarised), then the notes."""
        lines = []
        for k, v in self.__dict__.items():
            if k == "notes":
                continue
            if k == "L_i":
                Li = np.asarray(v)
                lines.append(f"L_i: n={Li.size}, min {Li.min():.6g}, max {Li.max():.6g}")
            else:
                lines.append(f"{k}: {v:.10g}" if isinstance(v, float) else f"{k}: {v}")
        lines += [f"note {k}: {v}" for k, v in self.notes.items()]
        return "\n".join(lines)


gradient_diversity = diversity   # one definition: fedtheory.constants.diversity


def constants(problem, gt=None):
    """Compute the constants of ``problem`` (ground truth is computed and cached if not given).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.
    gt : GroundTruth, optional
        Result of :func:`validation.ground_truth`.

    Returns
    -------
    Constants
        L, L_max, mu, the clients' constants and each paper's heterogeneity measures.

    Raises
    ------
    UncertifiedOptimumError
        When ``gt`` is not given and the optimum cannot be certified (see :func:`ground_truth`).
    DataError
        When the Hessian overflows double precision (data of size about 1e154 or more).

    Examples
    --------
    >>> import problems, validation
    >>> p = problems.quadratic(4, 3, L=2.0, mu=0.5, heterogeneity=0.3, seed=0)
    >>> c = validation.constants(p)
    >>> round(c.L, 12), round(c.mu, 12), round(c.zeta_star_sq, 12), c.sigma_g_sq_kind
    (2.0, 0.5, 0.3, 'exact')
    """
    if gt is not None:
        check_reference(problem, gt, "constants", "gt")
    gt = gt if gt is not None else ground_truth(problem)
    with np.errstate(over="ignore", invalid="ignore"):
        try:
            L = smoothness(problem)
            L_i = client_smoothness(problem)
        except DataError:                                   # no curvature capability: said by name
            raise
        except (ValueError, np.linalg.LinAlgError):         # eigvalsh of a Hessian with inf entries
            L, L_i = np.inf, np.array([np.inf])
    if not (np.isfinite(L) and np.all(np.isfinite(L_i))):
        raise DataError(f"constants: the smoothness constant L of {describe(problem)} overflows double "
                        "precision (the Hessian's entries exceed 1.8e308); rescale the data.")
    if L == 0 and hasattr(problem, "M") and abs(problem.M).max() > 0:
        raise DataError(f"constants: the Hessian of {describe(problem)} underflows to 0 in double precision "
                        "although its data are not 0 (L would be below 1e-308); rescale the data.")
    mu = strong_convexity(problem)
    H_star = problem.hessian(gt.x)
    mu_star = float(np.linalg.eigvalsh(H_star)[0])
    w = problem.weights
    n = problem.n_clients
    G = np.array([problem.client_grad(i, gt.x) for i in range(n)])
    zeta = float(w @ np.sum(G * G, axis=1))
    notes = {}
    fit = problem.datafit
    L_sample = fit.sample_smoothness(problem.data)       # the capability's bound (checked above: L exists)
    if fit.sample_loss_floor is None or fit.sample_loss_floor < 0:
        sigma_f_zero = np.nan
        notes["sigma_f_sq_zero"] = (f"the datafit {fit.name!r} declares no sample loss floor >= 0: "
                                    "l_i* = 0 is not a lower bound")
    else:
        sigma_f_zero = gt.f - problem.h_value(gt.x) if not problem.is_composite else np.nan
    # FedSpeed's sigma_g^2: sup_x sum_i w_i ||grad f_i(x) - grad F(x)||^2
    hessians_equal, Hs = False, None
    radii = [fit.gradient_radius(problem.data, i) for i in range(n)]
    if fit.constant_hessian:
        # constant client Hessians, built once for sigma_g^2 and the gradient diversity
        z = np.zeros(problem.dim)
        Hs = np.array([problem.client_hessian(i, z) for i in range(n)])
        top = float(np.abs(Hs).max(initial=0.0))           # relative: data of size 1e-150 alike
        hessians_equal = bool(np.allclose(Hs, Hs[0], rtol=1e-12, atol=1e-14 * top))
    if hessians_equal:
        # grad f_i - grad F_smooth is constant in x: its value at x*. (zeta alone is that only where
        # grad F_smooth(x*) = 0: not for a composite problem, where it is -(a subgradient of h))
        D = G - w @ G
        sigma_g, sg_kind = float(w @ np.sum(D * D, axis=1)), "exact"
    elif all(r is not None for r in radii):
        # each grad f_i lies in a ball of radius R_i = slope bound * max row norm of client i (+ the
        # common l2 x, which cancels)
        R_i = np.array(radii)
        R_bar = float(w @ R_i)
        sigma_g, sg_kind = float(w @ (R_i + R_bar) ** 2), "bound"
    else:
        sigma_g, sg_kind = np.inf, "unbounded"
        notes["sigma_g_sq"] = ("client Hessians differ: grad f_i - grad F grows linearly in x" if fit.constant_hessian
                               else f"the datafit {fit.name!r} declares no slope bound (sup |l'|): no bound on "
                                    "grad f_i - grad F is known")
    # Haddadpour & Mahdavi's gradient diversity bound
    # shared minimiser: every client gradient at x* is 0 up to 1e-10 of its own scale
    # L_i ||x*|| + ||grad f_i(0)|| (scale-invariant: data of size 1e77 or 1e-150 alike)
    z0 = np.zeros(problem.dim)
    g0 = np.array([_norm(problem.client_grad(i, z0)) for i in range(n)])
    xnorm = _norm(gt.x)                                  # no overflow at ||x*|| ~ 1e200
    scale = float(np.max(L_i * xnorm + g0)) if n else 0.0
    shared_min = bool(np.sqrt(zeta) <= 1e-10 * scale)
    if not shared_min:
        lam, lam_kind = np.inf, "unbounded"
        notes["gradient_diversity"] = "clients are not all stationary at x* (no shared minimiser)"
    elif Hs is not None:
        lam, lam_kind = quadratic_diversity_sup(Hs, w), "exact"
    else:
        lam, lam_kind = (L / mu if mu > 0 else np.inf), "bound"
        notes["gradient_diversity"] = "shared minimiser: sup Lambda <= kappa = L/mu (docs/papers/localdescent.md, §3.1)"
    gap = float(gt.f - w @ gt.client_f) if np.all(np.isfinite(gt.client_f)) else np.nan
    return Constants(L=L, L_i=L_i, L_max=float(L_i.max()), L_sample_max=L_sample, mu=mu,
                     mu_star=mu_star, kappa=(L / mu if mu > 0 else np.inf), f_star=gt.f,
                     zeta_star_sq=zeta, gamma_gap=gap, sigma_f_sq_zero=float(sigma_f_zero),
                     sigma_sq=float(problem.dim * problem.noise ** 2), sigma_g_sq=sigma_g,
                     sigma_g_sq_kind=sg_kind, gradient_diversity=lam, gradient_diversity_kind=lam_kind,
                     notes=notes)



def feddeper_constants(problem, batch_size=None):
    """Compute FedDeper's Assumption constants: beta, sigma^2 (varsigma), B^2_min and G^2(B^2).

    See docs/papers/feddeper.md, §4.7.

    Quadratics: beta = max_i lambda_max(A_i), B^2_min = max(1, lambda_max(Abar^-1 M Abar^-1)) and
    G^2(B) = max_x [(1/n) sum ||A_i x - b_i||^2 - B^2 ||Abar x - bbar||^2] (exact); logistic
    regression: B = 1 and the upper bound G^2 <= mean_i R_i^2, sigma^2 <= max_i mean||a||^2 / b.

    Parameters
    ----------
    problem : FederatedProblem
        A quadratic or logistic-regression problem (anything else is a ValueError).
    batch_size : int, optional
        Minibatch size b of the runs, for the minibatch variance sigma^2 of logistic regression
        (None: exact gradients, only the problem's additive noise). Quadratics have no samples:
        they accept only None.

    Returns
    -------
    dict
        ``beta``, ``sigma_sq``, ``B_sq_min``, ``G_sq`` (a function of B^2) and ``notes``.

    Examples
    --------
    >>> import problems, validation
    >>> p = problems.quadratic(5, 3, heterogeneity=2.0, seed=1)        # equal Hessians
    >>> c = validation.feddeper_constants(p)
    >>> c["B_sq_min"], round(c["G_sq"](1.0), 10)
    (1.0, 2.0)
    """
    w = np.asarray(problem.weights, dtype=np.float64)
    if not np.allclose(w, 1.0 / w.size, rtol=1e-12, atol=0.0):
        raise ValueError(f"feddeper_constants: FedDeper's assumptions are stated for F = (1/n) sum_i f_i, and "
                         f"{problem.name!r} weighs its clients unequally (weights from {w.min():.3g} to "
                         f"{w.max():.3g}); its constants (which average the clients uniformly) would not be this "
                         "problem's. Build the problem with equal client weights.")
    beta, s2, B2, G2, notes = problem_constants(problem, batch_size)
    return dict(beta=beta, sigma_sq=s2, B_sq_min=B2, G_sq=G2, notes=notes)
