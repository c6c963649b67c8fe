"""Discrete-time robot dynamics ``x⁺ = f(x, u)`` on the state group, with exact first-order Jacobians.

The continuous dynamics are ``ẋ = x λ(x, u)`` with the left-trivialized field ``λ = [v; a]``, ``v = [ν; ṡ]``
and ``a = FD(x, u)`` (seed 000 eqs. 9-10, 24); ``u`` are the joint torques (the floating base is unactuated).
Two integrators, both on the group (no Euler angles, no quaternions):

``"euler"`` (default, DESIGN.md "time discretization"; Crocoddyl's IntegratedActionModelEuler)::

    v⁺ = v + dt a,   H⁺ = H exp(dt ν⁺),   s⁺ = s + dt ṡ⁺          (fixed base: only the s, ṡ parts)

``"rk4"``: the fourth-order commutator-free Lie group method of Celledoni, Marthinsen and Owren (2003,
"Commutator-free Lie group methods", FGCS 19; order conditions in Owren, Found. Comput. Math. 6, 2006),
written for the right action ``ẋ = x λ(x)``: with ``F_i = dt λ(Y_i, u)``::

    Y₁ = x,  Y₂ = x exp(F₁/2),  Y₃ = x exp(F₂/2),  Y₄ = Y₂ exp(F₃ - F₁/2)
    x⁺ = x exp((3F₁ + 2F₂ + 2F₃ - F₄)/12) exp((-F₁ + 2F₂ + 2F₃ + 3F₄)/12)

It uses only exponentials (no dexp⁻¹, no commutators), has global order 4 (one-step error O(dt⁵)), and on the
vector parts (``s``, ``v``) it is exactly the classical RK4.

Jacobians are in the tangent chart of ``StateSpace``: ``f(x exp(dx), u + du) ≈ f(x, u) exp(F_x dx + F_u du)``,
tangent order ``[z_H; z_s; z_ν; z_ṡ]``. For a composition ``Y = X exp(ξ)`` the chain rule is
``dY = Ad_{exp(-ξ)} dX + Jr(ξ) dξ`` on the SE(3) rows and ``dY = dX + dξ`` elsewhere (``StateSpace``'s ⊕
Jacobians). For Euler this gives the closed form, with ``A_q, A_v, B = da/dq, da/dv, M⁻¹ S`` from
``aba_derivatives``::

    G = [dt A_q, I + dt A_v]   (dv⁺/dx)
    F_x = [[Φ, 0] + dt K G;  G],   F_u = [dt² K B;  dt B],   Φ = diag(Ad_{exp(-dt ν⁺)}, I),  K = diag(Jr(dt ν⁺), I)

For RK4 the stage Jacobians are composed through the same rules, each stage's ``da/dq, da/dv`` coming from one
batched ``aba_derivatives`` call over all knots. Neither is the continuous ``A dt`` (``linearization.py``).

The second-order term DDP needs, ``D²(λᵀ log(x̄'⁻¹ f(x̄ exp δx, ū + δu)))``, is in ``euler_second_order`` and
``rk4_second_order``, built on the stage values and sensitivities computed here.

``rollout_policy`` is the solvers' forward pass: the closed-loop rollout of the policy
``u_t = clip(ū_t + α k_t + K_t (x_t ⊖ x̄_t))`` with the gaps shrunk as ``x_t ← x_t ⊕ (α - 1) f̄_t`` (module docstring
of ``solvers``). ``DiscreteDynamics`` steps it one knot at a time through ``step``; ``RobotDynamics`` runs the whole
horizon in one compiled call (the chart, the policy, the clipping, the forward dynamics and the group exponentials
of each step), with the same floating-point operations as the knot-wise path, so both give the same trajectory
up to the rounding of numpy's 4x4 matrix products.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics._checks import IDENTITY4, IDENTITY4_STACK, NO_FEXT, NOT_FINITE, OK, check_state, result_arrays
from lietraj.dynamics.algorithms.aba import SINGULAR, aba, aba_core, aba_work
from lietraj.dynamics.algorithms.aba_derivatives import ForwardDynamicsDerivatives, aba_derivatives
from lietraj.dynamics.model.model import ModelArrays, RobotModel
from lietraj.dynamics.model.workspace import Workspace
from lietraj.dynamics.lie.se3 import exp_blocks, exp_into, pose_exp
from lietraj.dynamics.lie.state import State, StateSpace, Trajectory, chart_difference, chart_integrate
from lietraj.optimal_control.dynamics.euler_second_order import StepHessian, euler_step_hessian
from lietraj.optimal_control.dynamics.rk4_second_order import Rk4Sensitivities, Rk4Stages, rk4_step_hessian

INTEGRATORS = ("euler", "rk4")
_CHUNK_ENTRIES = 32768  # RK4 chain rule: knots per block such that a (knots, ndx, ndx + n) block stays in cache


@kernel
def _euler_jacobians_batch(XI, dt, DA_DQ, DA_DV, MINV, E, PHI, K, FX, FU):
    """Closed-form F_x, F_u of the semi-implicit Euler step at every knot (module docstring); XI = dt nu+ has
    zero columns for a fixed base. E, PHI, K are per-knot outputs (exp(XI), Ad_{exp(-XI)}, Jr(XI))."""
    N, nv, nu = FX.shape[0], DA_DQ.shape[1], FU.shape[2]
    nh = 6 if XI.shape[1] == 6 else 0
    for k in range(N):
        Fx, Fu = FX[k], FU[k]
        for r in range(nv):
            for c in range(nv):
                Fx[nv + r, c] = dt * DA_DQ[k, r, c]
                Fx[nv + r, nv + c] = dt * DA_DV[k, r, c]
            Fx[nv + r, nv + r] += 1.0
            for c in range(nu):
                Fu[nv + r, c] = dt * MINV[k, r, nv - nu + c]
        for r in range(nh, nv):  # joint rows: s+ = s + dt sdot+
            for c in range(2 * nv):
                Fx[r, c] = dt * Fx[nv + r, c]
            Fx[r, r] += 1.0
            for c in range(nu):
                Fu[r, c] = dt * Fu[nv + r, c]
        if nh == 0:
            continue
        exp_into(XI[k], E[k], PHI[k], K[k], True)
        Kk, Pk = K[k], PHI[k]
        for r in range(6):  # H+ = H exp(dt nu+): Ad_{exp(-dt nu+)} z_H + Jr(dt nu+) dt dnu+
            for c in range(2 * nv):
                acc = 0.0
                for j in range(6):
                    acc += Kk[r, j] * Fx[nv + j, c]
                Fx[r, c] = dt * acc + (Pk[r, c] if c < 6 else 0.0)
            for c in range(nu):
                acc = 0.0
                for j in range(6):
                    acc += Kk[r, j] * Fu[nv + j, c]
                Fu[r, c] = dt * acc


# ---- closed-loop rollout of a policy (the solvers' forward pass) ------------------------------------------------

_ROLLOUT_FAILURES = {NOT_FINITE: "a non-finite state or control", SINGULAR: "a singular articulated inertia"}


@kernel
def _policy_control(u_ref, k, K, dx, alpha, lb, ub, bounded, u):
    """u = clip(u_ref + alpha k + K dx, lb, ub) (np.clip's branches); returns whether u is finite."""
    ok = True
    for i in range(u.shape[0]):
        acc = 0.0
        for j in range(dx.shape[0]):
            acc += K[i, j] * dx[j]
        ui = u_ref[i] + alpha * k[i] + acc
        if bounded:
            if ui < lb[i]:
                ui = lb[i]
            elif ui > ub[i]:
                ui = ub[i]
        u[i] = ui
        ok = ok and math.isfinite(ui)
    return ok


@helper
def policy_start(floating, H0, s0, v0, H, S, V, tau):
    """Knot 0 of a closed-loop rollout is ``x0``; ``tau`` starts at zero, its base rows stay so (unactuated)."""
    if floating:
        for r in range(4):
            for c in range(4):
                H[0, r, c] = H0[r, c]
    for i in range(s0.shape[0]):
        S[0, i] = s0[i]
    for i in range(v0.shape[0]):
        V[0, i] = v0[i]
    for i in range(tau.shape[0]):
        tau[i] = 0.0


@helper
def policy_knot(t, floating, n, H, S, V, HR, SR, VR, UR, k, K, alpha, GAPS, shrink, LB, UB, bounded, U, DX, E, z,
                tau):
    """Knot ``t`` of a closed-loop rollout, before its step: shrink the gap (FDDP), check the state, ``DX[t] = x ⊖
    x_ref``, and for ``t < N`` the control ``U[t]`` and the actuated part of ``tau``. Returns the status (OK, or why
    knot t fails)."""
    nv = V.shape[1]
    Ht = H[t] if floating else H[0]
    if shrink:
        for i in range(z.shape[0]):
            z[i] = (alpha - 1.0) * GAPS[t, i]
        chart_integrate(Ht, S[t], V[t], z, floating, Ht, S[t], V[t], E)
    status = check_state(floating, n, nv, Ht, S[t], V[t])
    if status != OK:
        return status
    chart_difference(HR[t] if floating else HR[0], SR[t], VR[t], Ht, S[t], V[t], floating, DX[t])
    if t == U.shape[0]:
        return OK
    if not _policy_control(UR[t], k[t], K[t], DX[t], alpha, LB[t], UB[t], bounded, U[t]):
        return NOT_FINITE
    for i in range(n):
        tau[nv - n + i] = U[t, i]
    return OK


@helper
def _field(mi, mf, g, floating, n, dt, H, s, v, tau, fext, W, acc, F):
    """F = dt λ(x, u) = dt [v; FD(x, u)] (RobotDynamics._lambda for one state); returns a status."""
    nv = v.shape[0]
    status = check_state(floating, n, nv, H, s, v)
    if status == OK:
        status = aba_core(mi, mf, g, H, s, v, tau, fext, W, acc)
    for i in range(nv):
        F[i] = dt * v[i]
        F[nv + i] = dt * acc[i]
    return status


@helper
def euler_update(t, floating, n, dt, acc, Ht, H, S, V, z, E):
    """The semi-implicit Euler step from knot t (base pose Ht) given its acceleration, into knot t + 1:
    v+ = v + dt a, H+ = H exp(dt nu+) (floating base only), s+ = s + dt sdot+."""
    nh = 6 if floating else 0
    for i in range(V.shape[1]):
        V[t + 1, i] = V[t, i] + dt * acc[i]
    if floating:
        for i in range(6):
            z[i] = dt * V[t + 1, i]
        pose_exp(Ht, z, H[t + 1], E)
    for i in range(n):
        S[t + 1, i] = S[t, i] + dt * V[t + 1, nh + i]


class RolloutWork(NamedTuple):
    """Work arrays of the closed-loop rollout: ABA's, E (4, 4), tau and acc (nv), F (4, ndx) and z (ndx) for the
    stages, YH (2, 4, 4), YS (2, n), YV (2, nv) for Y₂ and Y₃/Y₄ of RK4."""

    aba: np.ndarray
    E: np.ndarray
    tau: np.ndarray
    acc: np.ndarray
    F: np.ndarray
    z: np.ndarray
    YH: np.ndarray
    YS: np.ndarray
    YV: np.ndarray


def rollout_work(model: RobotModel) -> RolloutWork:
    nv, n = model.nv, model.n
    return RolloutWork(*aba_work(model), np.empty((4, 4)), np.empty(nv), np.empty(nv), np.empty((4, 2 * nv)),
                       np.empty(2 * nv), np.empty((2, 4, 4)), np.empty((2, n)), np.empty((2, nv)))


@kernel
def _policy_rollout_kernel(model, dt, rk4, fext, H0, s0, v0, HR, SR, VR, UR, k, K, alpha, GAPS, shrink, LB, UB,
                           bounded, H, S, V, U, DX, work):
    """The closed-loop rollout of RobotDynamics.rollout_policy into (H, S, V), U, DX (shapes checked by the caller):
    (status, knot), OK and N when every state and control is finite and valid, else the knot of the first bad
    control or state (t + 1 when the step from knot t fails). Work arrays: ``RolloutWork`` (RobotDynamics._step,
    the same operations)."""
    m, w = ModelArrays(*model), RolloutWork(*work)
    mi, mf, g, floating, n = m.joints, m.bodies, m.gravity, m.floating, m.n
    W, E, tau, acc, F, z, YH, YS, YV = w.aba, w.E, w.tau, w.acc, w.F, w.z, w.YH, w.YS, w.YV
    N = U.shape[0]
    policy_start(floating, H0, s0, v0, H, S, V, tau)
    for t in range(N + 1):
        status = policy_knot(t, floating, n, H, S, V, HR, SR, VR, UR, k, K, alpha, GAPS, shrink, LB, UB, bounded, U,
                             DX, E, z, tau)
        if status != OK:
            return status, t
        if t == N:
            break
        Ht = H[t] if floating else H[0]
        Hn = H[t + 1] if floating else H[0]
        if not rk4:  # semi-implicit Euler: v+ = v + dt a, H+ = H exp(dt nu+), s+ = s + dt sdot+
            status = aba_core(mi, mf, g, Ht, S[t], V[t], tau, fext, W, acc)
            if status != OK:
                return status, t + 1
            euler_update(t, floating, n, dt, acc, Ht, H, S, V, z, E)
            continue
        # RK4: Y2 = x exp(F1/2), Y3 = x exp(F2/2), Y4 = Y2 exp(F3 - F1/2), Z = x exp(ξ5), x+ = Z exp(ξ6)
        F1, F2, F3, F4 = F[0], F[1], F[2], F[3]
        Y2H, Y2s, Y2v, Y3H, Y3s, Y3v = YH[0], YS[0], YV[0], YH[1], YS[1], YV[1]
        status = _field(mi, mf, g, floating, n, dt, Ht, S[t], V[t], tau, fext, W, acc, F1)
        if status == OK:
            for i in range(z.shape[0]):
                z[i] = 0.5 * F1[i]
            chart_integrate(Ht, S[t], V[t], z, floating, Y2H, Y2s, Y2v, E)
            status = _field(mi, mf, g, floating, n, dt, Y2H, Y2s, Y2v, tau, fext, W, acc, F2)
        if status == OK:
            for i in range(z.shape[0]):
                z[i] = 0.5 * F2[i]
            chart_integrate(Ht, S[t], V[t], z, floating, Y3H, Y3s, Y3v, E)
            status = _field(mi, mf, g, floating, n, dt, Y3H, Y3s, Y3v, tau, fext, W, acc, F3)
        if status == OK:
            for i in range(z.shape[0]):
                z[i] = F3[i] - 0.5 * F1[i]
            chart_integrate(Y2H, Y2s, Y2v, z, floating, Y3H, Y3s, Y3v, E)
            status = _field(mi, mf, g, floating, n, dt, Y3H, Y3s, Y3v, tau, fext, W, acc, F4)
        if status != OK:
            return status, t + 1
        for i in range(z.shape[0]):
            z[i] = (3.0 * F1[i] + 2.0 * F2[i] + 2.0 * F3[i] - F4[i]) / 12.0
        chart_integrate(Ht, S[t], V[t], z, floating, Y2H, Y2s, Y2v, E)
        for i in range(z.shape[0]):
            z[i] = (-F1[i] + 2.0 * F2[i] + 2.0 * F3[i] + 3.0 * F4[i]) / 12.0
        chart_integrate(Y2H, Y2s, Y2v, z, floating, Hn, S[t + 1], V[t + 1], E)
    return OK, N


@dataclass(eq=False)
class DiscreteDerivatives:
    """``F_x`` (ndx, ndx) and ``F_u`` (ndx, nu) of ``x⁺ = f(x, u)`` in the tangent chart, with a leading ``N`` for
    a trajectory: ``f(x exp(dx), u + du) ≈ f(x, u) exp(F_x dx + F_u du)``. Unpacks as ``F_x, F_u = ...``."""

    F_x: np.ndarray
    F_u: np.ndarray

    def __iter__(self):
        return iter((self.F_x, self.F_u))


@dataclass(eq=False)
class PolicyRollout:
    """The closed-loop rollout of ``rollout_policy``: states ``X`` (N + 1 knots), controls ``U`` (N, nu) and chart
    deviations ``DX`` (N + 1, ndx), ``DX[t] = X[t] ⊖ X_ref[t]``. ``failed_at`` is -1, or the first knot whose control
    is non-finite or whose state is non-finite, invalid or could not be computed (the step to it failed); ``reason``
    says what, and the arrays are filled only up to that knot."""

    X: Trajectory
    U: np.ndarray
    DX: np.ndarray
    failed_at: int = -1
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.failed_at < 0


def _policy_array(x, shape: tuple[int, ...], name: str) -> np.ndarray:
    a = np.ascontiguousarray(x, dtype=np.float64)
    if a.shape != shape:
        raise ValueError(f"rollout_policy: {name} must have shape {shape}, got {a.shape}")
    return a


def _policy_arguments(space: StateSpace, nu: int, x0: State, X_ref: Trajectory, U_ref, k, K, gaps, u_lb, u_ub):
    """Shape-checked float64 C-contiguous inputs of ``rollout_policy`` and the bounds (N, nu) (``None`` for none).
    Values are not checked: a non-finite one ends the rollout with a status."""
    U_ref = np.ascontiguousarray(U_ref, dtype=np.float64)
    if U_ref.ndim != 2 or U_ref.shape[1] != nu:
        raise ValueError(f"rollout_policy: U_ref must have shape (N, {nu}), got {U_ref.shape}")
    N, n, nv, ndx = U_ref.shape[0], space.n, space.nv, space.ndx
    for name, x, knots_ in (("x0", x0, None), ("X_ref", X_ref, N + 1)):
        kind = State if knots_ is None else Trajectory
        lead = () if knots_ is None else (knots_,)
        if (type(x) is not kind or (x.H is not None) != space.floating_base
                or (x.H is not None and x.H.shape != lead + (4, 4)) or x.s.shape != lead + (n,)
                or x.v.shape != lead + (nv,)):
            raise ValueError(f"rollout_policy: {name} must be a {kind.__name__} of {space}"
                             + ("" if knots_ is None else f" with N + 1 = {knots_} knots"))
    X_ref = Trajectory(None if X_ref.H is None else np.ascontiguousarray(X_ref.H, dtype=np.float64),
                       np.ascontiguousarray(X_ref.s, dtype=np.float64), np.ascontiguousarray(X_ref.v, dtype=np.float64))
    k = _policy_array(k, (N, nu), "k")
    K = _policy_array(K, (N, nu, ndx), "K")
    gaps = None if gaps is None else _policy_array(gaps, (N + 1, ndx), "gaps")
    bounds = None
    if u_lb is not None or u_ub is not None:
        try:
            bounds = tuple(np.ascontiguousarray(np.broadcast_to(np.asarray(fill if b is None else b, dtype=np.float64),
                                                                (N, nu))) for b, fill in ((u_lb, -np.inf), (u_ub, np.inf)))
        except ValueError:
            raise ValueError(f"rollout_policy: u_lb and u_ub must broadcast to ({N}, {nu})") from None
    return X_ref, U_ref, k, K, gaps, bounds


def rollout_policy_per_knot(dynamics: DiscreteDynamics | Sequence[DiscreteDynamics], x0: State, X_ref: Trajectory,
                            U_ref, k, K, alpha: float, gaps=None, u_lb=None, u_ub=None) -> PolicyRollout:
    """``rollout_policy`` stepping knot ``t`` with ``dynamics.step`` (or ``dynamics[t].step`` for a sequence of N
    objects), one Python call per knot: the generic path, and the solvers' forward pass when the knots do not share
    one dynamics object. A step that raises ValueError or ArithmeticError, or a non-finite state or control, ends
    the rollout with a status."""
    shared = isinstance(dynamics, DiscreteDynamics)
    if not shared and len(dynamics) == 0:
        raise ValueError("rollout_policy: no dynamics objects")
    first = dynamics if shared else dynamics[0]
    sp, nu = first.state_space, first.nu
    X_ref, U_ref, k, K, gaps, bounds = _policy_arguments(sp, nu, x0, X_ref, U_ref, k, K, gaps, u_lb, u_ub)
    N, floating, alpha = U_ref.shape[0], sp.floating_base, float(alpha)
    if not shared and len(dynamics) != N:
        raise ValueError(f"rollout_policy: {len(dynamics)} dynamics objects for {N} knots")
    LB, UB = (U_ref, U_ref) if bounds is None else bounds
    shrink = gaps is not None and alpha != 1.0
    X, U, DX = sp.trajectory(N + 1), np.empty((N, nu)), np.empty((N + 1, sp.ndx))
    E = np.empty((4, 4))
    X[0] = x0
    t = 0
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        try:
            for t in range(N + 1):
                x = X[t]
                H = x.H if floating else IDENTITY4
                if shrink:
                    chart_integrate(H, x.s, x.v, (alpha - 1.0) * gaps[t], floating, H, x.s, x.v, E)
                if not (np.isfinite(x.s).all() and np.isfinite(x.v).all() and (not floating or np.isfinite(H).all())):
                    return PolicyRollout(X, U, DX, t, f"a non-finite state at knot {t}")
                chart_difference(X_ref.H[t] if floating else IDENTITY4, X_ref.s[t], X_ref.v[t], H, x.s, x.v, floating,
                                  DX[t])
                if t == N:
                    break
                if not _policy_control(U_ref[t], k[t], K[t], DX[t], alpha, LB[t], UB[t], bounds is not None, U[t]):
                    return PolicyRollout(X, U, DX, t, f"a non-finite control at knot {t}")
                X[t + 1] = (first if shared else dynamics[t]).step(x, U[t])
        except (ValueError, ArithmeticError) as e:
            return PolicyRollout(X, U, DX, t + 1, f"the step from knot {t} failed: {e}")
    return PolicyRollout(X, U, DX)


def covectors(LAM, N: int, ndx: int, who: str) -> np.ndarray:
    """DDP's covectors ``LAM`` (N, ndx) on the next states' tangent, checked (finite, one per knot) as float64."""
    LAM = np.asarray(LAM, dtype=np.float64)
    if LAM.shape != (N, ndx) or not np.all(np.isfinite(LAM)):
        raise ValueError(f"{who}.hessian_contraction: lam must be finite with shape ({ndx},) per knot, got {LAM.shape} "
                         f"for {N} knot(s)")
    return LAM


def joint_torques(model: RobotModel, X: Trajectory, U, who: str, out: np.ndarray | None = None) -> np.ndarray:
    """Checked (N, n) joint torques as (N, nv) generalized forces (zero wrench on a floating base), written into
    ``out`` (N, nv, zero in its base columns) when given."""
    if type(X) is not Trajectory:
        raise TypeError(f"expected a Trajectory, got {type(X).__name__}")
    U = np.asarray(U, dtype=np.float64)
    N = len(X)
    if U.shape != (N, model.n):
        raise ValueError(f"{who}({model.name}): u must have shape ({model.n},) per knot, got {U.shape} for {N} knot(s)")
    if not np.all(np.isfinite(U)):
        raise ValueError(f"{who}({model.name}): u contains NaN or inf")
    if not model.floating_base:
        return U
    tau = np.zeros((N, model.nv)) if out is None else out
    tau[:, 6:] = U
    return tau


def euler_step(X: Trajectory, a: np.ndarray, dt: float) -> Trajectory:
    """The semi-implicit Euler step on the group (DESIGN.md) for accelerations ``a`` (N, nv):
    ``v⁺ = v + dt a``, ``H⁺ = H exp(dt ν⁺)``, ``s⁺ = s + dt ṡ⁺``."""
    nh = 0 if X.H is None else 6
    V = X.v + dt * a
    H = X.H @ exp_blocks(dt * V[:, :6], False)[0] if nh else None
    return Trajectory(H, X.s + dt * V[:, nh:], V)


class DiscreteDynamics(ABC):
    """Plug-in interface of the solvers: ``x⁺ = f(x, u)`` on a ``StateSpace`` and its first-order Jacobians.

    A subclass sets ``state_space``, ``nu`` (control size) and ``dt``, and implements ``step_trajectory`` and
    ``trajectory_derivatives`` (all knots at once, the solvers' hot path); the single-state ``step``,
    ``derivatives`` and ``rollout`` come from those.
    """

    state_space: StateSpace
    nu: int
    dt: float

    @abstractmethod
    def step_trajectory(self, X: Trajectory, U) -> Trajectory:
        """Knot-wise ``f(X[k], U[k])`` for ``U`` of shape (N, nu) (not a rollout: knots are independent)."""

    @abstractmethod
    def trajectory_derivatives(self, X: Trajectory, U, out: DiscreteDerivatives | None = None) -> DiscreteDerivatives:
        """``F_x`` (N, ndx, ndx) and ``F_u`` (N, ndx, nu) at every knot; ``out`` is overwritten when given."""

    def step(self, x: State, u) -> State:
        """``x⁺ = f(x, u)`` for one state."""
        return self.step_trajectory(Trajectory.repeat(x, 1), np.asarray(u, dtype=np.float64)[None])[0]

    def derivatives(self, x: State | Trajectory, u, out: DiscreteDerivatives | None = None) -> DiscreteDerivatives:
        """``F_x, F_u`` at one state (``(ndx, ndx)``, ``(ndx, nu)``) or at every knot of a trajectory."""
        if type(x) is Trajectory:
            return self.trajectory_derivatives(x, u, out)
        out1 = None if out is None else DiscreteDerivatives(out.F_x[None], out.F_u[None])
        d = self.trajectory_derivatives(Trajectory.repeat(x, 1), np.asarray(u, dtype=np.float64)[None], out1)
        return DiscreteDerivatives(d.F_x[0], d.F_u[0]) if out is None else out

    def trajectory_hessian_contraction(self, X: Trajectory, U, LAM) -> StepHessian:
        """The second-order term of DDP at every knot: the symmetric Hessian in ``(dx, du)`` of
        ``LAM[k]ᵀ log(f(x_k, u_k)⁻¹ f(x_k exp dx, u_k + du))``, as ``StepHessian`` blocks (N, ndx, ndx), (N, ndx, nu),
        (N, nu, nu). Optional: dynamics without it can be solved by iLQR, which needs only the Jacobians."""
        raise NotImplementedError(f"{type(self).__name__} does not implement trajectory_hessian_contraction (the "
                                  "second-order dynamics term of DDP); use iLQR, which needs only the Jacobians")

    def hessian_contraction(self, x: State, u, lam) -> StepHessian:
        """``trajectory_hessian_contraction`` at one state: blocks (ndx, ndx), (ndx, nu), (nu, nu)."""
        self.state_space.check(x)
        H = self.trajectory_hessian_contraction(Trajectory.repeat(x, 1), np.asarray(u, dtype=np.float64)[None],
                                                np.asarray(lam, dtype=np.float64)[None])
        return StepHessian(H.xx[0], H.xu[0], H.uu[0])

    def rollout_policy(self, x0: State, X_ref: Trajectory, U_ref, k, K, alpha: float, gaps=None, u_lb=None,
                       u_ub=None) -> PolicyRollout:
        """The closed-loop rollout of the policy ``u_t = clip(U_ref[t] + alpha k[t] + K[t] (x_t ⊖ X_ref[t]), u_lb[t],
        u_ub[t])`` from ``x_0 = x0``, with ``x_t ← x_t ⊕ (alpha - 1) gaps[t]`` when ``gaps`` (N + 1, ndx) are given and
        ``alpha < 1`` (the solvers' forward pass). ``U_ref``, ``k`` are (N, nu), ``K`` (N, nu, ndx), ``X_ref`` has
        N + 1 knots; the bounds are (nu,) or (N, nu), ``None`` for none. Bad shapes raise ValueError; a non-finite or
        invalid state or control ends the rollout with a status (``PolicyRollout.failed_at``). This generic version
        calls ``step`` once per knot; subclasses may run it in one compiled call."""
        return rollout_policy_per_knot(self, x0, X_ref, U_ref, k, K, alpha, gaps, u_lb, u_ub)

    def rollout(self, x0: State, U) -> Trajectory:
        """States ``x_0 .. x_N`` from ``x_0`` under the controls ``U`` (N, nu), one step after the other."""
        U = np.asarray(U, dtype=np.float64)
        if U.ndim != 2 or U.shape[1] != self.nu:
            raise ValueError(f"rollout: U must have shape (N, {self.nu}), got {U.shape}")
        X = self.state_space.trajectory(U.shape[0] + 1)
        X[0] = x0
        for k in range(U.shape[0]):
            X[k + 1] = self.step(X[k], U[k])
        return X


class TorqueDriven:
    """What the robot dynamics driven by ``model``'s joint torques share: their workspace (the work arrays of the
    algorithms, and output buffers per purpose and knot count, reused call after call), and the generalized forces
    ``[0; u]`` of the joint torques. The workspace makes an object serve one thread at a time; two threads solving
    two problems on one robot each have their own dynamics objects."""

    def _buffer(self, key: str, N: int, build):
        return self.workspace.cached((type(self).__name__, key, N), build)

    def _torques(self, X: Trajectory, U) -> np.ndarray:
        N = len(X) if type(X) is Trajectory else 0
        return joint_torques(self.model, X, U, type(self).__name__,
                             self._buffer("tau", N, lambda: np.zeros((N, self.model.nv))))


class RobotDynamics(TorqueDriven, DiscreteDynamics):
    """Discrete dynamics of a ``RobotModel`` driven by its joint torques, by semi-implicit Euler or RK4 on the
    state group (module docstring), with constant body-frame external wrenches ``fext`` (``(nb, 6)``, optional).

    Every trajectory-level call evaluates the forward dynamics (and its derivatives) of all knots in one compiled
    call per integrator stage.
    """

    def __init__(self, model: RobotModel, dt: float, integrator: str = "euler", fext=None):
        if not (isinstance(dt, (int, float, np.floating)) and math.isfinite(dt) and dt > 0):
            raise ValueError(f"RobotDynamics: dt must be a finite positive number, got {dt!r}")
        if integrator not in INTEGRATORS:
            raise ValueError(f"RobotDynamics: integrator must be one of {INTEGRATORS}, got {integrator!r}")
        if fext is not None:
            fext = np.array(fext, dtype=np.float64)
            if fext.shape != (model.nb, 6) or not np.all(np.isfinite(fext)):
                raise ValueError(f"RobotDynamics({model.name}): fext must be a finite ({model.nb}, 6) array")
        self.model = model
        self.dt = float(dt)
        self.integrator = integrator
        self.fext = fext
        self.state_space = model.state_space
        self.nu = model.n
        self.workspace = Workspace(model)

    def __repr__(self) -> str:
        return f"RobotDynamics({self.model.name!r}, dt={self.dt}, integrator={self.integrator!r})"

    # ---- helpers -----------------------------------------------------------------------------------------

    def _fext(self, N: int):
        if self.fext is None:
            return None
        return self._buffer("fext", N, lambda: np.ascontiguousarray(np.broadcast_to(self.fext, (N,) + self.fext.shape)))

    def _fd_derivatives(self, Y: Trajectory, tau: np.ndarray, stage: int) -> ForwardDynamicsDerivatives:
        N, nv = len(Y), self.model.nv
        out = self._buffer(f"fd{stage}", N, lambda: ForwardDynamicsDerivatives(
            np.empty((N, nv)), np.empty((N, nv, nv)), np.empty((N, nv, nv)), np.empty((N, nv, nv))))
        return aba_derivatives(self.model, Y, tau, self._fext(N), out=out, workspace=self.workspace)

    @staticmethod
    def _exp(XI: np.ndarray, blocks: bool):
        return exp_blocks(XI, blocks)

    def _integrate(self, X: Trajectory, Z: np.ndarray, blocks: bool = False):
        """Knot-wise X exp(Z) and the SE(3) blocks (Ad_{exp(-Z_H)}, Jr(Z_H)) of its Jacobians (None: fixed base)."""
        nv, nh = self.model.nv, 6 if self.model.floating_base else 0
        H = PHI = K = None
        if nh:
            E, PHI, K = self._exp(Z[:, :6], blocks)
            H = X.H @ E
        return Trajectory(H, X.s + Z[:, nh:nv], X.v + Z[:, nv:]), PHI, K

    def _checked(self, Y: Trajectory, what: str) -> Trajectory:
        k = Y.first_non_finite()
        if k is not None:
            raise ValueError(f"RobotDynamics({self.model.name}).{what}: the step diverged (non-finite state) at knot "
                             f"{k}; reduce dt or the controls")
        return Y

    def _lambda(self, Y: Trajectory, tau: np.ndarray) -> np.ndarray:
        """dt λ(Y, u) = dt [v; FD(Y, u)] per knot, (N, ndx)."""
        return self.dt * np.concatenate([Y.v, aba(self.model, Y, tau, self._fext(len(Y)), workspace=self.workspace)],
                                        axis=1)

    # ---- steps ---------------------------------------------------------------------------------------------

    def step_trajectory(self, X: Trajectory, U) -> Trajectory:
        tau = self._torques(X, U)
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging step is reported by _checked
            return self._checked(self._step(X, tau), "step")

    def _step(self, X: Trajectory, tau: np.ndarray) -> Trajectory:
        if self.integrator == "euler":
            return euler_step(X, aba(self.model, X, tau, self._fext(len(X)), workspace=self.workspace), self.dt)
        F1 = self._lambda(X, tau)
        Y2, _, _ = self._integrate(X, 0.5 * F1)
        F2 = self._lambda(Y2, tau)
        F3 = self._lambda(self._integrate(X, 0.5 * F2)[0], tau)
        F4 = self._lambda(self._integrate(Y2, F3 - 0.5 * F1)[0], tau)
        Z, _, _ = self._integrate(X, (3.0 * F1 + 2.0 * F2 + 2.0 * F3 - F4) / 12.0)
        return self._integrate(Z, (-F1 + 2.0 * F2 + 2.0 * F3 + 3.0 * F4) / 12.0)[0]

    def rollout_policy(self, x0: State, X_ref: Trajectory, U_ref, k, K, alpha: float, gaps=None, u_lb=None,
                       u_ub=None) -> PolicyRollout:
        """``DiscreteDynamics.rollout_policy`` in one compiled call over the whole horizon (Euler and RK4)."""
        m, sp = self.model, self.state_space
        X_ref, U_ref, k, K, gaps, bounds = _policy_arguments(sp, self.nu, x0, X_ref, U_ref, k, K, gaps, u_lb, u_ub)
        N, floating = U_ref.shape[0], m.floating_base
        X = Trajectory(np.empty((N + 1, 4, 4)) if floating else None, np.empty((N + 1, m.n)), np.empty((N + 1, m.nv)))
        U, DX = np.empty((N, m.n)), np.empty((N + 1, sp.ndx))
        LB, UB = (U_ref, U_ref) if bounds is None else bounds
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # only Python (NUMBA_DISABLE_JIT) warns on a divergence
            status, knot = _policy_rollout_kernel(
                m.packed, self.dt, self.integrator == "rk4", NO_FEXT if self.fext is None else self.fext,
                np.ascontiguousarray(x0.H, dtype=np.float64) if floating else IDENTITY4,
                np.ascontiguousarray(x0.s, dtype=np.float64), np.ascontiguousarray(x0.v, dtype=np.float64),
                X_ref.H if floating else IDENTITY4_STACK, X_ref.s, X_ref.v, U_ref, k, K, float(alpha),
                U_ref if gaps is None else gaps, gaps is not None and alpha != 1.0, LB, UB, bounds is not None,
                X.H if floating else IDENTITY4_STACK, X.s, X.v, U, DX, self.workspace.work(rollout_work))
        if status == OK:
            return PolicyRollout(X, U, DX)
        what = _ROLLOUT_FAILURES.get(status, "an invalid base pose")
        return PolicyRollout(X, U, DX, int(knot), f"RobotDynamics({m.name}).rollout_policy: {what} at knot {knot}")

    # ---- derivatives ----------------------------------------------------------------------------------------

    def trajectory_derivatives(self, X: Trajectory, U, out: DiscreteDerivatives | None = None) -> DiscreteDerivatives:
        tau = self._torques(X, U)
        N, nv, n = len(X), self.model.nv, self.model.n
        F_x, F_u = result_arrays(out, DiscreteDerivatives, ((N, 2 * nv, 2 * nv), (N, 2 * nv, n)), "derivatives")
        if self.integrator == "euler":
            d = self._fd_derivatives(X, tau, 0)
            if self.model.floating_base:
                XI = self.dt * (X.v[:, :6] + self.dt * d.a[:, :6])
            else:
                XI = np.zeros((N, 0))
            E, PHI, K = self._buffer("euler_blocks", N, lambda: (np.empty((N, 4, 4)), np.empty((N, 6, 6)),
                                                                  np.empty((N, 6, 6))))
            _euler_jacobians_batch(XI, self.dt, d.da_dq, d.da_dv, d.da_dtau, E, PHI, K, F_x, F_u)
        else:
            self._rk4_derivatives(X, tau, F_x, F_u)
        if not (np.isfinite(F_x).all() and np.isfinite(F_u).all()):
            raise ValueError(f"RobotDynamics({self.model.name}).derivatives: non-finite Jacobian (the step diverged)")
        return DiscreteDerivatives(F_x, F_u) if out is None else out

    def _dfield(self, d: ForwardDynamicsDerivatives, dY: np.ndarray | None, sl: slice, m: int) -> np.ndarray:
        """Sensitivity (m, ndx, ndx + n) of F = dt λ(Y, u) at the knots ``sl`` given Y's (None: dY = [I 0])."""
        nv, n, dt = self.model.nv, self.model.n, self.dt
        ndx = 2 * nv
        dF = np.zeros((m, ndx, ndx + n))
        if dY is None:
            dF[:, :nv, nv:ndx] = np.eye(nv)
            dF[:, nv:, :nv] = d.da_dq[sl]
            dF[:, nv:, nv:ndx] = d.da_dv[sl]
        else:
            dF[:, :nv] = dY[:, nv:]
            # One contiguous [da/dq, da/dv] product: numpy's batched matmul takes its BLAS path only then.
            dF[:, nv:] = np.concatenate((d.da_dq[sl], d.da_dv[sl]), axis=2) @ dY
        dF[:, nv:, ndx:] += d.da_dtau[sl, :, nv - n:]
        dF *= dt
        return dF

    @staticmethod
    def _compose(dX: np.ndarray, dZ: np.ndarray, PHI, K) -> np.ndarray:
        """Sensitivity of X exp(Z): Ad_{exp(-Z_H)} dX + Jr(Z_H) dZ on the SE(3) rows, dX + dZ elsewhere."""
        out = dX + dZ
        if PHI is not None:
            out[:, :6] = PHI @ dX[:, :6] + K @ dZ[:, :6]
        return out

    def _rk4_stages(self, X: Trajectory, tau: np.ndarray) -> Rk4Stages:
        """The stage states and exponential blocks of the RK4 step: one batched aba_derivatives call per stage."""
        dt = self.dt
        d1 = self._fd_derivatives(X, tau, 1)
        F1 = dt * np.concatenate([X.v, d1.a], axis=1)
        XI2 = 0.5 * F1
        Y2, P2, K2 = self._integrate(X, XI2, True)
        d2 = self._fd_derivatives(Y2, tau, 2)
        F2 = dt * np.concatenate([Y2.v, d2.a], axis=1)
        XI3 = 0.5 * F2
        Y3, P3, K3 = self._integrate(X, XI3, True)
        d3 = self._fd_derivatives(Y3, tau, 3)
        F3 = dt * np.concatenate([Y3.v, d3.a], axis=1)
        XI4 = F3 - 0.5 * F1
        Y4, P4, K4 = self._integrate(Y2, XI4, True)
        d4 = self._fd_derivatives(Y4, tau, 4)
        F4 = dt * np.concatenate([Y4.v, d4.a], axis=1)
        XI5 = (3.0 * F1 + 2.0 * F2 + 2.0 * F3 - F4) / 12.0
        Z, P5, K5 = self._integrate(X, XI5, True)
        XI6 = (-F1 + 2.0 * F2 + 2.0 * F3 + 3.0 * F4) / 12.0
        _, P6, K6 = self._integrate(Z, XI6, True)
        return Rk4Stages((X, Y2, Y3, Y4), (d1, d2, d3, d4), (XI2, XI3, XI4, XI5, XI6), (P2, P3, P4, P5, P6),
                         (K2, K3, K4, K5, K6))

    def _chunks(self, N: int):
        """Knot slices such that a (knots, ndx, ndx + n) sensitivity block stays in cache."""
        ndx, n = self.state_space.ndx, self.model.n
        chunk = max(1, _CHUNK_ENTRIES // (ndx * (ndx + n)))
        for k0 in range(0, N, chunk):
            yield slice(k0, min(k0 + chunk, N)), min(chunk, N - k0)

    def _rk4_sensitivities(self, st: Rk4Stages, sl: slice, m: int) -> Rk4Sensitivities:
        """Chain rule through the four stages of the commutator-free RK4 (module docstring) at the knots ``sl``."""
        ndx, n = self.state_space.ndx, self.model.n
        p2, p3, p4, p5 = (None if b is None else b[sl] for b in st.PHI[:4])
        k2, k3, k4, k5 = (None if b is None else b[sl] for b in st.JR[:4])
        d1, d2, d3, d4 = st.fd
        dX = np.zeros((m, ndx, ndx + n))
        dX[:, :, :ndx] = np.eye(ndx)
        dF1 = self._dfield(d1, None, sl, m)
        dY2 = self._compose(dX, 0.5 * dF1, p2, k2)
        dF2 = self._dfield(d2, dY2, sl, m)
        dY3 = self._compose(dX, 0.5 * dF2, p3, k3)
        dF3 = self._dfield(d3, dY3, sl, m)
        dY4 = self._compose(dY2, dF3 - 0.5 * dF1, p4, k4)
        dF4 = self._dfield(d4, dY4, sl, m)
        dZ = self._compose(dX, (3.0 * dF1 + 2.0 * dF2 + 2.0 * dF3 - dF4) / 12.0, p5, k5)
        return Rk4Sensitivities((dX, dY2, dY3, dY4), (dF1, dF2, dF3, dF4), dZ)

    def _rk4_derivatives(self, X: Trajectory, tau: np.ndarray, F_x: np.ndarray, F_u: np.ndarray) -> None:
        """F_x, F_u of the RK4 step: the sensitivity of x⁺ = Z exp(ξ₆), a few knots at a time."""
        st = self._rk4_stages(X, tau)
        ndx = self.state_space.ndx
        for sl, m in self._chunks(len(X)):
            s = self._rk4_sensitivities(st, sl, m)
            dF1, dF2, dF3, dF4 = s.dF
            p6, k6 = (None if b is None else b[sl] for b in (st.PHI[4], st.JR[4]))
            d = self._compose(s.dZ, (-dF1 + 2.0 * dF2 + 2.0 * dF3 + 3.0 * dF4) / 12.0, p6, k6)
            F_x[sl] = d[:, :, :ndx]
            F_u[sl] = d[:, :, ndx:]

    # ---- second order ---------------------------------------------------------------------------------------

    def trajectory_hessian_contraction(self, X: Trajectory, U, LAM) -> StepHessian:
        """The second-order term of DDP at every knot (``euler_second_order``, ``rk4_second_order``), exact; the
        forward-dynamics contraction of each stage is the dominant cost. Not available with external wrenches."""
        m = self.model
        if self.fext is not None:
            # A constant body-frame wrench on any body but a floating base adds -d2(J^T f)/dq2 to the second-order
            # inverse-dynamics tensors, which rnea_second_order does not compute.
            raise NotImplementedError(f"RobotDynamics({m.name}).trajectory_hessian_contraction: not available with "
                                      "external wrenches (fext); use iLQR, which needs only the Jacobians")
        tau = self._torques(X, U)
        N, ndx = len(X), self.state_space.ndx
        LAM = covectors(LAM, N, ndx, f"RobotDynamics({m.name})")
        if self.integrator == "euler":
            d = self._fd_derivatives(X, tau, 0)
            XI, PHI, JR = np.zeros((N, 0)), None, None
            if m.floating_base:
                XI = self.dt * (X.v[:, :6] + self.dt * d.a[:, :6])
                _, PHI, JR = self._exp(XI, True)
            H = euler_step_hessian(m, self.dt, X, tau, d, XI, PHI, JR, LAM)
        else:
            st = self._rk4_stages(X, tau)
            H = rk4_step_hessian(m, self.dt, st, tau, LAM,
                                 ((sl, self._rk4_sensitivities(st, sl, k)) for sl, k in self._chunks(N)))
        if not (np.isfinite(H.xx).all() and np.isfinite(H.xu).all() and np.isfinite(H.uu).all()):
            raise ValueError(f"RobotDynamics({m.name}).hessian_contraction: non-finite Hessian (the step diverged)")
        return H
