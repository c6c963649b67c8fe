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

All of it is one compiled pass per knot (``impulse_derivatives_core``), with ``contact_derivatives_core``'s steps:
``Y_q = -M⁻¹ ∂F/∂q`` (the recursive ``M⁻¹``; without gravity ``F`` does not depend on the base pose, whose columns
are zero), ``Y_v = I`` (``∂F/∂v = -M``) and ``G = M⁻¹ Jᵀ`` give ``dΛ/dx = S⁻¹ (-∂C/∂x - J Y_x)`` and
``dv⁺/dx = Y_x + G dΛ/dx``, the expressions above. The frame twists and their q-derivatives come from forward
kinematics at ``(q, v⁺)``, and at ``(q, v)`` for ``e ∂(J v)/∂q`` when ``e`` ≠ 0. A Trajectory's knots are one
compiled call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np
from numba import njit

from lietraj._jit import helper, kernel
from lietraj.dynamics._checks import (
    BAD_N,
    BAD_V,
    OK,
    base_pose,
    base_poses,
    checked_real,
    checked_state,
    require_finite,
)
from lietraj.dynamics.algorithms.aba_derivatives import minus_minv_times
from lietraj.dynamics.algorithms.inverse_mass_matrix import inverse_mass_matrix, minv_core
from lietraj.dynamics.algorithms.rnea_derivatives import LOCAL_WRENCH, idsva_core
from lietraj.dynamics.contacts.contact_dynamics import Contact, contact_tuple, solve_impact
from lietraj.dynamics.contacts.contact_dynamics_derivatives import (
    CDIM,
    CF_WORLD_ALIGNED,
    CFLAGS,
    CK,
    COFF,
    SCHUR_SINGULAR,
    ContactDerivativesWork,
    ContactTables,
    build_plan,
    cholesky_solve,
    contact_frame_ids,
    contact_wrench,
    in_references,
    plus_g_times,
    raise_derivatives_status,
    schur_factor,
    schur_products,
    solution_status,
)
from lietraj.dynamics.kinematics.kinematics import (
    LOCAL,
    VELOCITY,
    forward_kinematics_core,
    frame_jacobian,
    frame_placement,
    frame_pose,
)
from lietraj.dynamics.kinematics.kinematics_derivatives import motion_derivatives_core
from lietraj.dynamics.model.model import JOINT_FREE, DofTables, ModelArrays, RobotModel
from lietraj.dynamics.model.workspace import Workspace, workspace_for
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
    """The LOCAL-row solution and the matrices the second-order contraction (``impulse_hessian_contraction``)
    reuses."""

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
    return x, contacts, restitution, damping, contact_frame_ids(model, contacts, name)


def _impact(model: RobotModel, x: State | Trajectory, contacts: tuple[Contact, ...], restitution: float,
            damping: float, name: str, workspace: Workspace, ids: list[int]) -> _Impact:
    """The impact of checked inputs (``impulse_inputs``): its solution by ``solve_impact`` (as ``impulse_dynamics``
    gives it, to the bit) and the matrices ``_Impact`` holds."""
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


@helper
def _impulse_rows(mi, mf, fb, ff, ci, last, restitution, H, s, v, v_plus, lambda_c, Wk, MD, fext, lambda_local, J, Jang,
                  rhs_q, rhs_v):
    """Forward kinematics at ``(q, v⁺)``; per contact its LOCAL rows of J (and J_ang), ``-∂C/∂q`` into rhs_q (its
    ``e ∂(J v)/∂q`` part from a second pass at ``(q, v)``) and ``-∂C/∂v = -e J`` into rhs_v, its impulse in LOCAL
    axes and as a wrench on its body (fext, body frame)."""
    nv = J.shape[1]
    forward_kinematics_core(mi, mf, H, s, v_plus, v_plus, VELOCITY, last, Wk)
    fext[:, :] = 0.0
    for c in range(ci.shape[0]):
        k, d, o = ci[c, CK], ci[c, CDIM], ci[c, COFF]
        oR, _ = frame_pose(Wk, fb, ff, k)
        contact_wrench(fb, ff, k, d, o, ci[c, CFLAGS] & CF_WORLD_ALIGNED, oR, lambda_c, lambda_local, fext)
        # MD = [dv_dq, J] of the frame's LOCAL twist; a 3d contact's rows are its linear part, the velocity of the
        # frame origin.
        motion_derivatives_core(mi, mf, fb, ff, k, VELOCITY, LOCAL, False, Wk, MD)
        for r in range(d):
            for col in range(nv):
                J[o + r, col] = MD[1, r, col]
                rhs_q[o + r, col] = -MD[0, r, col]
                rhs_v[o + r, col] = -restitution * MD[1, r, col]
        for r in range(3):
            for col in range(nv):
                Jang[c, r, col] = MD[1, 3 + r, col]
    if restitution == 0.0:
        return
    forward_kinematics_core(mi, mf, H, s, v, v, VELOCITY, last, Wk)
    for c in range(ci.shape[0]):
        k, d, o = ci[c, CK], ci[c, CDIM], ci[c, COFF]
        motion_derivatives_core(mi, mf, fb, ff, k, VELOCITY, LOCAL, False, Wk, MD)
        for r in range(d):
            for col in range(nv):
                rhs_q[o + r, col] -= restitution * MD[0, r, col]


# Inlined into its one caller, the batch kernel, as contact_derivatives_core is (one level fewer of LLVM modules).
@njit(inline="always", cache=True, nogil=True, no_cfunc_wrapper=True)
def impulse_derivatives_core(mi, mf, dof_end, fb, ff, ci, last, restitution, damping, H, s, v, v_plus, lambda_c, work,
                             dv_dq, dv_dv, dl_dq, dl_dv):
    """The four derivative blocks at one state for the solution (v_plus, lambda_c) of the impact (module docstring;
    work: ``ImpulseDerivativesWork``). Assumes checked inputs; returns OK, SINGULAR (M) or SCHUR_SINGULAR."""
    contact_work, zero, jump, g = work
    Wk, Wi, D, Wm, T, MD, _pe, _r6, fext, lambda_local, tau_id, dtau_dq, dtau_dv, M, Minv, J, Jang, Gt, S = contact_work
    nv = dv_dq.shape[0]
    for k in range(nv):
        jump[k] = v_plus[k] - v[k]
    _impulse_rows(mi, mf, fb, ff, ci, last, restitution, H, s, v, v_plus, lambda_c, Wk, MD, fext, lambda_local, J, Jang,
                  dl_dq, dl_dv)
    # dF/dq: M(q) dv - J(q)^T lambda is the inverse dynamics without gravity, at zero velocity and acceleration dv.
    idsva_core(mi, mf, g, dof_end, H, s, zero, jump, fext, LOCAL_WRENCH, Wi, D, tau_id, dtau_dq, dtau_dv, M)
    status = minv_core(mi, mf, s, Wm, Minv)
    if status != OK:
        return status
    # Y_q = -M^-1 dF/dq into dv_dq. Without gravity F does not depend on the base pose: those columns are zero
    # (minus_minv_dtau's closed form with g = 0; its product is called directly to skip the velocity columns that
    # minus_minv_dtau adds, 8 % of this kernel). Y_v = I (dF/dv = -M) into dv_dv.
    first = 6 if mi[0, 1] == JOINT_FREE else 0
    for r in range(nv):
        for col in range(first):
            dv_dq[r, col] = 0.0
    minus_minv_times(mi, dof_end, Minv, dtau_dq, first, T, dv_dq)
    for r in range(nv):
        for col in range(nv):
            dv_dv[r, col] = 1.0 if r == col else 0.0
    schur_products(J, Minv, dv_dq, dv_dv, Gt, dl_dq, dl_dv)
    if not schur_factor(Gt, J, damping, S):
        return SCHUR_SINGULAR
    cholesky_solve(S, dl_dq)
    cholesky_solve(S, dl_dv)
    plus_g_times(Gt, dl_dq, dv_dq)
    plus_g_times(Gt, dl_dv, dv_dv)
    in_references(ci, fb, ff, Wk, lambda_local, Jang, dl_dq, dl_dv, Gt[:, :0])
    return OK


class ImpulseDerivativesWork(NamedTuple):
    """Work arrays of the impact derivatives: the contact derivatives' (a plain ``ContactDerivativesWork`` tuple for
    the contact set), a zero velocity and the velocity jump ``v⁺ - v`` (nv,) and a zero gravity (3,)."""

    contact: tuple
    zero_velocity: np.ndarray
    velocity_jump: np.ndarray
    gravity: np.ndarray


@kernel
def impulse_derivatives_batch_kernel(model, dofs, contacts, restitution, damping, H, S, V, V_PLUS, LAM, work, DV_DQ,
                                     DV_DV, DL_DQ, DL_DV):
    """The derivative blocks at N knots in one compiled call (contacts: ``ContactTables``, work:
    ``ImpulseDerivativesWork``); returns (status, failing knot)."""
    m, c = ModelArrays(*model), ContactTables(*contacts)
    w = ImpulseDerivativesWork(*work)
    N, nc = S.shape[0], DL_DQ.shape[1]
    if (V.shape[0] != N or V_PLUS.shape[0] != N or LAM.shape[0] != N or DV_DQ.shape[0] != N
            or (m.floating and H.shape[0] != N) or LAM.shape[1] != nc):
        return BAD_N, 0
    no_fext = ContactDerivativesWork(*w.contact).fext[:0]
    for t in range(N):
        Ht = H[t] if m.floating else H[0]
        status = solution_status(m, DV_DQ.shape[1], Ht, S[t], V[t], V_PLUS[t], BAD_V, LAM[t], no_fext)
        if status == OK:
            status = impulse_derivatives_core(m.joints, m.bodies, DofTables(*dofs).subtree_end, c.fb, c.ff, c.ci,
                                              c.a_last, restitution, damping, Ht, S[t], V[t], V_PLUS[t], LAM[t], w,
                                              DV_DQ[t], DV_DV[t], DL_DQ[t], DL_DV[t])
        if status != OK:
            return status, t
    return OK, 0


def _plan(model: RobotModel, contacts: tuple[Contact, ...], what: str, ids: list[int]):
    """The contact derivatives' plan of ``contacts`` without their Baumgarte gains and targets, its work arrays
    those of ``impulse_derivatives_batch_kernel``."""
    plan = build_plan(model, contacts, what, ids, baumgarte=False)
    nv = model.nv
    return plan._replace(work=tuple(ImpulseDerivativesWork(plan.work, np.zeros(nv), np.zeros(nv), np.zeros(3))))


def impulse_derivatives(model: RobotModel, x: State | Trajectory, contacts: tuple[Contact, ...], restitution: float,
                        damping: float, workspace: Workspace, what: str, ids: list[int]) -> ImpulseDynamicsDerivatives:
    """``impulse_dynamics_derivatives`` of checked inputs (``impulse_inputs``), its errors reported as ``what``'s."""
    v_plus, impulses, _ = solve_impact(model, x, contacts, restitution, damping, workspace, what)
    plan = workspace.for_objects("impulse derivatives", contacts, lambda: _plan(model, contacts, what, ids))
    single = type(x) is State
    nv, nc, lead = model.nv, plan.nc, () if single else (len(x),)
    blocks = tuple(np.empty(lead + shape) for shape in ((nv, nv), (nv, nv), (nc, nv), (nc, nv)))
    if single:
        H, S, V, V_PLUS, LAM = base_pose(x)[None], x.s[None], x.v[None], v_plus[None], impulses[None]
        knots = tuple(b[None] for b in blocks)
    else:
        H, S, V, V_PLUS, LAM, knots = base_poses(x), x.s, x.v, v_plus, impulses, blocks
    status, k = impulse_derivatives_batch_kernel(model.packed, model.dof_tables, plan.tables, restitution, damping, H, S,
                                                 V, V_PLUS, LAM, plan.work, *knots)
    if status != OK:
        raise_derivatives_status(status, model, None if single else k, what, x, v_plus=v_plus, impulses=impulses)
    return ImpulseDynamicsDerivatives(v_plus, impulses, *blocks)
