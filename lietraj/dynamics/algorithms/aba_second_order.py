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
``P[k, a] = sum_i mu_i dM[i, k, a]`` this is, without forming any third-order tensor::

    C_qq = -(mu . ID_qq + P^T u_q + u_q^T P),   C_qv = -(mu . ID_qv + P^T u_v),   C_vv = -mu . ID_vv,
    C_qtau = -P^T M^-1

(``mu . T`` contracts the first index of a tensor T). The inverse-dynamics terms come from IDSVA SO
(``rnea_second_order``: as tensors, or their contractions with ``mu`` accumulated during the pass), the
first-order terms from ``aba_derivatives``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lietraj._jit import blas_kernel
from lietraj.dynamics._checks import checked_state, checked_vector, require_finite
from lietraj.dynamics.algorithms.aba_derivatives import ForwardDynamicsDerivatives, aba_derivatives
from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.model.workspace import Workspace, workspace_for
from lietraj.dynamics.algorithms.rnea_second_order import rnea_second_order_contraction, rnea_second_order_derivatives
from lietraj.dynamics.lie.state import State, Trajectory


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


def aba_second_order_derivatives(model: RobotModel, x: State, tau,
                                 workspace: Workspace | None = None) -> ForwardDynamicsSecondOrder:
    """The full second-order tensors of forward dynamics at ``(x, tau)`` (one state; no external wrenches).
    ``workspace``: a ``Workspace(model)`` whose work arrays are reused (without one, each call allocates its own)."""
    what = "aba_second_order_derivatives"
    x = checked_state(model, x, what)
    if type(x) is not State:
        raise TypeError(f"{what}({model.name}): x must be a State (one state), got a Trajectory; "
                        "aba_hessian_contraction takes trajectories")
    tau = checked_vector(tau, model.nv, None, model, what, "tau")
    require_finite(model, what, x, tau=tau)
    workspace = workspace_for(model, workspace, what)
    first = aba_derivatives(model, x, tau, workspace=workspace)
    so = rnea_second_order_derivatives(model, x, first.a, workspace=workspace)
    Minv, u_q, u_v = first.da_dtau, first.da_dq, first.da_dv
    dM_uq = np.einsum("ika,kb->iab", so.dM_dq, u_q)
    u_qq = -np.einsum("ij,jab->iab", Minv, so.d2tau_dq2 + dM_uq + dM_uq.transpose(0, 2, 1))
    u_qv = -np.einsum("ij,jab->iab", Minv, so.d2tau_dqdv + np.einsum("ika,kb->iab", so.dM_dq, u_v))
    u_vv = -np.einsum("ij,jab->iab", Minv, so.d2tau_dv2)
    u_qtau = -np.einsum("ij,jka,kb->iab", Minv, so.dM_dq, Minv)
    return ForwardDynamicsSecondOrder(u_qq, u_qv, u_vv, u_qtau, first)


def aba_hessian_contraction(model: RobotModel, x: State | Trajectory, tau, lam,
                            workspace: Workspace | None = None,
                            derivatives: ForwardDynamicsDerivatives | None = None,
                            other: Workspace | None = None) -> ForwardDynamicsHessian:
    """``sum_i lam_i d2FD_i / d(q, v, tau)^2`` at ``(x, tau)`` by one product with ``M^-1`` and the contraction of
    the inverse-dynamics second-order terms with ``mu = M^-1 lam``, accumulated during the IDSVA SO pass
    (``rnea_second_order_contraction``): no third-order tensor is formed (seed 003 digest §3).

    ``x`` a Trajectory takes ``tau`` and ``lam`` as (N, nv) arrays and returns blocks with a leading N; the
    first- and second-order passes then run once over all knots. ``workspace``: as for ``aba_derivatives``.
    ``derivatives``: ``aba_derivatives`` at the same ``(x, tau)`` when the caller has them (a solver's iteration
    has just computed them for the Jacobians), instead of computing them again. ``other``: the workspace of a second
    thread, which computes half of the knots of the IDSVA SO pass in the same call (``_jit.split_kernel``).
    """
    what = "aba_hessian_contraction"
    x = checked_state(model, x, what)
    N = None if type(x) is State else len(x)
    tau = checked_vector(tau, model.nv, N, model, what, "tau")
    lam = checked_vector(lam, model.nv, N, model, what, "lam")
    require_finite(model, what, x, tau=tau, lam=lam)
    workspace = workspace_for(model, workspace, what)
    first = aba_derivatives(model, x, tau, workspace=workspace) if derivatives is None else derivatives
    Minv, u_q, u_v = first.da_dtau, first.da_dq, first.da_dv
    mu = (Minv @ lam[..., None])[..., 0]
    h = rnea_second_order_contraction(model, x, first.a, mu, workspace=workspace, other=other)
    # P[k, a] = sum_i mu_i dM_ik/dq_a (h.M_q); the blocks replace h's, in one compiled pass over the knots
    blocks = (np.ascontiguousarray(Minv), np.ascontiguousarray(u_q), np.ascontiguousarray(u_v), h.qq, h.qv, h.vv, h.M_q)
    _forward_dynamics_blocks(*(B if N is not None else B[None] for B in blocks), np.empty((model.nv, model.nv)))
    return ForwardDynamicsHessian(h.qq, h.qv, h.vv, h.M_q)


@blas_kernel
def _forward_dynamics_blocks(Minv, u_q, u_v, qq, qv, vv, P, S):
    """At every knot, in place: ``qq <- -(qq + Pᵀ u_q + u_qᵀ P)``, ``qv <- -(qv + Pᵀ u_v)``, ``vv <- -vv`` and
    ``P <- -Pᵀ M⁻¹`` (the module docstring's blocks from the inverse-dynamics contractions), the products by BLAS
    (solo12 3.3 -> 1.3 us a knot, Talos 24 -> 8.2, against loops). ``S`` (nv, nv) is scratch."""
    N, nv = P.shape[0], P.shape[1]
    for k in range(N):
        Pk = P[k]
        np.dot(Pk.T, u_q[k], S)
        for i in range(nv):
            for j in range(i + 1):
                a = -(qq[k, i, j] + S[i, j] + S[j, i])
                b = -(qq[k, j, i] + S[j, i] + S[i, j])
                qq[k, i, j], qq[k, j, i] = a, b
        np.dot(Pk.T, u_v[k], S)
        for i in range(nv):
            for j in range(nv):
                qv[k, i, j] = -(qv[k, i, j] + S[i, j])
                vv[k, i, j] = -vv[k, i, j]
        np.dot(Pk.T, Minv[k], S)
        for i in range(nv):
            for j in range(nv):
                Pk[i, j] = -S[i, j]
