"""The parameter points of a batch of solves: a grid (every combination of each parameter's values, the first
parameter varying slowest) or a list of points, checked against a problem builder's signature before anything is
built or any worker started.

A value is checked against the kind the builder's annotation (or else its default) names: a finite number for a
``float``, an integer for an ``int``, a name for a ``str``, as many finite numbers as the default for a point (a
tuple default); ``None`` where the annotation or default allows it. Anything else is the builder's to check.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from numbers import Integral, Real

import numpy as np

from lietraj.problems.parameters import expected_kind


class GridError(ValueError):
    """A parameter grid or list of points that cannot be solved: an unknown parameter, no values, a value of the
    wrong kind."""


def grid_points(axes: Mapping[str, Sequence]) -> list[dict]:
    """Every combination of the values of ``axes`` (parameter -> values), as one dict per point, the first
    parameter varying slowest (``itertools.product`` order)."""
    for key, values in axes.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence | np.ndarray):
            raise GridError(f"grid: the values of {key!r} must be a list, got {values!r}")
        if len(values) == 0:
            raise GridError(f"grid: {key!r} has no values")
    keys = list(axes)
    return [dict(zip(keys, combination)) for combination in itertools.product(*(_plain(axes[k]) for k in keys))]


def _plain(values) -> list:
    """``values`` with numpy scalars as Python numbers, so that rows, file metadata and messages show ``0.02``."""
    return [v.item() if isinstance(v, np.generic) else v for v in values]


def parse_axis(text: str) -> tuple[str, list]:
    """``KEY=START:STOP:COUNT`` (COUNT evenly spaced numbers from START to STOP, both included, to 12 significant
    digits; integers when START and STOP are integers and every value is one) or ``KEY=V1,V2,...`` (Python
    literals, points such as ``(0.4,0,1.2)`` included, or else names): the key and its values. GridError names
    the text when it is neither, when COUNT is not a positive integer (or is 1 with START != STOP), or when a value
    repeats."""
    key, sep, spec = text.partition("=")
    if not sep or not key.isidentifier():
        raise GridError(f"--grid {text}: expected KEY=START:STOP:COUNT or KEY=V1,V2,...")
    if not spec.strip():
        raise GridError(f"--grid {text}: no values")
    if ":" in spec:
        parts = [_literal(p) for p in spec.split(":")]
        if len(parts) != 3 or not all(isinstance(p, Real) and not isinstance(p, bool) for p in parts[:2]):
            raise GridError(f"--grid {text}: expected KEY=START:STOP:COUNT with START and STOP numbers")
        start, stop, count = parts
        if not (isinstance(count, Integral) and not isinstance(count, bool) and count >= 1):
            raise GridError(f"--grid {text}: COUNT must be a positive integer, got {count!r}")
        if not (math.isfinite(start) and math.isfinite(stop)):
            raise GridError(f"--grid {text}: START and STOP must be finite")
        if count == 1 and start != stop:
            raise GridError(f"--grid {text}: a range of 1 value needs START = STOP (or list the value: {key}={start})")
        if count > 1 and start == stop:
            raise GridError(f"--grid {text}: an empty range: START = STOP gives the same value {count} times")
        values = np.linspace(start, stop, count)
        integral = isinstance(start, Integral) and isinstance(stop, Integral) and np.all(values == np.round(values))
        # to 12 digits, the values typed: 0.02 in 0.01:0.05:5 and in 0.01:0.05:9 is one point of a sweep, not two
        return key, [int(v) for v in values] if integral else [float(f"{v:.12g}") for v in values]
    try:  # a list of literals, points included: target=(0.4,0,1.2),(0.5,0,1.1)
        values = list(ast.literal_eval(f"[{spec}]"))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):  # names among them: lift=None,FL_FOOT
        values = [_literal(v.strip()) for v in spec.split(",") if v.strip()]
    repeated = sorted({repr(v) for v in values if values.count(v) > 1})
    if repeated:
        raise GridError(f"--grid {text}: {', '.join(repeated)} given more than once")
    return key, values


def _literal(text: str) -> object:
    """``text`` as a Python literal (a number, a tuple, None) or else the string itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def check_points(build: Callable, points: Sequence[Mapping], what: str) -> None:
    """Raise GridError, naming ``what`` (e.g. "problem 'squat'"), the parameter and the point, if ``points`` is
    empty, or a point gives ``robot``, a parameter ``build`` does not take, or a value not of its kind (module
    docstring)."""
    if len(points) == 0:
        raise GridError(f"{what}: no parameter points to solve")
    accepted = {name: p for name, p in inspect.signature(build).parameters.items() if name != "robot"}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
    for i, point in enumerate(points):
        if not isinstance(point, Mapping):
            raise GridError(f"{what}: point {i} must be a dict of parameters, got {point!r}")
        for key, value in point.items():
            if key == "robot":
                raise GridError(f"{what}: the robot is an argument of its own, not a parameter of point {i}")
            if key not in accepted:
                if takes_any:
                    continue
                raise GridError(f"{what} has no parameter {key!r}; its parameters: {', '.join(accepted)}")
            problem = expected_kind(value, accepted[key])
            if problem:
                raise GridError(f"{what}: {key}={value!r} (point {i}): expected {problem}")
