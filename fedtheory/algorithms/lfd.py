r"""Local federated descent with device sampling, LFD(E, S, q) (Haddadpour & Mahdavi 2019).

Algorithm 1 of the paper in the canonical round form of docs/papers/localdescent.md, §2.1. Each
round draws S clients i.i.d. from q *with replacement* (a multiset P_r), every drawn client
runs E local steps from the broadcast model,

.. math:: y_{j,s+1} = y_{j,s} - \eta_{t+s}\, d_j(y_{j,s}),

with :math:`d_j = \nabla f_j` (LFGD, eq. 8; ``batch_size=None``) or a minibatch gradient
(LFSGD, eq. 12), and the server averages with weight 1/S per draw:

.. math:: x^{r+1} = \sum_{j} \frac{\mathrm{mult}_j(P_r)}{S}\, y_{j,E}.

``literal_loop=True`` follows the single loop of Algorithm 1 read as "communicate when E
divides t" (docs/papers/localdescent.md, A1): one synchronous step at t = 0, then periods [1, E], [E+1, 2E], ...; the
global step counter of a schedule follows that loop.
``replicate_duplicates=False`` (default, the physical meaning): a client drawn twice runs
once and gets weight 2/S; ``True``: each draw runs with its own minibatches (the independent
replicas Lemma E.2 assumes). ``clients_per_round=None`` is the paper's "K = p" read as full
participation with weights q (docs/papers/localdescent.md, A4). The step-size schedule of Theorem 4.2,
eta_t = 4/(mu (t + a)) with t the global step counter, is passed as a callable ``lr``.
"""
from dataclasses import dataclass
from typing import ClassVar

from .._argcheck import ArrayLike, Bool, Interval, NoneOk
from ..registry import register
from .fedavg import FedAvg

@register
@dataclass(frozen=True)
class LFD(FedAvg):
    """LFD: local GD/SGD with device sampling by q, with replacement (LFGD / LFSGD).

    Parameters
    ----------
    server_lr : float, default 1
        Global step size (1 in the paper).
    q : array of shape (n,), optional
        Sampling probabilities, which are also the objective weights (the paper's double
        role of q): they must equal ``problem.weights`` (build the problem with
        ``weights=q``). None uses the problem's weights.
    replicate_duplicates : bool, default False
        Whether a client drawn several times runs independent replicas.
    literal_loop : bool, default False
        Round 0 has a single local step (Algorithm 1's literal loop, docs/papers/localdescent.md, §2.1 and A1).

    References
    ----------
    Haddadpour & Mahdavi, "On the convergence of local descent methods in federated
    learning", 2019, Algorithm 1, eqs. (8) and (12); docs/papers/localdescent.md, §2.1-§2.3.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(6, 3, seed=0)
    >>> ft.run(p, "lfd", rounds=3, local_steps=4, lr=0.1, clients_per_round=3).status
    'max_rounds'
    """

    q: object = None
    replicate_duplicates: bool = False
    literal_loop: bool = False

    name: ClassVar[str] = "lfd"
    round_coin: ClassVar[bool] = False
    reference: ClassVar[str] = "Haddadpour & Mahdavi 2019, Alg. 1; docs/papers/localdescent.md, §2.1"
    constraints: ClassVar[dict] = {"q": [NoneOk(), ArrayLike("an array of probabilities")],
                                   "replicate_duplicates": [Bool()],
                                   "literal_loop": [Bool()],
                                   "server_lr": [Interval(float, 0, None, "neither")]}
    default_sampling: ClassVar[str] = "with_replacement"
    test_params: ClassVar[dict] = {"lr": 0.1}
    # same local rule and server as FedAvg; only the default sampling differs
    reductions: ClassVar[list] = [({"sampling": "uniform"}, "fedavg", {})]

    def compiled_params(self):
        """The hyperparameters as the compiled rules read them: ``server_lr`` only. ``q`` (an array
        or None) is the sampler's, checked against the problem's weights before the run;
        ``replicate_duplicates`` and ``literal_loop`` act through the sampler and
        :meth:`round_schedule`, in Python. The round itself is FedAvg's: LFD runs FedAvg's compiled
        rules (``fedtheory.algorithms.fedavg``)."""
        return FedAvg.params_class()(float(self.server_lr))

    def round_schedule(self, rnd, local_steps):
        """Canonical rounds of E steps; the literal loop runs 1 step in round 0 (t = 0) and
        then E steps from t = 1 + (r - 1) E."""
        if not self.literal_loop:
            return local_steps, rnd * local_steps
        return (1, 0) if rnd == 0 else (local_steps, 1 + (rnd - 1) * local_steps)
