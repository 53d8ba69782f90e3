"""Every public function and class of ``fedtheory``, ``problems`` and ``validation`` has its numpydoc
sections: a docstring (GL08), every parameter documented with a type and a description (PR01-PR07,
PR09, PR10), and what it returns (RT01-RT03).

The docs build (``docs/conf.py``) checks the API pages' objects against every numpydoc check but
SS05. Here, for every public name, these are not checked, and why:

* SS02, SS03, SS05, SS06 (the summary's form): many summaries begin with a formula or a name in
  code (``:math:``, ````x````), which SS02 reads as a lowercase start, and run over two lines;
* PR08 (a description starting with a capital): descriptions that begin with a symbol or code;
* a record class (a dataclass whose instances the library returns) documents its fields under
  Attributes, which then stand for its constructor's parameters;
* a named tuple (an algorithm's ``State``, ``Messages``, ``Params``, the kernels' records) is its
  declaration: its fields, which the algorithm's docstring and rules describe.
"""
import importlib
import inspect
import pkgutil

from numpydoc.docscrape import get_doc_object
from numpydoc.validate import validate

CHECKED = {"GL08", "PR01", "PR02", "PR03", "PR04", "PR05", "PR06", "PR07", "PR09", "PR10", "RT01", "RT02", "RT03"}


def _public_objects():
    seen = {}
    for top in ("fedtheory", "problems", "validation"):
        pkg = importlib.import_module(top)
        modules = [pkg] + [importlib.import_module(i.name) for i in pkgutil.walk_packages(pkg.__path__, top + ".")
                           if not any(p.startswith("_") for p in i.name.split(".")[1:])]
        for m in modules:
            for name, obj in vars(m).items():
                if name.startswith("_") or not (inspect.isfunction(obj) or inspect.isclass(obj)):
                    continue
                if inspect.isclass(obj) and issubclass(obj, tuple) and hasattr(obj, "_fields"):
                    continue
                if getattr(obj, "__module__", "") == m.__name__:
                    seen.setdefault(f"{m.__name__}.{name}", obj)
    return seen


def _attributes_cover_the_constructor(obj, missing):
    """A class whose Attributes section names every constructor parameter that PR01 misses."""
    if not inspect.isclass(obj):
        return False
    doc = inspect.getdoc(obj) or ""
    if "Attributes\n----------" not in doc:
        return False
    section = doc.split("Attributes\n----------", 1)[1]
    names = set()
    for line in section.splitlines():
        if line and not line.startswith(" ") and not line.startswith("-"):
            names.update(n.strip() for n in line.split(":")[0].split(","))
    return missing <= names


def test_every_public_function_and_class_has_its_numpydoc_sections():
    problems_found = []
    objects = _public_objects()
    assert len(objects) > 500                 # the walk read the packages
    for key, obj in sorted(objects.items()):
        try:
            errors = [(code, msg) for code, msg in validate(get_doc_object(obj))["errors"] if code in CHECKED]
        except OSError:
            # a hypothesis @composite strategy: its wrapper has no source for numpydoc to read (it
            # looks there for a return statement); its docstring has both sections, or it fails
            doc = inspect.getdoc(obj) or ""
            assert hasattr(obj, "__wrapped__"), key
            errors = [("GL08/PR01/RT01", "no Parameters or no Returns section")] \
                if not ("Parameters\n----------" in doc and "Returns\n-------" in doc) else []
        if errors and all(code == "PR01" for code, _ in errors):
            missing = set()
            for _, msg in errors:
                missing |= {p.strip("'*") for p in msg.split("{", 1)[1].split("}", 1)[0].split(", ")}
            if _attributes_cover_the_constructor(obj, missing):
                continue
        problems_found += [f"{key}: {code} {msg}" for code, msg in errors]
    assert not problems_found, f"{len(problems_found)} numpydoc problems:\n" + "\n".join(problems_found[:60])
