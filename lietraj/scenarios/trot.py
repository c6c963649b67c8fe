"""A quadruped trots at a commanded velocity under lateral pushes: ``quadruped_trot``.

The gait is a cyclic ``Schedule`` of two strides (distinct models, so that a window of ``horizon`` knots never holds
one swing phase twice): per stride, ``support`` knots on four feet, the diagonal pair (front-right, hind-left)
swinging for ``swing`` knots, its touchdown impact, ``support`` knots, the other pair swinging, its impact. The
contacts keep a stance foot still through a velocity-only Baumgarte term (``(0, Kv)``): where a foot stands is the
plant's business, so no foothold enters the dynamics and the stance phases need no updating.

What moves with time (``Phase.references`` as functions of the schedule's clock): the CoM tracks
``com0 + v t x̂``; the k-th swing of a foot leaves from its previous foothold and lands, at the impact knot, on the
next one, ``p0 + v (t_touchdown + τ/2) x̂`` (τ the stance time: the body passes over the middle of its stance), along
a path ``height`` high at mid-swing. The base's orientation (yaw included) and height are held through the posture
term, whose base-velocity reference is the commanded ``v``. Friction cones and the joint and torque limits are
barrier costs (``support.add_wrench_cone_cost``, ``add_limit_costs``): one FDDP iteration per tick, as MPC runs.

Tracking: the base's forward velocity over the run against the command, its lateral drift at the end, and its
height; the robot fell if its base dropped below half its standing height or tilted past 60 degrees.
"""

from __future__ import annotations

import numpy as np

from lietraj.dynamics.contacts.equilibrium import quasi_static_torques
from lietraj.dynamics.kinematics.center_of_mass import center_of_mass
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.mpc.closed_loop import ClosedLoopLog, Push
from lietraj.mpc.controller import ModelPredictiveController, MPCOptions
from lietraj.mpc.schedule import Phase, Schedule
from lietraj.optimal_control.costs.activations import WeightedQuadratic
from lietraj.optimal_control.costs.costs import CostSum, ResidualCost, control_regularization
from lietraj.optimal_control.costs.residuals import CenterOfMassResidual, FrameTranslationResidual, StateResidual
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.dynamics.impulse_robot_dynamics import ImpulseRobotDynamics
from lietraj.optimal_control.problem import ActionModel
from lietraj.problems.support import (
    QUADRUPEDS,
    add_limit_costs,
    add_wrench_cone_cost,
    check_positive,
    contact_gains,
    robot_with_feet,
)

from .scenario import Scenario, check_knots, fell_below

DEFAULT_VELOCITY = {"solo12": 0.2, "anymal": 0.3, "a1": 0.3, "hyq": 0.3, "go1": 0.3, "go2": 0.3, "b1": 0.3}


def quadruped_trot(robot: str = "solo12", velocity: float | None = None, duration: float = 10.0,
                   horizon: int = 50, dt: float = 0.01, swing: int = 15, support: int = 3,
                   height: float | None = None, push: float | None = None, friction: float = 0.7,
                   iterations: int = 1, solver: str = "fddp") -> Scenario:
    """The scenario of the module docstring. ``velocity`` (m/s, default per robot), ``height`` of the swing (default
    a tenth of the standing CoM height), ``push``: the force (N) of three lateral pushes on the base, 0.1 s each,
    at a quarter, a half and three quarters of the run (default: 15 % of the robot's weight, alternating sides)."""
    model, feet = robot_with_feet(robot, QUADRUPEDS, "quadruped_trot")
    check_positive(duration=duration, dt=dt, friction=friction, **({} if height is None else {"height": height}))
    check_knots(horizon=horizon, swing=swing, support=support)
    v = DEFAULT_VELOCITY.get(robot, 0.2) if velocity is None else float(velocity)
    if not np.isfinite(v):
        raise ValueError(f"quadruped_trot: velocity must be a finite number of m/s, got {velocity!r}")
    if push is not None and not (np.isfinite(push) and push >= 0):
        raise ValueError(f"quadruped_trot: push must be a force of 0 N or more, got {push!r}")
    space, n = model.state_space, model.n
    x0 = model.reference_state()
    com0 = center_of_mass(model, x0).copy()
    lift = 0.1 * com0[2] if height is None else float(height)
    weight = model.total_mass * 9.81
    push = 0.15 * weight if push is None else float(push)
    lf, rf, lh, rh = feet.frames
    pairs = ((rf, lh), (lf, rh))
    p0 = {f: frame_placement(model, x0, f)[:3, 3].copy() for f in feet.frames}
    stride = 2 * (support + swing) * dt  # each foot swings once per stride
    stance = (2 * support + swing) * dt
    # the start of each pair's first swing (schedule time): after the first support phase, and half a stride later
    first_lift = {f: support * dt + (0.0 if f in pairs[0] else (support + swing) * dt) for f in feet.frames}

    def foothold(f: str, j) -> np.ndarray:
        """Where foot ``f`` stands after its swing ``j`` (-1: where it starts)."""
        j = np.asarray(j)
        touchdown = first_lift[f] + j * stride + swing * dt
        shift = np.where(j >= 0, v * (touchdown + 0.5 * stance), 0.0)
        return p0[f] + np.outer(shift, [1.0, 0.0, 0.0])

    def swing_path(f: str):
        def path(times: np.ndarray) -> np.ndarray:
            j = np.floor((times - first_lift[f]) / stride + 1e-9).astype(int)
            s = ((times - first_lift[f] - j * stride) / dt + 1.0) / swing  # (k + 1) / swing at the k-th swing knot
            start, end = foothold(f, j - 1), foothold(f, j)
            return start + (end - start) * s[:, None] + np.outer(lift * 4.0 * s * (1.0 - s), [0.0, 0.0, 1.0])
        return path

    def landing(f: str):
        def point(times: np.ndarray) -> np.ndarray:  # an impact knot's time is its swing's end
            j = np.round((times - first_lift[f] - swing * dt) / stride).astype(int)
            return foothold(f, j)
        return point

    def com_path(times: np.ndarray) -> np.ndarray:
        return com0 + np.outer(v * times, [1.0, 0.0, 0.0])

    gains = (0.0, contact_gains(dt)[1])
    stances: dict[tuple[str, ...], ContactRobotDynamics] = {}

    def dynamics(frames: tuple[str, ...]) -> ContactRobotDynamics:
        if frames not in stances:
            stances[frames] = ContactRobotDynamics(model, dt, feet.contacts(frames, baumgarte=gains))
        return stances[frames]

    reference = x0.copy()
    reference.v[0] = v
    posture_weights = np.concatenate([[0.0, 0.0, 100.0], np.full(3, 500.0), np.full(n, 1.0), np.full(6, 10.0),
                                      np.full(n, 1.0)])

    # The terms every running knot has are one object each, shared by the phases' sums, and each stance's wrench cone
    # one per stance: the problem evaluates a shared term over all its knots in one call (Problem._term_groups).
    shared = CostSum(space, n)
    shared.add("posture", ResidualCost(StateResidual(space, reference, n), WeightedQuadratic(posture_weights)), 10.0)
    shared.add("control", control_regularization(n), 0.1)
    add_limit_costs(shared, model, 1.0)
    cones: dict[tuple[str, ...], CostSum] = {}

    def common(c: CostSum, scale: float, limits: bool) -> None:
        for name, term in shared.costs.items():
            if limits or name in ("posture", "control"):
                c.add(name, term.cost, scale * term.weight)

    def cone(frames: tuple[str, ...]) -> CostSum:
        if frames not in cones:
            cones[frames] = CostSum(space, n)
            add_wrench_cone_cost(cones[frames], dynamics(frames), feet, friction, dt * 1e1)
        return cones[frames]

    def stance_phase(frames: tuple[str, ...], knots: int, swinging: tuple[str, ...], name: str) -> Phase:
        dyn = dynamics(frames)
        c = CostSum(space, n)
        com = CenterOfMassResidual(model, np.tile(com0, (knots, 1)), nu=n)
        c.add("com", ResidualCost(com), dt * 1e5)
        references = [(com, "target", com_path)]
        for f in swinging:
            track = FrameTranslationResidual(model, f, np.tile(p0[f], (knots, 1)), nu=n)
            c.add(f"{f} swing", ResidualCost(track), dt * 1e6)
            references.append((track, "target", swing_path(f)))
        common(c, dt, limits=True)
        for label, term in cone(frames).costs.items():
            c.add(label, term.cost, term.weight)
        return Phase(ActionModel(dyn, c), knots, references, name)

    def touchdown(landed: tuple[str, ...], name: str) -> Phase:
        c = CostSum(space, n)
        references = []
        for f in landed:
            place = FrameTranslationResidual(model, f, p0[f][None], nu=n)
            c.add(f"{f} landing", ResidualCost(place), 1e7)
            references.append((place, "target", landing(f)))
        common(c, 1.0, limits=False)
        return Phase(ActionModel(ImpulseRobotDynamics(model, feet.contacts()), c), 1, references, name)

    phases = []
    for stride_index in range(2):
        for pair_index, pair in enumerate(pairs):
            standing = tuple(f for f in feet.frames if f not in pair)
            label = f"stride {stride_index} pair {pair_index}"
            phases += [stance_phase(feet.frames, support, (), f"{label} support"),
                       stance_phase(standing, swing, pair, f"{label} swing"), touchdown(pair, f"{label} touchdown")]
    terminal = CostSum(space, 0)
    terminal_com = CenterOfMassResidual(model, com0, nu=0)
    terminal.add("com", ResidualCost(terminal_com), 1e5 * dt)
    terminal.add("posture", ResidualCost(StateResidual(space, reference, 0), WeightedQuadratic(posture_weights)), 10.0)
    schedule = Schedule(phases, terminal, cyclic=True)

    def update(controller: ModelPredictiveController) -> None:
        terminal_com.target = com_path(schedule.times([controller.knot + horizon]))[0]

    us0 = np.tile(quasi_static_torques(model, x0, feet.contacts()), (horizon, 1))
    controller = ModelPredictiveController(schedule, x0, MPCOptions(horizon, solver=solver, iterations=iterations,
                                                                    deadline=dt, relinearize=False), update=update, us0=us0)

    def tracking(log: ClosedLoopLog) -> dict[str, float]:
        t = np.array(log.times)
        base = np.array([x.H[:3, 3] for x in log.states])
        moved = float(base[-1, 0] - base[0, 0])
        return {"forward velocity (m/s)": moved / max(t[-1] - t[0], dt), "commanded velocity (m/s)": v,
                "lateral drift at the end (cm)": 100.0 * float(base[-1, 1] - base[0, 1]),
                "base height min (cm)": 100.0 * float(base[:, 2].min())}

    sides = (1.0, -1.0, 1.0)
    pushes = [Push(duration * (i + 1) / 4.0, model.body_names[0], [0.0, s * push, 0.0]) for i, s in enumerate(sides)]
    return Scenario("trot", f"{robot} trots at {v:g} m/s for {duration:g} s, pushed sideways three times ({push:.3g} N "
                    "on the base, 0.1 s)", model, controller, x0, duration, pushes,
                    fell_below(model, 0.5 * float(x0.H[2, 3])), tracking, tracked="CoM",
                    measure=lambda x: center_of_mass(model, x), reference=lambda t: com_path(np.array([t]))[0])
