"""Joint-space mass matrix M(q) by the composite-rigid-body algorithm (Featherstone's CRBA; seed 000 §3.1, CRBAmb).

With a floating base, ``M = [[M11, M12], [M21, M22]]`` in the order of ``v = [nu; sdot]``: ``M11`` is the
composite inertia of the whole robot in the base frame and ``M12 = _0F`` the joint columns F expressed in the
base frame (seed 000 eqs. 54-56). M depends on the joint positions only (the base pose does not enter, because
``nu`` is the body twist). Everything is expressed in the base frame (the world for a fixed base), where the
composite inertias add without transforms and each column F needs no carrying to the ancestors:

    forward   pose of body i in the base frame,  I_i and S_i expressed there
    backward  I^c_i = I_i + sum of I^c_c over the children c of i
              F = I^c_i S_i,  M[i, i] = S_i^T F + armature_i,  M[j, i] = S_j^T F for each ancestor j
              (S_0 = I_6 for the free joint: M[0:6, i] = F, and M[0:6, 0:6] = I^c_0)

Composite inertias are rigid-body inertias, so each is kept as 10 scalars (mass, first moment ``h = m c`` and
rotational inertia about the frame origin). Pinocchio's ``crba`` computes the same matrix (it fills the upper
triangle only).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics._checks import BAD_N, OK, base_pose, base_poses, check_state, checked_state, raise_for_status
from lietraj.dynamics._spatial import (
    add,
    cross,
    dot,
    joint_placement,
    load3,
    load9,
    mm,
    mv,
    scale,
    store3,
    store9,
)
from lietraj.dynamics.model.model import (JOINT_FREE, JOINT_REVOLUTE, MF_ARMATURE, MF_AXIS, MF_H, MF_IO, MF_MASS,
                                         ModelArrays,
                                         RobotModel)
from lietraj.dynamics.algorithms.mimic import expanded_workspace, reduce_matrix
from lietraj.dynamics.model.workspace import Workspace, workspace_for
from lietraj.dynamics.lie.state import State, Trajectory

# Work-array columns, all in the base frame: pose R (9), p (3); composite inertia: mass, h (3), I (6: xx yy zz xy
# xz yz); S (6).
_R, _M, _H, _I, _S, _COLS = 0, 12, 13, 16, 22, 28


class CrbaWork(NamedTuple):
    """CRBA's work array: per body the columns above."""

    bodies: np.ndarray


def crba_work(model: RobotModel) -> CrbaWork:
    return CrbaWork(np.zeros((model.nb, _COLS)))
_ZERO3 = (0.0, 0.0, 0.0)


@helper
def rotate_symmetric(R, I):
    """R I R^T for a symmetric 3x3 ``I`` given as (xx, yy, zz, xy, xz, yz); same layout out."""
    xx, yy, zz, xy, xz, yz = I
    T = mm(R, (xx, xy, xz, xy, yy, yz, xz, yz, zz))
    return (T[0] * R[0] + T[1] * R[1] + T[2] * R[2],
            T[3] * R[3] + T[4] * R[4] + T[5] * R[5],
            T[6] * R[6] + T[7] * R[7] + T[8] * R[8],
            T[0] * R[3] + T[1] * R[4] + T[2] * R[5],
            T[0] * R[6] + T[1] * R[7] + T[2] * R[8],
            T[3] * R[6] + T[4] * R[7] + T[5] * R[8])


@helper
def transform_rigid_inertia(R, p, m, h, I):
    """A rigid-body inertia (m, h = m c, I about the origin) of a frame posed at (R, p), in the outer frame.

    The mass is unchanged; the first moment becomes ``h' = R h + m p`` and, by the parallel-axis theorem,
    ``I' = R I R^T + (2 h_r.p + m p.p) E - (h_r p^T + p h_r^T + m p p^T)`` with ``h_r = R h``.
    """
    hr = mv(R, h)
    Ir = rotate_symmetric(R, I)
    k = 2.0 * dot(hr, p) + m * dot(p, p)
    q = add(scale(hr, 2.0), scale(p, m))  # diagonal of h_r p^T + p h_r^T + m p p^T: q_k p_k
    return add(hr, scale(p, m)), (Ir[0] + k - q[0] * p[0], Ir[1] + k - q[1] * p[1], Ir[2] + k - q[2] * p[2],
                                  Ir[3] - hr[0] * p[1] - p[0] * hr[1] - m * p[0] * p[1],
                                  Ir[4] - hr[0] * p[2] - p[0] * hr[2] - m * p[0] * p[2],
                                  Ir[5] - hr[1] * p[2] - p[1] * hr[2] - m * p[1] * p[2])


@helper
def rigid_inertia_times(m, h, I, v, w):
    """[[m E, -[h]x], [[h]x, I]] (v, w) for I = (xx, yy, zz, xy, xz, yz)."""
    Iw = (I[0] * w[0] + I[3] * w[1] + I[4] * w[2], I[3] * w[0] + I[1] * w[1] + I[5] * w[2],
          I[4] * w[0] + I[5] * w[1] + I[2] * w[2])
    return add(scale(v, m), cross(w, h)), add(Iw, cross(h, v))


@helper
def body_in_base_frame(mi, mf, i, s, W, o):
    """Pose (R, p) of body i in the base frame (the world for a fixed base), stored at W[i, o:o+12] for its
    children; its inertia (h, I) and motion subspace (Sv, Sw) expressed in that frame. Parents come first."""
    parent, jt = mi[i, 0], mi[i, 1]
    m, h = mf[i, MF_MASS], load3(mf, i, MF_H)
    I = (mf[i, MF_IO], mf[i, MF_IO + 1], mf[i, MF_IO + 2], mf[i, MF_IO + 3], mf[i, MF_IO + 4], mf[i, MF_IO + 5])
    if jt == JOINT_FREE:
        store9(W, i, o, (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0))
        store3(W, i, o + 9, _ZERO3)
        return h, I, _ZERO3, _ZERO3
    R, p = joint_placement(mf, jt, i, s[mi[i, 3]])
    if parent >= 0:
        Rl, pl = load9(W, parent, o), load3(W, parent, o + 9)
        R, p = mm(Rl, R), add(mv(Rl, p), pl)
    store9(W, i, o, R)
    store3(W, i, o + 9, p)
    h, I = transform_rigid_inertia(R, p, m, h, I)
    a = mv(R, load3(mf, i, MF_AXIS))
    if jt == JOINT_REVOLUTE:
        return h, I, cross(p, a), a
    return h, I, a, _ZERO3


@kernel
def crba_core(mi, mf, s, W, M):
    """Mass matrix for joint positions s; writes the full symmetric M. Assumes checked inputs."""
    nb = mi.shape[0]
    M[:, :] = 0.0
    for i in range(nb):
        h, I, Sv, Sw = body_in_base_frame(mi, mf, i, s, W, _R)
        W[i, _M] = mf[i, MF_MASS]
        store3(W, i, _H, h)
        for k in range(6):
            W[i, _I + k] = I[k]
        store3(W, i, _S, Sv)
        store3(W, i, _S + 3, Sw)
    for i in range(nb - 1, -1, -1):
        parent, jt, iv = mi[i, 0], mi[i, 1], mi[i, 2]
        m, h = W[i, _M], load3(W, i, _H)
        I = (W[i, _I], W[i, _I + 1], W[i, _I + 2], W[i, _I + 3], W[i, _I + 4], W[i, _I + 5])
        if jt == JOINT_FREE:
            M[0, 0] = M[1, 1] = M[2, 2] = m
            M[0, 4], M[0, 5], M[1, 5] = h[2], -h[1], h[0]  # -[h]x and its transpose
            M[4, 0], M[5, 0], M[5, 1] = h[2], -h[1], h[0]
            M[1, 3], M[2, 3], M[2, 4] = -h[2], h[1], -h[0]
            M[3, 1], M[3, 2], M[4, 2] = -h[2], h[1], -h[0]
            M[3, 3], M[4, 4], M[5, 5], M[3, 4], M[3, 5], M[4, 5] = I
            M[4, 3], M[5, 3], M[5, 4] = I[3], I[4], I[5]
            continue
        Sv, Sw = load3(W, i, _S), load3(W, i, _S + 3)
        f, n = rigid_inertia_times(m, h, I, Sv, Sw)
        M[iv, iv] = dot(Sv, f) + dot(Sw, n) + mf[i, MF_ARMATURE]
        j = parent
        while j >= 0:
            jv = mi[j, 2]
            if mi[j, 1] == JOINT_FREE:
                M[0, iv], M[1, iv], M[2, iv], M[3, iv], M[4, iv], M[5, iv] = f[0], f[1], f[2], n[0], n[1], n[2]
                M[iv, 0], M[iv, 1], M[iv, 2], M[iv, 3], M[iv, 4], M[iv, 5] = f[0], f[1], f[2], n[0], n[1], n[2]
            else:
                M[jv, iv] = M[iv, jv] = dot(load3(W, j, _S), f) + dot(load3(W, j, _S + 3), n)
            j = mi[j, 0]
        if parent >= 0:
            W[parent, _M] += m
            for k in range(3):
                W[parent, _H + k] += h[k]
            for k in range(6):
                W[parent, _I + k] += I[k]


@helper
def check_positions(mi, H, s, v, nv):
    """check_state for a model given by its packed arrays (floating base iff body 0 has the free joint)."""
    floating = mi[0, 1] == JOINT_FREE
    return check_state(floating, mi.shape[0] - 1 if floating else mi.shape[0], nv, H, s, v)


@kernel
def crba_kernel(model, H, s, v, work, M):
    m, w = ModelArrays(*model), CrbaWork(*work)
    status = check_positions(m.joints, H, s, v, M.shape[0])
    if status == OK:
        crba_core(m.joints, m.bodies, s, w.bodies, M)
    return status


@kernel
def crba_batch_kernel(model, H, S, V, work, MM):
    """Mass matrices at N knots in one compiled call; returns (status, failing knot)."""
    m, w = ModelArrays(*model), CrbaWork(*work)
    N = S.shape[0]
    if V.shape[0] != N or MM.shape[0] != N or (m.floating and H.shape[0] != N):
        return BAD_N, 0
    for k in range(N):
        status = check_positions(m.joints, H[k] if m.floating else H[0], S[k], V[k], MM.shape[1])
        if status != OK:
            return status, k
        crba_core(m.joints, m.bodies, S[k], w.bodies, MM[k])
    return OK, 0


def mass_matrix(model: RobotModel, x: State | Trajectory, workspace: Workspace | None = None) -> np.ndarray:
    """The joint-space mass matrix M(q), full and symmetric, armature on the diagonal.

    Only the joint positions matter (``x.v`` and the base pose are checked, not used). ``x`` is a State
    (returns ``(nv, nv)``) or a Trajectory of N knots (returns ``(N, nv, nv)`` from one compiled call).
    ``workspace``: a ``Workspace(model)`` whose work arrays are reused (without one, each call allocates its own).
    """
    x = checked_state(model, x, "mass_matrix")
    if model.mimic:  # G^T M_full G
        full = mass_matrix(model.expanded, model.expand_state(x), expanded_workspace(model, workspace, "mass_matrix"))
        return reduce_matrix(model, full)
    nv, work = model.nv, workspace_for(model, workspace, "mass_matrix").work(crba_work)
    if type(x) is State:
        M = np.empty((nv, nv))
        status = crba_kernel(model.packed, base_pose(x), x.s, x.v, work, M)
        if status != OK:
            raise_for_status(status, model, "mass_matrix", None, x)
        return M
    MM = np.empty((len(x), nv, nv))
    status, k = crba_batch_kernel(model.packed, base_poses(x), x.s, x.v, work, MM)
    if status != OK:
        raise_for_status(status, model, "mass_matrix", k, x)
    return MM


crba = mass_matrix
