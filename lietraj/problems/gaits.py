"""Quadruped gaits with contact switches: a trot and a jump, after Crocoddyl's ``quadrupedal_gaits_fwddyn.py``
(``SimpleQuadrupedalGaitProblem``), for any robot of ``QUADRUPEDS``.

A gait is a sequence of phases, each a run of per-knot ``ActionModel`` s sharing one dynamics and one cost object:

- **stance** on a set of feet: ``ContactRobotDynamics`` with 3D point contacts (forces in world axes) and the
  critically damped Baumgarte gains of ``contact_gains`` (``Kv = 2 / (CONTACT_TIME_CONSTANT dt)``, Crocoddyl's 50
  at ``dt = 0.01``, and ``Kp = Kv² / 4``, which pulls a foot to its planned ground point where Crocoddyl's
  ``Kp = 0`` lets it hold wherever it landed);
- **flight** (the jump): ``RobotDynamics``, no contact;
- **touchdown**: one ``ImpulseRobotDynamics`` knot on every foot that is on the ground after the landing. Crocoddyl
  puts only the landing feet in the impulse; the supporting feet are still, so the impulse they take is small,
  and including them keeps them still through the impact.

Swing feet and the CoM follow per-knot targets (Crocoddyl's): a swing foot moves ``step_length`` forward along a
triangular height profile peaking at ``step_height`` halfway, the CoM moves forward by the share of the step the
swinging feet carry. The touchdown knot puts the landing feet on the ground at their step's end.

Costs, running ones ``dt`` times (Crocoddyl's weights): CoM tracking ``1e6``; swing-foot tracking ``1e6``; the
friction-pyramid barrier of ``add_wrench_cone_cost``; state regularization towards the standing posture (base
orientation ``500²``, joints ``0.01²``, base velocity ``10²``, joint velocities ``1²``, all times ``10``); torques
``0.1``; joint-limit and torque-limit barriers ``1e3`` (Crocoddyl's example bounds the joints only, and its
jump asks ANYmal for almost twice its rated knee torque). The touchdown knot: landing-foot placement ``1e7`` and its own state
regularization. The terminal cost holds the final posture at rest.

The initial guess holds the standing posture at every knot with the quasi-static torques on all four feet; FDDP
closes the gaps (Crocoddyl starts its gaits the same way).

``trot(formulation="crocoddyl")`` is instead Crocoddyl's ``createTrottingProblem`` term for term, so that the two
libraries solve the same problem (``tests/croc_oracle.py`` builds Crocoddyl's; ``benchmarks/bench_vs_crocoddyl.py``
times both). Where it differs from the default:

- contacts with Crocoddyl's Baumgarte gains ``[0, 50]`` whatever ``dt``; the touchdown impulse on the landing feet
  only (``JMinvJt_damping`` 1e-12), placing them at their swing path's last point (``2 step_height / step_knots``
  above the ground, as Crocoddyl's impulse model reuses the last swing target), with no control cost (Crocoddyl's
  impulse knots have no control: lietraj's keeps ``nu`` controls that act on nothing, start at zero and stay there);
- the CoM is tracked during the swings only; no stance knots after the last touchdown;
- running costs: Crocoddyl's friction cone (the outer pyramid of ``mu``, 4 facets and ``f_z >= 0``, weight
  ``10 dt``) and ``stateBounds`` (a quadratic barrier on ``x ⊖ neutral`` between the URDF's joint position and
  velocity limits, weight ``1e3 dt``) instead of the wrench-cone, joint-limit and torque-limit barriers;
- the terminal cost is the stance cost evaluated without dynamics, unscaled: posture ``10`` and ``stateBounds``
  ``1e3`` (Crocoddyl evaluates the force and control residuals of a terminal knot at zero, where their costs
  vanish);
- the guess has each knot's quasi-static torques on its own contacts (Crocoddyl's ``quasiStatic``), zero at the
  impulse knots, and FDDP stops after the example's 100 iterations.
"""

from __future__ import annotations

import numpy as np

from lietraj.dynamics.kinematics.center_of_mass import center_of_mass
from lietraj.dynamics.contacts.contact_dynamics import Contact
from lietraj.dynamics.contacts.equilibrium import quasi_static_torques
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.model.robots import load_robot
from lietraj.optimal_control.costs.activations import QuadraticBarrier, WeightedQuadratic
from lietraj.optimal_control.costs.contact_residuals import WrenchConeResidual, barrier_activation
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.costs.costs import (
    CostSum,
    ResidualCost,
    control_regularization,
)
from lietraj.optimal_control.dynamics.discrete_dynamics import RobotDynamics
from lietraj.optimal_control.dynamics.impulse_robot_dynamics import ImpulseRobotDynamics
from lietraj.optimal_control.problem import ActionModel, Problem
from lietraj.optimal_control.costs.residuals import CenterOfMassResidual, FrameTranslationResidual, StateResidual
from lietraj.optimal_control.solvers.solvers import SolverOptions, SolverResult
from lietraj.problems.example_problem import ExampleProblem
from lietraj.problems.support import (
    QUADRUPEDS,
    Feet,
    add_limit_costs,
    add_wrench_cone_cost,
    check_positive,
    hard_constraints,
    standing_constraints,
    contact_gains,
    robot_with_feet,
)


FORMULATIONS = ("lietraj", "crocoddyl")
# SimpleQuadrupedalGaitProblem's Baumgarte gains [Kp, Kv] of every contact (whatever the time step) and the
# JMinvJt_damping of its impulse models.
CROCODDYL_CONTACT_GAINS = (0.0, 50.0)
CROCODDYL_IMPULSE_DAMPING = 1e-12


def _crocoddyl_state_bounds(urdf: RobotModel) -> QuadraticBarrier:
    """The barrier of Crocoddyl's ``stateBounds`` on ``x ⊖ neutral``: the joint positions and velocities between the
    limits of ``urdf`` (continuous joints and the base unbounded, as Pinocchio's free flyer). Crocoddyl reads them
    from its model, the URDF's: not the documented actuator limits the ready problems' models carry instead of
    placeholders (``lietraj.problems.actuators``)."""
    base = np.full(6, np.inf)
    lower = np.where(urdf.continuous, -np.inf, urdf.lower_limit)
    upper = np.where(urdf.continuous, np.inf, urdf.upper_limit)
    return QuadraticBarrier(np.concatenate([-base, lower, -base, -urdf.velocity_limit]),
                            np.concatenate([base, upper, base, urdf.velocity_limit]))


class _GaitBuilder:
    """The phases of a gait for one robot: stance, flight and touchdown action models with Crocoddyl's costs;
    ``crocoddyl``: exactly those of Crocoddyl's ``SimpleQuadrupedalGaitProblem`` (module docstring), where ``urdf`` is
    the robot as its URDF describes it, whose limits Crocoddyl's state bounds read; ``hard``: the friction cones,
    joint and torque limits as constraints (``support.standing_constraints``) instead of barriers."""

    def __init__(self, model: RobotModel, feet: Feet, dt: float, friction: float, crocoddyl: bool = False,
                 urdf: RobotModel | None = None, hard: bool = False):
        self.model, self.feet, self.dt, self.friction, self.crocoddyl = model, feet, dt, friction, crocoddyl
        self.hard = hard
        self.x0 = model.reference_state()
        self.nj, self.nv = model.n, model.nv
        self.gains = CROCODDYL_CONTACT_GAINS if crocoddyl else contact_gains(dt)
        if crocoddyl:
            self.state_bounds = _crocoddyl_state_bounds(urdf)
        # Crocoddyl's: base position free, base orientation 500, joints 0.01, base velocity 10, joint velocities 1
        self.posture_weights = np.concatenate([np.zeros(3), np.full(3, 500.0), np.full(self.nj, 0.01),
                                               np.full(6, 10.0), np.ones(self.nj)])
        self._dynamics: dict[tuple[str, ...], object] = {}
        self.landings: dict[int, dict[str, np.ndarray]] = {}  # id of a touchdown ActionModel -> its landing points

    def contacts(self, feet: dict[str, np.ndarray]) -> tuple[Contact, ...]:
        """Point contacts holding each of ``feet`` (frame -> planned ground point) there."""
        targets = [np.block([[np.eye(3), p[:, None]], [np.zeros((1, 3)), np.ones((1, 1))]]) for p in feet.values()]
        return self.feet.contacts(tuple(feet), baumgarte=self.gains, targets=targets)

    def dynamics(self, feet: dict[str, np.ndarray]):
        """One dynamics object per stance (feet and where they stand), so that its phases share the batched calls."""
        key = tuple((f, tuple(p)) for f, p in feet.items())
        if key not in self._dynamics:
            self._dynamics[key] = (ContactRobotDynamics(self.model, self.dt, self.contacts(feet)) if feet
                                   else RobotDynamics(self.model, self.dt))
        return self._dynamics[key]

    def _posture(self, weights: np.ndarray, nu: int) -> ResidualCost:
        return ResidualCost(StateResidual(self.model.state_space, self.x0, nu), WeightedQuadratic(weights ** 2))

    def _state_bounds(self, nu: int) -> ResidualCost:
        """Crocoddyl's ``stateBounds``: the barrier on ``x ⊖ neutral`` (joint positions and all velocities)."""
        space = self.model.state_space
        return ResidualCost(StateResidual(space, space.neutral(), nu), self.state_bounds)

    def phase(self, support: dict[str, np.ndarray], com=None, swing: dict[str, np.ndarray] | None = None) -> ActionModel:
        """A running model standing on ``support`` (frame -> ground point; empty: flight) tracking ``com`` and the
        ``swing`` foot paths (frame -> (knots, 3)) when given; the phase's knot count is that of the paths."""
        dt, n, c = self.dt, self.nj, CostSum(self.model.state_space, self.nj)
        if com is not None:
            c.add("com", ResidualCost(CenterOfMassResidual(self.model, com, nu=n)), dt * 1e6)
        for frame, path in (swing or {}).items():
            c.add(f"{frame} swing", ResidualCost(FrameTranslationResidual(self.model, frame, path, nu=n)), dt * 1e6)
        dynamics = self.dynamics(support)
        if support and self.crocoddyl:
            # FrictionCone(R, mu, 4, inner_appr=False): |f_x|, |f_y| <= mu f_z, the pyramid circumscribing the cone,
            # which is WrenchConeResidual's inscribed pyramid of the coefficient mu / cos(pi / 4); one residual for
            # all feet, whose cost is the sum of Crocoddyl's per-foot costs of equal weights.
            cone = WrenchConeResidual(self.model, dynamics.contacts, self.friction / np.cos(np.pi / 4), facets=4,
                                      dynamics=dynamics)
            c.add("friction cone", ResidualCost(cone, barrier_activation(cone.nr)), dt * 1e1)
        elif support and not self.hard:
            add_wrench_cone_cost(c, dynamics, self.feet, self.friction, dt * 1e2)
        c.add("posture", self._posture(self.posture_weights, n), dt * 10.0)
        c.add("control", control_regularization(n), dt * 0.1)
        if self.crocoddyl:
            c.add("state bounds", self._state_bounds(n), dt * 1e3)
        elif not self.hard:
            add_limit_costs(c, self.model, dt)
        return ActionModel(dynamics, c, constraints=self._constraints(dynamics))

    def _constraints(self, dynamics):
        """The knot's hard constraints (None for soft ones): a stance's wrench cones and every knot's limits."""
        return standing_constraints(dynamics, self.feet, self.friction) if self.hard else None

    def touchdown(self, support: dict[str, np.ndarray], landing: dict[str, np.ndarray]) -> ActionModel:
        """The impact knot placing the ``landing`` feet (frame -> target point): on all feet of ``support`` (frame
        -> ground point), or with ``crocoddyl`` on the landing feet only."""
        n, c = self.nj, CostSum(self.model.state_space, self.nj)
        for frame, point in landing.items():
            c.add(f"{frame} landing", ResidualCost(FrameTranslationResidual(self.model, frame, point, nu=n)), 1e7)
        weights = np.concatenate([np.ones(6), np.full(n, 10.0), np.full(self.nv, 10.0)])
        c.add("posture", self._posture(weights, n), 10.0)
        if self.crocoddyl:
            # No control cost (Crocoddyl's impulse knot has no control): Q_u = 0 and Q_ux = 0 there, so the solver's
            # regularization alone makes Q_uu invertible and a zero control stays zero.
            dynamics = ImpulseRobotDynamics(self.model, self.contacts(landing), damping=CROCODDYL_IMPULSE_DAMPING)
        else:
            c.add("control", control_regularization(n), 1e-3)  # F_u = 0 at an impact: keeps Q_uu positive definite
            dynamics = ImpulseRobotDynamics(self.model, self.contacts(support))
        model = ActionModel(dynamics, c, constraints=self._constraints(dynamics))
        self.landings[id(model)] = landing
        return model

    def landing_error(self, ex: ExampleProblem, result: SolverResult) -> float:
        """The largest distance (m) of a landing foot from its target at the touchdown knots."""
        errors = [np.linalg.norm(frame_placement(self.model, result.xs[k], frame)[:3, 3] - point)
                  for k, m in enumerate(ex.problem.running) for frame, point in self.landings.get(id(m), {}).items()]
        return float(max(errors, default=0.0))

    def terminal(self) -> CostSum:
        c = CostSum(self.model.state_space, 0)
        c.add("posture", self._posture(self.posture_weights, 0), 10.0)
        if self.crocoddyl:
            c.add("state bounds", self._state_bounds(0), 1e3)
        return c

    def guess(self, running: list[ActionModel]) -> np.ndarray:
        """The controls of the initial guess: the quasi-static torques on all four feet at every knot, or with
        ``crocoddyl`` Crocoddyl's ``quasiStatic`` of each knot (on its own contacts, zero at an impact)."""
        if not self.crocoddyl:
            return np.tile(quasi_static_torques(self.model, self.x0, self.feet.contacts()), (len(running), 1))
        torques: dict[int, np.ndarray] = {}
        for m in running:
            if id(m.dynamics) not in torques:
                torques[id(m.dynamics)] = (np.zeros(self.nj) if isinstance(m.dynamics, ImpulseRobotDynamics)
                                           else quasi_static_torques(self.model, self.x0, m.dynamics.contacts))
        return np.array([torques[id(m.dynamics)] for m in running])

    def example(self, name: str, running: list[ActionModel], description: str, checks) -> ExampleProblem:
        problem = Problem(self.x0, running, self.terminal())
        # Crocoddyl's example solves its gaits with at most 100 iterations; hard limits take more (a1's jump: 206)
        options = SolverOptions(max_iter=100 if self.crocoddyl else 400 if self.hard else 200)
        return ExampleProblem(name, self.model, problem, self.guess(running), xs0=problem.constant_trajectory(self.x0),
                              solver="fddp", options=options, friction=self.friction, description=description,
                              checks=checks)


def trot(robot: str = "solo12", steps: int = 2, step_length: float | None = None, step_height: float | None = None,
         dt: float = 0.01, step_knots: int = 25, support_knots: int = 2, friction: float = 0.7,
         formulation: str = "lietraj", constraints: str | None = None) -> ExampleProblem:
    """A trot of ``steps`` steps (Crocoddyl's ``createTrottingProblem``, repeated): the diagonal pairs (front-right,
    hind-left) and (front-left, hind-right) swing in turn for ``step_knots`` knots each, separated by
    ``support_knots`` knots on all four feet, each swing ending in a touchdown impact. The first step is half
    as long. Defaults: ``step_length`` 1/3 and ``step_height`` 1/4.5 of the standing CoM height (Crocoddyl's 0.15 m
    and 0.1 m on ANYmal; 7 and 4.7 cm on solo12).

    ``formulation="crocoddyl"``: Crocoddyl's problem term for term (module docstring; with ``steps=2`` exactly
    ``SimpleQuadrupedalGaitProblem.createTrottingProblem``, its contact gains, friction cones, state bounds and
    impulses, and the example's guess and iteration limit), for comparing the two libraries on one problem
    (``lietraj solve trot --set formulation=crocoddyl``). ``constraints``: "hard" (the default of lietraj's
    formulation) keeps the friction cones, joint and torque limits as constraints at the limits themselves, "soft"
    (the only choice, and the default, of Crocoddyl's) by barrier costs."""
    if formulation not in FORMULATIONS:
        raise ValueError(f"trot: formulation must be one of {', '.join(FORMULATIONS)}, got {formulation!r}")
    crocoddyl = formulation == "crocoddyl"
    hard = hard_constraints(("soft" if crocoddyl else "hard") if constraints is None else constraints, "trot")
    if hard and crocoddyl:
        raise ValueError("trot: Crocoddyl's formulation keeps its limits by penalties: constraints='hard' needs "
                         "formulation='lietraj'")
    model, feet = robot_with_feet(robot, QUADRUPEDS, "trot")
    if not (isinstance(steps, (int, np.integer)) and steps >= 1):
        raise ValueError(f"trot: steps must be a positive integer, got {steps!r}")
    if not (isinstance(step_knots, (int, np.integer)) and step_knots >= 2 and isinstance(support_knots, (int, np.integer))
            and support_knots >= 1):
        raise ValueError(f"trot: step_knots must be >= 2 and support_knots >= 1, got {step_knots!r}, {support_knots!r}")
    g = _GaitBuilder(model, feet, dt, friction, crocoddyl, load_robot(robot) if crocoddyl else None, hard)
    height = float(center_of_mass(model, g.x0)[2])
    step_length = height / 3.0 if step_length is None else step_length
    step_height = height / 4.5 if step_height is None else step_height
    check_positive(dt=dt, step_length=step_length, step_height=step_height, friction=friction)
    lf, rf, lh, rh = feet.frames
    foot = {f: frame_placement(model, g.x0, f)[:3, 3].copy() for f in feet.frames}
    com = np.mean(list(foot.values()), axis=0)
    com[2] = height
    start = com.copy()
    k = np.arange(step_knots)
    forward = np.outer((k + 1) / step_knots, [1.0, 0.0, 0.0])
    lift = np.outer(1.0 - np.abs(2.0 * k / step_knots - 1.0), [0.0, 0.0, 1.0])
    running: list[ActionModel] = []
    for i in range(steps):
        swing, support = ((rf, lh), (lf, rh)) if i % 2 == 0 else ((lf, rh), (rf, lh))
        length = 0.5 * step_length if i == 0 else step_length
        running += [g.phase(dict(foot), None if crocoddyl else com)] * support_knots  # Crocoddyl's: no CoM cost
        paths = {f: foot[f] + length * forward + step_height * lift for f in swing}
        running += [g.phase({f: foot[f] for f in support}, com + 0.5 * length * forward, paths)] * step_knots
        com = com + [0.5 * length, 0.0, 0.0]
        for f in swing:
            foot[f] = foot[f] + [length, 0.0, 0.0]
        # Crocoddyl's impulse places a landing foot at its swing path's last point, ours on the ground
        running.append(g.touchdown(dict(foot), {f: paths[f][-1] if crocoddyl else foot[f] for f in swing}))
    if not crocoddyl:  # Crocoddyl's terminal knot follows the last touchdown
        running += [g.phase(dict(foot), com)] * support_knots
    advance = float(com[0] - start[0])

    def checks(ex: ExampleProblem, result: SolverResult) -> dict[str, float]:
        moved = float(center_of_mass(model, result.xs[len(result.xs) - 1])[0] - start[0])
        return {"landing_error_mm": 1e3 * g.landing_error(ex, result), "com_advance_mm": 1e3 * moved,
                "com_advance_error_mm": 1e3 * abs(moved - advance)}

    return g.example("trot", running, f"{robot} trots {steps} steps of {100 * step_length:.3g} cm, "
                     f"feet {100 * step_height:.3g} cm high" + (" (Crocoddyl's problem)" if crocoddyl else ""), checks)


def jump(robot: str = "solo12", height: float | None = None, length=None, dt: float = 0.01, ground_knots: int = 10,
         friction: float = 0.7, constraints: str = "hard") -> ExampleProblem:
    """A jump (after Crocoddyl's ``createJumpingProblem``): ``ground_knots`` on four feet to take off, a ballistic
    flight whose CoM target rises ``height`` above the straight line to the landing point (the flight lasts
    ``2 sqrt(2 height / g)``, the time such a rise takes to go up and come down), a touchdown impact putting the
    feet ``length`` (3,) from where they started, and ``ground_knots`` on four feet with the CoM over them.
    Defaults: ``height`` 1/4 of the standing CoM height and ``length`` 1/3 of it forward (Crocoddyl's 0.15 m up
    and 0.3 m aside on ANYmal, with a fixed flight time that makes the apex higher). ``constraints``: "hard" keeps
    the friction cones, joint and torque limits as constraints at the limits themselves, "soft" by barrier costs."""
    hard = hard_constraints(constraints, "jump")
    model, feet = robot_with_feet(robot, QUADRUPEDS, "jump")
    if not (isinstance(ground_knots, (int, np.integer)) and ground_knots >= 1):
        raise ValueError(f"jump: ground_knots must be a positive integer, got {ground_knots!r}")
    g = _GaitBuilder(model, feet, dt, friction, hard=hard)
    c0 = float(center_of_mass(model, g.x0)[2])
    height = c0 / 4.0 if height is None else height
    check_positive(dt=dt, height=height, friction=friction)
    length = np.array([c0 / 3.0, 0.0, 0.0] if length is None else length, dtype=float)
    if length.shape != (3,) or not np.isfinite(length).all():
        raise ValueError(f"jump: length must be a finite displacement (3,), got {length!r}")
    foot = {f: frame_placement(model, g.x0, f)[:3, 3] for f in feet.frames}
    com = np.mean(list(foot.values()), axis=0)
    com[2] = c0
    flight = 2.0 * np.sqrt(2.0 * height / float(np.linalg.norm(model.gravity)))
    flying_knots = max(2, int(round(flight / dt)))
    t = np.arange(1, flying_knots + 1) / flying_knots
    arc = com + np.outer(t, length) + np.outer(4.0 * height * t * (1.0 - t), [0.0, 0.0, 1.0])
    landed = {f: p + length for f, p in foot.items()}
    running = ([g.phase(foot, com)] * ground_knots + [g.phase({}, arc)] * flying_knots
               + [g.touchdown(landed, landed)] + [g.phase(landed, com + length)] * ground_knots)

    def checks(ex: ExampleProblem, result: SolverResult) -> dict[str, float]:
        c = center_of_mass(model, result.xs)
        return {"landing_error_mm": 1e3 * g.landing_error(ex, result),
                "apex_mm": 1e3 * float(np.max(c[:, 2] - np.linspace(c0, c0 + length[2], len(c)))),
                "landing_com_error_mm": 1e3 * float(np.linalg.norm(c[-1] - com - length))}

    return g.example("jump", running, f"{robot} jumps {100 * np.linalg.norm(length):.3g} cm, "
                     f"CoM {100 * height:.3g} cm up", checks)
