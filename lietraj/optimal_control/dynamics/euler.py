"""The semi-implicit Euler step of any field on the state group, with its closed-form Jacobians.

For the field ``a = field(x, u)`` (``field.Field``) and ``v = [ν; ṡ]`` (Crocoddyl's
IntegratedActionModelEuler)::

    v⁺ = v + dt a,   H⁺ = H exp(dt ν⁺),   s⁺ = s + dt ṡ⁺          (fixed base: only the s, ṡ parts)

Jacobians in the tangent chart of ``StateSpace``, ``f(x exp(dx), u + du) ≈ f(x, u) exp(F_x dx + F_u du)``, tangent
order ``[z_H; z_s; z_ν; z_ṡ]``. With ``A_q, A_v, B = da/dq, da/dv, da/du`` of the field, the chain rule through
``H exp(ξ)`` (``dY = Ad_{exp(-ξ)} dX + Jr(ξ) dξ`` on the SE(3) rows) gives the closed form::

    G = [dt A_q, I + dt A_v]   (dv⁺/dx)
    F_x = [[Φ, 0] + dt J G;  G],   F_u = [dt² J B;  dt B],   Φ = diag(Ad_{exp(-dt ν⁺)}, I),  J = diag(Jr(dt ν⁺), I)

So the configuration rows of F_x and F_u are the velocity rows ``G``, ``dt B`` mixed by ``dt J``, plus ``[Φ, 0]``:
``EulerStructure`` keeps ``dt``, ``Φ`` and ``J``'s base blocks per knot for the Riccati sweep, which multiplies by
``F_x`` and ``F_u`` through ``G`` and ``dt B`` at half the cost of the dense products. DDP's second-order term of
the step is ``euler_second_order``'s. ``euler_update`` is the step of one state, which the solvers' compiled forward
pass and ``euler_step`` both take.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics._checks import IDENTITY4_STACK
from lietraj.dynamics.lie.se3 import exp_into, pose_exp, pose_times
from lietraj.dynamics.lie.state import Trajectory
from lietraj.optimal_control.dynamics.euler_second_order import StepHessian, euler_step_hessian
from lietraj.optimal_control.dynamics.field import Field, FieldDerivatives


_NOT_ASKED = np.empty((0, 0))  # the rows of a step not asked for


class EulerStructure(NamedTuple):
    """How the Jacobians of semi-implicit Euler steps are built (module docstring), at every knot: the time step
    ``dt`` (N,) and the base blocks ``Phi = Ad_{exp(-dt ν⁺)}``, ``Jr = Jr(dt ν⁺)`` (N, 6, 6; (N, 0, 0) for a fixed
    base) of ``Φ = diag(Phi, I)`` and ``J = diag(Jr, I)``. A knot whose Jacobians are not so built (another
    integrator, an impulse) has ``dt`` NaN."""

    dt: np.ndarray
    Phi: np.ndarray
    Jr: np.ndarray

    @classmethod
    def empty(cls, N: int, nh: int) -> EulerStructure:
        """Arrays for N knots of a state with a base block of size ``nh`` (6, or 0 for a fixed base), every knot
        marked as not built so."""
        return cls(np.full(N, np.nan), np.empty((N, nh, nh)), np.empty((N, nh, nh)))


@kernel
def _euler_jacobians_batch(floating, knots, A, dt, DA_DQ, DA_DV, DA_DU, xi, E, PHI, JR, FX, FU, stepped):
    """Closed-form F_x, F_u of the semi-implicit Euler step at every knot (module docstring), from the knots
    ``(H, S, V)`` and accelerations A (N, nv), whose base rows give a floating base's step twist ``xi = dt nu+ = dt
    (nu + dt a)`` (``step_twists``, the same operations). ``xi`` (6,) and E (4, 4) are work arrays for one knot's
    twist and its exp; PHI and JR (N, 6, 6) receive every knot's Ad_{exp(-xi)} and Jr(xi). ``stepped`` (H+, S+, V+)
    with a row per knot receives the step itself (``euler_update``'s operations, its exp the one the Jacobians
    take), or has no rows (not asked; a fixed base's ``H`` and ``H+``: one unused 4x4). Returns whether every entry
    written is finite (``x - x`` is 0 only for finite x: tested as the entries are written, where a test of the
    arrays afterwards reads them all again)."""
    H, S, V = knots
    H_NEXT, S_NEXT, V_NEXT = stepped
    N, nv, nu = FX.shape[0], DA_DQ.shape[1], FU.shape[2]
    nh, step = 6 if floating else 0, S_NEXT.shape[0] != 0
    ok = True
    for k in range(N):
        if step:
            for i in range(nv):
                v = V[k, i] + dt * A[k, i]
                V_NEXT[k, i] = v
                ok &= v - v == 0.0
            for i in range(S.shape[1]):
                S_NEXT[k, i] = S[k, i] + dt * V_NEXT[k, nh + i]
        Fx, Fu = FX[k], FU[k]
        for r in range(nv):
            for c in range(nv):
                q, v = dt * DA_DQ[k, r, c], dt * DA_DV[k, r, c]
                Fx[nv + r, c] = q
                Fx[nv + r, nv + c] = v
                ok &= q - q + v - v == 0.0
            Fx[nv + r, nv + r] += 1.0
            for c in range(nu):
                b = dt * DA_DU[k, r, c]
                Fu[nv + r, c] = b
                ok &= b - b == 0.0
        for r in range(nh, nv):  # joint rows: s+ = s + dt sdot+
            for c in range(2 * nv):
                x = dt * Fx[nv + r, c]
                Fx[r, c] = x
                ok &= x - x == 0.0
            Fx[r, r] += 1.0
            for c in range(nu):
                b = dt * Fu[nv + r, c]
                Fu[r, c] = b
                ok &= b - b == 0.0
        if nh == 0:
            continue
        Phi, Jr = PHI[k], JR[k]
        for i in range(6):
            xi[i] = dt * (V[k, i] + dt * A[k, i])
        exp_into(xi, E, Phi, Jr, True)
        if step:
            pose_times(H[k], E, H_NEXT[k])
        for r in range(6):  # H+ = H exp(dt nu+): Ad_{exp(-dt nu+)} z_H + Jr(dt nu+) dt dnu+
            for c in range(2 * nv):
                acc = 0.0
                for j in range(6):
                    acc += Jr[r, j] * Fx[nv + j, c]
                x = dt * acc + (Phi[r, c] if c < 6 else 0.0)
                Fx[r, c] = x
                ok &= x - x == 0.0
            for c in range(nu):
                acc = 0.0
                for j in range(6):
                    acc += Jr[r, j] * Fu[nv + j, c]
                Fu[r, c] = dt * acc
                ok &= acc - acc == 0.0
    return ok


def euler_jacobians(dt: float, X: Trajectory, d: FieldDerivatives, F_x: np.ndarray, F_u: np.ndarray,
                    structure: EulerStructure | None = None, stepped: Trajectory | None = None) -> bool:
    """``F_x, F_u`` of the step at every knot of ``X`` from the field's derivatives ``d`` there, in place, how they
    are built into ``structure`` and the step itself into ``stepped`` (N knots, contiguous arrays) when given:
    ``euler_step`` with the accelerations ``d.a``, the same numbers (module docstring). Returns whether they are
    finite."""
    DA = (np.ascontiguousarray(a) for a in (d.da_dq, d.da_dv, d.da_du))
    N, floating = len(X), X.H is not None
    nh = 6 if floating else 0
    keep = structure is not None and structure.Phi.shape[1:] == (nh, nh)
    Phi, Jr = (structure.Phi, structure.Jr) if keep else (np.empty((N, nh, nh)), np.empty((N, nh, nh)))
    H = np.ascontiguousarray(X.H) if floating else IDENTITY4_STACK
    if stepped is None:
        out = (IDENTITY4_STACK, _NOT_ASKED, _NOT_ASKED)
    else:
        out = (stepped.H if floating else IDENTITY4_STACK, stepped.s, stepped.v)  # a fixed base's H+ is not written
    finite = _euler_jacobians_batch(floating, (H, np.ascontiguousarray(X.s), np.ascontiguousarray(X.v)),
                                    np.ascontiguousarray(d.a), dt, *DA, np.empty(6), np.empty((4, 4)), Phi, Jr, F_x, F_u,
                                    out)
    if structure is not None:
        structure.dt[:] = dt if keep else np.nan
    return finite


@helper
def euler_update(floating, dt, acc, H, s, v, H_out, s_out, v_out, z, E):
    """The step of one state (H, s, v) given its acceleration, into (H_out, s_out, v_out): v+ = v + dt a,
    H+ = H exp(dt nu+) (floating base only), s+ = s + dt sdot+."""
    nh = 6 if floating else 0
    for i in range(v.shape[0]):
        v_out[i] = v[i] + dt * acc[i]
    if floating:
        for i in range(6):
            z[i] = dt * v_out[i]
        pose_exp(H, z, H_out, E)
    for i in range(s.shape[0]):
        s_out[i] = s[i] + dt * v_out[nh + i]


@kernel
def _euler_step_batch(floating, dt, H, S, V, A, H_out, S_out, V_out, z, E):
    """``euler_update`` at every knot (a fixed base's H and H_out: one unused 4x4 each); z (6,) and E (4, 4) are
    work arrays."""
    for k in range(S.shape[0]):
        j = k if floating else 0
        euler_update(floating, dt, A[k], H[j], S[k], V[k], H_out[j], S_out[k], V_out[k], z, E)


def euler_step(X: Trajectory, a: np.ndarray, dt: float) -> Trajectory:
    """The semi-implicit Euler step on the group (module docstring) for accelerations ``a`` (N, nv), in one compiled
    call: the floating-point operations of the solvers' compiled forward pass, so that a gap the forward pass
    closes and the one a problem measures are the same numbers."""
    N, floating = len(X), X.H is not None
    Y = Trajectory(np.empty((N, 4, 4)) if floating else None, np.empty(X.s.shape), np.empty(X.v.shape))
    unused = None if floating else np.empty((1, 4, 4))  # a fixed base's poses
    _euler_step_batch(floating, float(dt), np.ascontiguousarray(X.H) if floating else unused,
                      np.ascontiguousarray(X.s), np.ascontiguousarray(X.v), np.ascontiguousarray(a, dtype=np.float64),
                      Y.H if floating else unused, Y.s, Y.v, np.empty(6), np.empty((4, 4)))
    return Y


class SemiImplicitEuler:
    """The semi-implicit Euler integrator (module docstring) of any ``Field``: the step, its Jacobians and DDP's
    second-order term at every knot of a trajectory. Stateless; ``IntegratedDynamics`` composes it with a field."""

    name = "euler"

    def __repr__(self) -> str:
        return "SemiImplicitEuler()"

    def step(self, field: Field, dt: float, X: Trajectory, U) -> Trajectory:
        return euler_step(X, field.acceleration(X, U), dt)

    def derivatives(self, field: Field, dt: float, X: Trajectory, U, F_x: np.ndarray, F_u: np.ndarray,
                    structure: EulerStructure | None = None, threads: int = 1,
                    stepped: Trajectory | None = None) -> bool:
        """``F_x, F_u`` (N, ndx, ndx), (N, ndx, nu) of the step at every knot, in place, how they are built into
        ``structure`` and the step itself into ``stepped`` when given (``euler_jacobians``); the field's derivatives
        shared by ``threads`` threads (``Field.shared_derivatives``). Returns whether they are finite."""
        return euler_jacobians(dt, X, field.shared_derivatives(X, U, threads), F_x, F_u, structure, stepped)

    def hessian_contraction(self, field: Field, dt: float, X: Trajectory, U, LAM: np.ndarray,
                            threads: int = 1, out: StepHessian | None = None) -> StepHessian:
        """DDP's second-order term of the step at every knot (``euler_second_order``) for covectors ``LAM``, into
        ``out`` when given; the field's contraction shared by ``threads`` threads
        (``Field.shared_hessian_contraction``)."""
        return euler_step_hessian(dt, X, field.shared_derivatives(X, U, threads), LAM,
                                  lambda mu: field.shared_hessian_contraction(X, U, mu, threads), out)
