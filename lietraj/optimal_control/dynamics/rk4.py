"""The fourth-order commutator-free Lie-group Runge-Kutta step of any field, with its Jacobians by the chain rule.

The method of Celledoni, Marthinsen and Owren (2003, "Commutator-free Lie group methods", FGCS 19; order conditions
in Owren, Found. Comput. Math. 6, 2006), written for the right action ``ẋ = x λ(x, u)`` with the left-trivialized
field ``λ = [v; a(x, u)]`` (``field.Field``) and ``F_i = dt λ(Y_i, u)``::

    Y₁ = x,  Y₂ = x exp(F₁/2),  Y₃ = x exp(F₂/2),  Y₄ = Y₂ exp(F₃ - F₁/2)
    x⁺ = x exp((3F₁ + 2F₂ + 2F₃ - F₄)/12) exp((-F₁ + 2F₂ + 2F₃ + 3F₄)/12)

It uses only exponentials (no dexp⁻¹, no commutators), has global order 4 (one-step error O(dt⁵)), and on the
vector parts (``s``, ``v``) it is exactly the classical RK4.

Jacobians in the tangent chart of ``StateSpace`` (``f(x exp(dx), u + du) ≈ f(x, u) exp(F_x dx + F_u du)``): for a
composition ``Y = X exp(ξ)`` the chain rule is ``dY = Ad_{exp(-ξ)} dX + Jr(ξ) dξ`` on the SE(3) rows and
``dY = dX + dξ`` elsewhere, and a field node gives ``dF = dt [dY_v; A_q dY_q + A_v dY_v + B du]`` with the field's
derivatives at the stage (one batched call per stage over all knots). DDP's second-order term is in
``rk4_second_order``. ``rk4_stage`` and ``rk4_combine`` are the step of one state for the solvers' compiled forward
pass, with the same floating-point operations as ``RK4.step``'s but numpy's 4x4 products.
"""

from __future__ import annotations

import numpy as np

from lietraj._jit import helper
from lietraj.dynamics.lie.se3 import exp_blocks
from lietraj.dynamics.lie.state import Trajectory, chart_integrate
from lietraj.optimal_control.dynamics.euler import EulerStructure
from lietraj.optimal_control.dynamics.euler_second_order import StepHessian
from lietraj.optimal_control.dynamics.field import Field, FieldDerivatives
from lietraj.optimal_control.dynamics.rk4_second_order import Rk4Sensitivities, Rk4Stages, rk4_step_hessian

_CHUNK_ENTRIES = 32768  # knots per block of the chain rule such that a (knots, ndx, ndx + nu) block stays in cache


@helper
def rk4_stage(stage, floating, H, s, v, F, z, YH, YS, YV, E):
    """The stage state ``Y_{stage+1}`` (stage 1, 2, 3) of the step from (H, s, v) given F[0 .. stage-1], into row 0
    (Y₂) or row 1 (Y₃, Y₄) of (YH, YS, YV); returns its index there."""
    if stage == 3:  # Y4 = Y2 exp(F3 - F1/2)
        for i in range(z.shape[0]):
            z[i] = F[2, i] - 0.5 * F[0, i]
        chart_integrate(YH[0], YS[0], YV[0], z, floating, YH[1], YS[1], YV[1], E)
        return 1
    for i in range(z.shape[0]):  # Y2 = x exp(F1/2), Y3 = x exp(F2/2)
        z[i] = 0.5 * F[stage - 1, i]
    row = stage - 1
    chart_integrate(H, s, v, z, floating, YH[row], YS[row], YV[row], E)
    return row


@helper
def rk4_combine(floating, H, s, v, F, z, YH, YS, YV, E, H_out, s_out, v_out):
    """x⁺ = x exp((3F₁ + 2F₂ + 2F₃ - F₄)/12) exp((-F₁ + 2F₂ + 2F₃ + 3F₄)/12) into (H_out, s_out, v_out)."""
    for i in range(z.shape[0]):
        z[i] = (3.0 * F[0, i] + 2.0 * F[1, i] + 2.0 * F[2, i] - F[3, i]) / 12.0
    chart_integrate(H, s, v, z, floating, YH[0], YS[0], YV[0], E)
    for i in range(z.shape[0]):
        z[i] = (-F[0, i] + 2.0 * F[1, i] + 2.0 * F[2, i] + 3.0 * F[3, i]) / 12.0
    chart_integrate(YH[0], YS[0], YV[0], z, floating, H_out, s_out, v_out, E)


def integrate(X: Trajectory, Z: np.ndarray, blocks: bool = False):
    """Knot-wise X exp(Z) and the SE(3) blocks (Ad_{exp(-Z_H)}, Jr(Z_H)) of its Jacobians (None: fixed base)."""
    nv, nh = X.v.shape[1], 0 if X.H is None else 6
    H = PHI = JR = None
    if nh:
        E, PHI, JR = exp_blocks(Z[:, :6], blocks)
        H = X.H @ E
    return Trajectory(H, X.s + Z[:, nh:nv], X.v + Z[:, nv:]), PHI, JR


def compose(dX: np.ndarray, dZ: np.ndarray, PHI, JR) -> np.ndarray:
    """Sensitivity of X exp(Z): Ad_{exp(-Z_H)} dX + Jr(Z_H) dZ on the SE(3) rows, dX + dZ elsewhere."""
    out = dX + dZ
    if PHI is not None:
        out[:, :6] = PHI @ dX[:, :6] + JR @ dZ[:, :6]
    return out


def _field_sensitivity(d: FieldDerivatives, dY: np.ndarray | None, sl: slice, m: int, dt: float) -> np.ndarray:
    """Sensitivity (m, ndx, ndx + nu) of F = dt λ(Y, u) at the knots ``sl`` given Y's (None: dY = [I 0])."""
    nv, nu = d.da_dq.shape[1], d.da_du.shape[2]
    ndx = 2 * nv
    dF = np.zeros((m, ndx, ndx + nu))
    if dY is None:
        dF[:, :nv, nv:ndx] = np.eye(nv)
        dF[:, nv:, :nv] = d.da_dq[sl]
        dF[:, nv:, nv:ndx] = d.da_dv[sl]
    else:
        dF[:, :nv] = dY[:, nv:]
        # One contiguous [da/dq, da/dv] product: numpy's batched matmul takes its BLAS path only then.
        dF[:, nv:] = np.concatenate((d.da_dq[sl], d.da_dv[sl]), axis=2) @ dY
    dF[:, nv:, ndx:] += d.da_du[sl]
    dF *= dt
    return dF


class RK4:
    """The commutator-free Lie-group RK4 integrator (module docstring) of any ``Field``: the step, its Jacobians and
    DDP's second-order term at every knot of a trajectory. Stateless; ``IntegratedDynamics`` composes it with a
    field."""

    name = "rk4"

    def __repr__(self) -> str:
        return "RK4()"

    def step(self, field: Field, dt: float, X: Trajectory, U) -> Trajectory:
        def F(Y):
            return dt * np.concatenate([Y.v, field.acceleration(Y, U)], axis=1)

        F1 = F(X)
        Y2, _, _ = integrate(X, 0.5 * F1)
        F2 = F(Y2)
        F3 = F(integrate(X, 0.5 * F2)[0])
        F4 = F(integrate(Y2, F3 - 0.5 * F1)[0])
        Z, _, _ = integrate(X, (3.0 * F1 + 2.0 * F2 + 2.0 * F3 - F4) / 12.0)
        return integrate(Z, (-F1 + 2.0 * F2 + 2.0 * F3 + 3.0 * F4) / 12.0)[0]

    @staticmethod
    def stages(field: Field, dt: float, X: Trajectory, U) -> Rk4Stages:
        """The stage states and exponential blocks of the step: one batched ``field.derivatives`` call per stage."""
        Y, fd, XI, PHI, JR, F = [X], [], [], [], [], []
        for i in range(4):
            fd.append(field.derivatives(Y[i], U, i))
            F.append(dt * np.concatenate([Y[i].v, fd[i].a], axis=1))
            if i < 3:
                base, xi = (X, 0.5 * F[i]) if i < 2 else (Y[1], F[2] - 0.5 * F[0])
                y, P, J = integrate(base, xi, True)
                Y.append(y)
                XI.append(xi), PHI.append(P), JR.append(J)
        F1, F2, F3, F4 = F
        XI5 = (3.0 * F1 + 2.0 * F2 + 2.0 * F3 - F4) / 12.0
        Z, P5, J5 = integrate(X, XI5, True)
        XI6 = (-F1 + 2.0 * F2 + 2.0 * F3 + 3.0 * F4) / 12.0
        _, P6, J6 = integrate(Z, XI6, True)
        return Rk4Stages(tuple(Y), tuple(fd), (*XI, XI5, XI6), (*PHI, P5, P6), (*JR, J5, J6))

    @staticmethod
    def chunks(N: int, ndx: int, nu: int):
        """Knot slices such that a (knots, ndx, ndx + nu) sensitivity block stays in cache."""
        chunk = max(1, _CHUNK_ENTRIES // (ndx * (ndx + nu)))
        for k0 in range(0, N, chunk):
            yield slice(k0, min(k0 + chunk, N)), min(chunk, N - k0)

    @staticmethod
    def sensitivities(st: Rk4Stages, dt: float, sl: slice, m: int) -> Rk4Sensitivities:
        """Chain rule through the four stages (module docstring) at the knots ``sl``."""
        p2, p3, p4, p5 = (None if b is None else b[sl] for b in st.PHI[:4])
        k2, k3, k4, k5 = (None if b is None else b[sl] for b in st.JR[:4])
        d1, d2, d3, d4 = st.fd
        ndx, nu = 2 * d1.da_dq.shape[1], d1.da_du.shape[2]
        dX = np.zeros((m, ndx, ndx + nu))
        dX[:, :, :ndx] = np.eye(ndx)
        dF1 = _field_sensitivity(d1, None, sl, m, dt)
        dY2 = compose(dX, 0.5 * dF1, p2, k2)
        dF2 = _field_sensitivity(d2, dY2, sl, m, dt)
        dY3 = compose(dX, 0.5 * dF2, p3, k3)
        dF3 = _field_sensitivity(d3, dY3, sl, m, dt)
        dY4 = compose(dY2, dF3 - 0.5 * dF1, p4, k4)
        dF4 = _field_sensitivity(d4, dY4, sl, m, dt)
        dZ = compose(dX, (3.0 * dF1 + 2.0 * dF2 + 2.0 * dF3 - dF4) / 12.0, p5, k5)
        return Rk4Sensitivities((dX, dY2, dY3, dY4), (dF1, dF2, dF3, dF4), dZ)

    def derivatives(self, field: Field, dt: float, X: Trajectory, U, F_x: np.ndarray, F_u: np.ndarray,
                    structure: EulerStructure | None = None, threads: int = 1) -> bool:
        """``F_x, F_u`` of the step at every knot, in place: the sensitivity of x⁺ = Z exp(ξ₆), a few knots at a
        time. They are dense: ``structure``, when given, marks every knot as not built as an Euler step's. The
        stages depend on each other: all computed in the calling thread, ``threads`` unused. Returns whether they
        are finite."""
        if structure is not None:
            structure.dt[:] = np.nan
        st = self.stages(field, dt, X, U)
        ndx, nu = F_u.shape[1], F_u.shape[2]
        for sl, m in self.chunks(len(X), ndx, nu):
            s = self.sensitivities(st, dt, sl, m)
            dF1, dF2, dF3, dF4 = s.dF
            p6, k6 = (None if b is None else b[sl] for b in (st.PHI[4], st.JR[4]))
            d = compose(s.dZ, (-dF1 + 2.0 * dF2 + 2.0 * dF3 + 3.0 * dF4) / 12.0, p6, k6)
            F_x[sl] = d[:, :, :ndx]
            F_u[sl] = d[:, :, ndx:]
        return bool(np.isfinite(F_x).all() and np.isfinite(F_u).all())

    def hessian_contraction(self, field: Field, dt: float, X: Trajectory, U, LAM: np.ndarray,
                            threads: int = 1, out: StepHessian | None = None) -> StepHessian:
        """DDP's second-order term of the step at every knot (``rk4_second_order``) for covectors ``LAM``, in the
        calling thread (``threads`` unused, as for the derivatives); copied into ``out`` when given."""
        st = self.stages(field, dt, X, U)
        ndx, nu = LAM.shape[1], field.nu
        H = rk4_step_hessian(dt, st, LAM, lambda Y, mu: field.hessian_contraction(Y, U, mu),
                             ((sl, self.sensitivities(st, dt, sl, m)) for sl, m in self.chunks(len(X), ndx, nu)))
        if out is None:
            return H
        out.xx[...], out.xu[...], out.uu[...] = H.xx, H.xu, H.uu
        return out
