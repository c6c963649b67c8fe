"""One-call check of the derivatives of a cost, a dynamics, a residual or a constraint against geometric finite
differences.

``check_derivatives(obj, x, u)`` compares what ``obj`` returns with central differences on the state group
(``numerical_jacobian``: ``x exp(±δ eᵢ)``, ``u ± δ eᵢ``, so in the tangent chart the solvers use) and reports, block
by block, the largest error and where it is:

- a ``CostModel``: ``l`` against ``value``; ``l_x``, ``l_u`` against differences of ``value``; when the cost says its
  Hessian is exact (``exact_hessian``, default True for user costs), ``l_xx``, ``l_xu``, ``l_uu`` against the
  symmetrised differences of its own gradient ``[l_x; l_u]`` (so fix a wrong gradient first). Gauss–Newton Hessians
  are reported as skipped: they are not the second derivative; so are the blocks a cost lists in
  ``numerical_blocks`` (a ``FunctionCost``'s derivatives that the user did not give: there is nothing to check);
- a ``DiscreteDynamics``: ``F_x``, ``F_u`` against differences of ``step``, the output measured with ``⊖``;
- a ``Residual``, or a ``Constraint`` (``constraints``; recognised by its ``residual``, so that this module, below
  the constraints, does not import them): ``r`` of ``derivatives`` against ``value``, and ``R_x``, ``R_u`` against
  differences of ``value``. The blocks checked are those the costs use: a residual with ``uses_x`` (``uses_u``)
  false is taken to have a zero ``R_x`` (``R_u``) whatever its ``derivatives`` return, so a residual that does depend
  on a variable it says it ignores fails. ``R_u`` is skipped when there are no controls (``nu = 0``), and when
  ``uses_u`` is false and the differences in ``u`` are zero (nothing to check).

The analytic side is one batched call over all knots (what the solvers call); the numeric side one knot at a time.
A block's relative error is ``max |analytic − numeric| / max(max |numeric|, 1)``; it passes below ``tolerance``.
Central differences with the default ``eps = 1e-6`` are good to about 1e-8 on well-scaled problems.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.lie.state import State, StateSpace, Trajectory
from lietraj.optimal_control.costs.costs import CostModel
from lietraj.optimal_control.costs.residuals import Residual
from lietraj.optimal_control.dynamics.discrete_dynamics import DiscreteDynamics


@dataclass(eq=False)
class BlockCheck:
    """One derivative block: its largest absolute and relative errors, the worst entry (``index`` into the
    block stacked over knots, knot first), its analytic and numeric values, and what the entry is (``component``,
    e.g. ``"z_s[3] (knee)"`` or ``"z_H[4], u[2]"``)."""

    name: str
    max_abs_error: float
    relative_error: float
    index: tuple[int, ...]
    analytic: float
    numeric: float
    component: str
    ok: bool

    def __str__(self) -> str:
        mark = "ok" if self.ok else "WRONG"
        return (f"{self.name:<5} {mark:<5} rel {self.relative_error:9.2e}  abs {self.max_abs_error:9.2e}  worst at "
                f"{self.component}: analytic {self.analytic:.10g}, numeric {self.numeric:.10g}")


@dataclass(eq=False)
class DerivativeReport:
    """The result of ``check_derivatives``: one ``BlockCheck`` per block, the blocks not checked (``skipped``, with
    the reason), the ``tolerance``; ``ok`` when every checked block passes. ``report["l_x"]`` is a block."""

    what: str
    knots: int
    tolerance: float
    blocks: list[BlockCheck]
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(b.ok for b in self.blocks)

    @property
    def worst(self) -> BlockCheck:
        """The block with the largest relative error."""
        return max(self.blocks, key=lambda b: b.relative_error)

    def __getitem__(self, name: str) -> BlockCheck:
        for b in self.blocks:
            if b.name == name:
                return b
        raise KeyError(f"no block {name!r} in this report (blocks: {', '.join(b.name for b in self.blocks)})")

    def __str__(self) -> str:
        verdict = "OK" if self.ok else "WRONG DERIVATIVES"
        lines = [f"check_derivatives({self.what}) at {self.knots} knot(s): {verdict} (tolerance {self.tolerance:g})"]
        lines += [f"  {b}" for b in self.blocks]
        lines += [f"  {name:<5} skipped: {why}" for name, why in self.skipped.items()]
        return "\n".join(lines)


def tangent_labels(space: StateSpace, joint_names=None) -> list[str]:
    """Names of the tangent coordinates ``[z_H; z_s; z_nu; z_sdot]`` (joint names appended when given)."""
    joint = (lambda i: f" ({joint_names[i]})") if joint_names is not None else (lambda i: "")
    labels = [f"z_H[{i}]" for i in range(6)] if space.floating_base else []
    labels += [f"z_s[{i}]{joint(i)}" for i in range(space.n)]
    labels += [f"z_nu[{i}]" for i in range(6)] if space.floating_base else []
    labels += [f"z_sdot[{i}]{joint(i)}" for i in range(space.n)]
    return labels


def _joint_names(obj, n: int):
    """The joint names of the robot behind ``obj`` (a robot's dynamics or residual cost, or a sum holding one)."""
    candidates = [obj, getattr(obj, "residual", None)]
    candidates += [getattr(t.cost, "residual", t.cost) for t in getattr(obj, "costs", {}).values()]
    for c in candidates:
        names = getattr(getattr(c, "model", None), "actuated_joint_names", None)
        if names is not None and len(names) == n:
            return names
    return None


def _compare(name: str, analytic: np.ndarray, numeric: np.ndarray, labels: list[list[str]], tolerance: float,
             several: bool) -> BlockCheck:
    """A BlockCheck of arrays (N, ...) whose trailing axes are named by ``labels`` (one list per axis)."""
    error = np.abs(analytic - numeric)
    if error.size == 0:
        return BlockCheck(name, 0.0, 0.0, (), 0.0, 0.0, "(empty)", True)
    if not np.isfinite(analytic).all():
        flat = int(np.argmax(~np.isfinite(analytic).reshape(-1)))
    else:
        flat = int(np.argmax(error.reshape(-1)))
    index = np.unravel_index(flat, error.shape)
    worst = float(error[index]) if np.isfinite(analytic[index]) else np.inf
    relative = worst / max(float(np.abs(numeric).max()), 1.0)
    component = ", ".join(axis[i] for axis, i in zip(labels, index[1:])) or name
    if several:
        component = f"knot {index[0]}, {component}"
    return BlockCheck(name, worst, relative, tuple(int(i) for i in index), float(analytic[index]),
                      float(numeric[index]), component, bool(relative <= tolerance))


def _knots(x, u, nu: int, what: str) -> tuple[Trajectory, np.ndarray | None]:
    """x (State or Trajectory) and u as a trajectory and an (N, nu) array (None for nu = 0 without u)."""
    if isinstance(x, State):
        X = Trajectory.repeat(x, 1)
        U = None if u is None else np.asarray(u, dtype=float)[None]
    elif isinstance(x, Trajectory):
        X, U = x, (None if u is None else np.asarray(u, dtype=float))
    else:
        raise TypeError(f"{what}: x must be a State or a Trajectory, got {type(x).__name__}")
    if U is None and nu:
        raise ValueError(f"{what}: u is required (nu = {nu})")
    if U is not None and U.shape != (len(X), nu):
        raise ValueError(f"{what}: u must have shape ({nu},) for a State or ({len(X)}, {nu}) for a trajectory of "
                         f"{len(X)} knots, got {np.shape(u)}")
    return X, U


def _one(X: Trajectory, U, k: int) -> tuple[State, np.ndarray | None]:
    return X[k].copy(), (None if U is None else U[k].copy())


def _check_cost(cost: CostModel, X, U, tolerance: float, eps: float, hessian: bool | None) -> DerivativeReport:
    space = cost.state_space or StateSpace(X.s.shape[1], X.H is not None)
    ndx, nu, N = space.ndx, cost.nu, len(X)
    d = cost.derivatives(X, U)
    value = cost.value(X, U)

    def at(x, u):
        return Trajectory.repeat(x, 1), (None if U is None else np.asarray(u, dtype=float)[None])

    def f(x, u=None):
        return cost.value(*at(x, u))

    def gradient(x, u=None):
        g = cost.derivatives(*at(x, u))
        return np.concatenate([g.l_x[0], g.l_u[0]])

    skipped: dict[str, str] = {}
    numerical = getattr(cost, "numerical_blocks", frozenset())
    check_gradient = not {"l_x", "l_u"} <= numerical
    check_hessian = getattr(cost, "exact_hessian", True) if hessian is None else hessian
    g_num = np.zeros((N, ndx + nu))
    H_num = np.zeros((N, ndx + nu, ndx + nu)) if check_hessian else None
    check_hessian = check_hessian and not {"l_xx", "l_xu", "l_uu"} <= numerical
    for k in range(N):
        x, u = _one(X, U, k)
        if check_gradient:
            J = numerical_jacobian(f, x, eps=eps) if U is None else numerical_jacobian(f, x, u, eps=eps)
            g_num[k] = J[0] if U is None else np.concatenate([J[0][0], J[1][0]])
        if check_hessian:
            D = (numerical_jacobian(gradient, x, eps=eps) if U is None
                 else np.concatenate(numerical_jacobian(gradient, x, u, eps=eps), axis=1))
            H_num[k] = 0.5 * (D + D.T)
    xl = tangent_labels(space, _joint_names(cost, space.n))
    names = _joint_names(cost, nu)
    ul = [f"u[{i}]" + (f" ({names[i]})" if names is not None else "") for i in range(nu)]
    candidates = [("l_x", d.l_x, g_num[:, :ndx], [xl])]
    if nu:
        candidates.append(("l_u", d.l_u, g_num[:, ndx:], [ul]))
    if H_num is not None:
        candidates.append(("l_xx", d.l_xx, H_num[:, :ndx, :ndx], [xl, xl]))
        if nu:
            candidates += [("l_xu", d.l_xu, H_num[:, :ndx, ndx:], [xl, ul]),
                           ("l_uu", d.l_uu, H_num[:, ndx:, ndx:], [ul, ul])]
    else:
        skipped = {name: "Gauss-Newton Hessian (not the exact second derivative)"
                   for name in (("l_xx", "l_xu", "l_uu") if nu else ("l_xx",))}
    blocks = [_compare("l", d.l, value, [], tolerance, N > 1)]
    for name, analytic, numeric, labels in candidates:
        if name in numerical:
            skipped[name] = "computed by finite differences (no user derivative given)"
        else:
            blocks.append(_compare(name, analytic, numeric, labels, tolerance, N > 1))
    return DerivativeReport(repr(cost), N, tolerance, blocks, skipped)


def _check_dynamics(dyn: DiscreteDynamics, X, U, tolerance: float, eps: float) -> DerivativeReport:
    space, N = dyn.state_space, len(X)
    d = dyn.derivatives(X, U)
    F_x, F_u = np.empty_like(d.F_x), np.empty_like(d.F_u)
    for k in range(N):
        x, u = _one(X, U, k)
        F_x[k], F_u[k] = numerical_jacobian(dyn.step, x, u, eps=eps)
    xl = tangent_labels(space, _joint_names(dyn, space.n))
    names = _joint_names(dyn, dyn.nu)
    ul = [f"u[{i}]" + (f" ({names[i]})" if names is not None else "") for i in range(dyn.nu)]
    next_xl = [f"next {label}" for label in xl]
    blocks = [_compare("F_x", d.F_x, F_x, [next_xl, xl], tolerance, N > 1),
              _compare("F_u", d.F_u, F_u, [next_xl, ul], tolerance, N > 1)]
    return DerivativeReport(repr(dyn), N, tolerance, blocks)


def _residual_of(obj) -> Residual | None:
    """The residual behind ``obj``: ``obj`` itself, or a constraint's ``residual`` (not a cost's: costs come first)."""
    if isinstance(obj, Residual):
        return obj
    residual = getattr(obj, "residual", None)
    if isinstance(residual, Residual) and callable(getattr(obj, "value", None)) and callable(
            getattr(obj, "derivatives", None)):
        return residual
    return None


def _check_residual(obj, residual: Residual, X, U, tolerance: float, eps: float) -> DerivativeReport:
    """``r``, ``R_x``, ``R_u`` of a residual or of a constraint (``obj``: its ``value`` and ``derivatives`` are
    called) against ``value`` and its central differences, one knot at a time."""
    space = obj.state_space or StateSpace(X.s.shape[1], X.H is not None)
    nu, nr, N = obj.nu, obj.nr, len(X)
    d = obj.derivatives(X, U)
    value = np.asarray(obj.value(X, U), dtype=float)
    R_x = np.zeros((N, nr, space.ndx))
    R_u = np.zeros((N, nr, nu))
    for k in range(N):
        x, u = _one(X, U, k)
        if U is None:
            R_x[k] = numerical_jacobian(lambda xx: obj.value(Trajectory.repeat(xx, 1), None)[0], x, eps=eps)
        else:
            R_x[k], R_u[k] = numerical_jacobian(lambda xx, uu: obj.value(Trajectory.repeat(xx, 1), uu[None])[0], x, u,
                                                eps=eps)
    rl = [f"r[{i}]" for i in range(nr)]
    xl = tangent_labels(space, _joint_names(obj, space.n))
    names = _joint_names(obj, nu)
    ul = [f"u[{i}]" + (f" ({names[i]})" if names is not None else "") for i in range(nu)]
    uses_x, uses_u = getattr(residual, "uses_x", True), getattr(residual, "uses_u", False)
    analytic_x = np.asarray(d.R_x, dtype=float) if uses_x else np.zeros_like(R_x)
    if not uses_x:
        xl = [f"{label} (uses_x is False)" for label in xl]
    blocks = [_compare("r", np.asarray(d.r, dtype=float), value, [rl], tolerance, N > 1),
              _compare("R_x", analytic_x, R_x, [rl, xl], tolerance, N > 1)]
    skipped: dict[str, str] = {}
    if nu == 0:
        skipped["R_u"] = "no controls (nu = 0)"
    elif not uses_u and not R_u.any():
        skipped["R_u"] = "uses_u is False and the differences in u are zero"
    else:
        analytic_u = np.asarray(d.R_u, dtype=float) if uses_u else np.zeros_like(R_u)
        if not uses_u:
            ul = [f"{label} (uses_u is False)" for label in ul]
        blocks.append(_compare("R_u", analytic_u, R_u, [rl, ul], tolerance, N > 1))
    return DerivativeReport(repr(obj), N, tolerance, blocks, skipped)


def check_derivatives(obj, x: State | Trajectory, u=None, *, tolerance: float = 1e-6, eps: float = 1e-6,
                      hessian: bool | None = None) -> DerivativeReport:
    """Compare the derivatives of ``obj`` (a ``CostModel``, a ``DiscreteDynamics``, a ``Residual`` or a
    ``Constraint``) at ``x`` (a State, or a Trajectory for every knot) and ``u`` ((nu,) or (N, nu); None when
    ``nu = 0``) with central differences of step ``eps`` on the group (module docstring for the blocks).
    ``hessian`` forces (True) or skips (False) the second-order blocks of a cost; by default they are checked when
    the cost's ``exact_hessian`` is true (residuals and constraints have none). Print the report to see each block's
    error and its worst entry."""
    if not (np.isfinite(tolerance) and tolerance > 0 and np.isfinite(eps) and eps > 0):
        raise ValueError(f"check_derivatives: tolerance and eps must be positive numbers, got {tolerance}, {eps}")
    if isinstance(obj, CostModel):
        X, U = _knots(x, u, obj.nu, "check_derivatives")
        return _check_cost(obj, X, U, tolerance, eps, hessian)
    if isinstance(obj, DiscreteDynamics):
        X, U = _knots(x, u, obj.nu, "check_derivatives")
        return _check_dynamics(obj, X, U, tolerance, eps)
    residual = _residual_of(obj)
    if residual is not None:
        X, U = _knots(x, u, obj.nu, "check_derivatives")
        return _check_residual(obj, residual, X, U, tolerance, eps)
    raise TypeError("check_derivatives: obj must be a Residual, a Constraint, a CostModel or a DiscreteDynamics, got "
                    f"{type(obj).__name__}")
