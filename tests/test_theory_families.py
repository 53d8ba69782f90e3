"""The theorems' own cases are built without the ``problems`` package: the same problems."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import problems


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 5), d=st.integers(1, 4), seed=st.integers(0, 2 ** 31), het=st.sampled_from([0.0, 0.7]),
       noise=st.sampled_from([0.0, 0.2]), hessian=st.sampled_from(["shared", "distinct"]))
def test_the_theorems_cases_build_the_problems_the_factories_build(n, d, seed, het, noise, hessian):
    """The library builds its theorems' cases without ``problems`` (fedtheory.theory.families): the
    same data, name, weights and exact constants as the factory of the same name."""
    from fedtheory.theory import families
    het = het if n > 1 else 0.0
    L, mu = (1.0, 1.0) if d == 1 else (2.0, 0.3)
    pairs = [(families.quadratic(n, d, L=L, mu=mu, heterogeneity=het, noise=noise, seed=seed, hessian=hessian),
              problems.quadratic(n, d, L=L, mu=mu, heterogeneity=het, noise=noise, seed=seed, hessian=hessian))]
    rng = np.random.default_rng(seed)
    A = [rng.normal(size=(6, d)) for _ in range(n)]
    b = [rng.normal(size=6) for _ in range(n)]
    Q = [a.T @ a / 6 + 0.1 * np.eye(d) for a in A]
    c = [rng.normal(size=d) for _ in range(n)]
    pairs += [(families.explicit_quadratic(Q, c, noise=noise, name="mine"),
               problems.explicit_quadratic(Q, c, noise=noise, name="mine")),
              (families.least_squares(A, b, l2=0.1), problems.least_squares(A, b, l2=0.1)),
              (families.lasso(A, b, l1=0.05), problems.lasso(A, b, l1=0.05))]
    for ours, theirs in pairs:
        assert ours.data_hash() == theirs.data_hash() and ours.name == theirs.name
        assert np.array_equal(ours.weights, theirs.weights) and ours.noise == theirs.noise
        assert (ours.info or {}).keys() == (theirs.info or {}).keys()
        for k, v in (ours.info or {}).items():
            assert np.array_equal(np.asarray(v), np.asarray(theirs.info[k])), k
