"""Discrete-time robot dynamics under rigid contacts ``x⁺ = f(x, u)``, with exact first-order Jacobians.

The acceleration is the contact-constrained forward dynamics ``a = contact_dynamics(model, x, tau, contacts)``
(KKT system with Baumgarte stabilization, ``lietraj.dynamics.contact_dynamics``) instead of ABA, with
``tau = [0; u]`` (the floating base is unactuated); it is integrated by the same semi-implicit Euler on the state
group as ``RobotDynamics`` (DESIGN.md "time discretization"; Crocoddyl's IntegratedActionModelEuler over
DifferentialActionModelContactFwdDynamics)::

    v⁺ = v + dt a,   H⁺ = H exp(dt ν⁺),   s⁺ = s + dt ṡ⁺

The Jacobians ``f(x exp(dx), u + du) ≈ f(x, u) exp(F_x dx + F_u du)`` are the closed form of ``discrete_dynamics``
(``_euler_jacobians_batch``) with ``A_q, A_v, B = da/dq, da/dv, da/dtau`` from ``contact_dynamics_derivatives``:
tangent order ``[z_H; z_s; z_ν; z_ṡ]`` for rows and columns.

The contacts are one set for every knot the object is used at. A contact phase change (a foot lifts or lands) is
a different ``ContactRobotDynamics`` object for the knots of each phase, given to ``Problem`` as per-knot
``ActionModel`` s (knots sharing one object are evaluated in one call). There is no impulse at touchdown here.

The second-order term of DDP (``trajectory_hessian_contraction``) is not implemented: it needs the second
derivatives of the KKT solution (of the contact Jacobian and drift as well as of the inverse dynamics); solve
contact problems with ``solve_ilqr`` or ``solve_fddp``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from lietraj.dynamics._checks import result_arrays
from lietraj.dynamics.contact_dynamics import Contact, contact_dynamics
from lietraj.dynamics.contact_dynamics_derivatives import contact_dynamics_derivatives
from lietraj.dynamics.kinematics import frame_id
from lietraj.dynamics.model import RobotModel
from lietraj.dynamics.state import Trajectory
from lietraj.optimal_control.discrete_dynamics import (
    DiscreteDerivatives,
    DiscreteDynamics,
    _euler_jacobians_batch,
    euler_step,
    joint_torques,
)
from lietraj.optimal_control.euler_second_order import StepHessian


class ContactRobotDynamics(DiscreteDynamics):
    """Semi-implicit Euler dynamics of a ``RobotModel`` driven by its joint torques (``nu = model.n``) while the
    rigid ``contacts`` (``Contact`` objects, the same at every knot) hold; ``damping`` >= 0 regularizes redundant
    contacts as in ``contact_dynamics``. See the module docstring for phases and the missing second-order term.
    """

    def __init__(self, model: RobotModel, dt: float, contacts: Sequence[Contact], damping: float = 0.0):
        if not (isinstance(dt, (int, float, np.floating)) and math.isfinite(dt) and dt > 0):
            raise ValueError(f"ContactRobotDynamics: dt must be a finite positive number, got {dt!r}")
        if not (isinstance(damping, (int, float, np.floating)) and math.isfinite(damping) and damping >= 0):
            raise ValueError(f"ContactRobotDynamics: damping must be finite and >= 0, got {damping!r}")
        contacts = tuple(contacts)
        for c in contacts:
            if not isinstance(c, Contact):
                raise TypeError(f"ContactRobotDynamics({model.name}): contacts must be Contact objects, got "
                                f"{type(c).__name__}")
            try:
                frame_id(model, c.frame)
            except (KeyError, IndexError, TypeError) as e:
                raise ValueError(f"ContactRobotDynamics({model.name}): unknown contact frame {c.frame!r} ({e})") from None
        self.model = model
        self.dt = float(dt)
        self.contacts = contacts
        self.damping = float(damping)
        self.state_space = model.state_space
        self.nu = model.n
        self.nc = sum(c.dim for c in contacts)

    def __repr__(self) -> str:
        frames = ", ".join(f"{c.frame}:{c.kind}" for c in self.contacts)
        return f"ContactRobotDynamics({self.model.name!r}, dt={self.dt}, contacts=[{frames}])"

    def _torques(self, X: Trajectory, U) -> np.ndarray:
        return joint_torques(self.model, X, U, "ContactRobotDynamics")

    def step_trajectory(self, X: Trajectory, U) -> Trajectory:
        """Knot-wise ``f(X[k], U[k])``; raises ValueError where ``contact_dynamics`` does (redundant contacts
        without damping, a non-finite solution)."""
        return euler_step(X, contact_dynamics(self.model, X, self._torques(X, U), self.contacts, self.damping).a,
                          self.dt)

    def contact_forces(self, X: Trajectory, U) -> np.ndarray:
        """The contact forces (N, nc) during the step from each knot, stacked in contact order, each in its
        contact's reference (``ContactDynamicsResult.lagrangian``)."""
        return contact_dynamics(self.model, X, self._torques(X, U), self.contacts, self.damping).lagrangian

    def trajectory_derivatives(self, X: Trajectory, U, out: DiscreteDerivatives | None = None) -> DiscreteDerivatives:
        tau = self._torques(X, U)
        N, nv, n = len(X), self.model.nv, self.model.n
        F_x, F_u = result_arrays(out, DiscreteDerivatives, ((N, 2 * nv, 2 * nv), (N, 2 * nv, n)), "derivatives")
        d = contact_dynamics_derivatives(self.model, X, tau, self.contacts, self.damping)
        if self.model.floating_base:
            XI = np.ascontiguousarray(self.dt * (X.v[:, :6] + self.dt * d.a[:, :6]))
        else:
            XI = np.zeros((N, 0))
        E, PHI, K = np.empty((N, 4, 4)), np.empty((N, 6, 6)), np.empty((N, 6, 6))
        _euler_jacobians_batch(XI, self.dt, np.ascontiguousarray(d.da_dq), np.ascontiguousarray(d.da_dv),
                               np.ascontiguousarray(d.da_dtau), E, PHI, K, F_x, F_u)
        if not (np.isfinite(F_x).all() and np.isfinite(F_u).all()):
            raise ValueError(f"ContactRobotDynamics({self.model.name}).derivatives: non-finite Jacobian (the step "
                             "diverged)")
        return DiscreteDerivatives(F_x, F_u) if out is None else out

    def trajectory_hessian_contraction(self, X: Trajectory, U, LAM) -> StepHessian:
        raise NotImplementedError(f"ContactRobotDynamics({self.model.name}): the second-order term of the contact "
                                  "dynamics is not implemented; use solve_ilqr or solve_fddp")
