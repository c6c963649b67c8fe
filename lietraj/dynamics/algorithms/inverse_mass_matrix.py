"""Inverse mass matrix M(q)^{-1} by the recursive O(n^2) algorithm IMMAmb (seed 000 Table 9, eq. 81).

IMMAmb runs the articulated-body algorithm for the n unit joint torques at once, with the bias forces dropped
(Carpentier's analytical inverse, extended to a moving base). With the digest's errata (§4.6: the grouping of
line 11, ``P_l[:, i+6:]`` in line 18, the missing base-joint lower-left block), for each 1-DoF joint i of
parent l:

    backward  U_i = I^A_i S_i,  D_i = S_i^T U_i + armature_i,  Minv[i, i] = 1/D_i
              Minv[i, j] = -S_i^T F[:, j] / D_i      for j in subtree(i), j != i     (line 10)
              F[:, j] += U_i Minv[i, j]              for j in subtree(i)             (line 11; F[:, i] starts at 0)
              I^A_l += I^A_i - U_i U_i^T / D_i                                       (lines 12-13)
    base      P_0 = -(I^A_0)^{-1} F,  Minv[base, base] = (I^A_0)^{-1},  Minv[base, joints] = Minv[joints, base]^T = P_0
    forward   Minv[i, j] -= U_i^T P_l[:, j] / D_i,  P_i[:, j] = S_i Minv[i, j] + P_l[:, j]    for all j >= i

All 6-vectors and inertias are expressed in one frame, the base body frame (the world for a fixed base, whose P
is zero), instead of each body's own: the transforms ``iX_l`` of Table 9 then drop out of the column sweeps of
lines 11, 13, 17 and 18 (Pinocchio's ``computeMinverse`` does the same in the world frame), and the sets F_i of
all bodies share one 6 x nv buffer F, since the subtrees of siblings own disjoint columns. This needs subtrees to
be contiguous, i.e. bodies numbered depth first, as URDF-loaded models are. Pinocchio's ``computeMinverse``
computes the same matrix (it fills the upper triangle only).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics._checks import BAD_N, OK, SINGULAR, base_pose, base_poses, checked_state, raise_for_status
from lietraj.dynamics._spatial import (
    add_inertia_blocks,
    dot,
    inertia_blocks_times,
    load3,
    load_inertia_blocks,
    msub,
    outer,
    skew,
    store3,
    store_inertia_blocks,
)
from lietraj.dynamics.algorithms.crba import body_in_base_frame, check_positions, mass_matrix
from lietraj.dynamics.algorithms.mimic import expanded_workspace, inverse, reduce_matrix
from lietraj.dynamics.model.model import JOINT_FREE, MF_ARMATURE, MF_MASS, ModelArrays, RobotModel
from lietraj.dynamics.model.workspace import Workspace, workspace_for
from lietraj.dynamics.lie.state import State, Trajectory

NOT_DEPTH_FIRST = 101

# Work-array columns, all in the base frame: pose R (9), p (3) of the body; I^A (21: A sym 6, B 9, C sym 6);
# S (6); U (6); 1/D; subtree size; then P_i[:, j] at _PC + 6 j (row 0 holds F until P_0 replaces it).
_R, _IA, _S, _U, _DINV, _NSUB, _PC = 0, 12, 33, 39, 45, 46, 47


class MinvWork(NamedTuple):
    """The work array of M^-1: per body the columns above, then ``F`` (6 x nv)."""

    bodies: np.ndarray


def minv_work(model: RobotModel) -> MinvWork:
    return MinvWork(np.zeros((model.nb, _PC + 6 * model.nv)))


@helper
def _invert_spd6(M):
    """In-place inverse of the symmetric positive-definite 6x6 block M[0:6, 0:6] (Gauss-Jordan; its pivots are
    Schur complements, positive, so no pivoting). Returns False if a pivot is not positive."""
    for k in range(6):
        if not M[k, k] > 0.0:
            return False
        d = 1.0 / M[k, k]
        M[k, k] = 1.0
        for c in range(6):
            M[k, c] *= d
        for r in range(6):
            if r != k:
                e = M[r, k]
                M[r, k] = 0.0
                for c in range(6):
                    M[r, c] -= e * M[k, c]
    for r in range(6):
        for c in range(r):
            M[r, c] = M[c, r]
    return True


@kernel
def minv_core(mi, mf, s, W, Minv):
    """M^{-1} for joint positions s; writes the full symmetric Minv. Assumes checked inputs, depth-first bodies."""
    nb, nv = mi.shape[0], Minv.shape[0]
    for i in range(nb):
        h, I, Sv, Sw = body_in_base_frame(mi, mf, i, s, W, _R)
        m = mf[i, MF_MASS]
        xx, yy, zz, xy, xz, yz = I
        store_inertia_blocks(W, i, _IA, (m, 0.0, 0.0, 0.0, m, 0.0, 0.0, 0.0, m), skew((-h[0], -h[1], -h[2])),
                             (xx, xy, xz, xy, yy, yz, xz, yz, zz))
        store3(W, i, _S, Sv)
        store3(W, i, _S + 3, Sw)

    F = _PC  # columns j of the shared set F live at W[0, F + 6 j : F + 6 j + 6]
    for i in range(nb - 1, -1, -1):
        parent, jt, iv = mi[i, 0], mi[i, 1], mi[i, 2]
        if jt == JOINT_FREE:
            continue
        Sv, Sw = load3(W, i, _S), load3(W, i, _S + 3)
        A, B, C = load_inertia_blocks(W, i, _IA)
        Uf, Un = inertia_blocks_times(A, B, C, Sv, Sw)
        D = dot(Sv, Uf) + dot(Sw, Un) + mf[i, MF_ARMATURE]
        if not D > 0.0:
            return SINGULAR
        Dinv = 1.0 / D
        nsub = 1
        while i + nsub < nb and mi[i + nsub, 0] >= i:
            nsub += 1
        Minv[iv, iv] = Dinv
        for j in range(iv + 1, iv + nsub):
            o = F + 6 * j
            Minv[iv, j] = -Dinv * (Sv[0] * W[0, o] + Sv[1] * W[0, o + 1] + Sv[2] * W[0, o + 2]
                                   + Sw[0] * W[0, o + 3] + Sw[1] * W[0, o + 4] + Sw[2] * W[0, o + 5])
        if parent >= 0:
            U = (Uf[0], Uf[1], Uf[2], Un[0], Un[1], Un[2])
            for k in range(6):
                W[0, F + 6 * iv + k] = U[k] * Dinv
            for j in range(iv + 1, iv + nsub):
                e = Minv[iv, j]
                for k in range(6):
                    W[0, F + 6 * j + k] += U[k] * e
            add_inertia_blocks(W, parent, _IA, msub(A, outer(Uf, Uf, Dinv)), msub(B, outer(Uf, Un, Dinv)),
                               msub(C, outer(Un, Un, Dinv)))
        store3(W, i, _U, Uf)
        store3(W, i, _U + 3, Un)
        W[i, _DINV] = Dinv
        W[i, _NSUB] = nsub

    if mi[0, 1] == JOINT_FREE:
        A, B, C = load_inertia_blocks(W, 0, _IA)
        for r in range(3):
            for c in range(3):
                Minv[r, c], Minv[r, c + 3], Minv[r + 3, c], Minv[r + 3, c + 3] = (
                    A[3 * r + c], B[3 * r + c], B[3 * c + r], C[3 * r + c])
        if not _invert_spd6(Minv):
            return SINGULAR
        for j in range(6, nv):
            o = F + 6 * j
            f = (W[0, o], W[0, o + 1], W[0, o + 2], W[0, o + 3], W[0, o + 4], W[0, o + 5])
            for r in range(6):
                P = -(Minv[r, 0] * f[0] + Minv[r, 1] * f[1] + Minv[r, 2] * f[2]
                      + Minv[r, 3] * f[3] + Minv[r, 4] * f[4] + Minv[r, 5] * f[5])
                W[0, o + r] = P
                Minv[r, j] = Minv[j, r] = P

    for i in range(nb):
        parent, jt, iv = mi[i, 0], mi[i, 1], mi[i, 2]
        if jt == JOINT_FREE:
            continue
        S = (W[i, _S], W[i, _S + 1], W[i, _S + 2], W[i, _S + 3], W[i, _S + 4], W[i, _S + 5])
        U = (W[i, _U], W[i, _U + 1], W[i, _U + 2], W[i, _U + 3], W[i, _U + 4], W[i, _U + 5])
        Dinv, end = W[i, _DINV], iv + int(W[i, _NSUB])
        has_children = end > iv + 1
        for j in range(iv, nv):
            e = Minv[iv, j] if j < end else 0.0
            if parent >= 0:
                o = _PC + 6 * j
                e -= Dinv * (U[0] * W[parent, o] + U[1] * W[parent, o + 1] + U[2] * W[parent, o + 2]
                             + U[3] * W[parent, o + 3] + U[4] * W[parent, o + 4] + U[5] * W[parent, o + 5])
                if has_children:
                    for k in range(6):
                        W[i, o + k] = S[k] * e + W[parent, o + k]
            elif has_children:
                for k in range(6):
                    W[i, _PC + 6 * j + k] = S[k] * e
            Minv[iv, j] = Minv[j, iv] = e
    return OK


@helper
def _check(mi, H, s, v, nv):
    for i in range(1, mi.shape[0]):
        j = i - 1  # depth first: the parent of i is i - 1 or one of its ancestors
        while j > mi[i, 0]:
            j = mi[j, 0]
        if j != mi[i, 0]:
            return NOT_DEPTH_FIRST
    return check_positions(mi, H, s, v, nv)


@kernel
def minv_kernel(model, H, s, v, work, Minv):
    m, w = ModelArrays(*model), MinvWork(*work)
    status = _check(m.joints, H, s, v, Minv.shape[0])
    if status == OK:
        status = minv_core(m.joints, m.bodies, s, w.bodies, Minv)
    return status


@kernel
def minv_batch_kernel(model, H, S, V, work, MINV):
    """M^{-1} at N knots in one compiled call; returns (status, failing knot)."""
    m, w = ModelArrays(*model), MinvWork(*work)
    N = S.shape[0]
    if V.shape[0] != N or MINV.shape[0] != N or (m.floating and H.shape[0] != N):
        return BAD_N, 0
    for k in range(N):
        status = _check(m.joints, H[k] if m.floating else H[0], S[k], V[k], MINV.shape[1])
        if status == OK:
            status = minv_core(m.joints, m.bodies, S[k], w.bodies, MINV[k])
        if status != OK:
            return status, k
    return OK, 0


def _raise(status: int, model: RobotModel, knot: int | None = None, x=None) -> None:
    if status == NOT_DEPTH_FIRST:
        raise ValueError(f"inverse_mass_matrix({model.name}): bodies must be numbered depth first (every subtree "
                         "a contiguous range of bodies), as a URDF-loaded model is")
    raise_for_status(status, model, "inverse_mass_matrix", knot, x)


def inverse_mass_matrix(model: RobotModel, x: State | Trajectory, workspace: Workspace | None = None) -> np.ndarray:
    """M(q)^{-1}, full and symmetric, computed recursively in O(n^2) (not by inverting M).

    Only the joint positions matter (``x.v`` and the base pose are checked, not used). ``x`` is a State
    (returns ``(nv, nv)``) or a Trajectory of N knots (returns ``(N, nv, nv)`` from one compiled call).
    ``workspace``: a ``Workspace(model)`` whose work arrays are reused (without one, each call allocates its own).
    With mimic joints, the inverse of ``G^T M_full G`` by Cholesky.
    """
    x = checked_state(model, x, "inverse_mass_matrix")
    if model.mimic:
        ws = expanded_workspace(model, workspace, "inverse_mass_matrix")
        M = reduce_matrix(model, mass_matrix(model.expanded, model.expand_state(x), ws))
        return inverse(model, M, "inverse_mass_matrix")
    nv, work = model.nv, workspace_for(model, workspace, "inverse_mass_matrix").work(minv_work)
    if type(x) is State:
        Minv = np.empty((nv, nv))
        status = minv_kernel(model.packed, base_pose(x), x.s, x.v, work, Minv)
        if status != OK:
            _raise(status, model, None, x)
        return Minv
    MINV = np.empty((len(x), nv, nv))
    status, k = minv_batch_kernel(model.packed, base_poses(x), x.s, x.v, work, MINV)
    if status != OK:
        _raise(status, model, k, x)
    return MINV
