"""Matplotlib plots of a trajectory-optimization solution: the solver's convergence, the joints against the model's
limits, the centre of mass and the feet, the contact forces against the friction cones, the hard constraints against
their bounds, and a one-call summary.

A solution is given either as an ``ExampleProblem`` and its ``SolverResult`` (the time step, contact phases,
friction coefficient, soles and targets come from the problem), or problem-independently as a ``RobotModel`` with
a ``SolverResult`` or a ``Trajectory`` ``xs`` (T+1 knots), controls ``us`` (T, n) and the time step ``dt``.

Conventions:

- knot ``k`` is at time ``k dt``; a control and the contact forces it produces act over ``[k dt, (k+1) dt)`` and
  are drawn as steps, a line through ``(k dt, y_k), ((k+1) dt, y_k)`` for each step (its ``ydata[::2]`` are the
  values);
- joint quantities are joint coordinates only: positions ``xs.s``, velocities ``xs.v[:, 6:]`` for a floating base
  (``v[:6]`` is the base twist) or ``xs.v``, torques ``us``. Normalised, a position is ``(2 s - lo - hi) / (hi - lo)``
  (-1 at the lower limit, +1 at the upper one), a velocity ``sdot / velocity_limit`` and a torque
  ``u / effort_limit``; joints without a finite positive limit (a zero or missing URDF limit, continuous joints for
  positions) are left out of the normalised panels;
- contact forces are ``ContactRobotDynamics.contact_forces``, each contact's rows ``[f; n]`` in its reference;
  ``f_n = f_z`` and ``f_t = (f_x, f_y)``, i.e. the z axis is the normal, which holds for the problems' soles (LOCAL,
  z along the sole normal) and point feet (LOCAL_WORLD_ALIGNED on flat ground), as in ``ExampleProblem.metrics``;
- a constraint is drawn at every knot that carries it as ``max_i max(r_i − upper_i, lower_i − r_i) / scale``, its
  rows' largest signed distance past their bounds in its own unit: negative inside, 0 where a bound is active (an
  equality always), positive where it is violated; the axis is linear within ``±1e-6`` (the default tolerance)
  and logarithmic beyond.

Every function draws into new ``matplotlib.figure.Figure`` s (no pyplot: no global state, no window; saving goes
through matplotlib's non-interactive Agg and PDF canvases) or into the Axes it is given, and returns the Figure.
Each panel's Axes has one of the ``*_TITLE`` titles; lines carry their joint or frame name (or ``"CoM"``) as ``gid``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib import colormaps, rcParams
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.patches import Polygon
from matplotlib.ticker import PercentFormatter
from matplotlib.textpath import TextToPath
from scipy.spatial import ConvexHull

from lietraj.dynamics.kinematics.center_of_mass import center_of_mass
from lietraj.dynamics.kinematics.kinematics import frame_id, frame_placement
from lietraj.dynamics.model.model import JOINT_PRISMATIC, RobotModel
from lietraj.dynamics.lie.state import Trajectory
from lietraj.optimal_control.problem import Problem
from lietraj.optimal_control.solvers.solvers import IterationInfo, SolverResult
from lietraj.problems.example_problem import ExampleProblem
from lietraj.problems.support import FEET

CONVERGENCE_TITLE = "Convergence"
POSITIONS_TITLE = "Joint positions"
VELOCITIES_TITLE = "Joint velocities"
TORQUES_TITLE = "Joint torques"
TOP_VIEW_TITLE = "CoM and feet, top view"
HEIGHT_TITLE = "CoM and feet, height"
NORMAL_FORCE_TITLE = "Contact normal forces"
FRICTION_TITLE = "Friction ratio"
CONSTRAINTS_TITLE = "Constraints: distance past the bounds"
SUFFIXES = (".png", ".pdf")

# Joints are drawn in colour (and named in the legend) when there are at most this many; otherwise only the
# ``highlight`` joints nearest to (or past) their limits are, the others in grey.
_ALL_COLOURED = 8
_GREY = "0.75"
_COLOURS = colormaps["tab10"].colors
_PALETTE = _COLOURS + colormaps["Dark2"].colors
# Equal forces (symmetric stances) would hide each other's lines: each contact gets its own dash pattern too.
_DASHES = ("-", (0, (5, 2)), (0, (1, 1.5)), (0, (5, 2, 1, 2)))
# A normalised panel whose joints all stay within this fraction of their limits is zoomed in on the motion.
_ZOOM_BELOW = 0.25


@dataclass(frozen=True)
class _Solution:
    model: RobotModel
    xs: Trajectory
    us: np.ndarray | None
    dt: float
    result: SolverResult | None
    example: ExampleProblem | None

    @property
    def T(self) -> int:
        return len(self.xs) - 1

    def times(self) -> np.ndarray:
        """Knot times (T+1,) in seconds."""
        return self.dt * np.arange(self.T + 1)


def _solution(source, solution, us, dt, what: str, need_us: bool) -> _Solution:
    """Check and unpack the two ways of giving a solution (module docstring)."""
    if isinstance(source, ExampleProblem):
        example, model = source, source.model
        if dt is not None:
            raise ValueError(f"{what}: dt comes from the ExampleProblem ({source.dt:g} s); do not pass it")
        dt = source.dt
    elif isinstance(source, RobotModel):
        example, model = None, source
    else:
        raise ValueError(f"{what}: expected an ExampleProblem or a RobotModel, got {type(source).__name__}")
    if isinstance(solution, SolverResult):
        if us is not None:
            raise ValueError(f"{what}: the controls come from the SolverResult; do not pass us")
        result, xs, us = solution, solution.xs, solution.us
    elif isinstance(solution, Trajectory):
        result, xs = None, solution
    else:
        raise ValueError(f"{what}: expected a SolverResult or a Trajectory, got {type(solution).__name__}")
    if not (isinstance(dt, (int, float, np.integer, np.floating)) and np.isfinite(dt) and dt > 0):
        raise ValueError(f"{what}: dt must be a finite positive number of seconds, got {dt!r}")
    N = len(xs)
    base = (N, 4, 4) if model.floating_base else None
    shapes = (None if xs.H is None else np.shape(xs.H), np.shape(xs.s), np.shape(xs.v))
    if N < 2 or shapes != (base, (N, model.n), (N, model.nv)):
        raise ValueError(f"{what}: xs must hold at least 2 knots of {model.name}'s state (H {base}, s (N, {model.n}), "
                         f"v (N, {model.nv})); got H {shapes[0]}, s {shapes[1]}, v {shapes[2]}")
    parts = (xs.s, xs.v) if xs.H is None else (xs.H, xs.s, xs.v)
    if not all(np.isfinite(p).all() for p in parts):
        raise ValueError(f"{what}: xs holds non-finite values")
    if us is not None:
        us = np.asarray(us, dtype=float)
        if us.shape != (N - 1, model.n):
            raise ValueError(f"{what}: us must have shape (T, n) = ({N - 1}, {model.n}) for {N} knots, got {us.shape}")
        if not np.isfinite(us).all():
            raise ValueError(f"{what}: us holds non-finite values")
    elif need_us:
        raise ValueError(f"{what}: the controls us are required with a Trajectory")
    if example is not None and N - 1 != example.problem.T:
        raise ValueError(f"{what}: the solution has {N - 1} steps, the problem {example.name!r} {example.problem.T}")
    return _Solution(model, xs, us, float(dt), result, example)


def _new_axes(axes, count: int, what: str, **figure) -> tuple[Figure, list[Axes]]:
    """``count`` Axes stacked in a new Figure, or the given ones (all from one Figure)."""
    if axes is None:
        fig = Figure(layout="constrained", **figure)
        return fig, list(fig.subplots(count, 1, squeeze=False)[:, 0])
    axes = [axes] if isinstance(axes, Axes) else list(axes)
    if len(axes) != count or not all(isinstance(a, Axes) for a in axes):
        raise ValueError(f"{what}: expected {count} matplotlib Axes, got {len(axes)} object(s)")
    fig = axes[0].get_figure(root=True)
    if any(a.get_figure(root=True) is not fig for a in axes):
        raise ValueError(f"{what}: the Axes must belong to one Figure")
    return fig, axes


def _step_line(t: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points ``(t_k, y_k), (t_k+1, y_k)`` of a piecewise-constant line through per-step values (T,) at knot
    times ``t`` (T+1,): ``y[::2]`` are the values; a NaN value leaves its step out."""
    return np.repeat(t, 2)[1:-1], np.repeat(values, 2)


def _positive(values) -> np.ndarray:
    """Values for a log axis: non-positive ones become NaN (a break in the line)."""
    v = np.asarray(values, dtype=float)
    return np.where(v > 0, v, np.nan)


# ---------------------------------------------------------------- convergence


def plot_convergence(result: SolverResult | Sequence[IterationInfo], ax: Axes | None = None) -> Figure:
    """Cost, stationarity measure ``stop`` and gap ∞-norm per iterate (log scale), and the accepted step ``α`` on a
    right axis, from ``result.history`` (or a list of ``IterationInfo``).

    Iterate ``j`` is the guess after ``j`` steps: an ``IterationInfo`` gives the cost of the iterate it produces
    and the ``stop`` and gap of the one it starts from; a ``SolverResult`` adds the final iterate's ``stop`` and gap."""
    history = list(result.history if isinstance(result, SolverResult) else result)
    if not history or not all(isinstance(h, IterationInfo) for h in history):
        raise ValueError("plot_convergence: the history is empty (the solver took no step) or not IterationInfo")
    fig, (ax,) = _new_axes(ax, 1, "plot_convergence", figsize=(7.0, 4.0))
    j = np.array([h.iteration for h in history], dtype=float)
    start = np.concatenate([[j[0] - 1], j[:-1]])
    stop = [h.stop for h in history]
    gap = [h.gap_norm for h in history]
    if isinstance(result, SolverResult) and result.iterations == history[-1].iteration and np.isfinite(result.stop):
        start = np.append(start, result.iterations)
        stop.append(result.stop)
        gap.append(result.gap_norm)
    series = (("cost", "cost", j, [h.cost for h in history], "o-"),
              ("stop", "stop (Σ|Q_u|²)", start, stop, "s-"),
              ("gap", "gap (∞-norm)", start, gap, "^-"))
    for colour, (gid, label, x, y, style) in zip(_COLOURS, series):
        shown = _positive(y)
        if np.isnan(shown).all():
            label += ": all 0" if np.all(np.asarray(y) == 0) else ": none > 0"
        elif np.isnan(shown).any():
            label += " (≤ 0 not shown)"
        ax.plot(x, shown, style, color=colour, ms=4, label=label, gid=gid)
    ax.set_yscale("log")
    ax.set_xlabel("iterate")
    ax.set_ylabel("value (log scale)")
    ax.set_title(CONVERGENCE_TITLE)
    ax.grid(True, which="major", alpha=0.3)
    ax.xaxis.get_major_locator().set_params(integer=True)
    right = ax.twinx()
    right.plot(j, [h.step for h in history], "x", color="0.4", ms=5, label="step α", gid="step")
    right.set_ylim(0.0, 1.05)
    right.set_ylabel("accepted step α")
    handles = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    ax.legend(handles=handles, fontsize="small", loc="best")
    return fig


# ---------------------------------------------------------------- joints


def _fraction_of_limits(Y: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``(2 Y - lo - hi) / (hi - lo)`` per joint (column): -1 at the lower limit, +1 at the upper one; NaN for a
    joint without a finite positive range."""
    limited = np.isfinite(lo) & np.isfinite(hi) & (hi > lo)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(limited, (2.0 * Y - lo - hi) / (hi - lo), np.nan)


def _percent(fraction: float) -> str:
    p = 100.0 * fraction
    return f"{p:.0f} %" if p >= 10.0 else f"{p:.1f} %" if p >= 1.0 else f"{p:.2g} %"


def _joint_panel(ax: Axes, t: np.ndarray, Y: np.ndarray, scaled: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                 names: Sequence[str], coloured: Sequence[int], colour: dict[int, tuple], normalize: bool, unit: str,
                 quantity: str, title: str, steps: bool) -> None:
    """One quantity of every joint (columns of ``Y``, ``scaled`` its fraction of the limits ``[lo, hi]``)."""
    peak = np.max(np.abs(scaled), axis=0)
    shown = np.flatnonzero(np.isfinite(peak)) if normalize else np.arange(len(names))
    values = scaled if normalize else Y
    bounds: dict[float, list[int]] = {}
    for i in sorted(shown, key=lambda i: coloured.index(i) if i in coloured else -1):  # coloured on top, in order
        x, y = _step_line(t, values[:, i]) if steps else (t, values[:, i])
        if i in coloured:
            label = names[i] + ("" if np.isnan(peak[i]) else f" ({_percent(peak[i])})")
            ax.plot(x, y, color=colour[i], lw=1.6, label=label, gid=names[i], zorder=3)
            if not normalize and np.isfinite(peak[i]):
                for bound in (lo[i], hi[i]):
                    bounds.setdefault(float(bound), []).append(i)
        else:
            ax.plot(x, y, color=_GREY, lw=0.9, label=f"_{names[i]}", gid=names[i], zorder=1)
    for bound, joints in bounds.items():  # a limit shared by several coloured joints is drawn once, in dark grey
        ax.axhline(bound, color=colour[joints[0]] if len(joints) == 1 else "0.3", lw=0.9, ls="--", zorder=2)
    notes = ["±100 % = limits" if normalize else "dashed: limits (grey: shared)"]
    if normalize and shown.size and np.max(peak[shown]) >= _ZOOM_BELOW:
        for bound in (-1.0, 1.0):
            ax.axhline(bound, color="k", lw=1.0, ls="--", label="_limit")
        data = values[:, shown]
        ax.set_ylim(min(-1.1, data.min() - 0.05), max(1.1, data.max() + 0.05))
    elif normalize:
        notes.append(f"all within {_percent(_ZOOM_BELOW)}: zoomed in")
    if len(shown) < len(names):
        notes.append(f"{len(names) - len(shown)} without limits not shown")
    if normalize:
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_ylabel(f"{quantity} [% of limit]")
    else:
        ax.set_ylabel(f"{quantity} [{unit}]")
    ax.set_title(title)
    ax.set_xlabel("time [s]")
    ax.grid(True, alpha=0.3)
    which = "all joints" if len(coloured) == len(names) else f"{len(coloured)} nearest to limits of {len(names)}"
    ax.legend(handles=ax.get_legend_handles_labels()[0], fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0),
              title="\n".join([f"peak % of limit, {which}"] + notes), title_fontsize="x-small", alignment="left")


def _nearest_to_limits(scaled: np.ndarray, count: int) -> list[int]:
    """The ``count`` joints (columns) with the largest peak fraction of their limits, largest first."""
    peak = np.max(np.abs(scaled), axis=0)
    order = np.argsort(-np.nan_to_num(peak, nan=-1.0), kind="stable")[:count]
    return [int(i) for i in order if np.isfinite(peak[i])]


def plot_joints(source: ExampleProblem | RobotModel, solution: SolverResult | Trajectory, us=None,
                dt: float | None = None, *, axes: Sequence[Axes] | None = None, normalize: bool | None = None,
                highlight: int = 4) -> Figure:
    """Joint positions, velocities and torques over time against the model's position, velocity and effort limits,
    in three Axes (given, or stacked in a new Figure). ``normalize`` (default: when there are more than 8 joints)
    draws every joint as a fraction of its limits (module docstring; zoomed in when all stay within 25 % of them).
    Up to 8 joints are all coloured, otherwise the ``highlight`` joints nearest to their limits in each panel,
    the others grey; a joint has one colour in all three panels, its legend entry gives its peak (% of limit)."""
    sol = _solution(source, solution, us, dt, "plot_joints", need_us=True)
    if not (isinstance(highlight, (int, np.integer)) and highlight >= 1):
        raise ValueError(f"plot_joints: highlight must be a positive integer, got {highlight!r}")
    m = sol.model
    normalize = m.n > _ALL_COLOURED if normalize is None else bool(normalize)
    fig, axes = _new_axes(axes, 3, "plot_joints", figsize=(9.0, 9.0))
    prismatic = np.any(m.joint_type == JOINT_PRISMATIC)
    units = ("rad or m", "rad/s or m/s", "N m or N") if prismatic else ("rad", "rad/s", "N m")
    panels = ((POSITIONS_TITLE, "position", sol.xs.s, np.where(m.continuous, np.nan, m.lower_limit),
               np.where(m.continuous, np.nan, m.upper_limit), False),
              (VELOCITIES_TITLE, "velocity", sol.xs.v[:, 6:] if m.floating_base else sol.xs.v, -m.velocity_limit,
               m.velocity_limit, False),
              (TORQUES_TITLE, "torque", sol.us, -m.effort_limit, m.effort_limit, True))
    scaled = [_fraction_of_limits(Y, lo, hi) for _, _, Y, lo, hi, _ in panels]
    everything = list(range(m.n))
    coloured = [everything if m.n <= _ALL_COLOURED else _nearest_to_limits(S, highlight) for S in scaled]
    colour = {i: _PALETTE[k % len(_PALETTE)] for k, i in enumerate(sorted(set().union(*coloured)))}
    for ax, (title, quantity, Y, lo, hi, steps), S, c, unit in zip(axes, panels, scaled, coloured, units):
        _joint_panel(ax, sol.times(), Y, S, lo, hi, m.actuated_joint_names, c, colour, normalize, unit, quantity, title,
                     steps)
    return fig


# ---------------------------------------------------------------- centre of mass and feet


def _frame_name(model: RobotModel, frame: int | str) -> str:
    return model.frames[frame_id(model, frame)].name


def _default_frames(sol: _Solution) -> tuple[str, ...]:
    """The problem's contact frames (in order of appearance), else the robot's feet if it is a known one."""
    if sol.example is not None:
        found = [_frame_name(sol.model, c.frame) for _, _, dyn in sol.example.contact_phases() for c in dyn.contacts]
        if found:
            return tuple(dict.fromkeys(found))
    feet = FEET.get(sol.model.name)
    return () if feet is None else feet.frames


def _supports(sol: _Solution) -> list[tuple[int, int, np.ndarray]]:
    """``(first, end, corners (k, 2))``: per contact phase (for a bare model, one phase of the robot's ``FEET``
    over the horizon), the convex hull of its feet at its first knot, soles as rectangles; flat hulls left out."""
    if sol.example is not None:
        phases = [(a, b, [_frame_name(sol.model, c.frame) for c in dyn.contacts])
                  for a, b, dyn in sol.example.contact_phases()]
        soles = sol.example.soles
    else:
        feet = FEET.get(sol.model.name)
        phases, soles = ([], {}) if feet is None else ([(0, sol.T, list(feet.frames))], feet.soles)
    hulls = []
    for a, b, frames in phases:
        points = []
        for name in frames:
            H = frame_placement(sol.model, sol.xs[a], name)
            if name in soles:
                hl, hw = soles[name]
                corners = np.array([[hl, hw, 0.0], [hl, -hw, 0.0], [-hl, -hw, 0.0], [-hl, hw, 0.0]])
                points.extend(H[:3, 3] + corners @ H[:3, :3].T)
            else:
                points.append(H[:3, 3])
        xy = np.array(points)[:, :2] if points else np.zeros((0, 2))
        if len(xy) >= 3 and np.linalg.matrix_rank(xy - xy.mean(axis=0), tol=1e-9) == 2:
            hulls.append((a, b, xy[ConvexHull(xy).vertices]))
    return hulls


def plot_com_and_feet(source: ExampleProblem | RobotModel, solution: SolverResult | Trajectory,
                      dt: float | None = None, *, frames: Sequence[int | str] | None = None,
                      axes: Sequence[Axes] | None = None) -> Figure:
    """The centre of mass and the origins of ``frames`` (default: the problem's contact frames, else the robot's
    feet in ``lietraj.problems.FEET``) in a top view (world x, y; start ○, end ●; shaded: the support polygon of
    each contact phase at its start, soles as rectangles) and as heights over time, with the problem's targets (★,
    at the final time in the height panel). Two Axes, given or side by side in a new Figure."""
    sol = _solution(source, solution, None, dt, "plot_com_and_feet", need_us=False)
    names = _default_frames(sol) if frames is None else tuple(_frame_name(sol.model, f) for f in frames)
    if axes is None:
        fig = Figure(layout="constrained", figsize=(11.0, 4.2))
        top, height = fig.subplots(1, 2, width_ratios=(1.0, 1.3))
    else:
        fig, (top, height) = _new_axes(axes, 2, "plot_com_and_feet")
    t = sol.times()
    com = center_of_mass(sol.model, sol.xs)
    placements = {name: frame_placement(sol.model, sol.xs, name) for name in names}
    for k, (a, b, hull) in enumerate(_supports(sol)):
        top.add_patch(Polygon(hull, closed=True, facecolor="0.55", alpha=0.15, edgecolor="0.3", lw=0.9,
                              ls=_DASHES[k % len(_DASHES)], label=f"support {t[a]:g}–{t[b]:g} s", zorder=0))
    tracks = [("CoM", com, "k", 2.0)] + [(name, placements[name][:, :3, 3], _COLOURS[i % len(_COLOURS)], 1.4)
                                         for i, name in enumerate(names)]
    for label, p, colour, width in tracks:
        top.plot(p[:, 0], p[:, 1], color=colour, lw=width, label=label, gid=label)
        top.plot(p[0, 0], p[0, 1], "o", mfc="white", mec=colour, ms=6, label="_start")
        top.plot(p[-1, 0], p[-1, 1], "o", color=colour, ms=4, label="_end")
        height.plot(t, p[:, 2], color=colour, lw=width, label=label, gid=label)
    targets = {} if sol.example is None else sol.example.targets
    for i, (label, point) in enumerate(targets.items()):
        colour = _COLOURS[(len(names) + i) % len(_COLOURS)]
        top.plot(point[0], point[1], "*", color=colour, ms=12, mec="k", mew=0.5, label=label, gid=label)
        height.plot(t[-1], point[2], "*", color=colour, ms=12, mec="k", mew=0.5, label=label, gid=label)
    top.set_aspect("equal", adjustable="datalim")
    top.margins(0.15)
    top.set_xlabel("x [m]")
    top.set_ylabel("y [m]")
    top.set_title(TOP_VIEW_TITLE)
    top.grid(True, alpha=0.3)
    height.set_xlabel("time [s]")
    height.set_ylabel("z [m]")
    height.set_title(HEIGHT_TITLE)
    height.grid(True, alpha=0.3)
    height.legend(handles=height.get_legend_handles_labels()[0] + top.patches, fontsize="x-small", loc="upper left",
                  bbox_to_anchor=(1.0, 1.0))
    return fig


# ---------------------------------------------------------------- contact forces


def contact_force_series(example: ExampleProblem, solution: SolverResult | Trajectory, us=None
                         ) -> dict[str, np.ndarray]:
    """Contact frame name -> force ``f`` (T, 3) during each step (the first three rows of its contact, in the
    contact's reference: a 6d contact's torque is left out), NaN at the steps where the contact is not active.
    Frames in order of appearance."""
    sol = _solution(example, solution, us, None, "contact_force_series", need_us=True)
    return _contact_forces(sol)


def _contact_forces(sol: _Solution) -> dict[str, np.ndarray]:
    return {frame: f[:, :3] for frame, f in sol.example.contact_forces(sol.xs, sol.us).items()}


def plot_contact_forces(example: ExampleProblem, solution: SolverResult | Trajectory, us=None, *,
                        friction: float | None = None, axes: Sequence[Axes] | None = None) -> Figure:
    """Per contact of ``example`` (a colour each), the normal force ``f_n`` [N] and the friction ratio
    ``|f_t| / f_n`` against the friction coefficient ``friction`` (default ``example.friction``) over time, broken
    where the contact is not active (and the ratio where ``f_n <= 0``). Two Axes, given or stacked in a new Figure."""
    if not isinstance(example, ExampleProblem):
        raise ValueError(f"plot_contact_forces: expected an ExampleProblem (its contact phases), got "
                         f"{type(example).__name__}")
    sol = _solution(example, solution, us, None, "plot_contact_forces", need_us=True)
    mu = example.friction if friction is None else friction
    if not (isinstance(mu, (int, float, np.integer, np.floating)) and np.isfinite(mu) and mu > 0):
        raise ValueError(f"plot_contact_forces: friction must be a finite positive number, got {mu!r}")
    forces = _contact_forces(sol)
    if not forces:
        raise ValueError(f"plot_contact_forces: the problem {example.name!r} has no contact phases")
    fig, (ax_n, ax_r) = _new_axes(axes, 2, "plot_contact_forces", figsize=(9.0, 6.0))
    t = sol.times()
    for i, (name, f) in enumerate(forces.items()):
        colour = _COLOURS[i % len(_COLOURS)]
        fn = f[:, 2]
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(fn > 0, np.linalg.norm(f[:, :2], axis=1) / fn, np.nan)
        style = {"color": colour, "lw": 1.4, "ls": _DASHES[i % len(_DASHES)], "label": name, "gid": name}
        ax_n.plot(*_step_line(t, fn), **style)
        ax_r.plot(*_step_line(t, ratio), **style)
    ax_n.axhline(0.0, color="k", lw=0.8)
    ax_r.axhline(mu, color="k", lw=1.2, ls="--", label=f"μ = {mu:g}", gid="friction")
    peak = max((np.nanmax(line.get_ydata(), initial=0.0) for line in ax_r.get_lines()), default=0.0)
    ax_r.set_ylim(0.0, 1.1 * max(mu, peak))
    ax_n.set_ylabel("normal force f_n [N]")
    ax_r.set_ylabel("|f_t| / f_n")
    ax_n.set_title(NORMAL_FORCE_TITLE)
    ax_r.set_title(FRICTION_TITLE)
    for ax in (ax_n, ax_r):
        ax.set_xlabel("time [s]")
        ax.set_xlim(t[0], t[-1])
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def constraint_series(problem: Problem, solution: SolverResult | Trajectory, us=None) -> dict[str, np.ndarray]:
    """Constraint name -> its largest signed distance past the bounds (module docstring) at each knot (T+1,), NaN at
    the knots that do not carry it; names in order of appearance (a name shared by several sets is one series)."""
    if isinstance(solution, SolverResult):
        xs, us = solution.xs, solution.us
    else:
        xs = solution
    us = np.asarray(us, dtype=np.float64)
    out: dict[str, np.ndarray] = {}
    for a, b, constraints in problem.constraint_groups():
        knots_U = None if a == problem.T else us[a:b]
        for name, c in constraints.items():
            r = c.value(xs[a:b], knots_U)
            with np.errstate(invalid="ignore"):
                past = np.maximum(r - c.upper, c.lower - r) / c.scale
            series = out.setdefault(name, np.full(problem.T + 1, np.nan))
            series[a:b] = np.where(np.isfinite(past), past, -np.inf).max(axis=1)
    return {name: np.where(np.isfinite(v), v, np.nan) for name, v in out.items()}


def plot_constraints(example: ExampleProblem, solution: SolverResult | Trajectory, us=None, *,
                     ax: Axes | None = None) -> Figure:
    """Each hard constraint of ``example``'s problem (a colour each) against its bounds over time
    (``constraint_series``), with the bound at 0 and the default tolerance's band; one Axes, given or new."""
    if not isinstance(example, ExampleProblem) or not example.problem.has_constraints:
        raise ValueError("plot_constraints: expected an ExampleProblem whose problem has constraints")
    sol = _solution(example, solution, us, None, "plot_constraints", need_us=True)
    fig, (ax,) = _new_axes(None if ax is None else [ax], 1, "plot_constraints", figsize=(9.0, 3.5))
    t = sol.times()
    for i, (name, v) in enumerate(constraint_series(example.problem, sol.xs, sol.us).items()):
        ax.plot(t, v, color=_PALETTE[i % len(_PALETTE)], lw=1.4, ls=_DASHES[i % len(_DASHES)], marker=".", ms=3,
                label=name, gid=name)
    ax.axhline(0.0, color="k", lw=1.2, ls="--", label="bound", gid="bound")
    ax.axhspan(-1e-6, 1e-6, color=_GREY, alpha=0.4, lw=0, label="tolerance 1e-6")
    ax.set_yscale("symlog", linthresh=1e-6)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("(r − bound) / unit")
    ax.set_xlim(t[0], t[-1])
    ax.set_title(CONSTRAINTS_TITLE)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


# ---------------------------------------------------------------- summary


def summary_figure(source: ExampleProblem | RobotModel, solution: SolverResult | Trajectory, us=None,
                   dt: float | None = None, *, frames: Sequence[int | str] | None = None,
                   normalize: bool | None = None, title: str | None = None) -> Figure:
    """One Figure with the panels that apply, two per row in this order: convergence (a SolverResult with a
    non-empty history), CoM and feet top view, joint positions, CoM and feet heights, joint velocities, contact normal
    forces, joint torques, friction ratio, constraints. The CoM panels are drawn for a floating base or when
    ``frames`` is given, the contact panels for an ExampleProblem with contact phases, the constraints for one whose
    problem has hard constraints. ``title`` defaults to the problem, robot, horizon and the solver's outcome."""
    sol = _solution(source, solution, us, dt, "summary_figure", need_us=True)
    has_history = sol.result is not None and len(sol.result.history) > 0
    has_com = sol.model.floating_base or frames is not None
    has_contacts = sol.example is not None and len(sol.example.contact_phases()) > 0
    has_constraints = sol.example is not None and sol.example.problem.has_constraints
    panels = [p for p, shown in (("convergence", has_history), ("top", has_com), ("positions", True),
                                 ("height", has_com), ("velocities", True), ("normal", has_contacts),
                                 ("torques", True), ("friction", has_contacts), ("constraints", has_constraints))
              if shown]
    rows = (len(panels) + 1) // 2
    fig = Figure(layout="constrained", figsize=(15.0, 3.6 * rows))
    grid = fig.add_gridspec(rows, 2)
    ax = {p: fig.add_subplot(grid[k // 2, k % 2]) for k, p in enumerate(panels)}
    if has_history:
        plot_convergence(sol.result, ax=ax["convergence"])
    plot_joints(sol.model, sol.xs, sol.us, sol.dt, axes=[ax["positions"], ax["velocities"], ax["torques"]],
                normalize=normalize)
    if has_com:
        plot_com_and_feet(source, solution, dt, frames=frames, axes=[ax["top"], ax["height"]])
    if has_contacts:
        plot_contact_forces(sol.example, sol.xs, sol.us, axes=[ax["normal"], ax["friction"]])
    if has_constraints:
        plot_constraints(sol.example, sol.xs, sol.us, ax=ax["constraints"])
    if title is None:
        what = f"{sol.example.name}, " if sol.example is not None else ""
        title = f"{what}{sol.model.name}: T = {sol.T} knots of {sol.dt:g} s"
        if sol.result is not None:
            r = sol.result
            title += f"; {r.solver} {r.status} after {r.iterations} iterations, cost {r.cost:.6g}"
    fig.suptitle(_fit_width(title, fig))
    return fig


def _fit_width(title: str, fig: Figure) -> str:
    """``title`` broken at spaces into lines as wide as ``fig`` at the suptitle's font: a failed solve's status is a
    sentence (the reason it failed), too long for one line, which matplotlib would clip at the figure's edges."""
    font = FontProperties(size=rcParams["figure.titlesize"], weight=rcParams["figure.titleweight"])
    width = TextToPath().get_text_width_height_descent(title.replace("\n", " "), font, ismath=False)[0]
    usable = 0.95 * 72.0 * fig.get_figwidth()
    if width <= usable:
        return title
    per_line = max(20, int(len(title) * usable / width))
    return "\n".join(textwrap.fill(line, per_line, break_on_hyphens=False) for line in title.split("\n"))


def save_summary(path: str | Path, source: ExampleProblem | RobotModel, solution: SolverResult | Trajectory, us=None,
                 dt: float | None = None, *, dpi: float = 150.0, **options) -> Path:
    """Write ``summary_figure(source, solution, us, dt, **options)`` to ``path`` as PNG or PDF (by its suffix);
    returns the path."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise ValueError(f"save_summary: the file must end in {' or '.join(SUFFIXES)}, got {str(path)!r}")
    if not path.parent.is_dir():
        raise ValueError(f"save_summary: the directory {str(path.parent)!r} does not exist")
    fig = summary_figure(source, solution, us, dt, **options)
    fig.savefig(path, format=path.suffix.lower()[1:], dpi=dpi)
    return path
