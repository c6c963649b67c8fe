"""Second-order term of the semi-implicit Euler step on the state group, contracted as DDP's backward pass needs,
and the two node terms every integrator's second-order term is made of (``rk4_second_order`` reuses them).

DDP expands the next value function in the chart of the nominal next state ``x̄' = f(x̄, ū)``; with
``g(δ) = log(x̄'⁻¹ f(x̄ exp δx, ū + δu))`` (the ``⊖`` chart, δ in exponential coordinates at ``x̄``), the backward
pass needs ``F = Dg(0)`` (``RobotDynamics.derivatives``) and the symmetric Hessian of ``λᵀ g`` at 0 for the
gradient ``λ = V'_x``, at every knot.

A step is a graph of two kinds of nodes, each group-valued node ``Y`` expanded in exponential coordinates at its
nominal value (``Y = Ȳ exp(η)``), each vector node additively. Then ``D²(λᵀ g)`` is the sum over nodes of the
node's output covector (the adjoint, from ``λ`` by the transposed first-order maps) applied to the node's own
second derivative, evaluated on the first-order sensitivities ``dη / dδ`` of its inputs:

- field ``F = dt [v; FD(Y, u)]``: ``μᵀ ∂²FD`` with ``μ = dt λ_{F,v}``, from ``aba_second_order``; its configuration
  block is symmetrised because ``Y exp(ζ)`` is expanded in exponential coordinates ``ζ`` (the tensors take the
  directions one after the other, which adds an antisymmetric bracket term, seed 003 digest §1.5);
- compose ``Y = X exp(ξ)``: on the SE(3) rows, with ``c = ξ̄_H``, ``a = η_X,H``, ``b = δξ_H``, by BCH
  ``η_H = Ad_{exp(-c)} a + Jr(c) b + ½ [Ad_{exp(-c)} a, Jr(c) b] + ½ DJr(c)[b] b + ...``, whose Hessian has the
  blocks ``H_ab = ½ Ad_{exp(-c)}ᵀ M_λ Jr(c)`` (``M_λ[i, j] = λ_Hᵀ ad(e_i) e_j``) and ``H_bb = sym(DJ)``,
  ``DJ[i, j] = λ_Hᵀ DJr(c)[e_i] e_j`` (``se3.bracket_rows`` and ``se3.right_jacobian_derivative_contraction``,
  which sums ``DJr`` from the series of ``Jr``); the other rows are additive. The final ``⊖`` chart is the
  exponential coordinates of the last compose node, so it needs no node of its own.

The Euler step of ``euler.py`` (``ν' = ν + dt a_b``, ``ṡ' = ṡ + dt a_j``, ``H' = H exp(dt ν')``, ``s' = s + dt ṡ'``,
``a = FD(x, u)``) is ``x' = x exp(ξ)`` with ``ξ = dt [v + dt a; a]``: one field and one compose node. Its covector on
``a`` is ``μ = dt [λ_ν + dt Jr(c)ᵀ λ_H; λ_ṡ + dt λ_s]`` (``c = dt ν̄'``), and ``b = dt (δν + dt δa_b)``.

Nothing in the step depends on how ``a`` is computed: ``euler_step_hessian`` takes the field's first-order
derivatives and its contraction ``μ ↦ μᵀ ∂²a`` (``Field.hessian_contraction``: ABA's ``aba_second_order`` for
``FreeField``, ``contact_dynamics_second_order`` for ``ContactField``, or a user field's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lietraj._jit import kernel
from lietraj.dynamics.lie import se3
from lietraj.dynamics.lie.state import State, Trajectory
from lietraj.dynamics.model.model import RobotModel
from lietraj.optimal_control.dynamics.field import FieldDerivatives, FieldHessian
from lietraj.optimal_control.dynamics.free_field import FreeField

# μ (N, nv) -> μᵀ ∂²a of an acceleration field a(q, v, u) (Field.hessian_contraction at the step's knots).
FieldContraction = Callable[[np.ndarray], FieldHessian]
_NO_KNOTS = np.zeros((0, 6, 6))  # no compose node: a fixed base
_NO_ROWS = np.zeros((0, 6, 0))  # nor its base rows of the field's derivatives
# Knots per block of the assembly: its (knots, m, m) temporaries stay small enough to be reused, not freshly mapped
# (first touches of fresh pages cost more than the products).
_BLOCK_ENTRIES = 32768


@dataclass(eq=False)
class StepHessian:
    """Symmetric blocks of the Hessian of ``λᵀ g`` in (δx, δu): ``xx`` (ndx, ndx), ``xu`` (ndx, nu), ``uu`` (nu, nu),
    with a leading knot axis ``N`` for a trajectory."""

    xx: np.ndarray
    xu: np.ndarray
    uu: np.ndarray


def _tr(A: np.ndarray) -> np.ndarray:
    return A.swapaxes(-1, -2)


def compose_blocks(c: np.ndarray, PHI: np.ndarray, JR: np.ndarray, lam_H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(H_ab, H_bb)`` (N, 6, 6) of ``λ_Hᵀ log(exp(-c) exp(a) exp(c + b))`` at knots with ``c`` (N, 6),
    ``PHI = Ad_{exp(-c)}``, ``JR = Jr(c)`` and the output covector ``lam_H`` (N, 6) (module docstring)."""
    M = se3.bracket_rows(lam_H)
    DJ = se3.right_jacobian_derivative_contraction(c, lam_H)
    return 0.5 * _tr(PHI) @ M @ JR, 0.5 * (DJ + _tr(DJ))


def compose_term(Sa: np.ndarray, Sb: np.ndarray, H_ab: np.ndarray, H_bb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Factors ``(L, R)`` with ``Lᵀ R + Rᵀ L = Saᵀ H_ab Sb + Sbᵀ H_abᵀ Sa + Sbᵀ H_bb Sb`` for the sensitivities ``Sa``,
    ``Sb`` (N, 6, m) of ``a``, ``b`` of a compose node."""
    return np.concatenate((Sa, Sb), axis=1), np.concatenate((H_ab @ Sb, 0.5 * H_bb @ Sb), axis=1)


def field_term(dY: np.ndarray | None, C: FieldHessian) -> tuple[np.ndarray | None, np.ndarray]:
    """Factors ``(L, R)`` with ``Lᵀ R + Rᵀ L = Sᵀ D S`` for a field node: ``D`` the symmetric (q, v, u) Hessian of
    ``μᵀ a`` from ``C`` (``qq``, ``qv``, ``vv`` (N, nv, nv), ``qu`` (N, nv, nu)), ``S = [dY; 0 I]`` with ``dY``
    (N, ndx, ndx + nu) the sensitivity of the node's state. ``dY`` None stands for ``[I 0]`` (the step's own input)
    and gives ``L`` None."""
    qq, qv, vv, qu = C.qq, C.qv, C.vv, C.qu
    N, nv = qq.shape[:2]
    ndx = 2 * nv
    R = np.zeros((N, ndx, ndx + qu.shape[2]))
    if dY is None:
        R[:, :nv, :nv] = 0.5 * qq
        R[:, :nv, nv:ndx] = qv
        R[:, nv:, nv:ndx] = 0.5 * vv
    else:
        Sq, Sv = dY[:, :nv], dY[:, nv:]
        R[:, :nv] = 0.5 * qq @ Sq + qv @ Sv
        R[:, nv:] = 0.5 * vv @ Sv
    R[:, :nv, ndx:] += qu
    return dY, R


def assemble(H: np.ndarray, terms: list[tuple[np.ndarray | None, np.ndarray]]) -> None:
    """Overwrite ``H`` (N, m, m) with ``Σ Lᵀ R + Rᵀ L`` over the node terms (an ``L`` None is ``[I 0]``), by one
    product of the stacked factors per block of knots."""
    N, m = H.shape[:2]
    block = max(1, _BLOCK_ENTRIES // (m * m))
    for k0 in range(0, N, block):
        sl = slice(k0, k0 + block)
        products = [(L[sl], R[sl]) for L, R in terms if L is not None]
        if products:
            L = np.concatenate([L for L, _ in products], axis=1)
            T = np.ascontiguousarray(_tr(L)) @ np.concatenate([R for _, R in products], axis=1)
        else:
            T = np.zeros(H[sl].shape)
        for L, R in terms:
            if L is None:
                T[:, :R.shape[1]] += R[sl]
        np.add(T, _tr(T), out=H[sl])


@kernel
def _euler_step_hessian_batch(qq, qv, vv, qu, H_ab, H_bb, dt, base, WV, Hk, XX, XU, UU):
    """``H = Σ Lᵀ R + Rᵀ L`` over the Euler step's two nodes at every knot (``assemble`` written out for them), into
    its blocks ``XX``, ``XU``, ``UU``, exactly symmetric: the field node (``field_term`` with ``L = [I 0]``) and,
    when ``H_ab`` has a row per knot (a floating base), the compose node with ``Sa = [I₆ 0]`` (``compose_term``),
    whose part is ``Saᵀ W + Wᵀ Sa + Sbᵀ H_bb Sb``, ``W = H_ab Sb`` (``H_bb`` is symmetric). ``Sb = dt² [∂a_b/∂q,
    ∂a_b/∂v, ∂a_b/∂u] + dt [0 I₆ 0]``, the sensitivity of ``b = dt (δν + dt δa_b)``, is made per knot from ``base``,
    the first six rows of the field's derivatives. The lower triangle of ``H`` is summed in ``Hk`` (m, m) with ``W``,
    ``V = H_bb Sb`` and ``Sb`` in ``WV`` (18, m), the innermost loops along contiguous rows, and mirrored into the
    blocks."""
    N, nv, m = qq.shape[0], qq.shape[1], Hk.shape[0]
    ndx = 2 * nv
    DQ, DV, DU = base
    Sb = WV[12:]
    for k in range(N):
        for i in range(nv):
            for j in range(i + 1):
                Hk[i, j] = 0.5 * (qq[k, i, j] + qq[k, j, i])
        for i in range(nv, ndx):
            for j in range(nv):
                Hk[i, j] = qv[k, j, i - nv]
            for j in range(nv, i + 1):
                Hk[i, j] = 0.5 * (vv[k, i - nv, j - nv] + vv[k, j - nv, i - nv])
        for i in range(ndx, m):
            for j in range(nv):
                Hk[i, j] = qu[k, j, i - ndx]
            for j in range(nv, i + 1):
                Hk[i, j] = 0.0
        if H_ab.shape[0] == N:
            dt2 = dt * dt
            for t in range(6):
                for c in range(nv):
                    Sb[t, c] = DQ[k, t, c] * dt2
                    Sb[t, nv + c] = DV[k, t, c] * dt2
                for c in range(m - ndx):
                    Sb[t, ndx + c] = DU[k, t, c] * dt2
                Sb[t, nv + t] += dt
            for r in range(12):
                for c in range(m):
                    WV[r, c] = 0.0
            for r in range(6):
                for t in range(6):
                    a, b = H_ab[k, r, t], H_bb[k, r, t]
                    for c in range(m):
                        WV[r, c] += a * Sb[t, c]
                        WV[6 + r, c] += b * Sb[t, c]
            for i in range(m):  # Wᵀ Sa: columns j < 6
                for j in range(min(i, 5) + 1):
                    Hk[i, j] += WV[j, i]
            for i in range(6):  # Saᵀ W: rows i < 6
                for j in range(i + 1):
                    Hk[i, j] += WV[i, j]
            for t in range(6):  # Sbᵀ V
                for i in range(m):
                    a = Sb[t, i]
                    for j in range(i + 1):
                        Hk[i, j] += a * WV[6 + t, j]
        for i in range(ndx):
            for j in range(i + 1):
                XX[k, i, j] = Hk[i, j]
                XX[k, j, i] = Hk[i, j]
        for i in range(ndx, m):
            for j in range(ndx):
                XU[k, j, i - ndx] = Hk[i, j]
            for j in range(ndx, i + 1):
                UU[k, i - ndx, j - ndx] = Hk[i, j]
                UU[k, j - ndx, i - ndx] = Hk[i, j]


def hessian_blocks(H: np.ndarray, ndx: int) -> StepHessian:
    """The blocks of the full (N, ndx + nu, ndx + nu) Hessian."""
    return StepHessian(H[:, :ndx, :ndx], H[:, :ndx, ndx:], H[:, ndx:, ndx:])


def step_twists(dt: float, X: Trajectory, fd: FieldDerivatives) -> np.ndarray:
    """``ξ = dt ν̄'`` (N, 6) of each step's base exponential (its compose node), (N, 0) for a fixed base."""
    if X.H is None:
        return np.zeros((len(X), 0))
    return dt * (X.v[:, :6] + dt * fd.a[:, :6])


def euler_step_hessian(dt: float, X: Trajectory, fd: FieldDerivatives, LAM: np.ndarray,
                       field_contraction: FieldContraction, out: StepHessian | None = None) -> StepHessian:
    """The Hessians at every knot of ``X`` from checked inputs: ``fd`` the first-order derivatives of the acceleration
    field at the knots (``Field.derivatives``), covectors ``LAM`` (N, ndx), and ``field_contraction`` mapping the
    field's covectors ``μ`` (N, nv) to ``μᵀ ∂²a`` (``Field.hessian_contraction``). The step is the same for any
    field ``a(q, v, u)``. ``out``: blocks of the right shapes to write the result into (a problem's, for all its
    knots), instead of new arrays."""
    N, nv, nu = len(X), fd.da_dq.shape[1], fd.da_du.shape[2]
    ndx = 2 * nv
    lam_xi = LAM.copy()
    if X.H is not None:
        XI = step_twists(dt, X, fd)
        _, PHI, JR = se3.exp_blocks(XI)
        lam_xi[:, :6] = np.einsum("nij,ni->nj", JR, LAM[:, :6])
    mu = dt * (lam_xi[:, nv:] + dt * lam_xi[:, :nv])
    C = field_contraction(mu)
    m = ndx + nu
    H_ab = H_bb = _NO_KNOTS
    base = (_NO_ROWS,) * 3
    if X.H is not None:
        H_ab, H_bb = (np.ascontiguousarray(B) for B in compose_blocks(XI, PHI, JR, LAM[:, :6]))
        base = tuple(np.ascontiguousarray(D[:, :6]) for D in (fd.da_dq, fd.da_dv, fd.da_du))
    if out is None:
        out = StepHessian(np.empty((N, ndx, ndx)), np.empty((N, ndx, nu)), np.empty((N, nu, nu)))
    _euler_step_hessian_batch(*(np.ascontiguousarray(B, dtype=np.float64) for B in (C.qq, C.qv, C.vv, C.qu)), H_ab,
                              H_bb, float(dt), base, np.empty((18, m)), np.empty((m, m)), out.xx, out.xu, out.uu)
    return out


def euler_hessian_contraction(model: RobotModel, dt: float, x: State, u, lam) -> StepHessian:
    """The symmetric Hessian of ``λᵀ log(x̄'⁻¹ f(x̄ exp δx, ū + δu))`` at δ = 0 for the semi-implicit Euler step, at
    one state (``RobotDynamics(model, dt).hessian_contraction`` is the same; its trajectory form is batched).

    ``lam`` is a covector on the tangent of the next state (``(ndx,)``, order ``[z_H; z_s; z_ν; z_ṡ]``); ``u`` the
    joint torques. No external wrenches.
    """
    nv = model.nv
    lam = np.asarray(lam, dtype=float)
    if lam.shape != (2 * nv,) or not np.all(np.isfinite(lam)):
        raise ValueError(f"euler_hessian_contraction({model.name}): lam must be a finite vector of shape ({2 * nv},)")
    field, X, U = FreeField(model), Trajectory.repeat(x, 1), np.asarray(u, dtype=float)[None]
    H = euler_step_hessian(dt, X, field.derivatives(X, U), lam[None], lambda mu: field.hessian_contraction(X, U, mu))
    return StepHessian(H.xx[0], H.xu[0], H.uu[0])
