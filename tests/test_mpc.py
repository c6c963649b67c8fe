"""The receding-horizon controller: the shifted window is the problem built afresh, a tick solved to convergence is
the solve of that problem, the schedule's segments and references, the deadline, failures that keep the previous
plan, hard constraints, and a closed loop on a plant of the model itself (a perfect model: the loop must track)."""

from __future__ import annotations

import gc
from dataclasses import FrozenInstanceError

import numpy as np
import pytest

import lietraj
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.dynamics.lie.state import Trajectory
from lietraj.optimal_control.solvers.riccati import backward_pass
from lietraj.optimal_control.solvers.solvers import Solver
from lietraj.mpc import MPCOptions, ModelPredictiveController, Phase, Push, Schedule, closed_loop
from lietraj.optimal_control import (
    ActionModel,
    Constraint,
    ConstraintOptions,
    ConstraintSet,
    ControlResidual,
    CostSum,
    FrameTranslationResidual,
    Problem,
    ResidualCost,
    RobotDynamics,
    SolverOptions,
    control_regularization,
    solve_constrained,
    solve_fddp,
    state_regularization,
)

DT, T = 0.01, 20


@pytest.fixture(scope="module")
def ur5():
    return lietraj.load_robot("ur5")


def start_state(robot):
    x = robot.state_space.neutral()
    x.s[:] = [0.0, -1.0, 1.0, -1.5, -1.5, 0.0]
    return x


def reach(robot, x0, target, horizon=T, limits=False):
    """The tool frame to ``target`` (3,) or per knot (horizon, 3); the torques as constraints with ``limits``."""
    sp, n = robot.state_space, robot.n
    tool = FrameTranslationResidual(robot, "tool0", target, nu=n)
    running = CostSum(sp, n)
    running.add("tool", ResidualCost(tool), 1e3 * DT)
    running.add("state", state_regularization(sp, x0, 1.0, n), DT)
    running.add("control", control_regularization(n), 1e-3 * DT)
    terminal_tool = FrameTranslationResidual(robot, "tool0", np.asarray(target).reshape(-1, 3)[-1], nu=0)
    terminal = CostSum(sp, 0)
    terminal.add("tool", ResidualCost(terminal_tool), 1e3)
    terminal.add("state", state_regularization(sp, x0, 1.0, 0), 1.0)
    constraints = None
    if limits:
        constraints = ConstraintSet(sp, n).add("torque", Constraint(ControlResidual(n, None, sp), -20.0, 20.0))
    model = ActionModel(RobotDynamics(robot, DT), running, constraints=constraints)
    return model, terminal, tool, terminal_tool


class ModelPlant:
    """The robot's own dynamics at a 1 ms step: a plant with no model error, recording its pushes."""

    def __init__(self, robot, x0, fail_at=None):
        self.space = robot.state_space
        self.dynamics = RobotDynamics(robot, 0.001)
        self.x, self.time, self.pushes, self.fail_at = x0.copy(), 0.0, [], fail_at

    def state(self):
        return self.x.copy()

    def step(self, u, duration=None):
        for _ in range(max(1, round((duration or 0.001) / 0.001))):
            if self.fail_at is not None and self.time >= self.fail_at:
                raise RuntimeError(f"the simulation diverged at t = {self.time:.3f} s")
            self.x = self.dynamics.step_trajectory(Trajectory.repeat(self.x, 1), np.asarray(u)[None])[0]
            self.time += 0.001

    def push(self, body, force, torque=(0.0, 0.0, 0.0), duration=0.1):
        self.pushes.append((self.time, body, tuple(force)))


def moving_reach(ur5, x0, **options):
    """A controller of the tool frame following a circle (``update`` moves the targets), with ``options``."""
    p0 = frame_placement(ur5, x0, "tool0")[:3, 3]
    model, terminal, tool, terminal_tool = reach(ur5, x0, np.tile(p0, (T, 1)))

    def moving(t):
        return p0 + 0.1 * np.array([np.sin(2 * t), 1.0 - np.cos(2 * t), 0.0])

    def update(c):
        tool.target = np.array([moving(c.time + DT * k) for k in range(T)])
        terminal_tool.target = moving(c.time + DT * T)

    return ModelPredictiveController(Schedule.constant(model, terminal), x0, MPCOptions(T, **options),
                                     update=update), moving


def test_a_shifted_problem_is_the_problem_built_with_the_shifted_models(ur5):
    x0 = start_state(ur5)
    a = reach(ur5, x0, [0.4, 0.1, 0.5])[0]
    b = reach(ur5, x0, [0.3, -0.2, 0.6])[0]
    b = ActionModel(b.dynamics, b.cost, -np.full(6, 5.0), np.full(6, 5.0))
    terminal = reach(ur5, x0, [0.4, 0.1, 0.5])[1]
    models = [a] * 5 + [b] * 3
    shifted = Problem(x0, list(models), terminal)
    for k in range(4):
        shifted.shift(a if k % 2 else b)
        models = models[1:] + [a if k % 2 else b]
    fresh = Problem(x0, models, terminal)
    rng = np.random.default_rng(0)
    X, U = ur5.state_space.random_trajectory(9, rng), rng.normal(size=(8, 6))
    assert shifted.cost(X, U) == pytest.approx(fresh.cost(X, U), rel=1e-14)
    np.testing.assert_array_equal(shifted.u_lb, fresh.u_lb)
    np.testing.assert_array_equal(shifted.u_ub, fresh.u_ub)
    assert shifted._cost_runs == fresh._cost_runs and shifted.has_control_limits
    d1, d2 = shifted.derivatives(X, U), fresh.derivatives(X, U)
    np.testing.assert_allclose(d1.running.l_xx, d2.running.l_xx, rtol=1e-14)
    np.testing.assert_allclose(d1.dynamics.F_x, d2.dynamics.F_x, rtol=1e-14)
    with pytest.raises(ValueError, match="shifted-in model"):
        shifted.shift("not a model")


def test_a_schedule_gives_each_window_its_phases_and_the_rows_of_their_references(ur5):
    x0 = start_state(ur5)
    model, terminal, tool, _ = reach(ur5, x0, np.zeros((4, 3)), horizon=4)
    path = np.arange(12.0).reshape(4, 3)
    other = reach(ur5, x0, [0.0, 0.0, 1.0])[0]
    cyclic = Schedule([Phase(other, 3, name="hold"), Phase(model, 4, [(tool, "target", path)], name="move")],
                      terminal, cyclic=True)
    segments = cyclic.window(5, 5)  # knots 5, 6 (move 2, 3), 7-9 (hold 0-2)
    with pytest.raises(ValueError, match="appears twice"):
        cyclic.window(5, 6)  # knot 10 is move 0 again: one residual cannot hold rows 2-3 and 0
    assert [(s.phase.name, s.offset, s.start, s.count) for s in segments] == [("move", 2, 0, 2), ("hold", 0, 2, 3)]
    assert [(s.phase.name, s.offset, s.count) for s in cyclic.window(8, 6)] == [("hold", 1, 2), ("move", 0, 4)]
    cyclic.apply_references(cyclic.window(5, 4), 5)
    np.testing.assert_array_equal(tool.target, path[2:4])
    held = Schedule([Phase(other, 2), Phase(model, 4, [(tool, "target", path)])], terminal)
    segments = held.window(4, 5)  # knots 4, 5: move 2, 3; then the last knot held
    assert [(s.offset, s.count) for s in segments] == [(2, 5)]
    held.apply_references(segments, 4)
    np.testing.assert_array_equal(tool.target, path[[2, 3, 3, 3, 3]])
    assert held.model(100) is model and cyclic.model(7 * 3 + 1) is other
    np.testing.assert_allclose(cyclic.times([0, 3, 7, 16]), [0.0, 3 * DT, 7 * DT, 16 * DT])
    np.testing.assert_allclose(held.times([5, 6, 9]), [5 * DT, 6 * DT, 9 * DT])
    moving = Schedule([Phase(other, 3), Phase(model, 4, [(tool, "target", lambda t: np.outer(t, [1.0, 2.0, 3.0]))])],
                      terminal, cyclic=True)
    moving.apply_references(moving.window(8 + 7, 3), 8 + 7)  # knots 15-17 (hold 1-2, move 0): move 0 is at 17 DT
    np.testing.assert_allclose(tool.target, [[17 * DT, 34 * DT, 51 * DT]])
    calls = []

    def along(t):
        calls.append(len(t))
        return np.outer(t, [1.0, 2.0, 3.0])

    counted = Schedule([Phase(other, 3), Phase(model, 4, [(tool, "target", along)])], terminal, cyclic=True)
    for first in range(7, 7 + 2 * 7):  # two passes through the cycle, windows of 3 knots
        segments = counted.window(first, 3)
        counted.apply_references(segments, first)
        move = [s for s in segments if s.phase is counted.phases[1]]
        if move:  # the rows of the knots the window covers, as if computed at their times alone
            knots = first + move[0].start + np.arange(move[0].count)
            np.testing.assert_array_equal(tool.target, np.outer(counted.times(knots), [1.0, 2.0, 3.0]))
    assert calls == [4, 4]  # once per pass through the phase, at all of its knots
    with pytest.raises(ValueError, match="rows"):
        Phase(model, 3, [(tool, "target", path)])


def test_a_cyclic_schedule_keeps_its_windows_and_sets_only_the_references_that_move(ur5):
    """A window one pass later is the same segments; a reference whose rows the window still covers whole is left
    as it is, one whose rows move (or that the user set meanwhile) is set again: every tick's references equal
    those of a schedule that sets all of them afresh."""
    x0 = start_state(ur5)

    def path(t):
        return np.outer(t, [1.0, 2.0, 3.0])

    def schedule():
        model, terminal, tool, _ = reach(ur5, x0, np.zeros((4, 3)), horizon=4)
        other, _, hold_tool, _ = reach(ur5, x0, np.zeros((3, 3)), horizon=3)
        return Schedule([Phase(other, 3, [(hold_tool, "target", path)], name="hold"),
                         Phase(model, 4, [(tool, "target", path)], name="move")], terminal, cyclic=True), \
            (hold_tool, tool)

    kept, (hold_tool, tool) = schedule()
    assert kept.window(2, 4) is kept.window(2 + 7, 4) and kept.window(2, 4) is not kept.window(3, 4)
    with pytest.raises(FrozenInstanceError):
        kept.window(2, 4)[0].count = 1
    with pytest.raises(ValueError, match="knot must be >= 0"):
        kept.window(2 - 7, 4)  # not the kept window one pass earlier: there is none
    kept.apply_references(kept.window(6, 4), 6)  # knots 6-9: move 3, then hold 0 .. 2 of the next pass
    hold_rows, move_rows = hold_tool.target, tool.target
    kept.apply_references(kept.window(7, 4), 7)  # hold 0 .. 2 (the same rows), move 0
    assert hold_tool.target is hold_rows and tool.target is not move_rows
    hold_tool.target = np.zeros(3)  # set by the user meanwhile: set again, though its rows did not move
    kept.apply_references(kept.window(7, 4), 7)
    np.testing.assert_array_equal(hold_tool.target, hold_rows)
    fresh, residuals = schedule()
    for first in range(8, 8 + 2 * 7):
        kept.apply_references(kept.window(first, 4), first)
        fresh._set_from.clear()
        fresh.apply_references(fresh.window(first, 4), first)
        for mine, theirs in zip((hold_tool, tool), residuals):
            np.testing.assert_array_equal(mine.target, theirs.target)


def test_a_tick_solved_to_convergence_is_the_solve_of_the_window_built_afresh(ur5):
    """After ticks from the plant's states, the tick's plan equals FDDP on the same window problem built from
    scratch (same models, references and measured state): the shift and the warm start change nothing but speed."""
    x0 = start_state(ur5)
    p0 = frame_placement(ur5, x0, "tool0")[:3, 3]
    model, terminal, tool, terminal_tool = reach(ur5, x0, np.tile(p0, (T, 1)))

    def moving(t):
        return p0 + 0.1 * np.array([np.sin(3 * t), np.cos(3 * t) - 1.0, 0.0])

    def update(c):
        tool.target = np.array([moving(c.time + DT * k) for k in range(T)])
        terminal_tool.target = moving(c.time + DT * T)

    options = SolverOptions(tol=1e-16)
    mpc = ModelPredictiveController(Schedule.constant(model, terminal), x0,
                                    MPCOptions(T, iterations=50, solver_options=options), update=update)
    plant = ModelPlant(ur5, x0)
    for _ in range(4):
        tick = mpc.tick(plant.state())
        plant.step(tick.u, DT)
    x = plant.state()
    tick = mpc.tick(x)
    assert tick.knot == 4 and mpc.time == pytest.approx(4 * DT)
    fresh_model, fresh_terminal, _, fresh_tool = reach(ur5, x0, np.array([moving(4 * DT + DT * k) for k in range(T)]))
    fresh_tool.target = moving(4 * DT + DT * T)
    fresh = solve_fddp(Problem(x, fresh_model, fresh_terminal, horizon=T),
                       us0=np.zeros((T, 6)), options=SolverOptions(max_iter=200, tol=1e-16))
    assert tick.status == "converged" and fresh.converged
    np.testing.assert_allclose(tick.plan.us, fresh.us, atol=1e-5 * np.abs(fresh.us).max())
    np.testing.assert_allclose(tick.plan.K, fresh.K, atol=1e-5 * np.abs(fresh.K).max())
    assert tick.iterations < fresh.iterations  # the warm start pays


def test_the_feedback_policy_interpolates_the_plan_between_its_knots(ur5):
    x0 = start_state(ur5)
    model, terminal, _, _ = reach(ur5, x0, [0.4, 0.2, 0.4])
    mpc = ModelPredictiveController(Schedule.constant(model, terminal), x0, MPCOptions(T))
    tick = mpc.start()
    plan, space = tick.plan, ur5.state_space
    np.testing.assert_allclose(tick.control(plan.xs[0]), tick.u, atol=1e-12)
    np.testing.assert_allclose(tick.control(plan.reference(0, 0.004), 0.004), tick.u, atol=1e-12)
    middle = plan.reference(0, 0.5 * DT)
    np.testing.assert_allclose(space.difference(plan.xs[0], middle), 0.5 * space.difference(plan.xs[0], plan.xs[1]),
                               atol=1e-12)
    z = np.random.default_rng(1).normal(size=12) * 1e-3
    np.testing.assert_allclose(tick.control(space.integrate(middle, z), 0.5 * DT), tick.u + plan.K[0] @ z, atol=1e-12)


def test_the_deadline_bounds_the_iterations_of_a_tick(ur5):
    x0 = start_state(ur5)
    model, terminal, _, _ = reach(ur5, x0, [0.5, 0.3, 0.3])
    mpc = ModelPredictiveController(Schedule.constant(model, terminal), x0,
                                    MPCOptions(T, iterations=100, deadline=1e-6, start_iterations=1))
    mpc.start()
    tick = mpc.tick(x0)
    assert tick.status == "deadline" and tick.iterations == 1 and tick.overran  # one iteration is always taken
    with pytest.raises(ValueError, match="deadline"):
        MPCOptions(T, deadline=0.0)
    with pytest.raises(ValueError, match="horizon"):
        MPCOptions(0)


def test_a_failed_tick_keeps_the_previous_plan_one_knot_on(ur5):
    x0 = start_state(ur5)
    model, terminal, tool, _ = reach(ur5, x0, [0.5, 0.3, 0.3])
    broken = {"now": False}

    def update(c):
        tool.target = [np.nan if broken["now"] else 0.5, 0.3, 0.3]

    mpc = ModelPredictiveController(Schedule.constant(model, terminal), x0, MPCOptions(T, iterations=3),
                                    update=update)
    first = mpc.start()
    second = mpc.tick(first.plan.xs[1])
    broken["now"] = True
    with pytest.raises(ValueError, match="NaN"):  # the residual refuses a NaN target: bad input raises at once
        mpc.tick(second.plan.xs[1])


def test_a_solve_that_fails_inside_keeps_the_previous_policy(ur5):
    x0 = start_state(ur5)
    model, terminal, _, _ = reach(ur5, x0, [0.5, 0.3, 0.3])
    mpc = ModelPredictiveController(Schedule.constant(model, terminal), x0, MPCOptions(T, iterations=3))
    first = mpc.start()
    far = first.plan.xs[1].copy()
    far.v[:] = 1e200  # the rollout from here is not finite: the solve fails, the tick falls back
    tick = mpc.tick(far)
    assert tick.failed and "previous plan, knot 1" in tick.status and tick.plan is first.plan
    np.testing.assert_array_equal(tick.u, first.plan.us[1])
    again = mpc.tick(first.plan.xs[2])
    assert not again.failed and again.plan_knot == 0


@pytest.mark.parametrize("penalty_init", [10.0, 1e3])
def test_hard_constraints_hold_at_every_tick_and_the_multipliers_move_with_the_window(ur5, penalty_init):
    """Each tick converges, its torques within their limits, and plans as a fresh solve does. From a penalty of 1e3
    the multipliers shifted into a tick pushed some torque rows away from the bound they neared, and trials clipped
    at the bound itself stalled them short of where their penalty starts (100 iterations without converging)."""
    x0 = start_state(ur5)
    model, terminal, _, _ = reach(ur5, x0, [0.3, 0.4, 0.6], limits=True)
    tight = ConstraintOptions(penalty_init=penalty_init, stationarity_tol=1e-8, feasibility_tol=1e-9,
                              complementarity_tol=1e-9)
    mpc, prepared = (ModelPredictiveController(Schedule.constant(model, terminal), x0,
                                               MPCOptions(T, iterations=100, constraint_options=tight))
                     for _ in range(2))
    plant = ModelPlant(ur5, x0)
    for k in range(3):
        if k:
            prepared.prepare()  # a constrained window is only receded and referenced ahead: the same solve
        tick = mpc.tick(plant.state())
        assert tick.status == "converged", tick.status
        assert np.abs(tick.plan.us).max() <= 20.0 + 1e-5
        np.testing.assert_array_equal(prepared.tick(plant.state()).plan.us, tick.plan.us)
        plant.step(tick.u, DT)
    fresh = solve_constrained(Problem(plant.state(), model, terminal, horizon=T), constraint_options=tight)
    tick = mpc.tick(plant.state())
    assert np.abs(fresh.us).max() == pytest.approx(20.0, abs=1e-5)  # the limit binds
    np.testing.assert_allclose(tick.plan.us, fresh.us, atol=1e-5 * np.abs(fresh.us).max())


def test_a_closed_loop_on_a_perfect_plant_tracks_a_moving_target_and_applies_its_pushes(ur5):
    x0 = start_state(ur5)
    mpc, moving = moving_reach(ur5, x0, iterations=2)
    plant = ModelPlant(ur5, x0)
    frozen = []  # the objects alive at the start are out of the collector's reach during the loop, and only then
    log = closed_loop(mpc, plant, 0.5, pushes=[Push(0.2, "wrist_3_link", [5.0, 0.0, 0.0])],
                      on_tick=lambda tick, x: frozen.append(gc.get_freeze_count()))
    assert min(frozen) > 10_000 and gc.get_freeze_count() == 0
    assert not log.error and not log.stopped and len(log.ticks) == 50
    errors = [np.linalg.norm(frame_placement(ur5, x, "tool0")[:3, 3] - moving(t)) for t, x in zip(log.times, log.states)]
    assert max(errors[10:]) < 0.02, max(errors[10:])
    assert plant.pushes and plant.pushes[0][0] == pytest.approx(0.2, abs=1e-9)
    stats = log.statistics()
    assert stats["ticks"] == 50 and stats["failed_ticks"] == 0 and stats["tick_median_ms"] > 0
    assert log.simulated_time == pytest.approx(0.5)


def test_a_plant_that_fails_ends_the_loop_with_its_log(ur5):
    x0 = start_state(ur5)
    model, terminal, _, _ = reach(ur5, x0, [0.5, 0.3, 0.3])
    mpc = ModelPredictiveController(Schedule.constant(model, terminal), x0, MPCOptions(T))
    log = closed_loop(mpc, ModelPlant(ur5, x0, fail_at=0.05), 1.0)
    assert "diverged at t = 0.050 s" in log.error and len(log.ticks) == 6  # the tick at 0.05 s, then its step fails
    stopped = closed_loop(ModelPredictiveController(Schedule.constant(model, terminal), x0, MPCOptions(T)),
                          ModelPlant(ur5, x0), 1.0, stop=lambda x: "moved" if abs(x.s[0]) > 1e-3 else None)
    assert stopped.stopped.startswith("moved at t = ") and not stopped.error
    with pytest.raises(ValueError, match="duration"):
        closed_loop(mpc, ModelPlant(ur5, x0), -1.0)
    with pytest.raises(ValueError, match="pushes must be Push events, got tuple"):
        closed_loop(mpc, ModelPlant(ur5, x0), 1.0, pushes=[Push(0.1, "wrist_3_link", [1.0, 0.0, 0.0]), (0.2, "x")])


def test_every_solver_drives_the_loop_to_the_same_place(ur5):
    x0 = start_state(ur5)
    goal = frame_placement(ur5, x0, "tool0")[:3, 3] + [0.0, 0.05, 0.05]
    model, terminal, _, _ = reach(ur5, x0, goal)
    ends = {}
    for solver in ("fddp", "ilqr", "ddp"):
        # each tick's window linearized before its state is measured, or not; the gains swept over 4 knots
        for preparation, gains_knots in ((False, None), (True, None), (False, 4)):
            mpc = ModelPredictiveController(Schedule.constant(model, terminal), x0,
                                            MPCOptions(T, solver=solver, iterations=2, preparation=preparation,
                                                       gains_knots=gains_knots))
            log = closed_loop(mpc, ModelPlant(ur5, x0), 0.4)
            key = solver, preparation, gains_knots
            assert not log.error and log.statistics()["failed_ticks"] == 0, key
            ends[key] = frame_placement(ur5, log.states[-1], "tool0")[:3, 3]
    first = ends["fddp", False, None]
    assert np.linalg.norm(first - goal) < 1e-2  # the costs' trade-off leaves 5 mm
    for key, end in ends.items():
        assert np.abs(end - first).max() < 1e-4, key


def test_a_ticks_line_search_starts_from_the_last_ticks_step_unless_asked_not_to(ur5):
    x0 = start_state(ur5)
    model, terminal, _, _ = reach(ur5, x0, [0.5, 0.3, 0.3])
    for adaptive in (True, False):
        mpc = ModelPredictiveController(Schedule.constant(model, terminal), x0, MPCOptions(T, adaptive_step=adaptive))
        mpc.start()
        mpc._first_step = 0.125  # as if the last tick's first step had been 1/8
        first = mpc._solver_options(1, first=True).alphas
        assert first[0] == (0.25 if adaptive else 1.0) and first[-1] == SolverOptions().alphas[-1]
        assert mpc._solver_options(1).alphas == SolverOptions().alphas  # the tick's later iterations: all steps
    with pytest.raises(ValueError, match="adaptive_step"):
        MPCOptions(T, adaptive_step="yes")


def test_without_relinearizing_a_tick_linearizes_once_and_keeps_the_gains_of_its_sweep(ur5):
    """The same step either way; relinearize: a second linearization and sweep give the gains at the new plan;
    without: one linearization, the gains of the sweep at the guess, before the step."""
    x0 = start_state(ur5)
    model, terminal, _, _ = reach(ur5, x0, [0.5, 0.3, 0.3])
    ticks, linearizations = {}, {}
    for relinearize in (True, False):
        mpc = ModelPredictiveController(Schedule.constant(model, terminal), x0,
                                        MPCOptions(T, start_iterations=3, relinearize=relinearize))
        mpc.start()
        guess = (mpc._warm.xs.copy(), mpc._warm.us.copy())
        calls = []
        derivatives = mpc.problem.derivatives
        mpc.problem.derivatives = lambda *a, **k: calls.append(1) or derivatives(*a, **k)
        ticks[relinearize], linearizations[relinearize] = mpc.tick(x0), len(calls)
    assert linearizations == {True: 2, False: 1}
    new, old = ticks[True].plan, ticks[False].plan
    np.testing.assert_array_equal(new.us, old.us)
    assert ticks[False].status == "max_iterations" and ticks[False].iterations == 1
    solver = Solver(mpc.problem)
    at_new = solver.compute_direction(solver.start(new.xs, new.us))[0]
    np.testing.assert_allclose(new.K, at_new.K, rtol=1e-6, atol=1e-9)
    xs, us = guess  # the tick's guess: the start's plan shifted by a knot, from the measured state
    xs[:T], us[:-1] = xs[1:].copy(), us[1:].copy()
    xs[0] = x0
    at_guess = solver.compute_direction(solver.start(xs, us))[0]
    np.testing.assert_allclose(old.K, at_guess.K, rtol=1e-6, atol=1e-9)
    assert not np.allclose(old.K, new.K, rtol=1e-4)
    with pytest.raises(ValueError, match="relinearize"):
        MPCOptions(T, relinearize=1)


def test_gains_swept_over_the_first_knots_are_a_whole_sweep_of_the_new_plan_s_first_knots_and_the_guess_s_rest(ur5):
    """gains_knots = m: the same step; the gains after knot m are the iteration's sweep's (about the guess), the
    first m those of a whole sweep of the model whose first m knots are the new plan's and whose others (terminal
    included) are the guess's: the sweep went on from the value function the iteration's sweep left at knot m."""
    x0, m = start_state(ur5), 4
    model, terminal, _, _ = reach(ur5, x0, [0.5, 0.3, 0.3])
    ticks = {}
    for gains_knots, relinearize in ((m, True), (None, False)):
        mpc = ModelPredictiveController(Schedule.constant(model, terminal), x0,
                                        MPCOptions(T, start_iterations=3, relinearize=relinearize,
                                                   gains_knots=gains_knots))
        mpc.start()
        guess = (mpc._warm.xs.copy(), mpc._warm.us.copy())
        ticks[gains_knots] = mpc.tick(x0)
    new, old = ticks[m].plan, ticks[None].plan
    np.testing.assert_array_equal(new.us, old.us)
    np.testing.assert_array_equal(new.K[m:], old.K[m:])
    assert not np.allclose(new.K[:m], old.K[:m], rtol=1e-4)
    xs, us = guess  # the tick's guess, as in the test above
    xs[:T], us[:-1] = xs[1:].copy(), us[1:].copy()
    xs[0] = x0
    spliced, at_guess = mpc.problem.derivatives(new.xs, new.us), mpc.problem.derivatives(xs, us)
    pairs = [(spliced.dynamics.F_x, at_guess.dynamics.F_x), (spliced.dynamics.F_u, at_guess.dynamics.F_u),
             *zip(spliced.dynamics.structure, at_guess.dynamics.structure),
             *((getattr(spliced.running, n), getattr(at_guess.running, n)) for n in vars(spliced.running))]
    for target, source in pairs:
        target[m:] = source[m:]
    spliced.terminal = at_guess.terminal
    whole = backward_pass(spliced, SolverOptions().reg_min)
    np.testing.assert_allclose(new.K[:m], whole.K[:m], rtol=1e-7, atol=1e-10)
    with pytest.raises(ValueError, match="gains_knots"):
        MPCOptions(T, gains_knots=0)


def test_a_prepared_tick_is_the_tick_from_the_predicted_state_with_the_measured_gap(ur5):
    """A real-time iteration: where the measured state is the one the plan predicted, the prepared tick is the
    plain tick, bit for bit; where it is not, it is the solver's iteration from the prepared guess (the plan shifted,
    its first knot the prediction) with the measured state as the initial one: only the gap into knot 0 changed."""
    x0 = start_state(ur5)
    plain, _ = moving_reach(ur5, x0, adaptive_step=False, relinearize=False)
    prepared, _ = moving_reach(ur5, x0, adaptive_step=False, relinearize=False)
    with pytest.raises(ValueError, match="solve the first window first"):
        prepared.prepare()
    a, b = plain.start(x0), prepared.start(x0)
    for _ in range(4):
        x = a.plan.xs[1].copy()
        prepared.prepare()
        prepared.prepare()  # again before the tick: nothing more
        a, b = plain.tick(x), prepared.tick(x)
        assert b.knot == a.knot and b.prepare_time > 0 and a.prepare_time == 0
        for name in ("us", "K"):
            np.testing.assert_array_equal(getattr(b.plan, name), getattr(a.plan, name))
        np.testing.assert_array_equal(b.plan.xs.v, a.plan.xs.v)
    prepared.prepare()
    guess = (prepared._warm.xs.copy(), prepared._warm.us.copy())
    np.testing.assert_array_equal(guess[0].s[0], b.plan.xs.s[1])  # the first knot: the last plan's prediction
    measured = b.plan.xs[1].copy()
    measured.v += 0.05
    tick = prepared.tick(measured)
    assert not tick.failed
    solver = Solver(prepared.problem, SolverOptions(max_iter=1))  # the window and the initial state of the tick
    state = solver.start(*guess)
    solver.iterate(state)
    np.testing.assert_array_equal(tick.plan.us, state.us)
    np.testing.assert_array_equal(tick.plan.xs.v, state.xs.v)
    with pytest.raises(ValueError, match="preparation"):
        MPCOptions(T, preparation="yes")


def test_a_closed_loop_that_prepares_its_ticks_tracks_as_one_that_does_not(ur5):
    x0 = start_state(ur5)
    ends, errors = {}, {}
    for preparation in (False, True):
        mpc, moving = moving_reach(ur5, x0, iterations=2, preparation=preparation)
        log = closed_loop(mpc, ModelPlant(ur5, x0), 0.5)
        assert not log.error and log.statistics()["failed_ticks"] == 0
        stats = log.statistics()
        assert (stats["prepare_median_ms"] > 0) if preparation else np.isnan(stats["prepare_median_ms"])
        assert all((t.prepare_time > 0) == preparation for t in log.ticks[1:])
        errors[preparation] = max(np.linalg.norm(frame_placement(ur5, x, "tool0")[:3, 3] - moving(t))
                                  for t, x in list(zip(log.times, log.states))[10:])
        ends[preparation] = log.states[-1].s
    assert errors[True] < 0.02 and errors[False] < 0.02, errors
    assert np.abs(ends[True] - ends[False]).max() < 1e-3
