"""Extended inverse dynamics of a floating-base robot with its mass-matrix base blocks (seed 000 Table 4, EIDAmb).

For any acceleration ``a = [nu_dot; sddot]``, consistent or not, returns ``tau_bar = [tau_b; tau] = M a + h``
(seed 000 eqs. 39-41; the base wrench first, as in eq. 32, not as Table 4 prints it) together with the base blocks
``M11 = M^c_0`` (composite inertia of the whole robot in the base frame, eq. 54), ``M12 = 0F`` (eq. 56) and
``h1 = b^vp_0`` (eq. 57). No external wrenches (the paper's Assumption 2; use ``rnea`` for them).

We work in the base body frame directly: the base velocity is the body twist ``nu`` (``v_0 = nu``, Table 4 line 5
without its inertial-frame conversion, seed 000 digest P1) and the base acceleration ``nu_dot`` its derivative,
equal to the paper's ``^0a_{A,0}``. Gravity enters as the fictitious base acceleration ``R^T (-g)`` (line 6).
Recursion, linear first, Featherstone's operators, ``a^r`` the acceleration without the base-acceleration term and
``a^vp`` the same without the joint accelerations:

    forward   v_i = iX_l v_l + S_i sdot_i,   a^r_i = iX_l a^r_l + S_i sddot_i + v_i x S_i sdot_i,
              a^vp_i = iX_l a^vp_l + v_i x S_i sdot_i,   M^c_i = M_i,
              b^c_i = M_i a^r_i + v_i x* M_i v_i,   b^vp_i = M_i a^vp_i + v_i x* M_i v_i
    backward  M^c_l += lX_i^* M^c_i iX_l,   b^c_l += lX_i^* b^c_i,   b^vp_l += lX_i^* b^vp_i
    forward   a0_i = iX_l a0_l (a0_0 = nu_dot),   tau_i = S_i^T (M^c_i a0_i + b^c_i) + armature_i sddot_i,
              0F_i = 0X_i^* M^c_i S_i
    base      tau_b = M^c_0 nu_dot + 0F sddot + b^vp_0

Table 4 carries each ``F_i`` up the tree joint by joint (lines 33-38); we apply once the pose of body i in the base
frame, composed in the first pass, which is the same product of transforms in O(n). The composite inertias are kept
as rigid-body inertias ``(m, h = m c, I_o)``. With ``consistent=True`` the base acceleration is replaced by
``nu_dot = -(M^c_0)^-1 b^c_0`` (the remark under Table 4): the physical base acceleration for the given ``sddot``
and zero base wrench, so ``tau_b`` vanishes (to rounding).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics._checks import (
    BAD_A,
    BAD_N,
    OK,
    check_model,
    check_state,
    check_vector,
    checked_state,
    checked_vector,
    raise_for_status,
    require_finite,
)
from lietraj.dynamics._spatial import (
    act_force,
    act_inv_motion,
    add,
    cross,
    cross_force,
    cross_motion,
    dot,
    inertia_times,
    inv3,
    joint_placement,
    load3,
    load9,
    mm,
    motion_subspace,
    mtv,
    mv,
    scale,
    store3,
    store9,
    sub,
    transpose,
)
from lietraj.dynamics.model.model import MF_ARMATURE, MF_MASS, ModelArrays, RobotModel, refuse_mimic
from lietraj.dynamics.model.workspace import Workspace, workspace_for
from lietraj.dynamics.algorithms.rnea_derivatives import rnea_derivatives
from lietraj.dynamics.lie.state import State, Trajectory

# Work-array columns: placement R (9), p (3), velocity (6), a^r (6), a^vp (6), composite inertia
# (m, h (3), I_o (6: xx yy zz xy xz yz)), b^c (6), b^vp (6), pose of the body in the base frame R0 (9), p0 (3),
# base acceleration in the body frame a0 (6).
_R, _P, _V, _AR, _AVP, _MC, _BC, _BVP, _R0, _P0, _A0, _COLS = 0, 9, 12, 18, 24, 30, 40, 46, 52, 61, 64, 70


class ExtendedIDWork(NamedTuple):
    """EIDAmb's work array: per body the columns above."""

    bodies: np.ndarray


def extended_id_work(model: RobotModel) -> ExtendedIDWork:
    return ExtendedIDWork(np.zeros((model.nb, _COLS)))
_ZERO3 = (0.0, 0.0, 0.0)


@helper
def rigid_times(W, i, v, w):
    """The rigid-body inertia (m, h, I_o) stored in row i of W, times the motion (v, w)."""
    m, h = W[i, _MC], load3(W, i, _MC + 1)
    xx, yy, zz, xy, xz, yz = W[i, _MC + 4], W[i, _MC + 5], W[i, _MC + 6], W[i, _MC + 7], W[i, _MC + 8], W[i, _MC + 9]
    Iw = (xx * w[0] + xy * w[1] + xz * w[2], xy * w[0] + yy * w[1] + yz * w[2], xz * w[0] + yz * w[1] + zz * w[2])
    return sub(scale(v, m), cross(h, w)), add(Iw, cross(h, v))


@helper
def add_rigid_to_parent(W, i, parent, R, p):
    """Add the rigid-body inertia of row i, at placement (R, p) in its parent, to the parent's row.

    h' = R h + m p,  I_o' = R I_o R^T + (m |p|^2 + 2 p.Rh) 1 - m p p^T - p (Rh)^T - (Rh) p^T (parallel axes).
    """
    m, h = W[i, _MC], mv(R, load3(W, i, _MC + 1))
    xx, yy, zz, xy, xz, yz = W[i, _MC + 4], W[i, _MC + 5], W[i, _MC + 6], W[i, _MC + 7], W[i, _MC + 8], W[i, _MC + 9]
    I = mm(mm(R, (xx, xy, xz, xy, yy, yz, xz, yz, zz)), transpose(R))
    d = m * dot(p, p) + 2.0 * dot(p, h)
    W[parent, _MC] += m
    for k in range(3):
        W[parent, _MC + 1 + k] += h[k] + m * p[k]
        W[parent, _MC + 4 + k] += I[4 * k] + d - m * p[k] * p[k] - 2.0 * p[k] * h[k]
    W[parent, _MC + 7] += I[1] - m * p[0] * p[1] - p[0] * h[1] - h[0] * p[1]
    W[parent, _MC + 8] += I[2] - m * p[0] * p[2] - p[0] * h[2] - h[0] * p[2]
    W[parent, _MC + 9] += I[5] - m * p[1] * p[2] - p[1] * h[2] - h[1] * p[2]


@kernel
def eid_core(mi, mf, g, consistent, H, s, v, a, W, tau, a_used, M11, M12, h1):
    """EIDAmb for one floating-base state; writes tau, a_used, M11, M12, h1. Assumes checked inputs."""
    nb = mi.shape[0]
    for i in range(nb):
        parent, jt, iv, js = mi[i, 0], mi[i, 1], mi[i, 2], mi[i, 3]
        if i == 0:  # the free base
            R = (H[0, 0], H[0, 1], H[0, 2], H[1, 0], H[1, 1], H[1, 2], H[2, 0], H[2, 1], H[2, 2])
            vi, wi = (v[0], v[1], v[2]), (v[3], v[4], v[5])
            arv, arw = mtv(R, (-g[0], -g[1], -g[2])), _ZERO3
            avv, avw = arv, arw
            R0, p0 = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0), _ZERO3
        else:
            R, p = joint_placement(mf, jt, i, s[js])
            Sv, Sw = motion_subspace(mf, jt, i)
            vJ, wJ = scale(Sv, v[iv]), scale(Sw, v[iv])
            vi, wi = act_inv_motion(R, p, load3(W, parent, _V), load3(W, parent, _V + 3))
            vi, wi = add(vi, vJ), add(wi, wJ)
            cv, cw = cross_motion(vi, wi, vJ, wJ)
            arv, arw = act_inv_motion(R, p, load3(W, parent, _AR), load3(W, parent, _AR + 3))
            arv, arw = add(add(arv, scale(Sv, a[iv])), cv), add(add(arw, scale(Sw, a[iv])), cw)
            avv, avw = act_inv_motion(R, p, load3(W, parent, _AVP), load3(W, parent, _AVP + 3))
            avv, avw = add(avv, cv), add(avw, cw)
            Rl = load9(W, parent, _R0)
            R0, p0 = mm(Rl, R), add(load3(W, parent, _P0), mv(Rl, p))
            store9(W, i, _R, R)
            store3(W, i, _P, p)
        store3(W, i, _V, vi)
        store3(W, i, _V + 3, wi)
        store3(W, i, _AR, arv)
        store3(W, i, _AR + 3, arw)
        store3(W, i, _AVP, avv)
        store3(W, i, _AVP + 3, avw)
        store9(W, i, _R0, R0)
        store3(W, i, _P0, p0)
        for k in range(10):
            W[i, _MC + k] = mf[i, MF_MASS + k]  # m, h, I_o: same layout as the model's
        mv_, mw = inertia_times(mf, i, vi, wi)
        qv, qw = cross_force(vi, wi, mv_, mw)
        fv, fw = inertia_times(mf, i, arv, arw)
        store3(W, i, _BC, add(fv, qv))
        store3(W, i, _BC + 3, add(fw, qw))
        fv, fw = inertia_times(mf, i, avv, avw)
        store3(W, i, _BVP, add(fv, qv))
        store3(W, i, _BVP + 3, add(fw, qw))

    for i in range(nb - 1, 0, -1):
        parent = mi[i, 0]
        R, p = load9(W, i, _R), load3(W, i, _P)
        add_rigid_to_parent(W, i, parent, R, p)
        for o in (_BC, _BVP):
            f, n = act_force(R, p, load3(W, i, o), load3(W, i, o + 3))
            store3(W, parent, o, add(load3(W, parent, o), f))
            store3(W, parent, o + 3, add(load3(W, parent, o + 3), n))

    m, h = W[0, _MC], load3(W, 0, _MC + 1)
    xx, yy, zz, xy, xz, yz = W[0, _MC + 4], W[0, _MC + 5], W[0, _MC + 6], W[0, _MC + 7], W[0, _MC + 8], W[0, _MC + 9]
    if consistent:
        # M^c_0 nu_dot = -b^c_0 for a rigid-body inertia: the rotation part through the inertia about the CoM,
        # I_c = I_o + [h]x [h]x / m, then the translation part.
        bf, bn = load3(W, 0, _BC), load3(W, 0, _BC + 3)
        hh = dot(h, h)
        Ic = (xx + (h[0] * h[0] - hh) / m, xy + h[0] * h[1] / m, xz + h[0] * h[2] / m,
              xy + h[0] * h[1] / m, yy + (h[1] * h[1] - hh) / m, yz + h[1] * h[2] / m,
              xz + h[0] * h[2] / m, yz + h[1] * h[2] / m, zz + (h[2] * h[2] - hh) / m)
        w = mv(inv3(Ic), sub(scale(cross(h, bf), 1.0 / m), bn))
        lin = scale(sub(cross(h, w), bf), 1.0 / m)
        for k in range(3):
            a_used[k], a_used[k + 3] = lin[k], w[k]
    else:
        for k in range(6):
            a_used[k] = a[k]
    for k in range(6, a.shape[0]):
        a_used[k] = a[k]

    for k in range(6):
        W[0, _A0 + k] = a_used[k]
    for i in range(1, nb):
        parent, jt, iv, js = mi[i, 0], mi[i, 1], mi[i, 2], mi[i, 3]
        R, p = load9(W, i, _R), load3(W, i, _P)
        av, aw = act_inv_motion(R, p, load3(W, parent, _A0), load3(W, parent, _A0 + 3))
        store3(W, i, _A0, av)
        store3(W, i, _A0 + 3, aw)
        fv, fw = rigid_times(W, i, av, aw)
        Sv, Sw = motion_subspace(mf, jt, i)
        tau[iv] = (dot(Sv, add(fv, load3(W, i, _BC))) + dot(Sw, add(fw, load3(W, i, _BC + 3)))
                   + mf[i, MF_ARMATURE] * a[iv])
        Fv, Fw = rigid_times(W, i, Sv, Sw)
        Fv, Fw = act_force(load9(W, i, _R0), load3(W, i, _P0), Fv, Fw)
        for k in range(3):
            M12[k, js], M12[k + 3, js] = Fv[k], Fw[k]

    f, n = rigid_times(W, 0, (a_used[0], a_used[1], a_used[2]), (a_used[3], a_used[4], a_used[5]))
    for r in range(6):
        tb = W[0, _BVP + r] + (f[r] if r < 3 else n[r - 3])
        for j in range(M12.shape[1]):
            tb += M12[r, j] * a[6 + j]
        tau[r] = tb
        h1[r] = W[0, _BVP + r]
    for r in range(3):
        for c in range(3):
            M11[r, c] = m if r == c else 0.0
    M11[0, 3], M11[0, 4], M11[0, 5] = 0.0, h[2], -h[1]  # -[h]x
    M11[1, 3], M11[1, 4], M11[1, 5] = -h[2], 0.0, h[0]
    M11[2, 3], M11[2, 4], M11[2, 5] = h[1], -h[0], 0.0
    for r in range(3):
        for c in range(3):
            M11[3 + r, c] = -M11[r, 3 + c]
    M11[3, 3], M11[4, 4], M11[5, 5] = xx, yy, zz
    M11[3, 4] = M11[4, 3] = xy
    M11[3, 5] = M11[5, 3] = xz
    M11[4, 5] = M11[5, 4] = yz


@helper
def _check(n, nv, H, s, v, a):
    status = check_state(True, n, nv, H, s, v)
    if status == OK:
        status = check_vector(a, nv, BAD_A)
    return status


@kernel
def eid_kernel(model, consistent, H, s, v, a, work, tau, a_used, M11, M12, h1):
    m, w = ModelArrays(*model), ExtendedIDWork(*work)
    status = _check(m.n, tau.shape[0], H, s, v, a)
    if status == OK:
        eid_core(m.joints, m.bodies, m.gravity, consistent, H, s, v, a, w.bodies, tau, a_used, M11, M12, h1)
    return status


@kernel
def eid_batch_kernel(model, consistent, H, S, V, A, work, TAU, A_used, M11, M12, H1):
    """EIDAmb over N knots in one compiled call; returns (status, failing knot)."""
    m, w = ModelArrays(*model), ExtendedIDWork(*work)
    N = S.shape[0]
    if V.shape[0] != N or A.shape[0] != N or H.shape[0] != N:
        return BAD_N, 0
    nv = TAU.shape[1]
    for k in range(N):
        status = _check(m.n, nv, H[k], S[k], V[k], A[k])
        if status != OK:
            return status, k
        eid_core(m.joints, m.bodies, m.gravity, consistent, H[k], S[k], V[k], A[k], w.bodies, TAU[k], A_used[k],
                 M11[k], M12[k], H1[k])
    return OK, 0


@dataclass(eq=False)
class ExtendedIDResult:
    """Extended inverse dynamics of a floating base: ``tau = [tau_b; tau_joints] = M a + h`` and base blocks of M, h.

    ``a`` is the acceleration used (the input, or with the consistent base acceleration when asked), ``M11`` the
    composite inertia of the whole robot in the base frame (6, 6), ``M12`` the base-joint block of M (6, n),
    ``h1`` the base part of h (6,). A leading axis N for a trajectory.
    """

    tau: np.ndarray
    a: np.ndarray
    M11: np.ndarray
    M12: np.ndarray
    h1: np.ndarray


def extended_inverse_dynamics(model: RobotModel, x: State | Trajectory, a, consistent: bool = False,
                              workspace: Workspace | None = None) -> ExtendedIDResult:
    """EIDAmb (seed 000 Table 4): ``tau_bar = M a + h`` for any ``a = [nu_dot; sddot]`` and the blocks M11, M12, h1.

    ``tau_bar[:6]`` is the base wrench needed for the given, possibly inconsistent, base acceleration (equal to
    ``rnea(model, x, a)``). With ``consistent=True``, ``a[:6]`` is ignored and replaced by the base acceleration
    of the free-floating robot for the given joint accelerations, so that ``tau_bar[:6] = 0``; ``result.a`` holds
    it. ``x`` is a State (``a`` of shape ``(nv,)``) or a Trajectory (``a`` of shape ``(N, nv)``). ``workspace``:
    a ``Workspace(model)`` whose work arrays are reused (without one, each call allocates its own).
    """
    what = "extended_inverse_dynamics"
    check_model(model, what)
    if not model.floating_base:
        raise ValueError(f"{what}({model.name}): the model has a fixed base; use rnea(model, x, a), which is its "
                         "inverse dynamics")
    x = checked_state(model, x, what)
    refuse_mimic(model, what)
    work = workspace_for(model, workspace, what).work(extended_id_work)
    nv, n = model.nv, model.n
    if type(x) is State:
        a = checked_vector(a, nv, None, model, what, "a")
        tau, a_used, M11, M12, h1 = np.empty(nv), np.empty(nv), np.empty((6, 6)), np.empty((6, n)), np.empty(6)
        status = eid_kernel(model.packed, bool(consistent), x.H, x.s, x.v, a, work, tau, a_used, M11, M12, h1)
        if status != OK:
            raise_for_status(status, model, what, None, x, a=a)
        return ExtendedIDResult(tau, a_used, M11, M12, h1)
    N = len(x)
    A = checked_vector(a, nv, N, model, what, "a")
    TAU, A_used, M11, M12, H1 = (np.empty((N, nv)), np.empty((N, nv)), np.empty((N, 6, 6)), np.empty((N, 6, n)),
                                 np.empty((N, 6)))
    status, k = eid_batch_kernel(model.packed, bool(consistent), x.H, x.s, x.v, A, work, TAU, A_used, M11, M12, H1)
    if status != OK:
        raise_for_status(status, model, what, k, x, a=A)
    return ExtendedIDResult(TAU, A_used, M11, M12, H1)


@dataclass(eq=False)
class ExtendedIDDerivatives:
    """Left-trivialized first derivatives of ``tau_bar = [tau_b; tau] = ID-bar(H, s, nu, sdot, a)``.

    ``d_dH`` (6+n, 6) is ``D1 ID-bar o DL_H`` (columns: ``H exp(z)``, z linear first, ``nu`` held fixed), ``d_ds``
    (6+n, n), ``d_dnu`` (6+n, 6), ``d_dsdot`` (6+n, n), ``M`` the mass matrix (the derivative in ``a``) and ``tau``
    the value. A leading axis N for a trajectory.
    """

    tau: np.ndarray
    d_dH: np.ndarray
    d_ds: np.ndarray
    d_dnu: np.ndarray
    d_dsdot: np.ndarray
    M: np.ndarray


def extended_inverse_dynamics_derivatives(model: RobotModel, x: State | Trajectory, a,
                                          workspace: Workspace | None = None) -> ExtendedIDDerivatives:
    """Derivatives of the extended inverse dynamics with respect to H, s, nu and sdot (seed 000 Tables 5-8).

    Any ``a = [nu_dot; sddot]`` is accepted, consistent or not (digest P5: the linearization needs the consistent
    one, its derivation the others). The four blocks are those of Tables 5-8 in the body-twist chart of the state
    (Table 5 with line 1 set to zero, digest P1), so that ``d_dH = M[:, :6] (a_0^r x)`` with ``a_0^r = [R^T (-g); 0]``
    (digest §4.2). They are computed by IDSVA (``rnea_derivatives``), which yields all four in one O(N d) pass where
    Tables 5-8 need four passes and Table 6 O(n^2) work; the results are equal, the extended inverse dynamics being
    the inverse dynamics of the floating base taken as a 6-DoF joint with a given acceleration. ``workspace``: as
    for ``rnea_derivatives``.
    """
    what = "extended_inverse_dynamics_derivatives"
    check_model(model, what)
    if not model.floating_base:
        raise ValueError(f"{what}({model.name}): the model has a fixed base; use rnea_derivatives(model, x, a)")
    x = checked_state(model, x, what)
    refuse_mimic(model, what)
    a = checked_vector(a, model.nv, None if type(x) is State else len(x), model, what, "a")
    require_finite(model, what, x, a=a)
    d = rnea_derivatives(model, x, a, workspace=workspace)
    return ExtendedIDDerivatives(d.tau, d.dtau_dq[..., :6], d.dtau_dq[..., 6:], d.dtau_dv[..., :6], d.dtau_dv[..., 6:],
                                 d.M)
