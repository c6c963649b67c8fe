"""Discrete-time dynamics ``x⁺ = f(x, u)`` on the state group: the solvers' interface, and a field times an integrator.

``DiscreteDynamics`` is the plug-in interface of the solvers (Crocoddyl's action model without its cost): the
step of every knot of a trajectory, its first-order Jacobians in the tangent chart of ``StateSpace``,
``f(x exp(dx), u + du) ≈ f(x, u) exp(F_x dx + F_u du)`` (tangent order ``[z_H; z_s; z_ν; z_ṡ]``), and optionally
DDP's second-order term. ``IntegratedDynamics`` is one made of a continuous field (``field.Field``: the free robot,
the robot under contacts, or a user's) and an integrator over any field (``euler.SemiImplicitEuler``,
``rk4.RK4``), as Crocoddyl's integrated action models wrap any differential model; ``RobotDynamics`` is the free
field of a robot model integrated so (``euler.py``). Neither step is the continuous ``A dt``
(``linearization.py``).

``rollout_policy`` is the solvers' forward pass (``solvers.forward_pass``): the closed-loop rollout of a policy,
one compiled call over the horizon for the built-in fields (``compiled_step``), one ``step`` per knot otherwise.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from lietraj.dynamics._checks import all_finite, result_arrays
from lietraj.dynamics.lie.state import State, StateSpace, Trajectory
from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.model.workspace import Workspace
from lietraj.optimal_control.dynamics.euler import EulerStructure, SemiImplicitEuler
from lietraj.optimal_control.dynamics.euler_second_order import StepHessian
from lietraj.optimal_control.dynamics.field import Field, FieldTables
from lietraj.optimal_control.dynamics.free_field import FreeField
from lietraj.optimal_control.dynamics.rk4 import RK4
from lietraj.optimal_control.solvers.forward_pass import (
    CompiledStep,
    PolicyRollout,
    rollout_policy,
    rollout_policy_per_knot,
    rollout_work,
)

INTEGRATORS = {"euler": SemiImplicitEuler, "rk4": RK4}


@dataclass(eq=False)
class DiscreteDerivatives:
    """``F_x`` (ndx, ndx) and ``F_u`` (ndx, nu) of ``x⁺ = f(x, u)`` in the tangent chart, with a leading ``N`` for
    a trajectory: ``f(x exp(dx), u + du) ≈ f(x, u) exp(F_x dx + F_u du)``. Unpacks as ``F_x, F_u = ...``.
    ``structure``: how a semi-implicit Euler step built them (``euler.EulerStructure``), filled by the dynamics that
    know it when given; the Riccati sweep uses it to multiply by them faster. ``stepped``: room for the step
    ``f(X[k], U[k])`` itself (a Trajectory of the knots, contiguous arrays), which a dynamics whose
    ``steps_with_derivatives`` is True writes with the Jacobians when given (a problem's gaps at the knots it
    linearizes: Crocoddyl's ``calc`` beside ``calcDiff``, one pass)."""

    F_x: np.ndarray
    F_u: np.ndarray
    structure: EulerStructure | None = None
    stepped: Trajectory | None = None

    def __iter__(self):
        return iter((self.F_x, self.F_u))


def covectors(LAM, N: int, ndx: int, who: str) -> np.ndarray:
    """DDP's covectors ``LAM`` (N, ndx) on the next states' tangent, checked (finite, one per knot) as float64."""
    LAM = np.asarray(LAM, dtype=np.float64)
    if LAM.shape != (N, ndx) or not np.all(np.isfinite(LAM)):
        raise ValueError(f"{who}.hessian_contraction: lam must be finite with shape ({ndx},) per knot, got {LAM.shape} "
                         f"for {N} knot(s)")
    return LAM


class DiscreteDynamics(ABC):
    """Plug-in interface of the solvers: ``x⁺ = f(x, u)`` on a ``StateSpace`` and its first-order Jacobians.

    A subclass sets ``state_space``, ``nu`` (control size) and ``dt``, and implements ``step_trajectory`` and
    ``trajectory_derivatives`` (all knots at once, the solvers' hot path); the single-state ``step``,
    ``derivatives`` and ``rollout`` come from those.
    """

    state_space: StateSpace
    nu: int
    dt: float

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("_compiled", None)  # a kept ``compiled_step``: work arrays of this process
        return state

    @abstractmethod
    def step_trajectory(self, X: Trajectory, U) -> Trajectory:
        """Knot-wise ``f(X[k], U[k])`` for ``U`` of shape (N, nu) (not a rollout: knots are independent)."""

    @abstractmethod
    def trajectory_derivatives(self, X: Trajectory, U, out: DiscreteDerivatives | None = None) -> DiscreteDerivatives:
        """``F_x`` (N, ndx, ndx) and ``F_u`` (N, ndx, nu) at every knot; ``out`` is overwritten when given."""

    # whether ``trajectory_derivatives`` writes the step into ``out.stepped`` when given (the Euler step and the
    # impact do, from what their Jacobians compute); the others are stepped by ``step_trajectory``
    steps_with_derivatives = False

    def step(self, x: State, u) -> State:
        """``x⁺ = f(x, u)`` for one state."""
        return self.step_trajectory(Trajectory.repeat(x, 1), np.asarray(u, dtype=np.float64)[None])[0]

    def derivatives(self, x: State | Trajectory, u, out: DiscreteDerivatives | None = None) -> DiscreteDerivatives:
        """``F_x, F_u`` at one state (``(ndx, ndx)``, ``(ndx, nu)``) or at every knot of a trajectory."""
        if type(x) is Trajectory:
            return self.trajectory_derivatives(x, u, out)
        out1 = None if out is None else DiscreteDerivatives(out.F_x[None], out.F_u[None])
        d = self.trajectory_derivatives(Trajectory.repeat(x, 1), np.asarray(u, dtype=np.float64)[None], out1)
        return DiscreteDerivatives(d.F_x[0], d.F_u[0]) if out is None else out

    def trajectory_hessian_contraction(self, X: Trajectory, U, LAM) -> StepHessian:
        """The second-order term of DDP at every knot: the symmetric Hessian in ``(dx, du)`` of
        ``LAM[k]ᵀ log(f(x_k, u_k)⁻¹ f(x_k exp dx, u_k + du))``, as ``StepHessian`` blocks (N, ndx, ndx), (N, ndx, nu),
        (N, nu, nu). Optional: dynamics without it can be solved by iLQR, which needs only the Jacobians."""
        raise NotImplementedError(f"{type(self).__name__} does not implement trajectory_hessian_contraction (the "
                                  "second-order dynamics term of DDP); use iLQR, which needs only the Jacobians")

    def hessian_contraction(self, x: State, u, lam) -> StepHessian:
        """``trajectory_hessian_contraction`` at one state: blocks (ndx, ndx), (ndx, nu), (nu, nu)."""
        self.state_space.check(x)
        H = self.trajectory_hessian_contraction(Trajectory.repeat(x, 1), np.asarray(u, dtype=np.float64)[None],
                                                np.asarray(lam, dtype=np.float64)[None])
        return StepHessian(H.xx[0], H.xu[0], H.uu[0])

    def rollout_policy(self, x0: State, X_ref: Trajectory, U_ref, k, K, alpha: float, gaps=None, u_lb=None,
                       u_ub=None) -> PolicyRollout:
        """The closed-loop rollout of the policy ``u_t = clip(U_ref[t] + alpha k[t] + K[t] (x_t ⊖ X_ref[t]), u_lb[t],
        u_ub[t])`` from ``x_0 = x0``, with ``x_t ← x_t ⊕ (alpha - 1) gaps[t]`` when ``gaps`` (N + 1, ndx) are given and
        ``alpha < 1``: the solvers' forward pass (``solvers.forward_pass.rollout_policy``). ``U_ref``, ``k`` are
        (N, nu), ``K`` (N, nu, ndx), ``X_ref`` has N + 1 knots; the bounds are (nu,) or (N, nu), ``None`` for none.
        Bad shapes raise ValueError; a non-finite or invalid state or control ends the rollout with a status
        (``PolicyRollout.failed_at``). This generic version calls ``step`` once per knot; dynamics with a
        ``compiled_step`` run the whole horizon in one compiled call."""
        return rollout_policy_per_knot(self, x0, X_ref, U_ref, k, K, alpha, gaps, u_lb, u_ub)

    def compiled_step(self) -> CompiledStep | None:
        """The compiled form of ``step`` for the solvers' forward pass, or None (stepped in Python, knot by knot)."""
        return None

    def forget_evaluations(self) -> None:
        """Drop any evaluation kept for equal inputs (a built-in field's, ``RobotField.forget_evaluations``); nothing
        by default."""

    def compiled_rollout_policy(self, x0: State, X_ref: Trajectory, U_ref, k, K, alpha: float, gaps=None, u_lb=None,
                                u_ub=None) -> PolicyRollout:
        """``rollout_policy`` as the solvers' forward pass computes it: one compiled call over the horizon when
        ``compiled_step`` has a form (what a subclass with one returns from its ``rollout_policy``)."""
        return rollout_policy(self, x0, X_ref, U_ref, k, K, alpha, gaps, u_lb, u_ub)

    def rollout(self, x0: State, U) -> Trajectory:
        """States ``x_0 .. x_N`` from ``x_0`` under the controls ``U`` (N, nu) (``open_loop``); a rollout that fails
        raises ValueError naming the knot, what failed and whether it diverged on the way there."""
        U = np.asarray(U, dtype=np.float64)
        if U.ndim != 2 or U.shape[1] != self.nu:
            raise ValueError(f"rollout: U must have shape (N, {self.nu}), got {U.shape}")
        trial = open_loop(self, x0, U)
        if not trial.ok:
            raise trial.error(f"{type(self).__name__}.rollout", 0, getattr(self, "dt", None))
        return trial.X


def open_loop(dynamics: DiscreteDynamics, x0: State, U: np.ndarray) -> PolicyRollout:
    """The states from ``x0`` under the controls ``U`` (N, nu): ``dynamics.rollout_policy`` without feedback (one
    compiled call for a dynamics with a compiled step), with its status where it fails. The zero gains ignore the
    deviations from the reference, which any states will do."""
    N, nu, ndx = U.shape[0], dynamics.nu, dynamics.state_space.ndx
    return dynamics.rollout_policy(x0, Trajectory.repeat(x0, N + 1), U, np.zeros((N, nu)), np.zeros((N, nu, ndx)), 1.0)


class IntegratedDynamics(DiscreteDynamics):
    """``x⁺ = f(x, u)``: the continuous ``field`` (a ``Field``) integrated over ``dt`` by ``integrator`` ("euler":
    semi-implicit Euler, the default; "rk4": the commutator-free Lie-group RK4; or an integrator object such as
    ``SemiImplicitEuler()``). The step, the Jacobians and DDP's second-order term at every knot are the integrator's,
    built on the field's values and derivatives; a built-in field also has a compiled step for the solvers' forward
    pass. ``integrator`` is kept as its name."""

    def __init__(self, field: Field, dt: float, integrator="euler"):
        who = type(self).__name__
        if not isinstance(field, Field):
            raise ValueError(f"{who}: field must be a Field, got {type(field).__name__}")
        if not (isinstance(dt, (int, float, np.floating)) and math.isfinite(dt) and dt > 0):
            raise ValueError(f"{who}: dt must be a finite positive number, got {dt!r}")
        self.dt = float(dt)
        if isinstance(integrator, str):
            if integrator not in INTEGRATORS:
                raise ValueError(f"{who}: integrator must be one of {tuple(INTEGRATORS)}, got {integrator!r}")
            integrator = INTEGRATORS[integrator]()
        elif not isinstance(integrator, tuple(INTEGRATORS.values())):
            raise ValueError(f"{who}: integrator must be one of {tuple(INTEGRATORS)} or an integrator object, got "
                             f"{integrator!r}")
        self.field = field
        self.scheme = integrator
        self.integrator = integrator.name
        self.steps_with_derivatives = (isinstance(integrator, SemiImplicitEuler)
                                       and type(self).step_trajectory is IntegratedDynamics.step_trajectory)
        self.state_space = field.state_space
        self.nu = field.nu

    def __repr__(self) -> str:
        return f"IntegratedDynamics({self.field!r}, dt={self.dt}, integrator={self.integrator!r})"

    def _who(self) -> str:
        model = getattr(self.field, "model", None)
        return type(self).__name__ + ("" if model is None else f"({model.name})")

    def _finite(self, arrays, what: str) -> None:
        # ``all_finite`` sums first: a third of the time of np.isfinite(...).all() on DDP's term, ~1 MB a solo12
        # iteration; a sum that overflows is not reported here (the exact test decides)
        with np.errstate(over="ignore", invalid="ignore"):
            if all(all_finite(a) for a in arrays):
                return
        raise ValueError(f"{self._who()}.{what}: non-finite result (the step diverged)")

    def step_trajectory(self, X: Trajectory, U) -> Trajectory:
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging step is reported below
            Y = self.scheme.step(self.field, self.dt, X, U)
        k = Y.first_non_finite()
        if k is not None:
            raise ValueError(f"{self._who()}.step: the step diverged (non-finite state) at knot {k}; reduce dt or the "
                             "controls")
        return Y

    def trajectory_derivatives(self, X: Trajectory, U, out: DiscreteDerivatives | None = None,
                               threads: int = 1) -> DiscreteDerivatives:
        """``DiscreteDynamics.trajectory_derivatives``; with ``threads`` 2 (a solver's ``SolverOptions.threads``) the
        field's derivatives are shared by two threads where the integrator and field can (``Field.shared_derivatives``)."""
        N, ndx = len(X), self.state_space.ndx
        F_x, F_u = result_arrays(out, DiscreteDerivatives, ((N, ndx, ndx), (N, ndx, self.nu)), "derivatives")
        step = {} if out is None or out.stepped is None or not self.steps_with_derivatives else \
            {"stepped": out.stepped}
        with np.errstate(over="ignore", invalid="ignore"):  # reported below
            finite = self.scheme.derivatives(self.field, self.dt, X, U, F_x, F_u,
                                             None if out is None else out.structure, threads, **step)
        if not finite:
            raise ValueError(f"{self._who()}.derivatives: non-finite result (the step diverged)")
        return DiscreteDerivatives(F_x, F_u) if out is None else out

    def trajectory_hessian_contraction(self, X: Trajectory, U, LAM, threads: int = 1,
                                       out: StepHessian | None = None) -> StepHessian:
        """The second-order term of DDP at every knot (``euler_second_order``, ``rk4_second_order``) with the field's
        contraction ``μᵀ ∂²a`` (``Field.hessian_contraction``; NotImplementedError where the field has none), shared
        by ``threads`` threads as ``trajectory_derivatives`` shares the derivatives; written into ``out`` (blocks
        of ``len(X)`` knots) when given."""
        if type(X) is not Trajectory:
            raise TypeError(f"{self._who()}.hessian_contraction: expected a Trajectory, got {type(X).__name__}")
        LAM = covectors(LAM, len(X), self.state_space.ndx, self._who())
        N, ndx, nu = len(X), self.state_space.ndx, self.nu
        if out is not None and (out.xx.shape != (N, ndx, ndx) or out.xu.shape != (N, ndx, nu)
                                or out.uu.shape != (N, nu, nu)):
            raise ValueError(f"{self._who()}.hessian_contraction: out must hold blocks of {N} knots "
                             f"({ndx} x {ndx}, {ndx} x {nu}, {nu} x {nu})")
        H = self.scheme.hessian_contraction(self.field, self.dt, X, U, LAM, threads, out)
        self._finite((H.xx, H.xu, H.uu), "hessian_contraction")
        return H

    def rollout_policy(self, x0: State, X_ref: Trajectory, U_ref, k, K, alpha: float, gaps=None, u_lb=None,
                       u_ub=None) -> PolicyRollout:
        """``DiscreteDynamics.rollout_policy`` in one compiled call over the whole horizon for a built-in field."""
        return self.compiled_rollout_policy(x0, X_ref, U_ref, k, K, alpha, gaps, u_lb, u_ub)

    def forget_evaluations(self) -> None:
        forget = getattr(self.field, "forget_evaluations", None)
        if forget is not None:
            forget()

    def compiled_step(self) -> CompiledStep | None:
        tables = self.field.tables
        if tables is None:
            return None
        # made once (a forward pass asks at every run of knots of every trial), again if the field or dt changed
        kept = self.__dict__.get("_compiled")
        if kept is None or kept.field is not tables or kept.dt != self.dt:
            kept = self._compiled = compiled_form(self.field.model, tables, self.integrator == "rk4", self.dt,
                                                  self.field.workspace, self.field.nc,
                                                  getattr(self.field, "remember_solution", None))
        return kept


def compiled_form(model: RobotModel, tables: FieldTables, rk4: bool, dt: float, workspace: Workspace, nc: int,
                  remember=None) -> CompiledStep:
    """The ``CompiledStep`` of a built-in field (or impact) of ``model`` on ``nc`` contact rows, its work arrays kept
    by ``workspace``."""
    return CompiledStep(model, tables, rk4, dt, workspace.work(rollout_work, nc), remember)


class RobotDynamics(IntegratedDynamics):
    """Discrete dynamics of a ``RobotModel`` driven by its joint torques: its ``FreeField`` (ABA, with constant
    body-frame external wrenches ``fext`` ``(nb, 6)``, optional) by semi-implicit Euler or RK4 on the state group.
    Every trajectory-level call evaluates the forward dynamics (and its derivatives) of all knots in one compiled
    call per integrator stage; DDP's term is not available with external wrenches."""

    def __init__(self, model: RobotModel, dt: float, integrator: str = "euler", fext=None):
        super().__init__(FreeField(model, fext), dt, integrator)
        self.model = model
        self.fext = self.field.fext
        self.workspace = self.field.workspace

    def __repr__(self) -> str:
        return f"RobotDynamics({self.model.name!r}, dt={self.dt}, integrator={self.integrator!r})"
