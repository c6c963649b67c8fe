"""Second-order term of the semi-implicit Euler step on the state group, contracted as DDP's backward pass needs.

DDP expands the next value function in the chart of the nominal next state ``x̄' = f(x̄, ū)``; with
``g(δ) = log(x̄'⁻¹ f(x̄ exp δx, ū + δu))`` (the ``⊖`` chart, δ in exponential coordinates at ``x̄``), the backward
pass needs ``F = Dg(0)`` (``RobotDynamics.derivatives``) and the symmetric Hessian of ``λᵀ g`` at 0 for the
gradient ``λ = V'_x``. For the step of DESIGN.md (``a = FD(x, u)``, ``ν' = ν + dt a_b``, ``ṡ' = ṡ + dt a_j``,
``H' = H exp(dt ν')``, ``s' = s + dt ṡ'``), with ``c = dt ν̄'`` and ``e = dt δν'``::

    g_ν = δν + dt Δa_b,   g_ṡ = δṡ + dt Δa_j,   g_s = δs + dt g_ṡ,   g_H = log(exp(-c) exp(δH) exp(c + e))

The acceleration enters linearly, so its second-order part contributes the forward-dynamics contraction
(``aba_second_order.hessian_contraction``, symmetrised in the configuration block since the Lie derivatives there are taken
one after the other) with the covector ``λ_a = dt [λ_ν + dt Jr(c)ᵀ λ_H; λ_ṡ + dt λ_s]``. The SE(3) row adds
its own curvature: by BCH, ``g_H = Ad_{exp(-c)} δH + Jr(c) e + ½ [Ad_{exp(-c)} δH, Jr(c) e] + ½ DJr(c)[e] e + ...``,
whose Hessian in ``(δH, e)`` has the blocks ``H_He = ½ Ad_{exp(-c)}ᵀ M_λ Jr(c)`` (``M_λ[i, j] = λ_Hᵀ ad(e_i) e_j``)
and ``H_ee = sym(K)``, ``K[i, j] = λ_Hᵀ DJr(c)[e_i] e_j``, mapped to δ through ``e ≈ E δ``. ``DJr`` is summed from
the series ``Jr(c) = Σ_k (-1)^k ad_c^k / (k+1)!``, contracted with λ first (vector-matrix products only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lietraj.dynamics import se3
from lietraj.dynamics.aba_derivatives import aba_derivatives
from lietraj.dynamics.aba_second_order import hessian_contraction
from lietraj.dynamics.linearization import generalized_force
from lietraj.dynamics.rnea_second_order import rnea_second_order_derivatives
from lietraj.dynamics.state import State

_AD_BASIS = np.stack([se3.ad(e) for e in np.eye(6)])  # ad(e_i)


@dataclass(eq=False)
class StepHessian:
    """Symmetric blocks of the Hessian of ``λᵀ g`` in (δx, δu): ``xx`` (ndx, ndx), ``xu`` (ndx, nu), ``uu``."""

    xx: np.ndarray
    xu: np.ndarray
    uu: np.ndarray


def _right_jacobian_derivative_contraction(c: np.ndarray, lam: np.ndarray, tol: float = 1e-18) -> np.ndarray:
    """K[i, j] = λᵀ DJr(c)[e_i] e_j, by the series of Jr: DJr[d] = Σ_k a_k Σ_m ad_c^m ad_d ad_c^(k-1-m)."""
    ad_c = se3.ad(c)
    K = np.zeros((6, 6))
    # rows of λᵀ Q_k(d) for the six directions d = e_i, and λᵀ ad_c^k
    q = np.zeros((6, 6))
    p = lam.copy()
    coefficient = 1.0
    for k in range(1, 60):
        q = q @ ad_c + np.einsum("j,ijl->il", p, _AD_BASIS)  # λᵀ Q_k(e_i) = λᵀ Q_{k-1}(e_i) ad_c + λᵀ ad_c^(k-1) ad(e_i)
        p = p @ ad_c
        coefficient *= -1.0 / (k + 1)
        K += coefficient * q
        if abs(coefficient) * (np.abs(q).max() + np.abs(p).max()) < tol * max(1.0, np.abs(K).max()):
            break
    return K


def euler_hessian_contraction(model, dt: float, x: State, u, lam) -> StepHessian:
    """The symmetric Hessian of ``λᵀ log(x̄'⁻¹ f(x̄ exp δx, ū + δu))`` at δ = 0 for the semi-implicit Euler step.

    ``lam`` is a covector on the tangent of the next state (``(ndx,)``, order ``[z_H; z_s; z_ν; z_ṡ]``); ``u`` the
    joint torques. No external wrenches.
    """
    nv, n = model.nv, model.n
    lam = np.asarray(lam, dtype=float)
    if lam.shape != (2 * nv,) or not np.all(np.isfinite(lam)):
        raise ValueError(f"euler_hessian_contraction({model.name}): lam must be a finite vector of shape ({2 * nv},)")
    tau = generalized_force(model, np.asarray(u, dtype=float), "euler_hessian_contraction")
    fd = aba_derivatives(model, x, tau)
    lam_q, lam_v = lam[:nv], lam[nv:]
    lam_a = dt * lam_v
    lam_a[nv - n:] += dt * dt * lam_q[nv - n:]
    if model.floating_base:
        c = dt * (x.v[:6] + dt * fd.a[:6])
        J = se3.right_jacobian(c)
        lam_a[:6] += dt * dt * J.T @ lam_q[:6]
    C = hessian_contraction(fd, rnea_second_order_derivatives(model, x, fd.a), lam_a)
    m = 2 * nv + n
    H = np.zeros((m, m))
    H[:nv, :nv] = 0.5 * (C.qq + C.qq.T)
    H[:nv, nv:2 * nv] = C.qv
    H[nv:2 * nv, :nv] = C.qv.T
    H[nv:2 * nv, nv:2 * nv] = C.vv
    H[:nv, 2 * nv:] = C.qtau[:, nv - n:]
    H[2 * nv:, :nv] = C.qtau[:, nv - n:].T
    if model.floating_base:
        lam_H = lam_q[:6]
        E = np.zeros((6, m))  # e = dt δν' ≈ E δ
        E[:, nv:nv + 6] = dt * np.eye(6)
        E[:, :nv] += dt * dt * fd.da_dq[:6]
        E[:, nv:2 * nv] += dt * dt * fd.da_dv[:6]
        E[:, 2 * nv:] += dt * dt * fd.da_dtau[:6, nv - n:]
        A = se3.Ad(se3.exp(-c))
        M_lam = np.einsum("k,ikj->ij", lam_H, _AD_BASIS)
        H_He = 0.5 * A.T @ M_lam @ J
        K = _right_jacobian_derivative_contraction(c, lam_H)
        cross = np.zeros((m, m))
        cross[:6] = H_He @ E
        H += cross + cross.T + E.T @ (0.5 * (K + K.T)) @ E
    return StepHessian(H[:2 * nv, :2 * nv], H[:2 * nv, 2 * nv:], H[2 * nv:, 2 * nv:])
