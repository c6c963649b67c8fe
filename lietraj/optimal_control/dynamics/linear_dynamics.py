"""Linear discrete dynamics ``x⁺ = A x + B u + c`` on a vector state, as a ``DiscreteDynamics`` plug-in.

The state ``x = [s; v]`` of size ``2n`` lives on the fixed-base ``StateSpace(n, False)``, whose group is the
vector space R²ⁿ (``⊕`` is ``+``, ``⊖`` is ``-``), so the Jacobians are exactly ``F_x = A``, ``F_u = B`` and the
second-order contraction of DDP is exactly zero. This is the LQ test problem of the solvers (an LQ problem is solved
by one Newton step) and a small user class for linear(ized) models; a state of odd size is padded by the user.
"""

from __future__ import annotations

import math

import numpy as np

from lietraj.dynamics._checks import result_arrays
from lietraj.dynamics.lie.state import StateSpace, Trajectory
from lietraj.optimal_control.dynamics.discrete_dynamics import DiscreteDerivatives, DiscreteDynamics
from lietraj.optimal_control.dynamics.euler_second_order import StepHessian


def _matrix(M, shape: tuple[int, int], name: str) -> np.ndarray:
    M = np.array(M, dtype=np.float64)
    if M.shape != shape or not np.all(np.isfinite(M)):
        raise ValueError(f"LinearDynamics: {name} must be a finite array of shape {shape}, got shape {M.shape}")
    return M


class LinearDynamics(DiscreteDynamics):
    """``x⁺ = A x + B u + c`` with ``x = [s; v]`` (``A`` of size 2n x 2n, ``B`` 2n x nu, ``c`` 2n or None); ``dt``
    is the sampling time, used only to put the knots on a time axis."""

    def __init__(self, A, B, c=None, dt: float = 1.0):
        A = np.array(A, dtype=np.float64)
        if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] % 2 or A.shape[0] == 0:
            raise ValueError(f"LinearDynamics: A must be square of even size 2n (the state [s; v]), got {A.shape}")
        nx = A.shape[0]
        B = np.array(B, dtype=np.float64)
        if B.ndim != 2:
            raise ValueError(f"LinearDynamics: B must be a matrix of shape ({nx}, nu), got {B.shape}")
        self.A = _matrix(A, (nx, nx), "A")
        self.B = _matrix(B, (nx, B.shape[1]), "B")
        self.c = np.zeros(nx) if c is None else _matrix(np.reshape(c, (1, -1)), (1, nx), "c")[0]
        if not (isinstance(dt, (int, float, np.floating)) and math.isfinite(dt) and dt > 0):
            raise ValueError(f"LinearDynamics: dt must be a finite positive number, got {dt!r}")
        self.dt = float(dt)
        self.nu = B.shape[1]
        self.state_space = StateSpace(nx // 2, False)

    def __repr__(self) -> str:
        return f"LinearDynamics(nx={self.A.shape[0]}, nu={self.nu}, dt={self.dt})"

    def _inputs(self, X: Trajectory, U) -> tuple[np.ndarray, np.ndarray]:
        if not isinstance(X, Trajectory) or X.H is not None:
            raise ValueError("LinearDynamics: X must be a fixed-base Trajectory")
        n = self.state_space.n
        if X.s.shape[1:] != (n,) or X.v.shape[1:] != (n,):
            raise ValueError(f"LinearDynamics: X must have s and v of {n} columns, got {X.s.shape} and {X.v.shape}")
        U = np.asarray(U, dtype=np.float64)
        if U.shape != (len(X), self.nu):
            raise ValueError(f"LinearDynamics: U must have shape ({len(X)}, {self.nu}), got {U.shape}")
        if not np.all(np.isfinite(U)):
            raise ValueError("LinearDynamics: U contains NaN or inf")
        return np.concatenate([X.s, X.v], axis=1), U

    def step_trajectory(self, X: Trajectory, U) -> Trajectory:
        Z, U = self._inputs(X, U)
        Zn = Z @ self.A.T + U @ self.B.T + self.c
        n = self.state_space.n
        return Trajectory(None, Zn[:, :n].copy(), Zn[:, n:].copy())

    def trajectory_derivatives(self, X: Trajectory, U, out: DiscreteDerivatives | None = None) -> DiscreteDerivatives:
        self._inputs(X, U)
        nx, N = self.A.shape[0], len(X)
        F_x, F_u = result_arrays(out, DiscreteDerivatives, ((N, nx, nx), (N, nx, self.nu)), "LinearDynamics")
        F_x[...] = self.A
        F_u[...] = self.B
        return DiscreteDerivatives(F_x, F_u) if out is None else out

    def trajectory_hessian_contraction(self, X: Trajectory, U, LAM) -> StepHessian:
        """Zero: the dynamics are linear."""
        self._inputs(X, U)
        nx, N = self.A.shape[0], len(X)
        LAM = np.asarray(LAM, dtype=np.float64)
        if LAM.shape != (N, nx):
            raise ValueError(f"LinearDynamics: LAM must have shape ({N}, {nx}), got {LAM.shape}")
        return StepHessian(np.zeros((N, nx, nx)), np.zeros((N, nx, self.nu)), np.zeros((N, self.nu, self.nu)))
