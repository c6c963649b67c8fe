"""Crocoddyl 3.2.1 driving lietraj's receding-horizon scenarios as its users write an MPC: ``CrocoddylMPC``, the
Crocoddyl twin of a lietraj ``ModelPredictiveController``, for ``benchmarks/bench_mpc.py``.

The problem. Every knot of the controller's ``Schedule`` (each knot of a cyclic gait's cycle; for a schedule of one
held phase, one copy per knot of the window) becomes one Crocoddyl action model with its own data, translated term
for term from the lietraj phase's ``ActionModel`` (``Mirror``):

- ``ContactRobotDynamics``: ``IntegratedActionModelEuler(DifferentialActionModelContactFwdDynamics)`` with a
  ``ContactModel3D`` (LOCAL_WORLD_ALIGNED) or ``ContactModel6D`` (LOCAL) per contact, the same Baumgarte gains and
  damping, ``enable_force`` (the cone costs need the force derivatives);
- ``ImpulseRobotDynamics``: ``ActionModelImpulseFwdDynamics`` with an ``ImpulseModel3D`` / ``6D`` per contact, the
  same restitution and damping. Crocoddyl's impulse models have no control (``nu = 0``): lietraj's impact knot keeps
  ``nu`` controls that act on nothing and a control regularization that makes them zero, which has no Crocoddyl
  counterpart (``Mirror.unmatched`` says so);
- costs: ``CenterOfMassResidual`` -> ``ResidualModelCoMPosition``; ``FrameTranslationResidual`` ->
  ``ResidualModelFrameTranslation``; ``StateResidual`` -> ``ResidualModelState`` (Pinocchio's free-flyer difference
  is lietraj's ``log(x_ref⁻¹ x)``, linear first; velocities subtract); ``ControlResidual`` -> ``ResidualModelControl``;
  the joint-limit barrier -> ``ResidualModelState`` about the neutral state with ``ActivationModelQuadraticBarrier``
  bounds on the joint rows only; the torque barrier -> ``ResidualModelControl`` with barrier bounds; the wrench-cone
  barrier (one lietraj residual for all contacts) -> per point foot ``ResidualModelContactFrictionCone`` of
  ``FrictionCone(I, μ, facets, inner_appr=True)`` and per sole ``ResidualModelContactWrenchCone`` of
  ``WrenchCone(I, μ, sole, facets, inner_appr=True)``, whose friction, unilateral and centre-of-pressure rows are
  lietraj's rows exactly (checked row by row when built) and whose 8 yaw-torque rows, which lietraj's cone has not,
  get open bounds. Crocoddyl's Euler model multiplies the running cost by ``dt``: its running weights are lietraj's
  divided by ``dt``; impulse and terminal weights are lietraj's.

The loop (``CrocoddylMPC.step``, one tick): ``problem.circularAppend(model, data)`` of the schedule's next knot (twice
when the window would start on an impact knot: lietraj's controller recedes past a knot without duration too), the
warm start shifted as lietraj's (the first knot dropped, the last state and control repeated; a zero control where an
impulse knot's empty one meets a stance knot), the references that move set on the window's models (the phases'
``references`` functions of the schedule's clock, the same functions lietraj's schedule calls; the terminal ones
through the scenario's own ``update`` hook, read back from the lietraj terminal cost it writes),
``problem.x0 = x``, ``SolverFDDP.solve(xs, us, iterations, False)``, and ``us[0]``, ``K[0]`` read. Its feedback
``u = ū - K (x ⊖ x̄)`` (Crocoddyl's sign) is in Pinocchio's tangent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from types import SimpleNamespace

import crocoddyl
import numpy as np
import pinocchio as pin

from croc_constrained import BIG, pinocchio_model
from lietraj.dynamics.lie.state import State, Trajectory
from lietraj.dynamics.model.pinocchio_interop import from_pinocchio, to_pinocchio
from lietraj.optimal_control.costs.activations import Quadratic, QuadraticBarrier, WeightedQuadratic
from lietraj.optimal_control.costs.contact_residuals import WrenchConeResidual
from lietraj.optimal_control.costs.costs import CostSum, ResidualCost
from lietraj.optimal_control.costs.residuals import (
    CenterOfMassResidual,
    ControlResidual,
    FrameTranslationResidual,
    JointPositionResidual,
    JointTorqueResidual,
    StateResidual,
)
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.dynamics.impulse_robot_dynamics import ImpulseRobotDynamics

REFERENCES = ("window", "appended")
"""Which models' moving references a tick sets: every model of the window (what lietraj's controller does), or only
the models the tick appended (enough when the references are functions of the schedule's clock alone, as here: a
model's references do not change while it stays in the window)."""


def _finite(values: np.ndarray) -> np.ndarray:
    """``values`` with ±inf replaced by ±``BIG`` (Crocoddyl's examples' "no bound": ``ActivationBounds`` computes
    the midpoint of its bounds, NaN for two infinite ones)."""
    return np.clip(np.asarray(values, dtype=float), -BIG, BIG)


def _row(values, row: int):
    """Row ``row`` of per-knot values (the last row past their end), or the values themselves when fixed."""
    if isinstance(values, State):
        return values
    if isinstance(values, Trajectory):
        return values[min(row, len(values) - 1)]
    values = np.asarray(values, dtype=float)
    return values[min(row, len(values) - 1)] if values.ndim == 2 else values


@dataclass
class _Link:
    """A Crocoddyl residual whose ``reference`` follows a lietraj residual's attribute: ``convert(values, i)`` is
    Crocoddyl's reference for the row ``i`` of lietraj's per-knot values."""

    lietraj: object
    crocoddyl: object
    convert: object


class Mirror:
    """Crocoddyl's models of lietraj's action models and costs on ``model`` (module docstring)."""

    def __init__(self, model):
        self.model = model
        self.pm = pinocchio_model(model)
        self.state = crocoddyl.StateMultibody(self.pm)
        self.actuation = crocoddyl.ActuationModelFloatingBase(self.state)
        self.nu = self.actuation.nu
        self.neutral = np.concatenate([pin.neutral(self.pm), np.zeros(self.pm.nv)])
        self.unmatched: set[str] = set()  # lietraj terms without a Crocoddyl counterpart, for the printout

    def x(self, state: State) -> np.ndarray:
        """Crocoddyl's ``[q; v]`` of a lietraj state."""
        q, v = to_pinocchio(self.model, state)
        return np.concatenate([q, v])

    def state_of(self, x: np.ndarray) -> State:
        """The lietraj state of Crocoddyl's ``[q; v]``."""
        return from_pinocchio(self.model, x[:self.pm.nq], x[self.pm.nq:])

    def frame_id(self, frame) -> int:
        name = self.model.frames[frame].name if isinstance(frame, (int, np.integer)) else frame
        fid = self.pm.getFrameId(name)
        if fid >= self.pm.nframes:
            raise ValueError(f"Pinocchio's {self.model.name} has no frame {name!r}")
        return fid

    # ---- costs ------------------------------------------------------------------------------------------------

    def costs(self, costs: CostSum, nu: int, scale: float, row: int, impulse: bool = False
              ) -> tuple[crocoddyl.CostModelSum, dict[int, _Link]]:
        """Crocoddyl's sum of lietraj's ``costs`` at the knot ``row`` of its phase (the row of per-knot targets),
        weights times ``scale``; and the links of its residuals with settable references, by ``id`` of the lietraj
        residual. ``impulse``: an impact knot, without control (its control terms are left out)."""
        out = crocoddyl.CostModelSum(self.state, nu)
        links: dict[int, _Link] = {}
        for name, term in costs.costs.items():
            cost = term.cost
            if not isinstance(cost, ResidualCost):
                raise NotImplementedError(f"term {name!r}: only ResidualCost terms are mirrored, got {cost!r}")
            if impulse and isinstance(cost.residual, ControlResidual):
                self.unmatched.add(f"{name} (impact knots: Crocoddyl's impulse models have no control)")
                continue
            for suffix, residual, activation, convert in self._terms(cost, nu, row):
                out.addCost(name + suffix, crocoddyl.CostModelResidual(self.state, activation, residual),
                            term.weight * scale)
                if convert is not None:
                    links[id(cost.residual)] = _Link(cost.residual, residual, convert)
        return out, links

    def _activation(self, activation, nr: int):
        if isinstance(activation, Quadratic):
            return crocoddyl.ActivationModelQuad(nr)
        if isinstance(activation, WeightedQuadratic) and activation.weights.ndim == 1:
            return crocoddyl.ActivationModelWeightedQuad(activation.weights.copy())
        raise NotImplementedError(f"activation {activation!r} is not mirrored")

    def _barrier(self, lower, upper):
        return crocoddyl.ActivationModelQuadraticBarrier(crocoddyl.ActivationBounds(_finite(lower), _finite(upper)))

    def _terms(self, cost: ResidualCost, nu: int, row: int) -> list[tuple]:
        """``(name suffix, Crocoddyl residual, activation, reference converter or None)`` for one lietraj term."""
        r, a, state = cost.residual, cost.activation, self.state
        if isinstance(r, WrenchConeResidual):
            return self._cones(r, a, nu)
        if isinstance(r, CenterOfMassResidual):
            return [("", crocoddyl.ResidualModelCoMPosition(state, _row(r.target, row), nu), self._activation(a, 3),
                     _point)]
        if isinstance(r, FrameTranslationResidual):
            residual = crocoddyl.ResidualModelFrameTranslation(state, self.frame_id(r.frame_name), _row(r.target, row),
                                                               nu)
            return [("", residual, self._activation(a, 3), _point)]
        if isinstance(r, StateResidual):
            residual = crocoddyl.ResidualModelState(state, self.x(_row(r.reference, row)), nu)
            return [("", residual, self._activation(a, state.ndx), lambda values, i: self.x(values[i]))]
        if isinstance(r, JointTorqueResidual):  # a ControlResidual: before it
            if not isinstance(a, QuadraticBarrier):
                raise NotImplementedError(f"{r!r} with {a!r} is not mirrored")
            return [("", crocoddyl.ResidualModelControl(state, nu), self._barrier(a.lower, a.upper), None)]
        if isinstance(r, ControlResidual):
            return [("", crocoddyl.ResidualModelControl(state, _row(r.reference, row)), self._activation(a, nu),
                     _point)]
        if isinstance(r, JointPositionResidual):
            if not isinstance(a, QuadraticBarrier):
                raise NotImplementedError(f"{r!r} with {a!r} is not mirrored")
            free_base, free_v = np.full(6, np.inf), np.full(self.pm.nv, np.inf)
            lower = np.concatenate([-free_base, a.lower, -free_v])
            upper = np.concatenate([free_base, a.upper, free_v])
            return [("", crocoddyl.ResidualModelState(state, self.neutral, nu), self._barrier(lower, upper), None)]
        raise NotImplementedError(f"residual {r!r} is not mirrored")

    def _cones(self, r: WrenchConeResidual, a, nu: int) -> list[tuple]:
        """Per contact, Crocoddyl's cone with lietraj's rows (module docstring), checked row by row."""
        if not (isinstance(a, QuadraticBarrier) and np.all(a.lower == -np.inf) and np.all(a.upper == 0.0)):
            raise NotImplementedError(f"{r!r} with {a!r}: only the barrier r <= 0 is mirrored")
        out = []
        for i, c in enumerate(r.contacts):
            o, dim = int(r.offsets[i]), c.dim
            block = r.A[:, o:o + dim]
            ours = block[np.any(block != 0.0, axis=1)]
            sole = c.frame in r.soles
            facets = len(ours) - 1 - (4 if sole else 0)
            fid = self.frame_id(c.frame)
            if sole:
                half_length, half_width = r.soles[c.frame]
                cone = crocoddyl.WrenchCone(np.eye(3), r.mu, np.array([2.0 * half_length, 2.0 * half_width]), facets,
                                            True)
                residual = crocoddyl.ResidualModelContactWrenchCone(self.state, fid, cone, nu, True)
                lower, upper = np.array(cone.lb), np.array(cone.ub)
                lower[facets + 5:], upper[facets + 5:] = -np.inf, np.inf  # the yaw-torque rows: lietraj has none
            else:
                cone = crocoddyl.FrictionCone(np.eye(3), r.mu, facets, True)
                residual = crocoddyl.ResidualModelContactFrictionCone(self.state, fid, cone, nu, True)
                lower, upper = np.array(cone.lb), np.array(cone.ub)
            _check_rows(ours, np.array(cone.A)[:, :dim], lower, upper, c.frame)
            out.append((f"|{c.frame}", residual, self._barrier(lower, upper), None))
        return out

    # ---- action models ----------------------------------------------------------------------------------------

    def action(self, am, row: int) -> tuple[object, dict[int, _Link], float]:
        """``(Crocoddyl model, links, cost scale)`` of lietraj's ``ActionModel`` ``am`` at the knot ``row`` of its
        phase; the scale is Crocoddyl's factor on the differential cost (``dt``, 1 for an impact)."""
        dyn = am.dynamics
        if np.any(np.isfinite(am.u_lb)) or np.any(np.isfinite(am.u_ub)):
            self.unmatched.add("control bounds (FDDP has none)")
        if isinstance(dyn, ImpulseRobotDynamics):
            impulses = crocoddyl.ImpulseModelMultiple(self.state)
            for c in dyn.contacts:
                kind = crocoddyl.ImpulseModel3D if c.kind == "3d" else crocoddyl.ImpulseModel6D
                impulses.addImpulse(str(c.frame), kind(self.state, self.frame_id(c.frame), _reference_frame(c)))
            costs, links = self.costs(am.cost, 0, 1.0, row, impulse=True)
            return (crocoddyl.ActionModelImpulseFwdDynamics(self.state, impulses, costs, dyn.restitution, dyn.damping,
                                                            True), links, 1.0)
        if not isinstance(dyn, ContactRobotDynamics):
            raise NotImplementedError(f"dynamics {dyn!r} are not mirrored")
        if dyn.integrator != "euler":
            raise NotImplementedError(f"{dyn!r}: only the semi-implicit Euler step is mirrored")
        contacts = crocoddyl.ContactModelMultiple(self.state, self.nu)
        for c in dyn.contacts:
            contacts.addContact(str(c.frame), self._contact(c))
        costs, links = self.costs(am.cost, self.nu, 1.0 / dyn.dt, row)
        differential = crocoddyl.DifferentialActionModelContactFwdDynamics(self.state, self.actuation, contacts, costs,
                                                                           dyn.damping, True)
        return crocoddyl.IntegratedActionModelEuler(differential, dyn.dt), links, dyn.dt

    def _contact(self, c):
        gains, fid, frame = np.array(c.baumgarte), self.frame_id(c.frame), _reference_frame(c)
        if c.target is None and gains[0] != 0.0:
            raise NotImplementedError(f"contact {c.frame!r}: a position gain without a target (the frame's current "
                                      "pose) is not mirrored")
        target = np.eye(4) if c.target is None else c.target
        if c.kind == "3d":
            return crocoddyl.ContactModel3D(self.state, fid, target[:3, 3].copy(), frame, self.nu, gains)
        return crocoddyl.ContactModel6D(self.state, fid, pin.SE3(target[:3, :3], target[:3, 3]), frame, self.nu, gains)

    def terminal(self, costs: CostSum) -> tuple[object, dict[int, _Link]]:
        """The terminal model of lietraj's terminal cost (its dynamics play no part: free dynamics, dt = 0)."""
        sum_, links = self.costs(costs, self.nu, 1.0, 0)
        differential = crocoddyl.DifferentialActionModelFreeFwdDynamics(self.state, self.actuation, sum_)
        return crocoddyl.IntegratedActionModelEuler(differential, 0.0), links


def _point(values, i: int) -> np.ndarray:
    return values[i]


def _reference_frame(contact):
    return pin.LOCAL_WORLD_ALIGNED if contact.reference == "local_world_aligned" else pin.LOCAL


def _check_rows(ours: np.ndarray, theirs: np.ndarray, lower: np.ndarray, upper: np.ndarray, frame) -> None:
    """lietraj's rows ``A f <= 0`` are Crocoddyl's bounded rows written as ``<= 0``, up to their order."""
    rows = []
    for row, lo, up in zip(theirs, lower, upper):
        if np.isfinite(up) and not np.isfinite(lo) and up == 0.0:
            rows.append(row)
        elif np.isfinite(lo) and not np.isfinite(up) and lo == 0.0:
            rows.append(-row)
        elif np.isfinite(lo) or np.isfinite(up):
            raise ValueError(f"contact {frame!r}: Crocoddyl's cone row {row} bounds [{lo}, {up}] are not mirrored")
    theirs_sorted = np.array(sorted(map(tuple, np.round(rows, 12))))
    ours_sorted = np.array(sorted(map(tuple, np.round(ours, 12))))
    if theirs_sorted.shape != ours_sorted.shape or np.abs(theirs_sorted - ours_sorted).max() > 1e-12:
        raise ValueError(f"contact {frame!r}: Crocoddyl's cone rows\n{theirs_sorted}\ndiffer from lietraj's\n{ours_sorted}")


# ---- the controller ---------------------------------------------------------------------------------------------


@dataclass(eq=False)
class CrocTick:
    """One tick of ``CrocoddylMPC`` in the shape ``lietraj.mpc.closed_loop`` reads (``u``, ``dt``, ``control``,
    ``solve_time``, ``overran``, ``failed``, ``prepare_time``): the plan's first knot ``xs0``, the next ``xs1``,
    ``u0``, ``K0``."""

    mpc: CrocoddylMPC
    knot: int
    xs0: np.ndarray
    xs1: np.ndarray
    u0: np.ndarray
    K0: np.ndarray
    dt: float
    solve_time: float
    iterations: int
    cost: float
    failed: bool = False
    prepare_time: float = 0.0  # no preparation phase
    overran: bool = False

    @property
    def status(self) -> str:
        return "failed: a non-finite plan (previous plan)" if self.failed else "max_iterations"

    @property
    def u(self) -> np.ndarray:
        return self.u0

    def control(self, x: State, tau: float = 0.0) -> np.ndarray:
        """``ū - K (x ⊖ x̄(τ))``, ``x̄(τ)`` the plan's state ``tau`` seconds after its first knot (interpolated along
        the group as lietraj's ``Plan.reference``)."""
        state = self.mpc.mirror.state
        reference = self.xs0
        if tau > 0.0 and self.dt > 0.0:
            reference = state.integrate(self.xs0, min(tau / self.dt, 1.0) * state.diff(self.xs0, self.xs1))
        return self.u0 - self.K0 @ state.diff(reference, self.mpc.mirror.x(x))


class CrocoddylMPC:
    """Crocoddyl's receding-horizon controller of lietraj's ``controller`` (module docstring): the same schedule,
    horizon, iterations per tick and start iterations, cold guess, references and update hook. ``controller`` must
    be a fresh one of its own scenario (its hook writes its terminal cost). ``threads``: the problem's
    ``nthreads``. ``references``: one of ``REFERENCES``."""

    def __init__(self, controller, threads: int = 1, references: str = "window"):
        if references not in REFERENCES:
            raise ValueError(f"references must be one of {REFERENCES}, got {references!r}")
        schedule, options = controller.schedule, controller.options
        self.options = replace(options, preparation=False)  # closed_loop reads it: no preparation phase
        self.schedule, self.T = schedule, options.horizon
        self.iterations, self.start_iterations = options.iterations, options.start_iterations
        self.update_hook, self.references = controller.update, references
        self.mirror = m = Mirror(schedule.phases[0].model.dynamics.model)
        if schedule.cyclic:
            if schedule.length < self.T:
                raise NotImplementedError(f"a cycle of {schedule.length} knots is shorter than the window {self.T}")
            self.period = schedule.length
        elif len(schedule.phases) == 1 and schedule.phases[0].knots == 1:
            self.period = self.T  # one held phase: a ring of the window's models
        else:
            raise NotImplementedError("acyclic schedules of several phases are not mirrored")
        self.models, self.datas, self.scales, self.impulse, self.refs = [], [], [], [], []
        for slot in range(self.period):
            i, offset = schedule.locate(slot) if schedule.cyclic else (0, 0)
            phase = schedule.phases[i]
            model, links, scale = m.action(phase.model, offset)
            self.models.append(model)
            self.datas.append(model.createData())
            self.scales.append(scale)
            self.impulse.append(phase.model.dynamics.dt <= 0.0)
            refs = []
            for residual, attribute, values in phase.references:
                link = links[id(residual)]
                if callable(values):
                    refs.append((values, link.crocoddyl, link.convert))
                else:  # per-knot arrays: fixed for the knot's model (an acyclic schedule holds its last row)
                    link.crocoddyl.reference = link.convert(values, min(offset, phase.knots - 1))
            self.refs.append(refs)
        self.terminal_model, links = m.terminal(schedule.terminal)
        self.terminal_data = self.terminal_model.createData()
        self.terminal_links = [(link, None) for link in links.values()]
        self.x_guess = m.x(controller.problem.x0)
        us0 = np.asarray(controller._warm.us)  # the scenario's cold guess us0 (its quasi-static torques)
        window = [self._slot(k) for k in range(self.T)]
        self.problem = crocoddyl.ShootingProblem(self.x_guess.copy(), [self.models[s] for s in window],
                                                 self.terminal_model, [self.datas[s] for s in window],
                                                 self.terminal_data)
        self.problem.nthreads = threads
        self.solver = crocoddyl.SolverFDDP(self.problem)
        self.xs = [self.x_guess.copy() for _ in range(self.T + 1)]
        self.us = [us0[k] if self.models[s].nu else np.zeros(0) for k, s in enumerate(window)]
        self.knot = 0
        self.appended = 0
        self.update_time = 0.0  # of the last tick: the problem's update (append, references, x0), seconds
        self.last: CrocTick | None = None

    def _slot(self, knot: int) -> int:
        return knot % self.period

    # ---- one tick -------------------------------------------------------------------------------------------

    def begin(self, x: np.ndarray) -> bool:
        """The first window solved from the cold guess (the controller's ``start``): up to ``start_iterations``;
        whether it converged."""
        self.appended = self.T
        self._set_references()
        self.problem.x0 = x
        self.xs[0] = x
        converged = self.solver.solve(self.xs, self.us, self.start_iterations, False)
        self.xs, self.us = list(self.solver.xs), list(self.solver.us)
        return converged

    def step(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One tick at the measured ``x`` (``[q; v]``): recede, references, x0, solve; ``(u0, K0)``."""
        start = time.perf_counter()
        self.appended = 0
        self._recede()
        while self.impulse[self._slot(self.knot)]:
            self._recede()
        self._set_references()
        self.problem.x0 = x
        self.xs[0] = x
        self.update_time = time.perf_counter() - start
        self.solver.solve(self.xs, self.us, self.iterations, False)
        # views into the solver's trajectory: the next solve converts its arguments (copies) before it writes there
        self.xs, self.us = list(self.solver.xs), list(self.solver.us)
        return self.us[0], self.solver.K[0]

    def _recede(self) -> None:
        self.knot += 1
        slot = self._slot(self.knot + self.T - 1)
        model = self.models[slot]
        self.problem.circularAppend(model, self.datas[slot])
        self.xs = self.xs[1:] + [self.xs[-1]]
        last = self.us[-1]
        self.us = self.us[1:] + [last if len(last) == model.nu else np.zeros(model.nu)]
        self.appended += 1

    def _set_references(self) -> None:
        """The moving references of the window's models (all, or the appended ones), and the terminal's."""
        first = self.knot
        positions = range(self.T - min(self.appended, self.T) if self.references == "appended" else 0, self.T)
        times = self.schedule.times(first + np.arange(self.T))
        groups: dict[int, tuple] = {}
        for k in positions:
            for values, residual, convert in self.refs[self._slot(first + k)]:
                groups.setdefault(id(values), (values, []))[1].append((k, residual, convert))
        for values, items in groups.values():
            rows = values(times[[k for k, _, _ in items]])
            for i, (_, residual, convert) in enumerate(items):
                residual.reference = convert(rows, i)
        if self.update_hook is not None:
            self.update_hook(SimpleNamespace(knot=first, time=float(times[0]), schedule=self.schedule, horizon=self.T))
        for i, (link, seen) in enumerate(self.terminal_links):
            for attribute in ("target", "reference"):
                value = getattr(link.lietraj, attribute, None)
                if value is not None and value is not seen:  # the hook set a new value
                    link.crocoddyl.reference = self.mirror.x(value) if isinstance(value, State) else \
                        np.asarray(value, dtype=float).reshape(-1)
                    self.terminal_links[i] = (link, value)

    # ---- the closed loop's interface (lietraj.mpc.closed_loop) --------------------------------------------

    def start(self, x: State) -> CrocTick:
        clock = time.perf_counter()
        self.begin(self.mirror.x(x))
        return self._tick(time.perf_counter() - clock, self.start_iterations)

    def tick(self, x: State) -> CrocTick:
        if self.last is None:
            return self.start(x)
        clock = time.perf_counter()
        self.step(self.mirror.x(x))
        return self._tick(time.perf_counter() - clock, self.iterations)

    def _tick(self, elapsed: float, iterations: int) -> CrocTick:
        u0, K0 = np.array(self.us[0]), np.array(self.solver.K[0])
        xs0, xs1 = np.array(self.xs[0]), np.array(self.xs[1])
        dt = self.scales[self._slot(self.knot)]
        ok = np.isfinite(u0).all() and np.isfinite(K0).all() and np.isfinite(xs1).all()
        if not ok and self.last is not None:  # keep the previous plan's first knot
            previous = self.last
            tick = CrocTick(self, self.knot, previous.xs0, previous.xs1, previous.u0, previous.K0, previous.dt,
                            elapsed, iterations, previous.cost, failed=True)
        else:
            tick = CrocTick(self, self.knot, xs0, xs1, u0, K0, dt, elapsed, iterations, float(self.solver.cost),
                            failed=not ok)
        self.last = tick
        return tick


# ---- the problem check ------------------------------------------------------------------------------------------


def lietraj_terms(problem, X: Trajectory, U: np.ndarray) -> dict[str, float]:
    """lietraj's cost of ``(X, U)`` by term (summed over the knots; terminal terms prefixed "terminal"); the control
    regularization of impact knots apart ("control at impacts")."""
    terms: dict[str, float] = {}
    running, T, a = problem.running, problem.T, 0
    while a < T:  # each run of knots sharing a cost object at once (per-knot targets take all its knots)
        b = a + 1
        while b < T and running[b].cost is running[a].cost:
            b += 1
        impact = isinstance(running[a].dynamics, ImpulseRobotDynamics)
        for name, values in running[a].cost.values(X[a:b], U[a:b]).items():
            key = f"{name} at impacts" if impact and name == "control" else name
            terms[key] = terms.get(key, 0.0) + float(values.sum())
        a = b
    for name, values in problem.terminal.values(X[T:T + 1], None).items():
        terms[f"terminal {name}"] = float(values.sum())
    return terms


def crocoddyl_terms(mpc: CrocoddylMPC, xs: list, us: list) -> tuple[float, dict[str, float]]:
    """Crocoddyl's total cost of ``(xs, us)`` and its weighted terms (per-contact cones summed under lietraj's
    name)."""
    total = mpc.problem.calc(xs, us)
    terms: dict[str, float] = {}

    def add(model, data, scale: float, prefix: str = "") -> None:
        inner = getattr(model, "differential", model)
        weights = inner.costs.costs.todict()
        for name, item in getattr(data, "differential", data).costs.costs.todict().items():
            key = prefix + name.split("|")[0]
            terms[key] = terms.get(key, 0.0) + scale * weights[name].weight * item.cost

    window = [mpc._slot(mpc.knot + k) for k in range(mpc.T)]
    for slot, model, data in zip(window, mpc.problem.runningModels, mpc.problem.runningDatas):
        add(model, data, mpc.scales[slot])
    add(mpc.problem.terminalModel, mpc.problem.terminalData, 1.0, "terminal ")
    return total, terms


def dynamics_difference(problem, mpc: CrocoddylMPC, X: Trajectory, U: np.ndarray) -> float:
    """The largest ``|f_lietraj(x_k, u_k) ⊖ f_crocoddyl(x_k, u_k)|`` over the window's knots (after a ``calc``)."""
    ours = problem.step(X, U)
    state = mpc.mirror.state
    return max(float(np.abs(state.diff(mpc.mirror.x(ours[k]), np.array(d.xnext))).max())
               for k, d in enumerate(mpc.problem.runningDatas))


def crocoddyl_trajectory(mpc: CrocoddylMPC, X: Trajectory, U: np.ndarray) -> tuple[list, list]:
    """``(xs, us)`` in Crocoddyl's layout for the current window (no control at its impulse knots)."""
    xs = [mpc.mirror.x(X[k]) for k in range(len(X))]
    us = [U[k] if m.nu else np.zeros(0) for k, m in enumerate(mpc.problem.runningModels)]
    return xs, us
