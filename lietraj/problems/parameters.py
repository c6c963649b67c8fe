"""The kinds of value a builder's parameters take (of the ready problems and scenarios, or a user's), read from
their annotations, so that a command line or a parameter grid can check a value before anything is built."""

from __future__ import annotations

import inspect
import math
from numbers import Integral, Real


def _number(v) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v)


def expected_kind(value, parameter: inspect.Parameter) -> str:
    """What ``parameter`` takes ("a finite number", "an integer", "a name", or "3 finite numbers" for a point whose
    default has three; then " or None" where None is allowed), if ``value`` is not of that kind; "" if it is, or
    if the kind is not known. The kind comes from the annotation (a string: the builders use postponed annotations),
    else from a tuple default (a point)."""
    annotation, default = parameter.annotation, parameter.default
    if annotation is inspect.Parameter.empty:
        kind, none_allowed = ("point" if isinstance(default, tuple) else None), default is None
    else:
        names = {t.strip() for t in str(annotation if isinstance(annotation, str) else
                                         getattr(annotation, "__name__", "")).split("|")}
        kind = "number" if "float" in names else "integer" if "int" in names else "name" if "str" in names else None
        none_allowed = "None" in names or default is None
    if kind is None or (value is None and none_allowed):
        return ""
    orelse = " or None" if none_allowed else ""
    if kind == "number" and not _number(value):
        return f"a finite number{orelse}"
    if kind == "integer" and not (isinstance(value, Integral) and not isinstance(value, bool)):
        return f"an integer{orelse}"
    if kind == "name" and not isinstance(value, str):
        return f"a name{orelse}"
    if kind == "point" and not (isinstance(value, (tuple, list)) and len(value) == len(default)
                                and all(_number(v) for v in value)):
        return f"{len(default)} finite numbers{orelse}"
    return ""
