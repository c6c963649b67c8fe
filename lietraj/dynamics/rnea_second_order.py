"""Second-order derivatives of inverse dynamics by IDSVA SO (seed 003 Algorithm 1), O(N d^2).

Returns the tensors ``T[out, in1, in2]`` (DESIGN.md: differentiate with respect to ``in1`` first, then ``in2``)::

    d2tau_dq2[i, j, k]  = d2 tau_i / dq_j dq_k       d2tau_dv2[i, j, k] = d2 tau_i / dv_j dv_k
    d2tau_dqdv[i, j, k] = d2 tau_i / dq_j dv_k       dM_dq[i, j, k]     = dM_ij / dq_k

Derivatives in ``q`` are Lie derivatives along the joint motion subspaces (for the free base, body-twist
perturbations ``H exp(z)``), taken one direction after the other, so ``d2tau_dq2`` is not symmetric in its last
two indices inside the base-rotation block: there ``T[:, j, k] - T[:, k, j] = dtau/dq_w . (e_k x e_j)`` (seed 003
digest §1.5). ``d2tau_dv2`` is symmetric in them, ``dM_dq`` in its first two.

The listing is transcribed with the digest's corrections (§2.4, P1-P3: the loop index of line 2, ``f^C`` in line
22, ``I^C (s x)`` in line 18; ``B`` without the ½ of eq. 6) and expressed, as ``rnea_derivatives`` is, in the base
frame instead of the ground frame (the same scalars), linear first, with ``x`` / ``x*`` Featherstone's motion and
force cross products and ``f x̄* m = m x* f``:

    crm(v) = [[w]x, [v]x; 0, [w]x],   crf(v) = [[w]x, 0; [v]x, [w]x],   fbar(f) = [0, -[f]x; -[f]x, -[n]x]
    B(x; I) = crf(x) I - I crm(x) + fbar(I x)

Not yet optimized (6 x 6 matrices in the inner loop, unlike the first-order kernels).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from lietraj.dynamics._checks import BAD_A, OK, as_fext, as_vector, base_pose, check_dynamics_inputs, raise_for_status
from lietraj.dynamics._spatial import add, cross_force, cross_motion, mtv
from lietraj.dynamics.crba import body_in_base_frame, rigid_inertia_times
from lietraj.dynamics.model import JOINT_FREE, MF_MASS, RobotModel
from lietraj.dynamics.rnea_derivatives import joint_kinematics
from lietraj.dynamics.state import State

# Per-dof vectors: S, Psd (= Psi-dot), Psdd, Sd (= S-dot).
_S, _PSD, _PSDD, _SD = 0, 1, 2, 3
# Per-(i, p) 6x6 temporaries of lines 15-24, and scratch.
_BS, _BPSI, _A0, _A1, _A2, _A3, _A4, _A5, _A6, _A7, _X, _Y = range(12)
_ZERO3 = (0.0, 0.0, 0.0)


@njit(cache=True)
def _crm(x, out):
    out[:, :] = 0.0
    v0, v1, v2, w0, w1, w2 = x[0], x[1], x[2], x[3], x[4], x[5]
    for o in (0, 3):
        out[o, o + 1], out[o, o + 2], out[o + 1, o + 2] = -w2, w1, -w0
        out[o + 1, o], out[o + 2, o], out[o + 2, o + 1] = w2, -w1, w0
    out[0, 4], out[0, 5], out[1, 5] = -v2, v1, -v0
    out[1, 3], out[2, 3], out[2, 4] = v2, -v1, v0


@njit(cache=True)
def _crf(x, out):
    """crf(x) = -crm(x)^T."""
    _crm(x, out)
    for r in range(6):
        for c in range(r + 1, 6):
            out[r, c], out[c, r] = -out[c, r], -out[r, c]
    for r in range(6):
        out[r, r] = -out[r, r]


@njit(cache=True)
def _fbar(f, out):
    """fbar(f) m = crf(m) f."""
    out[:, :] = 0.0
    f0, f1, f2, n0, n1, n2 = f[0], f[1], f[2], f[3], f[4], f[5]
    for r0, c0 in ((0, 3), (3, 0)):
        out[r0, c0 + 1], out[r0, c0 + 2], out[r0 + 1, c0 + 2] = f2, -f1, f0
        out[r0 + 1, c0], out[r0 + 2, c0], out[r0 + 2, c0 + 1] = -f2, f1, -f0
    out[3, 4], out[3, 5], out[4, 5] = n2, -n1, n0
    out[4, 3], out[5, 3], out[5, 4] = -n2, n1, -n0


@njit(cache=True)
def _mm(A, B, out):
    for r in range(6):
        for c in range(6):
            e = 0.0
            for k in range(6):
                e += A[r, k] * B[k, c]
            out[r, c] = e


@njit(cache=True)
def _mv(A, x, out):
    for r in range(6):
        e = 0.0
        for k in range(6):
            e += A[r, k] * x[k]
        out[r] = e


@njit(cache=True)
def _mtv(A, x, out):
    for r in range(6):
        e = 0.0
        for k in range(6):
            e += A[k, r] * x[k]
        out[r] = e


@njit(cache=True)
def _dot(x, y):
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2] + x[3] * y[3] + x[4] * y[4] + x[5] * y[5]


@njit(cache=True)
def _coriolis(x, I, T, out, tmp6):
    """out = B(x; I) = crf(x) I - I crm(x) + fbar(I x); uses T[_X], T[_Y] and tmp6."""
    _crf(x, T[_X])
    _mm(T[_X], I, out)
    _crm(x, T[_X])
    _mm(I, T[_X], T[_Y])
    _mv(I, x, tmp6)
    _fbar(tmp6, T[_X])
    for r in range(6):
        for c in range(6):
            out[r, c] += T[_X, r, c] - T[_Y, r, c]


@njit(cache=True)
def _commutator_crf(s, A, T, out):
    """out = crf(s) A - A crm(s)."""
    _crf(s, T[_X])
    _mm(T[_X], A, out)
    _crm(s, T[_X])
    _mm(A, T[_X], T[_Y])
    for r in range(6):
        for c in range(6):
            out[r, c] -= T[_Y, r, c]


@njit(cache=True)
def _store6(X, i, x, y):
    X[i, 0], X[i, 1], X[i, 2], X[i, 3], X[i, 4], X[i, 5] = x[0], x[1], x[2], y[0], y[1], y[2]


@njit(cache=True)
def _unit(k, out):
    out[:] = 0.0
    out[k] = 1.0


@njit(cache=True)
def idsva_so_core(mi, mf, g, H, s, v, a, Wp, V, Acc, IC, BC, FC, Dof, T, U, vec, D2q, D2v, Dqv, dM):
    """Algorithm 1 of seed 003 for one state. Assumes checked inputs; zeroes then fills the four tensors."""
    nb = mi.shape[0]
    D2q[:, :, :] = 0.0
    D2v[:, :, :] = 0.0
    Dqv[:, :, :] = 0.0
    dM[:, :, :] = 0.0
    if mi[0, 1] == JOINT_FREE:
        R = (H[0, 0], H[0, 1], H[0, 2], H[1, 0], H[1, 1], H[1, 2], H[2, 0], H[2, 1], H[2, 2])
        ag = mtv(R, (-g[0], -g[1], -g[2]))
    else:
        ag = (-g[0], -g[1], -g[2])
    tmp = vec[0]
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
                _unit(k, Dof[k, _S])
                Ev, Ew = (Dof[k, _S, 0], Dof[k, _S, 1], Dof[k, _S, 2]), (Dof[k, _S, 3], Dof[k, _S, 4], Dof[k, _S, 5])
                Dof[k, _PSD, :] = 0.0
                c, d = cross_motion(al, bl, Ev, Ew)
                _store6(Dof[k], _PSDD, c, d)
                c, d = cross_motion(vi, wi, Ev, Ew)
                _store6(Dof[k], _SD, c, d)
        else:
            vi, wi, ai, bi, pv, pw, qv, qw = joint_kinematics(vl, wl, al, bl, Sv, Sw, v[iv], a[iv])
            _store6(Dof[iv], _S, Sv, Sw)
            _store6(Dof[iv], _PSD, pv, pw)
            _store6(Dof[iv], _PSDD, qv, qw)
            _store6(Dof[iv], _SD, pv, pw)  # v_i x S = v_l x S for a 1-DoF joint
        _store6(V, i, vi, wi)
        _store6(Acc, i, ai, bi)
        # I_i as a 6x6 linear-first matrix [[m E, -[h]x], [[h]x, I_o]]
        Ii = IC[i]
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
        _store6(vec, 1, vi, wi)
        _coriolis(vec[1], Ii, T, BC[i], tmp)
        mom, L = rigid_inertia_times(m, h, Io, vi, wi)
        fa, na = rigid_inertia_times(m, h, Io, ai, bi)
        fb, nbias = cross_force(vi, wi, mom, L)
        _store6(FC, i, add(fa, fb), add(na, nbias))

    u = U
    for i in range(nb - 1, -1, -1):
        parent, i0 = mi[i, 0], mi[i, 2]
        i1 = i0 + (6 if mi[i, 1] == JOINT_FREE else 1)
        ICi, BCi, fCi = IC[i], BC[i], FC[i]
        for ip in range(i0, i1):
            sp, psp, pspp, sdp = Dof[ip, _S], Dof[ip, _PSD], Dof[ip, _PSDD], Dof[ip, _SD]
            # A1 = crf(s) I - I crm(s) is symmetric and A0 = fbar(I s) antisymmetric, so line 15's B(s; I) is
            # A1 + A0 and line 19's A2 is A0 - A1: three 6x6 products fewer than the listing.
            _mv(ICi, sp, vec[1])
            _fbar(vec[1], T[_A0])                                            # 17
            _crf(sp, T[_X])
            _mm(T[_X], ICi, T[_A6])
            _crm(sp, T[_X])
            _mm(ICi, T[_X], T[_Y])
            for r in range(6):
                for c in range(6):
                    T[_A1, r, c] = T[_A6, r, c] - T[_Y, r, c]               # 18
                    T[_BS, r, c] = T[_A1, r, c] + T[_A0, r, c]              # 15
                    T[_A2, r, c] = T[_A0, r, c] - T[_A1, r, c]              # 19
                    T[_A6, r, c] += T[_A0, r, c]                            # 23
            _coriolis(psp, ICi, T, T[_BPSI], tmp)                            # 16
            _commutator_crf(sp, BCi, T, T[_A3])
            for r in range(6):
                for c in range(6):
                    T[_A3, r, c] += T[_BPSI, r, c]                           # 20
            _mtv(BCi, sp, vec[1])
            _fbar(vec[1], T[_A4])                                            # 21
            _mv(BCi, psp, vec[1])
            _mv(ICi, pspp, vec[2])
            _crf(sp, T[_X])
            _mv(T[_X], fCi, vec[3])
            for r in range(6):
                vec[1, r] += vec[2, r] + vec[3, r]
            _fbar(vec[1], T[_A5])                                            # 22
            _mv(BCi, sp, vec[1])
            for r in range(6):
                vec[2, r] = psp[r] + sdp[r]
            _mv(ICi, vec[2], vec[3])
            for r in range(6):
                vec[1, r] += vec[3, r]
            _fbar(vec[1], T[_A7])                                            # 24
            j = i
            while j >= 0:
                j0 = mi[j, 2]
                j1 = j0 + (6 if mi[j, 1] == JOINT_FREE else 1)
                for jt in range(j0, j1):
                    st, pst, pstt, sdt = Dof[jt, _S], Dof[jt, _PSD], Dof[jt, _PSDD], Dof[jt, _SD]
                    _mtv(T[_A3], st, u[1])                                   # 29
                    _mv(T[_A1], st, u[12])                                   # 36
                    _mv(T[_A0], st, u[9])
                    for r in range(6):
                        u[2, r] = u[12, r]                                   # A1^T = A1
                        u[10, r] = u[12, r] + u[9, r]                        # B_s = A1 + A0
                        u[11, r] = u[12, r] - u[9, r]                        # B_s^T = A1 - A0
                    _mv(T[_A3], pst, u[3])                                   # 30
                    _mv(T[_A1], pstt, vec[1])
                    _mv(T[_A5], st, vec[2])
                    for r in range(6):
                        u[3, r] += vec[1, r] + vec[2, r]
                    _mv(T[_A6], st, u[4])                                    # 31
                    _mv(T[_A2], pst, u[5])
                    _mv(T[_A4], st, vec[1])
                    for r in range(6):
                        u[5, r] += vec[1, r]
                    _mv(T[_BS], pst, u[6])                                   # 32
                    _mv(T[_A7], st, vec[1])
                    for r in range(6):
                        u[6, r] += vec[1, r]
                    _mv(T[_A3], st, u[7])                                    # 33
                    for r in range(6):
                        vec[2, r] = pst[r] + sdt[r]
                    _mv(T[_A1], vec[2], vec[1])
                    for r in range(6):
                        u[7, r] += vec[1, r]
                    _mv(T[_A4], st, u[8])                                    # 34
                    _mtv(T[_BS], pst, vec[1])
                    for r in range(6):
                        u[8, r] -= vec[1, r]
                    k = j
                    while k >= 0:
                        k0 = mi[k, 2]
                        k1 = k0 + (6 if mi[k, 1] == JOINT_FREE else 1)
                        for kr in range(k0, k1):
                            sr, psr, psrr, sdr = Dof[kr, _S], Dof[kr, _PSD], Dof[kr, _PSDD], Dof[kr, _SD]
                            p1 = _dot(u[11], psr)                            # 42
                            p2 = _dot(u[8], psr) + _dot(u[9], psrr)          # 43
                            D2q[ip, jt, kr] = p2                             # 44
                            Dqv[ip, kr, jt] = -p1
                            if j != i:
                                e = _dot(u[1], psr) + _dot(u[2], psrr)       # 46
                                D2q[jt, kr, ip] = e
                                D2q[jt, ip, kr] = e
                                Dqv[jt, ip, kr] = _dot(u[1], sr) + _dot(u[2], sdr) + _dot(u[2], psr)  # 47
                                Dqv[jt, kr, ip] = p1                         # 48
                                e = _dot(u[11], sr)                          # 49
                                D2v[jt, kr, ip] = e
                                D2v[jt, ip, kr] = e
                                e = _dot(sr, u[12])                          # 50
                                dM[kr, jt, ip] = e
                                dM[jt, kr, ip] = e
                            if k != j:
                                D2q[ip, kr, jt] = p2                         # 53
                                D2q[kr, ip, jt] = _dot(sr, u[3])
                                e = -_dot(u[11], sr)                         # 54
                                D2v[ip, jt, kr] = e
                                D2v[ip, kr, jt] = e
                                Dqv[ip, jt, kr] = _dot(sr, u[5]) + _dot(u[9], sdr) + _dot(u[9], psr)  # 55
                                Dqv[kr, jt, ip] = _dot(sr, u[6])             # 56
                                e = _dot(sr, u[9])                           # 57
                                dM[kr, ip, jt] = e
                                dM[ip, kr, jt] = e
                                if j != i:
                                    D2q[kr, jt, ip] = D2q[kr, ip, jt]        # 59
                                    Dqv[kr, ip, jt] = _dot(sr, u[7])         # 60
                                    e = _dot(sr, u[10])                      # 61
                                    D2v[kr, ip, jt] = e
                                    D2v[kr, jt, ip] = e
                                else:
                                    D2v[kr, jt, ip] = _dot(sr, u[4])         # 63
                            else:
                                D2v[ip, jt, kr] = -_dot(u[2], sr)            # 66
                        k = mi[k, 0]
                j = mi[j, 0]
        if parent >= 0:                                                      # 75-77
            for r in range(6):
                FC[parent, r] += fCi[r]
                for c in range(6):
                    IC[parent, r, c] += ICi[r, c]
                    BC[parent, r, c] += BCi[r, c]


@njit(cache=True)
def idsva_so_kernel(mi, mf, g, floating, n, H, s, v, a, no_fext, Wp, V, Acc, IC, BC, FC, Dof, T, U, vec, D2q, D2v, Dqv,
                    dM):
    status = check_dynamics_inputs(mi, floating, n, D2q.shape[0], H, s, v, a, BAD_A, no_fext)
    if status == OK:
        idsva_so_core(mi, mf, g, H, s, v, a, Wp, V, Acc, IC, BC, FC, Dof, T, U, vec, D2q, D2v, Dqv, dM)
    return status


@dataclass(eq=False)
class InverseDynamicsSecondOrder:
    """Second-order derivatives of ``tau = rnea(x, a)``, each ``(nv, nv, nv)`` laid out ``[out, in1, in2]``:
    ``d2tau_dq2``, ``d2tau_dv2``, ``d2tau_dqdv`` (q first, then v) and ``dM_dq[i, j, k] = dM_ij/dq_k``."""

    d2tau_dq2: np.ndarray
    d2tau_dv2: np.ndarray
    d2tau_dqdv: np.ndarray
    dM_dq: np.ndarray


def _work(model: RobotModel) -> tuple:
    nb, nv = model.nb, model.nv
    return (np.zeros((nb, 12)), np.zeros((nb, 6)), np.zeros((nb, 6)), np.zeros((nb, 6, 6)), np.zeros((nb, 6, 6)),
            np.zeros((nb, 6)), np.zeros((nv, 4, 6)), np.zeros((12, 6, 6)), np.zeros((13, 6)), np.zeros((4, 6)))


def rnea_second_order_derivatives(model: RobotModel, x: State, a) -> InverseDynamicsSecondOrder:
    """IDSVA SO (seed 003 Algorithm 1): the second-order derivatives of the inverse dynamics at ``(x, a)``.

    ``a`` is any generalized acceleration (for a floating base the base row block is the extended inverse
    dynamics, as in ``rnea_derivatives``). No external wrenches. One state at a time.
    """
    if type(x) is not State:
        raise TypeError(f"rnea_second_order_derivatives: expected a State, got {type(x).__name__}")
    nv = model.nv
    D2q, D2v, Dqv, dM = (np.empty((nv, nv, nv)) for _ in range(4))
    no_fext = as_fext(None, model, "rnea_second_order_derivatives")
    status = idsva_so_kernel(model.mi, model.mf, model.gravity, model.floating_base, model.n, base_pose(x), x.s, x.v,
                             as_vector(a), no_fext, *model.derived("idsva_so_work", _work), D2q, D2v, Dqv, dM)
    raise_for_status(status, model, "rnea_second_order_derivatives")
    return InverseDynamicsSecondOrder(D2q, D2v, Dqv, dM)
