"""Discrete-time robot dynamics under rigid contacts ``x⁺ = f(x, u)``: the contact field times an integrator.

The acceleration is the contact-constrained forward dynamics of ``contact_field.ContactField`` (KKT system with
Baumgarte stabilization) instead of ABA, with ``tau = [0; u]`` (the floating base is unactuated); it is integrated
by the semi-implicit Euler step on the state group by default (``euler.py``; Crocoddyl's
IntegratedActionModelEuler over DifferentialActionModelContactFwdDynamics)::

    v⁺ = v + dt a,   H⁺ = H exp(dt ν⁺),   s⁺ = s + dt ṡ⁺

or by the Lie-group RK4 of ``rk4``. The Jacobians and DDP's second-order term are the integrator's (``euler``,
``rk4``, ``euler_second_order``, ``rk4_second_order``) with the contact field's derivatives and contraction ``μᵀ ∂²a``,
exact but for the ``Jlog6`` curvature of 6d position targets (``contact_field``).

The contacts are one set for every knot the object is used at. A contact phase change (a foot lifts or lands) is
a different ``ContactRobotDynamics`` object for the knots of each phase, given to ``Problem`` as per-knot
``ActionModel`` s (knots sharing one object are evaluated in one call, and roll out in one compiled call). There is
no impulse at touchdown here (``impulse_robot_dynamics``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lietraj.dynamics.contacts.contact_dynamics import Contact
from lietraj.dynamics.contacts.contact_dynamics_derivatives import ContactDynamicsDerivatives
from lietraj.dynamics.lie.state import Trajectory
from lietraj.dynamics.model.model import RobotModel
from lietraj.optimal_control.dynamics.contact_field import ContactField
from lietraj.optimal_control.dynamics.discrete_dynamics import IntegratedDynamics


class ContactRobotDynamics(IntegratedDynamics):
    """The dynamics of a ``RobotModel`` driven by its joint torques (``nu = model.n``) while the rigid ``contacts``
    (``Contact`` objects, the same at every knot) hold, by semi-implicit Euler (default) or ``integrator="rk4"``;
    ``damping`` >= 0 regularizes redundant contacts as in ``contact_dynamics``. See the module docstring for phases.
    """

    def __init__(self, model: RobotModel, dt: float, contacts: Sequence[Contact], damping: float = 0.0,
                 integrator: str = "euler"):
        super().__init__(ContactField(model, contacts, damping, "ContactRobotDynamics"), dt, integrator)
        self.model = model
        self.workspace = self.field.workspace
        self.contacts = self.field.contacts
        self.damping = self.field.damping
        self.nc = self.field.nc

    def __repr__(self) -> str:
        frames = ", ".join(f"{c.frame}:{c.kind}" for c in self.contacts)
        return f"ContactRobotDynamics({self.model.name!r}, dt={self.dt}, contacts=[{frames}])"

    def contact_forces(self, X: Trajectory, U) -> np.ndarray:
        """The contact forces (N, nc) during the step from each knot (at the knot's state, as the Euler step sees
        them), stacked in contact order, each in its contact's reference (``ContactDynamicsResult.lagrangian``)."""
        return self.field.solve(X, U)[1]

    def contact_derivatives(self, X: Trajectory, U) -> ContactDynamicsDerivatives:
        """``ContactField.contact_derivatives``: accelerations, contact forces and their derivatives at every knot,
        the last evaluation kept and shared (read the arrays, do not write them)."""
        return self.field.contact_derivatives(X, U)
