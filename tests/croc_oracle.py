"""Crocoddyl 3.2.1's problems built as its examples build them, the oracles of lietraj's twins (tests) and their
peers in ``benchmarks/bench_vs_crocoddyl.py``: ``examples/humanoid_manipulation.py`` for
``lietraj.problems.talos_reach``, and the trot of ``examples/quadrupedal_gaits_fwddyn.py`` on solo12 for
``lietraj.problems.trot(formulation="crocoddyl")``."""

from __future__ import annotations

import sys

import crocoddyl
import example_robot_data
import numpy as np
import pinocchio as pin
from crocoddyl.utils.quadruped import SimpleQuadrupedalGaitProblem

from lietraj.dynamics import se3

T, DT, TARGET = 60, 5e-2, np.array([0.4, 0.0, 1.2])


def talos_reach_problem() -> tuple[crocoddyl.ShootingProblem, list[np.ndarray], list[np.ndarray]]:
    """``(problem, xs, us)``: Crocoddyl's problem and the example's initial guess (constant states, quasi-static
    controls)."""
    rmodel = example_robot_data.load("talos").model
    rdata = rmodel.createData()
    state = crocoddyl.StateMultibody(rmodel)
    actuation = crocoddyl.ActuationModelFloatingBase(state)
    q0 = rmodel.referenceConfigurations["half_sitting"]
    x0 = np.concatenate([q0, np.zeros(rmodel.nv)])
    pin.forwardKinematics(rmodel, rdata, q0)
    pin.updateFramePlacements(rmodel, rdata)

    contacts = crocoddyl.ContactModelMultiple(state, actuation.nu)
    for foot in ("left_sole_link", "right_sole_link"):
        contacts.addContact(foot + "_contact", crocoddyl.ContactModel6D(
            state, rmodel.getFrameId(foot), pin.SE3.Identity(), pin.LOCAL, actuation.nu, np.array([0.0, 0.0])))

    big = sys.float_info.max
    lower = np.concatenate([-big * np.ones(6), rmodel.lowerPositionLimit[7:], -big * np.ones(state.nv)])
    upper = np.concatenate([big * np.ones(6), rmodel.upperPositionLimit[7:], big * np.ones(state.nv)])
    bounds = crocoddyl.ActivationBounds(lower, upper, 1.0)
    limit = crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelQuadraticBarrier(bounds),
                                        crocoddyl.ResidualModelState(state, x0, actuation.nu))

    def state_weights(velocity: float) -> np.ndarray:
        return np.array([0] * 3 + [10.0] * 3 + [0.01] * (state.nv - 6) + [velocity] * state.nv) ** 2

    x_reg = crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelWeightedQuad(state_weights(10.0)),
                                        crocoddyl.ResidualModelState(state, x0, actuation.nu))
    x_reg_terminal = crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelWeightedQuad(state_weights(100.0)),
                                                 crocoddyl.ResidualModelState(state, x0, actuation.nu))
    u_reg = crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelControl(state, actuation.nu))
    goal = crocoddyl.CostModelResidual(
        state, crocoddyl.ActivationModelWeightedQuad(np.array([1] * 3 + [0.0001] * 3) ** 2),
        crocoddyl.ResidualModelFramePlacement(state, rmodel.getFrameId("gripper_left_joint"),
                                              pin.SE3(np.eye(3), TARGET), actuation.nu))

    running, terminal = crocoddyl.CostModelSum(state, actuation.nu), crocoddyl.CostModelSum(state, actuation.nu)
    running.addCost("gripperPose", goal, 1e2)
    running.addCost("stateReg", x_reg, 1e-3)
    running.addCost("ctrlReg", u_reg, 1e-4)
    running.addCost("limitCost", limit, 1e3)
    terminal.addCost("gripperPose", goal, 1e2)
    terminal.addCost("stateReg", x_reg_terminal, 1e-3)
    terminal.addCost("limitCost", limit, 1e3)

    def action(costs, dt):
        return crocoddyl.IntegratedActionModelEuler(
            crocoddyl.DifferentialActionModelContactFwdDynamics(state, actuation, contacts, costs), dt)

    problem = crocoddyl.ShootingProblem(x0, [action(running, DT)] * T, action(terminal, 0.0))
    return problem, [x0] * (T + 1), list(problem.quasiStatic([x0] * T))


def trot_solo12_problem() -> tuple[crocoddyl.ShootingProblem, list[np.ndarray], list[np.ndarray]]:
    """``(problem, xs, us)``: the trot of Crocoddyl's ``quadrupedal_gaits_fwddyn.py`` on solo12 and the example's
    initial guess (the standing state at every knot, each knot's quasi-static controls: on its own contacts, empty
    at the impulse knots).

    The problem is ``SimpleQuadrupedalGaitProblem.createTrottingProblem`` on a fresh builder, as the example calls
    it: ``timeStep`` 1e-2, ``stepKnots`` 25, ``supportKnots`` 2, from the ``standing`` configuration at rest with the
    feet ``FL_FOOT, FR_FOOT, HL_FOOT, HR_FOOT`` (solo12's names for the example's LF, RF, LH, RH). The example's
    step length 0.15 m and height 0.1 m are ANYmal's, about 1/3 and 1/4.5 of its standing CoM height (0.458 m);
    on solo12, whose CoM stands at 0.212 m, a 0.1 m foot lift would be half its height, so both are taken at the
    same fractions of solo12's CoM height, 7.1 cm and 4.7 cm (``lietraj.problems.trot``'s defaults). A fresh
    builder halves the first step (the example reaches its trot after a walk, which has spent the half step)."""
    rmodel = example_robot_data.load("solo12").model
    gait = SimpleQuadrupedalGaitProblem(rmodel, "FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
    x0 = rmodel.defaultState  # the builder's: the "standing" configuration at rest
    height = pin.centerOfMass(rmodel, rmodel.createData(), x0[:rmodel.nq])[2]
    problem = gait.createTrottingProblem(x0, height / 3.0, height / 4.5, 1e-2, 25, 2)
    return problem, [x0] * (problem.T + 1), list(problem.quasiStatic([x0] * problem.T))


def trot_anymal_problem() -> tuple[crocoddyl.ShootingProblem, list[np.ndarray], list[np.ndarray]]:
    """``(problem, xs, us)``: the trot of Crocoddyl's ``quadrupedal_gaits_fwddyn.py`` on its own robot, ANYmal, with
    the example's settings (``stepLength`` 0.15 m, ``stepHeight`` 0.1 m, ``timeStep`` 1e-2, ``stepKnots`` 25,
    ``supportKnots`` 2) on a fresh builder, from the ``standing`` configuration at rest, and the example's guess (as
    ``trot_solo12_problem``)."""
    rmodel = example_robot_data.load("anymal").model
    gait = SimpleQuadrupedalGaitProblem(rmodel, "LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT")
    x0 = rmodel.defaultState
    problem = gait.createTrottingProblem(x0, 0.15, 0.1, 1e-2, 25, 2)
    return problem, [x0] * (problem.T + 1), list(problem.quasiStatic([x0] * problem.T))


def iterations(solver: crocoddyl.SolverAbstract, converged: bool) -> int:
    """The iterations a Crocoddyl solve ran, each a backward pass and a step: ``solver.iter`` is the index of the
    last one (the loop returns from inside it once converged, ends past it otherwise)."""
    return solver.iter + 1 if converged else solver.iter


def perturbed_states(problem, rng: np.random.Generator):
    """The problem's constant trajectory at ``x0`` with every knot moved at random (base pose by 0.05, joints by
    0.1, velocities drawn at 0.5): states off the dynamics, where both libraries' costs must agree too."""
    X = problem.constant_trajectory()
    for k in range(len(X)):
        X.H[k] = X.H[k] @ se3.exp(0.05 * rng.standard_normal(6))
    X.s[:] += 0.1 * rng.standard_normal(X.s.shape)
    X.v[:] = 0.5 * rng.standard_normal(X.v.shape)
    return X
