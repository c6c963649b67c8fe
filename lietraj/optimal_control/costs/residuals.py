"""Residuals ``r(x, u)`` of the built-in costs, with their Jacobians in the tangent chart of the state.

Every residual is evaluated at all knots of a trajectory at once: ``r`` is (N, nr), ``R_x = ∂r/∂dx`` (N, nr, ndx)
for the perturbation ``x exp(dx)`` (tangent order ``[z_H; z_s; z_ν; z_ṡ]``, ``StateSpace``), ``R_u = ∂r/∂u``
(N, nr, nu). Spatial vectors are linear first. The residuals and their Jacobians (``J_q`` is the configuration
block, the first ``nv`` columns of ``R_x``; the velocity columns are zero unless stated)::

    StateResidual            r = x ⊖ x_ref = log(x_ref⁻¹ x)        R_x = diag(Jr⁻¹(z_H), I)          (StateSpace)
    ControlResidual          r = u − u_ref                          R_u = I
    JointPositionResidual    r = s                                  J_q = [0  I]
    JointVelocityResidual    r = ṡ                                  R_x = [0  0  0  I]
    FramePlacementResidual   r = log6(T⁻¹ oM_f)                     J_q = Jr⁻¹(r) J_local             (Pinocchio Jlog6)
    FrameTranslationResidual r = op_f − p_ref                       J_q = linear rows of J_local_world_aligned
    FrameRotationResidual    r = log3(R_refᵀ oR_f)                  J_q = Jr3⁻¹(r) J_local,angular
    FrameVelocityResidual    r = v_f − v_ref  (in "reference")      R_x = [∂v_f/∂q, ∂v_f/∂v]
    CenterOfMassResidual     r = c − c_ref  (world)                 J_q = J_com

Placement errors come from ``kinematics_derivatives.frame_placement_error``, velocities from
``frame_velocity_derivatives``, the centre of mass from ``center_of_mass_jacobian``, the state error's ``log`` and
``Jr⁻¹`` from ``se3.difference_batch`` (one batched kernel call each). Residuals that do not depend on ``u`` still
have an ``nu`` (the size of the controls their cost is called with): the robot's ``n`` by default, 0 for a terminal
cost.
"""

from __future__ import annotations

import difflib
import operator
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from lietraj._jit import kernel
from lietraj.dynamics.lie import se3, so3
from lietraj.dynamics.lie.se3 import difference_batch
from lietraj.dynamics._checks import BAD_H, BAD_ROTATION, IDENTITY4_STACK, NOT_FINITE, OK, check_state
from lietraj.dynamics.kinematics.center_of_mass import center_of_mass, center_of_mass_jacobian
from lietraj.dynamics.kinematics.kinematics import frame_id, frame_placement, frame_jacobian, frame_velocity, reference_code
from lietraj.dynamics.kinematics.kinematics_derivatives import frame_placement_error, frame_velocity_derivatives
from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.model.workspace import Workspace
from lietraj.dynamics.lie.state import State, StateSpace, Trajectory
from lietraj.optimal_control.costs.activations import broadcast_view

_STATE_ERRORS = {NOT_FINITE: "contains NaN or inf", BAD_ROTATION: "has a base rotation that is not a rotation matrix "
                 "(tolerance 1e-6)", BAD_H: "has a base pose whose last row is not [0, 0, 0, 1]"}


@kernel
def _first_bad_knot(floating, n, nv, H, S, V):
    """(status, knot) of the first state that fails the kernels' ``check_state``, or (OK, -1)."""
    for k in range(S.shape[0]):
        status = check_state(floating, n, nv, H[k if floating else 0], S[k], V[k])
        if status != OK:
            return status, k
    return OK, -1


def check_knots(state_space: StateSpace | None, nu: int, X, U, what: object) -> tuple[int, np.ndarray]:
    """``(N, U)`` for a trajectory ``X`` of ``state_space`` (None: any) and controls ``U`` (N, nu) — ``None`` is
    accepted for ``nu = 0`` and returned as an (N, 0) array; raises a ValueError saying what is wrong (shapes, NaN,
    a base pose that is not a rigid transform) and at which knot. ``what`` names the caller in the messages: a
    string, or the object itself, formatted only for an error (its repr costs microseconds at every call)."""
    if type(X) is not Trajectory:
        raise TypeError(f"{what}: X must be a Trajectory, got {type(X).__name__}")
    trusted = getattr(X, "_checked", None)
    if trusted is not None and trusted[2] is U and trusted[1] == nu and (
            state_space is None or trusted[0] is state_space
            or (trusted[0] is not None and trusted[0].n == state_space.n
                and trusted[0].floating_base == state_space.floating_base)):
        return len(X), trusted[3]
    N = len(X)
    floating = X.H is not None
    if state_space is not None and state_space.floating_base != floating:
        raise ValueError(f"{what}: X is a {'floating' if floating else 'fixed'}-base trajectory, the cost is for a "
                         f"{'floating' if state_space.floating_base else 'fixed'} base")
    n = X.s.shape[-1] if state_space is None else state_space.n
    nv = n + 6 if floating else n
    if X.s.shape != (N, n) or X.v.shape != (N, nv) or (floating and X.H.shape != (N, 4, 4)):
        raise ValueError(f"{what}: X must have s of shape (N, {n}) and v of shape (N, {nv})"
                         + (" and H of shape (N, 4, 4)" if floating else "") + f", got {X.s.shape} and {X.v.shape}"
                         + (f" and {X.H.shape}" if floating else ""))
    H = np.ascontiguousarray(X.H, dtype=np.float64) if floating else IDENTITY4_STACK
    status, k = _first_bad_knot(floating, n, nv, H, np.ascontiguousarray(X.s, dtype=np.float64),
                                np.ascontiguousarray(X.v, dtype=np.float64))
    if status != OK:
        raise ValueError(f"{what}: the state at knot {k} {_STATE_ERRORS[status]}")
    if U is None:
        if nu != 0:
            raise ValueError(f"{what}: U is None but the cost has nu = {nu} controls")
        return N, np.zeros((N, 0))
    U = np.asarray(U, dtype=np.float64)
    if U.shape != (N, nu):
        raise ValueError(f"{what}: U must have shape ({N}, {nu}) for {N} knot(s), got {U.shape}")
    if not np.isfinite(U).all():
        raise ValueError(f"{what}: U contains NaN or inf at knot {int(np.argmax(~np.isfinite(U).all(axis=1)))}")
    return N, U


class KnotsChecked:
    """``with KnotsChecked(state_space, nu, X, U, what):`` checks ``X`` and ``U`` (``check_knots``; the checked
    ``(N, U)`` are ``.N``, ``.U``), then lets ``check_knots`` accept these very objects for the same space and ``nu``
    without scanning them again until the block ends: a cost sum checks its knots once for all its terms, each of
    which checks them when called alone. Arrays changed inside the block are not seen. Blocks nest (a cost sum
    among the terms of another): each leaves the mark it found."""

    def __init__(self, state_space: StateSpace | None, nu: int, X, U, what: object):
        self.N, self.U = check_knots(state_space, nu, X, U, what)
        self.X, self.mark = X, (state_space, nu, U, self.U)

    def __enter__(self) -> KnotsChecked:
        self.outer = getattr(self.X, "_checked", None)
        self.X._checked = self.mark
        return self

    def __exit__(self, *exc) -> None:
        self.X._checked = self.outer


def _size(value, what: str) -> int:
    try:
        k = operator.index(value)
    except TypeError:
        raise ValueError(f"{what} must be an integer, got {value!r}") from None
    if k < 0:
        raise ValueError(f"{what} must be >= 0, got {k}")
    return k


def _fixed_vector(value, size: int, what: str) -> np.ndarray:
    a = np.array(value, dtype=np.float64)
    if a.shape != (size,):
        raise ValueError(f"{what} must have shape ({size},), got {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{what} contains NaN or inf")
    return a


def reference_vectors(value, size: int, what: str) -> np.ndarray:
    """A checked reference: zeros (None), one vector (size,) for every knot, or one per knot (N, size)."""
    ref = np.zeros(size) if value is None else np.array(value, dtype=np.float64)
    if ref.ndim not in (1, 2) or ref.shape[-1] != size:
        raise ValueError(f"{what}: reference must have shape ({size},) or (N, {size}), got {ref.shape}")
    if not np.isfinite(ref).all():
        raise ValueError(f"{what}: reference contains NaN or inf")
    return ref


_ZERO = np.zeros(())


def _zeros(shape: tuple[int, ...]) -> np.ndarray:
    """A read-only array of zeros that takes no memory: the Jacobian block of a variable a residual ignores."""
    return broadcast_view(_ZERO, shape)


@dataclass(eq=False)
class ResidualDerivatives:
    """``r`` (N, nr), ``R_x`` (N, nr, ndx) and ``R_u`` (N, nr, nu) at N knots; the block of a variable the
    residual does not depend on is a read-only view of zeros. ``x_columns``, when the residual knows it, is the
    pattern of ``R_x`` at every knot: ``(columns (nr, width) int64, counts (nr,) int64)``, row ``i``'s possibly
    non-zero columns in increasing order in ``columns[i, :counts[i]]``; costs then skip searching ``R_x`` for them."""

    r: np.ndarray
    R_x: np.ndarray
    R_u: np.ndarray
    x_columns: tuple[np.ndarray, np.ndarray] | None = None


class Residual(ABC):
    """A vector function ``r(x, u)`` of size ``nr`` on a ``StateSpace`` with ``nu`` controls, evaluated at all knots.

    ``linear``: ``r(x exp(dx), u + du)`` is affine in ``(dx, du)``, so a residual cost's Gauss–Newton Hessian is its
    exact Hessian. ``uses_x`` / ``uses_u``: whether ``R_x`` / ``R_u`` can be non-zero (costs skip the others).
    ``state_space`` is None for a residual of the controls alone (any state space). ``reads_dynamics``: it reads
    what a dynamics kept of its last evaluations at the same knots (contact forces and their derivatives), so a
    problem evaluates it at the knots of each run as the dynamics saw them, not gathered over several runs.
    """

    state_space: StateSpace | None
    nr: int
    nu: int
    linear: bool = False
    uses_x: bool = True
    uses_u: bool = False
    reads_dynamics: bool = False

    @abstractmethod
    def value(self, X: Trajectory, U: np.ndarray | None) -> np.ndarray:
        """``r(X[k], U[k])`` for every knot, (N, nr)."""

    @abstractmethod
    def derivatives(self, X: Trajectory, U: np.ndarray | None) -> ResidualDerivatives:
        """``r``, ``R_x``, ``R_u`` at every knot."""

    def _check(self, X, U) -> tuple[int, np.ndarray]:
        return check_knots(self.state_space, self.nu, X, U, self)


# ---------------------------------------------------------------- state


class StateResidual(Residual):
    """``r = x ⊖ x_ref = log(x_ref⁻¹ x)`` (ndx,) for a fixed ``reference`` State, or a Trajectory of N knots to
    track (then X must have N knots; a 1-knot trajectory is a fixed reference). ``reference`` is settable. Linear on
    a fixed base."""

    def __init__(self, state_space: StateSpace, reference: State | Trajectory, nu: int):
        if not isinstance(state_space, StateSpace):
            raise TypeError(f"StateResidual: state_space must be a StateSpace, got {type(state_space).__name__}")
        self.state_space, self.nu, self.nr = state_space, _size(nu, "StateResidual: nu"), state_space.ndx
        self.linear = not state_space.floating_base
        self.reference = reference

    @property
    def reference(self) -> State | Trajectory:
        return self._reference

    @reference.setter
    def reference(self, reference: State | Trajectory) -> None:
        if isinstance(reference, State):
            self.state_space.check(reference)
            self._ref = Trajectory.repeat(reference, 1)
        elif isinstance(reference, Trajectory):
            check_knots(self.state_space, 0, reference, None, "StateResidual: reference")
            self._ref = reference
        else:
            raise TypeError(f"StateResidual: reference must be a State or a Trajectory, got {type(reference).__name__}")
        self._reference = reference

    def __repr__(self) -> str:
        kind = "tracking" if isinstance(self._reference, Trajectory) else "fixed reference"
        return f"StateResidual({self.state_space}, {kind})"

    def _error(self, X, U, jacobian: bool):
        N, _ = self._check(X, U)
        ref = self._ref
        if len(ref) != 1 and len(ref) != N:
            raise ValueError(f"{self!r}: the reference trajectory has {len(ref)} knots, X has {N}")
        nh, n = (6 if self.state_space.floating_base else 0), self.state_space.n
        r = np.empty((N, self.nr))
        r[:, nh:nh + n] = X.s - ref.s
        r[:, nh + n:] = X.v - ref.v
        J = np.empty((N if jacobian else 0, 6, 6))
        if nh:
            Z = np.empty((N, 6))
            difference_batch(ref.H, X.H, jacobian, Z, J)
            r[:, :6] = Z
        return N, r, J

    def value(self, X, U) -> np.ndarray:
        return self._error(X, U, False)[1]

    def derivatives(self, X, U) -> ResidualDerivatives:
        """``r`` and ``R_x``; ``R_x`` is an array the residual keeps per knot count and overwrites at its next call
        with as many knots (its identity rows are written once: a new (N, ndx, ndx) array cost Talos 0.3 ms per call
        to allocate and clear). The running and terminal costs may share the residual: one array each."""
        N, r, J = self._error(X, U, True)
        ndx = self.nr
        kept = self.__dict__.setdefault("_jacobians", {})
        R_x = kept.get(N)
        if R_x is None:
            R_x = kept[N] = np.zeros((N, ndx, ndx))
            R_x.reshape(N, ndx * ndx)[:, ::ndx + 1] = 1.0
        if self.state_space.floating_base:
            R_x[:, :6, :6] = J
        return ResidualDerivatives(r, R_x, _zeros((N, ndx, self.nu)), self._x_columns())

    def _x_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """R_x's pattern: the identity, and the base block ``Jlog6`` of a floating base's first six rows."""
        columns = getattr(self, "_columns", None)
        if columns is None:
            ndx, nh = self.nr, 6 if self.state_space.floating_base else 0
            I, C = np.zeros((ndx, max(nh, 1)), np.int64), np.ones(ndx, np.int64)
            I[:nh, :nh], C[:nh] = np.arange(nh), nh
            I[nh:, 0] = np.arange(nh, ndx)
            columns = self._columns = (I, C)
        return columns


# ---------------------------------------------------------------- controls


class ControlResidual(Residual):
    """``r = u − u_ref`` (nu,), ``u_ref`` a vector (default 0) or an (N, nu) array to track. With ``state_space``
    None the residual accepts any state space."""

    linear, uses_x, uses_u = True, False, True

    def __init__(self, nu: int, reference=None, state_space: StateSpace | None = None):
        self.nu = self.nr = _size(nu, "ControlResidual: nu")
        if self.nu == 0:
            raise ValueError("ControlResidual: nu must be >= 1")
        self.state_space = state_space
        self.reference = reference

    @property
    def reference(self) -> np.ndarray:
        return self._reference

    @reference.setter
    def reference(self, reference) -> None:
        self._reference = reference_vectors(reference, self.nu, type(self).__name__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(nu={self.nu})"

    def value(self, X, U) -> np.ndarray:
        N, U = self._check(X, U)
        if self._reference.ndim == 2 and self._reference.shape[0] != N:
            raise ValueError(f"{self!r}: the reference has {self._reference.shape[0]} knots, X has {N}")
        return U - self._reference

    def derivatives(self, X, U) -> ResidualDerivatives:
        r = self.value(X, U)
        N, nu = r.shape
        R_u = np.zeros((N, nu, nu))
        R_u.reshape(N, nu * nu)[:, ::nu + 1] = 1.0
        return ResidualDerivatives(r, _zeros((N, nu, 2 * X.v.shape[1])), R_u)


class JointTorqueResidual(ControlResidual):
    """The joint torques ``u`` (n,) of a robot driven by ``RobotDynamics`` (its controls), for the torque-limit
    barrier."""

    def __init__(self, model: RobotModel):
        super().__init__(model.n, None, model.state_space)
        self.model = model

    def __repr__(self) -> str:
        return f"JointTorqueResidual({self.model.name!r})"


# ---------------------------------------------------------------- robot residuals


class _RobotResidual(Residual):
    """A residual of a ``RobotModel``'s state; ``nu`` defaults to the robot's ``n`` (its torques). It owns the
    workspace of its kinematics calls."""

    def __init__(self, model: RobotModel, nr: int, nu: int | None):
        if not isinstance(model, RobotModel):
            raise TypeError(f"{type(self).__name__}: model must be a RobotModel, got {type(model).__name__}")
        self.model, self.state_space, self.nr = model, model.state_space, nr
        self.workspace = Workspace(model)
        self.nu = model.n if nu is None else _size(nu, f"{type(self).__name__}: nu")

    def _derivatives(self, X, U, r: np.ndarray, J_q: np.ndarray, J_v: np.ndarray | None = None) -> ResidualDerivatives:
        N, nv = r.shape[0], self.model.nv
        R_x = np.empty((N, self.nr, 2 * nv))
        R_x[:, :, :nv] = J_q
        if J_v is None:
            R_x[:, :, nv:] = 0.0
        else:
            R_x[:, :, nv:] = J_v
        return ResidualDerivatives(r, R_x, _zeros((N, self.nr, self.nu)))


class _JointCoordinates(_RobotResidual):
    """The ``n`` joint coordinates of the state's positions or velocities (``velocities``): linear, its Jacobian one
    identity block in the joint columns of ``z_s`` or ``z_ṡ``."""

    linear = True
    velocities = False

    def __init__(self, model: RobotModel, nu: int | None = None):
        super().__init__(model, model.n, nu)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model.name!r})"

    def value(self, X, U) -> np.ndarray:
        self._check(X, U)
        return (X.v[:, self.model.nv - self.nr:] if self.velocities else X.s).copy()

    def derivatives(self, X, U) -> ResidualDerivatives:
        r = self.value(X, U)
        N, n, nv = r.shape[0], self.nr, self.model.nv
        R_x = np.zeros((N, n, 2 * nv))
        R_x[:, np.arange(n), (2 * nv if self.velocities else nv) - n + np.arange(n)] = 1.0
        return ResidualDerivatives(r, R_x, _zeros((N, n, self.nu)))


class JointPositionResidual(_JointCoordinates):
    """``r = s`` (n,): the joint positions, for the joint-limit barrier. Linear."""


class JointVelocityResidual(_JointCoordinates):
    """``r = ṡ`` (n,): the joint velocities (the last ``n`` entries of ``v``), for velocity limits. Linear."""

    velocities = True


def _frame(model: RobotModel, frame: int | str, what: str) -> int:
    """Index of a frame, or a ValueError naming the closest frame names."""
    try:
        return frame_id(model, frame)
    except (KeyError, IndexError, TypeError) as error:
        names = [f.name for f in model.frames]
        close = difflib.get_close_matches(str(frame), names, n=3)
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        raise ValueError(f"{what}: unknown frame {frame!r} in model {model.name!r}{hint}") from error


class _FrameResidual(_RobotResidual):
    def __init__(self, model: RobotModel, frame: int | str, nr: int, nu: int | None):
        super().__init__(model, nr, nu)
        self.frame = _frame(model, frame, type(self).__name__)
        self.frame_name = model.frames[self.frame].name


class FramePlacementResidual(_FrameResidual):
    """``r = log6(T⁻¹ oM_f)`` (6,) linear first: the SE(3) error of a frame (name or index) from the 4x4 target
    ``T`` (``target``, settable)."""

    def __init__(self, model: RobotModel, frame: int | str, target, nu: int | None = None):
        super().__init__(model, frame, 6, nu)
        self.target = target

    @property
    def target(self) -> np.ndarray:
        return self._target

    @target.setter
    def target(self, target) -> None:
        self._target = np.array(se3.check_transform(target, f"{type(self).__name__}: target"), dtype=np.float64)

    def __repr__(self) -> str:
        return f"FramePlacementResidual({self.model.name!r}, {self.frame_name!r})"

    def value(self, X, U) -> np.ndarray:
        self._check(X, U)
        return frame_placement_error(self.model, X, self.frame, self._target, self.workspace).residual

    def derivatives(self, X, U) -> ResidualDerivatives:
        self._check(X, U)
        e = frame_placement_error(self.model, X, self.frame, self._target, self.workspace)
        return self._derivatives(X, U, e.residual, e.jacobian)


class _PointTracking:
    """The settable ``target`` of a residual ``r = p(x) − target`` on world points: one point (3,), or one per knot
    (N, 3) to track a path."""

    @property
    def target(self) -> np.ndarray:
        return self._target

    @target.setter
    def target(self, target) -> None:
        self._target = reference_vectors(target, 3, f"{type(self).__name__}: target")

    def _error(self, points: np.ndarray) -> np.ndarray:
        if self._target.ndim == 2 and self._target.shape[0] != len(points):
            raise ValueError(f"{self!r}: the target has {self._target.shape[0]} knots, X has {len(points)}")
        return points - self._target


class FrameTranslationResidual(_PointTracking, _FrameResidual):
    """``r = op_f − p_ref`` (3,): the world position error of a frame's origin from ``target`` (settable): one point
    (3,), or one per knot (N, 3) to track a path (a swing foot's; X must then have N knots)."""

    def __init__(self, model: RobotModel, frame: int | str, target, nu: int | None = None):
        super().__init__(model, frame, 3, nu)
        self.target = target

    def __repr__(self) -> str:
        return f"FrameTranslationResidual({self.model.name!r}, {self.frame_name!r})"

    def value(self, X, U) -> np.ndarray:
        self._check(X, U)
        return self._error(frame_placement(self.model, X, self.frame, self.workspace)[:, :3, 3])

    def derivatives(self, X, U) -> ResidualDerivatives:
        r = self.value(X, U)
        J = frame_jacobian(self.model, X, self.frame, "local_world_aligned", self.workspace)
        return self._derivatives(X, U, r, J[:, :3])


class FrameRotationResidual(_FrameResidual):
    """``r = log3(R_refᵀ oR_f)`` (3,): the rotation error of a frame from the 3x3 rotation ``target`` (settable)."""

    def __init__(self, model: RobotModel, frame: int | str, target, nu: int | None = None):
        super().__init__(model, frame, 3, nu)
        self.target = target

    @property
    def target(self) -> np.ndarray:
        return self._T[:3, :3]

    @target.setter
    def target(self, target) -> None:
        T = np.eye(4)
        T[:3, :3] = so3.check_rotation(target, f"{type(self).__name__}: target")
        self._T = T

    def __repr__(self) -> str:
        return f"FrameRotationResidual({self.model.name!r}, {self.frame_name!r})"

    def value(self, X, U) -> np.ndarray:
        self._check(X, U)
        return frame_placement_error(self.model, X, self.frame, self._T, self.workspace).residual[:, 3:]

    def derivatives(self, X, U) -> ResidualDerivatives:
        # The angular rows of Jr6⁻¹ are [0, Jr3⁻¹(w)], so the rotation error and its Jacobian are the angular half
        # of the placement error from the target (R_ref, 0).
        self._check(X, U)
        e = frame_placement_error(self.model, X, self.frame, self._T, self.workspace)
        return self._derivatives(X, U, e.residual[:, 3:], e.jacobian[:, 3:])


class FrameVelocityResidual(_FrameResidual):
    """``r = v_f − v_ref`` (6,): the twist of a frame in ``reference`` ("local", "local_world_aligned", "world")
    minus the twist ``target`` (settable) given in the same reference."""

    def __init__(self, model: RobotModel, frame: int | str, target, reference: str = "local", nu: int | None = None):
        super().__init__(model, frame, 6, nu)
        reference_code(reference, type(self).__name__)
        self.reference = reference
        self.target = target

    @property
    def target(self) -> np.ndarray:
        return self._target

    @target.setter
    def target(self, target) -> None:
        self._target = _fixed_vector(target, 6, f"{type(self).__name__}: target")

    def __repr__(self) -> str:
        return f"FrameVelocityResidual({self.model.name!r}, {self.frame_name!r}, {self.reference!r})"

    def value(self, X, U) -> np.ndarray:
        self._check(X, U)
        return frame_velocity(self.model, X, self.frame, self.reference, self.workspace) - self._target

    def derivatives(self, X, U) -> ResidualDerivatives:
        r = self.value(X, U)
        dv_dq, dv_dv = frame_velocity_derivatives(self.model, X, self.frame, self.reference, self.workspace)
        return self._derivatives(X, U, r, dv_dq, dv_dv)


class CenterOfMassResidual(_PointTracking, _RobotResidual):
    """``r = c − c_ref`` (3,): the world centre-of-mass position error from ``target`` (settable): one point (3,),
    or one per knot (N, 3) to track a CoM trajectory (X must then have N knots)."""

    def __init__(self, model: RobotModel, target, nu: int | None = None):
        super().__init__(model, 3, nu)
        if not model.total_mass > 0.0:
            raise ValueError(f"CenterOfMassResidual: model {model.name!r} has no mass")
        self.target = target

    def __repr__(self) -> str:
        return f"CenterOfMassResidual({self.model.name!r})"

    def value(self, X, U) -> np.ndarray:
        self._check(X, U)
        return self._error(center_of_mass(self.model, X, self.workspace))

    def derivatives(self, X, U) -> ResidualDerivatives:
        r = self.value(X, U)
        return self._derivatives(X, U, r, center_of_mass_jacobian(self.model, X, self.workspace))
