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

``rollout_policy`` (the solvers' forward pass) runs the whole horizon in one compiled call, as
``RobotDynamics.rollout_policy`` does with ABA: the chart, the policy, the clipping, ``contact_dynamics_core`` and
the group exponential of each step, the same operations as the knot-wise path through ``step``.

The second-order term of DDP (``trajectory_hessian_contraction``) is the Euler step's (``euler_second_order``: a
field node and the SE(3) compose node) with the field's contraction ``μᵀ ∂²a`` of the contact dynamics from
``contact_dynamics_second_order``: the inverse-dynamics curvature (IDSVA SO) through the constrained inverse
inertia, the curvature of the contact forces' generalized force, and the curvature of the contact Jacobian, drift
and Baumgarte terms. All of it is exact except one term: for a 6d contact with a position target, the derivative
of ``Jlog6`` in the position error ``Kp log6(T⁻¹ oMf)`` (O(Kp |e_c|), zero when the foot is at its target).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from lietraj._jit import kernel
from lietraj.dynamics._checks import IDENTITY4, IDENTITY4_STACK, NOT_FINITE, OK, result_arrays
from lietraj.dynamics.contacts.contact_dynamics import (
    NOT_FINITE_SOLUTION,
    RANK_DEFICIENT,
    Contact,
    contact_dynamics_core,
    contact_dynamics_work,
    pack_contacts,
    solve_contact_dynamics,
)
from lietraj.dynamics.contacts.contact_dynamics_derivatives import ContactDynamicsDerivatives, contact_dynamics_derivatives
from lietraj.dynamics.contacts.contact_dynamics_second_order import contact_hessian_contraction
from lietraj.dynamics.model.model import DofTables, ModelArrays, RobotModel
from lietraj.dynamics.model.workspace import Workspace
from lietraj.dynamics.lie.state import State, Trajectory
from lietraj.dynamics.lie.se3 import exp_blocks
from lietraj.optimal_control.dynamics.discrete_dynamics import (
    DiscreteDerivatives,
    DiscreteDynamics,
    PolicyRollout,
    TorqueDriven,
    _euler_jacobians_batch,
    _policy_arguments,
    covectors,
    policy_knot,
    policy_start,
    euler_update,
    euler_step,
)
from lietraj.optimal_control.dynamics.euler_second_order import StepHessian, euler_step_hessian

_ROLLOUT_FAILURES = {NOT_FINITE: "a non-finite state or control",
                     RANK_DEFICIENT: "redundant contacts (a rank-deficient contact Jacobian)",
                     NOT_FINITE_SOLUTION: "a non-finite contact solution"}


class ContactRolloutWork(NamedTuple):
    """Work arrays of the closed-loop rollout under nc contact rows: the contact dynamics' (``ContactDynamicsWork``,
    its five fields), E (4, 4), tau and acc (nv), lam (nc), J (nc, nv), gamma (nc), z (ndx)."""

    bodies: np.ndarray
    crba: np.ndarray
    M: np.ndarray
    Z: np.ndarray
    S: np.ndarray
    E: np.ndarray
    tau: np.ndarray
    acc: np.ndarray
    lam: np.ndarray
    J: np.ndarray
    gamma: np.ndarray
    z: np.ndarray


def contact_rollout_work(model: RobotModel, nc: int) -> ContactRolloutWork:
    nv = model.nv
    return ContactRolloutWork(*contact_dynamics_work(model, nc), np.empty((4, 4)), np.empty(nv), np.empty(nv),
                              np.empty(nc), np.empty((nc, nv)), np.empty(nc), np.empty(2 * nv))


@kernel
def _contact_rollout_kernel(model, dofs, dt, CI, CF, damping, H0, s0, v0, HR, SR, VR, UR, k, K, alpha, GAPS, shrink, LB,
                            UB, bounded, H, S, V, U, DX, work):
    """The closed-loop rollout of ContactRobotDynamics.rollout_policy into (H, S, V), U, DX (shapes checked by the
    caller): (status, knot), OK and N when every state and control is finite and valid and every contact solve
    succeeds, else the knot of the first bad control or state (t + 1 when the step from knot t fails). Work arrays:
    ``ContactRolloutWork``. The same operations as RobotDynamics' Euler rollout, with contact_dynamics_core for
    ABA."""
    m, w = ModelArrays(*model), ContactRolloutWork(*work)
    floating, n = m.floating, m.n
    E, tau, acc, z = w.E, w.tau, w.acc, w.z
    N = U.shape[0]
    policy_start(floating, H0, s0, v0, H, S, V, tau)
    for t in range(N + 1):
        status = policy_knot(t, floating, n, H, S, V, HR, SR, VR, UR, k, K, alpha, GAPS, shrink, LB, UB, bounded, U,
                             DX, E, z, tau)
        if status != OK:
            return status, t
        if t == N:
            break
        Ht = H[t] if floating else H[0]
        status = contact_dynamics_core(m.joints, m.bodies, m.gravity, DofTables(*dofs).dof_parent, Ht, S[t], V[t], tau,
                                       CI, CF, damping, w.bodies, w.crba, w.M, w.Z, w.S, acc, w.lam, w.J, w.gamma)
        if status != OK:
            return status, t + 1
        euler_update(t, floating, n, dt, acc, Ht, H, S, V, z, E)
    return OK, N


class ContactRobotDynamics(TorqueDriven, DiscreteDynamics):
    """Semi-implicit Euler dynamics of a ``RobotModel`` driven by its joint torques (``nu = model.n``) while the
    rigid ``contacts`` (``Contact`` objects, the same at every knot) hold; ``damping`` >= 0 regularizes redundant
    contacts as in ``contact_dynamics``. See the module docstring for phases. The second-order term of DDP is exact
    but for the ``Jlog6`` curvature of 6d position targets, which vanishes when the feet sit at their targets
    (module docstring).
    """

    def __init__(self, model: RobotModel, dt: float, contacts: Sequence[Contact], damping: float = 0.0):
        if not (isinstance(dt, (int, float, np.floating)) and math.isfinite(dt) and dt > 0):
            raise ValueError(f"ContactRobotDynamics: dt must be a finite positive number, got {dt!r}")
        if not (isinstance(damping, (int, float, np.floating)) and math.isfinite(damping) and damping >= 0):
            raise ValueError(f"ContactRobotDynamics: damping must be finite and >= 0, got {damping!r}")
        contacts = tuple(contacts)
        self._packed = pack_contacts(model, contacts, "ContactRobotDynamics")
        self.model = model
        self.workspace = Workspace(model)
        self.dt = float(dt)
        self.contacts = contacts
        self.damping = float(damping)
        self.state_space = model.state_space
        self.nu = model.n
        self.nc = self._packed.nc
        self._last: tuple | None = None

    def __repr__(self) -> str:
        frames = ", ".join(f"{c.frame}:{c.kind}" for c in self.contacts)
        return f"ContactRobotDynamics({self.model.name!r}, dt={self.dt}, contacts=[{frames}])"

    def _solve(self, X: Trajectory, U) -> tuple[np.ndarray, np.ndarray]:
        """Accelerations (N, nv) and contact forces (N, nc) at every knot, from one batched kernel call."""
        tau = self._torques(X, U)
        N, nv, nc = len(X), self.model.nv, self.nc
        A, LAM = np.empty((N, nv)), np.empty((N, nc))
        J, gamma = self._buffer("rows", 1, lambda: (np.empty((1, nc, nv)), np.empty((1, nc))))
        solve_contact_dynamics(self.model, X, tau, self._packed, self.damping, A, LAM, J, gamma, self.workspace)
        return A, LAM

    def step_trajectory(self, X: Trajectory, U) -> Trajectory:
        """Knot-wise ``f(X[k], U[k])``; raises ValueError where ``contact_dynamics`` does (redundant contacts
        without damping, a non-finite solution)."""
        return euler_step(X, self._solve(X, U)[0], self.dt)

    def contact_forces(self, X: Trajectory, U) -> np.ndarray:
        """The contact forces (N, nc) during the step from each knot, stacked in contact order, each in its
        contact's reference (``ContactDynamicsResult.lagrangian``)."""
        return self._solve(X, U)[1]

    def rollout_policy(self, x0: State, X_ref: Trajectory, U_ref, k, K, alpha: float, gaps=None, u_lb=None,
                       u_ub=None) -> PolicyRollout:
        """``DiscreteDynamics.rollout_policy`` in one compiled call over the whole horizon."""
        m, sp, nc = self.model, self.state_space, self.nc
        X_ref, U_ref, k, K, gaps, bounds = _policy_arguments(sp, self.nu, x0, X_ref, U_ref, k, K, gaps, u_lb, u_ub)
        N, floating = U_ref.shape[0], m.floating_base
        X = Trajectory(np.empty((N + 1, 4, 4)) if floating else None, np.empty((N + 1, m.n)), np.empty((N + 1, m.nv)))
        U, DX = np.empty((N, m.n)), np.empty((N + 1, sp.ndx))
        LB, UB = (U_ref, U_ref) if bounds is None else bounds
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # only Python (NUMBA_DISABLE_JIT) warns on a divergence
            status, knot = _contact_rollout_kernel(
                m.packed, m.dof_tables, self.dt, self._packed.CI, self._packed.CF, self.damping,
                np.ascontiguousarray(x0.H, dtype=np.float64) if floating else IDENTITY4,
                np.ascontiguousarray(x0.s, dtype=np.float64), np.ascontiguousarray(x0.v, dtype=np.float64),
                X_ref.H if floating else IDENTITY4_STACK, X_ref.s, X_ref.v, U_ref, k, K, float(alpha),
                U_ref if gaps is None else gaps, gaps is not None and alpha != 1.0, LB, UB, bounds is not None,
                X.H if floating else IDENTITY4_STACK, X.s, X.v, U, DX, self.workspace.work(contact_rollout_work, nc))
        if status == OK:
            return PolicyRollout(X, U, DX)
        what = _ROLLOUT_FAILURES.get(status, "an invalid base pose")
        return PolicyRollout(X, U, DX, int(knot),
                             f"ContactRobotDynamics({m.name}).rollout_policy: {what} at knot {knot}")

    def _step_twists(self, X: Trajectory, d) -> np.ndarray:
        """``ξ = dt ν̄'`` (N, 6) of each step's base exponential, (N, 0) for a fixed base."""
        if self.model.floating_base:
            return np.ascontiguousarray(self.dt * (X.v[:, :6] + self.dt * d.a[:, :6]))
        return np.zeros((len(X), 0))

    def contact_derivatives(self, X: Trajectory, U) -> ContactDynamicsDerivatives:
        """``contact_dynamics_derivatives`` at every knot: accelerations, contact forces and their derivatives.

        The last evaluation is kept with a copy of its inputs and returned again for equal ``(X, U)``: the
        Jacobians, DDP's second-order term and the contact costs built on this object (``WrenchConeResidual(...,
        dynamics=self)``) evaluate the same knots in one iteration and share one computation. The arrays are
        shared: read them, do not write them."""
        tau = self._torques(X, U)
        if self._last is not None:
            inputs, d = self._last
            if all(np.array_equal(a, b) for a, b in zip(inputs, (X.H, X.s, X.v, tau)) if b is not None):
                return d
        d = contact_dynamics_derivatives(self.model, X, tau, self.contacts, self.damping, workspace=self.workspace)
        self._last = (tuple(None if a is None else a.copy() for a in (X.H, X.s, X.v, tau)), d)
        return d

    def trajectory_derivatives(self, X: Trajectory, U, out: DiscreteDerivatives | None = None) -> DiscreteDerivatives:
        N, nv, n = len(X), self.model.nv, self.model.n
        d = self.contact_derivatives(X, U)
        F_x, F_u = result_arrays(out, DiscreteDerivatives, ((N, 2 * nv, 2 * nv), (N, 2 * nv, n)), "derivatives")
        XI = self._step_twists(X, d)
        E, PHI, K = np.empty((N, 4, 4)), np.empty((N, 6, 6)), np.empty((N, 6, 6))
        _euler_jacobians_batch(XI, self.dt, np.ascontiguousarray(d.da_dq), np.ascontiguousarray(d.da_dv),
                               np.ascontiguousarray(d.da_dtau), E, PHI, K, F_x, F_u)
        if not (np.isfinite(F_x).all() and np.isfinite(F_u).all()):
            raise ValueError(f"ContactRobotDynamics({self.model.name}).derivatives: non-finite Jacobian (the step "
                             "diverged)")
        return DiscreteDerivatives(F_x, F_u) if out is None else out

    def trajectory_hessian_contraction(self, X: Trajectory, U, LAM) -> StepHessian:
        """The second-order term of DDP at every knot (module docstring): ``euler_second_order``'s step with the
        contact dynamics' contraction ``μᵀ ∂²a`` (``contact_hessian_contraction``)."""
        m = self.model
        tau = self._torques(X, U)
        N, ndx = len(X), self.state_space.ndx
        LAM = covectors(LAM, N, ndx, f"ContactRobotDynamics({m.name})")
        d = self.contact_derivatives(X, U)
        XI, PHI, JR = self._step_twists(X, d), None, None
        if m.floating_base:
            _, PHI, JR = exp_blocks(XI)

        def field(mu: np.ndarray) -> tuple[np.ndarray, ...]:
            C = contact_hessian_contraction(m, X, tau, self.contacts, mu, self.damping, derivatives=d,
                                            workspace=self.workspace)
            return C.qq, C.qv, C.vv, C.qtau

        H = euler_step_hessian(m, self.dt, X, tau, d, XI, PHI, JR, LAM, field)
        if not (np.isfinite(H.xx).all() and np.isfinite(H.xu).all() and np.isfinite(H.uu).all()):
            raise ValueError(f"ContactRobotDynamics({m.name}).hessian_contraction: non-finite Hessian (the step "
                             "diverged)")
        return H
