"""Crocoddyl 3.2.1's penalty formulations of the problems of ``bench_constrained.py``: its residuals and activation
barriers for the friction cones and joint limits, the torque limits as the control bounds of its action models (kept
by ``SolverBoxFDDP``).

- ``jump``: Crocoddyl's own ``SimpleQuadrupedalGaitProblem.createJumpingProblem`` (the builder of its example
  ``quadrupedal_gaits_fwddyn.py``), with the jump's geometry taken from lietraj's ``jump`` (``jump_parameters``).
  It is a different problem from lietraj's: its own phases and knot count, contact gains, friction pyramid
  (circumscribing the cone of ``mu``), state bounds and costs; lietraj's constraints cannot be evaluated on its
  solution, only its torques and its own contact forces against the same limits (``contact_margins``).
- ``squat``: no Crocoddyl example squats, so ``squat_problem`` writes one in the style of its examples (one
  ``IntegratedActionModelEuler`` of ``DifferentialActionModelContactFwdDynamics`` per knot, ``ContactModel6D`` on
  the soles), term for term lietraj's soft squat (``make_problem("squat", "talos", constraints="soft")``: the
  same knots, contact gains and targets, CoM reference, posture and control costs) with Crocoddyl's
  ``ResidualModelContactWrenchCone`` barrier instead of lietraj's wrench-cone barrier (Crocoddyl's cone has yaw
  torque rows lietraj's has not), Crocoddyl's state-bounds barrier on the joint positions, and the torque limits as
  control bounds instead of a torque barrier. Its solution lives on lietraj's knots: lietraj's constraints are
  evaluated on it.
- ``ur5``: ``ur5_problem``, lietraj's soft UR5 reach of ``bench_constrained.py`` term for term, the torque barrier
  replaced by control bounds.

Crocoddyl's integrated models multiply the running costs by ``dt`` (lietraj's builders put it in the weights), so
the running weights here are lietraj's divided by ``dt``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import crocoddyl
import numpy as np
import pinocchio as pin
from crocoddyl.utils.quadruped import SimpleQuadrupedalGaitProblem

from lietraj.dynamics.lie.state import Trajectory
from lietraj.dynamics.model.pinocchio_interop import from_pinocchio, to_pinocchio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from machine import crocoddyl_threads  # noqa: E402
from pin_oracle import pin_model  # noqa: E402

BIG = sys.float_info.max  # Crocoddyl's examples' "no bound" (croc_oracle.talos_reach_problem)


def pinocchio_model(model) -> pin.Model:
    """A copy of the Pinocchio model of lietraj's ``model`` (``pin_oracle.pin_model``) with ``model``'s effort and
    joint position limits (the ready problems' documented actuator limits, where solo12's URDF says 1000 N m, and any
    tightened bound become the control bounds and state bounds Crocoddyl reads from it), and ``model``'s reference
    posture as its "standing" configuration (the one Crocoddyl's gait builder starts from)."""
    pm = pin.Model(pin_model(model.name))
    pm.referenceConfigurations["standing"] = to_pinocchio(model, model.reference_state())[0]
    nq_base, nv_base = (7, 6) if model.floating_base else (0, 0)
    if np.any(model.continuous):
        raise ValueError(f"{model.name}: continuous joints are not mirrored here")
    effort, lower, upper = pm.effortLimit.copy(), pm.lowerPositionLimit.copy(), pm.upperPositionLimit.copy()
    effort[nv_base:] = model.effort_limit
    lower[nq_base:], upper[nq_base:] = model.lower_limit, model.upper_limit
    pm.effortLimit, pm.lowerPositionLimit, pm.upperPositionLimit = effort, lower, upper
    return pm


def state_vector(model, x) -> np.ndarray:
    """Crocoddyl's state ``[q; v]`` of the lietraj state ``x``."""
    return np.concatenate(to_pinocchio(model, x))


def lietraj_trajectory(model, xs) -> Trajectory:
    """The lietraj ``Trajectory`` of Crocoddyl's states ``xs``."""
    nq = len(xs[0]) - model.nv
    return Trajectory.from_states([from_pinocchio(model, x[:nq], x[nq:]) for x in xs])


def with_control_bounds(action, effort: np.ndarray):
    """``action`` with the control bounds ``±effort`` (the ones ``SolverBoxFDDP`` keeps)."""
    action.u_lb, action.u_ub = -effort, effort
    return action


def solve(problem: crocoddyl.ShootingProblem, xs, us, max_iter: int) -> tuple[crocoddyl.SolverBoxFDDP, bool]:
    """``SolverBoxFDDP`` from the guess ``(xs, us)`` with Crocoddyl's default stopping test (``th_stop`` 1e-9 on
    ``Σ |Q_u|²``), no callbacks."""
    solver = crocoddyl.SolverBoxFDDP(crocoddyl_threads(problem))
    converged = solver.solve(list(xs), list(us), max_iter, False)
    return solver, converged


# ---- the jump: Crocoddyl's own builder -----------------------------------------------------------------------


FEET = {"anymal": ("LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"), "solo12": ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")}


def jump_parameters(model, dt: float = 0.01, ground_knots: int = 10) -> dict:
    """``createJumpingProblem``'s arguments for the jump of lietraj's ``jump`` defaults: CoM apex 1/4 of the standing
    CoM height above the line to the landing point, landing 1/3 of it forward, ``ground_knots`` on the ground before
    and after, and the flight's duration ``2 sqrt(2 height / g)`` (Crocoddyl's flight is ``2 flyingKnots`` knots:
    ``flyingKnots`` rising towards the apex target, as many falling without a CoM target)."""
    from lietraj.dynamics.kinematics.center_of_mass import center_of_mass

    c0 = float(center_of_mass(model, model.reference_state())[2])
    height = c0 / 4.0
    flight = 2.0 * np.sqrt(2.0 * height / float(np.linalg.norm(model.gravity)))
    return {"jumpHeight": height, "jumpLength": [c0 / 3.0, 0.0, 0.0], "timeStep": dt, "groundKnots": ground_knots,
            "flyingKnots": max(1, int(round(flight / dt / 2.0)))}


def jump_problem(model) -> tuple[crocoddyl.ShootingProblem, list, list, dict]:
    """``(problem, xs, us, parameters)``: Crocoddyl's jump of ``model`` (anymal or solo12) built by its example
    builder from the standing state at rest, with the control bounds of ``model``'s effort limits, and the example's
    guess (the standing state at every knot, each knot's ``quasiStatic`` controls)."""
    pm = pinocchio_model(model)
    gait = SimpleQuadrupedalGaitProblem(pm, *FEET[model.name])
    x0 = pm.defaultState.copy()  # the builder's: the "standing" configuration at rest
    parameters = jump_parameters(model)
    problem = gait.createJumpingProblem(x0, **{**parameters, "jumpLength": list(parameters["jumpLength"])})
    xs = [x0] * (problem.T + 1)
    return problem, xs, list(problem.quasiStatic(xs[:-1])), parameters


# ---- the squat: lietraj's soft squat in Crocoddyl's terms -------------------------------------------------------


def squat_problem(ex) -> tuple[crocoddyl.ShootingProblem, list, list]:
    """``(problem, xs, us)``: the soft squat ``ex`` (``make_problem("squat", robot, constraints="soft")``, a humanoid
    on 6D sole contacts) as Crocoddyl's models (module docstring), and ``ex``'s guess."""
    model, problem = ex.model, ex.problem
    running = problem.running[0]
    costs, dynamics, dt = running.cost.costs, running.dynamics, running.dynamics.dt
    pm = pinocchio_model(model)
    state = crocoddyl.StateMultibody(pm)
    actuation = crocoddyl.ActuationModelFloatingBase(state)
    nu = actuation.nu
    x0 = state_vector(model, problem.x0)
    u0 = ex.us0[0]

    contacts = crocoddyl.ContactModelMultiple(state, nu)
    for c in dynamics.contacts:
        target = pin.SE3(c.target[:3, :3], c.target[:3, 3])
        contacts.addContact(c.frame, crocoddyl.ContactModel6D(state, pm.getFrameId(c.frame), target, pin.LOCAL, nu,
                                                              np.array(c.baumgarte)))

    lower = np.concatenate([np.full(6, -BIG), model.lower_limit, np.full(model.nv, -BIG)])
    upper = np.concatenate([np.full(6, BIG), model.upper_limit, np.full(model.nv, BIG)])
    joint_limits = crocoddyl.CostModelResidual(
        state, crocoddyl.ActivationModelQuadraticBarrier(crocoddyl.ActivationBounds(lower, upper)),
        crocoddyl.ResidualModelState(state, np.concatenate([pin.neutral(pm), np.zeros(pm.nv)]), nu))
    cone_residual = costs["wrench cone"].cost.residual
    mu = cone_residual.mu

    def wrench_cone(frame: str) -> crocoddyl.CostModelResidual:
        half_length, half_width = cone_residual.soles[frame]
        cone = crocoddyl.WrenchCone(np.eye(3), mu, np.array([2.0 * half_length, 2.0 * half_width]), 4, True)
        residual = crocoddyl.ResidualModelContactWrenchCone(state, pm.getFrameId(frame), cone, nu, True)
        return crocoddyl.CostModelResidual(
            state, crocoddyl.ActivationModelQuadraticBarrier(crocoddyl.ActivationBounds(cone.lb, cone.ub)), residual)

    posture = crocoddyl.CostModelResidual(
        state, crocoddyl.ActivationModelWeightedQuad(costs["posture"].cost.activation.weights),
        crocoddyl.ResidualModelState(state, x0, nu))
    control = crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelControl(state, u0))
    com_target = costs["com"].cost.residual.target
    models = []
    for k in range(problem.T):
        c = crocoddyl.CostModelSum(state, nu)
        com = crocoddyl.ResidualModelCoMPosition(state, com_target[k], nu)
        c.addCost("com", crocoddyl.CostModelResidual(state, com), costs["com"].weight / dt)
        c.addCost("posture", posture, costs["posture"].weight / dt)
        c.addCost("control", control, costs["control"].weight / dt)
        for contact in dynamics.contacts:
            c.addCost(f"{contact.frame} wrench cone", wrench_cone(contact.frame), costs["wrench cone"].weight / dt)
        c.addCost("joint limits", joint_limits, costs["joint limits"].weight / dt)
        dam = crocoddyl.DifferentialActionModelContactFwdDynamics(state, actuation, contacts, c)
        models.append(with_control_bounds(crocoddyl.IntegratedActionModelEuler(dam, dt), model.effort_limit))

    final = problem.terminal.costs
    t = crocoddyl.CostModelSum(state, nu)
    t.addCost("com", crocoddyl.CostModelResidual(
        state, crocoddyl.ResidualModelCoMPosition(state, final["com"].cost.residual.target.reshape(-1)[:3], nu)),
        final["com"].weight)
    t.addCost("posture", crocoddyl.CostModelResidual(
        state, crocoddyl.ActivationModelWeightedQuad(final["posture"].cost.activation.weights),
        crocoddyl.ResidualModelState(state, x0, nu)), final["posture"].weight)
    terminal = crocoddyl.IntegratedActionModelEuler(
        crocoddyl.DifferentialActionModelContactFwdDynamics(state, actuation, contacts, t), 0.0)
    xs = [state_vector(model, ex.xs0[k]) for k in range(problem.T + 1)]
    return crocoddyl.ShootingProblem(x0, models, terminal), xs, list(ex.us0)


# ---- the UR5 reach ------------------------------------------------------------------------------------------


def ur5_problem(model, x0, u_ref, tool: str, target, T: int, dt: float, weights: dict
                ) -> tuple[crocoddyl.ShootingProblem, list, list]:
    """``(problem, xs, us)``: the soft UR5 reach of ``bench_constrained.py`` (``model`` with its tightened joint and
    torque limits; ``weights``: its cost weights, the running ones without ``dt``) with the torque limits as control
    bounds, and the guess ``u_ref`` at every knot with its rollout."""
    pm = pinocchio_model(model)
    state = crocoddyl.StateMultibody(pm)
    actuation = crocoddyl.ActuationModelFull(state)
    n = model.n
    x_ref = state_vector(model, x0)
    frame = pm.getFrameId(tool)
    bounds = crocoddyl.ActivationBounds(np.concatenate([model.lower_limit, np.full(n, -BIG)]),
                                        np.concatenate([model.upper_limit, np.full(n, BIG)]))

    def costs(terminal: bool) -> crocoddyl.CostModelSum:
        nu = actuation.nu
        c = crocoddyl.CostModelSum(state, nu)
        key = "terminal " if terminal else ""
        c.addCost("state", crocoddyl.CostModelResidual(
            state, crocoddyl.ActivationModelWeightedQuad(weights[key + "state activation"]),
            crocoddyl.ResidualModelState(state, x_ref, nu)), weights[key + "state"])
        if not terminal:
            c.addCost("control", crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelControl(state, u_ref)),
                      weights["control"])
        c.addCost("goal", crocoddyl.CostModelResidual(
            state, crocoddyl.ResidualModelFrameTranslation(state, frame, target, nu)), weights[key + "goal"])
        c.addCost("joint limits", crocoddyl.CostModelResidual(
            state, crocoddyl.ActivationModelQuadraticBarrier(bounds),
            crocoddyl.ResidualModelState(state, np.zeros(state.nx), nu)), weights[key + "joint limits"])
        return c

    def action(terminal: bool):
        dam = crocoddyl.DifferentialActionModelFreeFwdDynamics(state, actuation, costs(terminal))
        return crocoddyl.IntegratedActionModelEuler(dam, 0.0 if terminal else dt)

    running = with_control_bounds(action(False), model.effort_limit)
    problem = crocoddyl.ShootingProblem(x_ref, [running] * T, action(True))
    us = [np.asarray(u_ref, dtype=float)] * T
    return problem, list(problem.rollout(us)), us


# ---- what a Crocoddyl solution does with the limits ---------------------------------------------------------


def contact_margins(problem: crocoddyl.ShootingProblem, mu: float, weight: float) -> tuple[float, float]:
    """``(friction margin, smallest normal force)`` of a solved problem's contact forces, both over the robot's
    ``weight`` (``ExampleProblem.metrics``' definitions: ``min (mu f_n - |f_t|)`` and ``min f_n``, in each contact's
    own axes: world-aligned for Crocoddyl's 3D quadruped contacts, the sole's for 6D ones); NaN without contacts.
    Read from the running datas (Crocoddyl's own forces at its solution); impulse knots are not counted, as
    ``metrics`` counts only contact phases."""
    margin, normal = np.inf, np.inf
    for data in problem.runningDatas:
        differential = getattr(data, "differential", None)
        if differential is None or not hasattr(differential.multibody, "contacts"):
            continue
        for contact in differential.multibody.contacts.contacts.todict().values():
            f = contact.f.linear
            margin = min(margin, mu * f[2] - float(np.hypot(f[0], f[1])))
            normal = min(normal, f[2])
    return (margin / weight, normal / weight) if np.isfinite(margin) else (np.nan, np.nan)
