"""Sphinx configuration of the fedtheory documentation site.

Build (warnings are errors): ``python -m sphinx -W -b html docs DIR``; needs the ``[docs]`` extra.
The pages in this folder stay plain Markdown that GitHub renders too; MyST reads them here.
"""
import os
import sys
import warnings

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)                 # the checkout's fedtheory, problems and validation

os.environ.setdefault("MPLBACKEND", "Agg")
warnings.filterwarnings("ignore", category=UserWarning, message="Matplotlib is currently using agg")

import fedtheory  # noqa: E402

project = "fedtheory"
author = "the fedtheory developers"
copyright = "the fedtheory developers"
release = version = fedtheory.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "sphinxcontrib.mermaid",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
# README.md is shown inside index.rst (included), so it is not a page of its own.
exclude_patterns = ["_build", "README.md", "examples/GALLERY_HEADER.rst", "**.ipynb_checkpoints"]

# -- MyST: the Markdown pages ------------------------------------------------------------------
# dollarmath: $...$ and $$...$$ (the notation GitHub renders too); heading anchors so that
# [text](page.md#a-heading) links resolve; relative links to .md pages become cross-references.
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_fence_as_directive = ["mermaid"]        # ```mermaid blocks are pictures (docs/architecture.md), as on GitHub
myst_heading_anchors = 3
# Pages link to files of the repository outside docs/ (examples/sweep.toml): on GitHub they open
# the file; here they point to the same file in the repository.
myst_url_schemes = {"http": None, "https": None, "mailto": None}

# -- API reference: autosummary + numpydoc -----------------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": False}
autodoc_typehints = "none"
numpydoc_show_class_members = False        # classes list their attributes in the docstring
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
# numpydoc's checks fail the build (-W) on every object of the API pages: a docstring (GL08), a
# one-line summary that starts with a capital and ends with a period (SS01-SS04, SS06), every
# parameter documented in order with its type and a description (PR01-PR10), and a described
# Returns section (RT01-RT03). Skipped: SS05 ("summary must start with an infinitive verb"), which
# takes any first word ending in "s" for a verb in the third person ("Ticks", "Names",
# "Metropolis-Hastings", "FedDeper's"); the summaries here start with verbs or with nouns.
numpydoc_validation_checks = {"GL08", "SS01", "SS02", "SS03", "SS04", "SS06", "PR01", "PR02", "PR03", "PR04", "PR05",
                              "PR06", "PR07", "PR08", "PR09", "PR10", "RT01", "RT02", "RT03"}
# Records that users receive rather than build describe their fields under "Attributes"
# (numpydoc's convention for results), so PR01 does not apply to them; instead
# _check_record_attributes below fails the build when a dataclass field is not documented there.
RECORDS = ("fedtheory.RunResult", "validation.GroundTruth", "validation.Constants", "validation.Tightness",
           "validation.Infimum",
           "fedtheory.theory.Verification", "fedtheory.runs.trace.Trace", "fedtheory.runs.trace.RoundTrace",
           "fedtheory.algorithms.context.RoundContext", "validation.Falsification")
numpydoc_validation_exclude = {"^" + name.replace(".", r"\.") + "$" for name in RECORDS}

# -- Gallery: small rate plots, run on every build ---------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "show_memory": False,
}



def _check_record_attributes(app, what, name, obj, options, lines):
    """Warn (an error under -W) when a field of a documented record is missing from its Attributes."""
    import dataclasses

    from numpydoc.docscrape import ClassDoc
    from sphinx.util import logging
    if name not in RECORDS or not dataclasses.is_dataclass(obj):
        return
    documented = {part.strip() for p in ClassDoc(obj, config={"show_class_members": False})["Attributes"]
                  for part in p.name.split(",")}
    missing = [f.name for f in dataclasses.fields(obj) if f.name not in documented]
    if missing:
        logging.getLogger(__name__).warning(f"{name}: fields {missing} are not in its Attributes section")


def _documented_names():
    """Full names of the objects api.rst lists (autosummary entries resolved by currentmodule)."""
    import re
    names, module = set(), None
    for line in open(os.path.join(os.path.dirname(__file__), "api.rst"), encoding="utf-8"):
        if m := re.match(r"\.\. currentmodule:: (\S+)", line):
            module = m.group(1)
        elif m := re.match(r"   ~?([A-Za-z_][\w.]*)\s*$", line):
            names.add(f"{module}.{m.group(1)}")
    return names


def _check_api_coverage(app):
    """Warn (an error under -W) when a public name is missing from the API reference: every
    registered algorithm and every name in ``__all__`` of fedtheory, problems and validation
    (data tables and subpackages aside)."""
    import importlib

    from sphinx.util import logging
    import fedtheory as ft
    want = {f"{c.__module__}.{c.__qualname__}" for c in map(ft.get_algorithm, ft.algorithms())}
    for mod in ("fedtheory", "problems", "validation"):
        m = importlib.import_module(mod)
        want |= {f"{mod}.{n}" for n in m.__all__ if callable(getattr(m, n)) and not n.isupper()}
    missing = sorted(want - _documented_names())
    if missing:
        logging.getLogger(__name__).warning(f"api.rst does not document {missing}")


def setup(app):
    app.connect("autodoc-process-docstring", _check_record_attributes, priority=100)
    app.connect("builder-inited", _check_api_coverage)


html_theme = "alabaster"
html_title = f"fedtheory {release}"
html_static_path = []
html_theme_options = {"description": "A testbed for federated-optimization theory",
                      "fixed_sidebar": True}
