"""Quadruped gaits with contact switches and touchdown impacts (``lietraj.problems.gaits``): each converges from
its default guess, the feet land where planned, stance feet hold, forces stay (up to the barrier's softness) in
the friction cones, and the motion is the one asked for (swing feet clear the ground, the CoM flies)."""

from __future__ import annotations

import numpy as np
import pytest

from lietraj.dynamics.kinematics.center_of_mass import center_of_mass
from lietraj.dynamics.kinematics.kinematics import frame_placement, frame_velocity
from lietraj.optimal_control.dynamics.discrete_dynamics import RobotDynamics
from lietraj.optimal_control.dynamics.impulse_robot_dynamics import ImpulseRobotDynamics
from lietraj.problems import FEET, make_problem
from lietraj.problems.gaits import jump, trot


def phase_kinds(ex) -> list[str]:
    """The sequence of phases: 'stance:<feet>', 'flight' or 'impact', one entry per run of knots."""
    kinds = []
    for m in ex.problem.running:
        d = m.dynamics
        kind = ("impact" if isinstance(d, ImpulseRobotDynamics) else "flight" if isinstance(d, RobotDynamics)
                else "stance:" + ",".join(sorted(c.frame for c in d.contacts)))
        if not kinds or kinds[-1] != kind or kind == "impact":
            kinds.append(kind)
    return kinds


def gait_checks(m: dict[str, float]) -> None:
    assert m["converged"] == 1.0
    assert m["landing_error_mm"] < 1.0
    assert m["foot_drift_mm"] < 2.0
    assert m["torque_ratio"] < 1.01
    # The barrier is soft and a take-off ends with zero normal force: at most 1 % of the weight outside the cones.
    assert m["friction_margin"] > -0.01 and m["min_normal_force"] > -0.01


@pytest.mark.parametrize("robot", ["solo12", "anymal"])
def test_trot_swings_diagonal_pairs_and_lands_them_where_planned(robot):
    ex = trot(robot)
    lf, rf, lh, rh = FEET[robot].frames
    every = ",".join(sorted(FEET[robot].frames))
    assert phase_kinds(ex) == ["stance:" + every, "stance:" + ",".join(sorted((lf, rh))), "impact",
                               "stance:" + every, "stance:" + ",".join(sorted((rf, lh))), "impact", "stance:" + every]
    result = ex.solve()
    m = ex.metrics(result)
    gait_checks(m)
    assert m["com_advance_mm"] > 0.5 * 0.75 * 1e3 * center_of_mass(ex.model, ex.problem.x0)[2] / 3.0
    # The swing feet clear the ground by most of the step height, at the middle of their swing.
    z0 = frame_placement(ex.model, ex.problem.x0, rf)[2, 3]
    z = frame_placement(ex.model, result.xs, rf)[:, 2, 3]
    assert z.max() - z0 > 0.8 * center_of_mass(ex.model, ex.problem.x0)[2] / 4.5


@pytest.mark.parametrize("robot", ["solo12", "anymal"])
def test_jump_flies_and_lands_a_step_ahead(robot):
    ex = jump(robot)
    every = "stance:" + ",".join(sorted(FEET[robot].frames))
    assert phase_kinds(ex) == [every, "flight", "impact", every]
    result = ex.solve()
    m = ex.metrics(result)
    gait_checks(m)
    c0 = center_of_mass(ex.model, ex.problem.x0)[2]
    assert abs(m["apex_mm"] - 1e3 * c0 / 4.0) < 0.1 * 1e3 * c0 / 4.0
    assert m["landing_com_error_mm"] < 10.0
    # The touchdown knot is an impact: the feet come down fast and stop dead.
    k = next(k for k, a in enumerate(ex.problem.running) if isinstance(a.dynamics, ImpulseRobotDynamics))
    for f in FEET[robot].frames:
        before = frame_velocity(ex.model, result.xs[k], f, "local_world_aligned")[:3]
        after = frame_velocity(ex.model, result.xs[k + 1], f, "local_world_aligned")[:3]
        assert before[2] < -0.1 and np.abs(after).max() < 1e-9, (f, before, after)
    # In flight every foot is off the ground.
    flight = [k for k, a in enumerate(ex.problem.running) if isinstance(a.dynamics, RobotDynamics)]
    for f in FEET[robot].frames:
        z0 = frame_placement(ex.model, ex.problem.x0, f)[2, 3]
        z = frame_placement(ex.model, result.xs, f)[:, 2, 3]
        assert np.all(z[flight[1:]] > z0), f


def test_gait_parameters_and_errors():
    ex = make_problem("trot", "anymal", steps=3, step_knots=10)
    assert len(ex.problem.running) == 3 * (2 + 10 + 1) + 2
    # The last stance holds each foot where its last step put it: the diagonal pair that stepped first is 1.5
    # steps ahead, the other one step.
    L = center_of_mass(ex.model, ex.problem.x0)[2] / 3.0
    lf, rf, lh, rh = FEET["anymal"].frames
    for c in ex.problem.running[-1].dynamics.contacts:
        start = frame_placement(ex.model, ex.problem.x0, c.frame)[:3, 3]
        assert np.allclose(c.target[:3, 3] - start, [(1.5 if c.frame in (rf, lh) else 1.0) * L, 0.0, 0.0], atol=1e-12)
    with pytest.raises(ValueError, match="robot must be one of"):
        trot("talos")
    with pytest.raises(ValueError, match="steps"):
        trot("solo12", steps=0)
    with pytest.raises(ValueError, match="step_height"):
        trot("solo12", step_height=-0.1)
    with pytest.raises(ValueError, match="length"):
        jump("solo12", length=(0.1, 0.0))
    with pytest.raises(ValueError, match="has no parameter 'horizon'"):
        make_problem("jump", "solo12", horizon=50)
    # DDP starts from the guess's states, its first step the closed-loop rollout about them (the open-loop rollout of
    # the guess's controls falls, and no landing follows from it).
    assert jump("solo12").solve("ddp").converged


def test_the_gaps_a_linearization_steps_with_the_jacobians_are_the_steps():
    """``Problem.gaps(X, U, derivatives)`` takes the steps the stance, flight and touchdown runs wrote with their
    Jacobians (``DiscreteDerivatives.stepped``): equal to the bit to the gaps of the steps themselves."""
    problem = jump("solo12").problem
    kinds = {type(m.dynamics).__name__ for m in problem.running}
    assert {"ContactRobotDynamics", "RobotDynamics", "ImpulseRobotDynamics"} <= kinds
    rng = np.random.default_rng(3)
    X = problem.rollout(0.1 * rng.normal(size=(problem.T, problem.nu)))
    X.v[:] += 0.01 * rng.normal(size=X.v.shape)
    X.s[:] += 0.01 * rng.normal(size=X.s.shape)
    U = 0.1 * rng.normal(size=(problem.T, problem.nu))
    d = problem.derivatives(X, U)
    assert np.array_equal(problem.gaps(X, U, d), problem.gaps(X, U))
    assert np.abs(problem.gaps(X, U)[1:]).max() > 1e-3
