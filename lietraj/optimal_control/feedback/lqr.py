"""LQR about an equilibrium and time-varying LQR along a trajectory, on the error in the Lie algebra, and the
closed-loop simulation of any feedback policy on the full nonlinear dynamics.

Both controllers act on the tangent error ``z = x ⊖ x̄ = log(x̄⁻¹ x)`` (README, Conventions: right perturbation, order
``[z_H; z_s; z_ν; z_ṡ]``), in which the discrete dynamics are locally ``z⁺ = F_x z + F_u δu`` with ``F_x, F_u`` from
``DiscreteDynamics.derivatives``: ``f(x̄ exp z, ū + δu) ≈ f(x̄, ū) exp(F_x z + F_u δu)``. The policy is::

    u = ū + K z,   z = x ⊖ x̄          (Crocoddyl's and trajax's sign: K is the gain of the control law itself)

which minimises ``½ Σ (zᵀ Q z + δuᵀ R δu) (+ ½ z_Tᵀ Q_f z_T)`` of the linearized error dynamics.

- ``lqr``: infinite horizon about an equilibrium ``f(x_eq, u_eq) = x_eq`` (so ``z`` stays the error of the same
  point). ``P`` solves the discrete algebraic Riccati equation (scipy's ``solve_discrete_are``; an optional cross
  weight ``N`` adds ``zᵀ N δu``)::

      P = Aᵀ P A - (Aᵀ P B + N)(R + Bᵀ P B)⁻¹(Bᵀ P A + Nᵀ) + Q,   K = -(R + Bᵀ P B)⁻¹(Bᵀ P A + Nᵀ)

- ``tvlqr``: finite horizon along ``(X, U)`` (``T + 1`` states, ``T`` controls), ``z_k = x ⊖ X_k``, with the
  linearization of every knot from one batched ``trajectory_derivatives`` call and the Riccati recursion done by
  the solvers' own backward pass (``riccati.backward_pass`` on the LQ model ``l_xx = Q_k``, ``l_uu = R_k``, zero
  gradients), so ``K_k`` is exactly the feedback gain iLQR would compute for that quadratic cost. ``P`` are the
  Hessians ``V_xx`` of the cost-to-go.

``simulate`` rolls the nonlinear dynamics under a policy ``u_k = policy(k, x_k)``, kicking the state by a tangent
disturbance ``x_{k+1} = f(x_k, u_k) ⊕ w_k``; a diverging run is reported by the result's status, as the solvers do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import scipy.linalg

from lietraj.dynamics.lie.state import State, StateSpace, Trajectory, tangent_difference, tangent_integrate
from lietraj.optimal_control.costs.costs import CostDerivatives
from lietraj.optimal_control.dynamics.discrete_dynamics import DiscreteDynamics
from lietraj.optimal_control.problem import ProblemDerivatives
from lietraj.optimal_control.solvers.riccati import backward_pass
from lietraj.optimal_control.solvers.solvers import _NUMERICAL_ERRORS


@runtime_checkable
class Policy(Protocol):
    """A time-indexed state feedback ``u = policy(k, x)``; any function of ``(k, x)`` will do."""

    def __call__(self, k: int, x: State) -> np.ndarray: ...


def _check_state(space: StateSpace, x: State, what: str) -> None:
    """Cheap kind and shape check of a state (no group-membership test: this runs at every simulated step)."""
    if not isinstance(x, State) or (x.H is None) == space.floating_base or x.s.shape != (space.n,) \
            or x.v.shape != (space.nv,):
        raise ValueError(f"{what}: expected a state of {space}, got {x!r}")


def _check_times(ks, N: int, T: int | None, what: str) -> np.ndarray:
    """``ks`` (an int or N ints) as N time indices in [0, T) (any integers when T is None)."""
    ks = np.asarray(ks)
    if ks.shape not in ((), (N,)) or ks.dtype.kind not in "iu" or (T is not None and N and (ks.min() < 0 or ks.max() >= T)):
        raise ValueError(f"{what}: time indices must be one integer or {N} integers in [0, {T}), got {ks}")
    return np.broadcast_to(ks, (N,))


# ---- weights ------------------------------------------------------------------------------------------------

def _weight(W, size: int, name: str, definite: bool) -> np.ndarray:
    """A symmetric (size, size) weight from a matrix or a vector (its diagonal): positive semidefinite, or
    positive definite with ``definite``."""
    W = np.asarray(W, dtype=np.float64)
    if W.shape == (size,):
        W = np.diag(W)
    if W.shape != (size, size) or not np.all(np.isfinite(W)):
        raise ValueError(f"{name} must be a finite ({size}, {size}) matrix or a ({size},) diagonal, got shape {W.shape}")
    scale = max(1.0, float(np.abs(W).max(initial=0.0)))
    if np.abs(W - W.T).max(initial=0.0) > 1e-12 * scale:
        raise ValueError(f"{name} must be symmetric")
    W = 0.5 * (W + W.T)
    smallest = float(np.linalg.eigvalsh(W).min()) if size else 1.0
    if smallest < -1e-12 * scale or (definite and smallest <= 0.0):
        kind = "positive definite" if definite else "positive semidefinite"
        raise ValueError(f"{name} must be {kind}, its smallest eigenvalue is {smallest:.3g}")
    return W


def _weights(W, T: int, size: int, name: str, definite: bool) -> np.ndarray:
    """(T, size, size) weights from one matrix, one diagonal, per-knot matrices (T, size, size) or per-knot
    diagonals (T, size); a square 2-D array is one matrix even when T == size."""
    W = np.asarray(W, dtype=np.float64)
    if W.ndim == 3 or (W.ndim == 2 and W.shape == (T, size) and W.shape != (size, size)):
        if W.shape[0] != T:
            raise ValueError(f"per-knot {name} must have a leading axis of T = {T}, got shape {W.shape}")
        return np.stack([_weight(w, size, f"{name}[{k}]", definite) for k, w in enumerate(W)])
    return np.repeat(_weight(W, size, name, definite)[None], T, axis=0)


# ---- LQR about an equilibrium ---------------------------------------------------------------------------------

@dataclass(eq=False)
class LQRController:
    """``u = u_eq + K (x ⊖ x_eq)`` (module docstring): ``K`` (nu, ndx), ``P`` (ndx, ndx) the DARE solution, and the
    linearization ``A = F_x``, ``B = F_u`` at the equilibrium."""

    state_space: StateSpace
    x_eq: State
    u_eq: np.ndarray
    K: np.ndarray
    P: np.ndarray
    A: np.ndarray
    B: np.ndarray

    def __repr__(self) -> str:
        return f"LQRController({self.state_space}, nu={self.K.shape[0]}, spectral radius {self.spectral_radius:.4g})"

    @property
    def closed_loop(self) -> np.ndarray:
        """``A + B K``: the linearized error dynamics under the policy."""
        return self.A + self.B @ self.K

    @property
    def spectral_radius(self) -> float:
        """Largest eigenvalue modulus of ``A + B K`` (< 1: locally asymptotically stable)."""
        return float(np.abs(np.linalg.eigvals(self.closed_loop)).max(initial=0.0))

    def error(self, x: State) -> np.ndarray:
        """``x ⊖ x_eq``."""
        _check_state(self.state_space, x, "LQRController")
        return tangent_difference(Trajectory.repeat(self.x_eq, 1), Trajectory.repeat(x, 1))[0]

    def __call__(self, k: int, x: State) -> np.ndarray:
        """``u_eq + K (x ⊖ x_eq)``; time-invariant, ``k`` is ignored."""
        return self.u_eq + self.K @ self.error(x)

    def batch(self, ks, X: Trajectory) -> np.ndarray:
        """The controls (N, nu) at the N states of ``X`` in one compiled difference call (``ks`` is ignored)."""
        sp = self.state_space
        if not isinstance(X, Trajectory) or (X.H is None) == sp.floating_base or X.s.shape[1:] != (sp.n,) \
                or X.v.shape[1:] != (sp.nv,):
            raise ValueError(f"LQRController.batch: expected a trajectory of {sp}")
        _check_times(ks, len(X), None, "LQRController.batch")
        return self.u_eq + tangent_difference(Trajectory.repeat(self.x_eq, len(X)), X) @ self.K.T


def lqr(dynamics: DiscreteDynamics, x_eq: State, u_eq, Q, R, N=None, tol: float = 1e-8) -> LQRController:
    """Infinite-horizon discrete LQR about the equilibrium ``(x_eq, u_eq)`` (module docstring).

    ``Q`` (ndx, ndx) or its diagonal (ndx,), positive semidefinite; ``R`` (nu, nu) or (nu,), positive definite;
    ``N`` (ndx, nu) an optional cross weight. ValueError if ``|f(x_eq, u_eq) ⊖ x_eq|∞ > tol`` (not an equilibrium),
    if ``(F_x, F_u)`` is not stabilizable (or ``Q`` does not observe an unstable mode), or on bad shapes.
    """
    if not isinstance(dynamics, DiscreteDynamics):
        raise ValueError(f"lqr: dynamics must be a DiscreteDynamics, got {type(dynamics).__name__}")
    sp, nu = dynamics.state_space, dynamics.nu
    sp.check(x_eq)
    u_eq = np.array(u_eq, dtype=np.float64).reshape(-1)
    if u_eq.shape != (nu,) or not np.all(np.isfinite(u_eq)):
        raise ValueError(f"lqr: u_eq must be a finite array of shape ({nu},), got {np.shape(u_eq)}")
    Q = _weight(Q, sp.ndx, "lqr: Q", definite=False)
    R = _weight(R, nu, "lqr: R", definite=True)
    if N is not None:
        N = np.array(N, dtype=np.float64)
        if N.shape != (sp.ndx, nu) or not np.all(np.isfinite(N)):
            raise ValueError(f"lqr: N must be a finite ({sp.ndx}, {nu}) matrix, got shape {N.shape}")
    drift = sp.difference(x_eq, dynamics.step(x_eq, u_eq))
    if not np.abs(drift).max(initial=0.0) <= tol:
        raise ValueError(f"lqr: (x_eq, u_eq) is not an equilibrium of the dynamics: |f(x_eq, u_eq) ⊖ x_eq|∞ = "
                         f"{np.abs(drift).max():.3g} > tol = {tol:g} (for a robot at rest, u_eq is the generalized "
                         "gravity; a floating base needs contacts or thrust to be at rest)")
    A, B = (np.array(M) for M in dynamics.derivatives(x_eq, u_eq))
    try:
        P = scipy.linalg.solve_discrete_are(A, B, Q, R, s=N)
    except (np.linalg.LinAlgError, ValueError) as e:
        raise ValueError(f"lqr: no stabilizing Riccati solution ({e}): the linearization (F_x, F_u) at x_eq is not "
                         "stabilizable, or Q does not weight an unstable mode") from e
    P = 0.5 * (P + P.T)
    G = B.T @ P @ A if N is None else B.T @ P @ A + N.T
    K = -np.linalg.solve(R + B.T @ P @ B, G)
    out = LQRController(sp, x_eq.copy(), u_eq, K, P, A, B)
    rho = out.spectral_radius
    if not (np.all(np.isfinite(P)) and rho < 1.0):
        raise ValueError(f"lqr: the Riccati solution does not stabilize the linearization (spectral radius of "
                         f"A + B K = {rho:.6g}): (F_x, F_u) is not stabilizable, or Q does not weight an unstable mode")
    return out


# ---- time-varying policies ------------------------------------------------------------------------------------

@dataclass(eq=False)
class FeedbackPolicy:
    """The time-varying affine policy ``u_k = U_k + K_k (x ⊖ X_k)`` for ``k = 0 .. T-1`` along a trajectory ``X``
    (T + 1 knots; ``X_T`` is only the end point), ``U`` (T, nu), ``K`` (T, nu, ndx)."""

    X: Trajectory
    U: np.ndarray
    K: np.ndarray

    def __post_init__(self):
        if not isinstance(self.X, Trajectory):
            raise ValueError(f"{type(self).__name__}: X must be a Trajectory, got {type(self.X).__name__}")
        T = len(self.X) - 1
        self.state_space = StateSpace(self.X.s.shape[1], self.X.H is not None)
        ndx = self.state_space.ndx
        self.U, self.K = np.asarray(self.U, dtype=np.float64), np.asarray(self.K, dtype=np.float64)
        if T < 1 or self.U.ndim != 2 or self.U.shape[0] != T or self.K.shape != (T, self.U.shape[1], ndx):
            raise ValueError(f"{type(self).__name__}: X must have T + 1 >= 2 knots, U (T, nu) and K (T, nu, {ndx}); got "
                             f"{len(self.X)} knots, U {self.U.shape}, K {self.K.shape}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(T={self.horizon}, nu={self.nu}, {self.state_space})"

    @classmethod
    def from_result(cls, result) -> FeedbackPolicy:
        """The local feedback policy of a solver result: its ``xs``, ``us`` and gains ``K`` (copied). The
        feedforward ``k`` of the last backward pass is not used (≈ 0 at convergence): the policy tracks ``xs``."""
        return cls(result.xs.copy(), np.array(result.us), np.array(result.K))

    @property
    def horizon(self) -> int:
        return self.U.shape[0]

    @property
    def nu(self) -> int:
        return self.U.shape[1]

    def error(self, k: int, x: State) -> np.ndarray:
        """``x ⊖ X_k``."""
        _check_state(self.state_space, x, type(self).__name__)
        k = int(_check_times(k, 1, self.horizon + 1, type(self).__name__)[0])
        return tangent_difference(self.X[k:k + 1], Trajectory.repeat(x, 1))[0]

    def __call__(self, k: int, x: State) -> np.ndarray:
        """``U_k + K_k (x ⊖ X_k)``, for ``0 <= k < T`` (ValueError outside)."""
        k = int(_check_times(k, 1, self.horizon, type(self).__name__)[0])
        return self.U[k] + self.K[k] @ self.error(k, x)

    def batch(self, ks, X: Trajectory) -> np.ndarray:
        """The controls (N, nu) at the N states of ``X``, the i-th at time ``ks[i]`` (``ks`` an int for all)."""
        sp, name = self.state_space, type(self).__name__
        if not isinstance(X, Trajectory) or (X.H is None) == sp.floating_base or X.s.shape[1:] != (sp.n,) \
                or X.v.shape[1:] != (sp.nv,):
            raise ValueError(f"{name}.batch: expected a trajectory of {sp}")
        ks = _check_times(ks, len(X), self.horizon, f"{name}.batch")
        return self.U[ks] + np.einsum("tij,tj->ti", self.K[ks], tangent_difference(self.X[ks], X))


@dataclass(eq=False, repr=False)
class TVLQRController(FeedbackPolicy):
    """A ``FeedbackPolicy`` from ``tvlqr``, with the cost-to-go Hessians ``P`` (T + 1, ndx, ndx)."""

    P: np.ndarray


def tvlqr(dynamics: DiscreteDynamics, X: Trajectory, U, Q, R, Qf) -> TVLQRController:
    """Time-varying LQR along ``(X, U)`` (T + 1 states, T controls; module docstring), by the shared Riccati
    backward pass on the linearization of all knots (one batched ``trajectory_derivatives`` call).

    ``Q`` (running, positive semidefinite) and ``R`` (positive definite): one matrix, one diagonal vector, or per-knot
    matrices (T, n, n) or diagonals (T, n) — a square 2-D array is always one matrix; ``Qf``: one matrix or diagonal.
    The trajectory need not be a rollout of ``U`` (the policy then tracks it as a reference).
    """
    if not isinstance(dynamics, DiscreteDynamics):
        raise ValueError(f"tvlqr: dynamics must be a DiscreteDynamics, got {type(dynamics).__name__}")
    sp, nu = dynamics.state_space, dynamics.nu
    U = np.array(U, dtype=np.float64)
    if U.ndim != 2 or U.shape[1] != nu or U.shape[0] < 1 or not np.all(np.isfinite(U)):
        raise ValueError(f"tvlqr: U must be a finite (T, {nu}) array with T >= 1, got shape {U.shape}")
    T, ndx = U.shape[0], sp.ndx
    if not isinstance(X, Trajectory) or len(X) != T + 1 or (X.H is None) == sp.floating_base \
            or X.s.shape[1:] != (sp.n,) or X.v.shape[1:] != (sp.nv,):
        raise ValueError(f"tvlqr: X must be a trajectory of T + 1 = {T + 1} states of {sp}")
    if not X.is_finite():
        raise ValueError("tvlqr: X contains NaN or inf")
    X = X.copy()
    running = CostDerivatives(np.zeros(T), np.zeros((T, ndx)), np.zeros((T, nu)), _weights(Q, T, ndx, "tvlqr: Q", False),
                              np.zeros((T, ndx, nu)), _weights(R, T, nu, "tvlqr: R", True))
    terminal = CostDerivatives.zeros(1, ndx, 0)
    terminal.l_xx[0] = _weight(Qf, ndx, "tvlqr: Qf", definite=False)
    F = dynamics.trajectory_derivatives(X[:T], U)
    bp = backward_pass(ProblemDerivatives(F, running, terminal), reg=0.0, regularize_vxx=False)
    if not bp.ok:
        raise ValueError(f"tvlqr: the Riccati recursion failed ({bp.reason}); check the linearization along X")
    return TVLQRController(X, U, bp.K, bp.V_xx)


# ---- closed-loop simulation -----------------------------------------------------------------------------------

@dataclass(eq=False)
class Simulation:
    """A closed-loop run: states ``xs`` (steps + 1 knots), applied controls ``us`` (steps, nu), the tangent kicks
    ``disturbances`` (steps, ndx), and ``status``: "completed", or "diverged at step k: <why>" (then the arrays stop
    at the last finite state). Unpacks as ``xs, us = simulate(...)``."""

    xs: Trajectory
    us: np.ndarray
    disturbances: np.ndarray
    status: str

    def __repr__(self) -> str:
        return f"Simulation({self.status}, {len(self.us)} steps)"

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    def __iter__(self):
        return iter((self.xs, self.us))


def _disturbance(disturbance, space: StateSpace, rng) -> Callable[[int, State], np.ndarray] | None:
    if disturbance is None or callable(disturbance):
        return disturbance
    scale = np.asarray(disturbance, dtype=np.float64)
    if scale.shape not in ((), (space.ndx,)) or not np.all(np.isfinite(scale)) or np.any(scale < 0):
        raise ValueError(f"simulate: disturbance must be a callable (k, x) -> z, or a non-negative noise scale (a "
                         f"number or ({space.ndx},)), got {disturbance!r}")
    rng = np.random.default_rng(rng)
    return lambda k, x: scale * rng.standard_normal(space.ndx)


def simulate(dynamics: DiscreteDynamics, policy: Policy | Callable[[int, State], np.ndarray], x0: State, T: int,
             disturbance=None, rng: np.random.Generator | int | None = None) -> Simulation:
    """Roll the nonlinear dynamics under ``u_k = policy(k, x_k)`` for ``T`` steps from ``x0``:
    ``x_{k+1} = f(x_k, u_k) ⊕ w_k``. ``disturbance``: None, a callable ``(k, x_k) -> w_k`` (ndx,), or a noise scale
    (a number or an (ndx,) array; ``w_k = scale * N(0, I)`` drawn from ``rng``). A non-finite control or state, or a
    step the dynamics reject, ends the run with a "diverged" status (module docstring)."""
    if not isinstance(dynamics, DiscreteDynamics):
        raise ValueError(f"simulate: dynamics must be a DiscreteDynamics, got {type(dynamics).__name__}")
    if not callable(policy):
        raise ValueError("simulate: policy must be callable as policy(k, x) -> u")
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or T < 0:
        raise ValueError(f"simulate: T must be a non-negative integer, got {T!r}")
    sp, nu = dynamics.state_space, dynamics.nu
    sp.check(x0)
    kick = _disturbance(disturbance, sp, rng)
    X, U, W = sp.trajectory(T + 1), np.zeros((T, nu)), np.zeros((T, sp.ndx))
    X[0] = x0
    status, steps = "completed", T
    for k in range(T):
        x = X[k]
        u = np.asarray(policy(k, x), dtype=np.float64)
        if u.shape != (nu,):
            raise ValueError(f"simulate: the policy returned a control of shape {u.shape} at step {k}, expected ({nu},)")
        U[k] = u
        if kick is not None:
            w = np.asarray(kick(k, x), dtype=np.float64)
            if w.shape != (sp.ndx,):
                raise ValueError(f"simulate: the disturbance returned shape {w.shape} at step {k}, expected ({sp.ndx},)")
            W[k] = w
        why = ""
        if not (np.all(np.isfinite(u)) and np.all(np.isfinite(W[k]))):
            why = "non-finite control or disturbance"
        else:
            nxt = X[k + 1:k + 2]
            try:
                with np.errstate(over="ignore", invalid="ignore"):
                    X[k + 1] = dynamics.step(x, u)
                    if kick is not None and nxt.is_finite():
                        tangent_integrate(nxt, W[k:k + 1], out=nxt)
            except _NUMERICAL_ERRORS as e:
                why = str(e)
            if not why and not nxt.is_finite():
                why = "non-finite state"
        if why:
            status, steps = f"diverged at step {k}: {why}", k
            break
    xs = X[:steps + 1]
    return Simulation(xs, U[:steps], W[:steps], status)


__all__ = ["FeedbackPolicy", "LQRController", "Policy", "Simulation", "TVLQRController", "lqr", "simulate", "tvlqr"]
