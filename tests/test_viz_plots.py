"""lietraj.viz.plots: the summary figure of solved problems has the panels that apply, its lines carry the solution
(CoM and feet against Pinocchio, joints against the model's limits, contact forces per phase with gaps where a
contact is off, the solver's history), it saves as valid PNG and PDF, and bad input is a ValueError."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest
from matplotlib.figure import Figure

import lietraj
from lietraj.dynamics import frame_placement, rnea
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.lie.state import Trajectory
from lietraj.optimal_control.costs.costs import CostSum, ResidualCost, control_regularization, state_regularization
from lietraj.optimal_control.dynamics.discrete_dynamics import RobotDynamics
from lietraj.optimal_control.problem import ActionModel, Problem, knots
from lietraj.optimal_control.costs.residuals import FrameTranslationResidual
from lietraj.optimal_control.solvers.solvers import solve_fddp
from lietraj.problems import ExampleProblem, make_problem
from lietraj.viz.plots import (
    CONSTRAINTS_TITLE,
    CONVERGENCE_TITLE,
    FRICTION_TITLE,
    HEIGHT_TITLE,
    NORMAL_FORCE_TITLE,
    POSITIONS_TITLE,
    TOP_VIEW_TITLE,
    TORQUES_TITLE,
    VELOCITIES_TITLE,
    constraint_series,
    contact_force_series,
    plot_com_and_feet,
    plot_constraints,
    plot_contact_forces,
    plot_convergence,
    plot_joints,
    save_summary,
    summary_figure,
)
from pin_oracle import pin_model

JOINTS = {"Joint positions", "Joint velocities", "Joint torques"}
COM = {"CoM and feet, top view", "CoM and feet, height"}
CONTACTS = {"Contact normal forces", "Friction ratio"}
EVERY_PANEL = {"Convergence"} | JOINTS | COM | CONTACTS | {"Constraints: distance past the bounds"}


# ---------------------------------------------------------------- solved problems


@pytest.fixture(scope="module")
def squat():
    ex = make_problem("squat", robot="solo12")
    return ex, ex.solve()


@pytest.fixture(scope="module")
def lift():
    """solo12 on four feet, then on three: the front-left foot lifts at knot 30 of 60."""
    ex = make_problem("balance", robot="solo12", lift="FL_FOOT")
    return ex, ex.solve()


@pytest.fixture(scope="module")
def reach():
    ex = make_problem("talos_reach")
    return ex, ex.solve(options=replace(ex.options, max_iter=3))


@pytest.fixture(scope="module")
def arm():
    """A fixed-base arm (ur5) brings its tool 20 cm away from gravity-compensated rest: no contacts, no feet."""
    model = lietraj.load_robot("ur5")
    sp = model.state_space
    x0 = sp.neutral()
    x0.s[:] = [0.0, -1.2, 1.5, -1.9, -1.57, 0.0]
    target = frame_placement(model, x0, "tool0")[:3, 3] + [0.1, 0.15, 0.1]
    gravity = rnea(model, x0, np.zeros(model.nv))
    running, terminal = CostSum(sp, model.n), CostSum(sp, 0)
    running.add("reach", ResidualCost(FrameTranslationResidual(model, "tool0", target, nu=model.n)), 10.0)
    running.add("state", state_regularization(sp, x0, 0.1, model.n))
    running.add("control", control_regularization(model.n, 1e-3, reference=gravity, state_space=sp))
    terminal.add("reach", ResidualCost(FrameTranslationResidual(model, "tool0", target, nu=0)), 1e3)
    terminal.add("state", state_regularization(sp, x0, 1.0, 0))
    dt, T = 0.05, 30
    problem = Problem(x0, ActionModel(RobotDynamics(model, dt), running), terminal, horizon=T)
    result = solve_fddp(problem, None, np.tile(gravity, (T, 1)))
    assert result.converged
    return model, problem, result, dt


def panels(fig: Figure) -> dict[str, object]:
    found = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    assert len(found) == len([ax for ax in fig.axes if ax.get_title()]), "two panels with one title"
    return found


def line(ax, gid: str):
    (found,) = [ln for ln in ax.get_lines() if ln.get_gid() == gid]
    return found


# ---------------------------------------------------------------- panels


def test_titles_are_the_documented_constants():
    assert {CONVERGENCE_TITLE, POSITIONS_TITLE, VELOCITIES_TITLE, TORQUES_TITLE, TOP_VIEW_TITLE, HEIGHT_TITLE,
            NORMAL_FORCE_TITLE, FRICTION_TITLE, CONSTRAINTS_TITLE} == EVERY_PANEL


def test_summary_of_contact_problems_has_every_panel(squat, reach):
    """The squat has hard constraints (every panel); Crocoddyl's talos_reach has none (no constraints panel)."""
    for ex, result in (squat, reach):
        fig = summary_figure(ex, result)
        assert set(panels(fig)) == EVERY_PANEL - (set() if ex.problem.has_constraints else {CONSTRAINTS_TITLE})
        assert ex.name in fig.get_suptitle() and result.status in fig.get_suptitle()


def test_constraint_lines_are_the_distances_past_the_bounds(lift):
    """solo12 lifting a foot (hard limits): one line per constraint, at every knot that carries it, equal to the
    rows' largest (r - bound) / unit; the torque line by hand from the controls and the effort limits; all within the
    tolerance above the bound, and the wrench cone touching it where the lifted foot's neighbours carry the body."""
    ex, result = lift
    ax = panels(plot_constraints(ex, result))[CONSTRAINTS_TITLE]
    series = constraint_series(ex.problem, result)
    assert {ln.get_gid() for ln in ax.get_lines()} == set(series) | {"bound"}
    assert set(series) == {"wrench cone", "joint limits", "torque limits"}
    for name, values in series.items():
        np.testing.assert_array_equal(line(ax, name).get_ydata(), values)
        assert np.isnan(values[-1]) and not np.isnan(values[:-1]).any()  # no terminal constraints
        assert np.nanmax(values) <= 1e-6
    effort = ex.model.effort_limit
    np.testing.assert_allclose(series["torque limits"][:-1], (np.abs(result.us) - effort).max(axis=1), rtol=1e-12)
    assert np.nanmax(series["wrench cone"]) > -1e-4  # the cones bind: the three feet push at their friction limit
    with pytest.raises(ValueError, match="plot_constraints: expected an ExampleProblem whose problem has constraints"):
        plot_constraints(make_problem("talos_reach"), result)


def test_summary_of_an_arm_has_no_com_and_contact_panels(arm):
    model, _, result, dt = arm
    assert set(panels(summary_figure(model, result, dt=dt))) == {"Convergence"} | JOINTS
    assert set(panels(summary_figure(model, result.xs, result.us, dt))) == JOINTS  # no history: no convergence
    with_tool = panels(summary_figure(model, result, dt=dt, frames=["tool0"]))
    assert set(with_tool) == {"Convergence"} | JOINTS | COM
    p = frame_placement(model, result.xs, "tool0")[:, :3, 3]
    np.testing.assert_array_equal(line(with_tool["CoM and feet, height"], "tool0").get_ydata(), p[:, 2])


def test_summary_of_a_bare_floating_base_solution_shows_com_and_the_robots_feet(squat):
    ex, result = squat
    fig = summary_figure(ex.model, result.xs, result.us, ex.dt)
    found = panels(fig)
    assert set(found) == JOINTS | COM
    assert {ln.get_gid() for ln in found["CoM and feet, height"].get_lines()} == {"CoM", "FL_FOOT", "FR_FOOT",
                                                                                  "HL_FOOT", "HR_FOOT"}


# ---------------------------------------------------------------- the lines carry the solution


def pinocchio_com_and_frame(model, xs: Trajectory, frame: str) -> tuple[np.ndarray, np.ndarray]:
    pm = pin_model(model.name)
    data = pm.createData()
    fid = pm.getFrameId(frame)
    com, p = [], []
    for x in xs:
        q, _ = to_pinocchio(model, x)
        com.append(np.array(pin.centerOfMass(pm, data, q)))
        pin.framesForwardKinematics(pm, data, q)
        p.append(np.array(data.oMf[fid].translation))
    return np.array(com), np.array(p)


def test_com_and_feet_lines_are_the_solutions_against_pinocchio(lift):
    ex, result = lift
    found = panels(summary_figure(ex, result))
    top, height = found["CoM and feet, top view"], found["CoM and feet, height"]
    com, foot = pinocchio_com_and_frame(ex.model, result.xs, "FL_FOOT")
    t = ex.dt * np.arange(ex.problem.T + 1)
    for gid, p in (("CoM", com), ("FL_FOOT", foot)):
        np.testing.assert_allclose(line(height, gid).get_xdata(), t, rtol=0, atol=1e-12)
        np.testing.assert_allclose(line(height, gid).get_ydata(), p[:, 2], rtol=0, atol=1e-9)
        np.testing.assert_allclose(line(top, gid).get_xdata(), p[:, 0], rtol=0, atol=1e-9)
        np.testing.assert_allclose(line(top, gid).get_ydata(), p[:, 1], rtol=0, atol=1e-9)
    assert foot[-1, 2] - foot[0, 2] > 0.02  # the lifted foot is the one that rises
    # The target is drawn where the problem puts it; one support polygon per phase: four feet, then three.
    target = ex.targets["foot target"]
    np.testing.assert_allclose([line(top, "foot target").get_xdata()[0], line(height, "foot target").get_ydata()[0]],
                               [target[0], target[2]])
    assert [len(p.get_xy()) - 1 for p in top.patches] == [4, 3]  # closed polygons repeat their first vertex
    for patch, (a, _, dyn) in zip(top.patches, ex.contact_phases()):  # the feet where the phase begins
        feet = np.array([frame_placement(ex.model, result.xs[a], c.frame)[:2, 3] for c in dyn.contacts])
        np.testing.assert_allclose(np.sort(patch.get_xy()[:-1], axis=0), np.sort(feet, axis=0), rtol=0, atol=1e-12)


def test_joint_lines_are_raw_with_limits_for_an_arm(arm):
    model, _, result, dt = arm
    fig = plot_joints(model, result.xs, result.us, dt)
    found = panels(fig)
    T = result.us.shape[0]
    j, name = 2, "elbow_joint"
    positions, velocities, torques = (line(found[k], name) for k in ("Joint positions", "Joint velocities",
                                                                     "Joint torques"))
    np.testing.assert_array_equal(positions.get_xdata(), dt * np.arange(T + 1))
    np.testing.assert_array_equal(positions.get_ydata(), result.xs.s[:, j])
    np.testing.assert_array_equal(velocities.get_ydata(), result.xs.v[:, j])
    # Torques are steps: (t_k, u_k), (t_k+1, u_k).
    np.testing.assert_array_equal(torques.get_ydata()[::2], result.us[:, j])
    np.testing.assert_array_equal(torques.get_ydata()[1::2], result.us[:, j])
    np.testing.assert_allclose(torques.get_xdata()[::2], dt * np.arange(T))
    np.testing.assert_allclose(torques.get_xdata()[1::2], dt * np.arange(1, T + 1))
    # Six joints: all named in the legend; the elbow's position limits are dashed lines at ±pi.
    legend = [t.get_text() for t in found["Joint positions"].get_legend().get_texts()]
    assert [s.split(" (")[0] for s in legend] == list(model.actuated_joint_names)
    levels = {round(float(ln.get_ydata()[0]), 9) for ln in found["Joint positions"].get_lines()
              if ln.get_linestyle() == "--"}
    assert {round(model.lower_limit[j], 9), round(model.upper_limit[j], 9)} <= levels


def test_joint_lines_are_normalised_for_many_joints_and_name_the_nearest_to_limits(reach):
    ex, result = reach
    m = ex.model
    found = panels(plot_joints(ex, result, highlight=3))
    lo, hi = m.lower_limit, m.upper_limit
    position = (2 * result.xs.s - lo - hi) / (hi - lo)
    velocity = result.xs.v[:, 6:] / m.velocity_limit  # the joint part: v[:6] is the base twist
    torque = result.us / m.effort_limit
    for title, values in (("Joint positions", position), ("Joint velocities", velocity), ("Joint torques", torque)):
        ax = found[title]
        assert {ln.get_gid() for ln in ax.get_lines() if ln.get_gid()} == set(m.actuated_joint_names)
        for j, name in enumerate(m.actuated_joint_names):
            y = line(ax, name).get_ydata()
            np.testing.assert_allclose(y[::2] if title == "Joint torques" else y, values[:, j], rtol=1e-12, atol=1e-12)
        peak = np.max(np.abs(values), axis=0)
        named = [t.get_text().split(" (")[0] for t in ax.get_legend().get_texts()]
        assert named == [m.actuated_joint_names[i] for i in np.argsort(-peak)[:3]]
    # arm_right_1_joint passes its lower limit in this (unconverged) solution: the panel shows the limits.
    assert found["Joint positions"].get_ylim()[0] < -1.0


def test_contact_forces_per_phase_with_a_gap_where_the_foot_is_lifted(lift):
    ex, result = lift
    found = panels(plot_contact_forces(ex, result))
    normal, ratio = found["Contact normal forces"], found["Friction ratio"]
    (first, end, four), (_, _, three) = ex.contact_phases()
    assert (first, end) == (0, 30)
    F4 = four.contact_forces(knots(result.xs, 0, 30), result.us[:30]).reshape(30, 4, 3)
    F3 = three.contact_forces(knots(result.xs, 30, 60), result.us[30:]).reshape(30, 3, 3)
    expected = {"FL_FOOT": (F4[:, 0], None)}
    for k, name in enumerate(("FR_FOOT", "HL_FOOT", "HR_FOOT")):
        expected[name] = (F4[:, k + 1], F3[:, k])
    series = contact_force_series(ex, result)
    assert list(series) == ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
    for name, (before, after) in expected.items():
        fn, fr = line(normal, name).get_ydata()[::2], line(ratio, name).get_ydata()[::2]
        np.testing.assert_array_equal(fn[:30], before[:, 2])
        np.testing.assert_allclose(fr[:30], np.linalg.norm(before[:, :2], axis=1) / before[:, 2], rtol=1e-12)
        np.testing.assert_array_equal(series[name][:30], before)
        if after is None:  # lifted: no force, no line
            assert np.isnan(fn[30:]).all() and np.isnan(fr[30:]).all() and np.isnan(series[name][30:]).all()
        else:
            np.testing.assert_array_equal(fn[30:], after[:, 2])
    # The normal rows are the normal: on four feet nearly at rest the robot's weight is carried.
    weight = ex.model.total_mass * 9.81
    total = sum(line(normal, name).get_ydata()[::2][:5] for name in expected)
    assert np.all(np.abs(total / weight - 1.0) < 0.15)
    mu = line(ratio, "friction").get_ydata()
    np.testing.assert_array_equal(mu, [ex.friction, ex.friction])
    assert ratio.get_ylim()[1] >= ex.friction


def test_convergence_lines_are_the_history(arm, lift):
    _, _, result, _ = arm
    ax = panels(plot_convergence(result))["Convergence"]
    h = result.history
    N = result.iterations
    np.testing.assert_array_equal(line(ax, "cost").get_xdata(), np.arange(1, N + 1))
    np.testing.assert_array_equal(line(ax, "cost").get_ydata(), [i.cost for i in h])
    np.testing.assert_array_equal(line(ax, "stop").get_xdata(), np.arange(N + 1))
    np.testing.assert_array_equal(line(ax, "stop").get_ydata(), [i.stop for i in h] + [result.stop])
    assert np.isnan(line(ax, "gap").get_ydata()).all()  # iLQR-like feasible iterates: gap 0, not drawn on log axes
    assert "all 0" in line(ax, "gap").get_label()
    _, infeasible = lift
    ax = panels(plot_convergence(infeasible.history))["Convergence"]  # a list of IterationInfo works too
    gaps = np.array([i.gap_norm for i in infeasible.history])
    assert gaps[0] > 0
    drawn = line(ax, "gap").get_ydata()
    np.testing.assert_array_equal(drawn[gaps > 0], gaps[gaps > 0])
    assert np.isnan(drawn[gaps == 0]).all()


def test_functions_draw_into_given_axes(squat):
    ex, result = squat
    fig = Figure()
    axes = fig.subplots(3, 1)
    assert plot_joints(ex, result, axes=axes) is fig
    assert [ax.get_title() for ax in axes] == ["Joint positions", "Joint velocities", "Joint torques"]
    fig = Figure()
    top, height = fig.subplots(1, 2)
    assert plot_com_and_feet(ex, result, axes=[top, height]) is fig
    assert plot_convergence(result, ax=fig.add_subplot(3, 1, 3)) is fig
    with pytest.raises(ValueError, match="expected 3 matplotlib Axes"):
        plot_joints(ex, result, axes=axes[:2])
    with pytest.raises(ValueError, match="one Figure"):
        plot_com_and_feet(ex, result, axes=[top, Figure().add_subplot()])


# ---------------------------------------------------------------- files


def test_save_summary_writes_png_and_pdf(squat, tmp_path):
    ex, result = squat
    png = save_summary(tmp_path / "squat.PNG", ex, result)
    pdf = save_summary(str(tmp_path / "squat.pdf"), ex, result)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 50_000
    width, height = int.from_bytes(png.read_bytes()[16:20], "big"), int.from_bytes(png.read_bytes()[20:24], "big")
    assert width > 1500 and height > 1500
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.read_bytes().rstrip().endswith(b"%%EOF")
    with pytest.raises(ValueError, match="must end in .png or .pdf"):
        save_summary(tmp_path / "squat.jpg", ex, result)
    with pytest.raises(ValueError, match="does not exist"):
        save_summary(tmp_path / "missing" / "squat.png", ex, result)
    assert not (tmp_path / "squat.jpg").exists()


# ---------------------------------------------------------------- bad input


def test_bad_input_is_a_value_error(squat, arm):
    ex, result = squat
    model, problem, arm_result, dt = arm
    xs, us = arm_result.xs, arm_result.us
    cases = [
        (lambda: plot_convergence([]), "history is empty"),
        (lambda: plot_convergence(replace(result, history=[])), "history is empty"),
        (lambda: plot_joints(model, xs, us[:-1], dt), r"us must have shape \(T, n\)"),
        (lambda: plot_joints(model, xs, np.full_like(us, np.nan), dt), "non-finite"),
        (lambda: plot_joints(model, Trajectory(None, xs.s, np.full_like(xs.v, np.inf)), us, dt), "non-finite"),
        (lambda: plot_joints(model, result.xs, result.us, dt), "state"),  # solo12's states, ur5's model
        (lambda: plot_joints(model, Trajectory(None, xs.s[:1], xs.v[:1]), us[:0], dt), "at least 2 knots"),
        (lambda: plot_joints(model, xs, us), "dt must be"),
        (lambda: plot_joints(model, xs, us, -dt), "dt must be"),
        (lambda: plot_joints(ex, result, dt=0.1), "dt comes from the ExampleProblem"),
        (lambda: plot_joints(ex, result, result.us), "do not pass us"),
        (lambda: plot_joints(model, xs, None, dt), "us are required"),
        (lambda: plot_joints(model, xs, us, dt, highlight=0), "highlight"),
        (lambda: plot_joints("ur5", xs, us, dt), "ExampleProblem or a RobotModel"),
        (lambda: plot_joints(model, xs.s, us, dt), "SolverResult or a Trajectory"),
        (lambda: summary_figure(ex, knots(result.xs, 0, 11), result.us[:10]), "problem 'squat' 50"),
        (lambda: plot_contact_forces(model, arm_result), "expected an ExampleProblem"),
        (lambda: plot_contact_forces(ex, result, friction=-1.0), "friction"),
        (lambda: plot_contact_forces(ExampleProblem("arm", model, problem, us), arm_result), "no contact phases"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
    with pytest.raises(KeyError, match="no_such_frame"):  # frame_placement's error for an unknown frame name
        plot_com_and_feet(model, xs, dt, frames=["no_such_frame"])
