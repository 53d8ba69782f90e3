"""Exceptions raised by fedtheory."""


class InvalidParameterError(ValueError, TypeError):
    """A parameter is outside its accepted range or of the wrong type.

    Subclasses both ValueError and TypeError, as scikit-learn's error of the same name.
    """


class IncompatibleProblemError(ValueError):
    """The algorithm cannot run on this problem (e.g. a non-smooth regularizer)."""


class DataError(ValueError):
    """Client data are invalid (NaN/inf, wrong shape, empty client, bad labels)."""
