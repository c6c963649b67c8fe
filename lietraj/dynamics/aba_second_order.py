"""Second-order derivatives of forward dynamics, as tensors and as the contraction DDP needs (seed 003 digest §3).

With ``u = FD(q, v, tau)`` defined by ``ID(q, v, u) = tau``, differentiating twice (``q_a`` first, then ``q_b``; the
chain rule holds for Lie derivatives taken one after the other) gives, all inverse-dynamics quantities being
evaluated at the consistent ``u`` and ``dM[i, k, a] = dM_ik/dq_a``::

    u_q = -M^-1 ID_q,   u_v = -M^-1 ID_v,   u_tau = M^-1
    u_qq[:, a, b]   = -M^-1 (ID_qq[:, a, b] + dM[:, :, a] u_q[:, b] + dM[:, :, b] u_q[:, a])
    u_qv[:, a, b]   = -M^-1 (ID_qv[:, a, b] + dM[:, :, a] u_v[:, b])
    u_vv            = -M^-1 ID_vv
    u_qtau[:, a, b] = -M^-1 dM[:, :, a] M^-1[:, b],     u_vtau = u_tautau = 0

DDP's backward pass only needs ``sum_i lambda_i d2u_i``: with ``mu = M^-1 lambda`` (one product) and
``P[k, a] = sum_i mu_i dM[i, k, a]`` this is, without forming any third-order forward-dynamics tensor::

    C_qq = -(mu . ID_qq + P^T u_q + u_q^T P),   C_qv = -(mu . ID_qv + P^T u_v),   C_vv = -mu . ID_vv,
    C_qtau = -P^T M^-1

(``mu . T`` contracts the first index of a tensor T). The inverse-dynamics tensors come from IDSVA SO
(``rnea_second_order``), the first-order terms from ``aba_derivatives``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lietraj.dynamics.aba_derivatives import ForwardDynamicsDerivatives, aba_derivatives
from lietraj.dynamics.model import RobotModel
from lietraj.dynamics.rnea_second_order import InverseDynamicsSecondOrder, rnea_second_order_derivatives
from lietraj.dynamics.state import State


@dataclass(eq=False)
class ForwardDynamicsSecondOrder:
    """Second-order derivatives of ``a = aba(x, tau)``, laid out ``[out, in1, in2]`` (in1 first): ``d2a_dq2``,
    ``d2a_dqdv``, ``d2a_dv2``, ``d2a_dqdtau`` (each ``(nv, nv, nv)``), with the first-order result ``first``."""

    d2a_dq2: np.ndarray
    d2a_dqdv: np.ndarray
    d2a_dv2: np.ndarray
    d2a_dqdtau: np.ndarray
    first: object


@dataclass(eq=False)
class ForwardDynamicsHessian:
    """``sum_i lambda_i d2a_i`` in blocks (``(nv, nv)`` each; the ``v-tau`` and ``tau-tau`` blocks are zero):
    ``qq``, ``qv`` (q first, then v; the ``vq`` block is its transpose), ``vv`` and ``qtau``."""

    qq: np.ndarray
    qv: np.ndarray
    vv: np.ndarray
    qtau: np.ndarray


def _parts(model: RobotModel, x: State, tau):
    first = aba_derivatives(model, x, tau)
    so = rnea_second_order_derivatives(model, x, first.a)
    return first, so


def aba_second_order_derivatives(model: RobotModel, x: State, tau) -> ForwardDynamicsSecondOrder:
    """The full second-order tensors of forward dynamics at ``(x, tau)`` (one state; no external wrenches)."""
    first, so = _parts(model, x, tau)
    Minv, u_q, u_v = first.da_dtau, first.da_dq, first.da_dv
    dM_uq = np.einsum("ika,kb->iab", so.dM_dq, u_q)
    u_qq = -np.einsum("ij,jab->iab", Minv, so.d2tau_dq2 + dM_uq + dM_uq.transpose(0, 2, 1))
    u_qv = -np.einsum("ij,jab->iab", Minv, so.d2tau_dqdv + np.einsum("ika,kb->iab", so.dM_dq, u_v))
    u_vv = -np.einsum("ij,jab->iab", Minv, so.d2tau_dv2)
    u_qtau = -np.einsum("ij,jka,kb->iab", Minv, so.dM_dq, Minv)
    return ForwardDynamicsSecondOrder(u_qq, u_qv, u_vv, u_qtau, first)


def hessian_contraction(first: ForwardDynamicsDerivatives, so: InverseDynamicsSecondOrder,
                        lam: np.ndarray) -> ForwardDynamicsHessian:
    """The contraction from its parts: ``first = aba_derivatives(model, x, tau)`` and
    ``so = rnea_second_order_derivatives(model, x, first.a)``."""
    Minv, u_q, u_v = first.da_dtau, first.da_dq, first.da_dv
    mu = Minv @ lam
    P = np.tensordot(mu, so.dM_dq, axes=1)
    qq = -(np.tensordot(mu, so.d2tau_dq2, axes=1) + P.T @ u_q + u_q.T @ P)
    qv = -(np.tensordot(mu, so.d2tau_dqdv, axes=1) + P.T @ u_v)
    vv = -np.tensordot(mu, so.d2tau_dv2, axes=1)
    return ForwardDynamicsHessian(qq, qv, vv, -P.T @ Minv)


def aba_hessian_contraction(model: RobotModel, x: State, tau, lam) -> ForwardDynamicsHessian:
    """``sum_i lam_i d2FD_i / d(q, v, tau)^2`` at ``(x, tau)`` by one product with ``M^-1`` and contractions of the
    inverse-dynamics tensors (seed 003 digest §3), never forming the forward-dynamics tensors."""
    lam = np.asarray(lam, dtype=float)
    if lam.shape != (model.nv,) or not np.all(np.isfinite(lam)):
        raise ValueError(f"aba_hessian_contraction({model.name}): lam must be a finite vector of shape ({model.nv},)")
    return hessian_contraction(*_parts(model, x, tau), lam)
