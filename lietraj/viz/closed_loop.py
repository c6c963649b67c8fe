"""Pictures of a closed-loop run (a ``lietraj.scenarios.ScenarioReport``): a figure of its tick times, tracking and
floor contact forces, and a self-contained HTML page animating the simulated robot with the controller's plan as a
ghost.

Times are the run's simulated time in seconds from its start; tick ``i`` is at ``log.times[i]`` and lasts
``log.ticks[i].dt``. Tick times are the controller's wall time per tick (``Tick.solve_time``) in ms; the first tick
is the ``start`` solve from a cold guess, which the statistics (``ClosedLoopLog.statistics``) and the tick-time line
leave out. The tracked point and its reference are ``ScenarioReport.series()`` (world frame, m), and the floor's
normal force on each robot geometry ``ScenarioReport.contact_forces`` (N); both are measured at the ticks (samples,
drawn as lines through them), while a tick time holds over its tick (a step, as ``lietraj.viz.plots`` draws
per-step values).

Like ``lietraj.viz.plots``, the figure is a ``matplotlib.figure.Figure`` (no pyplot), its panels have the
``*_TITLE`` titles (the tracking panels ``"Tracking: <tracked point> x"``, ``... y``, ``... z``) and its lines carry
``gid`` s; the HTML page is written by ``lietraj.viz.html.save_html`` and imports meshcat only when called.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from lietraj.dynamics.lie.state import Trajectory
from lietraj.viz.plots import _COLOURS, _DASHES, SUFFIXES, _fit_width, _step_line

if TYPE_CHECKING:
    from lietraj.scenarios.scenario import ScenarioReport

TICK_TIMES_TITLE = "Tick times"
TRACKING_TITLE = "Tracking"
FLOOR_FORCES_TITLE = "Floor normal forces"
AXES = ("x", "y", "z")
# A browser draws at most about 60 frames a second: when ticks are resampled, shorter frames only make the page bigger.
MIN_FRAME_DT = 1.0 / 60.0
_PUSH_SHADE = {"color": "tab:orange", "alpha": 0.15, "lw": 0}


def _tick_edges(report: ScenarioReport) -> np.ndarray:
    """The ticks' start times and the last tick's end (N + 1,), seconds."""
    log = report.log
    return np.append(log.times, log.times[-1] + log.ticks[-1].dt)


def _shade_pushes(ax, report: ScenarioReport, end: float, label: bool) -> None:
    """The pushes that start before ``end`` as shaded time spans; with ``label``, each named by its force."""
    for i, push in enumerate(p for p in report.scenario.pushes if p.time < end):
        ax.axvspan(push.time, min(push.time + push.duration, end), **_PUSH_SHADE,
                   label="pushes" if label and i == 0 else "_push", gid="push")
        if label:
            ax.text(push.time, 1.0, f" {_push_name(push.force)}", transform=ax.get_xaxis_transform(), fontsize="x-small",
                    va="top", ha="left", color="0.3")


def _push_name(force) -> str:
    """``"20 N +y"`` for a force along a world axis, ``"20 N"`` otherwise."""
    f = np.asarray(force, dtype=float)
    norm = float(np.linalg.norm(f))
    axis = int(np.argmax(np.abs(f)))
    along = f" {'+' if f[axis] > 0 else '−'}{AXES[axis]}" if norm > 0 and abs(f[axis]) >= 0.99 * norm else ""
    return f"{norm:.3g} N{along}"


def _tick_panel(ax, report: ScenarioReport, edges: np.ndarray) -> None:
    """Tick times (ms) as steps over the ticks after the start solve, the deadline, median and 99th percentile,
    overruns (markers) and failed ticks (shaded)."""
    ticks, stats = report.log.ticks, report.statistics
    ms = 1e3 * np.array([tick.solve_time for tick in ticks])
    ax.plot(*_step_line(edges[1:], ms[1:]), color=_COLOURS[0], lw=1.4, label=f"tick time ({len(ticks) - 1} ticks)",
            gid="tick time")
    deadline = report.scenario.controller.options.deadline
    if deadline is not None:
        ax.axhline(1e3 * deadline, color="k", lw=1.2, ls="--", label=f"deadline {1e3 * deadline:.3g} ms", gid="deadline")
    for gid, name, colour, style in (("median", "median", _COLOURS[2], ":"), ("p99", "99th percentile", _COLOURS[1],
                                                                             "-.")):
        value = stats[f"tick_{gid}_ms"]
        if math.isfinite(value):
            ax.axhline(value, color=colour, lw=1.0, ls=style, label=f"{name} {value:.3g} ms", gid=gid)
    middle = 0.5 * (edges[:-1] + edges[1:])
    over = [i for i in range(1, len(ticks)) if ticks[i].overran]
    ax.plot(middle[over], ms[over], "o", mfc="none", mec=_COLOURS[3], mew=1.4, ms=6,
            label=f"overran the deadline ({len(over)})", gid="overruns")
    failed = [i for i, tick in enumerate(ticks) if tick.failed]
    for j, i in enumerate(failed):
        ax.axvspan(edges[i], edges[i + 1], color=_COLOURS[3], alpha=0.3, lw=0, label="failed" if j == 0 else "_failed",
                   gid="failed")
    # The start solve runs up to its own iteration budget, often ten times a tick: drawn, it would flatten the rest.
    ax.add_line(Line2D([], [], ls="none", label=f"start solve {ms[0]:.3g} ms (not drawn)"))
    ax.legend(title=f"failed ticks: {len(failed)}", title_fontsize="x-small", fontsize="x-small", loc="upper left",
              bbox_to_anchor=(1.0, 1.0))
    top = max(0.0 if deadline is None else 1e3 * deadline, float(ms[1:].max(initial=0.0)))
    ax.set_ylim(0.0, 1.15 * top if top > 0 else 1.0)
    ax.set_ylabel("wall time per tick [ms]")
    ax.set_title(TICK_TIMES_TITLE)


def _tracking_panels(axes, report: ScenarioReport, end: float) -> None:
    """The tracked point's x, y, z measured at the ticks against its reference, one Axes each."""
    name = report.scenario.tracked or "tracked point"
    t, actual, reference = report.series()
    measured = report.scenario.measure is not None and report.scenario.reference is not None
    for i, (ax, axis) in enumerate(zip(axes, AXES)):
        if measured:
            ax.plot(t, actual[:, i], color=_COLOURS[i], lw=1.6, label="measured", gid="measured")
            ax.plot(t, reference[:, i], color="k", lw=1.2, ls="--", label="reference", gid="reference")
        elif i == 0:
            ax.text(0.5, 0.5, "the scenario names no tracked point", transform=ax.transAxes, ha="center")
        _shade_pushes(ax, report, end, label=i == 0)
        ax.set_ylabel(f"{name} {axis} [m]")
        ax.set_title(f"{TRACKING_TITLE}: {name} {axis}")
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))


def floor_force_series(report: ScenarioReport) -> dict[str, np.ndarray]:
    """Contact geometry name -> the floor's normal force on it (N,) in N at each tick, 0 at the ticks it does not
    touch the floor; names in order of first contact."""
    names = list(dict.fromkeys(name for forces in report.contact_forces for name in forces))
    return {name: np.array([forces.get(name, 0.0) for forces in report.contact_forces]) for name in names}


def _floor_panel(ax, report: ScenarioReport) -> None:
    """Each geometry's normal force and their total against the robot's weight, or a note without contacts."""
    t = np.array(report.log.times)
    forces = floor_force_series(report)
    if forces:
        for i, (name, f) in enumerate(forces.items()):
            ax.plot(t, f, color=_COLOURS[i % len(_COLOURS)], lw=1.4, ls=_DASHES[i % len(_DASHES)], label=name, gid=name)
        ax.plot(t, np.sum(list(forces.values()), axis=0), color="k", lw=1.8, label="total", gid="total")
        robot = report.scenario.robot
        weight = robot.total_mass * float(np.linalg.norm(robot.gravity))
        ax.axhline(weight, color="k", lw=1.0, ls="--", label=f"weight {weight:.4g} N", gid="weight")
        ax.set_ylim(bottom=0.0)
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    else:
        ax.text(0.5, 0.5, "no contact with the floor during the run", transform=ax.transAxes, ha="center",
                va="center", color="0.3")
        ax.set_yticks([])
    ax.set_ylabel("normal force [N]")
    ax.set_title(FLOOR_FORCES_TITLE)


def plot_closed_loop(report: ScenarioReport) -> Figure:
    """One Figure of a closed-loop run over simulated time (module docstring), all panels sharing the time axis:
    left, the tick times with the controller's deadline, their median and 99th percentile, the ticks that overran
    (○) and failed (shaded red), and below them the floor's normal force on each robot geometry with their total and
    the robot's weight (or a note: an arm touches no floor); right, the tracked point's x, y and z measured and
    asked for. Pushes are shaded and named by their force. The title is the scenario's description, its ticks and
    real-time factor, and whether the robot fell or the simulation stopped."""
    log = report.log
    if not log.ticks:
        raise ValueError("plot_closed_loop: the run has no ticks")
    edges = _tick_edges(report)
    fig = Figure(layout="constrained", figsize=(15.0, 7.2))
    grid = fig.add_gridspec(6, 2)
    ticks_ax = fig.add_subplot(grid[0:3, 0])
    floor_ax = fig.add_subplot(grid[3:6, 0], sharex=ticks_ax)
    tracking_axes = [fig.add_subplot(grid[2 * i:2 * i + 2, 1], sharex=ticks_ax) for i in range(3)]
    _tick_panel(ticks_ax, report, edges)
    _shade_pushes(ticks_ax, report, edges[-1], label=False)
    _tracking_panels(tracking_axes, report, edges[-1])
    _floor_panel(floor_ax, report)
    _shade_pushes(floor_ax, report, edges[-1], label=False)
    for ax in (ticks_ax, floor_ax, *tracking_axes):
        ax.set_xlim(edges[0], edges[-1])
        ax.grid(True, alpha=0.3)
    for ax in (floor_ax, tracking_axes[-1]):
        ax.set_xlabel("simulated time [s]")
    stats = report.statistics
    outcome = f"fell: {report.fell}" if report.fell else "did not fall"
    if log.error:
        outcome += f"; the simulation stopped: {log.error}"
    fig.suptitle(_fit_width(f"{report.scenario.description}\n{stats['ticks']} ticks over {log.simulated_time:.2f} s "
                            f"simulated, real-time factor {stats['real_time_factor']:.2f}; {outcome}", fig))
    return fig


def save_closed_loop_plot(path: str | Path, report: ScenarioReport, *, dpi: float = 150.0) -> Path:
    """Write ``plot_closed_loop(report)`` to ``path`` as PNG or PDF (by its suffix); returns the path."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise ValueError(f"save_closed_loop_plot: the file must end in {' or '.join(SUFFIXES)}, got {str(path)!r}")
    if not path.parent.is_dir():
        raise ValueError(f"save_closed_loop_plot: the directory {str(path.parent)!r} does not exist")
    plot_closed_loop(report).savefig(path, format=path.suffix.lower()[1:], dpi=dpi)
    return path


def closed_loop_frames(report: ScenarioReport) -> tuple[np.ndarray, float]:
    """``(ticks, dt)``: the tick shown in each animation frame (F,) and the frames' constant time step (s). Ticks
    evenly spaced in time are the frames; otherwise frames are ``max(shortest tick, MIN_FRAME_DT)`` apart from the
    first tick, each showing the last tick at or before its time."""
    times = np.array(report.log.times)
    if len(times) == 1:
        return np.zeros(1, dtype=int), report.log.ticks[0].dt
    steps = np.diff(times)
    # Tick times are sums of the knots' dt: evenly spaced ticks differ by rounding only.
    if np.ptp(steps) <= 1e-6 * steps.max():
        return np.arange(len(times)), float((times[-1] - times[0]) / (len(times) - 1))
    dt = max(float(steps.min()), MIN_FRAME_DT)
    frames = times[0] + dt * np.arange(int(math.floor((times[-1] - times[0]) / dt + 1e-9)) + 1)
    return np.searchsorted(times, frames + 1e-9 * dt, side="right") - 1, dt


def export_closed_loop_html(report: ScenarioReport, path: str | Path, ghost_knot: int = -1, *,
                            title: str | None = None) -> Path:
    """Write one self-contained HTML page (``lietraj.viz.html.save_html``) animating the run in real time: the robot
    at the states measured at the ticks (``closed_loop_frames``), a translucent ghost robot at the state the tick's
    plan puts ``ghost_knot`` knots ahead (``ghost_knot >= 0``: ``plan.xs[plan_knot + ghost_knot]``, at most the
    window's end; negative: ``plan.xs[ghost_knot]``, by default the end of the window), so the page shows where the
    controller is heading, and the tracked point's reference as a moving sphere (world frame). Returns the path."""
    from lietraj.viz.html import save_html
    from lietraj.viz.scene import RobotViewer  # meshcat loads only when a scene is built

    log, scenario = report.log, report.scenario
    if not log.ticks:
        raise ValueError("export_closed_loop_html: the run has no ticks")
    knots = min(len(tick.plan.xs) for tick in log.ticks)
    if isinstance(ghost_knot, bool) or not isinstance(ghost_knot, (int, np.integer)) or not -knots <= ghost_knot < knots:
        raise ValueError(f"export_closed_loop_html: ghost_knot must be an integer in [{-knots}, {knots - 1}] (the "
                         f"plans have {knots} knots), got {ghost_knot!r}")
    shown, dt = closed_loop_frames(report)

    def ghost(tick):
        xs = tick.plan.xs
        return xs[ghost_knot] if ghost_knot < 0 else xs[min(tick.plan_knot + ghost_knot, len(xs) - 1)]

    states = Trajectory.from_states([log.states[i] for i in shown])
    plan = Trajectory.from_states([ghost(log.ticks[i]) for i in shown])
    targets = {}
    if scenario.measure is not None and scenario.reference is not None:
        reference = np.array([scenario.reference(log.times[i]) for i in shown])
        targets[f"{scenario.tracked or 'tracked point'} reference"] = reference
    viewer = RobotViewer(scenario.robot)
    viewer.animate(states, dt, plan=plan, targets=targets)
    return save_html(viewer, path, title or f"lietraj: {scenario.description}")
