"""Publication-quality rate plots from results tables (library code: returns Figures, never shows).

The tables are those of :func:`fedtheory.reporting.sweep.sweep` (``results.parquet``) or any frame with a
``run_id``, ``param_*`` columns and history metrics.

Conventions shared by every figure of the project (the command line, the ``fedtheory verify``
report and the scripts in ``figures/``):

* one curve per **setting**: runs that agree on every ``param_*`` column except the seed
  (:func:`curve_groups`); the curve is the mean over the setting's seeds, with a min-max band;
* curve ``j`` gets the colour/line-style pair :func:`curve_style` ``(j)``: ten colours, then the
  same ten colours with the next line style, so no pair repeats before 40 curves;
* a theorem's bound variant ("printed", "corrected", ...) always has the colour and line style of
  :data:`BOUND_STYLES` (:func:`bound_style`);
* accuracies are drawn on a linear axis, suboptimality, gradient norms and distances on a
  logarithmic one (:func:`log_axis`); legends sit outside the data.

Layout: :mod:`~fedtheory.plotting.styles` (labels, colours, line styles),
:mod:`~fedtheory.plotting.axes` (limits, ticks, off-axis marks, legends),
:mod:`~fedtheory.plotting.tables` (filters, settings, names), :mod:`~fedtheory.plotting.figures`
(the figures) and :mod:`~fedtheory.plotting.save` (saving). They import matplotlib where they draw.

May import matplotlib, pandas and the foundations (``fedtheory.registry`` for the algorithms'
names, ``fedtheory._argcheck``); never the run engine, the theory or the reporting layer, which
call it.
"""
from .styles import (  # noqa: F401
    X_LABELS, Y_LABELS, X_ALIASES, LOG_METRICS, MARKERS, LINESTYLES, BOUND_STYLES,
    OTHER_BOUND_STYLES, PREDICTED_COLOR, curve_style, bound_style, log_axis)
from .axes import (  # noqa: F401
    MAX_DECADES, LOG_RANGE, log_limits, linear_limits, value_ticks, log_ticks, mark_off_axis,
    off_axis_handles, legend_outside)
from .tables import (  # noqa: F401
    default_metric, algorithm_name, param_name, describe_filters, filter_table, varying_params,
    curve_groups)
from .figures import rate_plot, results_figure, bound_vs_T  # noqa: F401
from .save import MAX_PIXELS, save_figure  # noqa: F401

__all__ = [
    'X_LABELS', 'Y_LABELS', 'X_ALIASES', 'LOG_METRICS', 'MARKERS', 'LINESTYLES', 'BOUND_STYLES',
    'OTHER_BOUND_STYLES', 'PREDICTED_COLOR', 'curve_style', 'bound_style', 'log_axis',
    'MAX_DECADES', 'LOG_RANGE', 'log_limits', 'linear_limits', 'value_ticks', 'log_ticks',
    'mark_off_axis', 'off_axis_handles', 'legend_outside', 'default_metric', 'algorithm_name',
    'param_name', 'describe_filters', 'filter_table', 'varying_params', 'curve_groups', 'rate_plot',
    'results_figure', 'bound_vs_T', 'MAX_PIXELS', 'save_figure']
