"""Articulated-body algorithm: forward dynamics a = M(q)^{-1} (tau - h(q, v) + sum_i J_i^T f_ext_i), O(n).

Featherstone's ABA (seed 002 Table 3 as reconstructed in its digest, linear-first), three passes:

    forward   v_i = iX_l v_l + S_i sdot_i,  c_i = v_i x S_i sdot_i,  I^A_i = I_i,  p^A_i = v_i x* I_i v_i - f_ext_i
    backward  U_i = I^A_i S_i,  D_i = S_i^T U_i + armature_i,  u_i = tau_i - S_i^T p^A_i,
              I^A_l += lX_i^* (I^A_i - U_i U_i^T / D_i) iX_l,  p^A_l += lX_i^* (p^A_i + I^a_i c_i + U_i u_i / D_i)
    forward   a'_i = iX_l a_l + c_i,  sddot_i = (u_i - U_i^T a'_i) / D_i,  a_i = a'_i + S_i sddot_i

with gravity as the fictitious world acceleration ``-g``. For a floating base, ``tau[:6]`` is a wrench applied
to the base (zero for a free-floating robot) and the base acceleration solves ``I^A_0 a_0 = tau_b - p^A_0``
(a 6x6 solve by 3x3 blocks). Pinocchio's ``aba`` computes the same.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics._checks import (
    check_dynamics_inputs,
    BAD_N,
    BAD_TAU,
    OK,
    SINGULAR,
    base_pose,
    base_poses,
    checked_state,
    checked_vector,
    checked_wrenches,
    kernel_wrenches,
    raise_for_status,
)
from lietraj.dynamics._spatial import (
    base_placement,
    act_force,
    act_inv_motion,
    add,
    add_inertia_blocks,
    body_inertia_blocks,
    cross_force,
    cross_motion,
    dot,
    inertia_blocks_times,
    inertia_to_parent,
    inertia_times,
    joint_placement,
    load3,
    load9,
    load_inertia_blocks,
    motion_subspace,
    msub,
    mtv,
    outer,
    scale,
    solve_inertia,
    store3,
    store9,
    store_inertia_blocks,
    sub,
)
from lietraj.dynamics.model.model import JOINT_FREE, MF_ARMATURE, ModelArrays, RobotModel
from lietraj.dynamics.model.workspace import Workspace, workspace_for
from lietraj.dynamics.algorithms.crba import mass_matrix
from lietraj.dynamics.algorithms.mimic import expanded_workspace, reduce_force, reduce_matrix, solve
from lietraj.dynamics.algorithms.rnea import inverse_dynamics, local_wrenches
from lietraj.dynamics.lie.state import State, Trajectory


# Work-array columns (shared with hybrid_dynamics): R (9), p (3), v (6), c (6), I^A (21), p^A (6), U (6), 1/D, u, a (6).
WORK_LAYOUT = (0, 9, 12, 18, 24, 45, 51, 57, 58, 59, 65)
_R, _P, _V, _C, _IA, _PA, _U, _DINV, _UU, _A, _COLS = WORK_LAYOUT
_ZERO3 = (0.0, 0.0, 0.0)


class AbaWork(NamedTuple):
    """ABA's work array: per body the columns of ``WORK_LAYOUT``."""

    bodies: np.ndarray


def aba_work(model: RobotModel) -> AbaWork:
    return AbaWork(np.zeros((model.nb, _COLS)))


@helper
def articulated_forward_pass(mi, mf, H, s, v, fext, W):
    """First ABA pass: placements, velocities v_i, bias accelerations c_i, I^A_i = I_i and p^A_i into W."""
    nb = mi.shape[0]
    has_fext = fext.shape[0] > 0
    for i in range(nb):
        parent, jt, iv, js = mi[i, 0], mi[i, 1], mi[i, 2], mi[i, 3]
        if jt == JOINT_FREE:
            R, p = base_placement(H)
            vi, wi = (v[0], v[1], v[2]), (v[3], v[4], v[5])
            cv, cw = _ZERO3, _ZERO3
        else:
            R, p = joint_placement(mf, jt, i, s[js])
            Sv, Sw = motion_subspace(mf, jt, i)
            if parent >= 0:
                vi, wi = act_inv_motion(R, p, load3(W, parent, _V), load3(W, parent, _V + 3))
            else:
                vi, wi = _ZERO3, _ZERO3
            vJ, wJ = scale(Sv, v[iv]), scale(Sw, v[iv])
            vi, wi = add(vi, vJ), add(wi, wJ)
            cv, cw = cross_motion(vi, wi, vJ, wJ)
        store9(W, i, _R, R)
        store3(W, i, _P, p)
        store3(W, i, _V, vi)
        store3(W, i, _V + 3, wi)
        store3(W, i, _C, cv)
        store3(W, i, _C + 3, cw)
        A, B, C = body_inertia_blocks(mf, i)
        store_inertia_blocks(W, i, _IA, A, B, C)
        hv, hw = inertia_times(mf, i, vi, wi)
        f, n = cross_force(vi, wi, hv, hw)
        if has_fext:
            f = (f[0] - fext[i, 0], f[1] - fext[i, 1], f[2] - fext[i, 2])
            n = (n[0] - fext[i, 3], n[1] - fext[i, 4], n[2] - fext[i, 5])
        store3(W, i, _PA, f)
        store3(W, i, _PA + 3, n)


@kernel
def aba_core(mi, mf, g, H, s, v, tau, fext, W, ddq):
    """ABA for one state; writes ddq and returns OK, or SINGULAR if an articulated inertia is not positive."""
    nb = mi.shape[0]
    articulated_forward_pass(mi, mf, H, s, v, fext, W)

    for i in range(nb - 1, -1, -1):
        parent, jt, iv = mi[i, 0], mi[i, 1], mi[i, 2]
        if jt == JOINT_FREE:
            continue
        A, B, C = load_inertia_blocks(W, i, _IA)
        f, n = load3(W, i, _PA), load3(W, i, _PA + 3)
        Sv, Sw = motion_subspace(mf, jt, i)
        Uf, Un = inertia_blocks_times(A, B, C, Sv, Sw)
        D = dot(Sv, Uf) + dot(Sw, Un) + mf[i, MF_ARMATURE]
        if not D > 0.0:
            return SINGULAR
        Dinv = 1.0 / D
        u = tau[iv] - dot(Sv, f) - dot(Sw, n)
        store3(W, i, _U, Uf)
        store3(W, i, _U + 3, Un)
        W[i, _DINV], W[i, _UU] = Dinv, u
        if parent >= 0:
            A, B, C = msub(A, outer(Uf, Uf, Dinv)), msub(B, outer(Uf, Un, Dinv)), msub(C, outer(Un, Un, Dinv))
            bf, bn = inertia_blocks_times(A, B, C, load3(W, i, _C), load3(W, i, _C + 3))
            k = u * Dinv
            f = add(add(f, bf), scale(Uf, k))
            n = add(add(n, bn), scale(Un, k))
            R, p = load9(W, i, _R), load3(W, i, _P)
            fp, np_ = act_force(R, p, f, n)
            for j in range(3):
                W[parent, _PA + j] += fp[j]
                W[parent, _PA + 3 + j] += np_[j]
            Ap, Bp, Cp = inertia_to_parent(R, p, A, B, C)
            add_inertia_blocks(W, parent, _IA, Ap, Bp, Cp)

    for i in range(nb):
        parent, jt, iv = mi[i, 0], mi[i, 1], mi[i, 2]
        if jt == JOINT_FREE:
            A, B, C = load_inertia_blocks(W, i, _IA)
            f = sub((tau[0], tau[1], tau[2]), load3(W, i, _PA))
            n = sub((tau[3], tau[4], tau[5]), load3(W, i, _PA + 3))
            ai, bi = solve_inertia(A, B, C, f, n)
            grav = mtv(load9(W, i, _R), (-g[0], -g[1], -g[2]))
            ddq[0], ddq[1], ddq[2] = ai[0] - grav[0], ai[1] - grav[1], ai[2] - grav[2]
            ddq[3], ddq[4], ddq[5] = bi[0], bi[1], bi[2]
        else:
            R, p = load9(W, i, _R), load3(W, i, _P)
            if parent >= 0:
                ai, bi = act_inv_motion(R, p, load3(W, parent, _A), load3(W, parent, _A + 3))
            else:
                ai, bi = act_inv_motion(R, p, (-g[0], -g[1], -g[2]), _ZERO3)
            ai, bi = add(ai, load3(W, i, _C)), add(bi, load3(W, i, _C + 3))
            qdd = W[i, _DINV] * (W[i, _UU] - dot(load3(W, i, _U), ai) - dot(load3(W, i, _U + 3), bi))
            Sv, Sw = motion_subspace(mf, jt, i)
            ai, bi = add(ai, scale(Sv, qdd)), add(bi, scale(Sw, qdd))
            ddq[iv] = qdd
        store3(W, i, _A, ai)
        store3(W, i, _A + 3, bi)
    return OK


@kernel
def aba_kernel(model, H, s, v, tau, fext, work, ddq):
    m, w = ModelArrays(*model), AbaWork(*work)
    status = check_dynamics_inputs(m.joints, m.floating, m.n, ddq.shape[0], H, s, v, tau, BAD_TAU, fext)
    if status == OK:
        status = aba_core(m.joints, m.bodies, m.gravity, H, s, v, tau, fext, w.bodies, ddq)
    return status


@kernel
def aba_batch_kernel(model, H, S, V, TAU, fext, work, DDQ):
    """ABA over N knots in one compiled call; returns (status, failing knot)."""
    m, w = ModelArrays(*model), AbaWork(*work)
    N = S.shape[0]
    has_fext = fext.shape[1] > 0
    if (V.shape[0] != N or TAU.shape[0] != N or DDQ.shape[0] != N or (m.floating and H.shape[0] != N)
            or (has_fext and fext.shape[0] != N)):
        return BAD_N, 0
    nv = DDQ.shape[1]
    for k in range(N):
        Hk = H[k] if m.floating else H[0]
        fk = fext[k] if has_fext else fext[0]
        status = check_dynamics_inputs(m.joints, m.floating, m.n, nv, Hk, S[k], V[k], TAU[k], BAD_TAU, fk)
        if status == OK:
            status = aba_core(m.joints, m.bodies, m.gravity, Hk, S[k], V[k], TAU[k], fk, w.bodies, DDQ[k])
        if status != OK:
            return status, k
    return OK, 0


def _raise(status: int, model: RobotModel, knot: int | None = None, what: str = "aba", x=None, **inputs) -> None:
    """The ValueError of a status of ABA's kernels (``inputs`` as for ``raise_for_status``)."""
    if status == SINGULAR:
        where = f" at knot {knot}" if knot is not None else ""
        raise ValueError(f"{what}({model.name}){where}: an articulated inertia is not positive definite: some joint "
                         "moves no mass (give it inertia or armature)")
    raise_for_status(status, model, what, knot, x, **inputs)


def aba(model: RobotModel, x: State | Trajectory, tau, fext=None, fext_reference: str = "local",
        workspace: Workspace | None = None) -> np.ndarray:
    """Forward dynamics: the acceleration ``a = [nu_dot; s_ddot]`` produced by the torques ``tau``.

    ``tau`` has ``nv`` entries; for a floating base its first six are a wrench on the base (zero for a
    free-floating robot). ``x`` is a State (returns ``(nv,)``) or a Trajectory with ``tau`` of shape
    ``(N, nv)`` (returns ``(N, nv)`` from one compiled call). ``fext``: optional wrenches ``[force; torque]``,
    ``(nb, 6)`` or ``(N, nb, 6)``, in each body's frame (``fext_reference="local"``) or in the world frame at the
    world origin (``"world"``). ``workspace``: a ``Workspace(model)`` whose work arrays are reused (without one,
    each call allocates its own). Raises TypeError for an argument of the wrong kind (None, a string) and
    ValueError for a wrong shape or a NaN, naming it.
    """
    x = checked_state(model, x, "aba")
    if model.mimic:
        return mimic_forward_dynamics(model, x, tau, fext, fext_reference, workspace, "aba")
    workspace = workspace_for(model, workspace, "aba")
    work = workspace.work(aba_work)
    single = type(x) is State
    N = None if single else len(x)
    tau = checked_vector(tau, model.nv, N, model, "aba", "tau")
    fe = checked_wrenches(fext, N, model, "aba")
    fe = kernel_wrenches(local_wrenches(model, x, fe, fext_reference, "aba", workspace), not single)
    if single:
        ddq = np.empty(model.nv)
        status = aba_kernel(model.packed, base_pose(x), x.s, x.v, tau, fe, work, ddq)
        if status != OK:
            _raise(status, model, None, "aba", x, tau=tau, fext=fe)
        return ddq
    DDQ = np.empty((N, model.nv))
    status, k = aba_batch_kernel(model.packed, base_poses(x), x.s, x.v, tau, fe, work, DDQ)
    if status != OK:
        _raise(status, model, k, "aba", x, tau=tau, fext=fe)
    return DDQ


forward_dynamics = aba


def mimic_forward_dynamics(model: RobotModel, x: State | Trajectory, tau, fext, fext_reference: str,
                           workspace: Workspace | None, what: str) -> np.ndarray:
    """Forward dynamics of a model with mimic joints, ``x`` checked: the reduced system ``M a = tau - h`` with
    ``M = G^T M_full G`` and ``h = G^T ID_full(x, 0, fext)`` (ABA's recursion has no form for a dof shared by two
    bodies), solved by Cholesky."""
    tau = checked_vector(tau, model.nv, None if type(x) is State else len(x), model, what, "tau")
    full, ws = model.expanded, expanded_workspace(model, workspace, what)
    xf = model.expand_state(x)
    h = inverse_dynamics(full, xf, np.zeros(xf.v.shape), fext, fext_reference, ws, what)
    return solve(model, reduce_matrix(model, mass_matrix(full, xf, ws)), tau - reduce_force(model, h), what)
