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
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from numba import njit

from lietraj.dynamics import so3
from lietraj.dynamics._checks import result_arrays
from lietraj.dynamics._spatial import dot, mm, mv, skew, transpose, skew_polynomial
from lietraj.dynamics.aba import aba
from lietraj.dynamics.aba_derivatives import ForwardDynamicsDerivatives, aba_derivatives
from lietraj.dynamics.model import RobotModel
from lietraj.dynamics.state import State, StateSpace, Trajectory
from lietraj.optimal_control.euler_second_order import StepHessian, euler_step_hessian
from lietraj.optimal_control.rk4_second_order import rk4_step_hessian

INTEGRATORS = ("euler", "rk4")
_CHUNK_ENTRIES = 32768  # RK4 chain rule: knots per block such that a (knots, ndx, ndx + n) block stays in cache

inline = njit(cache=True, inline="always")

# Taylor coefficients of S_m(theta) (so3: S1 = sin/theta, S2 = (1 - cos)/theta^2, ...), used below theta = 0.5.
_C1, _C2, _C3, _C4, _C5 = (so3._SERIES[m] for m in range(1, 6))
_SERIES_BELOW = so3._SERIES_BELOW


@inline
def _horner(c, x):
    acc = 0.0
    for k in range(len(c)):
        acc = acc * x + c[k]
    return acc


@inline
def _exp_coefficients(theta):
    """so3._exp_coefficients in compiled form: (S1, ..., S5) at theta, each to a few ulp."""
    t2 = theta * theta
    if theta < _SERIES_BELOW:
        return _horner(_C1, t2), _horner(_C2, t2), _horner(_C3, t2), _horner(_C4, t2), _horner(_C5, t2)
    s1 = math.sin(theta) / theta
    half_sinc = math.sin(0.5 * theta) / (0.5 * theta)
    s2 = 0.5 * half_sinc * half_sinc
    s3 = (1.0 - s1) / t2
    s4 = (0.5 - s2) / t2
    s5 = (1.0 / 6.0 - s3) / t2
    return s1, s2, s3, s4, s5


@inline
def _combine(a, A, b, B, c, C, d, D):
    """a A + b B + c C + d D for 9-tuples."""
    return (a * A[0] + b * B[0] + c * C[0] + d * D[0], a * A[1] + b * B[1] + c * C[1] + d * D[1],
            a * A[2] + b * B[2] + c * C[2] + d * D[2], a * A[3] + b * B[3] + c * C[3] + d * D[3],
            a * A[4] + b * B[4] + c * C[4] + d * D[4], a * A[5] + b * B[5] + c * C[5] + d * D[5],
            a * A[6] + b * B[6] + c * C[6] + d * D[6], a * A[7] + b * B[7] + c * C[7] + d * D[7],
            a * A[8] + b * B[8] + c * C[8] + d * D[8])


@inline
def _coupling(v, w, s3, s4, s5):
    """The block Q(v, w) of Jl([v; w]) (se3._coupling, Barfoot eq. 7.86)."""
    V, W = skew(v), skew(w)
    WV, VW = mm(W, V), mm(V, W)
    WVW = mm(WV, W)
    c3 = 0.5 * (s4 - 3.0 * s5)
    first = _combine(0.5, V, s3, WV, s3, VW, s3, WVW)
    second = _combine(1.0, first, s4, mm(W, WV), s4, mm(VW, W), -3.0 * s4, WVW)
    return _combine(1.0, second, c3, mm(WVW, W), c3, mm(W, WVW), 0.0, WVW)


@inline
def _se3_blocks(xi, E, PHI, K, blocks):
    """E = exp(xi) (4x4); with ``blocks``, also PHI = Ad_{exp(-xi)} and K = Jr(xi) = Jl(-xi) (6x6)."""
    v, w = (xi[0], xi[1], xi[2]), (xi[3], xi[4], xi[5])
    s1, s2, s3, s4, s5 = _exp_coefficients(math.sqrt(dot(w, w)))
    R = skew_polynomial(w, s1, s2)
    p = mv(skew_polynomial(w, s2, s3), v)
    for r in range(3):
        for c in range(3):
            E[r, c] = R[3 * r + c]
        E[r, 3] = p[r]
        E[3, r] = 0.0
    E[3, 3] = 1.0
    if not blocks:
        return
    RT = transpose(R)
    B = mm(RT, skew(p))  # Ad_{H^-1} = [[R^T, -R^T [p]x], [0, R^T]]
    mw, mv_ = (-w[0], -w[1], -w[2]), (-v[0], -v[1], -v[2])
    J = skew_polynomial(mw, s2, s3)
    Q = _coupling(mv_, mw, s3, s4, s5)
    for r in range(3):
        for c in range(3):
            PHI[r, c] = PHI[r + 3, c + 3] = RT[3 * r + c]
            PHI[r, c + 3] = -B[3 * r + c]
            PHI[r + 3, c] = 0.0
            K[r, c] = K[r + 3, c + 3] = J[3 * r + c]
            K[r, c + 3] = Q[3 * r + c]
            K[r + 3, c] = 0.0


@njit(cache=True)
def _se3_blocks_batch(XI, E, PHI, K, blocks):
    for k in range(XI.shape[0]):
        _se3_blocks(XI[k], E[k], PHI[k], K[k], blocks)


@njit(cache=True)
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
        _se3_blocks(XI[k], E[k], PHI[k], K[k], True)
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


@dataclass(eq=False)
class DiscreteDerivatives:
    """``F_x`` (ndx, ndx) and ``F_u`` (ndx, nu) of ``x⁺ = f(x, u)`` in the tangent chart, with a leading ``N`` for
    a trajectory: ``f(x exp(dx), u + du) ≈ f(x, u) exp(F_x dx + F_u du)``. Unpacks as ``F_x, F_u = ...``."""

    F_x: np.ndarray
    F_u: np.ndarray

    def __iter__(self):
        return iter((self.F_x, self.F_u))


@dataclass(eq=False)
class Rk4Stages:
    """Nominal values of the RK4 step at every knot: stage states ``Y`` (``Y₁ = x``, ``Y₂``, ``Y₃``, ``Y₄``), the
    forward-dynamics derivatives ``fd`` at them, the arguments ``XI`` (N, ndx) of the exponentials giving
    ``Y₂, Y₃, Y₄, Z, x⁺``, and their ``PHI = Ad_{exp(-ξ_H)}``, ``JR = Jr(ξ_H)`` (N, 6, 6), None for a fixed base."""

    Y: tuple[Trajectory, ...]
    fd: tuple[ForwardDynamicsDerivatives, ...]
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


def _one_knot(x: State) -> Trajectory:
    """A 1-knot trajectory whose arrays are views of x's."""
    return Trajectory(None if x.H is None else x.H[None], x.s[None], x.v[None])


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
        return self.step_trajectory(_one_knot(x), np.asarray(u, dtype=np.float64)[None])[0]

    def derivatives(self, x: State | Trajectory, u, out: DiscreteDerivatives | None = None) -> DiscreteDerivatives:
        """``F_x, F_u`` at one state (``(ndx, ndx)``, ``(ndx, nu)``) or at every knot of a trajectory."""
        if type(x) is Trajectory:
            return self.trajectory_derivatives(x, u, out)
        out1 = None if out is None else DiscreteDerivatives(out.F_x[None], out.F_u[None])
        d = self.trajectory_derivatives(_one_knot(x), np.asarray(u, dtype=np.float64)[None], out1)
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
        H = self.trajectory_hessian_contraction(_one_knot(x), np.asarray(u, dtype=np.float64)[None],
                                                np.asarray(lam, dtype=np.float64)[None])
        return StepHessian(H.xx[0], H.xu[0], H.uu[0])

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


class RobotDynamics(DiscreteDynamics):
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
        self._cache: dict = {}

    def __repr__(self) -> str:
        return f"RobotDynamics({self.model.name!r}, dt={self.dt}, integrator={self.integrator!r})"

    # ---- helpers -----------------------------------------------------------------------------------------

    def _scratch(self, key: str, N: int, build):
        value = self._cache.get((key, N))
        if value is None:
            value = self._cache[(key, N)] = build()
        return value

    def _torques(self, X: Trajectory, U) -> np.ndarray:
        """Checked (N, n) controls as (N, nv) generalized forces (zero wrench on a floating base)."""
        if type(X) is not Trajectory:
            raise TypeError(f"expected a Trajectory, got {type(X).__name__}")
        U = np.asarray(U, dtype=np.float64)
        N, m = len(X), self.model
        if U.shape != (N, m.n):
            raise ValueError(f"RobotDynamics({m.name}): u must have shape ({m.n},) per knot, got {U.shape} for "
                             f"{N} knot(s)")
        if not np.all(np.isfinite(U)):
            raise ValueError(f"RobotDynamics({m.name}): u contains NaN or inf")
        if not m.floating_base:
            return U
        tau = self._scratch("tau", N, lambda: np.zeros((N, m.nv)))
        tau[:, 6:] = U
        return tau

    def _fext(self, N: int):
        if self.fext is None:
            return None
        return self._scratch("fext", N, lambda: np.ascontiguousarray(np.broadcast_to(self.fext, (N,) + self.fext.shape)))

    def _fd_derivatives(self, Y: Trajectory, tau: np.ndarray, stage: int) -> ForwardDynamicsDerivatives:
        N, nv = len(Y), self.model.nv
        out = self._scratch(f"fd{stage}", N, lambda: ForwardDynamicsDerivatives(
            np.empty((N, nv)), np.empty((N, nv, nv)), np.empty((N, nv, nv)), np.empty((N, nv, nv))))
        return aba_derivatives(self.model, Y, tau, self._fext(N), out=out)

    def _exp(self, XI: np.ndarray, blocks: bool):
        """Per-knot exp(XI) and, with ``blocks``, Ad_{exp(-XI)} and Jr(XI), for XI (N, 6)."""
        N = XI.shape[0]
        E, PHI, K = np.empty((N, 4, 4)), np.empty((N, 6, 6)), np.empty((N, 6, 6))
        _se3_blocks_batch(np.ascontiguousarray(XI), E, PHI, K, blocks)
        return E, PHI, K

    def _integrate(self, X: Trajectory, Z: np.ndarray, blocks: bool = False):
        """Knot-wise X exp(Z) and the SE(3) blocks (Ad_{exp(-Z_H)}, Jr(Z_H)) of its Jacobians (None: fixed base)."""
        nv, nh = self.model.nv, 6 if self.model.floating_base else 0
        H = PHI = K = None
        if nh:
            E, PHI, K = self._exp(Z[:, :6], blocks)
            H = X.H @ E
        return Trajectory(H, X.s + Z[:, nh:nv], X.v + Z[:, nv:]), PHI, K

    def _checked(self, Y: Trajectory, what: str) -> Trajectory:
        bad = ~np.isfinite(Y.v).all(axis=1) | ~np.isfinite(Y.s).all(axis=1)
        if Y.H is not None:
            bad |= ~np.isfinite(Y.H).all(axis=(1, 2))
        if bad.any():
            raise ValueError(f"RobotDynamics({self.model.name}).{what}: the step diverged (non-finite state) at knot "
                             f"{int(np.argmax(bad))}; reduce dt or the controls")
        return Y

    def _lambda(self, Y: Trajectory, tau: np.ndarray) -> np.ndarray:
        """dt λ(Y, u) = dt [v; FD(Y, u)] per knot, (N, ndx)."""
        return self.dt * np.concatenate([Y.v, aba(self.model, Y, tau, self._fext(len(Y)))], axis=1)

    # ---- steps ---------------------------------------------------------------------------------------------

    def step_trajectory(self, X: Trajectory, U) -> Trajectory:
        tau = self._torques(X, U)
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging step is reported by _checked
            return self._checked(self._step(X, tau), "step")

    def _step(self, X: Trajectory, tau: np.ndarray) -> Trajectory:
        if self.integrator == "euler":
            nh, dt = 6 if self.model.floating_base else 0, self.dt
            V = X.v + dt * aba(self.model, X, tau, self._fext(len(X)))
            H = X.H @ self._exp(dt * V[:, :6], False)[0] if nh else None
            return Trajectory(H, X.s + dt * V[:, nh:], V)
        F1 = self._lambda(X, tau)
        Y2, _, _ = self._integrate(X, 0.5 * F1)
        F2 = self._lambda(Y2, tau)
        F3 = self._lambda(self._integrate(X, 0.5 * F2)[0], tau)
        F4 = self._lambda(self._integrate(Y2, F3 - 0.5 * F1)[0], tau)
        Z, _, _ = self._integrate(X, (3.0 * F1 + 2.0 * F2 + 2.0 * F3 - F4) / 12.0)
        return self._integrate(Z, (-F1 + 2.0 * F2 + 2.0 * F3 + 3.0 * F4) / 12.0)[0]

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
            E, PHI, K = self._scratch("euler_blocks", N, lambda: (np.empty((N, 4, 4)), np.empty((N, 6, 6)),
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
        LAM = np.asarray(LAM, dtype=np.float64)
        if LAM.shape != (N, ndx) or not np.all(np.isfinite(LAM)):
            raise ValueError(f"RobotDynamics({m.name}).hessian_contraction: lam must be finite with shape ({ndx},) per "
                             f"knot, got {LAM.shape} for {N} knot(s)")
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
