"""What a name is: :func:`describe` (``ft.describe``) answers for an algorithm, a problem factory or a
registered theorem or lemma, and :func:`describe_text` words its answer as ``fedtheory describe NAME``
prints it."""
from __future__ import annotations

import inspect

from .config import factories, factory_call
from .._argcheck import did_you_mean
from ..exceptions import InvalidParameterError
from ..registry import ALGORITHMS, algorithms, import_hint
from ..theory import CASES, SPECS, THEOREMS, is_lemma
from ..theory.engine import parameters


def describe(name, conditions=True):
    """What a name is, as a dict: an algorithm, a problem factory or a registered theorem.

    * an algorithm: ``kind`` "algorithm", hyperparameters with defaults, paper reference,
      communication per client, traceable sequences, the ``scalars`` it logs in the history
      (name: description), the docstring's summary;
    * a problem factory (``problems.<name>``, ``vision.image_problem`` or one registered with
      :func:`fedtheory.registry.register_problem`: the names a configuration's ``factory``
      accepts): ``kind`` "problem factory", how it is called in Python (``call``), its
      parameters with defaults (``"required"`` for those without one) and the docstring's
      summary;
    * a theorem or a lemma (a proof step): ``kind`` "theorem" or "lemma", its ``proof`` (the
      lemmas it rests on, in proof order) and ``proof_of`` (the theorems whose proof uses it),
      the algorithm it measures, the statement (its equations),
      the reference, the measured ``quantity``, the ``parameters`` it accepts with their
      defaults (from its setup function's signature: what ``validation.verify(name, problem,
      **params)`` takes; ``"required"`` for one without a default), the ``assumptions`` of its
      function class, its ``conforming_space`` (the summary of its declared space for
      ``validation.falsify``, None when it declares none), the variants with the condition
      roles each requires, its documented
      ``errata`` (label, where, the correcting variant, what is wrong), and with
      ``conditions`` every condition with its role, evaluated on the theorem's first default
      case of ``fedtheory verify --quick`` (named in ``conditions_case``; this runs it).

    Raises InvalidParameterError listing the known names when ``name`` is none of these.

    Parameters
    ----------
    name : str
        An algorithm (:func:`algorithms`), a problem factory or a registered theorem
        (:func:`validation.theorems`).
    conditions : bool, default True
        For a theorem, also evaluate every condition on its first default case (this runs it).

    Returns
    -------
    dict
        ``name``, ``kind`` and the fields of that kind listed above (what ``fedtheory describe
        NAME`` prints).

    Examples
    --------
    >>> import fedtheory as ft
    >>> ft.describe("fedprox")["hyperparameters"]
    {'mu': 0.01, 'server_lr': 1.0}
    >>> sorted(ft.describe("fedspeed.theorem_4_4", conditions=False)["variants"])
    ['corrected', 'derived', 'printed']
    >>> ft.describe("quadratic")["parameters"]["heterogeneity"]
    0.0
    >>> ft.describe("fedspeed.theorem_4_4", conditions=False)["parameters"]["local_steps"]
    4
    """
    if name in SPECS:
        return _describe_theorem(SPECS[name], conditions)
    if name in algorithms():
        cls = ALGORITHMS[name]
        # ``comm`` may depend on the hyperparameters (a property, e.g. Mime's variant): its defaults'
        comm = cls.comm if isinstance(cls.comm, tuple) else cls().comm
        return {"name": cls.name, "kind": "algorithm", "reference": cls.reference,
                "hyperparameters": cls.hyperparameters(),
                "communication_per_client": {"down": comm[0], "up": comm[1]},
                "traceables": {k: f"{src}: {text}" for k, (src, text) in cls.traceables.items()},
                "scalars": dict(cls.scalars),
                "doc": _summary(cls.__doc__)}
    table = factories()
    if name in table:
        fn = table[name]
        params = {}
        for p, par in inspect.signature(fn).parameters.items():
            if par.kind in (par.VAR_POSITIONAL, par.VAR_KEYWORD):
                params[("*" if par.kind == par.VAR_POSITIONAL else "**") + p] = "more arguments"
            else:
                params[p] = "required" if par.default is inspect.Parameter.empty else par.default
        return {"name": name, "kind": "problem factory", "call": factory_call(name, fn),
                "parameters": params, "doc": _summary(fn.__doc__)}
    raise InvalidParameterError(
        f"{name!r} is neither an algorithm ({', '.join(algorithms())}), a problem factory "
        f"({', '.join(sorted(table))}) nor a theorem ({', '.join(sorted(SPECS))})."
        f"{did_you_mean(name, [*algorithms(), *table, *SPECS])}{import_hint()}")


def _summary(doc):
    """The first paragraph of a docstring, on one line."""
    paras = (doc or "").strip().split("\n\n")
    return " ".join(line.strip() for line in paras[0].splitlines()) if paras else ""


def _describe_theorem(spec, conditions):
    space = None
    if spec.cases is not None:
        space = _summary(getattr(spec.cases, "__doc__", "")) or "declared (its function has no docstring)"
    out = {"name": spec.name, "kind": "lemma" if is_lemma(spec.name) else "theorem", "algorithm": spec.algorithm,
           "statement": spec.statement, "proof": list(spec.proof),
           "proof_of": sorted(n for n, s in SPECS.items() if spec.name in s.proof),
           "reference": spec.reference, "quantity": spec.quantity or "(not named)",
           "parameters": parameters(spec),
           "assumptions": [{"capability": cap, "name": text} for cap, text in spec.assumptions],
           "conforming_space": space, "default_variant": spec.default_variant,
           "variants": {v: {"description": var.description, "requires": list(var.requires)}
                        for v, var in spec.variants.items()},
           "tightness": ("validation.tightness (PEP registered)" if callable(spec.pep)
                         else spec.pep or "no PEP registered"),
           "errata": [{"label": e.label, "where": e.where, "variant": e.variant, "why": e.why} for e in spec.errata]}
    if not conditions:
        return out
    cases = CASES[spec.name](True)[0] if spec.name in CASES else []
    if not cases:
        out["conditions"], out["conditions_case"] = [], "(no default case registered)"
        return out
    case = cases[0]
    v = THEOREMS[spec.name](case.build(), variant=spec.default_variant, **case.kwargs)
    out["conditions_case"] = case.label
    out["conditions"] = [{"name": c.name, "role": getattr(c, "role", "stated"), "value": float(c.value),
                          "limit": float(c.limit), "ok": bool(c.ok)} for c in v.conditions]
    return out


def describe_text(info):
    """``fedtheory describe``'s human-readable text (UTF-8) of :func:`describe`'s dict.

    Parameters
    ----------
    info : dict
        What :func:`describe` returned for a name.

    Returns
    -------
    str
        The lines ``fedtheory describe NAME`` prints, by kind: a theorem's statement, variants,
        conditions and errata; a problem factory's call and parameters; an algorithm's
        hyperparameters, communication, traceable sequences and logged scalars.
    """
    lines = []
    kind = info.get("kind")
    if kind in ("theorem", "lemma"):
        lines += [f"{info['name']}: {kind} (measures algorithm {info['algorithm']!r})",
                  f"  statement: {info['statement']}", f"  reference: {info['reference']}"]
        if info.get("proof"):
            lines.append("  proof, in order (fedtheory verify --lemmas): " + ", ".join(info["proof"]))
        if info.get("proof_of"):
            lines.append("  in the proof of: " + ", ".join(info["proof_of"]))
        if "quantity" in info:
            lines.append(f"  quantity (measured left-hand side): {info['quantity']}")
        if "parameters" in info:
            lines.append("  parameters (validation.verify(NAME, problem, **params); also variant=, algorithm=):")
            lines += [f"    {k} ({v})" if v in ("required", "more arguments") else f"    {k} = {v!r}"
                      for k, v in info["parameters"].items()]
        if info.get("assumptions") is not None:
            lines.append("  assumptions (from the problem's components): "
                         + ("; ".join(f"{a['name']} ({a['capability']})" for a in info["assumptions"])
                            or "none declared"))
        if "conforming_space" in info:
            lines.append("  conforming space (validation.falsify): "
                         + (info["conforming_space"] or "none declared"))
        lines.append("  variants:")
        for v, var in info["variants"].items():
            default = " (default)" if v == info["default_variant"] else ""
            lines.append(f"    {v}{default}: {var['description'].rstrip('.')}; requires the "
                         f"{' and '.join(var['requires'])} conditions")
        if "conditions" in info:
            lines.append(f"  conditions (role, value vs limit on the default case {info['conditions_case']!r}):")
            for c in info["conditions"]:
                lines.append(f"    [{c['role']}] {c['name']}: {c['value']:.4g} vs {c['limit']:.4g} "
                             f"({'ok' if c['ok'] else 'fails'})")
        if "tightness" in info:
            lines.append(f"  tightness: {info['tightness']}")
        if info.get("errata"):
            lines.append("  errata (measured by 'fedtheory errata'):")
            lines += [f"    {e['label']}, {e['where']}: {e['why']} (variant {e['variant']!r})" for e in info["errata"]]
    elif kind == "problem factory":
        lines += [f"{info['name']}: problem factory ({info['call']})", f"  {info['doc']}", "  parameters:"]
        lines += [f"    {k} ({v})" if v in ("required", "more arguments") else f"    {k} = {v!r}"
                  for k, v in info["parameters"].items()]
    else:
        lines += [f"{info['name']}: algorithm", f"  {info['doc']}", f"  reference: {info['reference']}",
                  "  hyperparameters:"]
        lines += [f"    {k} = {v!r}" for k, v in info["hyperparameters"].items()]
        c = info["communication_per_client"]
        lines.append(f"  communication per participating client and round: {c['down']} down, {c['up']} up (d-vectors)")
        lines.append("  traceable sequences (run(..., trace=...)):")
        lines += [f"    {k}: {v}" for k, v in info["traceables"].items()]
        if info.get("scalars"):
            lines.append("  scalars logged in the history (a column each, at evaluated rounds):")
            lines += [f"    {k}: {v}" for k, v in info["scalars"].items()]
    return "\n".join(lines)
