"""The contact field of a robot driven by its joint torques while rigid contacts hold: ``a`` of the
contact-constrained forward dynamics.

``a = contact_dynamics(model, x, [0; u], contacts)`` (KKT system with Baumgarte stabilization,
``lietraj.dynamics.contacts.contact_dynamics``; Crocoddyl's DifferentialActionModelContactFwdDynamics) instead of
ABA; the first derivatives are ``contact_dynamics_derivatives``' and the contraction ``μᵀ ∂²a`` is
``contact_dynamics_second_order``'s: the inverse-dynamics curvature (IDSVA SO) through the constrained inverse
inertia, the curvature of the contact forces' generalized force, and the curvature of the contact Jacobian, drift
and Baumgarte terms. All of it is exact except one term: for a 6d contact with a position target, the derivative
of ``Jlog6`` in the position error ``Kp log6(T⁻¹ oMf)`` (O(Kp |e_c|), zero when the foot is at its target).

The contacts are one set for every knot the field is used at: a contact phase change (a foot lifts or lands) is
another field, and so another dynamics object, for the knots of each phase.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import numpy as np

from lietraj.dynamics.contacts.contact_dynamics import (
    Contact,
    ContactDynamicsResult,
    pack_contacts,
    solve_contact_dynamics,
)
from lietraj.dynamics._checks import checked_state
from lietraj.dynamics.contacts.contact_dynamics_derivatives import ContactDynamicsDerivatives, contact_derivatives
from lietraj.dynamics.contacts.contact_dynamics_second_order import contact_hessian_contraction
from lietraj.dynamics.lie.state import Trajectory
from lietraj.dynamics.model.model import RobotModel
from lietraj.optimal_control.dynamics.field import FieldDerivatives, FieldHessian, FieldTables, knot_rows
from lietraj.optimal_control.dynamics.free_field import RobotField

# Evaluations a contact field keeps of each kind (``RobotField.keep``): one per run of knots a problem gives the
# field (the windows of a gait hold up to three runs of one stance) and per trial of a line search, so that the
# contact costs read every run's forces and derivatives instead of solving them again.
RUNS_KEPT = 8


class ContactField(RobotField):
    """``a`` of ``model`` under the rigid ``contacts`` (``Contact`` objects, the same at every knot); ``damping``
    >= 0 regularizes redundant contacts as in ``contact_dynamics`` (module docstring)."""

    def __init__(self, model: RobotModel, contacts: Sequence[Contact], damping: float = 0.0, who: str = "ContactField"):
        if not (isinstance(damping, (int, float, np.floating)) and math.isfinite(damping) and damping >= 0):
            raise ValueError(f"{who}: damping must be finite and >= 0, got {damping!r}")
        super().__init__(model)
        self.contacts = tuple(contacts)
        self.packed = pack_contacts(model, self.contacts, who)
        self.damping = float(damping)
        self.nc = self.packed.nc
        if type(self) is ContactField:  # a subclass may change the field: it is evaluated in Python
            self.tables = FieldTables(None, (self.packed.CI, self.packed.CF, self.damping, -1.0))
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ContactField({self.model.name!r}, contacts=[{', '.join(f'{c.frame}:{c.kind}' for c in self.contacts)}])"

    def solve(self, X: Trajectory, U) -> tuple[np.ndarray, np.ndarray]:
        """Accelerations (N, nv) and contact forces (N, nc) at every knot, from one batched kernel call; raises
        ValueError where ``contact_dynamics`` does (redundant contacts without damping, a non-finite solution).
        At the knots of the derivatives kept (``contact_derivatives``), their solution: a solver's gaps step the
        knots it has just linearized; at the knots of the last rollout (``remember_solution``), its solution."""
        with self._lock:
            d = self.recall("contact", X, U)
            if d is not None:
                return d.a.copy(), d.forces.copy()
            solution = self.recall("solution", X, U)
            if solution is not None:
                return solution.a.copy(), solution.lagrangian.copy()
            tau = self.torques(X, U)
            N, nv, nc = len(X), self.model.nv, self.nc
            A, LAM = np.empty((N, nv)), np.empty((N, nc))
            J, gamma = self.buffer("rows", 1, lambda: (np.empty((1, nc, nv)), np.empty((1, nc))))
            solve_contact_dynamics(self.model, X, tau, self.packed, self.damping, A, LAM, J, gamma, self.workspace)
            return A, LAM

    def acceleration(self, X: Trajectory, U) -> np.ndarray:
        return self.solve(X, U)[0]

    def contact_derivatives(self, X: Trajectory, U, threads: int = 1) -> ContactDynamicsDerivatives:
        """``contact_dynamics_derivatives`` at every knot: accelerations, contact forces and their derivatives, the
        knots shared by ``threads`` threads (``RobotField.other_workspace``).

        The last evaluation is kept (``RobotField.recall``) and returned again for equal ``(X, U)``: the
        Jacobians, DDP's second-order term and the contact costs (``WrenchConeResidual(..., dynamics=...)``)
        evaluate the same knots in one iteration and share one computation. Knots equal to those of a kept
        evaluation moved by a few knots (a receding window's warm start, after a tick that linearized at its plan:
        ``RobotField.fill_shifted``) take their rows from it, when they are most of them; the others are computed.
        The arrays are shared: read them, do not write them. Two threads asking at once (two solves on one problem's
        fields) take turns: one computes, the other waits for its result."""
        with self._lock:
            d = self.recall("contact", X, U)
            if d is not None:
                return d
            # the controls of a kept solution passed the checks when it was kept, and its torques are not read
            solution = self.recall("solution", X, U)
            tau = self.torques(X, U) if solution is None else None
            X = checked_state(self.model, X, "ContactField")
            N, nv, nc = len(X), self.model.nv, self.nc
            # new arrays for every evaluation: a caller may hold the last one's while the knots change
            out = ContactDynamicsDerivatives(np.empty((N, nv)), np.empty((N, nc)),
                                             *(np.empty((N, nv, nv)) for _ in range(3)),
                                             *(np.empty((N, nc, nv)) for _ in range(3)))

            def piece(a: int, b: int, threads: int = 1) -> None:
                # the field's contacts and damping were checked when it was made, the knots just above
                whole = a == 0 and b == N  # the common piece: no views to make
                contact_derivatives(self.model, X if whole else X[a:b], None if tau is None else tau[a:b],
                                    self.contacts, self.damping, out if whole else knot_rows(out, a, b),
                                    None if solution is None else self._rows(solution, a, b), self.workspace,
                                    "ContactField", self.other_workspace(threads))

            if not self.fill_shifted("contact", X, U, out, piece):
                piece(0, N, threads)
            return self.keep("contact", X, U, out, RUNS_KEPT)

    def remember_solution(self, X: Trajectory, U, A: np.ndarray, LAM: np.ndarray, J: np.ndarray,
                          GAMMA: np.ndarray) -> None:
        """Keep the contact solution a rollout computed at the knots ``X`` under ``U`` (``CompiledStep.remember``):
        accelerations ``A``, stacked forces ``LAM``, contact rows ``J`` and drifts ``GAMMA``, a row per knot, as
        ``contact_dynamics`` returns them. The solver linearizes at the rollout it accepts: ``contact_derivatives``
        and ``solve`` at those knots start from it instead of solving the contact dynamics again."""
        with self._lock:
            # the forces are kept stacked only: what reads a kept solution (``solve``, the derivatives) reads them so
            self.keep("solution", X, U, ContactDynamicsResult(A, (), LAM, J, GAMMA), RUNS_KEPT)

    @staticmethod
    def _rows(s: ContactDynamicsResult, a: int, b: int) -> ContactDynamicsResult:
        """Knots ``a .. b - 1`` of a kept contact solution (itself for all of its knots, the common piece)."""
        if a == 0 and b == len(s.a):
            return s
        return ContactDynamicsResult(s.a[a:b], (), s.lagrangian[a:b], s.jacobian[a:b], s.drift[a:b])

    def derivatives(self, X: Trajectory, U, stage: int = 0) -> FieldDerivatives:
        return self.shared_derivatives(X, U, 1, stage)

    def shared_derivatives(self, X: Trajectory, U, threads: int, stage: int = 0) -> FieldDerivatives:
        d = self.contact_derivatives(X, U, threads)
        return FieldDerivatives(d.a, d.da_dq, d.da_dv, self.joint_columns(d.da_dtau))

    def hessian_contraction(self, X: Trajectory, U, MU: np.ndarray) -> FieldHessian:
        return self.shared_hessian_contraction(X, U, MU, 1)

    def shared_hessian_contraction(self, X: Trajectory, U, MU: np.ndarray, threads: int) -> FieldHessian:
        """``contact_dynamics_second_order``'s contraction, the knots shared by ``threads`` threads."""
        tau, d = self.torques(X, U), self.contact_derivatives(X, U, threads)
        return self.field_hessian(contact_hessian_contraction(self.model, X, tau, self.contacts, MU, self.damping,
                                                              derivatives=d, workspace=self.workspace,
                                                              other=self.other_workspace(threads)))
