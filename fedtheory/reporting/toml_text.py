"""The text of a TOML configuration, for error messages: the line of every key, ``[grid]``'s
nested tables as flat entries, integers outside TOML's range, values written as TOML, and a check's
one-line message rephrased as "expected ...; got ..." (:mod:`fedtheory.reporting.config` reads the
values with :mod:`tomllib` and names the file, line and key of an error with these)."""
from __future__ import annotations

import inspect
import json
import re


# ------------------------------------------------------------------------------- line numbers

_BARE = r"[A-Za-z0-9_-]+"
_BASIC = r'"(?:[^"\\\n]|\\.)*"'
_LITERAL = r"'[^'\n]*'"
_PART = rf"(?:{_BARE}|{_BASIC}|{_LITERAL})"
_DOTTED = rf"{_PART}(?:[ \t]*\.[ \t]*{_PART})*"
_HEADER = re.compile(rf"^\s*(\[\[?)\s*({_DOTTED})\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(rf"^\s*({_DOTTED})\s*=")
_PARTS = re.compile(_PART)


def _key_path(dotted):
    """The parts of a TOML key (``a."b.c".d`` -> ``("a", "b.c", "d")``)."""
    out = []
    for m in _PARTS.finditer(dotted):
        s = m.group(0)
        out.append(json.loads(s) if s.startswith('"') else s[1:-1] if s.startswith("'") else s)
    return tuple(out)


def _value_state(s, state):
    """Advance the scanner state ``(depth, string delimiter)`` over a value's text ``s``."""
    depth, quote = state
    i = 0
    while i < len(s):
        if quote:
            if quote in ('"', '"""') and s[i] == "\\":
                i += 2
                continue
            if s.startswith(quote, i):
                i += len(quote)
                quote = None
                continue
            i += 1
            continue
        for q in ('"""', "'''", '"', "'"):
            if s.startswith(q, i):
                quote = q
                i += len(q)
                break
        else:
            c = s[i]
            if c == "#":
                break
            depth += (c in "[{") - (c in "]}")
            i += 1
    if quote in ('"', "'"):             # single-line strings end with their line
        quote = None
    return depth, quote


def key_lines(text):
    """``{key path: line}`` of every table header and ``key =`` of a TOML text (1-based lines).

    A key's path starts with its table's (``[grid]`` then ``"problem.seed" = ...`` is
    ``("grid", "problem.seed")``; ``problem.seed = ...`` is ``("grid", "problem", "seed")``).
    Lines inside multi-line strings and arrays are skipped. Used for error messages only: the
    values themselves come from :mod:`tomllib`.

    Parameters
    ----------
    text : str
        The TOML text.

    Returns
    -------
    dict
        ``{key path: line}``.
    """
    lines, table, state = {}, (), (0, None)
    for n, line in enumerate(text.splitlines(), 1):
        if state != (0, None):                       # inside a multi-line value
            state = _value_state(line, state)
            continue
        m = _HEADER.match(line)
        if m:
            table = _key_path(m.group(2))
            lines.setdefault(table, n)
            continue
        m = _KEY.match(line)
        if m:
            path = table + _key_path(m.group(1))
            lines.setdefault(path, n)
            state = _value_state(line[m.end():], (0, None))
    return lines


def _flatten(d, prefix="", path=(), origins=None):
    """Nested tables of ``[grid]`` (dotted keys, ``[grid.problem]``) as ``"problem.key"`` entries.

    ``origins`` (a dict, filled when given) maps each entry to the key paths that spell it: a
    quoted ``"problem.dim"`` is ``("problem.dim",)``, ``problem.dim`` or ``dim`` in
    ``[grid.problem]`` is ``("problem", "dim")``; two paths for one entry are a duplicate.
    """
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}.", path + (k,), origins))
        else:
            out[prefix + k] = v
            if origins is not None:
                origins.setdefault(prefix + k, []).append(path + (k,))
    return out


_INT64 = (-2 ** 63, 2 ** 63 - 1)


def _big_int(value):
    """The first integer of a TOML value outside TOML's 64-bit range, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if not _INT64[0] <= value <= _INT64[1] else None
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for v in items:
        big = _big_int(v)
        if big is not None:
            return big
    return None


# ------------------------------------------------------------------------------- messages

_CHECK = re.compile(r"^The '(?P<param>[^']+)' parameter of (?P<caller>\S+) must be (?P<what>.+?)\. "
                    r"Got (?P<got>.+?) instead\.?(?P<hint> Did you mean .+\?)?$", re.S)


def _describe(value):
    """A value as written in TOML (true, "text", 1.5, [1, 2])."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(map(_describe, value)) + "]"
    return repr(value)


def _expectation(msg, args):
    """``(parameter, "expected ...; got ...")`` from a check_param message, or (None, msg)."""
    m = _CHECK.match(str(msg).strip())
    if not m:
        return None, str(msg)
    param, got, what = m.group("param"), m.group("got"), m.group("what")
    if param in args and got == repr(args[param]):
        got = _describe(args[param])
    if what.startswith("None or "):              # TOML has no None: leaving the key out is None
        what = what[len("None or "):] + " (or the key left out)"
    caller = {"run": "fedtheory.run"}.get(m.group("caller"), m.group("caller"))
    hint = f".{m.group('hint')}" if m.group("hint") else ""
    return param, f"expected {what} (argument of {caller}); got {got}{hint}"


def _mentioned(msg, args, keys):
    """The first of ``keys`` an error message names: as 'key', then by its (string) value in
    quotes, then as key=, then as a bare word; None if none is named."""
    for k in keys:
        if f"'{k}'" in msg:
            return k
    for k in keys:
        v = args[k]
        if isinstance(v, str) and v and (f"'{v}'" in msg or f'"{v}"' in msg):
            return k
    for pat in (r"\b{}=", r"\b{}\b"):
        for k in keys:
            if re.search(pat.format(re.escape(k)), msg):
                return k
    return None


_TYPES = {bool: "a bool (true or false)", int: "an int", float: "a float", str: "a str"}


def _default_type_error(value, default):
    """What a TOML value of the wrong type for a factory argument (judged by its default) is."""
    if default is None or default is inspect.Parameter.empty:
        return None
    kind = type(default)
    if kind is bool:
        ok = isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif kind is str:
        ok = isinstance(value, str)
    else:
        return None
    if ok:
        return None
    return f"expected {_TYPES[kind]} (the default is {_describe(default)}); got {_describe(value)}"
