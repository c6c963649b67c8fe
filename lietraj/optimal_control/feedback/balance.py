"""Balancing LQR of a robot standing on rigid contacts, from the geometric linearization of the contact dynamics.

``balance_controller`` returns the time-invariant policy ``u = u_eq + K (x ⊖ x_eq)`` of ``lqr`` (same sign, same
tangent error ``z = log(x_eq⁻¹ x)``, order ``[z_H; z_s; z_ν; z_ṡ]``) for a posture ``x_eq`` at rest on ``contacts``:

1. ``u_eq``: the joint torques of ``static_equilibrium`` (friction cones, centre of pressure inside the soles,
   torque limits); an infeasible posture is a ValueError carrying its message.
2. ``zdot = A z + B w``: ``contact_linearization`` at ``(x_eq, u_eq)``, which must be a rest point (``a = 0``).
3. The LQR is solved on the **constraint-consistent subspace** ``V = {J z_q = 0, J z_v = 0}`` (``J`` the stacked
   contact Jacobian), with the orthonormal basis ``T = diag(N, N)``, ``N`` spanning the null space of ``J``.

Why the subspace and not Baumgarte gains in the model: along the directions that violate the contacts the
linearization does not depend on ``u`` (``J B = 0``: torques cannot move a rigid contact) and follows the Baumgarte
law ``e'' = -Kv e' - Kp e`` only. Without gains these modes are double integrators (eigenvalue 0, i.e. 1 after
discretization, in a Jordan block): uncontrollable and marginal, so the Riccati equation has no stabilizing
solution. Gains would make them stable but leave them uncontrollable, make the Riccati equation carry 2 nc useless,
stiff (badly conditioned, dt-dependent) modes, and tie the controller to a numerical device of the simulator
rather than to the robot. At a rest point ``V`` is exactly invariant under ``A`` and contains the range of ``B``
(contact_linearization's docstring), so ``(T^T A T, T^T B)`` is the linearized closed-chain robot itself: it
is stabilizable whenever the torques can act on every unstable consistent motion, and its Riccati equation is
well posed whatever the contacts' Baumgarte gains (which only matter to the simulator's numerical drift). The
reduced pair is discretized exactly for the control period ``dt`` (zero-order hold, ``expm``), the discrete
algebraic Riccati equation is solved there, and lifted back: ``K = K_r T^T``, ``P = T P_r T^T``. A state off ``V``
is fed back through its projection on ``V``; its remainder is left to the contacts.

The contact forces enter the cost too: ``contact_linearization`` also gives ``δf = F_z z + F_w δu``, and
``δfᵀ W δf`` adds state, cross and control weights to the reduced problem. Without it the LQR treats ankle
torques as free and pushes the centres of pressure out of the soles.

Default weights (``default_weights``), in units of ``m g h`` (weight times the CoM height ``h`` above the lowest
contact), so one setting suits a 90 kg humanoid and a 2.5 kg quadruped: ``Q`` diagonal with base position
``1 / h²``, base orientation 1, joints 0.1, and the velocity weights those times ``h / g`` (a velocity error of
``sqrt(g / h)`` times a pose error, the pendulum rate, costs as much); ``R = I / (m g h)``; ``W`` weights each
force row by the share of its margin it uses: ``(δf_t / (μ f_z))²``, ``(δf_z / f_z)²``, and for a sole
``(δn_x / (w f_z))²``, ``(δn_y / (l f_z))²`` (the centre-of-pressure shift over the sole half sizes), at the
equilibrium load ``f_z``, times 2. Tuned on Talos (both soles) and solo12 (four feet) under lateral pushes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import scipy.linalg

from lietraj.dynamics.kinematics.center_of_mass import center_of_mass
from lietraj.dynamics.contacts.contact_dynamics import Contact, contact_dynamics
from lietraj.dynamics.contacts.contact_linearization import contact_linearization
from lietraj.dynamics.algorithms.crba import mass_matrix
from lietraj.dynamics.contacts.equilibrium import static_equilibrium
from lietraj.dynamics.kinematics.kinematics import frame_id, frame_placement
from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.lie.state import State
from lietraj.optimal_control.feedback.lqr import LQRController, _weight

# |a|∞ at (x_eq, u_eq) above which the posture is not at rest, relative to |g|.
REST_TOLERANCE = 1e-8
# Default weights (module docstring): joint-posture weight relative to the base's, contact-force weight, sole half
# size (m) when a 6d contact's is not given, smallest CoM height (m).
JOINT, FORCE, SOLE, MIN_HEIGHT = 0.1, 2.0, 0.05, 0.05


@dataclass(eq=False, repr=False)
class BalanceController(LQRController):
    """An ``LQRController`` (``u = u_eq + K (x ⊖ x_eq)``) solved on the constraint-consistent subspace (module
    docstring). ``A``, ``B``: the zero-order-hold discretization of the contact linearization over ``dt``.
    ``basis`` (ndx, r): the orthonormal basis ``T`` of that subspace; ``forces_eq`` (nc,): the contact forces at
    equilibrium, stacked in contact order, each in its contact's reference; ``contacts``, ``dt``."""

    contacts: tuple[Contact, ...]
    basis: np.ndarray
    forces_eq: np.ndarray
    dt: float

    def __repr__(self) -> str:
        return (f"BalanceController({self.state_space}, nu={self.K.shape[0]}, {len(self.contacts)} contacts, "
                f"dt={self.dt}, spectral radius on the contacts {self.constrained_spectral_radius:.4g})")

    @property
    def constrained_spectral_radius(self) -> float:
        """Largest eigenvalue modulus of ``A + B K`` restricted to the constraint-consistent subspace (< 1: the
        balance is locally asymptotically stable). ``spectral_radius`` also counts the contact-violating modes,
        which no torque moves (1 without Baumgarte gains)."""
        T = self.basis
        return float(np.abs(np.linalg.eigvals(T.T @ self.closed_loop @ T)).max(initial=0.0))


def constraint_basis(model: RobotModel, x: State, contacts: Sequence[Contact]) -> np.ndarray:
    """Orthonormal basis ``diag(N, N)`` (ndx, 2 (nv - nc)) of the tangent directions ``[z_q; z_v]`` that keep the
    rigid ``contacts`` (``J z_q = 0``, ``J z_v = 0``) at the state ``x``; ValueError for redundant contacts."""
    J = contact_dynamics(model, x, np.zeros(model.nv), contacts).jacobian  # raises on a rank-deficient J
    _, sv, Vt = np.linalg.svd(J)
    nv, r = model.nv, int(np.sum(sv > 1e-10 * sv.max(initial=1.0)))
    N = Vt[r:].T
    T = np.zeros((2 * nv, 2 * N.shape[1]))
    T[:nv, :N.shape[1]] = N
    T[nv:, N.shape[1]:] = N
    return T


def default_weights(model: RobotModel, x_eq: State, contacts: Sequence[Contact], forces_eq, friction: float = 0.7,
                    sole: Mapping[str | int, tuple[float, float]] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The default ``(Q, R, W)`` of ``balance_controller`` (module docstring) for the equilibrium contact forces
    ``forces_eq`` (nc,) in the contacts' references, ``friction`` and the sole half sizes ``sole``."""
    low = min(frame_placement(model, x_eq, c.frame)[2, 3] for c in contacts)
    h = max(center_of_mass(model, x_eq)[2] - low, MIN_HEIGHT)
    g = float(np.linalg.norm(model.gravity))
    mgh = model.total_mass * g * h
    pose = np.r_[np.full(3, 1.0 / h ** 2), np.ones(3), np.full(model.n, JOINT)] if model.floating_base \
        else np.full(model.n, 1.0)
    Q = mgh * np.diag(np.r_[pose, pose * h / g])
    sole = {} if sole is None else {model.frames[frame_id(model, k)].name: v for k, v in sole.items()}
    scale, o = [], 0
    for c in contacts:
        # The share of the friction and centre-of-pressure margins that a force change uses, at this contact's load.
        fz = max(float(forces_eq[o + 2]), 0.1 * model.total_mass * g / len(contacts))
        scale += [friction * fz, friction * fz, fz]
        if c.dim == 6:
            hl, hw = sole.get(model.frames[frame_id(model, c.frame)].name, (SOLE, SOLE))
            scale += [hw * fz, hl * fz, min(hl, hw) * friction * fz]
        o += c.dim
    return Q, np.eye(model.n) / mgh, FORCE * mgh * np.diag(1.0 / np.square(scale))


def balance_controller(model: RobotModel, x_eq: State, contacts: Sequence[Contact], Q=None, R=None, W=None,
                       dt: float = 0.005, u_eq=None, friction: float = 0.7,
                       sole: Mapping[str | int, tuple[float, float]] | None = None,
                       damping: float = 0.0) -> BalanceController:
    """Balancing LQR about the posture ``x_eq`` (at rest, ``v = 0``) standing on the rigid ``contacts``, for a
    control period ``dt`` (module docstring).

    ``u_eq``: the equilibrium joint torques; None solves ``static_equilibrium`` with ``friction`` and the sole half
    sizes ``sole`` (``{frame: (half_length, half_width)}``, needed for 6d contacts). ``Q`` (ndx, ndx) or its
    diagonal, positive semidefinite, ``R`` (n, n) or (n,), positive definite: weights of the tangent error and of
    the torque correction, ``W`` (nc, nc) or (nc,), positive semidefinite: weight of the contact-force change
    (defaults: ``default_weights``); only ``T^T Q T`` matters. ``damping``: as in
    ``contact_dynamics``. ValueError when no equilibrium exists (message of ``static_equilibrium``), when
    ``(x_eq, u_eq)`` is not a rest point (contacts off their Baumgarte targets, wrong ``u_eq``), or when the
    consistent dynamics are not stabilizable (or ``Q`` does not weight an unstable mode).
    """
    name = f"balance_controller({model.name})"
    sp = model.state_space
    sp.check(x_eq)
    contacts = tuple(contacts)
    if not contacts:
        raise ValueError(f"{name}: balancing needs at least one contact")
    if np.any(x_eq.v != 0.0):
        raise ValueError(f"{name}: x_eq must be at rest (v = 0)")
    if not (np.isfinite(dt) and dt > 0):
        raise ValueError(f"{name}: dt must be a finite positive number, got {dt!r}")
    if u_eq is None:
        eq = static_equilibrium(model, x_eq, contacts, friction=friction, sole=sole)
        if not eq.feasible:
            raise ValueError(f"{name}: no static equilibrium of x_eq on these contacts: {eq.message}")
        u_eq = eq.tau
    u_eq = np.array(u_eq, dtype=np.float64).reshape(-1)
    if u_eq.shape != (model.n,) or not np.all(np.isfinite(u_eq)):
        raise ValueError(f"{name}: u_eq must be a finite array of shape ({model.n},), got {np.shape(u_eq)}")

    lin = contact_linearization(model, x_eq, u_eq, contacts, damping)
    g = max(float(np.linalg.norm(model.gravity)), 1.0)
    if not np.abs(lin.a).max() <= REST_TOLERANCE * g:
        raise ValueError(f"{name}: (x_eq, u_eq) is not at rest on the contacts, |a|∞ = {np.abs(lin.a).max():.3g} "
                         "(u_eq does not hold the posture, or a contact's Baumgarte target is not its current pose)")
    T = constraint_basis(model, x_eq, contacts)
    Ar, Br = T.T @ lin.A @ T, T.T @ lin.B
    # At rest the consistent subspace is invariant (module docstring); with damping > 0 the contacts only hold
    # approximately and it may leak.
    leak = np.abs(lin.A @ T - T @ Ar).max(initial=0.0) + np.abs(lin.B - T @ Br).max(initial=0.0)
    if not leak <= 1e-6 * max(np.abs(lin.A).max(), np.abs(lin.B).max(), 1.0):
        raise ValueError(f"{name}: the contact-consistent motions are not invariant under the linearization (leak "
                         f"{leak:.3g}); with damping > 0 the contacts do not hold exactly")

    if Q is None or R is None or W is None:
        Q0, R0, W0 = default_weights(model, x_eq, contacts, lin.forces, friction, sole)
        Q, R, W = Q0 if Q is None else Q, R0 if R is None else R, W0 if W is None else W
    Q = _weight(Q, sp.ndx, f"{name}: Q", definite=False)
    R = _weight(R, model.n, f"{name}: R", definite=True)
    W = _weight(W, len(lin.forces), f"{name}: W", definite=False)

    # The force change F_z z + F_w du enters the cost: state, cross and control weights of the reduced problem.
    Fz = lin.F_z @ T
    Qr = T.T @ Q @ T + Fz.T @ W @ Fz
    Nr = Fz.T @ W @ lin.F_w
    Rr = R + lin.F_w.T @ W @ lin.F_w
    F, G = _zero_order_hold(Ar, Br, dt)
    try:
        Pr = scipy.linalg.solve_discrete_are(F, G, 0.5 * (Qr + Qr.T), 0.5 * (Rr + Rr.T), s=Nr)
    except (np.linalg.LinAlgError, ValueError) as e:
        raise ValueError(f"{name}: no stabilizing Riccati solution on the contacts ({e}): the torques cannot "
                         "stabilize every consistent motion, or Q does not weight an unstable mode") from e
    Kr = -np.linalg.solve(Rr + G.T @ Pr @ G, G.T @ Pr @ F + Nr.T)
    rho = float(np.abs(np.linalg.eigvals(F + G @ Kr)).max(initial=0.0))
    if not (np.all(np.isfinite(Pr)) and rho < 1.0):
        raise ValueError(f"{name}: the Riccati solution does not stabilize the balance (spectral radius "
                         f"{rho:.6g} on the contacts): the consistent dynamics are not stabilizable, or Q does not "
                         "weight an unstable mode")
    A_d, B_d = _zero_order_hold(lin.A, lin.B, dt)
    return BalanceController(sp, x_eq.copy(), u_eq, Kr @ T.T, T @ (0.5 * (Pr + Pr.T)) @ T.T, A_d, B_d,
                             contacts, T, np.array(lin.forces), float(dt))


def _zero_order_hold(A: np.ndarray, B: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """``(e^{A dt}, ∫_0^dt e^{A s} ds B)``: the exact discretization of ``zdot = A z + B w`` with ``w`` held."""
    n, m = B.shape
    E = scipy.linalg.expm(np.block([[A, B], [np.zeros((m, n + m))]]) * dt)
    return E[:n, :n], E[:n, n:]


def push(model: RobotModel, x: State, contacts: Sequence[Contact], dv) -> State:
    """The state just after an impulsive push on the base that changes its linear velocity by ``dv`` (3,), world
    axes, while the rigid ``contacts`` hold.

    A world force impulse ``p`` at the base origin changes the velocity by ``P S_b^T R^T p`` with ``P = M^-1 -
    M^-1 J^T (J M^-1 J^T)^-1 J M^-1`` (the impulsive form of the KKT system: the contacts absorb what would move
    them), so the result stays on the contacts (``J v`` unchanged); ``p`` is solved so that the base's world linear
    velocity changes by exactly ``dv``. Joints and base angular velocity change as the push makes them.
    """
    if not model.floating_base:
        raise ValueError(f"push({model.name}): the robot has a fixed base")
    dv = np.asarray(dv, dtype=np.float64)
    if dv.shape != (3,) or not np.all(np.isfinite(dv)):
        raise ValueError(f"push({model.name}): dv must be a finite (3,) velocity, got {dv!r}")
    model.state_space.check(x)
    M = mass_matrix(model, x)
    J = contact_dynamics(model, x, np.zeros(model.nv), contacts).jacobian
    Minv = np.linalg.inv(M)
    MJt = Minv @ J.T
    P = Minv - MJt @ np.linalg.solve(J @ MJt, MJt.T) if len(J) else Minv
    R = x.H[:3, :3]
    S = np.zeros((model.nv, 3))
    S[:3] = R.T  # generalized impulse of a world force at the base origin (body-frame base twist)
    W = P @ S
    Wb = R @ W[:3]  # world base-velocity change per unit impulse
    try:
        p = np.linalg.solve(Wb, dv)
    except np.linalg.LinAlgError:
        raise ValueError(f"push({model.name}): the contacts do not let the base translate in every direction") from None
    return State(x.H.copy(), x.s.copy(), x.v + W @ p)


__all__ = ["BalanceController", "balance_controller", "constraint_basis", "default_weights", "push"]
