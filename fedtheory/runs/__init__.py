"""The run engine: :func:`fedtheory.run` and what a run is made of.

- :mod:`.runner`: ``run``, a plan and an executor;
- :mod:`.plan`: the plan (the problem, the algorithm, the sampling, the streams, the step sizes and
  the evaluations, checked and resolved once);
- :mod:`.fused` and :mod:`.per_round`: the executors (compiled segments of rounds; one round at a
  time in Python for the python and torch backends);
- :mod:`.log`: what a run records (state, counters, history rows, status), and
  :mod:`.result`: :class:`~.result.RunResult`;
- :mod:`.participants`: who takes part in each round (full, uniform, with replacement, Bernoulli,
  a given schedule), and the compact record of the draws;
- :mod:`.schedules`: step-size schedules over rounds and local steps;
- :mod:`.metrics`: the history's columns against a reference optimum;
- :mod:`.trace`: per-round, per-client local sequences a theorem check reads;
- :mod:`.topology`: mixing matrices of networked local SGD;
- :mod:`.arrays`: NumPy / torch views that the backends share.

May import the library's foundations (``fedtheory.problem``, ``fedtheory.registry``,
``fedtheory.constants``, ``fedtheory.exceptions``, ``fedtheory._argcheck``), the algorithms, the
components, the kernels, the backends and the ground truth's record (a run's ``reference``); never
the reporting layer (:mod:`fedtheory.reporting`), the theory, or the top-level ``problems`` and
``validation`` packages.
"""
