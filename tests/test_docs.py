"""Every Examples section of the public modules runs (doctest), and every public entry point has docs."""
import doctest
import importlib

import pytest

import fedtheory as ft

MODULES = (["fedtheory", "fedtheory.runs.runner", "fedtheory.runs.schedules", "fedtheory.theory.fedspeed",
            "fedtheory.theory.localdescent", "fedtheory.theory.fedsps", "fedtheory.theory.feddeper",
            "fedtheory.theory.pfedfbe", "fedtheory.runs.metrics", "fedtheory.reporting.errata", "fedtheory.theory", "problems.lasso_settings",
            "fedtheory.theory.rates",
            "fedtheory.theory.verdicts", "fedtheory._threads",
            "problems.low_rank",
            "fedtheory.runs.topology",
            "fedtheory.reporting.config", "fedtheory.registry", "fedtheory._argcheck", "fedtheory.__main__",
            "fedtheory.reporting.results", "fedtheory.reporting.sweep", "fedtheory.plotting.styles", "fedtheory.plotting.axes",
            "fedtheory.plotting.tables", "fedtheory.plotting.figures", "fedtheory.plotting.save",
            "problems.regression", "problems.classification", "problems.synthetic", "problems.explicit",
            "problems.datasets", "problems.partition", "fedtheory.truth.optimum", "fedtheory.truth.recession", "fedtheory.truth.problem_constants", "validation.theorem_checks",
            "fedtheory.runs.trace", "fedtheory.theory.engine", "fedtheory.runs.participants",
            "fedtheory.runs.arrays", "fedtheory.backends.torch", "fedtheory.backends.torch.deep",
            "fedtheory.backends.torch.models", "problems.vision", "fedtheory.testing.strategies",
            "fedtheory.theory.falsify", "fedtheory.components.base", "fedtheory.reporting.verification",
            "fedtheory.theory.tightness", "fedtheory.theory.tightness.api", "fedtheory.theory.tightness.instances",
            "fedtheory.theory.tightness.pepit_adapter", "fedtheory.constants", "fedtheory.testing.draws"]
           + sorted({ft.get_algorithm(a).__module__ for a in ft.algorithms()}))


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    mod = importlib.import_module(name)
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0 and res.attempted > 0


@pytest.mark.parametrize("name", ft.algorithms())
def test_algorithm_docs_cite_paper_and_math(name):
    cls = ft.get_algorithm(name)
    module = importlib.import_module(cls.__module__)
    assert cls.reference and "References" in cls.__doc__ and "Examples" in cls.__doc__
    assert ".. math::" in module.__doc__


def test_public_factories_have_examples():
    import problems
    import validation
    for f in (problems.least_squares, problems.lasso, problems.logistic, problems.quadratic, problems.libsvm,
              problems.breast_cancer, problems.digits, problems.partition_indices, validation.ground_truth, validation.infimum,
              validation.constants, ft.run, problems.explicit_quadratic, validation.verify,
              problems.vision.load_mnist, problems.vision.load_digits_images, problems.vision.image_problem):
        assert "Examples" in f.__doc__, f.__name__


def test_torch_entry_points_have_examples():
    pytest.importorskip("torch")
    from fedtheory.backends.torch import DeepProblem, models
    for f in (DeepProblem, models.mlp, models.cnn):
        assert "Examples" in f.__doc__, f.__name__
