"""The touchdown knot of a contact sequence: a rigid impact as discrete dynamics ``x⁺ = f(x, u)``, exact Jacobians.

At the knot where contacts close, the robot keeps its configuration and its velocity jumps to the post-impact one
of ``impulse_dynamics`` (``M (v⁺ - v) = Jᵀ Λ``, ``J v⁺ = -e J v``; Crocoddyl's ``ActionModelImpulseFwdDynamics``)::

    x⁺ = (H, s, v⁺(x))        (no time passes: dt = 0)

The control is ignored: ``Problem`` needs one control size at every knot, so ``nu = model.n`` like the phases
around it, and ``F_u = 0`` (Crocoddyl's impulse models have ``nu = 0``). Give the knot a control regularization
cost so that ``Q_uu`` stays positive definite there; the optimal control of the knot is then that cost's
minimizer, with no effect on the trajectory.

Jacobians in the tangent chart, ``f(x exp(dx), u + du) ≈ f(x, u) exp(F_x dx + F_u du)``, tangent order
``[z_H; z_s; z_ν; z_ṡ]``: the configuration rows carry the perturbation through unchanged (``x⁺`` has the same
``H`` and ``s``, so ``log`` of the perturbed ``H⁺`` relative to ``H⁺`` is ``z_H``), the velocity rows are the
derivatives of ``impulse_dynamics_derivatives``::

    F_x = [[I, 0], [dv⁺/dq, dv⁺/dv]],    F_u = 0

The second-order term of DDP (``trajectory_hessian_contraction``) is exact: the chart of ``x⁺`` carries the
configuration through linearly, so the Hessian of ``λᵀ log(x̄⁺⁻¹ f(x̄ exp δx))`` is the velocity part's
``λ_vᵀ ∂²v⁺/∂(q, v)²`` (``impulse_hessian_contraction``: the inverse-dynamics curvature of ``M(q) Δv`` through the
constrained inverse inertia and the curvature of the contact Jacobian; ``v⁺`` is linear in ``v``, so the ``vv``
block is zero), and every block involving ``u`` is zero.

A contact sequence is then, for example, a flight phase (``RobotDynamics`` or ``ContactRobotDynamics`` with the
stance feet only), one ``ImpulseRobotDynamics`` knot on the landing feet, and a ``ContactRobotDynamics`` phase on
all feet, given to ``Problem`` as per-knot ``ActionModel`` s. The impact does not place the feet: it stops them
wherever they are, so costs (or the stance phase's Baumgarte targets) must bring them to the ground.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from lietraj.dynamics._checks import checked_state, require_finite, result_arrays
from lietraj.dynamics.contacts.contact_dynamics import Contact, pack_contacts, solve_impact
from lietraj.dynamics.contacts.contact_dynamics_derivatives import contact_frame_ids
from lietraj.dynamics.contacts.contact_dynamics_second_order import impulse_hessian_contraction
from lietraj.dynamics.contacts.impulse_dynamics import impulse_derivatives
from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.model.workspace import Workspace
from lietraj.dynamics.lie.state import State, Trajectory
from lietraj.optimal_control.dynamics.discrete_dynamics import (
    CompiledStep,
    DiscreteDerivatives,
    DiscreteDynamics,
    PolicyRollout,
    compiled_form,
    covectors,
)
from lietraj.optimal_control.dynamics.field import FieldTables, joint_torques
from lietraj.optimal_control.dynamics.euler_second_order import StepHessian


class ImpulseRobotDynamics(DiscreteDynamics):
    """The rigid impact of a ``RobotModel`` on ``contacts`` (``Contact`` objects; their Baumgarte gains and targets
    play no part) with coefficient of ``restitution`` in [0, 1] (0: inelastic, the feet stop); ``damping`` >= 0
    regularizes redundant contacts as in ``impulse_dynamics``. ``dt = 0``; the control (``nu = model.n``) is
    ignored (module docstring)."""

    steps_with_derivatives = True  # its derivatives solve the impact, whose v⁺ is the step

    def __init__(self, model: RobotModel, contacts: Sequence[Contact], restitution: float = 0.0, damping: float = 0.0):
        for value, what, upper in ((restitution, "restitution", 1.0), (damping, "damping", math.inf)):
            if not (isinstance(value, (int, float, np.floating)) and math.isfinite(value) and 0.0 <= value <= upper):
                bounds = "in [0, 1]" if upper == 1.0 else ">= 0"
                raise ValueError(f"ImpulseRobotDynamics: {what} must be finite and {bounds}, got {value!r}")
        contacts = tuple(contacts)
        contact_frame_ids(model, contacts, "ImpulseRobotDynamics")  # Contact objects on frames of the model
        self.model = model
        self.workspace = Workspace(model)
        self.dt = 0.0
        self.contacts = contacts
        self.restitution = float(restitution)
        self.damping = float(damping)
        self.state_space = model.state_space
        self.nu = model.n
        self.nc = sum(c.dim for c in contacts)

    def __repr__(self) -> str:
        frames = ", ".join(f"{c.frame}:{c.kind}" for c in self.contacts)
        return f"ImpulseRobotDynamics({self.model.name!r}, contacts=[{frames}], restitution={self.restitution})"

    def _check_controls(self, X: Trajectory, U) -> None:
        joint_torques(self.model, X, U, "ImpulseRobotDynamics")  # shape and NaN checks only: the control is ignored

    def step_trajectory(self, X: Trajectory, U) -> Trajectory:
        """Knot-wise ``(H, s, v⁺)``; raises ValueError where ``impulse_dynamics`` does (redundant contacts without
        damping, a non-finite solution)."""
        self._check_controls(X, U)
        Y = X.copy()
        Y.v = self._impact(X, "ImpulseRobotDynamics.step")[0]
        return Y

    def _checked_knots(self, X: Trajectory, what: str) -> Trajectory:
        """The knots checked as ``impulse_dynamics`` checks its state; the contacts and coefficients were checked
        when the dynamics was made (a solver's gaps and derivatives reach every touchdown run)."""
        X = checked_state(self.model, X, what)
        require_finite(self.model, what, X)
        return X

    def _impact(self, X: Trajectory, what: str) -> tuple[np.ndarray, np.ndarray]:
        """``(v⁺, stacked impulses)`` at every knot: ``impulse_dynamics`` of checked knots (``_checked_knots``)."""
        X = self._checked_knots(X, what)
        v_plus, impulses, _ = solve_impact(self.model, X, self.contacts, self.restitution, self.damping,
                                           self.workspace, what)
        return v_plus, impulses

    def _frame_ids(self) -> list[int]:
        """The contacts' frame indices, found once (again if the contacts were replaced)."""
        kept = self.__dict__.get("_ids")
        if kept is None or kept[0] is not self.contacts:
            kept = self._ids = (self.contacts, contact_frame_ids(self.model, self.contacts, "ImpulseRobotDynamics"))
        return kept[1]

    def compiled_step(self) -> CompiledStep:
        """The impact in the rollout kernel's form (the contact tables with the restitution): a touchdown knot of a
        solver's forward pass is one compiled call like the phases around it, not a Python ``step``."""
        kept = self.__dict__.get("_compiled")  # made once, again if the contacts or coefficients changed
        if kept is None or kept[0] is not self.contacts or kept[1:3] != (self.damping, self.restitution):
            packed = pack_contacts(self.model, self.contacts, "ImpulseRobotDynamics")
            tables = FieldTables(None, (packed.CI, packed.CF, self.damping, self.restitution))
            kept = self._compiled = (self.contacts, self.damping, self.restitution,
                                     compiled_form(self.model, tables, False, 0.0, self.workspace, self.nc))
        return kept[3]

    def rollout_policy(self, x0: State, X_ref: Trajectory, U_ref, k, K, alpha: float, gaps=None, u_lb=None,
                       u_ub=None) -> PolicyRollout:
        """``DiscreteDynamics.rollout_policy`` in one compiled call (``compiled_step``)."""
        return self.compiled_rollout_policy(x0, X_ref, U_ref, k, K, alpha, gaps, u_lb, u_ub)

    def impulses(self, X: Trajectory) -> np.ndarray:
        """The contact impulses (N, nc) of the impact at each knot, stacked in contact order, each in its contact's
        reference (``ImpulseDynamicsResult.lagrangian``), for costs and plots."""
        if type(X) is not Trajectory:
            raise TypeError(f"ImpulseRobotDynamics.impulses: expected a Trajectory, got {type(X).__name__}")
        return self._impact(X, "ImpulseRobotDynamics.impulses")[1]

    def trajectory_derivatives(self, X: Trajectory, U, out: DiscreteDerivatives | None = None) -> DiscreteDerivatives:
        self._check_controls(X, U)
        N, nv = len(X), self.model.nv
        F_x, F_u = result_arrays(out, DiscreteDerivatives, ((N, 2 * nv, 2 * nv), (N, 2 * nv, self.nu)), "derivatives")
        what = "ImpulseRobotDynamics.derivatives"
        X = self._checked_knots(X, what)
        d = impulse_derivatives(self.model, X, self.contacts, self.restitution, self.damping, self.workspace, what,
                                self._frame_ids())
        F_x[:, :nv, :] = 0.0
        F_x.reshape(N, -1)[:, :(2 * nv + 1) * nv:2 * nv + 1] = 1.0  # the configuration does not jump: [I, 0] rows
        F_x[:, nv:, :nv] = d.dvplus_dq
        F_x[:, nv:, nv:] = d.dvplus_dv
        F_u[...] = 0.0
        if out is not None and out.stepped is not None:  # the step (H, s, v⁺), which the derivatives solved for
            if X.H is not None:
                out.stepped.H[...] = X.H
            out.stepped.s[...] = X.s
            out.stepped.v[...] = d.v_plus
        return DiscreteDerivatives(F_x, F_u) if out is None else out

    def trajectory_hessian_contraction(self, X: Trajectory, U, LAM) -> StepHessian:
        """The second-order term of DDP at every knot, exact (module docstring): ``xx`` from
        ``impulse_hessian_contraction`` with the velocity part of ``LAM``; ``xu`` and ``uu`` are zero."""
        self._check_controls(X, U)
        N, nv, ndx = len(X), self.model.nv, self.state_space.ndx
        LAM = covectors(LAM, N, ndx, f"ImpulseRobotDynamics({self.model.name})")
        h = impulse_hessian_contraction(self.model, X, self.contacts, LAM[:, nv:], self.restitution, self.damping,
                                        self.workspace)
        xx = np.zeros((N, ndx, ndx))
        xx[:, :nv, :nv] = h.qq + np.swapaxes(h.qq, -1, -2)
        xx[:, :nv, :nv] *= 0.5
        xx[:, :nv, nv:] = h.qv
        xx[:, nv:, :nv] = np.swapaxes(h.qv, -1, -2)
        return StepHessian(xx, np.zeros((N, ndx, self.nu)), np.zeros((N, self.nu, self.nu)))
