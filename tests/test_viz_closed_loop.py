"""lietraj.viz.closed_loop: the figure of a closed-loop run draws the report's own numbers (tick times against the
deadline, overruns and failed ticks, the tracked point against its reference, the floor's forces against the
weight), it saves as PNG and PDF; the HTML page animates the measured states with the plan's ghost and the moving
reference, is self-contained, and renders in headless Chromium with the robot and its ghost.

Two short real runs against MuJoCo are the data: the ur5 tracking its circle (no floor contact) and Talos balancing
(two soles on the floor, a deadline overrun or not)."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

from html_pages import read_page as read_html_page
from lietraj.dynamics.kinematics.kinematics import body_placements
from lietraj.dynamics.lie.state import Trajectory
from lietraj.scenarios import arm_tracking, run_scenario
from lietraj.scenarios.balance import humanoid_balance
from lietraj.viz import scene
from lietraj.viz.closed_loop import (
    FLOOR_FORCES_TITLE,
    TICK_TIMES_TITLE,
    TRACKING_TITLE,
    closed_loop_frames,
    export_closed_loop_html,
    floor_force_series,
    plot_closed_loop,
    save_closed_loop_plot,
)
from lietraj.viz.html import HeadlessChromium, find_chromium
from lietraj.viz.scene import RobotViewer


@pytest.fixture(scope="module")
def arm():
    report = run_scenario(arm_tracking("ur5", duration=0.3))
    assert report.ok and len(report.log.ticks) == 30
    return report


@pytest.fixture(scope="module")
def talos():
    report = run_scenario(humanoid_balance("talos", duration=0.3))
    assert report.ok and len(report.log.ticks) == 10
    return report


def panels(fig) -> dict[str, object]:
    found = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    assert len(found) == len(fig.axes) == 5, [ax.get_title() for ax in fig.axes]
    return found


def line(ax, gid: str):
    (found,) = [ln for ln in ax.get_lines() if ln.get_gid() == gid]
    return found


def spans(ax, gid: str) -> list[tuple[float, float]]:
    return [(p.get_x(), p.get_x() + p.get_width()) for p in ax.patches if p.get_gid() == gid]


def with_ticks(report, changes: dict[int, dict]):
    """``report`` with some ticks changed: tick index -> the Tick's fields to replace."""
    ticks = [replace(tick, **changes.get(i, {})) for i, tick in enumerate(report.log.ticks)]
    return replace(report, log=replace(report.log, ticks=ticks))


# ---------------------------------------------------------------- the figure


def test_figure_has_the_three_panels(arm, talos):
    for report in (arm, talos):
        fig = plot_closed_loop(report)
        name = report.scenario.tracked
        assert set(panels(fig)) == {TICK_TIMES_TITLE, FLOOR_FORCES_TITLE} | {f"{TRACKING_TITLE}: {name} {axis}"
                                                                             for axis in "xyz"}
        assert report.scenario.description in fig.get_suptitle().replace("\n", " ")
        assert "did not fall" in fig.get_suptitle()
    fell = plot_closed_loop(replace(talos, fell="the base is 0.400 m high (below 0.700 m) at t = 0.200 s"))
    assert "fell: the base is 0.400 m high" in fell.get_suptitle().replace("\n", " ")


def test_tick_panel_holds_the_solve_times_against_the_deadline(talos):
    """The tick-time steps are the solve times in ms of the ticks after the start solve, over each tick's time; the
    deadline, median and 99th percentile lines are the controller's and the statistics'; overruns are marked on
    the line and failed ticks shaded over their time (here two overruns and one failure set by hand)."""
    report = with_ticks(talos, {3: {"overran": True}, 5: {"overran": True, "status": "failed: test"}})
    ax = panels(plot_closed_loop(report))[TICK_TIMES_TITLE]
    log = report.log
    ms = 1e3 * np.array([tick.solve_time for tick in log.ticks])
    times = np.array(log.times)
    steps = line(ax, "tick time")
    np.testing.assert_array_equal(steps.get_ydata()[::2], ms[1:])
    np.testing.assert_allclose(steps.get_xdata()[::2], times[1:])
    np.testing.assert_allclose(steps.get_xdata()[-1], times[-1] + log.ticks[-1].dt)
    assert line(ax, "deadline").get_ydata()[0] == pytest.approx(1e3 * report.scenario.controller.options.deadline)
    assert line(ax, "median").get_ydata()[0] == report.statistics["tick_median_ms"]
    assert line(ax, "p99").get_ydata()[0] == report.statistics["tick_p99_ms"]
    overran = [i for i in range(1, len(log.ticks)) if log.ticks[i].overran]
    assert {3, 5} <= set(overran)
    np.testing.assert_array_equal(line(ax, "overruns").get_ydata(), ms[overran])
    assert spans(ax, "failed") == [pytest.approx((times[5], times[6]))]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"start solve {ms[0]:.3g} ms (not drawn)" in labels
    assert f"overran the deadline ({len(overran)})" in labels
    assert ax.get_legend().get_title().get_text() == "failed ticks: 1"


def test_tracking_panels_are_the_series_with_the_pushes(arm, talos):
    for report in (arm, talos):
        found = panels(plot_closed_loop(report))
        t, actual, reference = report.series()
        end = report.log.times[-1] + report.log.ticks[-1].dt
        pushes = [(p.time, min(p.time + p.duration, end)) for p in report.scenario.pushes if p.time < end]
        assert pushes  # both runs are pushed within their 0.3 s
        for i, axis in enumerate("xyz"):
            ax = found[f"{TRACKING_TITLE}: {report.scenario.tracked} {axis}"]
            np.testing.assert_array_equal(line(ax, "measured").get_xdata(), t)
            np.testing.assert_array_equal(line(ax, "measured").get_ydata(), actual[:, i])
            np.testing.assert_array_equal(line(ax, "reference").get_ydata(), reference[:, i])
            assert spans(ax, "push") == [pytest.approx(p) for p in pushes]
    # The arm's tool follows the circle within a few millimetres; Talos's CoM stays within a centimetre.
    assert np.abs(arm.series()[1] - arm.series()[2]).max() < 5e-3
    assert np.abs(talos.series()[1] - talos.series()[2]).max() < 1e-2


def test_floor_panel_is_the_recorded_forces_against_the_weight(arm, talos):
    ax = panels(plot_closed_loop(talos))[FLOOR_FORCES_TITLE]
    series = floor_force_series(talos)
    assert set(series) == {"leg_left_6_link", "leg_right_6_link"}  # the soles
    for name, forces in series.items():
        np.testing.assert_array_equal(forces, [f.get(name, 0.0) for f in talos.contact_forces])
        np.testing.assert_array_equal(line(ax, name).get_ydata(), forces)
        np.testing.assert_array_equal(line(ax, name).get_xdata(), talos.log.times)
    total = line(ax, "total").get_ydata()
    np.testing.assert_allclose(total, sum(series.values()))
    weight = talos.scenario.robot.total_mass * 9.81
    assert line(ax, "weight").get_ydata()[0] == pytest.approx(weight, rel=1e-12)
    assert np.median(total) == pytest.approx(weight, rel=0.2)  # standing: the floor carries the robot

    ax = panels(plot_closed_loop(arm))[FLOOR_FORCES_TITLE]
    assert floor_force_series(arm) == {} and not ax.get_lines()
    assert [t.get_text() for t in ax.texts] == ["no contact with the floor during the run"]


def test_save_png_pdf_and_bad_paths(talos, tmp_path):
    png = save_closed_loop_plot(tmp_path / "run.png", talos)
    assert Image.open(png).size == (2250, 1080)  # 15 x 7.2 in at 150 dpi
    assert save_closed_loop_plot(tmp_path / "run.PDF", talos).read_bytes().startswith(b"%PDF")
    with pytest.raises(ValueError, match=r"must end in \.png or \.pdf, got .*run\.svg"):
        save_closed_loop_plot(tmp_path / "run.svg", talos)
    with pytest.raises(ValueError, match="does not exist"):
        save_closed_loop_plot(tmp_path / "missing" / "run.png", talos)


# ---------------------------------------------------------------- the page


def read_page(path) -> list[dict]:
    """The scene commands of an exported page (``html_pages.read_page`` without the meshes)."""
    return read_html_page(path)[0]


def animation_tracks(commands: list[dict]) -> dict[str, dict[str, np.ndarray]]:
    """node path -> track name -> key values (K, 3 or 4), from the page's last set_animation."""
    animation = [c for c in commands if c["type"] == "set_animation"][-1]
    return {a["path"]: {t["name"]: np.array([k["value"] for k in t["keys"]]) for t in a["clip"]["tracks"]}
            for a in animation["animations"]}


def test_page_animates_the_run_with_the_plan_ghost_and_the_reference(arm, tmp_path):
    """The robot's bodies move through the measured states, the ghost's through each tick's plan at the end of its
    window (or ``ghost_knot`` knots ahead), the reference sphere through the reference; one frame per tick, at the
    ticks' rate."""
    model, log = arm.scenario.robot, arm.log
    page = export_closed_loop_html(arm, tmp_path / "arm.html")
    text = page.read_text()
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", text)  # nothing fetched from anywhere
    assert "<title>lietraj: ur5 tracks a circle" in text
    commands = read_page(page)
    tracks = animation_tracks(commands)
    root = f"/meshcat/{model.name}"
    robot = body_placements(model, Trajectory.from_states(log.states))
    ghost = body_placements(model, Trajectory.from_states([tick.plan.xs[-1] for tick in log.ticks]))
    for b, name in enumerate(model.body_names):
        np.testing.assert_allclose(tracks[f"{root}/robot/{name}"][".position"], robot[:, b, :3, 3], atol=1e-12)
        np.testing.assert_allclose(tracks[f"{root}/plan/{name}"][".position"], ghost[:, b, :3, 3], atol=1e-12)
    reference = np.array([arm.scenario.reference(t) for t in log.times])
    np.testing.assert_allclose(tracks[f"{root}/targets/tool reference"][".position"], reference, atol=1e-12)
    animation = [c for c in commands if c["type"] == "set_animation"][-1]
    np.testing.assert_allclose([a["clip"]["fps"] for a in animation["animations"]], 100.0)  # ticks of 10 ms
    # The ghost is translucent, made of the robot's visuals (the fixed base's world-fixed link left out).
    ghost_objects = [c["object"] for c in commands if c["type"] == "set_object" and c["path"].startswith(f"{root}/plan/")]
    assert len(ghost_objects) == sum(v.body >= 0 for v in model.visuals)
    assert all(o["materials"][0]["transparent"] and o["materials"][0]["opacity"] < 1 for o in ghost_objects)
    # The ghost far ahead is elsewhere than the robot; at knot 0 of the plan it is the measured state itself.
    assert np.abs(ghost - robot)[:, :, :3, 3].max() > 0.05
    now = animation_tracks(read_page(export_closed_loop_html(arm, tmp_path / "now.html", ghost_knot=0)))
    for b, name in enumerate(model.body_names):
        np.testing.assert_allclose(now[f"{root}/plan/{name}"][".position"], robot[:, b, :3, 3], atol=1e-12)
    for bad in (31, -32, 1.5, True):
        with pytest.raises(ValueError, match=r"ghost_knot must be an integer in \[-31, 30\]"):
            export_closed_loop_html(arm, tmp_path / "bad.html", ghost_knot=bad)


def test_uneven_ticks_are_resampled_to_a_constant_frame_rate(talos):
    """Ticks evenly spaced are the frames; uneven ones (here 30 ms, then 60 ms) are shown at the shortest tick's
    rate, each frame the last tick at or before its time."""
    ticks, dt = closed_loop_frames(talos)
    np.testing.assert_array_equal(ticks, np.arange(10))
    assert dt == pytest.approx(0.03)
    times = [0.0, 0.03, 0.06, 0.12, 0.18, 0.21]
    uneven = replace(talos, log=replace(talos.log, times=times, states=talos.log.states[:6], ticks=talos.log.ticks[:6]))
    ticks, dt = closed_loop_frames(uneven)
    assert dt == pytest.approx(0.03)
    np.testing.assert_array_equal(ticks, [0, 1, 2, 2, 3, 3, 4, 5])


def test_moving_ghost_keeps_the_static_ghosts(rng):
    """RobotViewer.animate: ``plan`` adds a moving ghost beside the fixed ``ghosts``, a (N, 3) target moves, and a
    later display removes both."""
    model = scene_model()
    xs, plan = model.state_space.random_trajectory(5, rng), model.state_space.random_trajectory(5, rng)
    path = rng.standard_normal((5, 3))
    viewer = RobotViewer(model)
    viewer.animate(xs, 0.1, ghosts=(0, -1), plan=plan, targets={"fixed": [0.1, 0.2, 0.3], "moving": path})
    commands = [c.lower() for c in viewer.commands()]
    root = viewer.root
    fixed = {c["path"]: np.array(c["matrix"]).reshape(4, 4).T for c in commands if c["type"] == "set_transform"}
    H, G = body_placements(model, xs), body_placements(model, plan)
    tracks = animation_tracks(commands)
    for b, name in enumerate(model.body_names):
        for k in (0, 4):
            np.testing.assert_allclose(fixed[f"{root}/ghosts/{k}/{name}"], H[k, b], atol=1e-15)
            assert f"{root}/ghosts/{k}/{name}" not in tracks
        np.testing.assert_allclose(tracks[f"{root}/plan/{name}"][".position"], G[:, b, :3, 3], atol=1e-15)
        np.testing.assert_allclose(fixed[f"{root}/plan/{name}"], G[0, b], atol=1e-15)
    np.testing.assert_allclose(tracks[f"{root}/targets/moving"][".position"], path)
    np.testing.assert_allclose(fixed[f"{root}/targets/fixed"][:3, 3], [0.1, 0.2, 0.3])
    assert f"{root}/targets/fixed" not in tracks
    with pytest.raises(ValueError, match=r"plan has 4 states, expected one per knot \(5\)"):
        viewer.animate(xs, 0.1, plan=plan[:4])
    with pytest.raises(ValueError, match=r"target 'moving' has shape \(4, 3\), expected \(5, 3\)"):
        viewer.animate(xs, 0.1, targets={"moving": path[:4]})
    viewer.display(xs[0])
    assert not [c for c in viewer.commands() if c.lower()["type"] == "set_object"
                and not c.lower()["path"].startswith(root + "/robot/")]


def scene_model():
    from lietraj import load_robot

    return load_robot("solo12")


def test_importing_the_module_leaves_meshcat_unloaded():
    code = "import sys, lietraj.viz.closed_loop\nprint('meshcat' in sys.modules, 'mujoco' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["False", "False"]


# ---------------------------------------------------------------- the page in a browser


@pytest.fixture(scope="module")
def browser():
    if find_chromium() is None:
        pytest.skip("chromium is not installed (the rendering test opens pages in headless Chromium)")
    with HeadlessChromium(size=(800, 600)) as b:
        yield b


def image(path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"), dtype=np.int32)


def test_page_renders_the_robot_and_its_ghost(arm, browser, tmp_path, monkeypatch):
    """The page, opened offline, draws the arm and, apart from it, its translucent ghost. Three pages share the
    camera (it frames the bodies' origins, not their meshes): the page itself, the same with the ghost fully
    transparent, and the same without the robot's visuals (background, grid and reference sphere)."""
    page = export_closed_loop_html(arm, tmp_path / "arm.html")
    no_visuals = replace(arm, scenario=replace(arm.scenario, robot=arm.scenario.robot.replace(visuals=())))
    empty = export_closed_loop_html(no_visuals, tmp_path / "empty.html")
    monkeypatch.setattr(scene, "GHOST_OPACITY", 0.0)
    no_ghost = export_closed_loop_html(arm, tmp_path / "no_ghost.html")
    cameras = [[c for c in read_page(p) if c["type"] == "lietraj_camera"] for p in (page, empty, no_ghost)]
    assert cameras[0] == cameras[1] == cameras[2] and len(cameras[0]) == 1

    shots = {}
    for name, path in (("page", page), ("empty", empty), ("no_ghost", no_ghost)):
        assert browser.open(path) == {"failed": 0}
        shots[name] = image(browser.screenshot(tmp_path / f"{name}.png", time=0.1))
    later = image(browser.screenshot(tmp_path / "later.png", time=0.25))
    assert shots["empty"].std() > 5  # the page drew its scene, not a blank canvas

    robot = np.abs(shots["no_ghost"] - shots["empty"]).sum(axis=2) > 60
    ghost = np.abs(shots["page"] - shots["no_ghost"]).sum(axis=2) > 30
    assert robot.mean() > 0.02, robot.mean()  # the arm fills a part of the view
    assert ghost.mean() > 0.01, ghost.mean()  # the ghost is drawn
    assert (ghost & ~robot).mean() > 0.003, (ghost & ~robot).mean()  # and part of it where the arm is not
    assert (np.abs(later - shots["no_ghost"]).sum(axis=2) > 60).mean() > 0.002  # the arm moves
