"""The layout of DESIGN.md holds in the tree: no import cycle with validation, no private simulators,
Numba only in fedtheory/_kernels, fedtheory/testing self-contained."""
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / "fedtheory"


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def test_library_never_imports_validation():
    bad = [str(f.relative_to(ROOT)) for f in LIB.rglob("*.py") if "validation" in set(_imports(f))]
    assert not bad, f"fedtheory modules importing the top-level validation package: {bad}"


def test_importing_the_library_needs_no_validation_package():
    code = ("import sys; sys.modules['validation'] = None; import fedtheory, fedtheory.theory, "
            "fedtheory.truth, fedtheory.verification, fedtheory.trace; print(len(fedtheory.theory.THEOREMS))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == 13


def test_testing_package_imports_no_top_level_package():
    top = {"problems", "validation", "benchmarks", "figures"}
    bad = {str(f.relative_to(ROOT)): sorted(set(_imports(f)) & top) for f in (LIB / "testing").rglob("*.py")}
    assert not any(bad.values()), bad


def test_numba_only_in_kernels():
    bad = [str(f.relative_to(ROOT)) for f in LIB.rglob("*.py")
           if "numba" in set(_imports(f)) and "_kernels" not in f.parts]
    assert not bad, bad


def test_theory_modules_have_no_simulator_loops():
    """A theory module evaluates functions at traced points; it never loops over rounds or local
    steps re-implementing an algorithm (the measurement is ft.run)."""
    for f in (LIB / "theory").glob("*.py"):
        src = f.read_text()
        tree = ast.parse(src)
        names = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
        assert not [n for n in names if "simulat" in n], (f.name, names)
        for node in ast.walk(tree):
            if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and \
                    getattr(node.iter.func, "id", "") == "range" and node.iter.args:
                arg = ast.unparse(node.iter.args[-1])
                assert arg not in ("rounds", "T", "R", "K", "tau", "local_steps", "R_sim"), \
                    f"{f.name} line {node.lineno}: a loop over range({arg}) looks like a simulator"
