"""
A theorem's left-hand side against its bound over T
===================================================

Theorem 4.4 of Haddadpour & Mahdavi (2019) bounds the average squared gradient norm of local
SGD with periodic averaging (E local steps, S of n clients per round, step size
:math:`\\eta = \\sqrt{S/T}/L`) by :math:`O(1/\\sqrt{S T})` after :math:`T` local steps.
:func:`validation.verify` runs the registered algorithm through :func:`fedtheory.run`, measures
the left-hand side from the runs' traces (one value per seed), evaluates every condition of the
theorem and the bound (the variant "printed", as in the paper; the "corrected" variant of
:doc:`its page <../papers/localdescent>` restores a factor E on the heterogeneity term C1,
which vanishes here, so both variants give the same bound).

The problem: eight quadratics with a shared minimiser and distinct Hessians, and additive
Gaussian gradient noise (so the rate is the noise-dominated :math:`T^{-1/2}`).
"""

import numpy as np

import problems
import validation
from fedtheory.plotting import bound_vs_T

p = problems.quadratic(8, 6, L=1.0, mu=0.25, shared_minimizer=True, hessian="distinct", noise=0.3, seed=6)
E, S = 4, 2
Ts = [128, 256, 512, 1024]

# %%
# One verification per horizon T (T / E rounds), three seeds each.
measured, stderr, bound = [], [], []
for T in Ts:
    v = validation.verify("localdescent.theorem_4_4", p, rounds=T // E, local_steps=E,
                          clients_per_round=S, seeds=3, x0=np.full(6, 2.0), variant="printed")
    measured.append(v.measured)
    stderr.append(v.stderr)
    bound.append(v.bound)
    print(f"T={T:5d}: measured {v.measured:.3e}, bound {v.bound:.3e}, ratio {v.ratio:.3f}, "
          f"applicable: {v.applicable}, holds: {v.holds}")

# %%
# The measured left-hand side with two standard errors, the bound and the predicted order
# :math:`T^{-1/2}` drawn through the last measured point, against the rounds T / E (the same
# slope as against T).
fig = bound_vs_T([T // E for T in Ts], measured, stderr=stderr, bounds={"printed": bound}, predicted_slope=-0.5,
                 title="localdescent.theorem_4_4, E = 4, S = 2")
