"""Compiled rounds: the fused path's draws, records and generated drivers.

The bit-for-bit agreement of the fused and per-round paths of every algorithm is the common
check ``check_fused_matches_per_round`` (tests/test_common.py); here: the pieces it rests on.
"""
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from numba import njit

import fedtheory as ft
import problems
from fedtheory._kernels import rounds as rk
from fedtheory._kernels import sampling as smp
from fedtheory.runs.participants import Participants
from fedtheory.registry import get_algorithm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_builtin_algorithm_has_compiled_rules():
    missing = [name for name in ft.algorithms() if get_algorithm(name).__module__.startswith("fedtheory.")
               and get_algorithm(name).rules_module() is None]
    assert missing == [], f"built-in algorithms without compiled rules (per-round path only): {missing}"


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 12), S=st.integers(1, 12), seed=st.integers(0, 2 ** 32 - 1),
       raw=st.lists(st.floats(0.01, 10.0), min_size=12, max_size=12))
def test_with_replacement_draw_is_numpys_choice(n, S, seed, raw):
    """The compiled draw with replacement is NumPy's ``Generator.choice(n, S, p=q)``, sorted, and
    leaves the stream where NumPy leaves it."""
    q = np.array(raw[:n]) / np.sum(raw[:n])
    cdf = np.cumsum(q)
    cdf /= cdf[-1]
    a, b = np.random.default_rng(seed), np.random.default_rng(seed)
    got = smp.draw_participants(smp.WITH_REPLACEMENT, a, n, S, cdf, 0.0)
    assert got.tolist() == np.sort(b.choice(n, S, replace=True, p=q)).tolist()
    assert a.random() == b.random()


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 9), S=st.integers(1, 9), seed=st.integers(0, 2 ** 32 - 1), part=st.floats(0.0, 1.0))
def test_draws_follow_the_documented_streams(n, S, seed, part):
    """Uniform: Floyd's S-subset from S uniforms, sorted; Bernoulli: one uniform per client."""
    S = min(S, n)
    a, b = np.random.default_rng(seed), np.random.default_rng(seed)
    got = smp.draw_participants(smp.UNIFORM, a, n, S, np.zeros(1), 0.0)
    u = b.random(S)
    assert len(set(got.tolist())) == S and got.tolist() == sorted(got.tolist()) and 0 <= got.min()
    assert got.max() < n
    assert got.tolist() == smp.sample_clients(u, n, np.empty(S, dtype=np.int64)).tolist()
    got = smp.draw_participants(smp.BERNOULLI, a, n, S, np.zeros(1), part)
    assert got.tolist() == np.flatnonzero(b.random(n) < part).tolist()
    assert a.random() == b.random()


@settings(max_examples=60, deadline=None)
@given(drawn=st.lists(st.integers(0, 6), min_size=1, max_size=12))
def test_with_replacement_weights_merge_duplicates(drawn):
    """A client drawn m times of S is one participant with weight m / S (``np.unique`` with counts),
    and the number of distinct clients (the uplinks) is that of ``np.unique``; in any draw order."""
    S = len(drawn)
    a = np.array(drawn, dtype=np.int64)
    clients, weights = smp.weigh(smp.WITH_REPLACEMENT, np.sort(a), np.full(7, 1 / 7), S, False)
    u, counts = np.unique(a, return_counts=True)
    assert clients.tolist() == u.tolist() and weights.tolist() == (counts / S).tolist()
    assert smp.count_distinct(a) == len(u)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 7), data=st.data())
def test_participants_extend_records_what_append_records(n, data):
    rounds = data.draw(st.lists(st.one_of(st.just(list(range(n))),
                                          st.lists(st.integers(0, n - 1), max_size=n + 2)), max_size=9))
    k = data.draw(st.integers(0, len(rounds)))
    one, bulk = Participants(n), Participants(n)
    for c in rounds:
        one.append(np.array(c, dtype=np.int64))
    for c in rounds[:k]:
        bulk.append(np.array(c, dtype=np.int64))
    rest = rounds[k:]
    flat = np.array([i for c in rest for i in c], dtype=np.int64)
    bulk.extend(flat, [len(c) for c in rest])
    assert [a.tolist() for a in one] == [b.tolist() for b in bulk]
    assert one.counts().tolist() == bulk.counts().tolist()
    if all(c == list(range(n)) for c in rest):          # full participation, which the caller says
        told = Participants(n)
        for c in rounds[:k]:
            told.append(np.array(c, dtype=np.int64))
        told.extend(flat, [len(c) for c in rest], every=True)
        assert [a.tolist() for a in one] == [b.tolist() for b in told] and told.nbytes == bulk.nbytes
        assert one.counts().tolist() == told.counts().tolist()


def test_fused_path_is_taken_only_without_per_round_python():
    from fedtheory.runs.plan import Plan
    p = problems.quadratic(4, 3, seed=0)

    def plan(**kw):
        args = dict(rounds=3, local_steps=2, lr=0.1, clients_per_round=None, batch_size=None, seed=0, x0=None,
                    record_iterates=False, backend="numba", device=None, eval_every=None, callback=None,
                    sampling=None, q=None, participation=None, batch_replacement=False, reference=None, tol=None,
                    trace=None, trace_max_mb=1024.0, trace_rounds=None, hyperparameters={})
        args.update(kw)
        return Plan(p, "fedavg", **args)

    assert plan().fused and plan(record_iterates=True).fused and plan(tol=1e-9).fused and plan(trace=True).fused
    assert plan(trace=True, trace_rounds=(1,)).fused
    assert not plan(callback=lambda r, x: False).fused
    assert not plan(backend="python").fused


def _run_py(code, env):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT, **env}, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.mark.slow          # the same claims in the default run: test_faults.py::test_damaged_driver_cache_is_recompiled
def test_driver_is_cached_on_disk_and_loaded_by_a_new_process(tmp_path):
    """A second process loads the generated driver's compiled segment from the on-disk cache."""
    # the generated driver (and its Numba cache beside it) in a fresh directory; the library's kernels
    # load from the suite's cache (a private NUMBA_CACHE_DIR recompiled all of them: 35 s)
    env = {"FEDTHEORY_DRIVER_DIR": str(tmp_path / "drivers")}
    code = """
        import fedtheory as ft, problems
        from fedtheory._kernels.drivers import driver
        p = problems.quadratic(4, 3, seed=0)
        ft.run(p, "fedavg", rounds=5, local_steps=2, lr=0.1)
        seg = driver("fedtheory.algorithms.fedavg").segment
        print(sum(seg.stats.cache_hits.values()), sum(seg.stats.cache_misses.values()))
    """
    first = [int(v) for v in _run_py(code, env).split()]
    second = [int(v) for v in _run_py(code, env).split()]
    files = sorted(f.name for f in (tmp_path / "drivers").iterdir() if f.suffix == ".py")
    assert len(files) == 1 and files[0].startswith("fedtheory_driver_fedtheory_algorithms_fedavg_")
    assert first[0] == 0 and first[1] >= 1, f"first process: hits/misses {first}"      # compiled and stored
    assert second[0] >= 1 and second[1] == 0, f"second process did not load the cached segment: {second}"


RULES = '''
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from fedtheory._kernels import rounds as ops
from fedtheory.algorithms.base import Algorithm
from fedtheory.registry import register

State = namedtuple("DampedState", "x")
Messages = namedtuple("DampedMessages", "y")


def local(pk, rd, hp, st, rng):
    x = ops.row(st.x)
    Y, bad = ops.local_sgd(pk, rd, x, x, 1.0, 0.0, ops.empty2())
    return Messages(Y), bad


def server(pk, rd, hp, st, m):
    return State(st.x + FACTOR * (rd.weights @ m.y - rd.weights.sum() * st.x))


@register
@dataclass(frozen=True)
class Damped(Algorithm):
    name: ClassVar[str] = "user_damped"
    constraints: ClassVar[dict] = {}
    compiled_rules: ClassVar[bool] = True

    def local_round_reference(self, state, ctx):
        x = state["x"]
        Y = np.empty((ctx.S, x.shape[0]))
        for s in range(ctx.S):
            y = x.copy()
            for k in range(ctx.K):
                y = y - ctx.lrs[k] * ctx.grad(s, k, y)
            Y[s] = y
        return {"y": Y}
'''


def test_driver_follows_an_edit_of_the_rules(tmp_path):
    """Numba's cache does not track callees: the driver's name carries the rules' source hash, so an
    edited server rule takes effect in the next process (not a stale cached segment)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    env = {"FEDTHEORY_DRIVER_DIR": str(tmp_path / "drivers"),       # (the library's kernels: the suite's cache)
           "PYTHONPATH": f"{ROOT}{os.pathsep}{pkg}"}
    code = """
        import numpy as np, fedtheory as ft, problems, user_damped
        p = problems.quadratic(4, 3, seed=0)
        fused = ft.run(p, "user_damped", rounds=4, local_steps=2, lr=0.1)
        twin = ft.run(p, "user_damped", rounds=4, local_steps=2, lr=0.1, backend="python")
        assert np.allclose(fused.x, twin.x, rtol=0, atol=1e-12)
        print(repr(float(fused.x[0])))
    """
    outs = []
    for factor in ("0.5", "0.25"):
        (pkg / "user_damped.py").write_text(RULES.replace("FACTOR", factor))
        out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                             cwd=tmp_path, env={**os.environ, **env}, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        outs.append(float(out.stdout.split()[-1]))
    assert outs[0] != outs[1]
    assert len([f for f in (tmp_path / "drivers").iterdir() if f.suffix == ".py"]) == 2


def test_a_module_imported_again_with_the_same_code_gets_a_driver_of_its_own(tmp_path, monkeypatch):
    """The same rules file imported a second time under its name (dropped from ``sys.modules``, as two
    tests or two notebook sessions do) has new rules and a new ``State`` class with the same code: its
    runs compile against them. The driver of the first import was reused, and Numba could not unify its
    server's old ``State`` with the new one ("Cannot unify DampedState(...) and DampedState(...)")."""
    import importlib
    from fedtheory.registry import ALGORITHMS
    saved = dict(ALGORITHMS)
    p = problems.quadratic(4, 3, seed=0)
    runs = []
    try:
        for where in ("first", "second"):
            d = tmp_path / where
            d.mkdir()
            (d / "user_damped_again.py").write_text(RULES.replace("FACTOR", "0.5").replace("user_damped",
                                                                                           "user_damped_again"))
            monkeypatch.syspath_prepend(str(d))
            sys.modules.pop("user_damped_again", None)
            importlib.import_module("user_damped_again")
            runs.append(ft.run(p, "user_damped_again", rounds=4, local_steps=2, lr=0.1).x)
            # the driver binds this import's rules (an old driver's server returned the old State; with
            # an empty cache the next compilation of its rounds could not unify the two)
            from fedtheory._kernels.drivers import driver
            assert driver("user_damped_again")._rules is sys.modules["user_damped_again"]
    finally:
        ALGORITHMS.clear()
        ALGORITHMS.update(saved)
        sys.modules.pop("user_damped_again", None)
    assert np.array_equal(runs[0], runs[1])


SHARED_RULES_MODULE = (RULES.replace("FACTOR", "0.5").replace("user_damped", "shared_damped") + """

@register
@dataclass(frozen=True)
class FedAvgOtherDefault(FedAvg):
    # a built-in's subclass that changes no round, in a file whose rules are another class's
    name: ClassVar[str] = "shared_fedavg"


@register
@dataclass(frozen=True)
class ThirdStep(Damped):
    # a subclass that changes the server update of a compiled class (with its per-round form)
    name: ClassVar[str] = "shared_third"

    def local_round(self, state, ctx):
        Y, fail = ctx.local_sgd(state["x"])
        return {"y": Y, "fail": fail}

    def server_update(self, state, ctx, messages):
        x = state["x"]
        return {"x": x + (1 / 3) * (ctx.weights @ messages["y"] - ctx.weights.sum() * x)}


@register
@dataclass(frozen=True)
class ThirdStepNoGlue(Damped):
    name: ClassVar[str] = "shared_third_noglue"

    def server_update(self, state, ctx, messages):
        return state
""").replace("from fedtheory.registry import register", "from fedtheory.registry import register\n"
             "from fedtheory.algorithms.fedavg import FedAvg")


@pytest.mark.parametrize("declared", [False, True])
def test_rules_shared_by_several_classes_run_only_where_bound(tmp_path, monkeypatch, declared):
    """A file with compiled rules and several algorithm classes: the rules run only for the class that
    declares ``compiled_rules = True`` (never for a built-in's subclass there, nor for a subclass
    that changes the server update); undeclared, they run for none, and a class without a
    round-by-round form says what to declare."""
    from fedtheory.registry import ALGORITHMS
    name = f"shared_rules_{int(declared)}"
    text = SHARED_RULES_MODULE.replace("shared_", f"shared{int(declared)}_")
    if not declared:
        text = text.replace("    compiled_rules: ClassVar[bool] = True\n", "", 1)
    (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    mod = importlib.import_module(name)
    tag = f"shared{int(declared)}_"
    p = problems.quadratic(6, 4, heterogeneity=1.0, seed=0)
    kw = dict(rounds=5, local_steps=2, lr=0.1, record_iterates=True, clients_per_round=3, seed=3)
    try:
        assert mod.FedAvgOtherDefault.rules_module() == "fedtheory.algorithms.fedavg"
        assert np.array_equal(ft.run(p, tag + "fedavg", **kw).iterates, ft.run(p, "fedavg", **kw).iterates)
        assert mod.ThirdStep.rules_module() is None
        third = ft.run(p, tag + "third", **kw)
        assert np.allclose(third.iterates, ft.run(p, tag + "third", backend="python", **kw).iterates,
                           rtol=0, atol=1e-12)
        why = "changes server_update of Damped" if declared else "bound to none of the algorithm classes"
        with pytest.raises(NotImplementedError, match=why):
            ft.run(p, tag + "third_noglue", **kw)
        if declared:
            assert mod.Damped.rules_module() == name
            fused = ft.run(p, tag + "damped", **kw)
            twin = ft.run(p, tag + "damped", backend="python", **kw)
            assert np.allclose(fused.iterates, twin.iterates, rtol=0, atol=1e-12)
            assert not np.allclose(fused.iterates, third.iterates)
        else:
            assert mod.Damped.rules_module() is None
            with pytest.raises(NotImplementedError, match="bound to none of the algorithm classes.*compiled_rules"):
                ft.run(p, tag + "damped", **kw)
    finally:
        for k in [k for k in ALGORITHMS if k.startswith(tag)]:
            ALGORITHMS.pop(k)
        sys.modules.pop(name, None)


@pytest.mark.parametrize("constraints", [{}, {"step": []}])
def test_a_hyperparameter_without_constraints_is_named(constraints):
    """An algorithm that declares a hyperparameter but no constraints for it (none, or an empty list
    that would accept nothing) is told which one and what to write, not a KeyError."""
    from dataclasses import dataclass
    from typing import ClassVar

    from fedtheory.algorithms.base import Algorithm

    @dataclass(frozen=True)
    class Unconstrained(Algorithm):
        step: float = 0.5
        name: ClassVar[str] = "unconstrained"

    Unconstrained.constraints = constraints
    with pytest.raises(TypeError, match="declares the hyperparameter 'step' without constraints"):
        Unconstrained()


def test_a_mixin_keeps_the_rules_unless_it_changes_the_round():
    from dataclasses import dataclass
    from typing import ClassVar

    from fedtheory.algorithms.fedavg import FedAvg

    class Describes:
        def summary(self):
            return self.name

    class OwnServer:
        def server_update(self, state, ctx, messages):
            return state

    @dataclass(frozen=True)
    class Kept(Describes, FedAvg):
        name: ClassVar[str] = "mixin_kept"

    @dataclass(frozen=True)
    class Changed(OwnServer, FedAvg):
        name: ClassVar[str] = "mixin_changed"

    assert Kept.rules_module() == "fedtheory.algorithms.fedavg"
    assert Changed.rules_module() is None


def test_a_float_hyperparameter_with_an_int_default_keeps_its_value():
    """``server_lr: float = 1`` (an int default): the compiled rules read 0.5 as 0.5, by the field's
    type, not int(0.5) = 0 by the default's."""
    from dataclasses import dataclass
    from typing import ClassVar

    from fedtheory.algorithms.fedavg import FedAvg
    from fedtheory.registry import ALGORITHMS, register

    @register
    @dataclass(frozen=True)
    class IntDefault(FedAvg):
        server_lr: float = 1
        name: ClassVar[str] = "int_default_avg"

    try:
        assert IntDefault(server_lr=0.5).compiled_params().server_lr == 0.5
        p = problems.quadratic(5, 3, seed=0)
        kw = dict(rounds=3, local_steps=2, lr=0.1, server_lr=0.5)
        assert np.array_equal(ft.run(p, "int_default_avg", **kw).x, ft.run(p, "fedavg", **kw).x)
    finally:
        ALGORITHMS.pop("int_default_avg", None)


def test_compiled_rules_naming_a_module_without_rules_is_refused():
    from dataclasses import dataclass
    from typing import ClassVar

    from fedtheory.algorithms.base import Algorithm

    @dataclass(frozen=True)
    class Pointing(Algorithm):
        name: ClassVar[str] = "pointing"
        compiled_rules: ClassVar[str] = "fedtheory.algorithms.base"

    with pytest.raises(TypeError, match="names the module 'fedtheory.algorithms.base', which does not define"):
        Pointing.rules_module()

    @dataclass(frozen=True)
    class Wrong(Algorithm):
        name: ClassVar[str] = "wrong"
        compiled_rules: ClassVar[int] = 3

    with pytest.raises(TypeError, match="must be True, False, None or a module's dotted name; got 3"):
        Wrong.rules_module()

    @dataclass(frozen=True)
    class Typo(Algorithm):
        name: ClassVar[str] = "typo"
        compiled_rules: ClassVar[str] = "fedtheory.algorithms.fedavgg"

    with pytest.raises(TypeError, match="compiled_rules names the module 'fedtheory.algorithms.fedavgg', which "
                                        "cannot be imported"):
        Typo.rules_module()


def test_an_opt_out_without_its_round_and_a_state_unlike_init_are_explained():
    """``compiled_rules = False`` without a server update of its own, and rules whose State fields
    are not the init state's keys: errors that name the cause, not an empty list or a KeyError."""
    from dataclasses import dataclass
    from typing import ClassVar

    from fedtheory.algorithms.fedavg import FedAvg
    from fedtheory.registry import ALGORITHMS, register

    @register
    @dataclass(frozen=True)
    class OptOut(FedAvg):
        name: ClassVar[str] = "opt_out_no_server"
        compiled_rules: ClassVar[bool] = False

    @register
    @dataclass(frozen=True)
    class OtherState(FedAvg):
        name: ClassVar[str] = "other_state_keys"
        compiled_rules: ClassVar[str] = "fedtheory.algorithms.fedavg"     # FedAvg's rules, with another init

        def init(self, problem, x0):
            return {"x": np.array(x0, dtype=float), "mom": np.zeros(len(x0))}

    p = problems.quadratic(4, 3, seed=0)
    try:
        with pytest.raises(NotImplementedError, match="OptOut declares compiled_rules = False .* needs server_update"):
            ft.run(p, "opt_out_no_server", rounds=2, local_steps=2, lr=0.1)
        assert OtherState.rules_module() == "fedtheory.algorithms.fedavg"
        for backend in ("numba", "python"):
            with pytest.raises(ValueError, match=r"State of its compiled rules .* has the fields \['x'\], its init "
                                                 r"state the keys \['x', 'mom'\] \(not in State: \['mom'\]"):
                ft.run(p, "other_state_keys", rounds=2, local_steps=2, lr=0.1, backend=backend)
    finally:
        ALGORITHMS.pop("opt_out_no_server", None)
        ALGORITHMS.pop("other_state_keys", None)


@pytest.mark.parametrize("damage", ["not utf-8", "truncated", "syntax error", "empty"])
def test_a_damaged_driver_file_is_written_anew(tmp_path, monkeypatch, damage):
    """A generated driver file damaged on disk (bytes that are not UTF-8 included) is written anew
    from the template when the driver is next needed, and loads."""
    from fedtheory._kernels import drivers
    name = "damaged_driver_rules_" + "".join(c for c in damage if c.isalnum())
    (tmp_path / f"{name}.py").write_text(RULES.replace("FACTOR", "0.5").replace("user_damped", name))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("FEDTHEORY_DRIVER_DIR", str(tmp_path / "drivers"))
    import importlib
    importlib.import_module(name)
    try:
        first = drivers.driver(name)
        path = Path(first.__file__)
        good = path.read_bytes()
        drivers._DRIVERS.clear()                 # as a new process: the driver is looked up on disk
        path.write_bytes({"not utf-8": good[:200] + b"\xff\xfe\x00\x9c" + good[204:], "truncated": good[:len(good) // 2],
                          "syntax error": good + b"\ndef (:\n", "empty": b""}[damage])
        again = drivers.driver(name)
        assert path.read_bytes() == good and callable(again.segment)
    finally:
        from fedtheory.registry import ALGORITHMS
        ALGORITHMS.pop(name, None)
        sys.modules.pop(name, None)


#: RULES with a hyperparameter ``step`` (the fields and constraints filled in per version)
RELOADED = (RULES.replace("import Algorithm\n", "import Algorithm, Interval\n")
            .replace("FACTOR", "hp.step")
            .replace('class Damped(Algorithm):\n    name: ClassVar[str] = "user_damped"\n'
                     '    constraints: ClassVar[dict] = {}',
                     'class Damped(Algorithm):\n    FIELDS\n    name: ClassVar[str] = "reloaded_alg"\n'
                     '    constraints: ClassVar[dict] = CONSTRAINTS'))
assert "FIELDS" in RELOADED and "Interval\n" in RELOADED


def test_a_reloaded_algorithm_with_other_hyperparameters_runs_them(tmp_path, monkeypatch):
    """``importlib.reload`` of an algorithm's module whose hyperparameters changed (reordered, one
    added): the class registers again and its compiled rules read the new fields by name."""
    import importlib

    from fedtheory.registry import ALGORITHMS
    versions = [("step: float = 0.5\n    other: float = 0.2", ["step", "other"]),
                ("other: float = 0.2\n    step: float = 0.5", ["other", "step"]),
                ("other: float = 0.2\n    extra: int = 3\n    step: float = 0.5", ["other", "extra", "step"])]
    p = problems.quadratic(6, 3, seed=1)
    kw = dict(rounds=4, local_steps=2, lr=0.1, step=0.25, other=0.75)
    monkeypatch.syspath_prepend(str(tmp_path))
    src = tmp_path / "reloaded_rules.py"
    xs = []
    try:
        for fields, names in versions:
            cons = "{" + ", ".join(f"{n!r}: [Interval({'int' if n == 'extra' else 'float'}, 0, None, 'left')]"
                                   for n in names) + "}"
            src.write_text(RELOADED.replace("FIELDS", fields).replace("CONSTRAINTS", cons))
            os.utime(src, (len(xs) + 1, len(xs) + 1))     # whole seconds apart: Python's bytecode cache
                                                          # keeps a file's mtime in seconds (versions 1 and 2
                                                          # have the same size)
            mod = importlib.reload(sys.modules["reloaded_rules"]) if xs else importlib.import_module("reloaded_rules")
            assert ALGORITHMS["reloaded_alg"] is mod.Damped and mod.Damped.params_class()._fields == tuple(names)
            fused = ft.run(p, "reloaded_alg", **kw)
            assert np.allclose(fused.x, ft.run(p, "reloaded_alg", backend="python", **kw).x, rtol=0, atol=1e-12)
            xs.append(fused.x)
        assert all(np.array_equal(x, xs[0]) for x in xs)        # step = 0.25 in every version
        assert not np.array_equal(xs[0], ft.run(p, "reloaded_alg", **{**kw, "step": 0.75, "other": 0.25}).x)
    finally:
        ALGORITHMS.pop("reloaded_alg", None)
        sys.modules.pop("reloaded_rules", None)


def test_hyperparameter_types_unpickle_in_a_process_without_their_module():
    """The hyperparameter tuple of an algorithm defined where no other process can import it (a
    script's ``__main__``, a notebook) unpickles in any process: Numba's cache index of the shared
    driver holds it, and one entry that does not unpickle made every other process discard that
    driver's whole cache and recompile."""
    import pickle
    from dataclasses import dataclass
    from typing import ClassVar

    from fedtheory.algorithms.base import Interval
    from fedtheory.algorithms.fedavg import FedAvg

    @dataclass(frozen=True)
    class SlowAvg(FedAvg):
        server_lr: float = 0.5
        tilt: float = 0.0
        name: ClassVar[str] = "slow_avg_unregistered"
        constraints: ClassVar[dict] = {"server_lr": [Interval(float, 0, None, "neither")],
                                       "tilt": [Interval(float, None, None, "neither")]}

    SlowAvg.__module__ = "a_module_no_other_process_has"
    blob = pickle.dumps((SlowAvg.params_class(), SlowAvg().compiled_params()))
    out = _run_py(f"""
        import pickle
        cls, hp = pickle.loads({blob!r})
        print(cls._fields, hp)
    """, {})
    assert out.split("\n")[0] == "('server_lr', 'tilt') Params(server_lr=0.5, tilt=0.0)"


def test_rules_defined_in_memory_run_uncached():
    """Rules in a module made in memory (a notebook, exec) run on the fused path, compiled once per
    process without a disk cache, and agree with their NumPy twin; without a trace, no trace code is
    compiled."""
    mod = types.ModuleType("inmemory_damped_rules")
    sys.modules[mod.__name__] = mod
    from fedtheory.registry import ALGORITHMS
    try:
        exec(compile(RULES.replace("FACTOR", "0.5").replace("user_damped", "inmemory_damped"), "<notebook>", "exec"),
             mod.__dict__)
        p = problems.quadratic(4, 3, seed=0)
        kw = dict(rounds=6, local_steps=2, lr=0.1, clients_per_round=2, record_iterates=True)
        fused = ft.run(p, "inmemory_damped", **kw)
        per_round = ft.run(p, "inmemory_damped", callback=lambda r, x: False, **kw)
        twin = ft.run(p, "inmemory_damped", backend="python", **kw)
        assert np.array_equal(fused.iterates, per_round.iterates)
        assert np.allclose(fused.iterates, twin.iterates, rtol=0, atol=1e-12)
        from fedtheory._kernels.drivers import driver
        drv = driver(mod.__name__)
        assert "cache=False" in open(drv.__file__).read()
        # runs without a trace compile rounds without the trace code: its object-mode hooks never compiled
        assert drv.segment.signatures and drv.trace_round.signatures == drv.trace_empty.signatures == []
    finally:
        ALGORITHMS.pop("inmemory_damped", None)
        sys.modules.pop(mod.__name__, None)


@pytest.mark.parametrize("mode", ["full", "uniform", "with_replacement", "bernoulli"])
def test_replayed_schedule_and_counters_on_the_fused_path(mode):
    """The fused path records the participants as drawn; replaying them gives the same run, and its
    counters are those of the per-round path (the common check does this for every algorithm on
    the suite's problems; here on a larger problem and over many segments' worth of rounds)."""
    p = problems.quadratic(12, 4, heterogeneity=1.0, seed=2)
    kw = dict(rounds=300, local_steps=2, lr=0.05, eval_every=37, seed=4)
    if mode != "full":
        kw.update(sampling=mode, clients_per_round=5)
    a = ft.run(p, "scaffold" if mode != "with_replacement" else "fedavg", **kw)
    b = ft.run(p, "scaffold" if mode != "with_replacement" else "fedavg", client_schedule=list(a.sampled),
               callback=lambda r, x: False, **kw)
    assert np.array_equal(a.x, b.x) and a.history.drop(columns="time").equals(b.history.drop(columns="time"))
    assert (a.grad_evals, a.sample_grads, a.comm_up, a.comm_down) == (b.grad_evals, b.sample_grads, b.comm_up,
                                                                       b.comm_down)
    assert a.history["round"].tolist() == sorted(set(list(range(0, 301, 37)) + [300]))


def test_a_subclass_inherits_rules_only_when_it_keeps_the_round():
    """A subclass that changes no round method runs its parent's compiled rules; one that
    overrides a round method (its own server update, say) without rules of its own runs round by
    round with its own methods, never with the parent's rules."""
    from dataclasses import dataclass
    from fedtheory.algorithms.fedavg import FedAvg

    @dataclass(frozen=True)
    class Slower(FedAvg):
        server_lr: float = 0.5

    @dataclass(frozen=True)
    class Halved(FedAvg):
        def server_update(self, state, ctx, messages):
            x = state["x"]
            return {"x": x + 0.5 * (ctx.weights @ messages["y"] - ctx.weights.sum() * x)}

    assert Slower.rules_module() == "fedtheory.algorithms.fedavg" and Halved.rules_module() is None
    from fedtheory.registry import ALGORITHMS
    p = problems.quadratic(5, 3, heterogeneity=1.0, seed=1)
    kw = dict(rounds=5, local_steps=2, lr=0.1, record_iterates=True, clients_per_round=3)
    ref = ft.run(p, "fedavg", server_lr=0.5, **kw)
    for cls, name in ((Slower, "fedavg_slower"), (Halved, "fedavg_halved")):
        cls.name = name
        ALGORITHMS[name] = cls
        try:
            res = ft.run(p, name, **kw)
        finally:
            ALGORITHMS.pop(name)
        assert np.allclose(res.iterates, ref.iterates, rtol=0, atol=1e-14), name


@pytest.mark.parametrize("name", ft.algorithms())
def test_the_types_of_every_rule_signature_pickle_by_name(name):
    """Numba's disk cache keys a compiled function on its argument types, pickled by name: a type
    that pickle cannot find again (a named tuple made in a method) makes every process compile
    the rules anew. The hyperparameter tuple and the rules module's named tuples all round-trip."""
    import pickle
    cls = get_algorithm(name)
    mod = sys.modules[cls.rules_module()]
    types_ = [type(cls.create(**{k: v for k, v in cls.test_params.items() if k in cls.hyperparameters()})
                   .compiled_params()), mod.State, mod.Messages]
    for t in types_:
        assert pickle.loads(pickle.dumps(t)) is t, (name, t)


@pytest.mark.parametrize("name", ["scaffold", "fedspeed", "feddeper"])
def test_a_trace_of_some_rounds_is_recorded_on_the_fused_path(name):
    """trace_rounds: the traced rounds are recorded from inside the fused call; the run, its history,
    participants and trace are those of the per-round run (taken with a callback)."""
    p = problems.quadratic(6, 4, heterogeneity=1.0, seed=0)
    cls = get_algorithm(name)
    kw = dict(cls.test_params, rounds=12, local_steps=3, record_iterates=True, clients_per_round=3, eval_every=2,
              trace=True, trace_rounds=(0, 5, 11))
    a = ft.run(p, name, **kw)
    b = ft.run(p, name, callback=lambda r, x: False, **kw)
    assert np.array_equal(a.iterates, b.iterates)
    assert a.history.drop(columns="time").equals(b.history.drop(columns="time"))
    assert [list(x) for x in a.sampled] == [list(x) for x in b.sampled]
    assert [r.round for r in a.trace.rounds] == [0, 5, 11]
    for x, y in zip(a.trace.rounds, b.trace.rounds):
        assert x.data.keys() == y.data.keys() and x.completed == y.completed
        assert all(np.array_equal(x.data[k], y.data[k], equal_nan=True) for k in x.data)
        assert all(np.array_equal(getattr(x, f), getattr(y, f)) for f in ("x", "clients", "weights", "lrs", "idx"))


def test_a_traced_round_that_diverges_is_recorded_on_the_fused_path():
    """A traced round whose local iterate diverges is recorded (not completed, its paths NaN after the
    failure) on the fused path as on the per-round path, and the run stops there."""
    p = problems.quadratic(6, 4, seed=0)
    kw = dict(rounds=6, local_steps=3, lr=1e100, trace=True)
    a = ft.run(p, "fedavg", **kw)
    b = ft.run(p, "fedavg", callback=lambda r, x: False, **kw)
    assert a.status == b.status == "diverged" and a.message == b.message
    assert len(a.trace.rounds) == len(b.trace.rounds) and not a.trace.rounds[-1].completed
    for x, y in zip(a.trace.rounds, b.trace.rounds):
        assert x.completed == y.completed and x.data.keys() == y.data.keys()
        assert all(np.array_equal(x.data[k], y.data[k], equal_nan=True) for k in x.data)


PATH_TRACES = [("fedavg", "local"), ("lfd", "local"), ("feddeper", ("local", "personal")), ("fedsps", "local"),
               ("pfedfbe", ("local", "prox_point")), ("scaffold", "local")]


@settings(max_examples=30, deadline=None)
@given(which=st.sampled_from(PATH_TRACES), n=st.integers(1, 5), K=st.integers(1, 4), S=st.integers(1, 5),
       sampling=st.sampled_from(["uniform", "with_replacement", "bernoulli"]), B=st.sampled_from([None, 1, 3]),
       noise=st.sampled_from([0.0, 0.1]), some=st.booleans(), diverge=st.booleans(), seed=st.integers(0, 3))
def test_a_trace_of_local_paths_written_by_the_compiled_rounds_is_the_handed_over_one(
        which, n, K, S, sampling, B, noise, some, diverge, seed):
    """A trace of local paths only is written by the compiled rounds into buffers the runner reads after
    the call; it is the trace the rounds hand over one by one in object mode (as they do for a trace
    with messages or state entries): every round, field and path bit for bit, the run's end included
    (sampling with and without replacement, Bernoulli participation with empty rounds, minibatches,
    noise, a subset of rounds, a local iterate that diverges)."""
    from fedtheory.runs import trace as trace_mod
    name, names = which
    rng = np.random.default_rng(n)
    A = [rng.standard_normal((4, 3)) for _ in range(n)]
    p = problems.least_squares(A, [a @ np.ones(3) + rng.standard_normal(4) for a in A], l2=0.1, noise=noise)
    cls = get_algorithm(name)
    kw = dict({k: v for k, v in cls.test_params.items() if k != "lr"}, rounds=7, local_steps=K, trace=names,
              seed=seed, clients_per_round=min(S, n), sampling=sampling, batch_size=B, eval_every=3,
              lr=1e150 if diverge else 0.05, trace_rounds=(0, 2, 3, 6) if some else None)
    if sampling == "bernoulli":
        kw.update(clients_per_round=None, participation=0.4)
    a = ft.run(p, name, **kw)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(trace_mod._TraceRecorder, "paths_only", property(lambda self: False))
        b = ft.run(p, name, **kw)
    assert a.status == b.status and a.rounds == b.rounds and np.array_equal(a.x, b.x)
    assert len(a.trace) == len(b.trace) > 0
    for x, y in zip(a.trace, b.trace):
        assert (x.round, x.completed, sorted(x.data)) == (y.round, y.completed, sorted(y.data))
        for f in ("x", "clients", "weights", "lrs", "idx", "noise"):
            u, v = getattr(x, f), getattr(y, f)
            assert u.dtype == v.dtype and u.shape == v.shape and np.array_equal(u, v), (x.round, f)
        for k in x.data:
            assert x.data[k].shape == y.data[k].shape and np.array_equal(x.data[k], y.data[k], equal_nan=True)
    # what the trace holds is what its memory bound counts: the models of the traced rounds only, and
    # the draws of the traced rounds only when the call drew rounds it did not trace
    for rt in a.trace:
        assert rt.x.base is None or rt.x.base.shape[0] <= len(kw["trace_rounds"] or range(kw["rounds"]))
    if some:
        for f in ("clients", "weights", "lrs", "idx"):
            held = {id(u.base): u.base.size for u in (getattr(rt, f) for rt in a.trace) if u.base is not None}
            assert sum(held.values()) <= sum(getattr(rt, f).size for rt in a.trace), f


DIGEST_RULES = """
import numpy as np
FACTOR = 0.5
TABLE = np.ones(3)
def helper(v, scale=2.0):
    return scale * v
def keyed(v, *, shift=1.0):
    return v + shift
def later_bound():
    def g(v):
        return v + bound_later
    return g
    bound_later = 1.0           # (never reached: g's cell stays empty)
lazy = later_bound()
def make(c):
    def inner(v):
        return c * v
    return inner
closed = make(3.0)
def local(pk, rd, hp, st, rng):
    return helper(FACTOR) + closed(1.0) + keyed(1.0) + lazy(1.0), -1
def server(pk, rd, hp, st, m):
    return SCALE * FACTOR
"""
DIGEST_EDITS = {
    "rebind a constant": lambda m: setattr(m, "FACTOR", getattr(m, "FACTOR", 0.0) + 0.25),
    "rebind it to an equal value": lambda m: setattr(m, "FACTOR", float(str(getattr(m, "FACTOR", 0.5)))),
    "edit an array in place": lambda m: m.TABLE.__setitem__(0, m.TABLE[0] + 1.0),     # (read with array=True)
    "rebind a rule": lambda m: setattr(m, "server", m.make(5.0)),
    "rebind a helper": lambda m: setattr(m, "helper", lambda v, scale=3.0: scale + v),
    "change a default": lambda m: setattr(m.helper, "__defaults__", (m.helper.__defaults__[0] + 1.0,)),
    "swap a function's code": lambda m: setattr(m.helper, "__code__", (lambda v, scale=1.0: v - scale).__code__),
    "rebind a closure cell": lambda m: m.closed.__closure__[0].__setattr__("cell_contents", 7.0),
    "fill an empty closure cell": lambda m: m.lazy.__closure__[0].__setattr__("cell_contents", 2.0),
    "edit a keyword default in place": lambda m: m.keyed.__kwdefaults__.__setitem__(
        "shift", m.keyed.__kwdefaults__["shift"] + 1.0),
    "add a global name": lambda m: setattr(m, f"extra{len(vars(m))}", 1.0),
    "remove a name a rule reads": lambda m: vars(m).pop("FACTOR", None),
    "nothing": lambda m: None,
}


@settings(max_examples=40, deadline=None)
@given(edits=st.lists(st.sampled_from(sorted(DIGEST_EDITS)), min_size=1, max_size=6), array=st.booleans())
def test_the_code_digest_kept_between_runs_is_that_of_the_code_in_memory(edits, array):
    """A run looks the rules' code digest up every time, and it is not walked again while what it read
    is the same: after any sequence of edits in memory (constants, arrays in place, rules, helpers,
    defaults, code, closure cells, names added or removed) the digest returned is the one a fresh
    walk of the code computes."""
    from fedtheory._kernels import drivers
    name = "fedtheory_test_digest_rules"
    mod = types.ModuleType(name)
    # the server reads an array (mutable in place: every lookup walks again) or a number (a lookup
    # after an edit finds it by the identities the walk recorded)
    exec(DIGEST_RULES.replace("SCALE", "TABLE[0]" if array else "2.0"), vars(mod))
    sys.modules[name] = mod
    try:
        seen = {drivers._code_digest(name)}
        assert (drivers._CODE_DIGESTS[name][1] is None) == array      # (kept only without the array)
        for edit in edits:
            DIGEST_EDITS[edit](mod)
            got = drivers._code_digest(name)
            assert got == drivers._walk_code(name, mod)[0], edit
            assert got == drivers._code_digest(name)
            seen.add(got)
        changes = {"rebind a constant", "rebind a rule", "rebind a helper",
                   "change a default", "swap a function's code", "rebind a closure cell",
                   "edit a keyword default in place", "fill an empty closure cell"}
        assert len(seen) > 1 or not changes & set(edits)
    finally:
        sys.modules.pop(name, None)
        drivers._CODE_DIGESTS.pop(name, None)


def test_sources_digest_is_read_once_and_follows_a_changed_file(tmp_path, monkeypatch):
    """The driver's source digest is computed once per process while the files keep their size and
    modification time, and again when one of them changes."""
    from fedtheory._kernels import drivers
    src = tmp_path / "digest_rules_mod.py"
    src.write_text(RULES.replace("FACTOR", "0.5").replace("user_damped", "digest_damped"))
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    importlib.import_module("digest_rules_mod")
    try:
        first = drivers._sources_digest("digest_rules_mod")
        reads = []
        real = Path.read_bytes
        monkeypatch.setattr(Path, "read_bytes", lambda self: reads.append(self) or real(self))
        assert drivers._sources_digest("digest_rules_mod") == first and reads == []
        src.write_text(src.read_text().replace("0.5", "0.25"))
        os.utime(src, ns=(1, 1))                        # a new stamp even within the clock's resolution
        assert drivers._sources_digest("digest_rules_mod") != first and reads
    finally:
        from fedtheory.registry import ALGORITHMS
        ALGORITHMS.pop("digest_damped", None)
        sys.modules.pop("digest_rules_mod", None)


STALE_RULES = """
from collections import namedtuple

from fedtheory._kernels import rounds as ops

from . import helpers

State = namedtuple("StaleState", "x")
Messages = namedtuple("StaleMessages", "y")
SCALE = 1.0


def local(pk, rd, hp, st, rng):
    x = ops.row(st.x)
    Y, bad = ops.local_sgd(pk, rd, x, x, 1.0, 0.0, ops.empty2())
    return Messages(Y), bad


def server(pk, rd, hp, st, m):
    step = 0.5 * SCALE * helpers.SCALE2 * helpers.one() * helpers.scaled(1.0) * helpers.closure_one() * helpers.CFG.c
    return State(st.x + step * (rd.weights @ m.y - rd.weights.sum() * st.x))
"""

STALE_HELPERS = """
from collections import namedtuple

from numba import njit

SCALE2 = 1.0
Cfg = namedtuple("Cfg", "c")
CFG = Cfg(1.0)


@njit
def scaled(v, c=1.0):
    return v * c


def make(c):
    @njit
    def value():
        return c
    return value


closure_one = make(1.0)


@njit
def one():
    return 1.0


def kind(name):
    return name in {"plain", "prox", "sam"}
"""

#: an edit of the rules' package: (file, old text, new text)
STALE_EDITS = {
    "a literal of a rule": ("rules.py", "0.5 * SCALE", "0.25 * SCALE"),
    "a constant of the rules module": ("rules.py", "SCALE = 1.0", "SCALE = 2.0"),
    "a constant of a sibling module": ("helpers.py", "SCALE2 = 1.0", "SCALE2 = 2.0"),
    "a jitted helper of a sibling module": ("helpers.py", "    return 1.0", "    return 2.0"),
    # what Numba freezes besides globals: default arguments, closure cells, named-tuple constants
    "a default argument of a helper": ("helpers.py", "def scaled(v, c=1.0)", "def scaled(v, c=2.0)"),
    "a closure cell": ("helpers.py", "closure_one = make(1.0)", "closure_one = make(2.0)"),
    "a named-tuple constant": ("helpers.py", "CFG = Cfg(1.0)", "CFG = Cfg(2.0)"),
}


@pytest.mark.parametrize("edit", sorted(STALE_EDITS))
def test_rules_edited_after_import_never_get_the_new_files_digest(tmp_path, monkeypatch, edit):
    """A rules file (or a file of its package) edited while the old code is loaded: the driver that
    old code compiles gets a digest of its own, not the one a process running the new files
    computes (which would then load the old machine code from the disk cache); after a reload the
    digest is the new files' one, the same in a fresh process with another string hash seed."""
    import importlib

    from fedtheory._kernels import drivers
    name = "stalepkg_" + "".join(c for c in edit if c.isalnum())
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "rules.py").write_text(STALE_RULES)
    (pkg / "helpers.py").write_text(STALE_HELPERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        rules = importlib.import_module(f"{name}.rules")
        before = drivers._sources_digest(rules.__name__)
        file, old, new = STALE_EDITS[edit]
        text = (pkg / file).read_text()
        assert old in text
        (pkg / file).write_text(text.replace(old, new))
        os.utime(pkg / file, ns=(1, 1))                   # a new stamp even within the clock's resolution
        stale = drivers._sources_digest(rules.__name__)
        assert stale != before                            # the files changed: not the old driver's name
        importlib.reload(sys.modules[f"{name}.{file[:-3]}"])
        fresh = drivers._sources_digest(rules.__name__)
        assert fresh not in (stale, before)
        out = subprocess.run(
            [sys.executable, "-c", f"import {name}.rules as r; from fedtheory._kernels import drivers as d; "
                                   f"print(d._sources_digest(r.__name__))"],
            capture_output=True, text=True, cwd=tmp_path, timeout=300,
            env={**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"})
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.split()[-1] == fresh
    finally:
        for m in [m for m in sys.modules if m.startswith(name)]:
            sys.modules.pop(m)


def test_a_helper_module_beside_top_level_rules_is_in_the_digest(tmp_path, monkeypatch):
    """Top-level rules (no package) calling a jitted helper of another top-level module beside them:
    the helper's code is part of the driver's digest (an edit of it gives another driver in the
    next process, which otherwise loaded the old helper compiled into the cached segment)."""
    import importlib

    from fedtheory._kernels import drivers
    rules = STALE_RULES.replace("from . import helpers", "import tl_helpers as helpers")
    (tmp_path / "tl_rules.py").write_text(rules)
    (tmp_path / "tl_helpers.py").write_text(STALE_HELPERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        importlib.import_module("tl_rules")
        before = drivers._sources_digest("tl_rules")
        (tmp_path / "tl_helpers.py").write_text(STALE_HELPERS.replace("return 1.0", "return 0.5"))
        os.utime(tmp_path / "tl_helpers.py", (1, 1))    # same size: Python's bytecode cache would load the old code
        importlib.reload(sys.modules["tl_helpers"])
        after = drivers._sources_digest("tl_rules")
        assert after != before
        out = _run_py("import tl_rules; from fedtheory._kernels import drivers as d; print(d._sources_digest('tl_rules'))",
                      {"PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"})
        assert out.split()[-1] == after
    finally:
        for m in ("tl_rules", "tl_helpers"):
            sys.modules.pop(m, None)


@pytest.mark.slow
def test_a_run_after_an_edit_without_reload_does_not_poison_the_next_process(tmp_path):
    """The user's path: a notebook imports its rules, edits their file and runs again without a
    reload (the old code runs, as Python has it); a new process (a sweep worker) with the edited
    file must run the new rules, not the old machine code cached by the first process."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "poison_damped.py").write_text(RULES.replace("FACTOR", "0.5").replace("user_damped", "poison_damped"))
    env = {**os.environ, "FEDTHEORY_DRIVER_DIR": str(tmp_path / "drivers"), "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
           "PYTHONPATH": f"{ROOT}{os.pathsep}{pkg}"}
    first = """
        import os, numpy as np, fedtheory as ft, problems, poison_damped
        p = problems.quadratic(4, 3, seed=0)
        before = ft.run(p, "poison_damped", rounds=4, local_steps=2, lr=0.1).x
        f = poison_damped.__file__
        text = open(f).read()
        open(f, "w").write(text.replace("0.5 *", "0.25 *"))
        os.utime(f, ns=(1, 1))
        after = ft.run(p, "poison_damped", rounds=4, local_steps=2, lr=0.1).x
        assert np.array_equal(before, after)          # the loaded code runs, with its driver
        print(repr(float(after[0])))
    """
    second = """
        import numpy as np, fedtheory as ft, problems, poison_damped
        p = problems.quadratic(4, 3, seed=0)
        fused = ft.run(p, "poison_damped", rounds=4, local_steps=2, lr=0.1)
        twin = ft.run(p, "poison_damped", rounds=4, local_steps=2, lr=0.1, backend="python")
        assert np.allclose(fused.x, twin.x, rtol=0, atol=1e-12), (fused.x, twin.x)
        print(repr(float(fused.x[0])))
    """
    outs = []
    for code in (first, second):
        out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                             cwd=tmp_path, env=env, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        outs.append(float(out.stdout.split()[-1]))
        assert len(list((tmp_path / "drivers").glob("*.py"))) == len(outs)     # one driver per code
    assert outs[0] != outs[1]


# cached on disk (tests/__pycache__): compiled once, not in every run of the suite
@njit(cache=True)
def _set_rows_nb(a, rows, v):
    return rk.set_rows(a, rows, v)


@njit(cache=True)
def _add_rows_nb(a, rows, v):
    return rk.add_rows(a, rows, v)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 6), d=st.integers(1, 4), rows=st.lists(st.integers(0, 5), min_size=0, max_size=8),
       seed=st.integers(0, 2 ** 32 - 1))
def test_rows_helpers_compiled_are_numpys_fancy_assignment(n, d, rows, seed):
    """The compiled ``set_rows`` / ``add_rows`` (loops) write what NumPy's ``a[rows] = v`` and
    ``a[rows] += v`` write, repeated rows included (the last one wins), for 1-D and 2-D states."""
    rows = np.array([r % n for r in rows], dtype=np.int64)
    rng = np.random.default_rng(seed)
    a, v = rng.normal(size=(n, d)), rng.normal(size=(rows.shape[0], d))
    for compiled, numpy_form in ((_set_rows_nb, rk.set_rows), (_add_rows_nb, rk.add_rows)):
        want = numpy_form(a.copy(), rows, v)
        got = compiled(a.copy(), rows, v)
        assert np.array_equal(got, want)
    a1, v1 = a[:, 0].copy(), v[:, 0].copy()
    assert np.array_equal(_set_rows_nb(a1.copy(), rows, v1), rk.set_rows(a1.copy(), rows, v1))
    flags = np.zeros(n, dtype=np.bool_)
    assert np.array_equal(_set_rows_nb(flags.copy(), rows, True), rk.set_rows(flags.copy(), rows, True))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 6), d=st.integers(1, 4), rows=st.lists(st.integers(0, 5), min_size=0, max_size=8),
       seed=st.integers(0, 2 ** 32 - 1), form=st.sampled_from(["row", "scalar", "1-D add", "1-D add scalar"]))
def test_rows_helpers_compiled_broadcast_as_numpy(n, d, rows, seed, form):
    """The other forms NumPy's ``a[rows] = v`` / ``a[rows] += v`` accept, compiled: one d-vector for
    every row, a scalar, and an addition to a 1-D per-client state (a counter), repeated rows included."""
    rows = np.array([r % n for r in rows], dtype=np.int64)
    rng = np.random.default_rng(seed)
    a2 = rng.normal(size=(n, d))
    cases = {"row": [(a2, rng.normal(size=d))], "scalar": [(a2, float(rng.normal()))],
             "1-D add": [(a2[:, 0].copy(), rng.normal(size=rows.shape[0]))],
             "1-D add scalar": [(a2[:, 0].copy(), 2.5), (np.arange(n, dtype=np.int64), 1)]}[form]
    for a, v in cases:
        helpers = ((_add_rows_nb, rk.add_rows),) if form.startswith("1-D") else \
            ((_set_rows_nb, rk.set_rows), (_add_rows_nb, rk.add_rows))
        for compiled, numpy_form in helpers:
            want = numpy_form(a.copy(), rows, v)
            got = compiled(a.copy(), rows, v)
            assert got.dtype == want.dtype and np.array_equal(got, want)


def test_rows_helpers_compiled_refuse_a_shape_mismatch():
    with pytest.raises(ValueError, match="one row per entry of rows"):
        _set_rows_nb(np.zeros((3, 2)), np.array([0, 1]), np.zeros(3))
    with pytest.raises(ValueError, match="one row per entry of rows"):
        _add_rows_nb(np.zeros(3), np.array([0, 1]), np.zeros(3))
    with pytest.raises(ValueError, match="one row per entry of rows"):
        _set_rows_nb(np.zeros((3, 2)), np.array([0, 1]), np.zeros((1, 2)))
    with pytest.raises(ValueError, match="one row per entry of rows"):
        _add_rows_nb(np.zeros((3, 2)), np.array([0, 1]), np.zeros((2, 3)))


@pytest.mark.parametrize("mistake", ["local without rng", "a plain Python helper"])
def test_a_users_rule_mistake_names_the_rule_and_its_form(tmp_path, monkeypatch, mistake):
    """A local rule without its rng argument ran on the python backend (which never calls local) and
    raised a raw Numba TypingError, with ANSI codes and a path into the generated driver, on numba;
    a server calling a plain helper gave 'NameError: name ... is not defined' from Numba. Both now
    name the module and the form the rules take (a DeclarationError at once for a wrong signature,
    on every backend; a TypeError with Numba's own message for code Numba cannot compile)."""
    import importlib

    from fedtheory.exceptions import DeclarationError
    from fedtheory.registry import ALGORITHMS
    name = "mistake_" + "".join(c for c in mistake if c.isalnum())
    src = RULES.replace("FACTOR", "0.5").replace("user_damped", name)
    if mistake == "local without rng":
        src = src.replace("def local(pk, rd, hp, st, rng):", "def local(pk, rd, hp, st):")
    else:
        src = src.replace("def server(pk, rd, hp, st, m):\n    return State(st.x + 0.5 *",
                          "def shrink(v):\n    return v\n\n\ndef server(pk, rd, hp, st, m):\n    return State(st.x + shrink(0.5) *")
        assert "shrink(0.5)" in src
    (tmp_path / f"{name}.py").write_text(src)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("FEDTHEORY_DRIVER_DIR", str(tmp_path / "drivers"))
    try:
        importlib.import_module(name)
        p = problems.quadratic(4, 3, seed=0)
        if mistake == "local without rng":
            for backend in ("numba", "python"):
                with pytest.raises(DeclarationError, match=rf"the compiled rule local of module '{name}' takes "
                                                           r"\(pk, rd, hp, st\); it must take five arguments"):
                    ft.run(p, name, rounds=2, backend=backend)
        else:
            with pytest.raises(TypeError, match=rf"(?s)Numba cannot compile the rules of module '{name}'.*needs @njit.*"
                                                r"Numba said: .*shrink"):
                ft.run(p, name, rounds=2)
            assert ft.run(p, name, rounds=2, backend="python").status == "max_rounds"    # plain Python: fine
    finally:
        ALGORITHMS.pop(name, None)
        sys.modules.pop(name, None)
