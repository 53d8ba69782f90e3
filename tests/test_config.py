"""Configurations: every argument checked at load, errors naming file, line, key, expected, found."""
import hashlib
import json
import re

import pytest

from fedtheory.reporting.config import ConfigError, load, make_problem
from fedtheory.reporting.toml_text import key_lines

BASE = """\
[problem]
factory = "quadratic"
n_clients = 6
dim = 4
L = 1.0

[run]
algorithm = "fedspeed"
rounds = 40
local_steps = 3
lr = 0.1
eval_every = 10

[grid]
seed = [0, 1]
clients_per_round = [2, 6]
"problem.heterogeneity" = [0.5, 2.0]
"""
#   line: 2 factory, 3 n_clients, 4 dim, 5 L, 8 algorithm, 9 rounds, 10 local_steps,
#   11 lr, 12 eval_every, 15 seed, 16 clients_per_round, 17 problem.heterogeneity


def _write(tmp_path, text):
    path = tmp_path / "cfg.toml"
    path.write_text(text)
    return path


def _load(tmp_path, text):
    path = _write(tmp_path, text)
    return load(path), str(path)


def _error(tmp_path, text):
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}"), msg
    return msg.removeprefix(str(path))


# (case, replacement of a BASE line, expected message after the file name: line, key, expected, found)
CASES = [
    ("rounds negative", ("rounds = 40", "rounds = -3"),
     r", line 9: [run] key 'rounds': expected an int in the range [0, 2**63 - 1] (argument of fedtheory.run); got -3"),
    ("rounds a string", ("rounds = 40", 'rounds = "ten"'),
     ", line 9: [run] key 'rounds': expected an int in the range [0, 2**63 - 1] (argument of fedtheory.run); got \"ten\""),
    ("rounds a float", ("rounds = 40", "rounds = 4.5"), r", line 9: [run] key 'rounds': expected an int"),
    ("rounds a bool", ("rounds = 40", "rounds = true"), r", line 9: [run] key 'rounds': expected an int .*; got true"),
    ("local_steps zero", ("local_steps = 3", "local_steps = 0"),
     r", line 10: [run] key 'local_steps': expected an int in the range [1, 2**63 - 1] (argument of fedtheory.run); got 0"),
    ("lr negative", ("lr = 0.1", "lr = -0.1"),
     r", line 11: [run] key 'lr': expected a float in the range (0, inf) (argument of fedtheory.run); got -0.1"),
    ("lr nan", ("lr = 0.1", "lr = nan"), r", line 11: [run] key 'lr': expected a float .*; got nan"),
    ("lr a list", ("lr = 0.1", "lr = [0.1]"), r", line 11: [run] key 'lr': expected a float .*; got [0.1]"),
    ("eval_every zero", ("eval_every = 10", "eval_every = 0"),
     r", line 12: [run] key 'eval_every': expected an int in the range [1, 2**63 - 1] (or the key left out) (argument of fedtheory.run); got 0"),
    ("hyperparameter out of range", ("lr = 0.1", "lr = 0.1\nalpha = 1.5"),
     r", line 12: [run] key 'alpha': expected a float in the range [0, 1] (argument of FedSpeed); got 1.5"),
    ("hyperparameter option", ("lr = 0.1", 'lr = 0.1\nserver = "fast"'),
     ", line 12: [run] key 'server': expected a str among {'alg1', 'dyn'} (argument of FedSpeed); got \"fast\""),
    ("sampling option", ("lr = 0.1", 'lr = 0.1\nsampling = "poisson"'),
     ", line 12: [run] key 'sampling': expected a str among .*; got \"poisson\""),
    ("x0 shape", ("lr = 0.1", "lr = 0.1\nx0 = [1.0, 2.0]"),
     r", line 12: [run] key 'x0': expected an array of shape (4,) (argument of fedtheory.run); got an array of shape (2,)"),
    ("reference not a bool", ("lr = 0.1", 'lr = 0.1\nreference = "yes"'),
     ", line 12: [run] key 'reference': expected true or false; got \"yes\""),
    ("unknown run key", ("lr = 0.1", "lrr = 0.1"),
     r", line 11: [run] key 'lrr': is neither an argument of fedtheory.run nor a hyperparameter of 'fedspeed'; "
     r"expected one of .*local_steps, lr, "),
    ("unknown algorithm", ('algorithm = "fedspeed"', 'algorithm = "fedsped"'),
     ", line 8: [run] key 'algorithm': expected a registered algorithm, one of ditto, .*fedspeed.*; got \"fedsped\""),
    ("n_clients a float", ("n_clients = 6", "n_clients = 6.5"),
     r", line 3: [problem] key 'n_clients': expected an int .*; got 6.5"),
    ("dim a string", ("dim = 4", 'dim = "4"'), ", line 4: [problem] key 'dim': expected an int .*; got \"4\""),
    ("mu above L", ("dim = 4", "dim = 4\nmu = 5.0"),
     r", line 5: [problem] key 'mu': expected a float in the range (0, 1.0] (argument of problems.quadratic); got 5.0"),
    ("option of a factory", ("dim = 4", 'dim = 4\nhessian = "shard"'),
     r", line 5: [problem] key 'hessian': expected a str among {'shared', 'distinct'} (argument of problems.quadratic); "
     "got \"shard\""),
    ("a factory's own check", ("dim = 4", "dim = 1"), r", line 4: [problem] key 'dim': problems.quadratic: with dim=1"),
    ("unknown factory", ('factory = "quadratic"', 'factory = "quadratik"'),
     r", line 2: [problem] key 'factory': expected a problems factory, one of breast_cancer, .*quadratic, "
     ".*; got \"quadratik\""),
    ("unknown problem key", ("dim = 4", "dim = 4\ndimm = 3"),
     r", line 5: [problem] key 'dimm': is not an argument of problems factory 'quadratic'; expected one of n_clients, dim, "),
    ("name beside factory", ("dim = 4", 'dim = 4\nname = "q"'),
     r", line 5: [problem] key 'name': is not an argument of problems factory 'quadratic' ('name' names the factory"),
    ("missing factory argument", ("dim = 4", ""),
     r", line 1: table [problem]: problems factory 'quadratic' needs the argument(s) 'dim'"),
    ("grid value out of range", ("seed = [0, 1]", "seed = [0, -1]"),
     r", line 15: [grid] key 'seed' (grid value -1): expected an int in the range [0, inf) (argument of fedtheory.run); got -1"),
    ("grid value above the clients", ("clients_per_round = [2, 6]", "clients_per_round = [2, 7]"),
     r", line 16: [grid] key 'clients_per_round' (grid value 7): expected an int in the range [1, 6] .*; got 7"),
    ("grid problem value", ('"problem.heterogeneity" = [0.5, 2.0]', '"problem.heterogeneity" = [0.5, -2.0]'),
     r", line 17: [grid] key 'problem.heterogeneity' (grid value -2.0): expected a float in the range [0, inf) "
     r"(argument of problems.quadratic); got -2.0"),
    ("grid unknown problem key", ('"problem.heterogeneity"', '"problem.heterogenity"'),
     r", line 17: [grid] key 'problem.heterogenity': is not an argument of problems factory 'quadratic'"),
    ("grid not a list", ("seed = [0, 1]", "seed = 3"), r", line 15: [grid] key 'seed': expected a non-empty list of values; got 3"),
    ("grid empty list", ("seed = [0, 1]", "seed = []"), r", line 15: [grid] key 'seed': expected a non-empty list"),
    ("TOML syntax", ("n_clients = 6", "n_clients = "), r", line 3, column 13: invalid TOML: "),
    ("TOML duplicate key", ("dim = 4", "dim = 4\ndim = 5"), r", line 5: [problem] key 'dim' is given twice"),
    ("unknown table", ("[grid]", "[grids]"), r", line 14: 'grids': unknown table; expected [problem], [run]"),
    ("released-code option the algorithm rejects", ('algorithm = "fedspeed"', 'algorithm = "fedsps"\nweight_decay = 0.01'),
     r", line 9: [run] key 'weight_decay': The 'weight_decay' parameter of run is not supported by 'fedsps': .*"
     r"It must be None or 0.0 for 'fedsps'. Got weight_decay=0.01 instead."),
    ("run argument a file does not set", ("eval_every = 10", 'eval_every = 10\ndevice = "cpu"'),
     r", line 13: [run] key 'device': is an argument of fedtheory.run that a configuration file does not set"),
    ("clip_norm negative", ("eval_every = 10", "eval_every = 10\nclip_norm = -1.0"),
     r", line 13: [run] key 'clip_norm': expected .* (argument of fedtheory.run); got -1.0"),
]


@pytest.mark.parametrize("case,edit,expected", CASES, ids=[c[0] for c in CASES])
def test_every_error_names_file_line_key_expected_and_found(tmp_path, case, edit, expected):
    old, new = edit
    assert old in BASE
    msg = _error(tmp_path, BASE.replace(old, new, 1))
    pattern = ".*".join(re.escape(part) for part in expected.split(".*"))     # literal text, .* wildcards
    assert re.match(pattern, msg), f"{case}: {msg!r}"


def test_missing_file_directory_and_not_utf8(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.toml: no such configuration file$"):
        load(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match=r"nope\.toml: no such configuration file$"):
        load(str(tmp_path / "nope.toml"))                        # a path string, never read as TOML
    with pytest.raises(ConfigError, match="is a directory, not a configuration file"):
        load(tmp_path)
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe[problem]\n")
    with pytest.raises(ConfigError, match="not a UTF-8 text file"):
        load(tmp_path / "bin.toml")


def test_missing_tables_and_keys(tmp_path):
    assert "missing table [run]" in _error(tmp_path, BASE.split("[run]")[0])
    assert "missing table [problem]" in _error(tmp_path, "[run]\n" + BASE.split("[run]")[1])
    msg = _error(tmp_path, BASE.replace('factory = "quadratic"\n', ""))
    assert msg.startswith(", line 1: table [problem]: missing key 'factory' (a problems factory, one of ")
    msg = _error(tmp_path, BASE.replace('algorithm = "fedspeed"\n', ""))
    assert msg.startswith(", line 7: table [run]: missing key 'algorithm' (one of ditto, ")


def test_values_are_checked_for_every_grid_point_before_any_run(tmp_path, monkeypatch):
    """The second grid point's bad value is found at load; no run starts."""
    from fedtheory.runs.fused import FusedExecutor
    from fedtheory.runs.log import RunLog
    from fedtheory.runs.per_round import PerRoundExecutor
    calls = []
    monkeypatch.setattr(PerRoundExecutor, "run", lambda self, bar=None: calls.append("rounds"))
    monkeypatch.setattr(FusedExecutor, "run", lambda self, bar=None: calls.append("rounds"))
    monkeypatch.setattr(RunLog, "evaluate", lambda self, r: calls.append(r))
    msg = _error(tmp_path, BASE.replace("[grid]", "[grid]\nlam = [1.0, 0.0]"))
    assert msg.startswith(", line 15: [grid] key 'lam' (grid value 0.0): expected a float in the range (0, inf)"), msg
    assert calls == []


def test_name_is_the_factory_only_without_a_factory_key(tmp_path):
    cfg, _ = _load(tmp_path, BASE.replace('factory = "quadratic"', 'name = "quadratic"'))
    assert {p["factory"] for p, _ in cfg.points()} == {"quadratic"}
    cfg, _ = _load(tmp_path, BASE.replace('factory = "quadratic"', 'factory = "explicit_quadratic"\n'
                                          'Q = [[1.0, 0.0], [0.0, 2.0]]\nc = [[1.0, 0.0], [0.0, 1.0]]\n'
                                          'name = "mine"').replace("n_clients = 6\ndim = 4\nL = 1.0\n", "")
                   .replace('"problem.heterogeneity" = [0.5, 2.0]\n', "").replace("[2, 6]", "[1, 2]"))
    assert make_problem(cfg.points()[0][0]).name == "mine"          # 'name' is then an argument


def test_libsvm_from_toml_with_factory_and_data_set_name(tmp_path, data_dir):
    text = f"""\
[problem]
factory = "libsvm"
name = "mushrooms"
n_clients = 4
max_samples = 400
l2 = 0.01
data_dir = "{data_dir}"

[run]
algorithm = "fedavg"
rounds = 2
"""
    cfg, _ = _load(tmp_path, text)
    p = make_problem(cfg.points()[0][0])
    assert p.n_clients == 4 and p.dim == 112
    msg = _error(tmp_path, text.replace('factory = "libsvm"\n', "").replace('"mushrooms"', '"libsvm"'))
    assert msg.startswith(", line 1: table [problem]: problems factory 'libsvm' needs the argument(s) 'name' "
                          "(write factory = 'libsvm' and name = the data set")
    msg = _error(tmp_path, text.replace('"mushrooms"', '"a9b"'))           # not a known data set: no download
    assert msg.startswith(", line 3: [problem] key 'name': LIBSVM data set 'a9b'") and "known data sets" in msg, msg
    msg = _error(tmp_path, text.replace("l2 = 0.01", "l2 = -1.0"))
    assert msg.startswith(", line 6: [problem] key 'l2': "), msg
    msg = _error(tmp_path, text.replace("n_clients = 4", "n_clients = 4000"))
    assert msg.startswith(", line 4: [problem] key 'n_clients': expected an int in the range [1, 400]"), msg


def test_vision_factory_from_toml(tmp_path):
    pytest.importorskip("torch")
    text = """\
[problem]
factory = "vision.image_problem"
dataset = "digits"
model = {name = "mlp", in_features = 64, n_classes = 10, hidden = [8]}
n_clients = 4

[run]
algorithm = "fedavg"
backend = "torch"
device = "cpu"
rounds = 1
"""
    msg = _error(tmp_path, text)            # 'device' is not a config key (the machine decides)
    assert msg.startswith(", line 10: [run] key 'device': is an argument of fedtheory.run that a configuration "
                          "file does not set (device: the machine that runs the sweep decides"), msg
    cfg, _ = _load(tmp_path, text.replace('device = "cpu"\n', ""))
    p = make_problem(cfg.points()[0][0])
    assert p.n_clients == 4 and p.dim == 64 * 8 + 8 + 8 * 10 + 10
    msg = _error(tmp_path, text.replace('device = "cpu"\n', "").replace('name = "mlp"', 'name = "mlpp"'))
    assert msg.startswith(", line 4: [problem] key 'model': ") and "'mlp'" in msg, msg
    msg = _error(tmp_path, text.replace('device = "cpu"\n', "").replace('"digits"', '"digitz"'))
    assert msg.startswith(", line 3: [problem] key 'dataset': "), msg


def test_key_lines_scanner():
    text = '''\
# a comment with lr = 3
[problem]   # trailing comment
factory = "quadratic"
doc = """
lr = 5
[run]
"""
arr = [
  1,   # lr = 7
  2,
]

[ run ]
'algorithm' = "fedavg"
lr=0.1
[grid]
"problem.heterogeneity" = [0.5, 2.0]
problem.seed = [0, 1]
inline = {a = 1, b = [2,
  3]}
x.y."z.w" = 1
'''
    lines = key_lines(text)
    assert lines[("problem",)] == 2 and lines[("problem", "factory")] == 3
    assert lines[("problem", "doc")] == 4 and lines[("problem", "arr")] == 8
    assert lines[("run",)] == 13 and lines[("run", "algorithm")] == 14 and lines[("run", "lr")] == 15
    assert lines[("grid", "problem.heterogeneity")] == 17 and lines[("grid", "problem", "seed")] == 18
    assert lines[("grid", "inline")] == 19 and lines[("grid", "x", "y", "z.w")] == 21
    assert ("problem", "lr") not in lines and ("run", "lr") in lines        # lr in strings/comments skipped


def test_dotted_grid_keys_are_problem_arguments(tmp_path):
    cfg, _ = _load(tmp_path, BASE.replace('"problem.heterogeneity" = [0.5, 2.0]', "problem.heterogeneity = [0.5, 2.0]"))
    assert sorted({p["heterogeneity"] for p, _ in cfg.points()}) == [0.5, 2.0]
    msg = _error(tmp_path, BASE.replace('"problem.heterogeneity" = [0.5, 2.0]', "problem.heterogeneity = [0.5, -1.0]"))
    assert msg.startswith(", line 17: [grid] key 'problem.heterogeneity' (grid value -1.0)"), msg


def test_run_ids_of_configurations_naming_the_factory_with_name_are_unchanged():
    """A sweep written when ``name`` named the factory keeps its run ids: resuming it redoes nothing."""
    from fedtheory.reporting.results import run_id
    run = {"algorithm": "fedavg", "rounds": 5, "seed": 0}
    old = json.dumps({"problem": {"name": "quadratic", "dim": 3}, "run": run}, sort_keys=True, default=str)
    assert run_id({"factory": "quadratic", "dim": 3}, run) == hashlib.sha256(old.encode()).hexdigest()[:16]
    assert run_id({"factory": "quadratic", "dim": 3}, run) == run_id({"name": "quadratic", "dim": 3}, run)
    # libsvm: the factory and the data set are different keys, so they hash differently
    assert run_id({"factory": "libsvm", "name": "a9a"}, run) != run_id({"factory": "libsvm", "name": "w8a"}, run)


@pytest.mark.parametrize("edit, expected", [
    (("dim = 4\n", "dim = 4\ndim = 5\n"), "line 5: [problem] key 'dim' is given twice (first at line 4)"),
    (("lr = 0.1\n", "lr = 0.1\n  lr=0.2  # again\n"), "line 12: [run] key 'lr' is given twice (first at line 11)"),
    (('"problem.heterogeneity" = [0.5, 2.0]\n', '"problem.heterogeneity" = [0.5, 2.0]\n"problem.heterogeneity" = [1]\n'),
     "line 18: [grid] key 'problem.heterogeneity' is given twice (first at line 17)")])
def test_a_key_given_twice_is_named_with_its_table_and_first_line(tmp_path, edit, expected):
    """tomllib says only "Cannot overwrite a value" for a repeated key: the error names the key, its
    table and where it was first given."""
    f = tmp_path / "twice.toml"
    f.write_text(BASE.replace(*edit))
    with pytest.raises(ConfigError) as e:
        load(f)
    assert str(e.value) == f"{f}, {expected}; TOML allows each key once in a table: keep one"
