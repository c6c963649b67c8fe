"""Impulse dynamics at touchdown: the velocity jump of a rigid impact on closing contacts, and its derivatives.

When contacts close (a foot lands), the contact frames stop (or bounce back with restitution ``e``) within an
instant: the configuration does not move, the velocity jumps from ``v`` to ``v⁺`` under the contact impulses
``Λ`` (Pinocchio's ``impulseDynamics``; Crocoddyl's ``ActionModelImpulseFwdDynamics``)::

    M (v⁺ - v) = Jᵀ Λ,    J v⁺ + e J v + damping Λ = 0
    Λ = -(1 + e) (J M⁻¹ Jᵀ + damping I)⁻¹ J v,    v⁺ = v + M⁻¹ Jᵀ Λ

with ``J`` (nc, nv) the stacked contact rows of ``contact_dynamics`` (``Contact``): per contact the frame's LOCAL
twist Jacobian, all six rows for ``kind="6d"``, the three linear rows (the velocity of the frame origin) for
``"3d"``. The impact is solved in one compiled pass per knot (``contact_dynamics.impact_core``: the KKT system of
``contact_dynamics`` with these right-hand sides, ``M`` factored along the tree). A contact's Baumgarte gains and
target play no part: an impulse has no drift to stabilize, so the same ``Contact`` objects serve the impact and the
stance that follows. With ``reference="local_world_aligned"`` a contact's rows and impulse are in world axes at the frame
origin (``Λ_w = R Λ`` per block of three, ``R`` the frame's orientation); ``v⁺`` does not depend on it.
``damping`` > 0 regularizes redundant contacts (least squares) as in ``contact_dynamics``.

Derivatives (Carpentier & Mansard 2018, applied to the impact equations; Pinocchio's
``computeImpulseDynamicsDerivatives``), with LOCAL rows and ``Δv = v⁺ - v``. The two equations::

    F = M(q) Δv - J(q)ᵀ Λ = 0,        C = J(q) v⁺ + e J(q) v + damping Λ = 0

hold identically in ``(q, v)``, so::

    [[M, -Jᵀ], [J, damping I]] [dv⁺; dΛ] = [-∂F/∂q, M;  -∂C/∂q, -e J]      (columns q | v)

- ``∂F/∂q`` at fixed ``Δv, Λ``: the inverse dynamics of a gravity-free copy of the model at zero velocity and
  acceleration ``Δv`` with the impulses as body-frame external wrenches is exactly ``M Δv - Jᵀ Λ``; its IDSVA
  q-derivative (``rnea_derivatives``) is ``∂F/∂q`` (a LOCAL impulse is fixed in its body, as IDSVA differentiates
  a body-frame wrench).
- ``∂C/∂q`` at fixed ``v⁺, v``: ``∂(J v⁺)/∂q + e ∂(J v)/∂q``, the q-derivatives of the LOCAL frame twist at the
  states ``(q, v⁺)`` and ``(q, v)`` (``frame_velocity_derivatives``, whose v-derivative is ``J`` itself).

Through the Schur complement ``S = J M⁻¹ Jᵀ + damping I``::

    dΛ/dq = S⁻¹ (J M⁻¹ ∂F/∂q - ∂C/∂q),   dv⁺/dq = M⁻¹ (Jᵀ dΛ/dq - ∂F/∂q)
    dΛ/dv = -(1 + e) S⁻¹ J,              dv⁺/dv = I + M⁻¹ Jᵀ dΛ/dv

and for a world-aligned contact ``dΛ_w/dq = R (dΛ/dq - [Λ]x J_ang)``, ``dΛ_w/dv = R dΛ/dv`` (``R`` turns with
the frame's local angular Jacobian ``J_ang``, as in ``contact_dynamics_derivatives``). Columns are the state
tangent ``[z_q (nv); z_v (nv)]`` (base columns: body-twist perturbations ``H exp(z)``).

Everything is batched over a ``Trajectory``: the impact and each building block of its derivatives (the recursive
inverse mass matrix, Jacobians, IDSVA, frame velocity derivatives) is one compiled call over all knots, the small
dense solves of the derivatives one batched numpy call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lietraj.dynamics._checks import checked_real, checked_state, require_finite
from lietraj.dynamics.contacts.contact_dynamics import Contact, contact_tuple, solve_impact
from lietraj.dynamics.algorithms.inverse_mass_matrix import inverse_mass_matrix
from lietraj.dynamics.kinematics.kinematics import frame_id, frame_jacobian, frame_placement
from lietraj.dynamics.kinematics.kinematics_derivatives import frame_velocity_derivatives
from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.model.workspace import Workspace, workspace_for
from lietraj.dynamics.algorithms.rnea_derivatives import rnea_derivatives
from lietraj.dynamics.lie.state import State, Trajectory


@dataclass(frozen=True)
class ImpulseDynamicsResult:
    """Solution of the impact (leading knot axis N for a trajectory).

    ``v_plus`` (nv,): the velocity after the impact. ``impulses``: one array per contact, (6,) ``[f; torque]``
    or (3,) ``f`` (N s, N m s), the impulse the ground gives the robot at the frame origin, in the contact's
    reference. ``lagrangian`` (nc,): the impulses stacked in contact order. ``jacobian`` (nc, nv): the stacked
    contact rows ``J`` (in each contact's reference), so that ``J v_plus = -e J v``.
    """

    v_plus: np.ndarray
    impulses: tuple[np.ndarray, ...]
    lagrangian: np.ndarray
    jacobian: np.ndarray


@dataclass(frozen=True)
class ImpulseDynamicsDerivatives:
    """``v_plus`` (nv,) and the stacked ``impulses`` (nc,) of ``impulse_dynamics`` and their derivatives w.r.t. q
    (tangent basis) and v: ``dvplus_dq``, ``dvplus_dv`` (nv, nv); ``dimpulse_dq``, ``dimpulse_dv`` (nc, nv). A
    leading axis N for a trajectory."""

    v_plus: np.ndarray
    impulses: np.ndarray
    dvplus_dq: np.ndarray
    dvplus_dv: np.ndarray
    dimpulse_dq: np.ndarray
    dimpulse_dv: np.ndarray


@dataclass(frozen=True)
class _Impact:
    """The LOCAL-row solution and what its derivatives reuse."""

    ids: list[int]
    poses: list[np.ndarray | None]  # frame poses (..., 4, 4) of world-aligned contacts, None for LOCAL ones
    Minv: np.ndarray
    J: np.ndarray  # LOCAL rows (..., nc, nv)
    MinvJt: np.ndarray
    S: np.ndarray  # J M^-1 J^T + damping I
    lambda_c: np.ndarray  # LOCAL impulses (..., nc)
    lambda_ref: np.ndarray  # the impulses in the contacts' references (impulse_dynamics' lagrangian)
    v_plus: np.ndarray


def impulse_inputs(model: RobotModel, x, contacts, restitution, damping, name: str):
    """The checked arguments of an impact: ``(x, contacts, restitution, damping, frame ids)``; ``x`` finite (its
    NaN would otherwise be reported by the inverse mass matrix)."""
    x = checked_state(model, x, name)
    contacts = contact_tuple(model, contacts, name)
    restitution = checked_real(restitution, model, name, "restitution", 0.0, 1.0)
    damping = checked_real(damping, model, name, "damping")
    require_finite(model, name, x)
    ids = []
    for c in contacts:
        if not isinstance(c, Contact):
            raise TypeError(f"{name}({model.name}): contacts must be Contact objects, got {type(c).__name__}")
        try:
            ids.append(frame_id(model, c.frame))
        except (KeyError, IndexError, TypeError) as e:
            raise ValueError(f"{name}({model.name}): unknown contact frame {c.frame!r} ({e})") from None
    return x, contacts, restitution, damping, ids


def _impact(model: RobotModel, x: State | Trajectory, contacts: tuple[Contact, ...], restitution: float,
            damping: float, name: str, workspace: Workspace, ids: list[int]) -> _Impact:
    """The impact of checked inputs (``impulse_inputs``): its solution by ``solve_impact`` (as ``impulse_dynamics``
    gives it, to the bit) and the matrices its derivatives reuse."""
    v_plus, lambda_ref, _ = solve_impact(model, x, contacts, restitution, damping, workspace, name)
    Minv = inverse_mass_matrix(model, x, workspace)
    if not contacts:
        J = np.zeros(x.v.shape[:-1] + (0, model.nv))
        return _Impact(ids, [], Minv, J, np.swapaxes(J, -1, -2), J[..., :0], J[..., 0], lambda_ref, v_plus)
    J = np.concatenate([frame_jacobian(model, x, k, "local", workspace)[..., :c.dim, :] for k, c in zip(ids, contacts)],
                       axis=-2)
    MinvJt = Minv @ np.swapaxes(J, -1, -2)
    S = J @ MinvJt + damping * np.eye(J.shape[-2])
    poses = [frame_placement(model, x, k, workspace) if c.reference == "local_world_aligned" else None
             for k, c in zip(ids, contacts)]
    lambda_local = _in_references(contacts, [None if P is None else np.swapaxes(P, -1, -2) for P in poses],
                                  lambda_ref[..., None])[..., 0]
    return _Impact(ids, poses, Minv, J, MinvJt, S, lambda_local, lambda_ref, v_plus)


def _in_references(contacts: Sequence[Contact], poses, X: np.ndarray) -> np.ndarray:
    """Rows (..., nc, k) given in LOCAL axes, with each world-aligned contact's blocks rotated into world axes."""
    if all(P is None for P in poses):
        return X
    out = X.copy()
    o = 0
    for c, P in zip(contacts, poses):
        if P is not None:
            for r in range(o, o + c.dim, 3):
                out[..., r:r + 3, :] = P[..., :3, :3] @ X[..., r:r + 3, :]
        o += c.dim
    return out


def impulse_dynamics(model: RobotModel, x: State | Trajectory, contacts: Sequence[Contact], restitution: float = 0.0,
                     damping: float = 0.0, workspace: Workspace | None = None) -> ImpulseDynamicsResult:
    """The velocity after a rigid impact on ``contacts`` and the contact impulses (module docstring).

    ``restitution`` ``e`` in [0, 1]: 0 (default) is an inelastic impact, the contact frames stop; 1 reverses
    their velocity. ``damping`` >= 0 as in ``contact_dynamics``: with 0 redundant contacts raise a ValueError.
    ``x`` a Trajectory gives every result a leading axis N (one impact per knot). ``workspace``: a
    ``Workspace(model)`` whose work arrays are reused (without one, each call allocates its own).
    """
    what = "impulse_dynamics"
    x, contacts, restitution, damping, _ = impulse_inputs(model, x, contacts, restitution, damping, what)
    v_plus, lambda_c, J = solve_impact(model, x, contacts, restitution, damping,
                                       workspace_for(model, workspace, what), what)
    impulses, o = [], 0
    for c in contacts:
        impulses.append(lambda_c[..., o:o + c.dim])
        o += c.dim
    return ImpulseDynamicsResult(v_plus, tuple(impulses), lambda_c, J)


def _body_wrenches(model: RobotModel, contacts: Sequence[Contact], ids: list[int], lambda_c: np.ndarray) -> np.ndarray:
    """The LOCAL impulses (..., nc) as wrenches on the contact bodies in the body frames (..., nb, 6): a frame at
    ``(R, p)`` in its body moves ``[f; n]`` to ``[R f; R n + p x R f]``."""
    fext = np.zeros(lambda_c.shape[:-1] + (model.nb, 6))
    o = 0
    for c, k in zip(contacts, ids):
        fr = model.frames[k]
        f = lambda_c[..., o:o + 3]
        fext[..., fr.body, :3] += f @ fr.R.T
        fext[..., fr.body, 3:] += f @ (_hat(fr.p) @ fr.R).T
        if c.dim == 6:
            fext[..., fr.body, 3:] += lambda_c[..., o + 3:o + 6] @ fr.R.T
        o += c.dim
    return fext


def _hat(w: np.ndarray) -> np.ndarray:
    """Skew matrices (..., 3, 3) of vectors (..., 3): ``_hat(w) u = w x u``."""
    H = np.zeros(w.shape[:-1] + (3, 3))
    H[..., 0, 1], H[..., 0, 2], H[..., 1, 2] = -w[..., 2], w[..., 1], -w[..., 0]
    H[..., 1, 0], H[..., 2, 0], H[..., 2, 1] = w[..., 2], -w[..., 1], w[..., 0]
    return H


def _with_velocity(x: State | Trajectory, v: np.ndarray) -> State | Trajectory:
    return (State if type(x) is State else Trajectory)(x.H, x.s, v)


def no_gravity(model: RobotModel, workspace: Workspace) -> tuple[RobotModel, Workspace]:
    """The model without gravity (whose inverse dynamics at zero velocity is ``M dv - J^T lambda_c``), kept with the
    model, and a workspace for it, kept in ``workspace``."""
    free = model.derived("impulse_dynamics.no_gravity", lambda m: m.replace(gravity=np.zeros(3)))
    return free, workspace.cached("impulse_dynamics.no_gravity", lambda: Workspace(free))


def impulse_dynamics_derivatives(model: RobotModel, x: State | Trajectory, contacts: Sequence[Contact],
                                 restitution: float = 0.0, damping: float = 0.0,
                                 workspace: Workspace | None = None) -> ImpulseDynamicsDerivatives:
    """``impulse_dynamics(model, x, contacts, restitution, damping)`` (``v_plus`` and the stacked impulses) and
    their analytical derivatives w.r.t. the state, q in the tangent basis and v (module docstring).

    ``x`` a Trajectory gives every result a leading axis N. Raises ValueError as ``impulse_dynamics`` does.
    ``workspace``: as for ``impulse_dynamics``.
    """
    what = "impulse_dynamics_derivatives"
    x, contacts, restitution, damping, ids = impulse_inputs(model, x, contacts, restitution, damping, what)
    return impulse_derivatives(model, x, contacts, restitution, damping, workspace_for(model, workspace, what), what,
                               ids)


def impulse_derivatives(model: RobotModel, x: State | Trajectory, contacts: tuple[Contact, ...], restitution: float,
                        damping: float, workspace: Workspace, what: str, ids: list[int]) -> ImpulseDynamicsDerivatives:
    """``impulse_dynamics_derivatives`` of checked inputs (``impulse_inputs``), its errors reported as ``what``'s."""
    s = _impact(model, x, contacts, restitution, damping, what, workspace, ids)
    nv, lead = model.nv, x.v.shape[:-1]
    eye = np.broadcast_to(np.eye(nv), lead + (nv, nv))
    if not contacts:
        e = np.zeros(lead + (0, nv))
        return ImpulseDynamicsDerivatives(s.v_plus, s.lambda_ref, np.zeros(lead + (nv, nv)), eye.copy(), e, e.copy())

    # dF/dq: M(q) dv - J(q)^T lambda_c is the inverse dynamics without gravity, at zero velocity and acceleration dv.
    free, free_workspace = no_gravity(model, workspace)
    dF_dq = rnea_derivatives(free, _with_velocity(x, np.zeros_like(x.v)), s.v_plus - x.v,
                             _body_wrenches(model, contacts, s.ids, s.lambda_c), "local", workspace=free_workspace).dtau_dq

    nc = s.J.shape[-2]
    dC_dq = np.empty(lead + (nc, nv))
    J_ang = []  # each contact's LOCAL angular Jacobian, for the world-aligned impulse rotation
    x_plus = _with_velocity(x, s.v_plus)
    o = 0
    for c, k in zip(contacts, s.ids):
        d = c.dim
        dv_dq, J = frame_velocity_derivatives(model, x_plus, k, "local", workspace)
        dC_dq[..., o:o + d, :] = dv_dq[..., :d, :]
        if restitution != 0.0:
            dv_dq = frame_velocity_derivatives(model, x, k, "local", workspace)[0]
            dC_dq[..., o:o + d, :] += restitution * dv_dq[..., :d, :]
        J_ang.append(J[..., 3:, :])
        o += d

    MinvJt = s.MinvJt
    # One solve for both column blocks: S^-1 [J M^-1 dF/dq - dC/dq, -(1 + e) J].
    rhs = np.concatenate([np.swapaxes(MinvJt, -1, -2) @ dF_dq - dC_dq, -(1.0 + restitution) * s.J], axis=-1)
    dlambda = np.linalg.solve(s.S, rhs)
    dv = MinvJt @ dlambda
    dv[..., :nv] -= s.Minv @ dF_dq
    dv[..., nv:] += eye

    o = 0
    for c, P, Ja in zip(contacts, s.poses, J_ang):
        if P is not None:
            for r in range(o, o + c.dim, 3):
                dlambda[..., r:r + 3, :nv] -= _hat(s.lambda_c[..., r:r + 3]) @ Ja  # d(R λ) = R (dλ - [λ]x J_ang dq)
        o += c.dim
    dlambda = _in_references(contacts, s.poses, dlambda)
    return ImpulseDynamicsDerivatives(s.v_plus, s.lambda_ref, dv[..., :nv], dv[..., nv:], dlambda[..., :nv],
                                      dlambda[..., nv:])
