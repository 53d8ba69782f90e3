"""No import cycle between the project's modules, read statically from the source.

What counts as an import: every ``import`` and ``from ... import`` statement anywhere in a module
(at the top, inside functions, under ``if``), relative ones resolved. ``from P import name`` is an
arrow to the module ``P.name`` when that is one of the project's modules, else to ``P``.
``import a.b.c`` is an arrow to ``a.b.c`` alone: the package ``__init__`` files Python runs on the
way are not counted (they hand names on; an ``__init__`` that imports a module is an arrow of its
own). Docstrings and strings (doctests, ``importlib.import_module`` with a computed name) are not
read. The project's modules are those of the packages ``fedtheory``, ``problems`` and
``validation``.

The registries are the only circles allowed, each named in :data:`REGISTRIES` with its reason.
"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("fedtheory", "problems", "validation")


def _module_names(root, packages):
    """``{dotted module name: path}`` of every ``.py`` file under the packages."""
    out = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def import_graph(root=ROOT, packages=PACKAGES):
    """``{module: set of project modules it imports}``, read with ``ast`` (see the module docstring)."""
    modules = _module_names(root, packages)
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    found = [".".join(parts[:k]) for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in modules]
                    targets.update(found[:1])
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module
                for alias in node.names:
                    if f"{source}.{alias.name}" in modules:
                        targets.add(f"{source}.{alias.name}")
                    elif source in modules:
                        targets.add(source)
        targets.discard(name)
        graph[name] = targets
    return graph


def circles(graph):
    """The strongly connected components with more than one module (Tarjan), each a sorted list."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _members(prefix, names):
    return {n for n in names if n == prefix or n.startswith(prefix + ".")}


def _registries(graph):
    algorithms = _members("fedtheory.algorithms", graph) | {"fedtheory.registry"}
    papers = {n for n in _members("fedtheory.theory", graph) if n.count(".") == 2}    # no subpackage
    return {
        # ft.algorithms() and get_algorithm import the package so that every built-in algorithm is
        # registered before a lookup; each algorithm file imports registry.register to register itself.
        "algorithm registry": algorithms,
        # fedtheory/theory/__init__.py holds THEOREMS, SPECS and CASES and imports each paper module
        # (and engine) so that they register; the paper modules import Case, Condition and
        # register_cases from it, engine's register_spec writes into it.
        "theorem registry": papers - {"fedtheory.theory.falsify"} | {"fedtheory.theory"},
    }


def _explain(comp, graph):
    return "; ".join(f"{a} -> {b}" for a in comp for b in sorted(graph[a]) if b in comp)


def test_no_import_cycle_but_the_registries():
    graph = import_graph()
    assert len(graph) > 90 and "fedtheory.reporting.results" in graph["fedtheory.reporting.sweep"]      # the walk read the house
    allowed = _registries(graph)
    for comp in circles(graph):
        assert any(set(comp) <= group for group in allowed.values()), (
            f"import cycle between {comp}: {_explain(comp, graph)}")


def test_detector_finds_a_cycle_through_a_function_level_relative_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..c import g\n")
    (pkg / "c.py").write_text("import pkg.a as m\n")
    (pkg / "d.py").write_text("from . import c\n")                     # into the circle, not part of it
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.c"} and graph["pkg.d"] == {"pkg.c"}
    assert circles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    (pkg / "c.py").write_text("import pkg.sub\n")                    # a package's __init__: no arrow to b
    assert circles(import_graph(tmp_path, ("pkg",))) == []
