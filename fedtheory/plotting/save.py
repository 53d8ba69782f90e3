"""Saving a figure: the one save helper of every figure of the project (size capped, closed after).

Part of :mod:`fedtheory.plotting`, which re-exports its public names."""
from __future__ import annotations


#: The largest side, in pixels, of a saved figure (:func:`save_figure`).
MAX_PIXELS = 2400


def save_figure(fig, path, dpi=150, pdf=False, tight=False, max_pixels=MAX_PIXELS):
    """Save ``fig`` to ``path`` and close it: the one save helper of the project's figures.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    path : str or pathlib.Path
        Output file; its suffix picks the format (``.png``, ``.pdf``, ``.svg``, ...).
    dpi : float
        Resolution of raster formats, lowered where needed so that no side exceeds ``max_pixels``.
    pdf : bool
        Also write a PDF beside it (same name, ``.pdf``), for papers.
    tight : bool
        Crop to the drawn content (``bbox_inches="tight"``: legends outside the axes included);
        figures with a constrained layout need not.
    max_pixels : int
        The largest side in pixels of a raster file.

    Returns
    -------
    list of pathlib.Path
        The files written.

    Examples
    --------
    >>> import tempfile, pathlib, matplotlib.pyplot as plt
    >>> from fedtheory.plotting import save_figure
    >>> fig, ax = plt.subplots(); _ = ax.plot([1, 2])
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> [p.name for p in save_figure(fig, d / "a.png", pdf=True)]
    ['a.png', 'a.pdf']
    """
    import matplotlib.pyplot as plt
    from pathlib import Path
    path = Path(path)
    w, h = fig.get_size_inches()
    kw = {"bbox_inches": "tight"} if tight else {}
    fig.savefig(path, dpi=min(dpi, max_pixels / max(w, h)), **kw)
    out = [path]
    if pdf and path.suffix.lower() != ".pdf":
        fig.savefig(path.with_suffix(".pdf"), **kw)
        out.append(path.with_suffix(".pdf"))
    plt.close(fig)
    return out
