"""Second-order derivatives of the contact-constrained dynamics and of the impulse dynamics, contracted with a
covector as DDP's backward pass needs: ``μᵀ ∂²a / ∂(q, v, τ)²`` for ``a = contact_dynamics(x, τ)`` and
``μᵀ ∂²v⁺ / ∂(q, v)²`` for ``v⁺ = impulse_dynamics(x)``.

Both solutions are implicit functions of the state: with the rows in each contact frame's own axes (LOCAL) and
``y = (a, λ)`` (``(v⁺, Λ)`` for the impact), the KKT residual ``R(x, τ, y) = 0`` of ``contact_dynamics_derivatives``
(``impulse_dynamics``) holds identically::

    stance:  R₁ = ID(q, v, a) - J(q)ᵀλ - τ,          R₂ = C(q, v, a) + ρ λ,     C = J(q) a + γ(q, v)
    impact:  R₁ = M(q) (v⁺ - v) - J(q)ᵀΛ,            R₂ = J(q) (v⁺ + e v) + ρ Λ

with ``KKT = ∂R/∂y = [[M, -Jᵀ], [J, ρ I]]`` (ρ the damping). Differentiating twice (implicit-function theorem) and
contracting with ``μ`` through the adjoint ``[ψ; φ] = KKT⁻ᵀ [μ; 0]``::

    μᵀ D²a[δ, δ] = -ψᵀ D²R₁[(δ, δy), (δ, δy)] - φᵀ D²R₂[(δ, δy), (δ, δy)],     δy = (δa, δλ) = Dy δ

where ``ψ = (∂a/∂τ)ᵀ μ`` (the constrained inverse inertia ``M⁻¹ - G S⁻¹ Gᵀ`` applied to μ, ``G = M⁻¹Jᵀ``,
``S = J M⁻¹ Jᵀ + ρ I``) and ``φ = S⁻¹ Gᵀ μ = -(∂λ/∂τ)ᵀ μ`` (LOCAL). The second derivatives of the residual split
into (all taken one direction after the other as in ``rnea_second_order``; the symmetric part of the result is the
Hessian in the exponential coordinates of the state):

1. the inverse-dynamics curvature ``ψᵀ ∂²ID`` in (q, v, a) (``M(q) Δv`` for the impact, i.e. ID of a gravity-free
   copy at zero velocity), from IDSVA SO (``rnea_second_order_contraction``, seed 003 Algorithm 1; its ``(q, a)``
   block ``P[j, k] = Σ_i ψ_i ∂M_ij/∂q_k``), evaluated along ``δa = A_q δq + A_v δv + A_τ δτ`` exactly as
   ``aba_second_order`` does for ABA (seed 003 digest §3) with ``M⁻¹`` replaced by the constrained inverse;
2. the curvature of the contact forces' generalized force ``ψᵀ ∂²(Jᵀλ)/∂q²`` at fixed λ, and the mixed terms
   ``δλᵀ ∂(J ψ)/∂q δq`` and ``δaᵀ ∂(Jᵀφ)/∂q δq`` (the first derivatives of J in the couplings with δλ, δa);
3. the curvature of the contact acceleration ``φᵀ ∂²C/∂(q, v)²`` at fixed ``a`` (``φᵀ ∂²(J (v⁺ + e v))/∂q²`` for
   the impact): the Jacobian's ``∂²(J a)/∂q²``, the drift ``γ = J̇ v`` (6d: the derivative of the LOCAL twist; 3d
   adds the classical term ``ω × v``), and the Baumgarte terms ``Kv v_c`` and ``Kp e_c``.

Terms 2 and 3 depend only on the kinematic chain of each contact frame and are computed here in closed form
(own derivation, validated by finite differences): with ``c_j`` the LOCAL 6D Jacobian columns of the chain's dofs
(its motion subspaces seen from the contact frame) and ``j ≺ k`` meaning "dof j moves dof k's body" (j before k on
the chain; the six base dofs of a floating base precede the joints but not each other), every term is a scalar
``f·(...)`` built from spatial cross products of the ``c_j`` and a LOCAL wrench ``f`` fixed in the contact
frame, and its derivative in ``q_l`` is minus the variation the columns before l would have if they moved with the
rest (``∂_l c_k = [k ≺ l] c_k × c_l``), because the whole expression is invariant under a common rigid motion.
For example ``∂(J w)/∂q_k = V_k × c_k`` with ``V_k = Σ_{j≺k} w_j c_j``, and ``λᵀ ∂²(J ψ)/∂q_k ∂q_l =
λ·((V_a × c_a) × c_b)`` with a the earlier of k, l. The drift is ``γ = Σ_{j≺k} v_j v_k c_j × c_k``; its
second derivatives use prefix sums along the chain (O(L²) per contact for a chain of L dofs). LOCAL quantities do
not depend on the base pose, so along the base dofs only the position error ``e_c`` has q-derivatives.

Kept: every term above, so the contraction is exact, except one: for a 6d contact with a position target
(``Kp e_c``, ``e_c = log6(T⁻¹ oMf)``) the derivative of ``Jlog6 = Jr(e_c)⁻¹`` itself,
``Kp φᵀ DJlog6(e_c)[δe] Jlog6 J δq``, is dropped. It is O(Kp |e_c|): zero when the foot is at its target,
about 0.7 % of the Hessian with targets 5 cm / 3° off the feet (the test's). 3d position errors are kept exactly.

The IDSVA SO terms cannot take the contact forces as external wrenches (``rnea_second_order`` has no ``fext``),
which is why term 2 is computed on the contact chains instead; the forward kinematics of the chains and all of
terms 2-3 run in one compiled call for a whole trajectory. Contacts with ``reference="local_world_aligned"`` are
brought to LOCAL inside the kernel (``λ_l = Rᵀ λ_w``, ``dλ_l = Rᵀ dλ_w + [λ_l]× J_ang dq``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics._checks import base_poses, checked_real, checked_state, checked_vector, require_finite
from lietraj.dynamics._spatial import act_inv_motion, add, cross, cross_motion, dot, load3, load9, mm, mtv, mv, scale, \
    sub
from lietraj.dynamics.algorithms.aba_second_order import ForwardDynamicsHessian
from lietraj.dynamics.contacts.contact_dynamics import (
    CF_KP,
    CF_KV,
    CF_P,
    CF_R,
    CF_TP,
    CF_TR,
    CI_BODY,
    CI_DIM,
    CI_REFERENCE,
    CI_TARGET,
    Contact,
    contact_tuple,
    pack_contacts,
)
from lietraj.dynamics.contacts.contact_dynamics_derivatives import ContactDynamicsDerivatives, contact_derivatives
from lietraj.dynamics.contacts.impulse_dynamics import _impact, _in_references, impulse_derivatives, impulse_inputs, no_gravity
from lietraj.dynamics.kinematics.kinematics import LOCAL_WORLD_ALIGNED, PLACEMENT, W_COLS, W_P, W_R, forward_kinematics_core, \
    world_motion_subspace
from lietraj.dynamics.model.model import JOINT_FREE, ModelArrays, RobotModel
from lietraj.dynamics.model.workspace import Workspace, workspace_for
from lietraj.dynamics.algorithms.rnea_second_order import rnea_second_order_contraction
from lietraj.dynamics.lie.se3 import between, jlog6
from lietraj.dynamics.lie.so3 import log3
from lietraj.dynamics.lie.state import State, Trajectory


# Chain work-array columns, one row per chain position (and one more for the running sums' totals): the LOCAL
# column c, ∂(J ψ)/∂q and ∂(J w)/∂q columns, the prefix V of Σ v_j c_j over the dofs before (zero for a base dof),
# the running sum S = Σ_{j<p} v_j c_j, g = V × c = ∂(J v)/∂q, and the running sum of v_j g_j.
_C, _BPSI, _BW, _VP, _SV, _G, _GC, _CHAIN_COLS = 0, 6, 12, 18, 24, 30, 36, 42
_ZERO3 = (0.0, 0.0, 0.0)
_ZERO6 = (_ZERO3, _ZERO3)


class ContactCurvatureWork(NamedTuple):
    """Work arrays of the curvature terms: forward kinematics' (nb, W_COLS), the chain columns (nv + 1,
    _CHAIN_COLS) and the chain position of each dof (nv + 1,) int64."""

    kinematics: np.ndarray
    chain: np.ndarray
    chain_index: np.ndarray


def contact_curvature_work(model: RobotModel) -> ContactCurvatureWork:
    nv = model.nv
    return ContactCurvatureWork(np.zeros((model.nb, W_COLS)), np.zeros((nv + 1, _CHAIN_COLS)),
                                np.zeros(nv + 1, dtype=np.int64))


@helper
def _ld(A, p, o):
    return (A[p, o], A[p, o + 1], A[p, o + 2]), (A[p, o + 3], A[p, o + 4], A[p, o + 5])


@helper
def _st(A, p, o, x):
    A[p, o], A[p, o + 1], A[p, o + 2] = x[0][0], x[0][1], x[0][2]
    A[p, o + 3], A[p, o + 4], A[p, o + 5] = x[1][0], x[1][1], x[1][2]


@helper
def _x(a, b):
    """The spatial motion cross product a × b of two (linear, angular) pairs."""
    return cross_motion(a[0], a[1], b[0], b[1])


@helper
def _dot6(f, x):
    return dot(f[0], x[0]) + dot(f[1], x[1])


@helper
def _sub6(a, b):
    return sub(a[0], b[0]), sub(a[1], b[1])


@helper
def _axpy6(y, k, x):
    return add(y[0], scale(x[0], k)), add(y[1], scale(x[1], k))


@helper
def _q2(f, x, y):
    """The symmetric bilinear form of the 3d classical term f·(ω × v_lin), on twists x and y."""
    return dot(f, add(cross(x[1], y[0]), cross(y[1], x[0])))


@helper
def _local_wrench(values, r, six, world, oR):
    """The LOCAL wrench of a contact from its rows r.. (in its reference), zero torque for 3d."""
    f = (values[r], values[r + 1], values[r + 2])
    n = (values[r + 3], values[r + 4], values[r + 5]) if six else _ZERO3
    if world:
        f, n = mtv(oR, f), mtv(oR, n)
    return f, n


@helper
def _jlog_transpose_times(TR, Tp, oR, op, f):
    """Jlog6(e)ᵀ f for e = log6(T⁻¹ oMf): Jlog6 = [[A, C A], [0, A]] (``se3.jlog6``)."""
    R, p = between(TR, Tp, oR, op)
    A, C = jlog6(log3(R), p)
    return mtv(A, f[0]), mtv(A, add(mtv(C, f[0]), f[1]))


@helper
def _chain(mi, mf, W, body, oR, op, CW, idx):
    """The dofs of body's support chain in increasing order into idx, their LOCAL columns into CW; returns L."""
    L = 0
    j = body
    while j >= 0:
        L += 6 if mi[j, 1] == JOINT_FREE else 1
        j = mi[j, 0]
    p = L
    j = body
    while j >= 0:
        nd = 6 if mi[j, 1] == JOINT_FREE else 1
        p -= nd
        for col in range(nd):
            sv, sw = world_motion_subspace(mi, mf, W, j, col)
            _st(CW, p + col, _C, act_inv_motion(oR, op, sv, sw))
            idx[p + col] = mi[j, 2] + col
        j = mi[j, 0]
    return L


@helper
def _prefixes(CW, idx, L, nb0, psi, a, v, Kv):
    """The chain's prefix sums (work-array layout at _C), with w = a + Kv v."""
    s_psi, s_w, s_v, s_g = _ZERO6, _ZERO6, _ZERO6, _ZERO6
    for p in range(L):
        c, k = _ld(CW, p, _C), idx[p]
        joint = p >= nb0
        _st(CW, p, _BPSI, _x(s_psi, c) if joint else _ZERO6)
        _st(CW, p, _BW, _x(s_w, c) if joint else _ZERO6)
        vp = s_v if joint else _ZERO6
        g = _x(vp, c)
        _st(CW, p, _VP, vp)
        _st(CW, p, _SV, s_v)
        _st(CW, p, _G, g)
        _st(CW, p, _GC, s_g)
        s_psi, s_w = _axpy6(s_psi, psi[k], c), _axpy6(s_w, a[k] + Kv * v[k], c)
        s_v, s_g = _axpy6(s_v, v[k], c), _axpy6(s_g, v[k], g)
    _st(CW, L, _SV, s_v)
    _st(CW, L, _GC, s_g)


@helper
def _force_terms(CW, idx, L, nb0, lambda_c, phi, r, d, world, oR, DLQ, DLV, DLT, NQQ, XQV, XQT, BPHI):
    """Terms 2 (and the Jacobian part of 3) of the module docstring: λ·∂²(Jψ) - φ·∂²(Jw) into NQQ (sequential),
    2 (∂(Jψ)/∂q)ᵀ dλ/dx into NQQ, XQV, XQT and ∂(Jᵀφ)/∂q into BPHI. LOCAL quantities do not depend on the base
    pose, so their q-derivatives along the base dofs (positions < nb0) are zero."""
    nv = NQQ.shape[0]
    for a in range(L):
        ia, ca = idx[a], _ld(CW, a, _C)
        for b in range(max(a + 1, nb0), L):
            BPHI[ia, idx[b]] += _dot6(phi, _x(ca, _ld(CW, b, _C)))
    for a in range(nb0, L):
        ia = idx[a]
        bpsi, bw = _ld(CW, a, _BPSI), _ld(CW, a, _BW)
        for b in range(a, L):
            cb = _ld(CW, b, _C)
            t = _dot6(lambda_c, _x(bpsi, cb)) - _dot6(phi, _x(bw, cb))
            NQQ[ia, idx[b]] += t
            if b != a:
                NQQ[idx[b], ia] += t
        # ∂(J ψ)/∂q column a, per block of three rows, against the force derivatives in the contact's reference.
        for blk in range(d // 3):
            bb = bpsi[blk]
            rb = mv(oR, bb) if world else bb
            o = r + 3 * blk
            for col in range(nv):
                NQQ[ia, col] += 2.0 * (rb[0] * DLQ[o, col] + rb[1] * DLQ[o + 1, col] + rb[2] * DLQ[o + 2, col])
                XQV[ia, col] += rb[0] * DLV[o, col] + rb[1] * DLV[o + 1, col] + rb[2] * DLV[o + 2, col]
            for col in range(XQT.shape[1]):
                XQT[ia, col] += rb[0] * DLT[o, col] + rb[1] * DLT[o + 1, col] + rb[2] * DLT[o + 2, col]
            if world:  # dλ_l/dq = Rᵀ dλ_w/dq + [λ_l]x J_ang
                lb = lambda_c[blk]
                for q in range(L):
                    NQQ[ia, idx[q]] += 2.0 * dot(bb, cross(lb, _ld(CW, q, _C)[1]))


@helper
def _drift_terms(CW, idx, L, nb0, phi, six, Kv, NQQ, XQV, XVV):
    """Term 3 of the module docstring without the position error: -φ·∂²(γ + Kv J v) in (q, v), and for 3d the
    classical term -φ·∂²(ω × v_lin) (NQQ sequential, q_l first). These LOCAL quantities do not depend on the base
    pose: the q indices run over the joints only."""
    u = _ld(CW, L, _SV)
    f = phi[0]
    for l in range(L):  # (v_l, v_m)
        cl, il = _ld(CW, l, _C), idx[l]
        for m in range(l, L):
            cm = _ld(CW, m, _C)
            t = _dot6(phi, _x(cl, cm)) if (l < m and m >= nb0) else 0.0
            if not six:
                t += _q2(f, cl, cm)
            XVV[il, idx[m]] -= t
            if m != l:
                XVV[idx[m], il] -= t
    for l in range(nb0, L):
        cl, il = _ld(CW, l, _C), idx[l]
        vl, gl, gcl = _ld(CW, l, _VP), _ld(CW, l, _G), _ld(CW, l, _GC)
        rl = _sub6(u, vl)
        for m in range(L):  # (q_l, v_m)
            cm = _ld(CW, m, _C)
            lo = max(m + 1, nb0)
            a_ml = _sub6(_ld(CW, l, _SV), _ld(CW, lo, _SV)) if l > lo else _ZERO6
            t = -_dot6(phi, _x(cm, _x(cl, a_ml))) - _dot6(phi, _x(_x(cl, _ld(CW, min(m, l), _VP)), cm))
            if m < l:
                dc = _x(cm, cl)  # ∂_l c_m
                t += Kv * _dot6(phi, dc) + _dot6(phi, _x(dc, _sub6(u, _ld(CW, lo, _SV)))) + _dot6(
                    phi, _x(_ld(CW, m, _VP), dc))
                if not six:
                    t += _q2(f, u, dc)
            if not six:
                t += _q2(f, gl, cm)
            XQV[il, idx[m]] -= t
        for m in range(nb0, L):  # (q_l, q_m), q_l first
            cm, gm, vm = _ld(CW, m, _C), _ld(CW, m, _G), _ld(CW, m, _VP)
            vmin = vm if m < l else vl
            t = _dot6(phi, _x(cl, _x(cm, _ld(CW, min(l, m), _GC)))) + _dot6(phi, _x(_x(cl, _x(cm, vmin)), rl))
            if m < l:
                t -= _dot6(phi, _x(cl, _x(gm, _sub6(vl, vm))))
            elif l < m:
                cmcl = _x(cm, cl)
                t += (_dot6(phi, _x(_x(cl, vl), _x(cm, _sub6(vm, vl)))) + _dot6(phi, _x(cmcl, gcl))
                      + _dot6(phi, _x(_x(cmcl, vl), rl)))
            if not six:
                dg = _sub6(_ZERO6, _x(cm, gl)) if l < m else _x(gm, cl)  # ∂_m g_l
                t += _q2(f, gm, gl) + _q2(f, u, dg)
            NQQ[il, idx[m]] -= t


@helper
def _position_terms(CW, idx, L, nb0, phi, six, Kp, TR, Tp, oR, op, NQQ):
    """-Kp φ·∂²e_c/∂q² (sequential, q_n first): exact for 3d (e = Rᵀ(p - p_target), de = dv + e x dw), without
    the derivative of Jlog6 for 6d (module docstring)."""
    if six:
        ft = _jlog_transpose_times(TR, Tp, oR, op, phi)
        for n in range(L):
            cn = _ld(CW, n, _C)
            for l in range(max(n + 1, nb0), L):
                NQQ[idx[n], idx[l]] -= Kp * _dot6(ft, _x(cn, _ld(CW, l, _C)))
        return
    e = mtv(oR, sub(op, Tp))
    f = phi[0]
    for n in range(L):
        cn = _ld(CW, n, _C)
        for l in range(L):
            cl = _ld(CW, l, _C)
            de = add(cl[0], cross(e, cl[1]))
            t = dot(f, cross(de, cn[1]))
            if n < l and l >= nb0:
                dc = _x(cn, cl)
                t += dot(f, add(dc[0], cross(e, dc[1])))
            NQQ[idx[n], idx[l]] -= Kp * t


@kernel
def contact_curvature_core(mi, mf, CI, CF, drift, H, s, v, a, psi, lambda_c, phi, DLQ, DLV, DLT, W, CW, idx, NQQ, XQV,
                           XVV, XQT, BPHI):
    """Terms 2 and 3 of the module docstring at one checked state, given ``a`` (the acceleration, or v⁺ + e v for
    an impact), ``psi``, the forces ``lambda_c``, ``phi`` and the force derivatives DLQ, DLV, DLT (nc, nv | nt) in the
    contacts' references: the symmetric (q, q) block into NQQ, (q, v) into XQV, (v, v) into XVV, (q, τ) into XQT
    and ``∂(Jᵀφ)/∂q`` (rows: the acceleration's index, columns q) into BPHI. ``drift`` False (the impact) leaves
    out the drift and Baumgarte terms."""
    nv = NQQ.shape[0]
    NQQ[:, :] = 0.0
    XQV[:, :] = 0.0
    XVV[:, :] = 0.0
    XQT[:, :] = 0.0
    BPHI[:, :] = 0.0
    last = -1
    for c in range(CI.shape[0]):
        last = max(last, CI[c, CI_BODY])
    if last >= 0:
        forward_kinematics_core(mi, mf, H, s, v, v, PLACEMENT, last, W)
    nb0 = 6 if mi[0, 1] == JOINT_FREE else 0  # chain positions of the base dofs
    r = 0
    for c in range(CI.shape[0]):
        body, d = CI[c, CI_BODY], CI[c, CI_DIM]
        if body < 0:  # a frame fixed in the world: its rows are zero
            r += d
            continue
        six, world = d == 6, CI[c, CI_REFERENCE] == LOCAL_WORLD_ALIGNED
        bR = load9(W, body, W_R)
        oR = mm(bR, load9(CF, c, CF_R))
        op = add(load3(W, body, W_P), mv(bR, load3(CF, c, CF_P)))
        L = _chain(mi, mf, W, body, oR, op, CW, idx)
        Kp, Kv = CF[c, CF_KP], CF[c, CF_KV]
        lam_l = _local_wrench(lambda_c, r, six, world, oR)
        phi_l = _local_wrench(phi, r, six, world, oR)
        _prefixes(CW, idx, L, nb0, psi, a, v, Kv if drift else 0.0)
        _force_terms(CW, idx, L, nb0, lam_l, phi_l, r, d, world, oR, DLQ, DLV, DLT, NQQ, XQV, XQT, BPHI)
        if drift:
            _drift_terms(CW, idx, L, nb0, phi_l, six, Kv, NQQ, XQV, XVV)
            if CI[c, CI_TARGET] != 0 and Kp != 0.0:
                _position_terms(CW, idx, L, nb0, phi_l, six, Kp, load9(CF, c, CF_TR), load3(CF, c, CF_TP), oR, op,
                                NQQ)
        r += d
    for i in range(nv):
        for j in range(i):
            t = 0.5 * (NQQ[i, j] + NQQ[j, i])
            NQQ[i, j] = t
            NQQ[j, i] = t


@kernel
def contact_curvature_batch_kernel(model, CI, CF, drift, H, S, V, A, PSI, LAM, PHI, DLQ, DLV, DLT, work, NQQ, XQV, XVV,
                                   XQT, BPHI):
    """contact_curvature_core at every knot (states already checked by the first-order pass)."""
    m, w = ModelArrays(*model), ContactCurvatureWork(*work)
    for k in range(S.shape[0]):
        contact_curvature_core(m.joints, m.bodies, CI, CF, drift, H[k] if m.floating else H[0], S[k], V[k], A[k],
                               PSI[k], LAM[k], PHI[k], DLQ[k], DLV[k], DLT[k], w.kinematics, w.chain, w.chain_index,
                               NQQ[k], XQV[k], XVV[k], XQT[k], BPHI[k])


@dataclass(eq=False)
class ImpulseDynamicsHessian:
    """``Σ_i μ_i ∂²v⁺_i`` in blocks (nv, nv), with a leading N for a trajectory: ``qq`` (taken one direction after
    the other; its symmetric part is the Hessian in exponential coordinates) and ``qv``; the ``vv`` block is zero
    (``v⁺`` is linear in ``v``)."""

    qq: np.ndarray
    qv: np.ndarray


def _knots(x: State | Trajectory) -> Trajectory:
    return Trajectory.repeat(x, 1) if type(x) is State else x


def _curvature(model: RobotModel, X: Trajectory, contacts: tuple[Contact, ...], drift: bool, A, PSI, LAM, PHI, DLQ,
               DLV, DLT, what: str, workspace: Workspace) -> tuple[np.ndarray, ...]:
    """Terms 2-3 of the module docstring at every knot: (XQQ, XQV, XVV, XQT, BPHI)."""
    packed = pack_contacts(model, contacts, what)
    N, nv = len(X), model.nv
    out = tuple(np.empty((N, nv, nv)) for _ in range(3)) + (np.empty((N, nv, DLT.shape[2])), np.empty((N, nv, nv)))
    c = np.ascontiguousarray
    contact_curvature_batch_kernel(model.packed, packed.CI, packed.CF, drift, base_poses(X), X.s, X.v, c(A), c(PSI),
                                   c(LAM), c(PHI), c(DLQ), c(DLV), c(DLT), workspace.work(contact_curvature_work), *out)
    return out


def _single(result, single: bool):
    if not single:
        return result
    return type(result)(*(getattr(result, f)[0] for f in result.__dataclass_fields__))


def contact_hessian_contraction(model: RobotModel, x: State | Trajectory, tau, contacts: Sequence[Contact], mu,
                                damping: float = 0.0, derivatives: ContactDynamicsDerivatives | None = None,
                                workspace: Workspace | None = None,
                                other: Workspace | None = None) -> ForwardDynamicsHessian:
    """``Σ_i mu_i ∂²a_i / ∂(q, v, τ)²`` for ``a = contact_dynamics(model, x, tau, contacts, damping)``, in the
    blocks of ``aba_hessian_contraction`` (``qq`` taken one direction after the other, ``qv``, ``vv``, ``qtau``; the
    ``vτ`` and ``ττ`` blocks are zero, ``a`` being affine in ``τ``). Exact but for the Jlog6 curvature of 6d
    position targets (module docstring).

    ``x`` a Trajectory takes ``tau`` and ``mu`` as (N, nv) and returns blocks with a leading N. ``derivatives``, the
    ``contact_dynamics_derivatives`` of the same arguments if the caller has them, saves computing them again.
    Raises ValueError for bad shapes or NaN (as ``contact_dynamics``) and for a bad ``mu``. ``workspace``: a
    ``Workspace(model)`` whose work arrays are reused (without one, each call allocates its own); ``other``: the
    workspace of a second thread, which computes half of the knots of the IDSVA SO pass in the same call
    (``_jit.split_kernel``).
    """
    what = "contact_hessian_contraction"
    x = checked_state(model, x, what)
    workspace = workspace_for(model, workspace, what)
    contacts, single = contact_tuple(model, contacts, what), type(x) is State
    N = None if single else len(x)
    damping = checked_real(damping, model, what, "damping")
    MU = checked_vector(mu, model.nv, N, model, what, "mu")
    if derivatives is None:
        tau = checked_vector(tau, model.nv, N, model, what, "tau")
        require_finite(model, what, x, tau=tau, mu=MU)
        derivatives = contact_derivatives(model, x, tau, contacts, damping, None, None, workspace, what)
    elif not isinstance(derivatives, ContactDynamicsDerivatives):
        raise TypeError(f"{what}({model.name}): derivatives must be a ContactDynamicsDerivatives (of "
                        f"contact_dynamics_derivatives), got {type(derivatives).__name__}")
    else:
        require_finite(model, what, x, mu=MU)
    MU = MU.reshape(-1, model.nv)
    d = derivatives
    X = _knots(x)
    nv = model.nv
    blocks = [np.asarray(b).reshape((len(X),) + np.shape(b)[-2:]) for b in (d.da_dq, d.da_dv, d.da_dtau, d.df_dq,
                                                                            d.df_dv, d.df_dtau)]
    Aq, Av, At, Fq, Fv, Ft = blocks
    a, lambda_c = np.asarray(d.a).reshape(-1, nv), np.asarray(d.forces).reshape(len(X), -1)
    PSI = (MU[:, None, :] @ At)[:, 0]
    PHI = -(Ft @ MU[:, :, None])[:, :, 0]
    h = rnea_second_order_contraction(model, X, a, PSI, workspace=workspace, other=other)
    XQQ, XQV, XVV, XQT, BPHI = _curvature(model, X, contacts, True, a, PSI, lambda_c, PHI, Fq, Fv, Ft, what, workspace)
    Pt = np.swapaxes(h.M_q + BPHI, -1, -2)
    PtA = Pt @ Aq
    result = ForwardDynamicsHessian(XQQ - h.qq - PtA - np.swapaxes(PtA, -1, -2), XQV - h.qv - Pt @ Av, XVV - h.vv,
                                    XQT - Pt @ At)
    return _single(result, single)


def impulse_hessian_contraction(model: RobotModel, x: State | Trajectory, contacts: Sequence[Contact], mu,
                                restitution: float = 0.0, damping: float = 0.0,
                                workspace: Workspace | None = None) -> ImpulseDynamicsHessian:
    """``Σ_i mu_i ∂²v⁺_i / ∂(q, v)²`` for ``v⁺ = impulse_dynamics(model, x, contacts, restitution, damping)``,
    exact (module docstring: no drift, no Baumgarte terms at an impact). ``x`` a Trajectory takes ``mu`` (N, nv).
    Raises ValueError as ``impulse_dynamics`` does, and for a bad ``mu``. ``workspace``: as for
    ``contact_hessian_contraction``."""
    what = "impulse_hessian_contraction"
    x, contacts, restitution, damping, ids = impulse_inputs(model, x, contacts, restitution, damping, what)
    workspace = workspace_for(model, workspace, what)
    single = type(x) is State
    MU = checked_vector(mu, model.nv, None if single else len(x), model, what, "mu")
    require_finite(model, what, x, mu=MU)
    MU = MU.reshape(-1, model.nv)
    X = _knots(x)
    N, nv = len(X), model.nv
    d = impulse_derivatives(model, X, contacts, restitution, damping, workspace, what, ids)
    if not contacts:
        return _single(ImpulseDynamicsHessian(np.zeros((N, nv, nv)), np.zeros((N, nv, nv))), single)
    s = _impact(model, X, contacts, restitution, damping, what, workspace, ids)
    phi = np.linalg.solve(s.S, np.swapaxes(s.MinvJt, -1, -2) @ MU[:, :, None])  # S⁻¹ Gᵀ μ, LOCAL
    PSI = (s.Minv @ MU[:, :, None] - s.MinvJt @ phi)[:, :, 0]
    PHI = _in_references(contacts, s.poses, phi)[:, :, 0]
    free, free_workspace = no_gravity(model, workspace)
    h = rnea_second_order_contraction(free, Trajectory(X.H, X.s, np.zeros_like(X.v)), d.v_plus - X.v, PSI,
                                      workspace=free_workspace)
    W = d.v_plus + restitution * X.v
    XQQ, XQV, _, _, BPHI = _curvature(model, X, contacts, False, W, PSI, d.impulses, PHI, d.dimpulse_dq,
                                      d.dimpulse_dv, np.zeros((N, d.impulses.shape[1], 0)), what, workspace)
    P = np.swapaxes(h.M_q, -1, -2)
    Pt = P + np.swapaxes(BPHI, -1, -2)
    PtV = Pt @ d.dvplus_dq
    result = ImpulseDynamicsHessian(XQQ - h.qq - PtV - np.swapaxes(PtV, -1, -2),
                                    XQV - Pt @ d.dvplus_dv + P - restitution * np.swapaxes(BPHI, -1, -2))
    return _single(result, single)
