r"""NFSGD: networked (decentralised) local SGD, Algorithm 2 of Haddadpour & Mahdavi (2019).

Every client j keeps its own model :math:`x_j` (all start at :math:`x^0`); there is no server
and no sampling. Each round every client runs E local steps from its own model,

.. math:: y_{j,s+1} = y_{j,s} - \eta_{t+s}\, d_j(y_{j,s}),\qquad y_{j,0} = x_j,

then gossips once with its neighbours: :math:`x_j \leftarrow \sum_i W_{ji}\, y_{i,E}` (the
post-step models, docs/papers/localdescent.md, §2.5; Algorithm 2's line 9 as printed exchanges nothing, docs/papers/localdescent.md, A7).
W is row-stochastic and reversible with respect to the client weights q (symmetric and doubly
stochastic for uniform q, Definition 2), so the q-average :math:`\bar x = \sum_j q_j x_j` obeys
the averaging identity (75), :math:`\bar x^{t+1} = \bar x^t - \eta\sum_j q_j d_j`, at every step.
The reported model is :math:`\bar x`. With :math:`W = \mathbf 1 q^\top` (complete graph) it is
LFD with full participation. Communication: one model message per directed edge per gossip.
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import rounds as ops
from .._argcheck import ArrayLike, Interval, NoneOk, Options
from ..exceptions import InvalidParameterError
from ..runs.arrays import as_like, copy, repeat_rows, to_numpy
from ..registry import register
from ..runs.topology import TOPOLOGIES, check_mixing, mixing_matrix, zeta
from .base import Algorithm

State = namedtuple("NFSGDState", "x X W zeta messages")
Messages = namedtuple("NFSGDMessages", "y")
_Params = namedtuple("NFSGDParams", "topology er_p graph_seed")


def local(pk, rd, hp, st, rng):
    """y_{j,s+1} = y_{j,s} - eta_{t+s} d_j(y_{j,s}) from each client's own model y_{j,0} = x_j.

    Parameters
    ----------
    pk, rd, hp, st, rng : Pack, Round, Params, State, numpy.random.Generator
        The arguments of every ``local`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple
        ``(Messages, bad)``, ``bad`` the first failing slot * K + step (-1: none).
    """
    X0 = st.X[rd.clients]
    Y, bad = ops.local_sgd(pk, rd, X0, X0, 1.0, 0.0, ops.empty2())
    return Messages(Y), bad


def server(pk, rd, hp, st, m):
    """Gossip x_j <- sum_i W_ji y_{i,E}; the reported model xbar = sum_j q_j x_j.

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    X = st.W @ m.y
    return State(rd.cw @ X, X, st.W, st.zeta, st.messages)      # full participation: rd.cw holds every q_j


def comm(pk, rd, hp, st, n_participants, down, up):
    """(down, up): one model message per directed edge of the graph, each way.

    Parameters
    ----------
    pk, rd, hp, st : Pack, Round, Params, State
        The arguments of every ``comm`` rule (:mod:`fedtheory._kernels.rounds`), the state after the round.
    n_participants, down, up : int
        The distinct participants, and the d-vectors each sends and receives.

    Returns
    -------
    tuple of int
        ``(vectors down, vectors up)`` of the round.
    """
    return st.messages, st.messages


#: The hyperparameters that build the graph (a given W replaces them).
_GRAPH = ("topology", "er_p", "graph_seed")


def _refuse_graph_with_W(graph):
    """A W replaces the graph: graph parameters given with it would be ignored."""
    if graph:
        raise InvalidParameterError(f"NFSGD: the 'W' parameter is the mixing matrix itself, so the graph "
                                    f"parameters must be left out; got {graph} with W. Pass either W or "
                                    f"topology (er_p, graph_seed).")


@register
@dataclass(frozen=True)
class NFSGD(Algorithm):
    r"""NFSGD: local SGD on every client, then one gossip step with a mixing matrix W.

    Parameters
    ----------
    W : array (n, n), optional
        Mixing matrix; checked to be non-negative, row-stochastic, reversible with respect to
        the client weights (symmetric and doubly stochastic for uniform weights) and with
        zeta < 1. None builds it from ``topology``; with a W, ``topology``, ``er_p`` and
        ``graph_seed`` must stay at their defaults (a graph passed with W is refused, not ignored).
    topology : {"ring", "complete", "torus", "erdos_renyi"}, default "ring"
        Graph with Metropolis-Hastings weights (see :mod:`fedtheory.runs.topology`).
    er_p : float, default 0.5
        Edge probability of the Erdos-Renyi graph.
    graph_seed : int, default 0
        Seed of the Erdos-Renyi graph.

    Notes
    -----
    ``result.state["zeta"]`` holds the mixing rate and ``state["X"]`` the client models;
    the history's ``consensus_sq`` column is :math:`\sum_j q_j\|x_j - \bar x\|^2`.

    References
    ----------
    F. Haddadpour, M. Mahdavi, "On the convergence of local descent methods in federated
    learning", 2019, Algorithm 2 and Definition 2; docs/papers/localdescent.md, §2.5.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(8, 3, shared_minimizer=True, seed=0)
    >>> res = ft.run(p, "nfsgd", rounds=300, local_steps=4, lr=0.1, topology="ring")
    >>> round(res.state["zeta"], 4), bool(res.history.consensus_sq.iloc[-1] < 1e-20)
    (0.8047, True)
    """

    W: object = None
    topology: str = "ring"
    er_p: float = 0.5
    graph_seed: int = 0

    name: ClassVar[str] = "nfsgd"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    released_options: ClassVar[tuple] = ("weight_decay", "clip_norm")
    reference: ClassVar[str] = "Haddadpour & Mahdavi 2019, Algorithm 2; docs/papers/localdescent.md, §2.5"
    constraints: ClassVar[dict] = {"W": [NoneOk(), ArrayLike("a mixing matrix")],
                                   "topology": [Options(*TOPOLOGIES)],
                                   "er_p": [Interval(float, 0, 1, "right")],
                                   "graph_seed": [Interval(int, 0, None)]}
    stateful_clients: ClassVar[bool] = True
    full_participation_only: ClassVar[bool] = True
    test_params: ClassVar[dict] = {"lr": 0.1}
    reductions: ClassVar[list] = [({"topology": "complete"}, "lfd", {})]

    @classmethod
    def create(cls, run_parameters=(), **kwargs):
        """As :meth:`Algorithm.create`, refusing a graph passed together with ``W`` (even the default
        ``topology="ring"``, which would be ignored)."""
        if kwargs.get("W") is not None:
            _refuse_graph_with_W({k: kwargs[k] for k in _GRAPH if k in kwargs})
        return super().create(run_parameters, **kwargs)

    def mixing(self, problem):
        """The (checked) mixing matrix for ``problem``'s clients and weights."""
        q = to_numpy(problem.weights)          # a tensor on the torch backend's device
        if self.W is None:
            return mixing_matrix(self.topology, problem.n_clients, q, self.er_p, self.graph_seed)
        defaults = type(self).hyperparameters()          # built directly, not through create
        _refuse_graph_with_W({k: getattr(self, k) for k in _GRAPH if getattr(self, k) != defaults[k]})
        try:
            return check_mixing(self.W, q, "W")
        except ValueError as e:
            raise InvalidParameterError(str(e).replace("The 'W' parameter", "The 'W' parameter of NFSGD")) from None

    def init(self, problem, x0):
        W = self.mixing(problem)
        off = W.copy()
        np.fill_diagonal(off, 0.0)
        return {"x": copy(x0), "X": repeat_rows(x0, problem.n_clients), "W": as_like(W, x0),
                "zeta": zeta(W, to_numpy(problem.weights)), "messages": int(np.count_nonzero(off))}

    def compiled_params(self):
        """The hyperparameters as the compiled rules read them (the rules use none of them: the mixing
        matrix is in the state). ``W`` (an array or None) is left out; ``topology`` is its index in
        ``("ring", "complete", "torus", "erdos_renyi")``: 0 ring, 1 complete, 2 torus, 3 erdos_renyi."""
        return _Params(TOPOLOGIES.index(self.topology), float(self.er_p), int(self.graph_seed))

    def local_round(self, state, ctx):         # the torch backend's glue
        Y, fail = ctx.local_sgd(state["X"][ctx.clients])
        return {"y": Y, "fail": fail}

    def local_round_reference(self, state, ctx):
        Y = np.empty((ctx.S, ctx.problem.dim))
        for s in range(ctx.S):
            y = state["X"][ctx.clients[s]].copy()          # each client from its own model
            ctx.record("local", s, 0, y)
            for k in range(ctx.K):
                y = y - ctx.lrs[k] * ctx.released_step(ctx.grad(s, k, y), y)
                ctx.record("local", s, k + 1, y)
            Y[s] = y
        return {"y": Y}

    def history_extras(self, state, problem):
        D = state["X"] - state["x"]
        return {"consensus_sq": float(problem.weights @ np.sum(D * D, axis=1))}
