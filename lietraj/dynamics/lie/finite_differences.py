"""Geometric finite differences: numerical Jacobians of functions of a robot state, in the Lie algebra.

Seed 000 eq. (82) perturbs the base pose on the group, ``H exp(δ e_i^)``, never in Euler angles or quaternion
components; the vector parts are perturbed additively. This module does the same with central differences,
for every component of the state at once::

    J[:, i] = (f(x ⊕ δ e_i) ⊖ f(x)  -  f(x ⊕ -δ e_i) ⊖ f(x)) / 2δ,   x ⊕ z = x exp(z),   z = [z_H; z_s; z_ν; z_ṡ]

so the columns are in the tangent basis every analytical derivative of lietraj uses (``StateSpace``): the
first ``nv`` columns are the derivative with respect to the configuration (``z_H`` in the body-twist chart,
then ``s``), the last ``nv`` with respect to the velocity. A group-valued output is measured in the right
chart at ``f(x)``: ``log(f(x)⁻¹ f(x ⊕ δ e_i))``. Central differences are second-order accurate, so with the
default ``δ = 1e-6`` a correct derivative matches to about 1e-8 relative on well-scaled problems.

Use it to check your own derivatives::

    J_num = numerical_jacobian(lambda x: my_residual(model, x), x)
    J_num, J_u_num = numerical_jacobian(lambda x, u: my_dynamics(model, x, u), x, u)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lietraj.dynamics.lie import se3
from lietraj.dynamics.lie.state import State, StateSpace

OUTPUTS = ("vector", "state", "se3")


def _space(x: State) -> StateSpace:
    if not isinstance(x, State):
        raise TypeError(f"numerical_jacobian: x must be a State, got {type(x).__name__}")
    return StateSpace(x.s.shape[0], x.H is not None)


def _output_kind(y, output: str | None) -> str:
    if output is None:
        return "state" if isinstance(y, State) else "vector"
    if output not in OUTPUTS:
        raise ValueError(f"numerical_jacobian: output must be one of {OUTPUTS}, got {output!r}")
    return output


def _chart(y0, output: str, space_out: StateSpace | None) -> Callable:
    """The map y -> tangent coordinates of y around y0 (the identity for vectors)."""
    if output == "state":
        return lambda y: space_out.difference(y0, y)
    if output == "se3":
        H0inv = se3.inverse(se3.check_transform(y0, "f(x)"))
        return lambda y: se3.log(H0inv @ y)
    return lambda y: np.asarray(y, dtype=float)


def _central(g, n: int, eps: float, chart) -> np.ndarray:
    """Columns (chart(g(+eps e_i)) - chart(g(-eps e_i))) / 2 eps, stacked last."""
    cols = []
    for i in range(n):
        e = np.zeros(n)
        e[i] = eps
        with np.errstate(all="ignore"):
            plus, minus = chart(g(e)), chart(g(-e))
        if not (np.all(np.isfinite(plus)) and np.all(np.isfinite(minus))):
            raise FloatingPointError(f"numerical_jacobian: the function returned a non-finite value at column {i}")
        cols.append((plus - minus) / (2.0 * eps))
    return np.stack(cols, axis=-1)


def numerical_jacobian(f: Callable, x: State, u=None, *, eps: float = 1e-6, output: str | None = None):
    """Central-difference Jacobian of ``f(x)`` (or ``f(x, u)``) on the state group.

    ``f`` returns an array (any shape: the Jacobian has shape ``y.shape + (ndx,)``), a ``State`` (the Jacobian
    is ``(ndx_out, ndx)``, measured with ``⊖``), or, with ``output="se3"``, a 4x4 rigid transform (the Jacobian
    is ``(6, ndx)`` of ``log(f(x)⁻¹ f(x ⊕ z))``, linear first). With ``u`` (a vector), ``f`` is called as
    ``f(x, u)`` and the result is the pair ``(J_x, J_u)``, ``J_u`` being plain central differences in ``u``.
    ``eps`` is the step on every tangent coordinate.
    """
    if not (np.isfinite(eps) and eps > 0):
        raise ValueError(f"numerical_jacobian: eps must be a positive number, got {eps}")
    space = _space(x)
    space.check(x)
    with_u = u is not None
    if with_u:
        call = f
        u = np.asarray(u, dtype=float)
        if u.ndim != 1 or not np.all(np.isfinite(u)):
            raise ValueError("numerical_jacobian: u must be a finite 1-D array")
    else:
        call = lambda xx, uu: f(xx)  # noqa: E731
        u = np.zeros(0)
    with np.errstate(all="ignore"):
        y0 = call(x, u)
    kind = _output_kind(y0, output)
    if kind == "vector" and not np.all(np.isfinite(np.asarray(y0, dtype=float))):
        raise FloatingPointError("numerical_jacobian: the function returned a non-finite value at x")
    space_out = _space(y0) if kind == "state" else None
    chart = _chart(y0, kind, space_out)
    J_x = _central(lambda z: call(space.integrate(x, z), u), space.ndx, eps, chart)
    if not with_u:
        return J_x
    J_u = _central(lambda du: call(x, u + du), u.shape[0], eps, chart)
    return J_x, J_u
