"""First-order derivatives of the contact-constrained forward dynamics (``contact_dynamics``) w.r.t. state and torque.

At the solution ``(a, lambda)`` of ``contact_dynamics`` (module docstring there), with the contact rows taken in
each contact frame's own axes (LOCAL), the two equations

    F(x, a, lambda) = ID(x, a) - J^T lambda - tau = 0,        C(x, a) + damping lambda = 0,   C = J a + gamma

hold identically in ``(x, tau)``. Differentiating them (Carpentier & Mansard 2018, "Analytical derivatives of
rigid body dynamics algorithms", §contact dynamics; Crocoddyl's ``DifferentialActionModelContactFwdDynamics``)::

    [[M, -J^T], [J, damping I]] [da; dlambda] = [dtau - dF/dx; -dC/dx]     (a, lambda held fixed on the right)

- ``dF/dx``: ``rnea_derivatives(x, a, fext)`` with ``fext`` the contact forces as wrenches on the contact bodies
  in the body frames. ``rnea`` subtracts external wrenches, so this is ``ID - J^T lambda``; a LOCAL contact
  force is fixed in the contact frame, hence in its body, which is exactly how IDSVA differentiates a body-frame
  ``fext``.
- ``dC/dx``: ``C(x, a)`` is the contact frame's acceleration at ``a`` in LOCAL (spatial for 6d, classical for 3d:
  ``frame_acceleration_derivatives``) plus the Baumgarte terms ``Kv v_c`` (``frame_velocity_derivatives``) and
  ``Kp e_c``: for 6d ``Jr(e)^-1 J`` (``frame_placement_error``); for 3d, ``e = R^T (p - p_target)`` moves under
  a local frame twist ``(dv, dw)`` by ``dv + e x dw``, so ``de/dq = J_lin + [e]x J_ang``.

The system is solved with the Schur complement ``J M^-1 J^T + damping I`` as in ``contact_dynamics``. For a
contact with ``reference="local_world_aligned"`` the accelerations are the same and its force is the LOCAL one
rotated into world axes, ``lambda_w = R lambda`` per block of three; ``R`` turns with the frame's local angular
velocity Jacobian ``J_ang``, so ``dlambda_w/dq = R (dlambda/dq - [lambda]x J_ang)``.

Columns are the state tangent ``[z_q (nv); z_v (nv)]`` (base columns: body-twist perturbations ``H exp(z)``),
rows the accelerations ``(nv,)`` and the stacked forces ``(nc,)`` in contact order and in each contact's reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from lietraj.dynamics import so3
from lietraj.dynamics._checks import check_type
from lietraj.dynamics.contact_dynamics import Contact, contact_dynamics
from lietraj.dynamics.kinematics import frame_id, frame_placement
from lietraj.dynamics.kinematics_derivatives import (
    frame_acceleration_derivatives,
    frame_placement_error,
    frame_velocity_derivatives,
)
from lietraj.dynamics.model import RobotModel
from lietraj.dynamics.rnea_derivatives import rnea_derivatives
from lietraj.dynamics.state import State, Trajectory


@dataclass(frozen=True)
class ContactDynamicsDerivatives:
    """``a`` (nv,) and ``forces`` (nc,) of ``contact_dynamics`` (its ``lagrangian``) and their derivatives w.r.t.
    q (tangent basis), v and tau: ``da_dq``, ``da_dv``, ``da_dtau`` (nv, nv); ``df_dq``, ``df_dv``, ``df_dtau``
    (nc, nv). A leading axis N for a trajectory."""

    a: np.ndarray
    forces: np.ndarray
    da_dq: np.ndarray
    da_dv: np.ndarray
    da_dtau: np.ndarray
    df_dq: np.ndarray
    df_dv: np.ndarray
    df_dtau: np.ndarray


def _local_forces(contacts: Sequence[Contact], poses: list[np.ndarray], lam: np.ndarray) -> np.ndarray:
    """The stacked forces in each contact frame's axes (LOCAL), from forces in the contacts' references."""
    out = lam.copy()
    o = 0
    for c, P in zip(contacts, poses):
        if c.reference == "local_world_aligned":
            for r in range(o, o + c.dim, 3):
                out[r:r + 3] = P[:3, :3].T @ lam[r:r + 3]
        o += c.dim
    return out


def _single(model: RobotModel, x: State, tau, contacts: tuple[Contact, ...], damping: float) -> ContactDynamicsDerivatives:
    nv = model.nv
    res = contact_dynamics(model, x, tau, contacts, damping)  # also validates the inputs, with clear messages
    a = res.a
    ids = [frame_id(model, c.frame) for c in contacts]
    if not contacts:
        d = rnea_derivatives(model, x, a)
        Minv = cho_solve(cho_factor(d.M), np.eye(nv))
        e = np.zeros((0, nv))
        return ContactDynamicsDerivatives(a, res.lagrangian, -Minv @ d.dtau_dq, -Minv @ d.dtau_dv, Minv, e, e, e)
    poses = [frame_placement(model, x, k) for k in ids]
    lam = _local_forces(contacts, poses, res.lagrangian)

    # The contact forces as body-frame wrenches (rnea subtracts them: tau = ID - J^T lambda).
    fext = np.zeros((model.nb, 6))
    o = 0
    for c, k in zip(contacts, ids):
        fr = model.frames[k]
        force = fr.R @ lam[o:o + 3]
        torque = fr.R @ lam[o + 3:o + 6] if c.dim == 6 else np.zeros(3)
        fext[fr.body, :3] += force
        fext[fr.body, 3:] += torque + np.cross(fr.p, force)
        o += c.dim
    idd = rnea_derivatives(model, x, a, fext, "local")

    nc = len(lam)
    J = np.empty((nc, nv))
    dC = np.empty((nc, 2 * nv))
    J_ang = []  # each contact's local angular Jacobian, for the world-aligned force rotation
    o = 0
    for c, k, P in zip(contacts, ids, poses):
        d, (Kp, Kv) = c.dim, c.baumgarte
        ad = frame_acceleration_derivatives(model, x, a, k, "local", classical=d == 3)
        J[o:o + d] = ad.da_da[:d]
        J_ang.append(ad.da_da[3:])
        dC[o:o + d, :nv] = ad.da_dq[:d]
        dC[o:o + d, nv:] = ad.da_dv[:d]
        if Kv != 0.0:
            dv_dq, dv_dv = frame_velocity_derivatives(model, x, k, "local")
            dC[o:o + d, :nv] += Kv * dv_dq[:d]
            dC[o:o + d, nv:] += Kv * dv_dv[:d]
        if Kp != 0.0 and c.target is not None:
            if d == 6:
                dC[o:o + 6, :nv] += Kp * frame_placement_error(model, x, k, c.target).jacobian
            else:
                e = P[:3, :3].T @ (P[:3, 3] - c.target[:3, 3])
                dC[o:o + 3, :nv] += Kp * (ad.da_da[:3] + so3.hat(e) @ ad.da_da[3:])
        o += d

    # [[M, -J^T], [J, damping]] [da; dlam] = [r1; r2] through the Schur complement S = J M^-1 J^T + damping I:
    # dlam = S^-1 (r2 - J M^-1 r1), da = M^-1 (r1 + J^T dlam).
    Mf = cho_factor(idd.M)
    Minv = cho_solve(Mf, np.eye(nv))
    MinvJt = Minv @ J.T
    Sf = cho_factor(J @ MinvJt + damping * np.eye(nc))
    r1 = np.concatenate([-idd.dtau_dq, -idd.dtau_dv, np.eye(nv)], axis=1)  # columns: q, v, tau
    r2 = np.concatenate([-dC, np.zeros((nc, nv))], axis=1)
    dlam = cho_solve(Sf, r2 - J @ (Minv @ r1))
    da = Minv @ r1 + MinvJt @ dlam

    o = 0
    for c, P, Ja in zip(contacts, poses, J_ang):
        if c.reference == "local_world_aligned":
            R = P[:3, :3]
            for r in range(o, o + c.dim, 3):
                dlam[r:r + 3, :nv] -= so3.hat(lam[r:r + 3]) @ Ja
                dlam[r:r + 3] = R @ dlam[r:r + 3]
        o += c.dim
    n2 = 2 * nv
    return ContactDynamicsDerivatives(a, res.lagrangian, da[:, :nv], da[:, nv:n2], da[:, n2:],
                                      dlam[:, :nv], dlam[:, nv:n2], dlam[:, n2:])


def contact_dynamics_derivatives(model: RobotModel, x: State | Trajectory, tau, contacts: Sequence[Contact],
                                 damping: float = 0.0) -> ContactDynamicsDerivatives:
    """``contact_dynamics(model, x, tau, contacts, damping)`` (accelerations and stacked contact forces) and their
    analytical derivatives w.r.t. the state (tangent columns ``[z_q; z_v]``) and ``tau`` (module docstring).

    ``x`` a Trajectory with ``tau`` (N, nv) gives every result a leading axis N. Raises ValueError as
    ``contact_dynamics`` does (shapes, NaN, unknown frames, redundant contacts without damping).
    """
    contacts = tuple(contacts)
    if type(x) is State:
        return _single(model, x, tau, contacts, damping)
    check_type(x, "contact_dynamics_derivatives")
    T = np.asarray(tau, dtype=np.float64)
    contact_dynamics(model, x, T, contacts, damping)  # validates shapes, NaN and rank for every knot at once
    parts = [_single(model, x[t], T[t], contacts, damping) for t in range(len(x))]
    return ContactDynamicsDerivatives(*(np.stack([getattr(p, f) for p in parts]) for f in
                                        ContactDynamicsDerivatives.__dataclass_fields__))
