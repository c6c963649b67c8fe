"""Balance: hold a posture on the feet, recover from a push, or stand on one foot less (one-foot humanoid,
three-legged quadruped).

- ``lift=None``: every foot stays on the ground (rigid contacts with Baumgarte terms towards the initial foot poses,
  as in ``squat``) and the robot starts with its base pushed (``push``, a base velocity in world axes); it must come
  back to rest with its CoM over the feet.
- ``lift="<foot frame>"``: two contact phases. In the first (``shift`` of the horizon) all feet hold and the CoM
  moves over the remaining support (the centre of the supporting sole, or of the supporting feet); in the second
  that foot's contact is gone (a different ``ContactRobotDynamics`` for those knots: a contact switch; lifting
  off needs no impulse) and a frame-translation cost raises it by ``clearance`` while the CoM stays over the
  support.

Costs (running ones ``dt`` times): CoM tracking, posture regularization (base orientation, joints, velocities),
torques about the quasi-static ones, the lifted foot's height; terminal: CoM over the support and at rest.
``metrics`` adds the final CoM offset from the support centre, the lifted foot's height and the final speed.
"""

from __future__ import annotations

import numpy as np

from lietraj.dynamics.kinematics.center_of_mass import center_of_mass
from lietraj.dynamics.contacts.equilibrium import quasi_static_torques
from lietraj.dynamics.kinematics.kinematics import frame_jacobian, frame_placement
from lietraj.dynamics.lie.state import State
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.costs.costs import ResidualCost
from lietraj.optimal_control.problem import ActionModel, Problem
from lietraj.optimal_control.costs.residuals import FrameTranslationResidual
from lietraj.optimal_control.solvers.solvers import SolverOptions, SolverResult
from lietraj.problems.example_problem import ExampleProblem
from lietraj.problems.support import (
    FEET,
    at_rest_cost,
    contact_gains,
    hard_constraints,
    robot_with_feet,
    standing_constraints,
    standing_cost,
)


def balance(robot: str = "talos_legs", lift: str | None = None, horizon: int = 60, dt: float = 0.04,
            push=(0.0, 0.1, 0.0), clearance: float | None = None, shift: float = 0.5,
            com_weight: float = 1e4, control_weight: float = 1e-3, friction: float = 0.7,
            constraints: str = "hard") -> ExampleProblem:
    """The balance problem of the module docstring for ``robot``. ``lift``: None, or the foot frame to lift
    (one of ``lietraj.problems.FEET[robot].frames``). ``push``: the initial base linear velocity (m/s, world axes)
    when nothing is lifted; the joints move with it so that the feet stay still. ``clearance``: how high the
    lifted foot goes (default 5 cm for a humanoid, 3 cm for a quadruped). ``shift``: the fraction of the horizon
    spent moving the CoM before the foot lifts. ``friction``: the Coulomb coefficient of the friction cones the
    forces are kept in (with the soles' centres of pressure) by constraints at the cones, soles, joint and
    torque limits themselves (``constraints="hard"``, the default: ``support.standing_constraints``, met by
    ``solve_constrained``), or with ``constraints="soft"`` by barrier costs started inside them."""
    hard = hard_constraints(constraints, "balance")
    model, feet = robot_with_feet(robot, tuple(FEET), "balance")
    if lift is not None and lift not in feet.frames:
        raise ValueError(f"balance: lift must be None or one of {', '.join(feet.frames)}, got {lift!r}")
    if not 0.0 < shift < 1.0:
        raise ValueError(f"balance: shift must be in (0, 1), got {shift!r}")
    rest = model.reference_state()
    x0 = rest
    poses = {f: frame_placement(model, x0, f) for f in feet.frames}
    gains = contact_gains(dt)
    every = feet.contacts(baumgarte=gains, targets=list(poses.values()))
    support = tuple(f for f in feet.frames if f != lift)
    c0 = center_of_mass(model, x0)
    center = np.mean([poses[f][:3, 3] for f in support], axis=0)
    c_goal = np.array([center[0], center[1], c0[2]])
    if lift is None:
        push = np.array(push, dtype=float)
        if push.shape != (3,) or not np.isfinite(push).all():
            raise ValueError(f"balance: push must be a finite base velocity (3,), got {push!r}")
        v = np.zeros(model.nv)
        v[:3] = x0.H[:3, :3].T @ push  # the base twist is in the base frame
        # The feet stay still: the joint velocities solve J_s sdot = -J_base nu (exactly, for legs of full rank).
        J = np.vstack([frame_jacobian(model, x0, c.frame, "local")[:c.dim] for c in every])
        v[6:] = -np.linalg.lstsq(J[:, 6:], J[:, :6] @ v[:6], rcond=None)[0]
        x0 = State(x0.H, x0.s, v)
    u0 = quasi_static_torques(model, x0, every)

    def knot(dynamics, com_ref, foot_target=None) -> ActionModel:
        c = standing_cost(dynamics, feet, rest, com_ref, u0, com_weight, control_weight, friction, barriers=not hard)
        if foot_target is not None:
            c.add("foot", ResidualCost(FrameTranslationResidual(model, lift, foot_target, nu=model.n)), dt * com_weight)
        limits = standing_constraints(dynamics, feet, friction) if hard else None
        return ActionModel(dynamics, c, constraints=limits)

    terminal = at_rest_cost(model, rest, c_goal, com_weight, joint_weight=0.01)
    on_all_feet = ContactRobotDynamics(model, dt, every)
    if lift is None:
        running = [knot(on_all_feet, c_goal)] * horizon
        foot_goal = None
    else:
        clearance = (0.05 if feet.kind == "6d" else 0.03) if clearance is None else clearance
        foot_goal = poses[lift][:3, 3] + np.array([0.0, 0.0, clearance])
        k1 = max(1, int(round(shift * horizon)))
        s = 0.5 * (1.0 - np.cos(np.pi * np.arange(k1) / k1))
        shifting = knot(on_all_feet, c0 + np.outer(s, c_goal - c0))
        on_lift = ContactRobotDynamics(model, dt, tuple(c for c in every if c.frame != lift))
        on_support = knot(on_lift, c_goal, foot_goal)
        running = [shifting] * k1 + [on_support] * (horizon - k1)
        terminal.add("foot", ResidualCost(FrameTranslationResidual(model, lift, foot_goal, nu=0)), com_weight)
    problem = Problem(x0, running, terminal)

    def checks(ex: ExampleProblem, result: SolverResult) -> dict[str, float]:
        xT = result.xs[len(result.xs) - 1]
        out = {"com_offset_mm": 1e3 * float(np.linalg.norm(center_of_mass(model, xT)[:2] - c_goal[:2])),
               "final_speed": float(np.linalg.norm(xT.v))}
        if foot_goal is not None:
            out["foot_height_error_mm"] = 1e3 * float(abs(frame_placement(model, xT, lift)[2, 3] - foot_goal[2]))
        return out

    # Holding torques cannot keep a pushed robot, or one foot short, upright: start from the posture held still at
    # every knot instead (FDDP closes the gaps).
    xs0 = problem.constant_trajectory(rest)
    xs0[0] = x0
    what = "holds its posture after a push" if lift is None else f"stands without {lift}"
    return ExampleProblem(
        "balance", model, problem, np.tile(u0, (horizon, 1)), xs0=xs0, solver="fddp", options=SolverOptions(max_iter=200),
        friction=friction,
        description=f"{robot} {what}", targets={} if foot_goal is None else {"foot target": foot_goal},
        soles=feet.soles, checks=checks)
