"""Exceptions raised by fedtheory."""


class InvalidParameterError(ValueError, TypeError):
    """A parameter is outside its accepted range or of the wrong type.

    Subclasses both ValueError and TypeError, as scikit-learn's error of the same name.
    """


class IncompatibleProblemError(ValueError):
    """The algorithm cannot run on this problem (e.g. a non-smooth regularizer)."""


class DataError(ValueError):
    """Client data are invalid (NaN/inf, wrong shape, empty client, bad labels)."""


class FedSpeedServerWarning(UserWarning):
    """FedSpeed's ``server="alg1"`` (Algorithm 1, line 16, as printed) runs under partial
    participation, where it stalls or ends worse than its start; ``server="dyn"`` converges.

    A ``UserWarning`` (not a ``RuntimeWarning``): it is about the method chosen, not about the
    numerics of the run. Silence it with
    ``warnings.filterwarnings("ignore", category=FedSpeedServerWarning)``.
    """


class UncertifiedOptimumError(ValueError):
    """:func:`fedtheory.truth.ground_truth` could not certify the optimum to its tolerance.

    The message names the problem, its datafit and regularizer, the residual and the accuracy
    the solver could prove (docs/ground-truth.md). A ``ValueError``: the sweep and the command line report it in one line.
    """


class UncertifiedOptimumWarning(RuntimeWarning):
    """A ground truth that is not certified was returned.

    ``ground_truth(..., certify="warn")`` returned a result marked ``certified=False``: its F* is not
    known to the tolerance, and runs measured against it show suboptimality as NaN.
    """


class DeclarationError(TypeError):
    """An algorithm class declares something invalid (a hyperparameter without constraints): a
    TypeError, raised when the class is used; the public check suite reports it as a failed check."""


class ConfigError(ValueError):
    """A configuration file is invalid; the message names the file, line and key.

    Raised by :func:`fedtheory.reporting.config.load` (``fedtheory run`` and ``fedtheory sweep``).
    """
