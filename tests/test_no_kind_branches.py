"""Only the components know which datafit or regularizer a problem has.

Ground truth, constants, theorem applicability and everything else ask the components for their
capabilities (``constant_hessian``, ``curvature_bound``, ``has_samples``, ``sign_support``, ...), so a
user's datafit gets the same treatment as a built-in one. This static scan (Python's ``ast`` over the
source of ``fedtheory``, ``problems`` and ``validation``, except ``fedtheory/components/`` and the
kernel dispatch in ``fedtheory/_kernels/``) fails when code branches on what a problem *is*.

What counts as asking for a kind:

* any use of a kernel id name ``KIND_*`` (imported, read or compared);
* a comparison (``==``, ``!=``, ``in``, ``is``, ...) of ``.kind`` with a kernel id (a number, a
  ``KIND_*`` name, a ``.code``), or of ``.kind_name``, ``.reg`` (the datafit's name, the regularizer's)
  or a ``datafit``'s/``regularizer``'s ``.name``/``.code`` with anything but None; comparisons of
  ``inspect.Parameter.kind`` with ``Parameter.VAR_*`` constants, of ``dtype.kind`` and of other
  objects' ``kind`` with types or strings are not about problems and pass;
* reading ``.kind`` of a problem-named variable (``problem``, ``p``, ``prob``, ``sub``, ``pb``), e.g.
  to rebuild a problem from its kernel id;
* ``isinstance(<...>.datafit, ...)`` or ``isinstance(<...>.regularizer, ...)``.

Reading ``kind_name`` or ``reg`` for a message or a label is fine: only branches are flagged.
"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = [ROOT / "fedtheory", ROOT / "problems", ROOT / "validation"]
EXEMPT = [ROOT / "fedtheory" / "components", ROOT / "fedtheory" / "_kernels"]

_PROBLEM_NAMES = {"problem", "p", "prob", "sub", "pb"}
_PARAMETER_KINDS = {"VAR_KEYWORD", "VAR_POSITIONAL", "KEYWORD_ONLY", "POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD"}
_COMPONENT_ATTRS = {"datafit", "regularizer"}


def _is_kind_attr(node):
    """``x.kind``, ``x.kind_name``, ``x.reg``, or ``x.datafit.name`` / ``x.regularizer.code``."""
    if not isinstance(node, ast.Attribute):
        return False
    if node.attr in ("kind", "kind_name", "reg"):
        return not (isinstance(node.value, ast.Attribute) and node.value.attr == "dtype")
    if node.attr in ("name", "code"):
        base = node.value
        return (isinstance(base, ast.Attribute) and base.attr in _COMPONENT_ATTRS) or \
            (isinstance(base, ast.Name) and base.id in _COMPONENT_ATTRS | {"fit", "reg"})
    return False


def _parameter_kind(node):
    """``inspect.Parameter`` kinds (``par.VAR_KEYWORD``), also inside a tuple."""
    return any(isinstance(n, ast.Attribute) and n.attr in _PARAMETER_KINDS for n in ast.walk(node))


def _kind_value(node):
    """What a kernel id is compared with: a number or string, a ``KIND_*`` name, a ``.code``, or a tuple of them."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_kind_value(e) for e in node.elts)
    if isinstance(node, ast.Constant):
        return node.value is not None and not isinstance(node.value, bool)
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name.startswith("KIND_") or name == "code"


def _kind_compare(operands):
    """A comparison that branches on a kind: ``.kind`` against a kernel id, or any comparison of
    ``.kind_name``, ``.reg`` or a component's ``.name``/``.code`` with something other than None."""
    for k, o in enumerate(operands):
        if not _is_kind_attr(o):
            continue
        others = operands[:k] + operands[k + 1:]
        if o.attr == "kind":
            if any(_kind_value(x) for x in others):
                return True
        elif any(not (isinstance(x, ast.Constant) and x.value is None) for x in others):
            return True
    return False


def kind_branches(source, filename="<source>"):
    """[(line, text)] of every place in ``source`` that asks what kind a problem is (see the module)."""
    tree = ast.parse(source, filename)
    found = []

    def flag(node, why):
        found.append((node.lineno, f"{why}: {ast.unparse(node)[:100]}"))

    in_parameter_compare = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_parameter_kind(o) for o in operands):
                in_parameter_compare.update(id(o) for o in operands)
                continue
            if _kind_compare(operands):
                flag(node, "comparison on a component's kind")
                in_parameter_compare.update(id(o) for o in operands)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name.startswith("KIND_"):
                    flag(node, "imports a kernel id")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" \
                and node.args and isinstance(node.args[0], ast.Attribute) and node.args[0].attr in _COMPONENT_ATTRS:
            flag(node, "isinstance on a component")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id.startswith("KIND_"):
            flag(node, "kernel id")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("KIND_"):
            flag(node, "kernel id")
        elif isinstance(node, ast.Attribute) and node.attr == "kind" and id(node) not in in_parameter_compare \
                and isinstance(node.value, ast.Name) and node.value.id in _PROBLEM_NAMES:
            flag(node, "reads a problem's kernel id")
    return found


def _files():
    for top in SCANNED:
        for f in sorted(top.rglob("*.py")):
            if not any(ex in f.parents for ex in EXEMPT):
                yield f


def test_no_code_outside_the_components_branches_on_a_kind():
    bad = {str(f.relative_to(ROOT)): kind_branches(f.read_text(), str(f)) for f in _files()}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, ("code outside fedtheory/components asks what kind a problem is; ask the components "
                     f"for a capability instead: {bad}")


def test_the_scan_sees_every_package():
    files = [str(f.relative_to(ROOT)) for f in _files()]
    for must in ("fedtheory/truth/optimum.py", "fedtheory/truth/problem_constants.py", "fedtheory/theory/fedsps.py",
                 "fedtheory/constants.py", "fedtheory/problem.py"):
        assert must in files
    assert not any(f.startswith(("fedtheory/components/", "fedtheory/_kernels/")) for f in files)


def test_the_scan_flags_kind_branches_and_passes_the_rest():
    flagged = [
        "from fedtheory._kernels.oracles import KIND_LOGISTIC",
        "if problem.kind == 1:\n    pass",
        "scale = 0.25 if problem.kind == KIND_LOGISTIC else 1.0",
        "ok = p.kind in (a, b)",
        "x = problem.kind_name == 'logistic'",
        "rowwise = problem.reg != 'l1'",
        "if problem.datafit.name == 'huber':\n    pass",
        "if fit.name == 'huber':\n    pass",
        "FederatedProblem(problem.kind, M, b, ptr)",
        "ok = isinstance(problem.datafit, Logistic)",
        "ok = problem.datafit.code == 1",
        "ok = problem.kind == other.kind_name",
    ]
    for src in flagged:
        assert kind_branches(src), src
    passed = [
        "ok = par.kind in (par.VAR_POSITIONAL, par.VAR_KEYWORD)",
        "ok = p.kind is p.VAR_KEYWORD",
        "ok = df[c].dtype.kind == 'f'",
        "row = dict(kind=row_kind(v, case.kind))",
        "msg = f'{problem.kind_name} datafit, {problem.reg} regularizer'",
        "ok = problem.datafit.constant_hessian and not problem.datafit.has_samples",
        "kind = 'tightness'\nif kind == '3b':\n    pass",
        "ok = self.kind is int",
        "ok = problem.datafit.code is not None",
    ]
    for src in passed:
        assert not kind_branches(src), (src, kind_branches(src))
