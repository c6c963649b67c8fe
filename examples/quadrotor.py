"""A quadrotor as plug-in dynamics, flown to a target pose by iLQR, DDP and FDDP.

Dynamics are a plug-in of the solvers: anything that subclasses ``DiscreteDynamics`` and gives the step and its
derivatives at all knots at once can be optimised. Here a rigid body on SE(3) x R^6 driven by four rotor thrusts,
with exact first- and second-order derivatives, in a few dozen lines of numpy.

State ``x = (H, ν)``: the pose ``H = (R, p)`` and the body twist ``ν = [v; ω]`` (linear first), i.e.
``StateSpace(0, floating_base=True)``, perturbed as ``x exp(dx)``, ``dx = [z_H; z_ν]`` (DESIGN.md). Controls: the
thrusts ``u`` [N] of a "+" frame, rotors on the body axes +x, +y, -x, -y at distance ``L`` spinning in alternate
directions, so that the body wrench ``[f; τ] = W u`` is linear in ``u``::

    f = [0, 0, Σu],    τ = [L (u₂ − u₄),  L (u₃ − u₁),  κ (u₁ − u₂ + u₃ − u₄)]

Newton–Euler in the body frame (at the centre of mass), gravity ``g = (0, 0, −9.81)``, and the semi-implicit Euler
step on the group that ``RobotDynamics`` uses::

    a = ν̇ = [−ω × v + Rᵀg + f/m;  J⁻¹(−ω × Jω + τ)],      ν⁺ = ν + dt a,   H⁺ = H exp(dt ν⁺)

First order (``discrete_dynamics``' closed form), ``ξ = dt ν⁺``, ``A_q = ∂a/∂z_H``, ``A_v = ∂a/∂ν``, ``B = ∂a/∂u``::

    G = [dt A_q, I + dt A_v],   F_x = [[Ad_{exp(−ξ)}, 0] + dt Jr(ξ) G;  G],   F_u = [dt² Jr(ξ) B;  dt B]
    A_q = [[0, [γ]×], [0, 0]],  A_v = [[−[ω]×, [v]×], [0, J⁻¹([Jω]× − [ω]× J)]],  γ = Rᵀg,  B = M⁻¹ W (constant)

Second order (DDP's ``λᵀ ∂²f``), by the node decomposition of ``euler_second_order``: the step is one field node
``a`` and one compose node ``H exp(ξ)``. The field node adds ``μᵀ ∂²a`` for the covector of ``a``,
``μ = dt (λ_ν + dt Jr(ξ)ᵀ λ_H)``: three simple blocks, as ``u`` enters linearly::

    (z_R, z_R) gravity, in exponential coordinates:   ½ (μ_l γᵀ + γ μ_lᵀ) − (μ_l · γ) I
    (v, ω)     Coriolis −ω × v:                        −[μ_l]×    (and its transpose in (ω, v))
    (ω, ω)     gyroscopic −ω × Jω:                     [η]× J − J [η]×,   η = J⁻¹ μ_a

The compose node adds the BCH terms ``Saᵀ H_ab Sb + Sbᵀ H_abᵀ Sa + Sbᵀ H_bb Sb`` of ``log(exp(−ξ) exp(a) exp(ξ + b))``
with ``a = z_H`` (``Sa = [I 0 0]``) and ``b = dt (δν + dt δa)`` (``Sb = dt [dt A_q, I + dt A_v, dt B]``), the blocks
``H_ab``, ``H_bb`` coming from ``euler_second_order.compose_blocks``.

The problem: from hovering at the origin to hovering 1 m away and 0.5 m up, yawed by 90°, with thrusts in
[0, 2 × hover] (a rotor cannot pull), solved by iLQR and DDP from the hover thrusts and by FDDP from the infeasible
guess "stay at x0 with the rotors off". DDP uses the second-order term; all three reach the same optimum.

Run: python examples/quadrotor.py [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np

from lietraj.dynamics import se3
from lietraj.dynamics.lie.state import State, StateSpace, Trajectory
from lietraj.optimal_control.costs.costs import CostSum, control_regularization, state_regularization
from lietraj.optimal_control import exp_blocks
from lietraj.optimal_control.dynamics.discrete_dynamics import DiscreteDerivatives, DiscreteDynamics
from lietraj.optimal_control.dynamics.euler_second_order import StepHessian, compose_blocks
from lietraj.optimal_control.problem import ActionModel, Problem
from lietraj.optimal_control.solvers.solvers import SolverOptions, solve_ddp, solve_fddp, solve_ilqr

GRAVITY = np.array([0.0, 0.0, -9.81])


def hat(w: np.ndarray) -> np.ndarray:
    """[w]× for vectors w (..., 3): (..., 3, 3)."""
    W = np.zeros(w.shape + (3,))
    W[..., 0, 1], W[..., 0, 2], W[..., 1, 2] = -w[..., 2], w[..., 1], -w[..., 0]
    W[..., 1, 0], W[..., 2, 0], W[..., 2, 1] = w[..., 2], -w[..., 1], w[..., 0]
    return W


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise a × b for (N, 3) arrays (np.cross costs tens of µs per call on small arrays)."""
    return a[:, [1, 2, 0]] * b[:, [2, 0, 1]] - a[:, [2, 0, 1]] * b[:, [1, 2, 0]]


class Quadrotor(DiscreteDynamics):
    """A "+" quadrotor on SE(3) x R^6 (module docstring): ``mass`` [kg], ``inertia`` about the centre of mass
    (3x3, or its diagonal), ``arm_length`` L [m], ``yaw_coefficient`` κ [m] (rotor drag torque per unit thrust),
    time step ``dt`` [s]."""

    def __init__(self, mass: float = 1.0, inertia=(0.01, 0.01, 0.02), arm_length: float = 0.2,
                 yaw_coefficient: float = 0.02, dt: float = 0.05):
        J = np.array(inertia, dtype=float)
        J = np.diag(J) if J.shape == (3,) else J
        if J.shape != (3, 3) or not np.allclose(J, J.T) or np.linalg.eigvalsh(J).min() <= 0:
            raise ValueError(f"Quadrotor: inertia must be a symmetric positive definite 3x3 matrix or a positive "
                             f"diagonal, got {inertia!r}")
        if not (mass > 0 and arm_length > 0 and np.isfinite(yaw_coefficient) and dt > 0):
            raise ValueError("Quadrotor: mass, arm_length and dt must be positive, yaw_coefficient finite")
        self.state_space, self.nu, self.dt = StateSpace(0, floating_base=True), 4, float(dt)
        self.mass, self.J, self.J_inv = float(mass), J, np.linalg.inv(J)
        L, k = arm_length, yaw_coefficient
        wrench = np.array([[0, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1],
                           [0, L, 0, -L], [-L, 0, L, 0], [k, -k, k, -k]], dtype=float)  # [f; τ] = W u
        self.B = np.vstack([wrench[:3] / mass, self.J_inv @ wrench[3:]])  # ∂a/∂u
        self.hover_thrust = np.full(4, -GRAVITY[2] * mass / 4)

    def _controls(self, X: Trajectory, U) -> np.ndarray:
        U = np.asarray(U, dtype=float)
        if U.shape != (len(X), 4) or not np.isfinite(U).all():
            raise ValueError(f"Quadrotor: U must be finite with shape ({len(X)}, 4), got {U.shape}")
        return U

    def acceleration(self, X: Trajectory, U) -> np.ndarray:
        """``a = ν̇`` (N, 6) at every knot."""
        R, v, w = X.H[:, :3, :3], X.v[:, :3], X.v[:, 3:]
        a = U @ self.B.T
        a[:, :3] += GRAVITY @ R - cross(w, v)  # GRAVITY @ R = Rᵀg per knot
        a[:, 3:] -= cross(w, w @ self.J) @ self.J_inv  # J, J⁻¹ symmetric
        return a

    def _jacobians(self, X: Trajectory) -> tuple[np.ndarray, np.ndarray]:
        """``A_q = ∂a/∂z_H`` and ``A_v = ∂a/∂ν`` (N, 6, 6)."""
        N, v, w = len(X), X.v[:, :3], X.v[:, 3:]
        A_q, A_v = np.zeros((N, 6, 6)), np.zeros((N, 6, 6))
        A_q[:, :3, 3:] = hat(GRAVITY @ X.H[:, :3, :3])  # exp(−ζ) Rᵀg ≈ Rᵀg + [Rᵀg]× ζ
        A_v[:, :3, :3], A_v[:, :3, 3:] = -hat(w), hat(v)
        A_v[:, 3:, 3:] = self.J_inv @ (hat(w @ self.J) - hat(w) @ self.J)
        return A_q, A_v

    def step_trajectory(self, X: Trajectory, U) -> Trajectory:
        V = X.v + self.dt * self.acceleration(X, self._controls(X, U))
        E = exp_blocks(self.dt * V)[0]
        return Trajectory(X.H @ E, np.zeros((len(X), 0)), V)

    def trajectory_derivatives(self, X: Trajectory, U, out: DiscreteDerivatives | None = None) -> DiscreteDerivatives:
        U, N, dt = self._controls(X, U), len(X), self.dt
        out = DiscreteDerivatives(np.empty((N, 12, 12)), np.empty((N, 12, 4))) if out is None else out
        _, PHI, JR = exp_blocks(dt * (X.v + dt * self.acceleration(X, U)))
        A_q, A_v = self._jacobians(X)
        G = out.F_x[:, 6:]
        G[:, :, :6], G[:, :, 6:] = dt * A_q, np.eye(6) + dt * A_v
        out.F_x[:, :6] = dt * JR @ G
        out.F_x[:, :6, :6] += PHI
        out.F_u[:, 6:] = dt * self.B
        out.F_u[:, :6] = dt * dt * JR @ self.B
        return out

    def trajectory_hessian_contraction(self, X: Trajectory, U, LAM) -> StepHessian:
        U, N, dt = self._controls(X, U), len(X), self.dt
        LAM = np.asarray(LAM, dtype=float)
        if LAM.shape != (N, 12) or not np.isfinite(LAM).all():
            raise ValueError(f"Quadrotor: LAM must be finite with shape ({N}, 12), got {LAM.shape}")
        XI = dt * (X.v + dt * self.acceleration(X, U))
        _, PHI, JR = exp_blocks(XI)
        A_q, A_v = self._jacobians(X)
        H = np.zeros((N, 16, 16))  # in (z_H, ν, u)
        # field node: μᵀ ∂²a, μ the covector of a; no (x, u) or (u, u) terms since u enters linearly
        mu = dt * (LAM[:, 6:] + dt * np.einsum("nij,ni->nj", JR, LAM[:, :6]))
        mu_l, gamma, eta = mu[:, :3], GRAVITY @ X.H[:, :3, :3], mu[:, 3:] @ self.J_inv
        H[:, 3:6, 3:6] = 0.5 * (mu_l[:, :, None] * gamma[:, None] + gamma[:, :, None] * mu_l[:, None])
        H[:, 3:6, 3:6] -= np.einsum("ni,ni->n", mu_l, gamma)[:, None, None] * np.eye(3)
        H[:, 6:9, 9:12], H[:, 9:12, 6:9] = -hat(mu_l), hat(mu_l)
        H[:, 9:12, 9:12] = hat(eta) @ self.J - self.J @ hat(eta)
        # compose node H exp(ξ): the BCH terms Saᵀ H_ab Sb + Sbᵀ H_abᵀ Sa + Sbᵀ H_bb Sb with Sa = [I 0 0]
        H_ab, H_bb = compose_blocks(XI, PHI, JR, LAM[:, :6])
        Sb = np.concatenate([dt * dt * A_q, dt * np.eye(6) + dt * dt * A_v, np.broadcast_to(dt * dt * self.B, (N, 6, 4))],
                            axis=2)
        HabSb = H_ab @ Sb
        H[:, :6] += HabSb
        H[:, :, :6] += HabSb.swapaxes(1, 2)
        H += Sb.swapaxes(1, 2) @ H_bb @ Sb
        H = 0.5 * (H + H.swapaxes(1, 2))  # symmetric to the last bit, as the Riccati sweep expects
        return StepHessian(H[:, :12, :12], H[:, :12, 12:], H[:, 12:, 12:])


# ---- the problem --------------------------------------------------------------------------------------------


def target_pose(distance: float = 1.0, yaw: float = np.pi / 2) -> np.ndarray:
    """The goal: ``distance`` metres away along x and 0.5 m up, yawed by ``yaw``."""
    H = se3.exp(np.array([0, 0, 0, 0, 0, yaw]))
    H[:3, 3] = [distance, 0.0, 0.5]
    return H


def fly_to_pose(quad: Quadrotor, horizon: int, H_goal: np.ndarray) -> Problem:
    """From hovering at the origin to hovering at ``H_goal`` in ``horizon`` steps: running state and thrust
    regularization (around the hover thrust), thrusts in [0, 2 × hover], a terminal cost on the pose and twist."""
    space = quad.state_space
    goal = State(H_goal, np.zeros(0), np.zeros(6))
    running = CostSum(space, 4)
    running.add("state", state_regularization(space, goal, [1e-2] * 6 + [1e-1] * 6, 4))
    running.add("thrust", control_regularization(4, 1e-1, quad.hover_thrust, space))
    terminal = CostSum(space, 0)
    terminal.add("goal", state_regularization(space, goal, [1e3] * 6 + [1e2] * 6, 0))
    model = ActionModel(quad, running, u_lb=0.0, u_ub=2.0 * quad.hover_thrust)
    return Problem(space.neutral(), model, terminal, horizon)


def pose_error(H: np.ndarray, H_goal: np.ndarray) -> tuple[float, float]:
    """Position error [m] and rotation angle error [rad] of the pose ``H`` from ``H_goal``."""
    return float(np.linalg.norm(H[:3, 3] - H_goal[:3, 3])), float(np.linalg.norm(se3.log(se3.inverse(H_goal) @ H)[3:]))


def solve_all(problem: Problem, quad: Quadrotor, options: SolverOptions | None = None) -> dict:
    """iLQR and DDP from hovering in place, FDDP from "stay at x0 with the rotors off" (gaps at every knot):
    solver name -> SolverResult."""
    hover = np.tile(quad.hover_thrust, (problem.T, 1))
    return {"iLQR": solve_ilqr(problem, hover, options),
            "DDP": solve_ddp(problem, hover, options),
            "FDDP": solve_fddp(problem, problem.constant_trajectory(), None, options)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description="A quadrotor flown to a target pose by iLQR, DDP and FDDP.")
    parser.add_argument("--quick", action="store_true", help="a shorter horizon")
    args = parser.parse_args(argv)
    quad = Quadrotor(dt=0.05)
    horizon = 30 if args.quick else 60
    H_goal = target_pose()
    problem = fly_to_pose(quad, horizon, H_goal)
    solve_all(problem, quad, SolverOptions(max_iter=1))  # warm-up: load the compiled kernels before timing
    print(f"quadrotor: fly 1 m, climb 0.5 m and yaw 90 deg in {horizon * quad.dt:.1f} s ({horizon} steps of "
          f"{quad.dt} s)")
    print(f"{'solver':>6} {'status':>10} {'iters':>5} {'cost':>12} {'pos err [m]':>11} {'rot err [deg]':>13} "
          f"{'time [ms]':>9}")
    results = solve_all(problem, quad)
    for name, r in results.items():
        dp, dr = pose_error(r.xs.H[-1], H_goal)
        print(f"{name:>6} {r.status:>10} {r.iterations:>5} {r.cost:>12.8f} {dp:>11.2e} {np.degrees(dr):>13.2e} "
              f"{1e3 * r.total_time:>9.1f}")
    return results


if __name__ == "__main__":
    main()
