"""A ready-to-solve problem: the optimal control problem, its default initial guess and solver, and the numbers
that say whether its solution does what the problem is about (reached target, foot drift, friction margins)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from lietraj.dynamics.kinematics.kinematics import frame_id, frame_placement
from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.lie.state import Trajectory
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.problem import Problem
from lietraj.optimal_control.solvers.augmented_lagrangian import solve_constrained
from lietraj.optimal_control.solvers.solvers import SolverOptions, SolverResult, solve_ddp, solve_fddp, solve_ilqr
from lietraj.problems.actuators import has_placeholder_limits

SOLVERS = ("fddp", "ilqr", "ddp")


@dataclass(eq=False)
class ExampleProblem:
    """``problem`` for ``model`` with its default guess ``(xs0, us0)`` (``xs0`` None: the rollout of ``us0``),
    the ``solver`` and ``options`` it is meant to be solved with, the ``friction`` coefficient its contact forces
    are checked against and the ``soles`` (frame -> half length, half width) their centres of pressure must stay
    in, and ``targets`` (name -> world point) worth drawing. ``checks`` adds problem-specific
    numbers to ``metrics``."""

    name: str
    model: RobotModel
    problem: Problem
    us0: np.ndarray
    xs0: Trajectory | None = None
    solver: str = "fddp"
    options: SolverOptions = field(default_factory=SolverOptions)
    friction: float = 0.7
    description: str = ""
    targets: dict[str, np.ndarray] = field(default_factory=dict)
    soles: dict[str, tuple[float, float]] = field(default_factory=dict)
    checks: Callable[[ExampleProblem, SolverResult], dict[str, float]] | None = None

    @property
    def dt(self) -> float:
        return self.problem.running[0].dynamics.dt

    def solve(self, solver: str | None = None, options: SolverOptions | None = None, callback=None,
              verbose: bool = False) -> SolverResult:
        """Solve from the default guess with ``solver`` ("fddp", "ilqr" or "ddp"; default: the problem's). iLQR and
        DDP start from a state guess as Crocoddyl's SolverDDP does: their first step is the closed-loop rollout of
        the policy computed about it. A problem with hard constraints is solved by ``solve_constrained`` (FDDP on the
        augmented Lagrangian; "ddp" adds DDP's term)."""
        solver = self.solver if solver is None else solver
        options = self.options if options is None else options
        if self.problem.has_constraints:
            if solver not in ("fddp", "ddp"):
                raise ValueError(f"{self.name}: a problem with hard constraints is solved by the augmented-Lagrangian "
                                 f"FDDP (solver 'fddp', or 'ddp' for its second-order term), not {solver!r}")
            return solve_constrained(self.problem, self.xs0, self.us0, options, callback=callback, verbose=verbose,
                                     second_order=solver == "ddp")
        if solver == "fddp":
            return solve_fddp(self.problem, self.xs0, self.us0, options, callback, verbose)
        if solver in ("ilqr", "ddp"):
            solve = solve_ilqr if solver == "ilqr" else solve_ddp
            return solve(self.problem, self.us0, options, callback, verbose, xs0=self.xs0)
        raise ValueError(f"{self.name}: solver must be one of {', '.join(SOLVERS)}, got {solver!r}")

    def contact_phases(self) -> list[tuple[int, int, ContactRobotDynamics]]:
        """``(first, end, dynamics)`` of each run of running knots that share one contact dynamics object."""
        phases: list[tuple[int, int, ContactRobotDynamics]] = []
        for k, m in enumerate(self.problem.running):
            if not isinstance(m.dynamics, ContactRobotDynamics):
                continue
            if phases and phases[-1][2] is m.dynamics and phases[-1][1] == k:
                phases[-1] = (phases[-1][0], k + 1, m.dynamics)
            else:
                phases.append((k, k + 1, m.dynamics))
        return phases

    def contact_forces(self, xs: Trajectory, us: np.ndarray) -> dict[str, np.ndarray]:
        """Contact frame name -> its force rows (T, 3 or 6) during each step, in its contact's reference
        (``Contact.reference``), NaN at the steps where it is not in contact; frames in order of appearance."""
        out: dict[str, np.ndarray] = {}
        for a, b, dyn in self.contact_phases():
            F, o = dyn.contact_forces(xs[a:b], us[a:b]), 0
            for c in dyn.contacts:
                name = self.model.frames[frame_id(self.model, c.frame)].name
                out.setdefault(name, np.full((len(us), c.dim), np.nan))[a:b] = F[:, o:o + c.dim]
                o += c.dim
        return out

    def contact_arrays(self, result: SolverResult) -> tuple[np.ndarray, np.ndarray]:
        """World points ``P`` and world forces ``F`` (T, contacts, 3) of every foot that is in contact at some knot,
        for drawing (``RobotViewer.animate(contact_points=P, contact_forces=F)``): zero force while a contact is off."""
        xs, T = result.xs, len(result.us)
        forces = self.contact_forces(xs, result.us)
        local = {c.frame for _, _, dyn in self.contact_phases() for c in dyn.contacts if c.reference == "local"}
        P, F = np.zeros((T, len(forces), 3)), np.zeros((T, len(forces), 3))
        for j, (frame, f) in enumerate(forces.items()):
            pose = frame_placement(self.model, xs[:T], frame)
            P[:, j] = pose[:, :3, 3]
            F[:, j] = np.nan_to_num(np.einsum("kij,kj->ki", pose[:, :3, :3], f[:, :3]) if frame in local else f[:, :3])
        return P, F

    def metrics(self, result: SolverResult) -> dict[str, float]:
        """Cost, iterations and status of ``result``, the torques against the model's limits, and for contact
        problems:

        - ``foot_drift_mm``: the largest displacement of a contact frame's origin from where its contact phase
          began (over the phase's knots and the knot after it);
        - ``friction_margin``: ``min (mu f_n - |f_t|) / (m g)`` over contacts and knots (>= 0: inside the cones);
        - ``min_normal_force``: ``min f_n / (m g)``;
        - ``cop_margin_mm`` for soles: the smallest distance of the centre of pressure to the sole's edge
          (negative: outside);
        - ``torque_ratio``: the largest ``|u| / effort limit`` over joints with a limit and knots (<= 1: within);
          NaN, with ``torque_limits_unknown`` = 1, when the model carries its URDF's placeholder limits
          (``lietraj.problems.actuators``: the ready problems' models have their actuators' documented ones);

        with ``constraint_violation`` for a problem with hard constraints (the largest violation of any, each in its
        own unit: forces in the robot's weight), and the problem's own ``checks``."""
        out: dict[str, float] = {"cost": float(result.cost), "iterations": float(result.iterations),
                                 "converged": float(result.converged)}
        if self.problem.has_constraints:
            out["constraint_violation"] = max((v.value for v in self.problem.violations(result.xs, result.us).values()),
                                              default=0.0)
        effort = self.model.effort_limit
        limited = np.isfinite(effort) & (effort > 0)
        if has_placeholder_limits(self.model):
            out.update(torque_ratio=float("nan"), torque_limits_unknown=1.0)
        elif limited.any():
            out["torque_ratio"] = float(np.max(np.abs(result.us[:, limited]) / effort[limited]))
        weight = self.model.total_mass * float(np.linalg.norm(self.model.gravity))
        drift, cone, normal, cop = 0.0, np.inf, np.inf, np.inf
        phases = self.contact_phases()
        for a, b, dyn in phases:
            F = dyn.contact_forces(result.xs[a:b], result.us[a:b])
            o = 0
            for c in dyn.contacts:
                p = frame_placement(self.model, result.xs[a:b + 1], c.frame)[:, :3, 3]
                drift = max(drift, float(np.max(np.linalg.norm(p - p[0], axis=1))))
                f = F[:, o:o + c.dim]
                fn, ft = f[:, 2], np.linalg.norm(f[:, :2], axis=1)
                cone = min(cone, float(np.min(self.friction * fn - ft)) / weight)
                normal = min(normal, float(np.min(fn)) / weight)
                if c.dim == 6:
                    sole = self.soles.get(c.frame)
                    if sole is not None:
                        with np.errstate(divide="ignore", invalid="ignore"):
                            cx, cy = -f[:, 4] / fn, f[:, 3] / fn
                        m = np.minimum(sole[0] - np.abs(cx), sole[1] - np.abs(cy))
                        cop = min(cop, float(np.min(np.where(fn > 0, m, -np.inf))))
                o += c.dim
        if phases:
            out.update(foot_drift_mm=1e3 * drift, friction_margin=cone, min_normal_force=normal)
            if np.isfinite(cop):
                out["cop_margin_mm"] = 1e3 * cop
        if self.checks is not None:
            out.update(self.checks(self, result))
        return out
