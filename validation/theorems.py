"""Registry of theorem checks (``validation.verify``).

Each paper's theorems are registered by its own module under ``fedtheory/theory/``; none
ships with this release, so :func:`theorems` is empty until they land.
"""

THEOREMS = {}


def theorems():
    """Sorted names of the registered theorem checks."""
    return sorted(THEOREMS)


def verify(name, problem, **kwargs):
    """Run the registered check ``name`` on ``problem`` (see API.md)."""
    if name not in THEOREMS:
        known = ", ".join(sorted(THEOREMS)) or "none registered yet"
        raise ValueError(f"The 'name' parameter of verify must be a registered theorem ({known}). "
                         f"Got {name!r} instead.")
    return THEOREMS[name](problem, **kwargs)
