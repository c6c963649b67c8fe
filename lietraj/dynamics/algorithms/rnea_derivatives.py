"""First-order derivatives of inverse dynamics: dtau/dq, dtau/dv and M = dtau/da, by IDSVA (seed 001 Algorithm 1).

The derivatives of ``tau = rnea(q, v, a, f_ext)`` are taken along the joint motion subspaces (seed 001 §IV.A):
for a revolute or prismatic joint the ordinary partial derivative, for the free base the right perturbation
``H exp(z)`` with ``z`` linear first, i.e. the body-twist chart of the state tangent ``[z_H; z_s]`` (seed 000 P1:
``nu`` stays fixed while ``H`` moves). These are Pinocchio's ``computeRNEADerivatives``. For a floating base the
first six rows are the base wrench of the extended inverse dynamics, whose derivatives with respect to
``(H, s, nu, sdot)`` are the blocks of seed 000 Tables 5-8 (see ``extended_inverse_dynamics_derivatives``).

IDSVA, with every spatial quantity expressed in one frame. The paper uses the ground frame; any frame fixed
at the current instant gives the same scalars ``S_i^T (...)``, and the base frame saves transforming the base
(for a fixed base it is the world). Linear-first, ``x`` Featherstone's motion cross product, ``x*`` the force
one, ``f x̄* m = m x* f``, ``l = parent(i)``::

    forward   v_i = v_l + S_i qd_i,   a_i = a_l + S_i qdd_i + v_i x S_i qd_i      (a_world = -g)
              Sd_i = v_i x S_i,   Psd_i = v_l x S_i,   Psdd_i = a_l x S_i + v_l x Psd_i
              I^C_i = I_i,   B^C_i = B_i = ½ [(v_i x*) I_i - I_i (v_i x) + (I_i v_i) x̄*]
              f^C_i = I_i a_i + v_i x* I_i v_i - f_ext_i
    backward  t1 = I^C S,   t2 = 2 B^C S + I^C (Sd + Psd),   t3 = 2 B^C Psd + I^C Psdd + f^C x̄* S,   t4 = 2 B^C^T S
              dtau/dq[i, sub(i)\\i] = S_i^T t3,   dtau/dv[i, sub(i)\\i] = S_i^T t2
              dtau/dq[sub(i), i] = t4^T Psd_i + t1^T Psdd_i,   dtau/dv[sub(i), i] = t4^T S_i + t1^T (Sd_i + Psd_i)
              M[sub(i), i] = t1^T S_i,   tau_i = S_i^T f^C_i,   then I^C, B^C, f^C added to the parent's

(seed 001 lines 1-25; lines 17-18 run over the strict subtree, 19-20 over the subtree with ``i``, digest
pitfall 3). Bodies are numbered depth first, so a subtree's dofs are one contiguous range. In linear-first
form the body Coriolis matrix is ``B = [[0, -[p]x], [0, B22]]`` with ``(p, L) = I v`` the momentum and
``B22 = ½ ([w]x I - I [w]x - [v]x [h]x - [h]x [v]x - [L]x)``: a symmetric part plus ``-½ [L]x``, twelve
numbers per composite instead of 36.

External wrenches. A wrench given in its body's frame moves with the body: it enters ``f^C`` and IDSVA
differentiates it like the inertial forces. A wrench given in the world frame (at the world origin, Pinocchio's
WORLD) does not move; it enters ``tau`` alike but not the derivative terms ``f^C x̄* S`` (``t3`` uses ``f^C``
without it), and adds ``t5^T S_i`` to ``dtau/dq[sub(i), i]`` with ``t5 = (w^C x̄*)^T S``, ``w^C`` being the
subtree's world wrenches (derived from seed 001 J3, checked by finite differences).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics._checks import (
    check_dynamics_inputs,
    BAD_A,
    BAD_N,
    OK,
    base_pose,
    base_poses,
    checked_state,
    checked_vector,
    checked_wrenches,
    kernel_wrenches,
    raise_for_status,
    result_arrays,
)
from lietraj.dynamics._spatial import (
    act_force,
    add,
    cross,
    cross_force,
    cross_motion,
    dot,
    load3,
    mtv,
    scale,
    store3,
    sub,
)
from lietraj.dynamics.algorithms.crba import body_in_base_frame, rigid_inertia_times
from lietraj.dynamics.algorithms.mimic import expand_velocity, expanded_workspace, reduce_force, reduce_matrix
from lietraj.dynamics.model.model import JOINT_FREE, MF_ARMATURE, MF_MASS, DofTables, ModelArrays, RobotModel
from lietraj.dynamics.model.workspace import Workspace, workspace_for
from lietraj.dynamics.lie.state import State, Trajectory

# Per-body work columns (base frame): pose R (9), p (3); v (6), a (6); composite inertia m, h (3), I (6: xx yy zz xy
# xz yz); composite Coriolis matrix: momentum p (3), symmetric part of B22 (6, same layout), angular momentum L (3);
# f^C (6) with all wrenches; g^C (6) without the world-frame ones; w^C (6) the world-frame ones.
_R, _V, _A, _M, _H, _I, _BP, _BS, _BL, _F, _G, _WC, _COLS = 0, 12, 18, 24, 25, 28, 34, 37, 43, 46, 52, 58, 64
# Per-dof work columns: S, Psd, Psdd, U = Sd + Psd, t1, t2, t3, t4, and t5 for world-frame wrenches (6 each).
_S, _PSD, _PSDD, _U, _T1, _T2, _T3, _T4, _T5, _DOF_COLS = 0, 6, 12, 18, 24, 30, 36, 42, 48, 54
LOCAL_WRENCH, WORLD_WRENCH = 0, 1
FEXT_REFERENCES = {"local": LOCAL_WRENCH, "world": WORLD_WRENCH}
_ZERO3 = (0.0, 0.0, 0.0)


class IdsvaWork(NamedTuple):
    """IDSVA's work arrays: per body and per dof, the columns above."""

    bodies: np.ndarray
    dofs: np.ndarray


def idsva_work(model: RobotModel) -> IdsvaWork:
    return IdsvaWork(np.zeros((model.nb, _COLS)), np.zeros((model.nv, _DOF_COLS)))


@helper
def _load6(W, i, o):
    return (W[i, o], W[i, o + 1], W[i, o + 2]), (W[i, o + 3], W[i, o + 4], W[i, o + 5])


@helper
def _store6(W, i, o, x, y):
    store3(W, i, o, x)
    store3(W, i, o + 3, y)


@helper
def _add6(W, i, o, x, y):
    for k in range(3):
        W[i, o + k] += x[k]
        W[i, o + 3 + k] += y[k]


@helper
def _dot6(W, i, o, x, y):
    return (W[i, o] * x[0] + W[i, o + 1] * x[1] + W[i, o + 2] * x[2]
            + W[i, o + 3] * y[0] + W[i, o + 4] * y[1] + W[i, o + 5] * y[2])


@helper
def _sym_times(I, w):
    """Symmetric 3x3 (xx, yy, zz, xy, xz, yz) times w."""
    return (I[0] * w[0] + I[3] * w[1] + I[4] * w[2], I[3] * w[0] + I[1] * w[1] + I[5] * w[2],
            I[4] * w[0] + I[5] * w[1] + I[2] * w[2])


@helper
def _coriolis_symmetric(m, h, I, v, w):
    """Symmetric part of B22 = ½([w]x I - I [w]x - [v]x [h]x - [h]x [v]x) for a body moving with (v, w).

    ``[w]x I - I [w]x = T + T^T`` with ``T = [w]x I``, and ``[v]x [h]x + [h]x [v]x = v h^T + h v^T - 2 (v.h) E``."""
    c0 = cross(w, (I[0], I[3], I[4]))
    c1 = cross(w, (I[3], I[1], I[5]))
    c2 = cross(w, (I[4], I[5], I[2]))
    vh = dot(v, h)
    return (c0[0] + vh - v[0] * h[0], c1[1] + vh - v[1] * h[1], c2[2] + vh - v[2] * h[2],
            0.5 * (c1[0] + c0[1] - v[0] * h[1] - h[0] * v[1]),
            0.5 * (c2[0] + c0[2] - v[0] * h[2] - h[0] * v[2]),
            0.5 * (c2[1] + c1[2] - v[1] * h[2] - h[1] * v[2]))


@helper
def _coriolis_times(p, Bs, L, xv, xw):
    """B^C x for B^C = [[0, -[p]x], [0, Bs - ½[L]x]]."""
    return cross(xw, p), sub(_sym_times(Bs, xw), scale(cross(L, xw), 0.5))


@helper
def _coriolis_t_times(p, Bs, L, xv, xw):
    """B^C^T x."""
    return _ZERO3, add(add(cross(p, xv), _sym_times(Bs, xw)), scale(cross(L, xw), 0.5))


@helper
def unit_motion(k):
    """Column k of the 6x6 identity as a (linear, angular) pair."""
    r = k % 3
    e = (1.0 if r == 0 else 0.0, 1.0 if r == 1 else 0.0, 1.0 if r == 2 else 0.0)
    return (e, _ZERO3) if k < 3 else (_ZERO3, e)


@helper
def joint_kinematics(vl, wl, al, bl, Sv, Sw, qd, qdd):
    """Lines 3-7 of IDSVA for a 1-DoF joint of subspace (Sv, Sw) under a parent moving with (vl, wl), (al, bl):
    the body's velocity and acceleration, Psd = v_l x S and Psdd = a_l x S + v_l x Psd (Sd equals Psd)."""
    vJ, wJ = scale(Sv, qd), scale(Sw, qd)
    vi, wi = add(vl, vJ), add(wl, wJ)
    cv, cw = cross_motion(vi, wi, vJ, wJ)
    ai, bi = add(add(al, scale(Sv, qdd)), cv), add(add(bl, scale(Sw, qdd)), cw)
    pv, pw = cross_motion(vl, wl, Sv, Sw)
    c, d = cross_motion(vl, wl, pv, pw)
    e, f = cross_motion(al, bl, Sv, Sw)
    return vi, wi, ai, bi, pv, pw, add(c, e), add(d, f)


@helper
def idsva_core(mi, mf, g, dof_end, H, s, v, a, fext, fext_ref, W, D, tau, dq, dv, M):
    """IDSVA for one state: tau, dtau/dq, dtau/dv and M. Assumes checked inputs.

    ``dof_end[i]`` is one past the last dof of body i's subtree; ``D`` the per-dof work array."""
    nb = mi.shape[0]
    dq[:, :] = 0.0  # entries of dofs on different branches stay zero
    dv[:, :] = 0.0
    M[:, :] = 0.0
    has_fext = fext.shape[0] > 0
    world_fext = has_fext and fext_ref == WORLD_WRENCH
    if mi[0, 1] == JOINT_FREE:
        R = (H[0, 0], H[0, 1], H[0, 2], H[1, 0], H[1, 1], H[1, 2], H[2, 0], H[2, 1], H[2, 2])
        Hp = (H[0, 3], H[1, 3], H[2, 3])
        ag = mtv(R, (-g[0], -g[1], -g[2]))
    else:
        R, Hp = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0), _ZERO3
        ag = (-g[0], -g[1], -g[2])
    for i in range(nb):
        parent, jt, iv = mi[i, 0], mi[i, 1], mi[i, 2]
        h, I, Sv, Sw = body_in_base_frame(mi, mf, i, s, W, _R)
        m = mf[i, MF_MASS]
        if parent >= 0:
            vl, wl = _load6(W, parent, _V)
            al, bl = _load6(W, parent, _A)
        else:
            vl, wl, al, bl = _ZERO3, _ZERO3, ag, _ZERO3
        if jt == JOINT_FREE:
            vi, wi = (v[0], v[1], v[2]), (v[3], v[4], v[5])
            ai, bi = add(ag, (a[0], a[1], a[2])), (a[3], a[4], a[5])
            for k in range(6):
                Ev, Ew = unit_motion(k)
                _store6(D, k, _S, Ev, Ew)
                _store6(D, k, _PSD, _ZERO3, _ZERO3)
                c, d = cross_motion(al, bl, Ev, Ew)
                _store6(D, k, _PSDD, c, d)
                c, d = cross_motion(vi, wi, Ev, Ew)
                _store6(D, k, _U, c, d)
        else:
            vi, wi, ai, bi, pv, pw, qv, qw = joint_kinematics(vl, wl, al, bl, Sv, Sw, v[iv], a[iv])
            _store6(D, iv, _S, Sv, Sw)
            _store6(D, iv, _PSD, pv, pw)
            _store6(D, iv, _PSDD, qv, qw)
            _store6(D, iv, _U, scale(pv, 2.0), scale(pw, 2.0))  # Sd = Psd for a 1-DoF joint
        _store6(W, i, _V, vi, wi)
        _store6(W, i, _A, ai, bi)
        mom, L = rigid_inertia_times(m, h, I, vi, wi)
        fa, na = rigid_inertia_times(m, h, I, ai, bi)
        fb, nbias = cross_force(vi, wi, mom, L)
        f, n = add(fa, fb), add(na, nbias)
        wf, wn = _ZERO3, _ZERO3
        if has_fext:
            ef, en = (fext[i, 0], fext[i, 1], fext[i, 2]), (fext[i, 3], fext[i, 4], fext[i, 5])
            if world_fext:  # world origin and axes -> base frame
                wf, wn = mtv(R, ef), mtv(R, sub(en, cross(Hp, ef)))
                f, n = sub(f, wf), sub(n, wn)
            else:  # body frame -> base frame
                Rb = (W[i, 0], W[i, 1], W[i, 2], W[i, 3], W[i, 4], W[i, 5], W[i, 6], W[i, 7], W[i, 8])
                ef, en = act_force(Rb, load3(W, i, _R + 9), ef, en)
                f, n = sub(f, ef), sub(n, en)
        W[i, _M] = m
        store3(W, i, _H, h)
        for k in range(6):
            W[i, _I + k] = I[k]
        store3(W, i, _BP, mom)
        Bs = _coriolis_symmetric(m, h, I, vi, wi)
        for k in range(6):
            W[i, _BS + k] = Bs[k]
        store3(W, i, _BL, L)
        _store6(W, i, _F, f, n)
        _store6(W, i, _G, add(f, wf), add(n, wn))
        _store6(W, i, _WC, wf, wn)
    for i in range(nb - 1, -1, -1):
        parent, jt, i0 = mi[i, 0], mi[i, 1], mi[i, 2]
        i1 = i0 + (6 if jt == JOINT_FREE else 1)
        end = dof_end[i]
        m, h = W[i, _M], load3(W, i, _H)
        I = (W[i, _I], W[i, _I + 1], W[i, _I + 2], W[i, _I + 3], W[i, _I + 4], W[i, _I + 5])
        Bp, BL = load3(W, i, _BP), load3(W, i, _BL)
        Bs = (W[i, _BS], W[i, _BS + 1], W[i, _BS + 2], W[i, _BS + 3], W[i, _BS + 4], W[i, _BS + 5])
        f, n = _load6(W, i, _F)
        gf, gn = _load6(W, i, _G)
        wf, wn = _load6(W, i, _WC)
        for c in range(i0, i1):
            Sv, Sw = _load6(D, c, _S)
            Pv, Pw = _load6(D, c, _PSD)
            Qv, Qw = _load6(D, c, _PSDD)
            Uv, Uw = _load6(D, c, _U)
            x, y = rigid_inertia_times(m, h, I, Sv, Sw)
            _store6(D, c, _T1, x, y)
            x, y = _coriolis_times(Bp, Bs, BL, Sv, Sw)
            z, u = rigid_inertia_times(m, h, I, Uv, Uw)
            _store6(D, c, _T2, add(scale(x, 2.0), z), add(scale(y, 2.0), u))
            x, y = _coriolis_times(Bp, Bs, BL, Pv, Pw)
            z, u = rigid_inertia_times(m, h, I, Qv, Qw)
            e, d = cross_force(Sv, Sw, gf, gn)
            _store6(D, c, _T3, add(add(scale(x, 2.0), z), e), add(add(scale(y, 2.0), u), d))
            x, y = _coriolis_t_times(Bp, Bs, BL, Sv, Sw)
            _store6(D, c, _T4, scale(x, 2.0), scale(y, 2.0))
            if world_fext:  # t5 = (w^C x̄*)^T S = (w_f x S_w, w_f x S_v + w_n x S_w)
                _store6(D, c, _T5, cross(wf, Sw), add(cross(wf, Sv), cross(wn, Sw)))
            tau[c] = dot(Sv, f) + dot(Sw, n)
        for c in range(i0, i1):
            Sv, Sw = _load6(D, c, _S)
            Pv, Pw = _load6(D, c, _PSD)
            Qv, Qw = _load6(D, c, _PSDD)
            Uv, Uw = _load6(D, c, _U)
            for k in range(i1, end):
                dq[c, k] = _dot6(D, k, _T3, Sv, Sw)
                dv[c, k] = _dot6(D, k, _T2, Sv, Sw)
            for k in range(i0, end):
                dq[k, c] = _dot6(D, k, _T4, Pv, Pw) + _dot6(D, k, _T1, Qv, Qw)
                if world_fext:
                    dq[k, c] += _dot6(D, k, _T5, Sv, Sw)
                dv[k, c] = _dot6(D, k, _T4, Sv, Sw) + _dot6(D, k, _T1, Uv, Uw)
                M[k, c] = M[c, k] = _dot6(D, k, _T1, Sv, Sw)
        if jt != JOINT_FREE:
            arm = mf[i, MF_ARMATURE]
            tau[i0] += arm * a[i0]
            M[i0, i0] += arm
        if parent >= 0:
            W[parent, _M] += m
            for k in range(3):
                W[parent, _H + k] += h[k]
                W[parent, _BP + k] += Bp[k]
                W[parent, _BL + k] += BL[k]
            for k in range(6):
                W[parent, _I + k] += I[k]
                W[parent, _BS + k] += Bs[k]
            _add6(W, parent, _F, f, n)
            _add6(W, parent, _G, gf, gn)
            _add6(W, parent, _WC, wf, wn)


@kernel
def idsva_kernel(model, dofs, H, s, v, a, fext, fext_ref, work, tau, dq, dv, M):
    m, w = ModelArrays(*model), IdsvaWork(*work)
    status = check_dynamics_inputs(m.joints, m.floating, m.n, tau.shape[0], H, s, v, a, BAD_A, fext)
    if status == OK:
        idsva_core(m.joints, m.bodies, m.gravity, DofTables(*dofs).subtree_end, H, s, v, a, fext, fext_ref, w.bodies,
                   w.dofs, tau, dq, dv, M)
    return status


@kernel
def idsva_batch_kernel(model, dofs, H, S, V, A, fext, fext_ref, work, TAU, DQ, DV, MM):
    """IDSVA over N knots in one compiled call; returns (status, failing knot)."""
    floating = ModelArrays(*model).floating
    N = S.shape[0]
    has_fext = fext.shape[1] > 0
    if (V.shape[0] != N or A.shape[0] != N or TAU.shape[0] != N or (floating and H.shape[0] != N)
            or (has_fext and fext.shape[0] != N)):
        return BAD_N, 0
    for k in range(N):
        status = idsva_kernel(model, dofs, H[k] if floating else H[0], S[k], V[k], A[k],
                              fext[k] if has_fext else fext[0], fext_ref, work, TAU[k], DQ[k], DV[k], MM[k])
        if status != OK:
            return status, k
    return OK, 0


def fext_reference_code(reference: str, what: str) -> int:
    try:
        return FEXT_REFERENCES[reference]
    except (KeyError, TypeError):
        raise ValueError(f"{what}: fext_reference must be 'local' or 'world', got {reference!r}") from None


@dataclass(eq=False)
class InverseDynamicsDerivatives:
    """``tau = rnea(x, a, fext)`` and its derivatives: ``dtau_dq`` (configuration tangent, base columns in the
    body-twist chart), ``dtau_dv`` and ``M = dtau/da``. Shapes ``(nv,)`` and ``(nv, nv)``; with a leading ``N``
    for a trajectory."""

    tau: np.ndarray
    dtau_dq: np.ndarray
    dtau_dv: np.ndarray
    M: np.ndarray


def rnea_derivatives(model: RobotModel, x: State | Trajectory, a, fext=None, fext_reference: str = "local",
                     out: InverseDynamicsDerivatives | None = None,
                     workspace: Workspace | None = None) -> InverseDynamicsDerivatives:
    """Inverse dynamics and its analytical first-order derivatives (IDSVA, seed 001 Algorithm 1).

    ``a`` is the generalized acceleration (for a floating base any ``nu_dot``, consistent or not: the first
    six rows are then the base wrench of the extended inverse dynamics). ``fext`` (optional) holds one wrench
    ``[force; torque]`` per body, ``(nb, 6)``: in the body's frame (``fext_reference="local"``, as ``rnea``) or
    in the world frame at the world origin (``"world"``); the derivatives include how either depends on ``q``.
    ``x`` a Trajectory evaluates all knots in one compiled call (``a`` (N, nv), ``fext`` (N, nb, 6)).
    Equals Pinocchio's ``computeRNEADerivatives`` (``dtau_dq, dtau_dv, dtau_da``). ``out``, a previous result
    of the same shapes, is overwritten and returned instead of allocating new arrays; so are the work arrays of
    ``workspace``, a ``Workspace(model)`` (without one, each call allocates its own).
    """
    what = "rnea_derivatives"
    x = checked_state(model, x, what)
    ref = fext_reference_code(fext_reference, what)
    if model.mimic:
        return _mimic_rnea_derivatives(model, x, a, fext, fext_reference, out, workspace)
    work = workspace_for(model, workspace, what).work(idsva_work)
    nv = model.nv
    single = type(x) is State
    N = None if single else len(x)
    a = checked_vector(a, nv, N, model, what, "a")
    fe = kernel_wrenches(checked_wrenches(fext, N, model, what), not single)
    if single:
        tau, dq, dv, M = result_arrays(out, InverseDynamicsDerivatives, ((nv,), (nv, nv), (nv, nv), (nv, nv)), what)
        status = idsva_kernel(model.packed, model.dof_tables, base_pose(x), x.s, x.v, a, fe, ref, work, tau, dq, dv, M)
        if status != OK:
            raise_for_status(status, model, what, None, x, a=a, fext=fe)
        return InverseDynamicsDerivatives(tau, dq, dv, M) if out is None else out
    TAU, DQ, DV, MM = result_arrays(out, InverseDynamicsDerivatives, ((N, nv), (N, nv, nv), (N, nv, nv), (N, nv, nv)),
                                    what)
    status, k = idsva_batch_kernel(model.packed, model.dof_tables, base_poses(x), x.s, x.v, a, fe, ref, work, TAU, DQ,
                                   DV, MM)
    if status != OK:
        raise_for_status(status, model, what, k, x, a=a, fext=fe)
    return InverseDynamicsDerivatives(TAU, DQ, DV, MM) if out is None else out


def _mimic_rnea_derivatives(model: RobotModel, x: State | Trajectory, a, fext, fext_reference: str,
                            out: InverseDynamicsDerivatives | None, workspace: Workspace | None
                            ) -> InverseDynamicsDerivatives:
    """``rnea_derivatives`` of a model with mimic joints: the full tree's, at the expanded state and ``G a``, each
    tangent index contracted by ``G`` (the configuration tangent maps by ``G`` as the velocity does)."""
    what = "rnea_derivatives"
    nv = model.nv
    N = None if type(x) is State else len(x)
    a = checked_vector(a, nv, N, model, what, "a")
    d = rnea_derivatives(model.expanded, model.expand_state(x), expand_velocity(model, a), fext, fext_reference,
                         None, expanded_workspace(model, workspace, what))
    lead = () if N is None else (N,)
    result = result_arrays(out, InverseDynamicsDerivatives, (lead + (nv,),) + 3 * (lead + (nv, nv),), what)
    for target, value in zip(result, (reduce_force(model, d.tau), reduce_matrix(model, d.dtau_dq),
                                      reduce_matrix(model, d.dtau_dv), reduce_matrix(model, d.M))):
        target[...] = value
    return InverseDynamicsDerivatives(*result) if out is None else out
