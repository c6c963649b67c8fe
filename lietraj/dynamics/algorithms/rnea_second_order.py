"""Second-order derivatives of inverse dynamics by IDSVA SO (seed 003 Algorithm 1), O(N d^2).

Returns the tensors ``T[out, in1, in2]`` (README, Conventions: differentiate with respect to ``in1`` first, then ``in2``)::

    d2tau_dq2[i, j, k]  = d2 tau_i / dq_j dq_k       d2tau_dv2[i, j, k] = d2 tau_i / dv_j dv_k
    d2tau_dqdv[i, j, k] = d2 tau_i / dq_j dv_k       dM_dq[i, j, k]     = dM_ij / dq_k

or, for DDP, only their contractions with a covector ``mu`` over the first index (``rnea_second_order_contraction``),
computed by the same recursions summed over the output index as they go (``idsva_so_contraction_core``): O(N d)
pairs of dofs instead of the tensors' O(N d^2) triples, no ``nv^3`` tensor formed (``bench_second_order.py``, a
state a call: solo12 46 -> 26 us, Talos 163 -> 68 us against the triples' sums it replaced).

Derivatives in ``q`` are Lie derivatives along the joint motion subspaces (for the free base, body-twist
perturbations ``H exp(z)``), taken one direction after the other, so ``d2tau_dq2`` is not symmetric in its last
two indices inside the base-rotation block: there ``T[:, j, k] - T[:, k, j] = dtau/dq_w . (e_k x e_j)`` (seed 003
digest §1.5). ``d2tau_dv2`` is symmetric in them, ``dM_dq`` in its first two.

The listing is transcribed with the digest's corrections (§2.4, P1-P3: the loop index of line 2, ``f^C`` in line
22, ``I^C (s x)`` in line 18; ``B`` without the ½ of eq. 6) and expressed, as ``rnea_derivatives`` is, in the base
frame instead of the ground frame (the same scalars), linear first, with ``x`` / ``x*`` Featherstone's motion and
force cross products and ``fbar(f) m = m x* f``::

    B(x; I) = crf(x) I - I crm(x) + fbar(I x),     crf(x) = -crm(x)^T

For a joint dof ``(i, p)`` with column ``s`` the listing's 6x6 temporaries (lines 15-24) are kept as three matrices
and four force vectors, since ``I crm(s) = -(crf(s) I)^T`` for a symmetric ``I`` and every ``fbar`` term is a
cross product::

    X = crf(s) I^C,   A1 = X + X^T (18),   A3 = B(Psd; I^C) + crf(s) B^C - B^C crm(s) (16, 20)
    A0 = fbar(a0), a0 = I^C s (17);   A4: a4 = B^C^T s (21);   A5: a5 = B^C Psd + I^C Psdd + s x* f^C (22)
    A7: a7 = B^C s + I^C (Psd + Sd) (24);   B_s = A1 + A0 (15),  A2 = A0 - A1 (19),  A6 = X + A0 (23)

The floating base contributes most of the index triples (every chain ends there: 95% of them on hyq). Its
columns are the unit vectors of the base frame with ``Psd = 0``, ``Psdd = a_g x e`` and ``Sd = nu x e``, so its
inner products are components of vectors computed once per ``(i, p, j, t)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import prange

from lietraj._jit import helper, kernel, split_call, split_kernel
from lietraj.dynamics._checks import BAD_A, BAD_N, NO_FEXT, NOT_FINITE, OK, base_pose, base_poses, check_dynamics_inputs, \
    check_vector, checked_state, checked_vector, first_failure, raise_for_status, result_arrays
from lietraj.dynamics._spatial import add, cross, cross_force, cross_motion, mtv
from lietraj.dynamics.algorithms.crba import body_in_base_frame, rigid_inertia_times
from lietraj.dynamics.model.model import JOINT_FREE, MF_MASS, ModelArrays, RobotModel
from lietraj.dynamics.algorithms.mimic import expand_velocity, expanded_workspace, reduce_matrix
from lietraj.dynamics.model.workspace import Workspace, workspace_for
from lietraj.dynamics.algorithms.rnea_derivatives import joint_kinematics, unit_motion
from lietraj.dynamics.lie.state import State, Trajectory


# Per-dof vectors: S, Psd (= Psi-dot), Psdd, Sd (= S-dot).
_S, _PSD, _PSDD, _SD = 0, 1, 2, 3
# Per-(i, p) 6x6 matrices, and scratch.
_X, _A1, _A3, _Y = 0, 1, 2, 3
_ZERO3 = (0.0, 0.0, 0.0)
_NO_TENSOR = np.zeros((0, 0, 0))
_NO_MATRIX = np.zeros((0, 0))
BAD_MU = 100


@helper
def _load6(X, i):
    return (X[i, 0], X[i, 1], X[i, 2], X[i, 3], X[i, 4], X[i, 5])


@helper
def _store6(X, i, x, y):
    X[i, 0], X[i, 1], X[i, 2], X[i, 3], X[i, 4], X[i, 5] = x[0], x[1], x[2], y[0], y[1], y[2]


@helper
def _cat(x, y):
    return (x[0], x[1], x[2], y[0], y[1], y[2])


@helper
def _add6(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4], a[5] + b[5])


@helper
def _sub6(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2], a[3] - b[3], a[4] - b[4], a[5] - b[5])


@helper
def _scale6(c, a):
    return (c * a[0], c * a[1], c * a[2], c * a[3], c * a[4], c * a[5])


@helper
def _dot6(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5]


@helper
def _mv6(A, x):
    return (A[0, 0] * x[0] + A[0, 1] * x[1] + A[0, 2] * x[2] + A[0, 3] * x[3] + A[0, 4] * x[4] + A[0, 5] * x[5],
            A[1, 0] * x[0] + A[1, 1] * x[1] + A[1, 2] * x[2] + A[1, 3] * x[3] + A[1, 4] * x[4] + A[1, 5] * x[5],
            A[2, 0] * x[0] + A[2, 1] * x[1] + A[2, 2] * x[2] + A[2, 3] * x[3] + A[2, 4] * x[4] + A[2, 5] * x[5],
            A[3, 0] * x[0] + A[3, 1] * x[1] + A[3, 2] * x[2] + A[3, 3] * x[3] + A[3, 4] * x[4] + A[3, 5] * x[5],
            A[4, 0] * x[0] + A[4, 1] * x[1] + A[4, 2] * x[2] + A[4, 3] * x[3] + A[4, 4] * x[4] + A[4, 5] * x[5],
            A[5, 0] * x[0] + A[5, 1] * x[1] + A[5, 2] * x[2] + A[5, 3] * x[3] + A[5, 4] * x[4] + A[5, 5] * x[5])


@helper
def _mtv6(A, x):
    return (A[0, 0] * x[0] + A[1, 0] * x[1] + A[2, 0] * x[2] + A[3, 0] * x[3] + A[4, 0] * x[4] + A[5, 0] * x[5],
            A[0, 1] * x[0] + A[1, 1] * x[1] + A[2, 1] * x[2] + A[3, 1] * x[3] + A[4, 1] * x[4] + A[5, 1] * x[5],
            A[0, 2] * x[0] + A[1, 2] * x[1] + A[2, 2] * x[2] + A[3, 2] * x[3] + A[4, 2] * x[4] + A[5, 2] * x[5],
            A[0, 3] * x[0] + A[1, 3] * x[1] + A[2, 3] * x[2] + A[3, 3] * x[3] + A[4, 3] * x[4] + A[5, 3] * x[5],
            A[0, 4] * x[0] + A[1, 4] * x[1] + A[2, 4] * x[2] + A[3, 4] * x[3] + A[4, 4] * x[4] + A[5, 4] * x[5],
            A[0, 5] * x[0] + A[1, 5] * x[1] + A[2, 5] * x[2] + A[3, 5] * x[3] + A[4, 5] * x[4] + A[5, 5] * x[5])


@helper
def _crf6(m, f):
    """m x* f = fbar(f) m."""
    a, b = cross_force((m[0], m[1], m[2]), (m[3], m[4], m[5]), (f[0], f[1], f[2]), (f[3], f[4], f[5]))
    return _cat(a, b)


@helper
def _crf_columns(x, A, transposed, out):
    """out = crf(x) A, or crf(x) A^T: the columns [w x a; v x a + w x b] of (a; b) = A's columns."""
    v, w = (x[0], x[1], x[2]), (x[3], x[4], x[5])
    for c in range(6):
        if transposed:
            a, b = (A[c, 0], A[c, 1], A[c, 2]), (A[c, 3], A[c, 4], A[c, 5])
        else:
            a, b = (A[0, c], A[1, c], A[2, c]), (A[3, c], A[4, c], A[5, c])
        top, bottom = cross_force(v, w, a, b)
        out[0, c], out[1, c], out[2, c], out[3, c], out[4, c], out[5, c] = (top[0], top[1], top[2], bottom[0],
                                                                            bottom[1], bottom[2])


@helper
def _add_fbar(f, out):
    """out += fbar(f) = [0, -[f]x; -[f]x, -[n]x] (antisymmetric)."""
    f0, f1, f2, n0, n1, n2 = f
    out[0, 4] += f2
    out[0, 5] -= f1
    out[1, 5] += f0
    out[1, 3] -= f2
    out[2, 3] += f1
    out[2, 4] -= f0
    out[3, 1] += f2
    out[3, 2] -= f1
    out[4, 2] += f0
    out[4, 0] -= f2
    out[5, 0] += f1
    out[5, 1] -= f0
    out[3, 4] += n2
    out[3, 5] -= n1
    out[4, 5] += n0
    out[4, 3] -= n2
    out[5, 3] += n1
    out[5, 4] -= n0


@helper
def _coriolis(x, I, Y, out):
    """out = B(x; I) = Y + Y^T + fbar(I x) with Y = crf(x) I (I symmetric); Y is scratch."""
    _crf_columns(x, I, False, Y)
    for r in range(6):
        for c in range(6):
            out[r, c] = Y[r, c] + Y[c, r]
    _add_fbar(_mv6(I, x), out)


@helper
def _emit(D2q, D2v, Dqv, dM, ip, jt, kr, j_ne_i, k_ne_j,
          s1, s12, s9, s3, s4, s5, s6, s7, p1, p12, p9, p8, pp12, pp9, sd12, sd9):
    """Lines 42-66 of Algorithm 1 for the triple (ip, jt, kr), from the inner products of the u vectors with the
    columns of k (s = S, p = Psd, pp = Psdd, sd = Sd): u1 = A3^T s_t, u12 = A1 s_t, u9 = A0 s_t and u3..u8."""
    q2 = p8 + pp9
    D2q[ip, jt, kr] = q2                              # 44
    Dqv[ip, kr, jt] = p9 - p12
    if j_ne_i:
        e = p1 + pp12                                 # 46
        D2q[jt, kr, ip] = e
        D2q[jt, ip, kr] = e
        Dqv[jt, ip, kr] = s1 + sd12 + p12             # 47
        Dqv[jt, kr, ip] = p12 - p9                    # 48
        e = s12 - s9                                  # 49
        D2v[jt, kr, ip] = e
        D2v[jt, ip, kr] = e
        dM[kr, jt, ip] = s12                          # 50
        if k_ne_j:  # for k = j the iteration (kr, jt) stores the transposed entry
            dM[jt, kr, ip] = s12
    if k_ne_j:
        D2q[ip, kr, jt] = q2                          # 53
        D2q[kr, ip, jt] = s3
        e = s9 - s12                                  # 54
        D2v[ip, jt, kr] = e
        D2v[ip, kr, jt] = e
        Dqv[ip, jt, kr] = s5 + sd9 + p9               # 55
        Dqv[kr, jt, ip] = s6                          # 56
        dM[kr, ip, jt] = s9                           # 57
        dM[ip, kr, jt] = s9
        if j_ne_i:
            D2q[kr, jt, ip] = s3                      # 59
            Dqv[kr, ip, jt] = s7                      # 60
            e = s12 + s9                              # 61
            D2v[kr, ip, jt] = e
            D2v[kr, jt, ip] = e
        else:
            D2v[kr, jt, ip] = s4                      # 63
    else:
        D2v[ip, jt, kr] = -s12                        # 66


@helper
def _forward(mi, mf, g, H, s, v, a, Wp, V, Acc, IC, BC, FC, Dof, Y):
    """Lines 2-12 of Algorithm 1: per body its twist, acceleration, inertia ``I^C``, Coriolis matrix ``B^C`` and
    force ``f^C`` (not yet composite), per dof its four motion vectors. Returns whether the base floats, and the
    base-frame ``a_g`` and base twist ``nu``."""
    nb = mi.shape[0]
    floating = mi[0, 1] == JOINT_FREE
    if floating:
        R = (H[0, 0], H[0, 1], H[0, 2], H[1, 0], H[1, 1], H[1, 2], H[2, 0], H[2, 1], H[2, 2])
        ag = mtv(R, (-g[0], -g[1], -g[2]))
    else:
        ag = (-g[0], -g[1], -g[2])
    nu = (v[0], v[1], v[2], v[3], v[4], v[5]) if floating else (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    for i in range(nb):
        parent, jt, iv = mi[i, 0], mi[i, 1], mi[i, 2]
        h, Io, Sv, Sw = body_in_base_frame(mi, mf, i, s, Wp, 0)
        m = mf[i, MF_MASS]
        if parent >= 0:
            vl, wl = (V[parent, 0], V[parent, 1], V[parent, 2]), (V[parent, 3], V[parent, 4], V[parent, 5])
            al, bl = (Acc[parent, 0], Acc[parent, 1], Acc[parent, 2]), (Acc[parent, 3], Acc[parent, 4], Acc[parent, 5])
        else:
            vl, wl, al, bl = _ZERO3, _ZERO3, ag, _ZERO3
        if jt == JOINT_FREE:
            vi, wi = (v[0], v[1], v[2]), (v[3], v[4], v[5])
            ai, bi = add(ag, (a[0], a[1], a[2])), (a[3], a[4], a[5])
            for k in range(6):
                E, F = unit_motion(k)
                _store6(Dof[k], _S, E, F)
                _store6(Dof[k], _PSD, _ZERO3, _ZERO3)
                c, d = cross_motion(al, bl, E, F)
                _store6(Dof[k], _PSDD, c, d)
                c, d = cross_motion(vi, wi, E, F)
                _store6(Dof[k], _SD, c, d)
        else:
            vi, wi, ai, bi, pv, pw, qv, qw = joint_kinematics(vl, wl, al, bl, Sv, Sw, v[iv], a[iv])
            _store6(Dof[iv], _S, Sv, Sw)
            _store6(Dof[iv], _PSD, pv, pw)
            _store6(Dof[iv], _PSDD, qv, qw)
            _store6(Dof[iv], _SD, pv, pw)  # v_i x S = v_l x S for a 1-DoF joint
        _store6(V, i, vi, wi)
        _store6(Acc, i, ai, bi)
        Ii = IC[i]  # [[m E, -[h]x], [[h]x, I_o]]
        Ii[:, :] = 0.0
        Ii[0, 0] = Ii[1, 1] = Ii[2, 2] = m
        Ii[0, 4], Ii[0, 5], Ii[1, 5] = h[2], -h[1], h[0]
        Ii[1, 3], Ii[2, 3], Ii[2, 4] = -h[2], h[1], -h[0]
        Ii[4, 0], Ii[5, 0], Ii[5, 1] = h[2], -h[1], h[0]
        Ii[3, 1], Ii[3, 2], Ii[4, 2] = -h[2], h[1], -h[0]
        Ii[3, 3], Ii[4, 4], Ii[5, 5] = Io[0], Io[1], Io[2]
        Ii[3, 4] = Ii[4, 3] = Io[3]
        Ii[3, 5] = Ii[5, 3] = Io[4]
        Ii[4, 5] = Ii[5, 4] = Io[5]
        _coriolis(_cat(vi, wi), Ii, Y, BC[i])
        mom, L = rigid_inertia_times(m, h, Io, vi, wi)
        fa, na = rigid_inertia_times(m, h, Io, ai, bi)
        fb, nbias = cross_force(vi, wi, mom, L)
        _store6(FC, i, add(fa, fb), add(na, nbias))
    return floating, ag, nu


@helper
def _dof_matrices(ICi, BCi, fC, sp, psp, pspp, sdp, base, X, A1, A3, Y):
    """Lines 15-24 for the dof with vectors ``sp, psp, pspp, sdp`` of a body with composite ``ICi, BCi, fC``
    (``base``: a column of the floating base, whose Psd is 0): X, A1 and A3 written, a0, a4, a5, a7 returned."""
    _crf_columns(sp, ICi, False, X)
    for r in range(6):
        for c in range(6):
            A1[r, c] = X[r, c] + X[c, r]              # 18
    if base:
        A3[:, :] = 0.0
    else:
        _coriolis(psp, ICi, Y, A3)                    # 16
    _crf_columns(sp, BCi, False, Y)
    for r in range(6):
        for c in range(6):
            A3[r, c] += Y[r, c]
    _crf_columns(sp, BCi, True, Y)
    for r in range(6):
        for c in range(6):
            A3[r, c] += Y[c, r]                       # 20
    a0 = _mv6(ICi, sp)                                # 17
    a4 = _mtv6(BCi, sp)                               # 21
    a5 = _add6(_add6(_mv6(BCi, psp), _mv6(ICi, pspp)), _crf6(sp, fC))  # 22
    a7 = _add6(_mv6(BCi, sp), _mv6(ICi, _add6(psp, sdp)))  # 24
    return a0, a4, a5, a7


@helper
def _dof_vectors(Dof, d):
    return _load6(Dof[d], _S), _load6(Dof[d], _PSD), _load6(Dof[d], _PSDD), _load6(Dof[d], _SD)


@helper
def _to_parent(mi, IC, BC, FC, i):
    """Lines 75-77: body i's composite inertia, Coriolis matrix and force added to its parent's."""
    parent = mi[i, 0]
    if parent >= 0:
        for r in range(6):
            FC[parent, r] += FC[i, r]
            for c in range(6):
                IC[parent, r, c] += IC[i, r, c]
                BC[parent, r, c] += BC[i, r, c]


@helper
def _dofs(mi, i):
    i0 = mi[i, 2]
    return i0, i0 + (6 if mi[i, 1] == JOINT_FREE else 1)


@kernel
def idsva_so_core(mi, mf, g, H, s, v, a, zero, Wp, V, Acc, IC, BC, FC, Dof, T, D2q, D2v, Dqv, dM):
    """Algorithm 1 of seed 003 for one state, assuming checked inputs: the four tensors. ``zero``: whether they
    must be cleared first (not if they hold a previous result of this model)."""
    nb = mi.shape[0]
    if zero:  # the pass writes the same entries for every state; the others (different branches) stay zero
        D2q[:, :, :] = 0.0
        D2v[:, :, :] = 0.0
        Dqv[:, :, :] = 0.0
        dM[:, :, :] = 0.0
    X, A1, A3, Y = T[_X], T[_A1], T[_A3], T[_Y]
    floating, ag, nu = _forward(mi, mf, g, H, s, v, a, Wp, V, Acc, IC, BC, FC, Dof, Y)
    for i in range(nb - 1, -1, -1):
        i0, i1 = _dofs(mi, i)
        ICi, BCi = IC[i], BC[i]
        fC = _load6(FC, i)
        for ip in range(i0, i1):
            sp, psp, pspp, sdp = _dof_vectors(Dof, ip)
            a0, a4, a5, a7 = _dof_matrices(ICi, BCi, fC, sp, psp, pspp, sdp, floating and i == 0, X, A1, A3, Y)
            j = i
            while j >= 0:
                j0, j_free, j_has_parent = mi[j, 2], mi[j, 1] == JOINT_FREE, mi[j, 0] >= 0
                j1 = j0 + (6 if j_free else 1)
                j_ne_i = j != i
                for jt in range(j0, j1):                                        # lines 29-36
                    st = _load6(Dof[jt], _S)
                    u12 = _mv6(A1, st)
                    u9 = _crf6(st, a0)
                    u1 = _mtv6(A3, st) if j_ne_i else u12
                    a4s = _crf6(st, a4)
                    if j_free:  # Psd = 0
                        pst = u8 = A1p = A0p = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
                        u8 = a4s
                    else:
                        pst = _load6(Dof[jt], _PSD)
                        A1p, A0p = _mv6(A1, pst), _crf6(pst, a0)
                        u8 = _sub6(a4s, _sub6(A1p, A0p))
                    if j_has_parent:
                        pstt, sdt = _load6(Dof[jt], _PSDD), _load6(Dof[jt], _SD)
                        u3 = _add6(_add6(_mv6(A3, pst), _mv6(A1, pstt)), _crf6(st, a5))
                        u4 = _add6(_mv6(X, st), u9)
                        u5 = _add6(_sub6(A0p, A1p), a4s)
                        u6 = _add6(_add6(A1p, A0p), _crf6(st, a7))
                        u7 = _add6(_mv6(A3, st), _mv6(A1, _add6(pst, sdt)))
                    else:
                        u3 = u4 = u5 = u6 = u7 = u12
                    k = j
                    while k >= 0:
                        k0 = mi[k, 2]
                        k_ne_j = k != j
                        if mi[k, 1] == JOINT_FREE:
                            # s_r = e_r, Psd_r = 0, Psdd_r = [a_g x e_(r-3); 0], Sd_r = nu x e_r = crm(nu) e_r
                            g12 = cross((u12[0], u12[1], u12[2]), ag)
                            g9 = cross((u9[0], u9[1], u9[2]), ag)
                            c12, c9 = _crf6(nu, u12), _crf6(nu, u9)
                            for r in range(6):
                                pp12 = g12[r - 3] if r >= 3 else 0.0
                                pp9 = g9[r - 3] if r >= 3 else 0.0
                                _emit(D2q, D2v, Dqv, dM, ip, jt, k0 + r, j_ne_i, k_ne_j,
                                      u1[r], u12[r], u9[r], u3[r], u4[r], u5[r], u6[r], u7[r], 0.0, 0.0, 0.0, 0.0,
                                      pp12, pp9, -c12[r], -c9[r])
                        else:
                            sr, psr, psrr = _load6(Dof[k0], _S), _load6(Dof[k0], _PSD), _load6(Dof[k0], _PSDD)
                            p12, p9 = _dot6(u12, psr), _dot6(u9, psr)
                            _emit(D2q, D2v, Dqv, dM, ip, jt, k0, j_ne_i, k_ne_j,
                                  _dot6(u1, sr), _dot6(u12, sr), _dot6(u9, sr), _dot6(u3, sr), _dot6(u4, sr),
                                  _dot6(u5, sr), _dot6(u6, sr), _dot6(u7, sr), _dot6(u1, psr), p12, p9,
                                  _dot6(u8, psr), _dot6(u12, psrr), _dot6(u9, psrr), p12, p9)  # Sd = Psd
                        k = mi[k, 0]
                j = mi[j, 0]
        _to_parent(mi, IC, BC, FC, i)


@helper
def _path_sum(PS, i):
    """The sum of mu_d S_d over the dofs from the root down to body i (zero above the root: i = -1)."""
    if i < 0:
        return (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    return _load6(PS, i)


@helper
def _axpy6(W, row, c, u):
    """W[row] += c u."""
    for r in range(6):
        W[row, r] += c * u[r]


@kernel
def idsva_so_contraction_core(mi, mf, g, H, s, v, a, mu, Wp, V, Acc, IC, BC, FC, Dof, T, PS, W, Cq, Cv, Cqv, P):
    """The contractions of Algorithm 1's tensors with ``mu`` over their first index (``Cq = mu . d2tau_dq2``,
    ``Cv``, ``Cqv``, ``P = mu . dM_dq``) for one state, assuming checked inputs, summed over the output index as
    the pass goes instead of over every triple of dofs.

    Each store of lines 42-66 has one of the triple's dofs ``ip`` (of body i), ``jt`` (of j, an ancestor of i or i)
    and ``kr`` (of k, an ancestor of j or j) as its output index, and its value is linear in the vectors of that
    dof (``u1, u12, u9`` in those of jt, the inner products in those of kr, the ``A`` matrices are ip's). So:

    - output kr: the sum over k of ``mu_kr`` times k's vectors is a path sum from the root, ``PS[j]`` (k up to j)
      or ``PS[parent(j)]`` (strictly above j), one inner product per pair (ip, jt);
    - output jt (j strictly above i, k up to j): ``sum mu_jt s_jt`` over j from k to parent(i) is
      ``PS[parent(i)] - PS[parent(k)]`` (``- PS[k]`` for j strictly below k), the u vectors linear in it, one
      product by A1, A3 per pair (ip, body k);
    - output ip: ``W[jt] = sum over ip of mu_ip (u8, u9, u12)`` (those of pair (ip, jt)), distributed to the kr of
      j and its ancestors once all pairs are summed.

    O(N d) pairs of dofs instead of O(N d^2) triples (ip, jt, kr): ``PS`` (nb, 6) and ``W`` (nv, 3, 6) are work
    arrays."""
    nb = mi.shape[0]
    Cq[:, :] = 0.0
    Cv[:, :] = 0.0
    Cqv[:, :] = 0.0
    P[:, :] = 0.0
    W[:, :, :] = 0.0
    X, A1, A3, Y = T[_X], T[_A1], T[_A3], T[_Y]
    floating, _, _ = _forward(mi, mf, g, H, s, v, a, Wp, V, Acc, IC, BC, FC, Dof, Y)
    for i in range(nb):
        i0, i1 = _dofs(mi, i)
        total = _path_sum(PS, mi[i, 0])
        for d in range(i0, i1):
            total = _add6(total, _scale6(mu[d], _load6(Dof[d], _S)))
        _store6(PS, i, (total[0], total[1], total[2]), (total[3], total[4], total[5]))
    for i in range(nb - 1, -1, -1):
        i0, i1 = _dofs(mi, i)
        ICi, BCi = IC[i], BC[i]
        fC = _load6(FC, i)
        above_i = _path_sum(PS, mi[i, 0])
        for ip in range(i0, i1):
            sp, psp, pspp, sdp = _dof_vectors(Dof, ip)
            a0, a4, a5, a7 = _dof_matrices(ICi, BCi, fC, sp, psp, pspp, sdp, floating and i == 0, X, A1, A3, Y)
            mu_p = mu[ip]
            j = i
            while j >= 0:
                j0, j1 = _dofs(mi, j)
                j_ne_i, j_has_parent, j_free = j != i, mi[j, 0] >= 0, mi[j, 1] == JOINT_FREE
                upto_j = _load6(PS, j)
                above_j = _path_sum(PS, mi[j, 0])
                if j_has_parent:  # for the pairs' stores with output kr and k strictly above j
                    A3Q, A1Q, XQ = _mtv6(A3, above_j), _mv6(A1, above_j), _mtv6(X, above_j)
                for jt in range(j0, j1):
                    st, pst, pstt, sdt = _dof_vectors(Dof, jt)
                    u9 = _crf6(st, a0)
                    if j_free:  # the base's columns: S = e_r, so A1 S is a column of A1; Psd = 0
                        r = jt - j0
                        u12 = (A1[0, r], A1[1, r], A1[2, r], A1[3, r], A1[4, r], A1[5, r])
                        u8 = _crf6(st, a4)
                    else:
                        u12 = _mv6(A1, st)
                        u8 = _add6(_sub6(_crf6(st, a4), _mv6(A1, pst)), _crf6(pst, a0))
                    _axpy6(W[jt], 0, mu_p, u8)
                    _axpy6(W[jt], 1, mu_p, u9)
                    _axpy6(W[jt], 2, mu_p, u12)
                    if j_ne_i:
                        P[jt, ip] += _dot6(u12, upto_j)                         # 50
                    if j_has_parent:
                        s3 = _dot6(pst, A3Q) + _dot6(pstt, A1Q) + _dot6(_crf6(st, a5), above_j)
                        Cq[ip, jt] += s3                                        # 53
                        Cqv[jt, ip] += (_dot6(pst, A1Q) + _dot6(_crf6(pst, a0), above_j)
                                        + _dot6(_crf6(st, a7), above_j))        # 56
                        s9 = _dot6(u9, above_j)
                        P[ip, jt] += s9                                         # 57
                        if j_ne_i:
                            Cq[jt, ip] += s3                                    # 59
                            Cqv[ip, jt] += _dot6(st, A3Q) + _dot6(_add6(pst, sdt), A1Q)  # 60
                            e = _dot6(u12, above_j) + s9                        # 61
                            Cv[ip, jt] += e
                            Cv[jt, ip] += e
                        else:
                            Cv[jt, ip] += _dot6(st, XQ) + s9                    # 63
                j = mi[j, 0]
            k = mi[i, 0]
            while k >= 0:  # the stores with output jt, j strictly above i: 46-49 and 50's second
                k0, k1 = _dofs(mi, k)
                through = _sub6(above_i, _path_sum(PS, mi[k, 0]))
                below = _sub6(above_i, _load6(PS, k))
                U1, U12, U9 = _mtv6(A3, through), _mv6(A1, through), _crf6(through, a0)
                V12 = _mv6(A1, below)
                for kr in range(k0, k1):
                    sr, psr, psrr, sdr = _dof_vectors(Dof, kr)
                    e = _dot6(U1, psr) + _dot6(U12, psrr)                       # 46
                    Cq[kr, ip] += e
                    Cq[ip, kr] += e
                    Cqv[ip, kr] += _dot6(U1, sr) + _dot6(U12, sdr) + _dot6(U12, psr)  # 47
                    Cqv[kr, ip] += _dot6(_sub6(U12, U9), psr)                   # 48
                    e = _dot6(_sub6(U12, U9), sr)                               # 49
                    Cv[kr, ip] += e
                    Cv[ip, kr] += e
                    P[kr, ip] += _dot6(V12, sr)                                 # 50
                k = mi[k, 0]
        _to_parent(mi, IC, BC, FC, i)
    for j in range(nb):  # the stores with output ip: 44, 45, 53-55, 57's second, 66
        j0, j1 = _dofs(mi, j)
        for jt in range(j0, j1):
            w8, w9, w12 = _load6(W[jt], 0), _load6(W[jt], 1), _load6(W[jt], 2)
            w9_12 = _sub6(w9, w12)
            k = j
            while k >= 0:
                k0, k1 = _dofs(mi, k)
                for kr in range(k0, k1):
                    sr, psr, psrr, sdr = _dof_vectors(Dof, kr)
                    q2 = _dot6(w8, psr) + _dot6(w9, psrr)
                    Cq[jt, kr] += q2                                            # 44
                    Cqv[kr, jt] += _dot6(w9_12, psr)                            # 45
                    if k == j:
                        Cv[jt, kr] -= _dot6(w12, sr)                            # 66
                    else:
                        Cq[kr, jt] += q2                                        # 53
                        e = _dot6(w9_12, sr)                                    # 54
                        Cv[jt, kr] += e
                        Cv[kr, jt] += e
                        Cqv[jt, kr] += _dot6(w8, sr) + _dot6(w9, sdr) + _dot6(w9, psr)  # 55 (u5 = u8)
                        P[kr, jt] += _dot6(w9, sr)                              # 57
                k = mi[k, 0]


class IdsvaSecondOrderWork(NamedTuple):
    """IDSVA SO's work arrays: per body the placement (R, p), twist, acceleration, composite inertia, composite
    Coriolis matrix, composite force and (contracting) path sum; per dof the four motion vectors and (contracting)
    the three sums over ``ip``; four 6x6 scratch matrices."""

    placements: np.ndarray
    velocities: np.ndarray
    accelerations: np.ndarray
    IC: np.ndarray
    BC: np.ndarray
    FC: np.ndarray
    dofs: np.ndarray
    T: np.ndarray
    paths: np.ndarray
    sums: np.ndarray


def idsva_so_work(model: RobotModel) -> IdsvaSecondOrderWork:
    nb, nv = model.nb, model.nv
    return IdsvaSecondOrderWork(np.zeros((nb, 12)), np.zeros((nb, 6)), np.zeros((nb, 6)), np.zeros((nb, 6, 6)),
                                np.zeros((nb, 6, 6)), np.zeros((nb, 6)), np.zeros((nv, 4, 6)), np.zeros((4, 6, 6)),
                                np.zeros((nb, 6)), np.zeros((nv, 3, 6)))


@kernel
def idsva_so_kernel(model, H, s, v, a, mu, zero, work, D2q, D2v, Dqv, dM, Cq, Cv, Cqv, P):
    m, w = ModelArrays(*model), IdsvaSecondOrderWork(*work)
    nv = w.dofs.shape[0]
    status = check_dynamics_inputs(m.joints, m.floating, m.n, nv, H, s, v, a, BAD_A, NO_FEXT)
    if status == OK and mu is not None:
        status = check_vector(mu, nv, BAD_MU)
    if status == OK:
        if mu is None:
            idsva_so_core(m.joints, m.bodies, m.gravity, H, s, v, a, zero, w.placements, w.velocities,
                          w.accelerations, w.IC, w.BC, w.FC, w.dofs, w.T, D2q, D2v, Dqv, dM)
        else:
            idsva_so_contraction_core(m.joints, m.bodies, m.gravity, H, s, v, a, mu, w.placements, w.velocities,
                                      w.accelerations, w.IC, w.BC, w.FC, w.dofs, w.T, w.paths, w.sums, Cq, Cv, Cqv, P)
    return status


@kernel
def idsva_so_batch_kernel(model, H, S, V, A, MU, zero, work, D2Q, D2V, DQV, DM, CQ, CV, CQV, PP):
    """IDSVA SO over N knots in one compiled call (tensors, or contractions when MU has N rows); returns
    (status, failing knot)."""
    floating = ModelArrays(*model).floating
    N = S.shape[0]
    if V.shape[0] != N or A.shape[0] != N or (floating and H.shape[0] != N) or (MU is not None and MU.shape[0] != N):
        return BAD_N, 0
    for k in range(N):
        if MU is not None:
            status = idsva_so_kernel(model, H[k] if floating else H[0], S[k], V[k], A[k], MU[k], zero, work, D2Q[0],
                                     D2V[0], DQV[0], DM[0], CQ[k], CV[k], CQV[k], PP[k])
        else:
            status = idsva_so_kernel(model, H[k] if floating else H[0], S[k], V[k], A[k], None, zero, work, D2Q[k],
                                     D2V[k], DQV[k], DM[k], CQ[0], CV[0], CQV[0], PP[0])
        if status != OK:
            return status, k
    return OK, 0


@split_kernel
def idsva_so_split_kernel(model, H, S, V, A, MU, zero, work, other_work, result, D2Q, D2V, DQV, DM, CQ, CV, CQV, PP):
    """``idsva_so_batch_kernel``'s contractions (MU has N rows; the tensors are unused one-row arrays) on two halves
    of the knots, computed by two threads, the first with ``work``, the second with ``other_work``, each writing its
    (status, failing knot) to its row of ``result`` ((2, 2) int64); returns the first failure in knot order."""
    N, floating = S.shape[0], ModelArrays(*model).floating
    for i in prange(2):
        a, b = i * N // 2, (i + 1) * N // 2
        status, k = idsva_so_batch_kernel(model, H[a:b] if floating else H, S[a:b], V[a:b], A[a:b], MU[a:b], zero,
                                          work if i == 0 else other_work, D2Q, D2V, DQV, DM, CQ[a:b], CV[a:b],
                                          CQV[a:b], PP[a:b])
        result[i, 0], result[i, 1] = status, a + k
    return first_failure(result)


@dataclass(eq=False)
class InverseDynamicsSecondOrder:
    """Second-order derivatives of ``tau = rnea(x, a)``, each ``(nv, nv, nv)`` laid out ``[out, in1, in2]``:
    ``d2tau_dq2``, ``d2tau_dv2``, ``d2tau_dqdv`` (q first, then v) and ``dM_dq[i, j, k] = dM_ij/dq_k``; with a
    leading ``N`` for a trajectory."""

    d2tau_dq2: np.ndarray
    d2tau_dv2: np.ndarray
    d2tau_dqdv: np.ndarray
    dM_dq: np.ndarray


@dataclass(eq=False)
class InverseDynamicsHessian:
    """The second-order derivatives of ``mu . tau(x, a)`` for a fixed covector ``mu``, each ``(nv, nv)`` (with a
    leading ``N`` for a trajectory): ``qq[j, k] = mu . d2tau/dq_j dq_k``, ``vv``, ``qv[j, k] = mu . d2tau/dq_j dv_k``
    and ``M_q[j, k] = sum_i mu_i dM_ij/dq_k``."""

    qq: np.ndarray
    vv: np.ndarray
    qv: np.ndarray
    M_q: np.ndarray


def _run(model: RobotModel, x: State | Trajectory, a, mu, out, cls, what: str, workspace: Workspace | None,
         other: Workspace | None = None):
    x = checked_state(model, x, what)
    nv = model.nv
    contract = cls is InverseDynamicsHessian  # then mu is required: None is not "no contraction"
    single = type(x) is State
    N = None if single else len(x)
    a = checked_vector(a, nv, N, model, what, "a")
    mu = checked_vector(mu, nv, N, model, what, "mu") if contract else None
    if model.mimic:
        return _mimic_run(model, x, a, mu, out, cls, what, workspace)
    work = workspace_for(model, workspace, what).work(idsva_so_work)
    shape = (nv, nv) if contract else (nv, nv, nv)
    shapes = (shape if single else (N,) + shape,) * 4
    if out is None and not contract:
        arrays = tuple(np.zeros(s) for s in shapes)  # fresh zero pages: the kernel need not clear them
    else:
        arrays = result_arrays(out, cls, shapes, what)
    # A previous tensor result of this model is zero outside the pattern that the pass rewrites.
    zero = out is not None and getattr(out, "_pattern_of", None) is not model
    if single:
        tensors, matrices = ((_NO_TENSOR,) * 4, arrays) if contract else (arrays, (_NO_MATRIX,) * 4)
        status = idsva_so_kernel(model.packed, base_pose(x), x.s, x.v, a, mu, zero, work, *tensors, *matrices)
        knot = None
    else:
        tensors, matrices = ((_NO_TENSOR[None],) * 4, arrays) if contract else (arrays, (_NO_MATRIX[None],) * 4)
        if contract and other is not None and N >= 2:
            status, knot = split_call(idsva_so_split_kernel, model.packed, base_poses(x), x.s, x.v, a, mu, zero,
                                      work, other.work(idsva_so_work), np.empty((2, 2), dtype=np.int64), *tensors,
                                      *matrices)
        else:
            status, knot = idsva_so_batch_kernel(model.packed, base_poses(x), x.s, x.v, a, mu, zero, work, *tensors,
                                                 *matrices)
    if status == BAD_MU:  # mu's shape is checked above: a NaN or an infinity
        status = NOT_FINITE
    if status != OK:
        raise_for_status(status, model, what, knot, x, a=a, mu=mu)
    result = cls(*arrays) if out is None else out
    if not contract:
        result._pattern_of = model
    return result


def rnea_second_order_derivatives(model: RobotModel, x: State | Trajectory, a,
                                  out: InverseDynamicsSecondOrder | None = None,
                                  workspace: Workspace | None = None) -> InverseDynamicsSecondOrder:
    """IDSVA SO (seed 003 Algorithm 1): the second-order derivatives of the inverse dynamics at ``(x, a)``.

    ``a`` is any generalized acceleration (for a floating base the base row block is the extended inverse
    dynamics, as in ``rnea_derivatives``). No external wrenches. ``x`` a Trajectory evaluates all knots in one
    compiled call (``a`` (N, nv)). ``out``, a previous result of the same shapes, is overwritten instead of
    allocating ``4 nv^3`` new entries per knot; if it came from this function and model, only the entries the
    pass writes are rewritten (the others are zero by the tree's structure), so do not modify it in place.
    ``workspace``: a ``Workspace(model)`` whose work arrays are reused (without one, each call allocates its own).
    """
    return _run(model, x, a, None, out, InverseDynamicsSecondOrder, "rnea_second_order_derivatives", workspace)


def rnea_second_order_contraction(model: RobotModel, x: State | Trajectory, a, mu,
                                  out: InverseDynamicsHessian | None = None,
                                  workspace: Workspace | None = None,
                                  other: Workspace | None = None) -> InverseDynamicsHessian:
    """``mu`` contracted with the IDSVA SO tensors over their first index, summed over that index during the pass
    (``idsva_so_contraction_core``; no ``nv^3`` tensor is formed): the Hessian of ``mu . tau`` that DDP's
    second-order term needs.

    ``x`` a Trajectory takes ``a`` and ``mu`` as (N, nv) arrays; ``out`` and ``workspace`` as in
    ``rnea_second_order_derivatives``. ``other``: the workspace of a second thread, which computes half of a
    trajectory's knots in the same call (``_jit.split_kernel``); None: one thread.
    """
    return _run(model, x, a, mu, out, InverseDynamicsHessian, "rnea_second_order_contraction", workspace, other)


def _mimic_run(model: RobotModel, x: State | Trajectory, a: np.ndarray, mu: np.ndarray | None, out, cls, what: str,
               workspace: Workspace | None):
    """``_run`` for a model with mimic joints, its inputs checked: the full tree's tensors at the expanded state and
    ``G a`` with every index contracted by ``G`` (``q_full = G_s s + o`` is affine, so no other term appears), or its
    contraction with the covector ``G mu`` (``mu . G^T tau_full``), both indices of each matrix contracted."""
    full = _run(model.expanded, model.expand_state(x), expand_velocity(model, a),
                None if mu is None else expand_velocity(model, mu), None, cls, what,
                expanded_workspace(model, workspace, what))
    G = model.mimic_map.G
    if mu is None:
        values = [np.einsum("...ijk,ia,jb,kc->...abc", T, G, G, G, optimize=True)
                  for T in (full.d2tau_dq2, full.d2tau_dv2, full.d2tau_dqdv, full.dM_dq)]
    else:
        values = [reduce_matrix(model, A) for A in (full.qq, full.vv, full.qv, full.M_q)]
    arrays = result_arrays(out, cls, tuple(v.shape for v in values), what)
    for target, value in zip(arrays, values):
        target[...] = value
    return cls(*arrays) if out is None else out
