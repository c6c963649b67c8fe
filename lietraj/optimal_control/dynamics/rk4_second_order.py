"""Second-order term of the commutator-free RK4 step on the state group, contracted as DDP's backward pass needs.

For the step of ``rk4`` (Celledoni, Marthinsen and Owren 2003), with ``F_i = dt [v; a(Y_i, u)]`` for any field ``a``::

    Y₁ = x,  Y₂ = x exp(ξ₂),  Y₃ = x exp(ξ₃),  Y₄ = Y₂ exp(ξ₄),  Z = x exp(ξ₅),  x' = Z exp(ξ₆)
    ξ₂ = F₁/2,  ξ₃ = F₂/2,  ξ₄ = F₃ - F₁/2,  ξ₅ = (3F₁ + 2F₂ + 2F₃ - F₄)/12,  ξ₆ = (-F₁ + 2F₂ + 2F₃ + 3F₄)/12

this computes the symmetric Hessian in ``(δx, δu)`` of ``λᵀ log(x̄'⁻¹ f(x̄ exp δx, ū + δu))`` exactly, by
forward-over-reverse on this stage graph (``euler_second_order``'s module docstring): the covector ``λ`` is
pulled back through the transposed first-order maps of the five compose nodes and four field nodes (all knots at
once, vectors only), then each node adds its own second-order term, evaluated on the first-order sensitivities of
its inputs from ``rk4``'s chain rule, a few knots at a time (the field's contractions of the four stages are
computed first, one call per stage over all knots):

- field ``F_i`` at ``Y_i``: ``μ_iᵀ ∂²a`` on ``(dY_i, du)``, ``μ_i = dt λ_{F_i, v}``;
- compose ``Y = X exp(ξ)``: the BCH and ``DJr`` terms of the SE(3) rows on ``(dX_H, dξ_H)``, with the covector of
  ``Y``; for ``x'`` that is ``λ`` itself.

Linear combinations (the ``ξ_j``) have no second-order term. The pull-back through the compose nodes is
``λ_X = [Ad_{exp(-ξ_H)}ᵀ λ_H; λ_rest]``, ``λ_ξ = [Jr(ξ_H)ᵀ λ_H; λ_rest]``, and through a field node
``λ_Y = [A_qᵀ μ; dt λ_{F,q} + A_vᵀ μ]`` (``A_q, A_v = ∂a/∂q, ∂a/∂v``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from lietraj.dynamics.lie.state import Trajectory
from lietraj.optimal_control.dynamics.euler_second_order import (
    StepHessian,
    assemble,
    compose_blocks,
    compose_term,
    field_term,
    hessian_blocks,
)
from lietraj.optimal_control.dynamics.field import FieldDerivatives, FieldHessian


@dataclass(eq=False)
class Rk4Stages:
    """Nominal values of the RK4 step at every knot: stage states ``Y`` (``Y₁ = x``, ``Y₂``, ``Y₃``, ``Y₄``), the
    field's derivatives ``fd`` at them, the arguments ``XI`` (N, ndx) of the exponentials giving
    ``Y₂, Y₃, Y₄, Z, x⁺``, and their ``PHI = Ad_{exp(-ξ_H)}``, ``JR = Jr(ξ_H)`` (N, 6, 6), None for a fixed base."""

    Y: tuple[Trajectory, ...]
    fd: tuple[FieldDerivatives, ...]
    XI: tuple[np.ndarray, ...]
    PHI: tuple[np.ndarray | None, ...]
    JR: tuple[np.ndarray | None, ...]


@dataclass(eq=False)
class Rk4Sensitivities:
    """First-order sensitivities (m, ndx, ndx + nu) with respect to ``(δx, δu)`` at a few knots: of the stage states
    ``dY`` (exponential coordinates; ``dY[0] = [I 0]``), of the fields ``dF`` and of ``Z``."""

    dY: tuple[np.ndarray, ...]
    dF: tuple[np.ndarray, ...]
    dZ: np.ndarray


def _pull_compose(lam: np.ndarray, PHI: np.ndarray | None, JR: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Covectors of X and ξ for Y = X exp(ξ) given Y's, (N, ndx) each."""
    lam_X, lam_xi = lam.copy(), lam.copy()
    if PHI is not None:
        lam_X[:, :6] = np.einsum("nij,ni->nj", PHI, lam[:, :6])
        lam_xi[:, :6] = np.einsum("nij,ni->nj", JR, lam[:, :6])
    return lam_X, lam_xi


def _pull_field(lam_F: np.ndarray, fd, dt: float, nv: int) -> tuple[np.ndarray, np.ndarray]:
    """Covector of Y for F = dt [v; a(Y, u)] given F's, and μ = dt λ_{F,v}, the covector on a."""
    mu = dt * lam_F[:, nv:]
    lam_Y = np.empty_like(lam_F)
    lam_Y[:, :nv] = np.einsum("nij,ni->nj", fd.da_dq, mu)
    lam_Y[:, nv:] = dt * lam_F[:, :nv] + np.einsum("nij,ni->nj", fd.da_dv, mu)
    return lam_Y, mu


def rk4_step_hessian(dt: float, st: Rk4Stages, LAM: np.ndarray,
                     field_contraction: Callable[[Trajectory, np.ndarray], FieldHessian],
                     chunks: Iterable[tuple[slice, Rk4Sensitivities]]) -> StepHessian:
    """The Hessians at every knot from the nominal stages ``st``, checked covectors ``LAM`` (N, ndx), the field's
    contraction ``(Y, μ) ↦ μᵀ ∂²a`` at a stage's knots and the first-order sensitivities of the stages, chunk by
    chunk."""
    N, nv, nu = LAM.shape[0], st.fd[0].da_dq.shape[1], st.fd[0].da_du.shape[2]
    ndx = 2 * nv
    fd, (P2, P3, P4, P5, P6), (J2, J3, J4, J5, J6) = st.fd, st.PHI, st.JR
    # Reverse pass, in reverse topological order: x', Z, F4, Y4, F3, Y3, F2, Y2, F1.
    lam_Z, l6 = _pull_compose(LAM, P6, J6)
    _, l5 = _pull_compose(lam_Z, P5, J5)
    lam_Y4, mu4 = _pull_field((3.0 * l6 - l5) / 12.0, fd[3], dt, nv)
    lam_Y2, l4 = _pull_compose(lam_Y4, P4, J4)
    lam_Y3, mu3 = _pull_field((l6 + l5) / 6.0 + l4, fd[2], dt, nv)
    _, l3 = _pull_compose(lam_Y3, P3, J3)
    lam_Y2_F2, mu2 = _pull_field((l6 + l5) / 6.0 + 0.5 * l3, fd[1], dt, nv)
    lam_Y2 += lam_Y2_F2
    _, l2 = _pull_compose(lam_Y2, P2, J2)
    _, mu1 = _pull_field((3.0 * l5 - l6) / 12.0 - 0.5 * l4 + 0.5 * l2, fd[0], dt, nv)
    # Each stage's field contraction over all knots in one call (the per-knot kernels run back to back).
    C = [field_contraction(Y, mu) for Y, mu in zip(st.Y, (mu1, mu2, mu3, mu4))]
    blocks = None
    if st.PHI[0] is not None:  # per compose node Y2, Y3, Y4, Z, x': (H_ab, H_bb) with the covector of its output
        blocks = [compose_blocks(xi[:, :6], P, J, lam[:, :6]) for xi, P, J, lam in
                  zip(st.XI, st.PHI, st.JR, (lam_Y2, lam_Y3, lam_Y4, lam_Z, LAM))]
    H = np.empty((N, ndx + nu, ndx + nu))
    for sl, s in chunks:
        terms = [field_term(None if i == 0 else s.dY[i], FieldHessian(C[i].qq[sl], C[i].qv[sl], C[i].vv[sl], C[i].qu[sl]))
                 for i in range(4)]
        if blocks is not None:
            dX, dY2, dZ = s.dY[0][:, :6], s.dY[1][:, :6], s.dZ[:, :6]
            dF1, dF2, dF3, dF4 = (dF[:, :6] for dF in s.dF)
            inputs = ((dX, 0.5 * dF1), (dX, 0.5 * dF2), (dY2, dF3 - 0.5 * dF1),
                      (dX, (3.0 * dF1 + 2.0 * dF2 + 2.0 * dF3 - dF4) / 12.0),
                      (dZ, (-dF1 + 2.0 * dF2 + 2.0 * dF3 + 3.0 * dF4) / 12.0))
            terms += [compose_term(Sa, Sb, H_ab[sl], H_bb[sl]) for (Sa, Sb), (H_ab, H_bb) in zip(inputs, blocks)]
        assemble(H[sl], terms)
    return hessian_blocks(H, ndx)
