"""Constraints ``lower ≤ r(x, u) ≤ upper`` on the knots of a problem: a layer beside the costs.

A ``Constraint`` is a residual (any ``Residual``: the costs' own, a contact-force residual, a user's) with bounds,
one pair per residual row; a row whose bounds are equal is an equality, a row with an infinite bound is one-sided,
and a row with both bounds infinite constrains nothing. A ``ConstraintSet`` names the constraints of one knot (or of
the terminal knot), as a ``CostSum`` names its costs; ``ActionModel.constraints`` and ``Problem``'s
``terminal_constraints`` carry them, and a constrained solver (``solvers.augmented_lagrangian``) meets them.

Units. ``scale`` (default 1) is the unit a constraint's rows are measured in: violations are reported, and
tolerances applied, in that unit (``friction_cone(..)`` takes the robot's weight, so "1e-6" means a millionth of
it), and the solver's penalty acts on ``r / scale``, which keeps rows of very different magnitudes (newtons,
radians) equally conditioned.

Violation of row ``i`` at a knot: ``max(r_i − upper_i, lower_i − r_i, 0) / scale``; a constraint's violation at a
knot is the largest of its rows'. Bounds with ``lower > upper`` are accepted when the problem is built and make a
solve end at once with the status "infeasible" naming the constraint: a request that cannot be met is an answer,
not a crash. A bound of the wrong shape, a NaN or a residual of the wrong size is rejected at construction.

Built-ins, each a ``Constraint`` on an existing residual::

    joint_position_limits    lower ≤ s ≤ upper (the URDF's; continuous joints free)       JointPositionResidual
    joint_velocity_limits    |ṡ| ≤ velocity limit (where the URDF gives one)               JointVelocityResidual
    torque_limits            |u| ≤ effort limit (where the URDF gives one)                 JointTorqueResidual
    frame_position           op_f = target (3,)                                            FrameTranslationResidual
    frame_placement          log6(T⁻¹ oM_f) = 0 (6,)                                       FramePlacementResidual
    com_position             c = target (3,)                                               CenterOfMassResidual
    normal_forces            f_z ≥ minimum (every contact pushes: unilateral)              ContactForceResidual
    friction_cone            A f ≤ 0 (pyramid, with f_z ≥ 0), or the smoothed exact cone   FrictionConeResidual
    center_of_pressure       the CoP in the sole rectangle                                 CenterOfPressureResidual
    wrench_cone              every contact's cone and every listed sole's CoP              WrenchConeResidual

Torque limits of a robot driven by ``RobotDynamics`` are bounds on the controls themselves: ``ActionModel``'s
``u_lb, u_ub`` keep them exactly at every iterate (a box QP in the backward pass), where a constraint is met only
at convergence; ``torque_limits`` is for what the box cannot express (a terminal knot has no controls, a control
that is not a torque).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from lietraj.dynamics.lie.state import StateSpace, Trajectory
from lietraj.dynamics.model.model import RobotModel
from lietraj.optimal_control.costs.contact_residuals import (
    DEFAULT_CONE_EPSILON,
    CenterOfPressureResidual,
    ContactForceResidual,
    FrictionConeResidual,
    WrenchConeResidual,
)
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.costs.residuals import (
    CenterOfMassResidual,
    FramePlacementResidual,
    FrameTranslationResidual,
    JointPositionResidual,
    JointTorqueResidual,
    JointVelocityResidual,
    Residual,
    ResidualDerivatives,
)

GRAVITY = 9.81
"""Standard gravity (m/s²) of the force constraints' unit, the robot's weight ``m g``."""


def _bounds(value, nr: int, fill: float, what: str) -> np.ndarray:
    if value is None:
        return np.full(nr, fill)
    try:
        b = np.array(np.broadcast_to(np.asarray(value, dtype=np.float64), (nr,)))
    except (ValueError, TypeError):
        raise ValueError(f"{what} must be a number or an array of shape ({nr},) (one per residual row), got "
                         f"shape {np.shape(value)}") from None
    if np.isnan(b).any():
        raise ValueError(f"{what} contains NaN (row {int(np.argmax(np.isnan(b)))})")
    return b


class Constraint:
    """``lower ≤ r(x, u) ≤ upper`` row by row (module docstring). Without bounds the constraint is the equality
    ``r = 0``; with only ``upper`` (``lower``) the other side is free. ``scale`` > 0 is the unit of the rows (the
    violations are reported in it). Raises ValueError for bounds of the wrong shape, NaN bounds, ``lower = +inf`` or
    ``upper = -inf``, or a bad scale."""

    def __init__(self, residual: Residual, lower=None, upper=None, scale: float = 1.0):
        if not isinstance(residual, Residual):
            raise TypeError(f"Constraint: residual must be a Residual, got {type(residual).__name__}")
        nr = residual.nr
        if lower is None and upper is None:
            lower = upper = 0.0
        self.residual = residual
        self.lower = _bounds(lower, nr, -np.inf, f"Constraint({residual!r}): lower")
        self.upper = _bounds(upper, nr, np.inf, f"Constraint({residual!r}): upper")
        if np.isposinf(self.lower).any() or np.isneginf(self.upper).any():
            raise ValueError(f"Constraint({residual!r}): lower = +inf or upper = -inf can never be met; use finite "
                             "bounds (or ±inf on the free side)")
        if isinstance(scale, bool) or not (isinstance(scale, (int, float, np.integer, np.floating)) and math.isfinite(scale)
                                           and scale > 0):
            raise ValueError(f"Constraint({residual!r}): scale must be a finite number > 0, got {scale!r}")
        self.scale = float(scale)
        self.equality = self.lower == self.upper
        self.state_space, self.nu, self.nr = residual.state_space, residual.nu, nr

    def __repr__(self) -> str:
        kind = ("equality" if self.equality.all() else "inequality" if not self.equality.any() else "mixed")
        return f"Constraint({self.residual!r}, {kind}, nr={self.nr})"

    @property
    def contradictory(self) -> np.ndarray:
        """The rows whose bounds cannot both hold (``lower > upper``), (nr,) bool."""
        return self.lower > self.upper

    def value(self, X: Trajectory, U: np.ndarray | None) -> np.ndarray:
        """``r`` at every knot, (N, nr)."""
        return self.residual.value(X, U)

    def derivatives(self, X: Trajectory, U: np.ndarray | None) -> ResidualDerivatives:
        """``r``, ``R_x``, ``R_u`` at every knot (the residual's)."""
        return self.residual.derivatives(X, U)

    def excess(self, r: np.ndarray) -> np.ndarray:
        """Signed excess of the rows of ``r`` (N, nr) over their bounds, in units of ``scale``: ``(r − upper) /
        scale`` above, ``(r − lower) / scale`` (negative) below, 0 inside."""
        above, below = r - self.upper, self.lower - r  # both > 0 only between contradictory bounds: the larger counts
        return np.where(above >= below, np.maximum(above, 0.0), -np.maximum(below, 0.0)) / self.scale

    def violation(self, X: Trajectory, U: np.ndarray | None) -> np.ndarray:
        """The largest violation of the rows at every knot, in units of ``scale``, (N,)."""
        return np.abs(self.excess(self.value(X, U))).max(axis=1, initial=0.0)


class ConstraintSet(Mapping):
    """Named constraints of one knot, all on one state space with one control size (``nu = 0`` for the terminal
    knot): ``add(name, constraint)``, then read as a mapping ``name -> Constraint``."""

    def __init__(self, state_space: StateSpace | None, nu: int):
        if state_space is not None and not isinstance(state_space, StateSpace):
            raise TypeError(f"ConstraintSet: state_space must be a StateSpace, got {type(state_space).__name__}")
        if isinstance(nu, bool) or not isinstance(nu, (int, np.integer)) or nu < 0:
            raise ValueError(f"ConstraintSet: nu must be an integer >= 0, got {nu!r}")
        self.state_space, self.nu = state_space, int(nu)
        self._constraints: dict[str, Constraint] = {}

    def add(self, name: str, constraint: Constraint) -> ConstraintSet:
        """Add ``constraint`` under a new ``name``; returns the set (to chain)."""
        what = f"ConstraintSet.add({name!r})"
        if not isinstance(name, str) or not name:
            raise ValueError(f"ConstraintSet.add: name must be a non-empty string, got {name!r}")
        if name in self._constraints:
            raise ValueError(f"{what}: a constraint called {name!r} exists already")
        if not isinstance(constraint, Constraint):
            raise TypeError(f"{what}: expected a Constraint, got {type(constraint).__name__}")
        if constraint.nu != self.nu:
            hint = " (for the terminal knot, build the residual with nu=0)" if self.nu == 0 else ""
            raise ValueError(f"{what}: the constraint has nu = {constraint.nu}, the set nu = {self.nu}{hint}")
        space = constraint.state_space
        if space is not None and self.state_space is not None and not (
                space.n == self.state_space.n and space.floating_base == self.state_space.floating_base):
            raise ValueError(f"{what}: the constraint is on {space}, the set on {self.state_space}")
        self._constraints[name] = constraint
        return self

    def __getitem__(self, name: str) -> Constraint:
        return self._constraints[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._constraints)

    def __len__(self) -> int:
        return len(self._constraints)

    def __repr__(self) -> str:
        return f"ConstraintSet({', '.join(f'{k}: {c.nr} row(s)' for k, c in self._constraints.items())})"

    def violations(self, X: Trajectory, U: np.ndarray | None) -> dict[str, np.ndarray]:
        """Each constraint's largest violation at every knot (N,), in its own unit, by name."""
        return {name: c.violation(X, U) for name, c in self._constraints.items()}


@dataclass(frozen=True)
class Violation:
    """The largest violation of a named constraint over a trajectory: its ``value`` (in the constraint's unit), the
    ``knot`` where it occurs (``T`` for the terminal knot) and the constraint's ``unit`` (its scale)."""

    value: float
    knot: int
    unit: float


def largest_violations(parts) -> dict[str, Violation]:
    """The largest of each name over ``parts``, ``(name, first knot, per-knot violations (N,), unit)`` for every set
    or run of knots that carries the constraint (a name shared by several is one entry)."""
    out: dict[str, Violation] = {}
    for name, first, v, unit in parts:
        k = int(np.argmax(v))
        if name not in out or v[k] > out[name].value:
            out[name] = Violation(float(v[k]), first + k, unit)
    return out


# ---------------------------------------------------------------- built-ins


def joint_position_limits(model: RobotModel, nu: int | None = None, margin: float = 0.0) -> Constraint:
    """``lower + margin ≤ s ≤ upper − margin`` with the model's joint limits; continuous joints are free. ``nu``:
    the knot's control size (default the robot's ``n``; 0 for the terminal knot)."""
    lower = np.where(model.continuous, -np.inf, model.lower_limit) + margin
    upper = np.where(model.continuous, np.inf, model.upper_limit) - margin
    return Constraint(JointPositionResidual(model, nu), lower, upper)


def _limited(limits: np.ndarray) -> np.ndarray:
    """A URDF limit per joint, +inf where it gives none (0 or missing means unlimited, as Pinocchio reads it)."""
    return np.where(np.isfinite(limits) & (limits > 0), limits, np.inf)


def joint_velocity_limits(model: RobotModel, nu: int | None = None, fraction: float = 1.0) -> Constraint:
    """``|ṡ| ≤ fraction · velocity limit`` where the model gives one."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"joint_velocity_limits: fraction must be in (0, 1], got {fraction!r}")
    limit = fraction * _limited(model.velocity_limit)
    return Constraint(JointVelocityResidual(model, nu), -limit, limit)


def torque_limits(model: RobotModel, fraction: float = 1.0) -> Constraint:
    """``|u| ≤ fraction · effort limit`` on the joint torques (the controls of ``RobotDynamics``) where the model
    gives a limit (module docstring: prefer ``ActionModel``'s ``u_lb, u_ub`` for a box on the controls)."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"torque_limits: fraction must be in (0, 1], got {fraction!r}")
    limit = fraction * _limited(model.effort_limit)
    return Constraint(JointTorqueResidual(model), -limit, limit)


def frame_position(model: RobotModel, frame: int | str, target, nu: int | None = None) -> Constraint:
    """The world position of a frame's origin equals ``target`` (3,) (or one point per knot, (N, 3))."""
    return Constraint(FrameTranslationResidual(model, frame, target, nu))


def frame_placement(model: RobotModel, frame: int | str, target, nu: int | None = None) -> Constraint:
    """The placement of a frame equals the 4x4 ``target``: ``log6(target⁻¹ oM_f) = 0``."""
    return Constraint(FramePlacementResidual(model, frame, target, nu))


def com_position(model: RobotModel, target, nu: int | None = None) -> Constraint:
    """The centre of mass is at ``target`` (3,) (or one point per knot)."""
    return Constraint(CenterOfMassResidual(model, target, nu))


def _weight(model: RobotModel) -> float:
    return model.total_mass * GRAVITY


def _contact_dynamics(dynamics, what: str):
    if not isinstance(dynamics, ContactRobotDynamics):
        raise TypeError(f"{what}: dynamics must be the ContactRobotDynamics of the knots, got {type(dynamics).__name__}")
    return dynamics.model, dynamics.contacts, {"damping": dynamics.damping, "dynamics": dynamics}


def normal_forces(dynamics: ContactRobotDynamics, minimum: float = 0.0) -> Constraint:
    """Every contact of ``dynamics`` pushes on the ground: its normal force ``f_z`` (the ``z`` of the contact's
    reference, module docstring of ``contact_residuals``) at least ``minimum`` times the robot's weight (0: the
    unilateral contact), the other force and torque rows free; in units of the robot's weight."""
    model, contacts, options = _contact_dynamics(dynamics, "normal_forces")
    if not (isinstance(minimum, (int, float, np.integer, np.floating)) and math.isfinite(minimum)):
        raise ValueError(f"normal_forces: minimum must be a finite number (a fraction of the weight), got {minimum!r}")
    residual = ContactForceResidual(model, contacts, **options)
    lower = np.full(residual.nr, -np.inf)
    lower[residual.offsets[:-1] + 2] = minimum * _weight(model)
    return Constraint(residual, lower=lower, scale=_weight(model))


def friction_cone(dynamics: ContactRobotDynamics, contact_index: int, mu: float, facets: int | None = 4,
                  epsilon: float = DEFAULT_CONE_EPSILON) -> Constraint:
    """The force of contact ``contact_index`` of the knots' ``dynamics`` in its friction cone and pushing
    (``FrictionConeResidual ≤ 0``: the pyramid of ``facets`` faces, or the smoothed exact cone with ``facets=None``),
    in units of the robot's weight. The residual reuses the contact solution of the dynamics."""
    model, contacts, options = _contact_dynamics(dynamics, "friction_cone")
    residual = FrictionConeResidual(model, contacts, contact_index, mu, facets, epsilon, **options)
    return Constraint(residual, upper=0.0, scale=_weight(model))


def center_of_pressure(dynamics: ContactRobotDynamics, contact_index: int, half_length: float,
                       half_width: float) -> Constraint:
    """The centre of pressure of the 6d contact ``contact_index`` of ``dynamics`` inside its sole
    (``CenterOfPressureResidual ≤ 0``), in units of the robot's weight times a metre."""
    model, contacts, options = _contact_dynamics(dynamics, "center_of_pressure")
    residual = CenterOfPressureResidual(model, contacts, contact_index, half_length, half_width, **options)
    return Constraint(residual, upper=0.0, scale=_weight(model))


def wrench_cone(dynamics: ContactRobotDynamics, mu: float, soles: dict | None = None, facets: int = 4) -> Constraint:
    """Every contact of ``dynamics`` in its friction pyramid and every listed sole's (frame -> ``(half_length,
    half_width)``) centre of pressure inside it, in one constraint (``WrenchConeResidual ≤ 0``: one contact solution
    for all rows), in units of the robot's weight."""
    model, contacts, options = _contact_dynamics(dynamics, "wrench_cone")
    residual = WrenchConeResidual(model, contacts, mu, soles, facets, **options)
    return Constraint(residual, upper=0.0, scale=_weight(model))
