"""Analytical first derivatives of the hybrid dynamics (seed 002 Table 7, as corrected in its digest §3.5).

Hybrid dynamics (``hybrid_dynamics``, seed 002 Table 4) maps ``(q, v, u)`` to the full acceleration ``a`` and
torque ``tau``, where ``u[k] = a_known[k]`` on the "a" entries (``known[k]`` True) and ``tau_known[k]`` on the
"p" entries. This module returns the six Jacobians ``da/dq, da/dv, da/du, dtau/dq, dtau/dv, dtau/du`` (each
``nv x nv``). ``q`` is the configuration tangent: for a floating base the body-twist chart ``H exp(z)`` (``z``
linear first), then ``s``: the first ``nv`` columns of ``numerical_jacobian``, and Pinocchio's convention. The
known rows of ``da/du`` and the unknown rows of ``dtau/du`` are the identity; ``da/dq``, ``da/dv`` vanish on
known rows and ``dtau/dq``, ``dtau/dv`` on unknown rows. External wrenches are constant in the body frames.
All "p" gives Pinocchio's ``computeABADerivatives`` (``da/du = M^-1``), all "a" its ``computeRNEADerivatives``
(``dtau/du = M``).

Frames and operators are those of ``hybrid_dynamics``: linear first, body frames, Featherstone's ``x`` (Kim's
``ad``) and ``x*`` (Kim's ``-ad^T``), ``X_i`` the motion transform parent -> body i, ``X_i^T`` the force
transform back; Kim's ``I-hat, B-hat, eta, Psi`` are ``I^A, p^A, c, 1/D``. Gravity is the world acceleration
``-g``. One directional pass per scalar ``p`` (a column of ``q``, ``v`` or ``u``), seeded as in seed 002 eq.
(64) / digest §3.2: for our joints ``S`` is constant in the body frame (``dS = dSdot = 0``, also for the free
base, whose ``S = I``), so a direction of joint ``j`` only seeds ``dh_j = S_j`` (``e_k`` for base direction
``k``; seed 002 eq. 62), ``dsdot_j``, ``dsddot_j`` or ``dtau_j``. Then, with ``dX_i = -(dh_i x) X_i`` (eq. 59):

    forward (subtree of j)
        dv_i = X_i dv_l - dh_i x X_i v_l + S_i dsdot_i,     dc_i = dv_i x S_i sdot_i + v_i x S_i dsdot_i
    backward (subtree of j, then the ancestors of j)
        dI^A_i = sum_k X_k^T (dPi_k - Pi_k (dh_k x) - (Pi_k (dh_k x))^T) X_k
        dp^A_i = dv_i x* I_i v_i + v_i x* I_i dv_i + sum_k X_k^T (dbeta_k + dh_k x* beta_k)
        i in a:  dPi_i = dI^A_i,   dbeta_i = dp^A_i + dI^A_i (c_i + S_i sddot_i) + I^A_i (dc_i + S_i dsddot_i)
        i in p:  dU_i = dI^A_i S_i,  dD_i = S_i^T dU_i,  du_i = dtau_i - S_i^T dp^A_i - dU_i^T c_i - U_i^T dc_i,
                 dPi_i = dI^A_i - (dU_i U_i^T + U_i dU_i^T) / D_i + U_i U_i^T dD_i / D_i^2,
                 dbeta_i = dp^A_i + dI^A_i c_i + I^A_i dc_i + (dU_i u_i + U_i du_i) / D_i - U_i u_i dD_i / D_i^2
    forward (all bodies), da'_i = X_i da_l - dh_i x X_i a_l + dc_i:
        i in a:  da_i = da'_i + S_i dsddot_i,   dtau_i = S_i^T (dI^A_i a_i + I^A_i da_i + dp^A_i) + armature_i dsddot_i
        i in p:  dsddot_i = (dtau_i - S_i^T dp^A_i - dU_i^T a'_i - U_i^T da'_i - sddot_i dD_i) / D_i,
                 da_i = da'_i + S_i dsddot_i

This is Table 7 with the digest's corrections: its forward pass is Table 6's, its "a" branch ``dbeta`` is plain
differentiation of Table 4 (no ``Psi``), and its inputs are ``dq, dsdot`` of every joint. The root of a fixed
base has ``da_l = 0`` and ``X_i a_l = X_i (-g)``. The free base solves ``I^A_0 a_0 + p^A_0 = tau_b``, so if its
acceleration is given ``dtau_b = dI^A_0 a_0 + I^A_0 da_0 + dp^A_0``, else ``da_0 = (I^A_0)^-1 (dtau_b - dp^A_0 -
dI^A_0 a_0)``, with ``a_0 = nu_dot + X_0 (-g)`` and ``d(X_0 (-g)) = -dh_0 x X_0 (-g)``.

Zero patterns (digest §3.6): a direction of joint ``j`` moves ``dv, dc`` only in the subtree of ``j`` (none for
``u`` directions and base-pose directions); ``dI^A`` is non-zero only on the strict ancestors of ``j``, and only
for ``q`` directions; so the backward pass visits the subtree and the ancestor path, and the congruences are
done on the path of ``q`` directions only. The last forward pass visits every body; it is linear in what the
backward pass leaves per body (``dc_i - dh_i x X_i a_l``, a scalar, and the base's ``da_0``), so it runs once per
kind (``q``, ``v``, ``u``) over all of that kind's columns. Cost: 3 nv directions of O(nb) each, O(nv nb) in all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics._checks import (
    BAD_N,
    OK,
    base_pose,
    base_poses,
)
from lietraj.dynamics._spatial import (
    act_force,
    act_inv_motion,
    add,
    add_inertia_blocks,
    cross_force,
    cross_motion,
    dot,
    inertia_blocks_times,
    inertia_times,
    inertia_to_parent,
    inv3,
    load3,
    load_inertia_blocks,
    load9,
    madd,
    mm,
    motion_subspace,
    msub,
    outer,
    scale,
    skew,
    store3,
    store_inertia_blocks,
    sub,
    transpose,
)
from lietraj.dynamics.algorithms.hybrid_dynamics import (HybridResult, check_hybrid_inputs, hybrid_core, hybrid_inputs,
                                                        raise_hybrid_status)
from lietraj.dynamics.algorithms.aba import WORK_LAYOUT
from lietraj.dynamics.model.model import JOINT_FREE, MF_ARMATURE, ModelArrays, RobotModel
from lietraj.dynamics.model.workspace import Workspace, workspace_for
from lietraj.dynamics.lie.state import State, Trajectory

# Work-array columns: hybrid_core's, then per body Pi (21), beta (6), I_i v_i (6), dv (6), dc (6), the dI^A and
# dp^A accumulators (21, 6), the end of the subtree (1), and (I^A_0)^-1 of a free base (21, row 0).
_R, _P, _V, _C, _IA, _PA, _U, _DINV, _UU, _A, _HYB = WORK_LAYOUT
_PI, _BETA, _HV, _DV, _DC = _HYB, _HYB + 21, _HYB + 27, _HYB + 33, _HYB + 39
_DIA, _DPA, _END, _IAINV, _COLS = _HYB + 45, _HYB + 66, _HYB + 72, _HYB + 73, _HYB + 94
# Per-column work D (nb, 13, nv), one column per direction of a kind: the forward increment
# e_i = dc_i - dh_i x X_i a_l (+ S_i dsddot_i) (rows 0-5), the scalar rt_i the backward pass hands to the last
# forward pass (row 6), da_i (rows 7-12). Rows 0-6 are zero between directions: the last forward pass resets
# them after reading, and a new scratch array starts at zero.
_E, _RT, _DA, _DROWS = 0, 6, 7, 13


class HybridDerivativesWork(NamedTuple):
    """Work arrays: per body the columns above, and the per-direction columns ``D`` (nb, 13, nv)."""

    bodies: np.ndarray
    columns: np.ndarray


def hybrid_derivatives_work(model: RobotModel) -> HybridDerivativesWork:
    return HybridDerivativesWork(np.zeros((model.nb, _COLS)), np.zeros((model.nb, _DROWS, model.nv)))
_ZERO3 = (0.0, 0.0, 0.0)
_Z9 = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
_Q, _VEL, _U_IN = 0, 1, 2  # direction kinds: configuration, velocity, given input


@helper
def _scale9(A, k):
    return (A[0] * k, A[1] * k, A[2] * k, A[3] * k, A[4] * k, A[5] * k, A[6] * k, A[7] * k, A[8] * k)


@helper
def _cross_congruence(A, B, C, dv, dw):
    """Blocks of Pi (dh x) + (Pi (dh x))^T for the symmetric Pi = [[A, B], [B^T, C]] and dh = (dv, dw)."""
    Wx, Vx = skew(dw), skew(dv)
    AW, BW, WB = mm(A, Wx), mm(B, Wx), mm(Wx, B)
    BtV, CW = mm(transpose(B), Vx), mm(C, Wx)
    return (madd(AW, transpose(AW)), msub(madd(mm(A, Vx), BW), WB),
            madd(madd(BtV, transpose(BtV)), madd(CW, transpose(CW))))


@helper
def _rank_one_rate(Uv, Uw, dUv, dUw, Dinv, dD):
    """Blocks of (dU U^T + U dU^T) / D - U U^T dD / D^2: the rate of the projection U U^T / D."""
    k = dD * Dinv * Dinv
    return (msub(madd(outer(dUv, Uv, Dinv), outer(Uv, dUv, Dinv)), outer(Uv, Uv, k)),
            msub(madd(outer(dUv, Uw, Dinv), outer(Uv, dUw, Dinv)), outer(Uv, Uw, k)),
            msub(madd(outer(dUw, Uw, Dinv), outer(Uw, dUw, Dinv)), outer(Uw, Uw, k)))


@helper
def _add6(W, i, o, f, n):
    store3(W, i, o, add(load3(W, i, o), f))
    store3(W, i, o + 3, add(load3(W, i, o + 3), n))


@helper
def _store_column(D, i, r, col, x):
    D[i, r, col], D[i, r + 1, col], D[i, r + 2, col] = x[0], x[1], x[2]


@helper
def _take6(W, i, o):
    """Read an accumulator and reset it to zero (every direction starts from zero accumulators)."""
    f, n = load3(W, i, o), load3(W, i, o + 3)
    store3(W, i, o, _ZERO3)
    store3(W, i, o + 3, _ZERO3)
    return f, n


@helper
def _take_inertia(W, i, o):
    """Read an inertia accumulator and reset it to zero."""
    A, B, C = load_inertia_blocks(W, i, o)
    for c in range(o, o + 21):
        W[i, c] = 0.0
    return A, B, C


@helper
def _prepare(mi, mf, known, v, a_out, W):
    """Per-state quantities of the derivative passes, from hybrid_core's W: subtree ends, I_i v_i, U_i, Pi_i,
    beta_i, (I^A_0)^-1; zeroed accumulators."""
    nb = mi.shape[0]
    for i in range(nb):
        W[i, _END] = i + 1
        for c in range(_DIA, _DPA + 6):
            W[i, c] = 0.0
    for i in range(nb - 1, 0, -1):
        parent = mi[i, 0]
        if parent >= 0 and W[i, _END] > W[parent, _END]:
            W[parent, _END] = W[i, _END]
    for i in range(nb):
        jt, iv = mi[i, 1], mi[i, 2]
        hv, hw = inertia_times(mf, i, load3(W, i, _V), load3(W, i, _V + 3))
        store3(W, i, _HV, hv)
        store3(W, i, _HV + 3, hw)
        A, B, C = load_inertia_blocks(W, i, _IA)
        if jt == JOINT_FREE:
            if not known[0]:
                Ai = inv3(A)
                AiB = mm(Ai, B)
                Si = inv3(msub(C, mm(transpose(B), AiB)))
                AiBSi = mm(AiB, Si)
                store_inertia_blocks(W, 0, _IAINV, madd(Ai, mm(AiBSi, transpose(AiB))), _scale9(AiBSi, -1.0), Si)
            continue
        Sv, Sw = motion_subspace(mf, jt, i)
        cv, cw = load3(W, i, _C), load3(W, i, _C + 3)
        pf, pn = load3(W, i, _PA), load3(W, i, _PA + 3)
        Uv, Uw = inertia_blocks_times(A, B, C, Sv, Sw)
        store3(W, i, _U, Uv)
        store3(W, i, _U + 3, Uw)
        if known[iv]:
            qdd = a_out[iv]
            bf, bn = inertia_blocks_times(A, B, C, add(cv, scale(Sv, qdd)), add(cw, scale(Sw, qdd)))
        else:
            Dinv, u = W[i, _DINV], W[i, _UU]
            bf, bn = inertia_blocks_times(A, B, C, cv, cw)
            bf, bn = add(bf, scale(Uv, u * Dinv)), add(bn, scale(Uw, u * Dinv))
            A, B, C = msub(A, outer(Uv, Uv, Dinv)), msub(B, outer(Uv, Uw, Dinv)), msub(C, outer(Uw, Uw, Dinv))
        store_inertia_blocks(W, i, _PI, A, B, C)
        store3(W, i, _BETA, add(pf, bf))
        store3(W, i, _BETA + 3, add(pn, bn))


@helper
def _seed_free(k):
    """e_k, the base's k-th direction."""
    return ((1.0 if k == 0 else 0.0, 1.0 if k == 1 else 0.0, 1.0 if k == 2 else 0.0),
            (1.0 if k == 3 else 0.0, 1.0 if k == 4 else 0.0, 1.0 if k == 5 else 0.0))


@helper
def _seed(mf, jt_j, j, k):
    """The direction's joint column: S_j, or e_k for base component k."""
    if jt_j == JOINT_FREE:
        return _seed_free(k)
    return motion_subspace(mf, jt_j, j)


@helper
def _forward_velocity(mi, mf, W, v, is_q, j, k, end):
    """dv_i and dc_i on the subtree j..end-1 of joint j."""
    ev, ew = _seed(mf, mi[j, 1], j, k)
    for i in range(j, end):
        parent, jt, iv = mi[i, 0], mi[i, 1], mi[i, 2]
        vi, wi = load3(W, i, _V), load3(W, i, _V + 3)
        if i == j:
            if jt == JOINT_FREE:
                dvv, dvw = ev, ew
            else:
                Sv, Sw = motion_subspace(mf, jt, i)
                if is_q:
                    xv, xw = sub(vi, scale(Sv, v[iv])), sub(wi, scale(Sw, v[iv]))
                    dvv, dvw = cross_motion(ev, ew, xv, xw)
                    dvv, dvw = scale(dvv, -1.0), scale(dvw, -1.0)
                else:
                    dvv, dvw = ev, ew
        else:
            dvv, dvw = act_inv_motion(load9(W, i, _R), load3(W, i, _P), load3(W, parent, _DV),
                                      load3(W, parent, _DV + 3))
        store3(W, i, _DV, dvv)
        store3(W, i, _DV + 3, dvw)
        if jt != JOINT_FREE:
            Sv, Sw = motion_subspace(mf, jt, i)
            dcv, dcw = cross_motion(dvv, dvw, scale(Sv, v[iv]), scale(Sw, v[iv]))
            if i == j and not is_q:
                tv, tw = cross_motion(vi, wi, Sv, Sw)
                dcv, dcw = add(dcv, tv), add(dcw, tw)
            store3(W, i, _DC, dcv)
            store3(W, i, _DC + 3, dcw)


@helper
def _backward_subtree(mi, mf, W, D, a_out, known, moving, is_q, is_u, j, k, end, col):
    """dp^A, dbeta up the subtree of j (dI^A = 0 there), children first; pushes into the parent of j."""
    ev, ew = _seed(mf, mi[j, 1], j, k)
    for i in range(end - 1, j - 1, -1):
        parent, jt, iv = mi[i, 0], mi[i, 1], mi[i, 2]
        fp, np_ = _take6(W, i, _DPA)
        if moving:
            dvv, dvw = load3(W, i, _DV), load3(W, i, _DV + 3)
            vi, wi = load3(W, i, _V), load3(W, i, _V + 3)
            hv, hw = load3(W, i, _HV), load3(W, i, _HV + 3)
            Idv, Idw = inertia_times(mf, i, dvv, dvw)
            f1, n1 = cross_force(dvv, dvw, hv, hw)
            f2, n2 = cross_force(vi, wi, Idv, Idw)
            fp, np_ = add(fp, add(f1, f2)), add(np_, add(n1, n2))
        if jt == JOINT_FREE:  # the base's own terms wait for the last forward pass
            store3(W, i, _DPA, fp)
            store3(W, i, _DPA + 3, np_)
            continue
        Sv, Sw = motion_subspace(mf, jt, i)
        Uv, Uw = load3(W, i, _U), load3(W, i, _U + 3)
        at_j = i == j
        seed = 1.0 if at_j and is_u else 0.0
        if moving:
            dcv, dcw = load3(W, i, _DC), load3(W, i, _DC + 3)
            A, B, C = load_inertia_blocks(W, i, _IA)
            bf, bn = inertia_blocks_times(A, B, C, dcv, dcw)
            bf, bn = add(fp, bf), add(np_, bn)
        else:
            dcv, dcw = _ZERO3, _ZERO3
            bf, bn = fp, np_
        if known[iv]:
            bf, bn = add(bf, scale(Uv, seed)), add(bn, scale(Uw, seed))
            D[i, _RT, col] = dot(Sv, fp) + dot(Sw, np_) + mf[i, MF_ARMATURE] * seed
            ecv, ecw = add(dcv, scale(Sv, seed)), add(dcw, scale(Sw, seed))
        else:
            dup = seed - dot(Sv, fp) - dot(Sw, np_)  # d(tau - S^T p^A)
            D[i, _RT, col] = dup
            du = (dup - dot(Uv, dcv) - dot(Uw, dcw)) * W[i, _DINV]
            bf, bn = add(bf, scale(Uv, du)), add(bn, scale(Uw, du))
            ecv, ecw = dcv, dcw
        if at_j and is_q:
            qdd = a_out[iv]
            xv = sub(sub(load3(W, i, _A), load3(W, i, _C)), scale(Sv, qdd))
            xw = sub(sub(load3(W, i, _A + 3), load3(W, i, _C + 3)), scale(Sw, qdd))
            tv, tw = cross_motion(ev, ew, xv, xw)
            ecv, ecw = sub(ecv, tv), sub(ecw, tw)
            tf, tn = cross_force(ev, ew, load3(W, i, _BETA), load3(W, i, _BETA + 3))
            bf, bn = add(bf, tf), add(bn, tn)
        _store_column(D, i, _E, col, ecv)
        _store_column(D, i, _E + 3, col, ecw)
        if parent >= 0:
            R, p = load9(W, i, _R), load3(W, i, _P)
            ff, fn = act_force(R, p, bf, bn)
            _add6(W, parent, _DPA, ff, fn)
            if at_j and is_q:
                A, B, C = load_inertia_blocks(W, i, _PI)
                NA, NB, NC = _cross_congruence(A, B, C, ev, ew)
                NA, NB, NC = inertia_to_parent(R, p, _scale9(NA, -1.0), _scale9(NB, -1.0), _scale9(NC, -1.0))
                add_inertia_blocks(W, parent, _DIA, NA, NB, NC)


@helper
def _backward_ancestors(mi, mf, W, D, a_out, known, is_q, j, col):
    """dI^A, dp^A, dPi, dbeta up the ancestors of j (no dv, dc, dh nor seed there); a free base waits for the
    last pass."""
    i = mi[j, 0]
    while i >= 0 and mi[i, 1] != JOINT_FREE:
        parent, jt, iv = mi[i, 0], mi[i, 1], mi[i, 2]
        fp, np_ = _take6(W, i, _DPA)
        Sv, Sw = motion_subspace(mf, jt, i)
        bf, bn = fp, np_
        dA, dB, dC = _Z9, _Z9, _Z9
        if is_q:
            dA, dB, dC = _take_inertia(W, i, _DIA)
        if known[iv]:
            rt = dot(Sv, fp) + dot(Sw, np_)
            if is_q:
                qdd = a_out[iv]
                tf, tn = inertia_blocks_times(dA, dB, dC, add(load3(W, i, _C), scale(Sv, qdd)),
                                              add(load3(W, i, _C + 3), scale(Sw, qdd)))
                bf, bn = add(bf, tf), add(bn, tn)
                tf, tn = inertia_blocks_times(dA, dB, dC, load3(W, i, _A), load3(W, i, _A + 3))
                rt += dot(Sv, tf) + dot(Sw, tn)
            D[i, _RT, col] = rt
        else:
            Uv, Uw = load3(W, i, _U), load3(W, i, _U + 3)
            Dinv, u = W[i, _DINV], W[i, _UU]
            dup = -dot(Sv, fp) - dot(Sw, np_)
            if is_q:
                cv, cw = load3(W, i, _C), load3(W, i, _C + 3)
                qdd = a_out[iv]
                dUv, dUw = inertia_blocks_times(dA, dB, dC, Sv, Sw)
                dD = dot(Sv, dUv) + dot(Sw, dUw)
                av, aw = sub(load3(W, i, _A), scale(Sv, qdd)), sub(load3(W, i, _A + 3), scale(Sw, qdd))
                D[i, _RT, col] = dup - dot(dUv, av) - dot(dUw, aw) - qdd * dD
                du = dup - dot(dUv, cv) - dot(dUw, cw)
                tf, tn = inertia_blocks_times(dA, dB, dC, cv, cw)
                kU = (du - u * dD * Dinv) * Dinv
                bf = add(add(bf, tf), add(scale(dUv, u * Dinv), scale(Uv, kU)))
                bn = add(add(bn, tn), add(scale(dUw, u * Dinv), scale(Uw, kU)))
                PA, PB, PC = _rank_one_rate(Uv, Uw, dUv, dUw, Dinv, dD)
                dA, dB, dC = msub(dA, PA), msub(dB, PB), msub(dC, PC)
            else:
                D[i, _RT, col] = dup
                bf, bn = add(bf, scale(Uv, dup * Dinv)), add(bn, scale(Uw, dup * Dinv))
        if parent >= 0:
            R, p = load9(W, i, _R), load3(W, i, _P)
            ff, fn = act_force(R, p, bf, bn)
            _add6(W, parent, _DPA, ff, fn)
            if is_q:
                dA, dB, dC = inertia_to_parent(R, p, dA, dB, dC)
                add_inertia_blocks(W, parent, _DIA, dA, dB, dC)
        i = parent


@helper
def _base_acceleration(W, D, a_out, known, is_q, is_u, j, k, da, dtau, col):
    """The free base's da_0 (into D) and its rows of the column ``col`` of the outputs."""
    ev, ew = _seed_free(k)
    dpf, dpn = _take6(W, 0, _DPA)
    dA, dB, dC = _take_inertia(W, 0, _DIA)
    av, aw = load3(W, 0, _A), load3(W, 0, _A + 3)
    tf, tn = inertia_blocks_times(dA, dB, dC, av, aw)
    dpf, dpn = add(dpf, tf), add(dpn, tn)  # dp^A_0 + dI^A_0 a_0
    if j == 0 and is_q:  # d(X_0 (-g)) = -e_k x X_0 (-g); X_0 (-g) = a_0 - nu_dot has no angular part
        gv = (av[0] - a_out[0], av[1] - a_out[1], av[2] - a_out[2])
        egv, egw = cross_motion(ev, ew, gv, _ZERO3)
        egv, egw = scale(egv, -1.0), scale(egw, -1.0)
    else:
        egv, egw = _ZERO3, _ZERO3
    seed = 1.0 if j == 0 and is_u else 0.0
    if known[0]:
        dav, daw = add(egv, scale(ev, seed)), add(egw, scale(ew, seed))
        A, B, C = load_inertia_blocks(W, 0, _IA)
        tf, tn = inertia_blocks_times(A, B, C, dav, daw)
        tf, tn = add(tf, dpf), add(tn, dpn)
        for r in range(3):
            da[r, col], da[r + 3, col] = ev[r] * seed, ew[r] * seed
            dtau[r, col], dtau[r + 3, col] = tf[r], tn[r]
    else:
        A, B, C = load_inertia_blocks(W, 0, _IAINV)
        dav, daw = inertia_blocks_times(A, B, C, sub(scale(ev, seed), dpf), sub(scale(ew, seed), dpn))
        for r in range(3):
            da[r, col], da[r + 3, col] = dav[r] - egv[r], daw[r] - egw[r]
            dtau[r, col], dtau[r + 3, col] = ev[r] * seed, ew[r] * seed
    _store_column(D, 0, _DA, col, dav)
    _store_column(D, 0, _DA + 3, col, daw)


@helper
def _forward_acceleration(mi, mf, W, D, known, is_u, da, dtau):
    """da_i over the bodies, root first, for all the columns of one kind at once (the column loop innermost, so
    that a body's placement, U_i and S_i are loaded once); fills the joint rows of the outputs and resets D's e
    and rt to zero."""
    nb, ncol = mi.shape[0], D.shape[2]
    for i in range(nb):
        parent, jt, iv = mi[i, 0], mi[i, 1], mi[i, 2]
        if jt == JOINT_FREE:
            continue
        R, p = load9(W, i, _R), load3(W, i, _P)
        Sv, Sw = motion_subspace(mf, jt, i)
        Uv, Uw = load3(W, i, _U), load3(W, i, _U + 3)
        Dinv = W[i, _DINV]
        given_a = known[iv]
        Di, Dp = D[i], D[parent]
        for c in range(ncol):
            if parent >= 0:
                xv, xw = act_inv_motion(R, p, (Dp[_DA, c], Dp[_DA + 1, c], Dp[_DA + 2, c]),
                                        (Dp[_DA + 3, c], Dp[_DA + 4, c], Dp[_DA + 5, c]))
            else:
                xv, xw = _ZERO3, _ZERO3
            xv = (xv[0] + Di[_E, c], xv[1] + Di[_E + 1, c], xv[2] + Di[_E + 2, c])
            xw = (xw[0] + Di[_E + 3, c], xw[1] + Di[_E + 4, c], xw[2] + Di[_E + 5, c])
            rt = Di[_RT, c]
            for r in range(_RT + 1):
                Di[r, c] = 0.0
            seed = 1.0 if is_u and c == iv else 0.0
            if given_a:
                da[iv, c] = seed
                dtau[iv, c] = rt + dot(Uv, xv) + dot(Uw, xw)
            else:
                dq = (rt - dot(Uv, xv) - dot(Uw, xw)) * Dinv
                xv, xw = add(xv, scale(Sv, dq)), add(xw, scale(Sw, dq))
                da[iv, c] = dq
                dtau[iv, c] = seed
            for r in range(3):
                Di[_DA + r, c], Di[_DA + 3 + r, c] = xv[r], xw[r]


@helper
def _direction(mi, mf, W, D, v, a_out, known, kind, j, k, da, dtau, col):
    """Column ``col`` of the direction ``kind`` of joint j (base component k for the free base): the passes
    up to the base, leaving e, rt of every body in D (the last forward pass is shared by the columns)."""
    is_q, is_u = kind == _Q, kind == _U_IN
    # Only velocity directions and joint-position directions move v (a base-pose direction only turns gravity).
    moving = kind == _VEL or (is_q and mi[j, 1] != JOINT_FREE)
    end = int(W[j, _END]) if moving else j + 1
    if moving:
        _forward_velocity(mi, mf, W, v, is_q, j, k, end)
    _backward_subtree(mi, mf, W, D, a_out, known, moving, is_q, is_u, j, k, end, col)
    _backward_ancestors(mi, mf, W, D, a_out, known, is_q, j, col)
    if mi[0, 1] == JOINT_FREE:
        _base_acceleration(W, D, a_out, known, is_q, is_u, j, k, da, dtau, col)


@kernel
def hybrid_derivatives_core(mi, mf, g, H, s, v, known, a_in, tau_in, fext, W, D, a_out, tau_out,
                            da_dq, da_dv, da_du, dtau_dq, dtau_dv, dtau_du):
    """Hybrid dynamics and its six Jacobians for one state. Assumes checked inputs."""
    hybrid_core(mi, mf, g, H, s, v, known, a_in, tau_in, fext, W, a_out, tau_out)
    _prepare(mi, mf, known, v, a_out, W)
    # Loop variables, not constants, as arguments: numba would compile one specialization per literal.
    for kind in range(3):
        if kind == _Q:
            da, dtau = da_dq, dtau_dq
        elif kind == _VEL:
            da, dtau = da_dv, dtau_dv
        else:
            da, dtau = da_du, dtau_du
        for j in range(mi.shape[0]):
            free = mi[j, 1] == JOINT_FREE
            for k in range(6 if free else 1):
                _direction(mi, mf, W, D, v, a_out, known, kind, j, k, da, dtau, k if free else mi[j, 2])
        _forward_acceleration(mi, mf, W, D, known, kind == _U_IN, da, dtau)


@kernel
def hybrid_derivatives_kernel(model, H, s, v, known, a_in, tau_in, fext, work, a_out, tau_out, da_dq, da_dv, da_du,
                              dtau_dq, dtau_dv, dtau_du):
    m, w = ModelArrays(*model), HybridDerivativesWork(*work)
    status = check_hybrid_inputs(m.joints, m.floating, m.n, a_out.shape[0], H, s, v, known, a_in, tau_in, fext)
    if status == OK:
        hybrid_derivatives_core(m.joints, m.bodies, m.gravity, H, s, v, known, a_in, tau_in, fext, w.bodies,
                                w.columns, a_out, tau_out, da_dq, da_dv, da_du, dtau_dq, dtau_dv, dtau_du)
    return status


@kernel
def hybrid_derivatives_batch_kernel(model, H, S, V, known, A_in, TAU_in, fext, work, A_out, TAU_out, DA_DQ, DA_DV,
                                    DA_DU, DTAU_DQ, DTAU_DV, DTAU_DU):
    """Hybrid dynamics and its Jacobians over N knots (one mask for all); returns (status, failing knot)."""
    m, w = ModelArrays(*model), HybridDerivativesWork(*work)
    N = S.shape[0]
    has_fext = fext.shape[1] > 0
    if (V.shape[0] != N or A_in.shape[0] != N or TAU_in.shape[0] != N or (m.floating and H.shape[0] != N)
            or (has_fext and fext.shape[0] != N)):
        return BAD_N, 0
    nv = A_out.shape[1]
    for k in range(N):
        Hk = H[k] if m.floating else H[0]
        fk = fext[k] if has_fext else fext[0]
        status = check_hybrid_inputs(m.joints, m.floating, m.n, nv, Hk, S[k], V[k], known, A_in[k], TAU_in[k], fk)
        if status != OK:
            return status, k
        hybrid_derivatives_core(m.joints, m.bodies, m.gravity, Hk, S[k], V[k], known, A_in[k], TAU_in[k], fk,
                                w.bodies, w.columns, A_out[k], TAU_out[k], DA_DQ[k], DA_DV[k], DA_DU[k], DTAU_DQ[k],
                                DTAU_DV[k], DTAU_DU[k])
    return OK, 0


@dataclass(eq=False)
class HybridDerivatives(HybridResult):
    """The hybrid dynamics solution ``a``, ``tau`` (as ``HybridResult``) and the Jacobians of both with respect
    to the configuration tangent ``q`` (base in the body-twist chart, then ``s``), ``v`` and the given inputs
    ``u`` (``a_known`` where ``known``, else ``tau_known``). Each Jacobian is ``(nv, nv)``, ``(N, nv, nv)`` for a
    trajectory."""

    da_dq: np.ndarray
    da_dv: np.ndarray
    da_du: np.ndarray
    dtau_dq: np.ndarray
    dtau_dv: np.ndarray
    dtau_du: np.ndarray


_NAME = "hybrid_dynamics_derivatives"


def hybrid_dynamics_derivatives(model: RobotModel, x: State | Trajectory, known, a_known, tau_known,
                                fext=None, workspace: Workspace | None = None) -> HybridDerivatives:
    """Hybrid dynamics (see ``hybrid_dynamics``, same arguments) and its analytical Jacobians.

    Returns ``HybridDerivatives`` with ``a``, ``tau`` and ``da_dq, da_dv, da_du, dtau_dq, dtau_dv, dtau_du``,
    where ``u[k] = a_known[k] if known[k] else tau_known[k]``. ``fext`` (body-frame wrenches, constant in the
    body frames) enters the solution but has no derivative of its own. ``workspace``: a ``Workspace(model)`` whose
    work arrays are reused (without one, each call allocates its own).
    """
    x, mask, a_in, tau_in, fe = inputs = hybrid_inputs(model, x, known, a_known, tau_known, fext, _NAME)
    nv = model.nv
    work = workspace_for(model, workspace, _NAME).work(hybrid_derivatives_work)
    if type(x) is State:
        out = [np.empty(nv), np.empty(nv)] + [np.empty((nv, nv)) for _ in range(6)]
        status = hybrid_derivatives_kernel(model.packed, base_pose(x), x.s, x.v, mask, a_in, tau_in, fe, work, *out)
        if status != OK:
            raise_hybrid_status(status, model, None, _NAME, *inputs)
        return HybridDerivatives(*out)
    N = len(x)
    out = [np.empty((N, nv)), np.empty((N, nv))] + [np.empty((N, nv, nv)) for _ in range(6)]
    status, k = hybrid_derivatives_batch_kernel(model.packed, base_poses(x), x.s, x.v, mask, a_in, tau_in, fe, work,
                                                *out)
    if status != OK:
        raise_hybrid_status(status, model, k, _NAME, *inputs)
    return HybridDerivatives(*out)
