"""Talos, standing on both soles, brings its left gripper to a point in front of it while keeping its balance.

The problem of Crocoddyl's ``examples/humanoid_manipulation.py``, term for term, so that the two libraries can be
compared number for number (``benchmarks/bench_vs_crocoddyl.py``):

- dynamics: both soles held by rigid 6D contacts (LOCAL, no Baumgarte terms), the KKT forward dynamics,
  semi-implicit Euler with ``dt = 0.05`` over ``T = 60`` knots;
- running cost, ``dt`` times (Crocoddyl's integrated action model scales running costs by ``dt``):
  ``1e2`` · gripper placement (translation weights 1, rotation weights 1e-4, squared, on ``log6(M_target⁻¹ M)``)
  + ``1e-3`` · state regularization to the initial half-sitting state (weights squared: base position 0, base
  orientation 10, joints 0.01, velocities 10) + ``1e-4`` · ``½|u|²`` + ``1e3`` · joint-limit barrier (the quadratic
  barrier of Crocoddyl, applied as there to the state residual ``x ⊖ x0`` with the URDF position limits);
- terminal cost, unscaled: the same gripper, limit and state terms with velocity weights 100.

The initial guess is Crocoddyl's: constant states ``x0`` at every knot (FDDP starts infeasible) and the
minimum-norm quasi-static torques (``quasi_static_torques``); FDDP starts with regularization 0.1, as the example.
The CoM reference of the example is computed there but never added to a cost; it is reported here as a check.
"""

from __future__ import annotations

import numpy as np

from lietraj.dynamics.kinematics.center_of_mass import center_of_mass
from lietraj.dynamics.contacts.equilibrium import quasi_static_torques
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.optimal_control.constraints import ConstraintSet, torque_limits, wrench_cone
from lietraj.optimal_control.costs.activations import QuadraticBarrier, WeightedQuadratic
from lietraj.optimal_control.costs.costs import CostSum, ResidualCost, control_regularization
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.problem import ActionModel, Problem
from lietraj.optimal_control.costs.residuals import FramePlacementResidual, StateResidual
from lietraj.optimal_control.solvers.solvers import SolverOptions, SolverResult
from lietraj.problems.example_problem import ExampleProblem
from lietraj.problems.support import robot_with_feet

GRIPPER = "gripper_left_joint"
TARGET = (0.4, 0.0, 1.2)
FRICTION = 0.7  # of the friction pyramids with limits=True (the other ready problems' default)


def talos_reach(target=TARGET, horizon: int = 60, dt: float = 0.05, robot: str = "talos",
                limits: bool = False) -> ExampleProblem:
    """Crocoddyl's humanoid manipulation problem (module docstring): ``target`` (3,) is the world point the left
    gripper frame must reach, held as a running and terminal cost over ``horizon`` knots of ``dt`` seconds.

    ``limits=True`` makes it a reach Talos can do: the torques within the URDF's effort limits (the controls' box),
    the soles' forces in their friction pyramids (``FRICTION``) and centres of pressure in the soles (hard
    constraints, ``solve_constrained``). Crocoddyl's problem has neither: its optimum asks an arm joint for 6.7 times
    its limit, and once the torques are limited the rigid contacts alone would let the feet pull (the centre of
    pressure 126 mm outside a sole)."""
    model, feet = robot_with_feet(robot, ("talos",), "talos_reach")
    target = np.array(target, dtype=float)
    if target.shape != (3,) or not np.isfinite(target).all():
        raise ValueError(f"talos_reach: target must be a finite point (3,), got {target!r}")
    space, n, nv = model.state_space, model.n, model.nv
    x0 = model.reference_state("half_sitting")
    contacts = feet.contacts()
    goal = np.eye(4)
    goal[:3, 3] = target

    def costs(nu: int, scale: float) -> CostSum:
        velocity_weight = 10.0 if nu else 100.0
        w_state = np.concatenate([np.zeros(3), np.full(3, 10.0), np.full(n, 0.01), np.full(nv, velocity_weight)]) ** 2
        limits = QuadraticBarrier(np.concatenate([np.full(6, -np.inf), model.lower_limit, np.full(nv, -np.inf)]),
                                  np.concatenate([np.full(6, np.inf), model.upper_limit, np.full(nv, np.inf)]))
        c = CostSum(space, nu)
        c.add("gripper", ResidualCost(FramePlacementResidual(model, GRIPPER, goal, nu=nu),
                                      WeightedQuadratic(np.array([1.0] * 3 + [1e-4] * 3) ** 2)), scale * 1e2)
        c.add("state", ResidualCost(StateResidual(space, x0, nu), WeightedQuadratic(w_state)), scale * 1e-3)
        if nu:
            c.add("control", control_regularization(nu, state_space=space), scale * 1e-4)
        c.add("limits", ResidualCost(StateResidual(space, x0, nu), limits), scale * 1e3)
        return c

    dynamics = ContactRobotDynamics(model, dt, contacts)
    if not isinstance(limits, bool):
        raise ValueError(f"talos_reach: limits must be True or False, got {limits!r}")
    if limits:
        torques = torque_limits(model)  # its bounds, as the controls' box: the box QP keeps them at every iterate
        cone = ConstraintSet(space, n).add("wrench cone", wrench_cone(dynamics, FRICTION, feet.soles))
        running = ActionModel(dynamics, costs(n, dt), torques.lower, torques.upper, constraints=cone)
    else:
        running = ActionModel(dynamics, costs(n, dt))
    problem = Problem(x0, running, costs(0, 1.0), horizon=horizon)
    p = [frame_placement(model, x0, f)[:3, 3] for f in feet.frames]
    com_ref = np.append(0.5 * (p[0] + p[1])[:2], center_of_mass(model, x0)[2])

    def checks(ex: ExampleProblem, result: SolverResult) -> dict[str, float]:
        xT = result.xs[len(result.xs) - 1]
        hand = frame_placement(model, xT, GRIPPER)[:3, 3]
        return {"target_distance_mm": 1e3 * float(np.linalg.norm(hand - target)),
                "com_xy_offset_mm": 1e3 * float(np.linalg.norm(center_of_mass(model, xT)[:2] - com_ref[:2]))}

    return ExampleProblem(
        "talos_reach", model, problem, np.tile(quasi_static_torques(model, x0, contacts), (horizon, 1)),
        xs0=problem.constant_trajectory(), solver="fddp", options=SolverOptions(max_iter=500, reg_init=0.1),
        description="Talos on both feet reaches a point with its left gripper (Crocoddyl's humanoid_manipulation"
                    + (", within its torque, friction and sole limits)" if limits else ")"),
        friction=FRICTION, targets={"gripper target": target}, soles=feet.soles, checks=checks)
