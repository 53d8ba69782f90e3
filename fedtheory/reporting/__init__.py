"""The reporting and command-line layer: what turns runs into studies and reports.

- :mod:`.config`: TOML configurations (a problem, a run, a grid) and the problem factories they name;
  :mod:`.toml_text` the configuration's text for error messages (the line of every key);
- :mod:`.sweep`: grids of runs in parallel (joblib/loky, or Dask through :mod:`.dask_sweep`), stored run
  by run and resumable; :mod:`.points` one point of a sweep (its run, its rows, the sweep's errors);
- :mod:`.results`: the stored result tables;
- :mod:`.verification`: ``fedtheory verify``'s checks (every theorem's cases and verdicts), and
  :mod:`.verify_report` its report (tables, figures, Markdown);
- :mod:`.errata`: the errata table of the papers' theorems and proof steps;
- :mod:`.describe`: what a name is (``ft.describe``, ``fedtheory describe``);
- the command line's commands, which :mod:`fedtheory.__main__` parses and dispatches to, importing
  the command's module only then (``fedtheory --help`` loads none of them): :mod:`.run_commands`
  (demo, run, sweep), :mod:`.theory_commands` (list, describe, verify, errata, falsify) and
  :mod:`.plot_command` (plot); :mod:`.commands` what they share (the usage error, the checks of
  output paths).

May import everything below it: the run engine (:mod:`fedtheory.runs`), the theory, the ground
truth, plotting and the foundations. Nothing in the library below imports it.
"""
