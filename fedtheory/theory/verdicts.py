"""The one vocabulary of verdicts: every table, report and figure writes and reads these words.

A verdict cell starts with one of the words below; what follows a colon is the reason
("NOT APPLICABLE: S1 fails", "UNRESOLVED: within the resolution floor"). ``fedtheory verify``,
``fedtheory errata``, ``fedtheory falsify`` and the figures read cells with the predicates here,
never with string literals of their own.

Examples
--------
>>> from fedtheory.theory.verdicts import DOCUMENTED_VIOLATION, is_failure, is_violated, unexpected
>>> DOCUMENTED_VIOLATION
'VIOLATED (documented counterexample)'
>>> is_violated(DOCUMENTED_VIOLATION), is_failure(DOCUMENTED_VIOLATION)
(True, False)
>>> is_violated(unexpected(False)), is_failure(unexpected(False)), is_failure(unexpected(True))
(True, True, True)
"""

HOLDS = "holds"
VIOLATED = "VIOLATED"
UNRESOLVED = "UNRESOLVED"
NOT_APPLICABLE = "NOT APPLICABLE"
UNEXPECTED = "UNEXPECTED"
#: A tightness row whose certified worst case lies below the bound (``fedtheory verify --tightness``).
OK = "OK"
#: A violation that a registered case expects (the paper's documented counterexample).
DOCUMENTED_VIOLATION = f"{VIOLATED} (documented counterexample)"
#: Every verdict word, in the order a summary counts them.
WORDS = (HOLDS, OK, VIOLATED, UNRESOLVED, NOT_APPLICABLE, UNEXPECTED)


def unexpected(holds):
    """The cell of a case whose verdict contradicts what it expects: "UNEXPECTED: holds" or
    "UNEXPECTED: VIOLATED".

    Parameters
    ----------
    holds : bool
        Whether the measured bound held.

    Returns
    -------
    str
        The verdict word.
    """
    return f"{UNEXPECTED}: {HOLDS if holds else VIOLATED}"


def word(cell):
    """The verdict word a cell starts with (one of :data:`WORDS`), or None.

    Parameters
    ----------
    cell : str
        A verdict cell.

    Returns
    -------
    str or None
        The verdict word, or None for another text.

    Examples
    --------
    >>> word("NOT APPLICABLE: S1 fails"), word("holds (vacuous: bound > 1e3 x measured)")
    ('NOT APPLICABLE', 'holds')
    """
    cell = str(cell)
    return next((w for w in WORDS if cell.startswith(w)), None)


def is_violated(cell):
    """Whether a cell says the bound was violated: VIOLATED, documented or not, or an unexpected
    violation.

    Parameters
    ----------
    cell : str
        A verdict cell.

    Returns
    -------
    bool
        True for a violation.
    """
    cell = str(cell)
    return cell.startswith(VIOLATED) or cell == unexpected(False)


def is_failure(cell):
    """Whether a cell fails a check: a violation no registered case expects, or an UNEXPECTED
    verdict (``fedtheory verify`` then exits 1).

    Parameters
    ----------
    cell : str
        A verdict cell.

    Returns
    -------
    bool
        True for a failure.
    """
    cell = str(cell)
    return cell.startswith(UNEXPECTED) or (cell.startswith(VIOLATED) and cell != DOCUMENTED_VIOLATION)


def is_not_applicable(cell):
    """Whether a cell says a condition of the theorem fails (no verdict).

    Parameters
    ----------
    cell : str
        A verdict cell.

    Returns
    -------
    bool
        True for NOT APPLICABLE.
    """
    return str(cell).startswith(NOT_APPLICABLE)
