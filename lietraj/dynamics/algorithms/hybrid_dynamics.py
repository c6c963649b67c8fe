"""Hybrid dynamics: accelerations given on some joints, torques on the others; the missing halves (seed 002 Table 4).

Each generalized velocity is either in the set "a" (acceleration given, torque computed) or in the set "p" (torque
given, acceleration computed); ``known`` marks the "a" entries. All "a" is inverse dynamics (RNEA), all "p" is
forward dynamics (ABA); the naive mixed solution is seed 002 eq. (33)::

    sddot_p = M_pp^-1 (tau_p - h_p - M_pa sddot_a),   tau_a = M_a: sddot + h_a

The recursion is Kim's articulated-body method (seed 002 Tables 3-4, linear-first here, Featherstone's
operators, body frames; ``I^A``, ``p^A`` are his ``I-hat``, ``B-hat``, ``c`` his ``eta``, ``D^-1`` his ``Psi``),
O(n) for any mask, gravity entering as a fictitious acceleration ``-g`` of the world:

    forward   v_i = iX_l v_l + S_i sdot_i,   c_i = v_i x S_i sdot_i,   I^A_i = I_i,   p^A_i = v_i x* I_i v_i - f_ext_i
    backward  i in a:  Pi_i = I^A_i,                    beta_i = p^A_i + I^A_i (c_i + S_i sddot_i)
              i in p:  U_i = I^A_i S_i,  D_i = S_i^T U_i + armature_i,  u_i = tau_i - S_i^T p^A_i - U_i^T c_i,
                       Pi_i = I^A_i - U_i U_i^T / D_i,  beta_i = p^A_i + I^A_i c_i + U_i u_i / D_i
              I^A_l += lX_i^* Pi_i iX_l,   p^A_l += lX_i^* beta_i
    forward   i in a:  a_i = iX_l a_l + c_i + S_i sddot_i,   tau_i = S_i^T (I^A_i a_i + p^A_i) + armature_i sddot_i
              i in p:  sddot_i = (u_i - U_i^T iX_l a_l) / D_i,   a_i = iX_l a_l + c_i + S_i sddot_i

"a" children pass their articulated inertia unprojected, "p" children projected. The free base is one 6-DoF
joint with ``S = I`` and no bias, whose parent is the world, so ``a_0 = nu_dot + R^T (-g)``: given ``nu_dot``, its
wrench is ``I^A_0 a_0 + p^A_0``; given its wrench ``tau_b`` (usually zero), ``a_0 = (I^A_0)^-1 (tau_b - p^A_0)``,
a 6x6 solve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics._checks import (
    BAD_A,
    BAD_FEXT,
    BAD_N,
    BAD_TAU,
    NOT_FINITE,
    OK,
    base_pose,
    base_poses,
    check_state,
    checked_mask,
    checked_state,
    checked_vector,
    checked_wrenches,
    finite,
    kernel_wrenches,
    raise_for_status,
)
from lietraj.dynamics._spatial import (
    act_force,
    act_inv_motion,
    add,
    add_inertia_blocks,
    dot,
    inertia_blocks_times,
    inertia_to_parent,
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
)
from lietraj.dynamics.algorithms.aba import WORK_LAYOUT, AbaWork, aba_work, articulated_forward_pass
from lietraj.dynamics.model.model import JOINT_FREE, MF_ARMATURE, ModelArrays, RobotModel, refuse_mimic
from lietraj.dynamics.model.workspace import Workspace, workspace_for
from lietraj.dynamics.lie.state import State, Trajectory

# The work array is ABA's: its first pass fills placements, v_i, c_i, I^A_i and p^A_i.
_R, _P, _V, _C, _IA, _PA, _U, _DINV, _UU, _A, _COLS = WORK_LAYOUT
_ZERO3 = (0.0, 0.0, 0.0)

# Status codes of this module, beyond those of _checks.
BAD_MASK, MIXED_BASE = 100, 101


@kernel
def hybrid_core(mi, mf, g, H, s, v, known, a_in, tau_in, fext, W, a_out, tau_out):
    """Hybrid dynamics for one state; writes a_out and tau_out. Assumes checked inputs."""
    nb = mi.shape[0]
    articulated_forward_pass(mi, mf, H, s, v, fext, W)

    # Down to body 0 for a fixed base (a "p" root needs its U, D, u); a free base is solved whole in the last pass.
    for i in range(nb - 1, 0 if mi[0, 1] == JOINT_FREE else -1, -1):
        parent, jt, iv = mi[i, 0], mi[i, 1], mi[i, 2]
        A, B, C = load_inertia_blocks(W, i, _IA)
        pf, pn = load3(W, i, _PA), load3(W, i, _PA + 3)
        cv, cw = load3(W, i, _C), load3(W, i, _C + 3)
        Sv, Sw = motion_subspace(mf, jt, i)
        if known[iv]:
            ev, ew = add(cv, scale(Sv, a_in[iv])), add(cw, scale(Sw, a_in[iv]))
            bf, bn = inertia_blocks_times(A, B, C, ev, ew)
            bf, bn = add(pf, bf), add(pn, bn)
        else:
            Uv, Uw = inertia_blocks_times(A, B, C, Sv, Sw)
            Dinv = 1.0 / (dot(Sv, Uv) + dot(Sw, Uw) + mf[i, MF_ARMATURE])
            u = tau_in[iv] - dot(Sv, pf) - dot(Sw, pn) - dot(Uv, cv) - dot(Uw, cw)
            store3(W, i, _U, Uv)
            store3(W, i, _U + 3, Uw)
            W[i, _DINV], W[i, _UU] = Dinv, u
            bf, bn = inertia_blocks_times(A, B, C, cv, cw)
            bf, bn = add(add(pf, bf), scale(Uv, u * Dinv)), add(add(pn, bn), scale(Uw, u * Dinv))
            A, B, C = msub(A, outer(Uv, Uv, Dinv)), msub(B, outer(Uv, Uw, Dinv)), msub(C, outer(Uw, Uw, Dinv))
        if parent >= 0:
            R, p = load9(W, i, _R), load3(W, i, _P)
            A, B, C = inertia_to_parent(R, p, A, B, C)
            add_inertia_blocks(W, parent, _IA, A, B, C)
            bf, bn = act_force(R, p, bf, bn)
            store3(W, parent, _PA, add(load3(W, parent, _PA), bf))
            store3(W, parent, _PA + 3, add(load3(W, parent, _PA + 3), bn))

    for i in range(nb):
        parent, jt, iv = mi[i, 0], mi[i, 1], mi[i, 2]
        R, p = load9(W, i, _R), load3(W, i, _P)
        pf, pn = load3(W, i, _PA), load3(W, i, _PA + 3)
        if jt == JOINT_FREE:
            gv = mtv(R, (-g[0], -g[1], -g[2]))
            A, B, C = load_inertia_blocks(W, i, _IA)
            if known[0]:
                ai, bi = add(gv, (a_in[0], a_in[1], a_in[2])), (a_in[3], a_in[4], a_in[5])
                f, n = inertia_blocks_times(A, B, C, ai, bi)
                f, n = add(f, pf), add(n, pn)
                for k in range(3):
                    a_out[k], a_out[k + 3] = a_in[k], a_in[k + 3]
                    tau_out[k], tau_out[k + 3] = f[k], n[k]
            else:
                ai, bi = solve_inertia(A, B, C, (tau_in[0] - pf[0], tau_in[1] - pf[1], tau_in[2] - pf[2]),
                                       (tau_in[3] - pn[0], tau_in[4] - pn[1], tau_in[5] - pn[2]))
                for k in range(3):
                    a_out[k], a_out[k + 3] = ai[k] - gv[k], bi[k]
                    tau_out[k], tau_out[k + 3] = tau_in[k], tau_in[k + 3]
        else:
            Sv, Sw = motion_subspace(mf, jt, i)
            if parent >= 0:
                xv, xw = act_inv_motion(R, p, load3(W, parent, _A), load3(W, parent, _A + 3))
            else:
                xv, xw = act_inv_motion(R, p, (-g[0], -g[1], -g[2]), _ZERO3)
            if known[iv]:
                qdd = a_in[iv]
            else:
                qdd = W[i, _DINV] * (W[i, _UU] - dot(load3(W, i, _U), xv) - dot(load3(W, i, _U + 3), xw))
            ai = add(add(xv, load3(W, i, _C)), scale(Sv, qdd))
            bi = add(add(xw, load3(W, i, _C + 3)), scale(Sw, qdd))
            a_out[iv] = qdd
            if known[iv]:
                A, B, C = load_inertia_blocks(W, i, _IA)
                f, n = inertia_blocks_times(A, B, C, ai, bi)
                tau_out[iv] = dot(Sv, add(f, pf)) + dot(Sw, add(n, pn)) + mf[i, MF_ARMATURE] * qdd
            else:
                tau_out[iv] = tau_in[iv]
        store3(W, i, _A, ai)
        store3(W, i, _A + 3, bi)


@helper
def check_hybrid_inputs(mi, floating, n, nv, H, s, v, known, a_in, tau_in, fext):
    status = check_state(floating, n, nv, H, s, v)
    if status != OK:
        return status
    if known.shape[0] != nv:
        return BAD_MASK
    if floating:
        for k in range(1, 6):
            if known[k] != known[0]:
                return MIXED_BASE
    if a_in.shape[0] != nv:
        return BAD_A
    if tau_in.shape[0] != nv:
        return BAD_TAU
    for k in range(nv):
        if not math.isfinite(a_in[k] if known[k] else tau_in[k]):  # only the entries that are read
            return NOT_FINITE
    if fext.shape[0] > 0:
        if fext.shape[0] != mi.shape[0] or fext.shape[1] != 6:
            return BAD_FEXT
        if not finite(fext):
            return NOT_FINITE
    return OK


@kernel
def hybrid_kernel(model, H, s, v, known, a_in, tau_in, fext, work, a_out, tau_out):
    """Hybrid dynamics for one state; work: ABA's (``AbaWork``), whose layout it shares."""
    m, w = ModelArrays(*model), AbaWork(*work)
    status = check_hybrid_inputs(m.joints, m.floating, m.n, a_out.shape[0], H, s, v, known, a_in, tau_in, fext)
    if status == OK:
        hybrid_core(m.joints, m.bodies, m.gravity, H, s, v, known, a_in, tau_in, fext, w.bodies, a_out, tau_out)
    return status


@kernel
def hybrid_batch_kernel(model, H, S, V, known, A_in, TAU_in, fext, work, A_out, TAU_out):
    """Hybrid dynamics over N knots in one compiled call (one mask for all knots); returns (status, failing knot)."""
    m, w = ModelArrays(*model), AbaWork(*work)
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
        hybrid_core(m.joints, m.bodies, m.gravity, Hk, S[k], V[k], known, A_in[k], TAU_in[k], fk, w.bodies, A_out[k],
                    TAU_out[k])
    return OK, 0


@dataclass(eq=False)
class HybridResult:
    """Solution of the hybrid dynamics: full acceleration ``a`` and torque ``tau`` (given entries copied).

    For a floating base, ``a[:6]`` is the body acceleration of the base twist and ``tau[:6]`` the base wrench in
    the base frame. Shapes ``(nv,)``, or ``(N, nv)`` for a trajectory.
    """

    a: np.ndarray
    tau: np.ndarray


def hybrid_inputs(model: RobotModel, x, known, a_known, tau_known, fext, what: str):
    """The checked arguments of the hybrid dynamics (``hybrid_dynamics``' and its derivatives'): ``(x, mask,
    a_known, tau_known, fext)``, fext in the kernels' form."""
    x = checked_state(model, x, what)
    refuse_mimic(model, what)
    N = None if type(x) is State else len(x)
    mask = checked_mask(known, model, what)
    a_known = checked_vector(a_known, model.nv, N, model, what, "a_known")
    tau_known = checked_vector(tau_known, model.nv, N, model, what, "tau_known")
    return x, mask, a_known, tau_known, kernel_wrenches(checked_wrenches(fext, N, model, what), N is not None)


def raise_hybrid_status(status: int, model: RobotModel, knot: int | None, what: str, x, mask, a_known, tau_known,
                        fext) -> None:
    """The ValueError of a status of the hybrid-dynamics kernels."""
    where = f" at knot {knot}" if knot is not None else ""
    if status == BAD_MASK:
        raise ValueError(f"{what}({model.name}){where}: the mask known must have shape ({model.nv},)")
    if status == MIXED_BASE:
        raise ValueError(f"{what}({model.name}){where}: the six base entries of known must be all True "
                         "(base acceleration given) or all False (base wrench given)")
    # Only the entries read are checked for NaN: a_known where known, tau_known elsewhere.
    raise_for_status(status, model, what, knot, x, a_known=np.where(mask, a_known, 0.0),
                     tau_known=np.where(mask, 0.0, tau_known), fext=fext)


def hybrid_dynamics(model: RobotModel, x: State | Trajectory, known, a_known, tau_known, fext=None,
                    workspace: Workspace | None = None) -> HybridResult:
    """Accelerations where ``known`` is False and torques where it is True, from the given other halves.

    ``known`` is a boolean mask over the ``nv`` generalized velocities (shared by all knots of a trajectory);
    for a floating base its six base entries must agree. ``a_known`` and ``tau_known`` are full ``(nv,)``
    vectors (``(N, nv)`` for a trajectory) of which only the entries with ``known`` True, respectively False,
    are read. ``fext`` (optional): body-frame wrenches ``[force; torque]``, ``(nb, 6)`` or ``(N, nb, 6)``.
    All ``known`` is ``rnea``; all unknown is forward dynamics (ABA), with armature as Pinocchio's. ``workspace``:
    a ``Workspace(model)`` whose work arrays are reused (without one, each call allocates its own).
    """
    what = "hybrid_dynamics"
    x, mask, a_in, tau_in, fe = inputs = hybrid_inputs(model, x, known, a_known, tau_known, fext, what)
    work = workspace_for(model, workspace, what).work(aba_work)
    if type(x) is State:
        a, tau = np.empty(model.nv), np.empty(model.nv)
        status = hybrid_kernel(model.packed, base_pose(x), x.s, x.v, mask, a_in, tau_in, fe, work, a, tau)
        if status != OK:
            raise_hybrid_status(status, model, None, what, *inputs)
        return HybridResult(a, tau)
    A, TAU = np.empty((len(x), model.nv)), np.empty((len(x), model.nv))
    status, k = hybrid_batch_kernel(model.packed, base_poses(x), x.s, x.v, mask, a_in, tau_in, fe, work, A, TAU)
    if status != OK:
        raise_hybrid_status(status, model, k, what, *inputs)
    return HybridResult(A, TAU)
