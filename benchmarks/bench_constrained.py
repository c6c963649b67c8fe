"""Hard constraints against penalties: lietraj's augmented-Lagrangian FDDP next to lietraj's FDDP with barrier
costs, Crocoddyl 3.2.1's SolverBoxFDDP with its penalty residuals, and IPOPT, in one run.

Problems (``--problems``, comma-separated):

- ``jump_anymal``, ``jump_solo12``: ``make_problem("jump", robot)``: take off from four feet, fly, land with an
  impact (friction cones, joint and torque limits at every knot; solo12 at its actuators' 2.5 N m);
- ``squat_talos``: ``make_problem("squat", "talos")``: Talos's CoM goes 10 cm down and back up on both soles
  (wrench cones, joint and torque limits);
- ``ur5``: built here: the UR5 brings its tool frame 30 cm away (terminal position cost) in T = 50 knots of 20 ms
  (semi-implicit Euler on the joint torques, state and control regularization), with the shoulder-pan joint's
  upper limit tightened to 0.3 rad (the free motion goes to 0.39) and the torques within a quarter of the URDF's
  efforts (the free motion asks twice that of the shoulder): both bind.

Solvers, on each problem:

- ``lietraj AL-FDDP``: the hard problem (``constraints="hard"``) by ``solve_constrained`` (``ExampleProblem.solve``),
  stopping on its relative KKT residuals (1e-6);
- ``lietraj FDDP+barriers``: the soft problem (``constraints="soft"``: quadratic barriers on the wrench cones, 20 %
  inside them, on the joint limits, and on the torques, 5 % inside their limits) by FDDP, stopping at Σ|Q_u|² < 1e-9;
- ``crocoddyl BoxFDDP``: Crocoddyl's penalty formulation (``benchmarks/croc_constrained.py``): its barriers
  (``ActivationModelQuadraticBarrier``) on the friction or wrench cones and the joint limits, the torque limits as
  its action models' control bounds, solved by ``SolverBoxFDDP`` (th_stop 1e-9) with lietraj's soft problem's
  iteration limit, from lietraj's guess (on the jumps from its example's: the standing state, each knot's
  ``quasiStatic`` torques). On the jumps it is Crocoddyl's own ``createJumpingProblem`` (its
  example builder) with lietraj's jump geometry: a different problem (its own phases, knots, contact gains and
  costs); on the squat and the UR5 it is lietraj's soft problem term for term in Crocoddyl's residuals (checked at
  the guess, printed), with Crocoddyl's cones and the torques as bounds;
- ``ipopt``: the hard problem transcribed by ``tests/ipopt_oracle.py`` (multiple shooting, lietraj's derivatives,
  finite-difference Hessian of the Lagrangian, tol 1e-8): fixed-base problems only, so the UR5 alone.

Columns: ``iters`` (lietraj: iterations; Crocoddyl: ``croc_oracle.iterations``; IPOPT: its count), ``ms``: the median
wall time of ``--repeats`` warm solves, the solvers taking turns (one solve of each per round; IPOPT's time is its
solve alone, without building the casadi functions; Crocoddyl's without building its solver); ``own cost``: what the
solver minimised (barriers included); ``cost``: the hard problem's cost at the solution (the same objective for every
solver, the constraints left out); ``violation``: the largest violation of the hard problem's constraints at the
solution, ``problem.violations(xs, us)``, each constraint in its own unit (joint limits in rad, torques in N m,
cones in the robot's weight), with the worst constraint; ``torque``: max |u| / limit (the limit the hard problem
uses); ``friction``: ``min (mu f_n - |f_t|) / (m g)`` over the contact knots (``ExampleProblem.metrics``; negative:
outside a cone). For Crocoddyl's jumps, a different problem with other knots, the cost and violation are n/a; its
torques and its own contact forces (read from its datas) are measured against the same limits. All solves use one
thread (``OMP_NUM_THREADS=1``, ``SolverOptions.threads=1``). Then per problem: the time ratio lietraj constrained /
lietraj penalty (the goal: at most 2), with the run's quietness (``benchmarks/machine.py``), and whether any other
solver was both faster than the constrained solve and as feasible (violation at most max(its, 1e-6))::

    python benchmarks/bench_constrained.py                          # all four problems, 3 rounds
    python benchmarks/bench_constrained.py --problems ur5 --repeats 1
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import crocoddyl  # noqa: E402
import numpy as np  # noqa: E402

import lietraj  # noqa: E402
from lietraj.dynamics.algorithms.rnea import rnea  # noqa: E402
from lietraj.dynamics.kinematics.kinematics import frame_placement  # noqa: E402
from lietraj.optimal_control import (  # noqa: E402
    ActionModel,
    ConstraintSet,
    CostSum,
    FrameTranslationResidual,
    Problem,
    ResidualCost,
    RobotDynamics,
    control_regularization,
    joint_position_limits,
    state_regularization,
    torque_limits,
)
from lietraj.optimal_control.costs.costs import joint_limit_cost  # noqa: E402
from lietraj.optimal_control.solvers.solvers import SolverOptions  # noqa: E402
from lietraj.problems import ExampleProblem, make_problem  # noqa: E402
from lietraj.problems.support import JOINT_LIMIT_WEIGHT, add_limit_costs  # noqa: E402

import croc_constrained as croc  # noqa: E402
from machine import Quietness, crocoddyl_threads, describe, settle  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from croc_oracle import iterations as croc_iterations  # noqa: E402
from ipopt_oracle import solve_ipopt  # noqa: E402

FEASIBILITY_TOL = 1e-6  # solve_constrained's feasibility_tol: "as feasible" is within it of the constrained solve
IPOPT_TOL = 1e-8

# ---- the UR5 reach --------------------------------------------------------------------------------------------

UR5_T, UR5_DT, UR5_TOOL = 50, 0.02, "tool0"
UR5_PAN_MAX, UR5_EFFORT_FRACTION = 0.3, 0.25
UR5_START = np.array([0.0, -1.0, 1.5, -0.5, 1.57, 0.0])
UR5_REACH = np.array([-0.2, 0.2, 0.1])  # the target, from the tool's start
# weights of the costs, the running ones without dt (Crocoddyl's convention; lietraj's costs are dt times these)
UR5_WEIGHTS = {"state": 3.0, "control": 1e-3, "goal": 100.0, "joint limits": JOINT_LIMIT_WEIGHT,
               "terminal state": 1.0, "terminal goal": 1e3, "terminal joint limits": JOINT_LIMIT_WEIGHT}


def ur5(constraints: str) -> ExampleProblem:
    """The UR5 reach of the module docstring: ``constraints="hard"``: the tightened joint limits (every knot, the
    terminal one too) and the torque limits (running knots) as constraints; ``"soft"``: the barriers of the ready
    problems on both (``add_limit_costs``: the torque barrier 5 % inside the limits) and on the terminal joints."""
    base = lietraj.load_robot("ur5")
    upper = base.upper_limit.copy()
    upper[0] = UR5_PAN_MAX
    model = base.replace(upper_limit=upper, effort_limit=UR5_EFFORT_FRACTION * base.effort_limit)
    sp, n, dt, w = model.state_space, model.n, UR5_DT, UR5_WEIGHTS
    x0 = lietraj.State(None, UR5_START.copy(), np.zeros(n))
    hold = rnea(model, x0, np.zeros(n))
    target = frame_placement(model, x0, UR5_TOOL)[:3, 3] + UR5_REACH
    running = CostSum(sp, n)
    running.add("state", state_regularization(sp, x0, ur5_state_weights(False), n), dt * w["state"])
    running.add("control", control_regularization(n, reference=hold), dt * w["control"])
    running.add("goal", ResidualCost(FrameTranslationResidual(model, UR5_TOOL, target, n)), dt * w["goal"])
    terminal = CostSum(sp, 0)
    terminal.add("state", state_regularization(sp, x0, ur5_state_weights(True), 0), w["terminal state"])
    terminal.add("goal", ResidualCost(FrameTranslationResidual(model, UR5_TOOL, target, 0)), w["terminal goal"])
    dynamics = RobotDynamics(model, dt)
    if constraints == "hard":
        limits = ConstraintSet(sp, n)
        limits.add("joint limits", joint_position_limits(model, n))
        limits.add("torque limits", torque_limits(model))
        final = ConstraintSet(sp, 0).add("joint limits", joint_position_limits(model, 0))
        problem = Problem(x0, ActionModel(dynamics, running, constraints=limits), terminal, horizon=UR5_T,
                          terminal_constraints=final)
        options = SolverOptions(max_iter=400)
    else:
        add_limit_costs(running, model, dt)
        terminal.add("joint limits", joint_limit_cost(model, nu=0), w["terminal joint limits"])
        problem = Problem(x0, ActionModel(dynamics, running), terminal, horizon=UR5_T)
        options = SolverOptions(max_iter=200)
    return ExampleProblem("ur5 reach", model, problem, np.tile(hold, (UR5_T, 1)), solver="fddp", options=options,
                          description=f"UR5 reach, pan joint <= {UR5_PAN_MAX} rad, torques <= "
                                      f"{UR5_EFFORT_FRACTION:g} of the URDF's")


def ur5_state_weights(terminal: bool) -> np.ndarray:
    """The diagonal of the state costs: running joints 1, velocities 0.3; terminal velocities 1 (at rest)."""
    n = UR5_START.size
    return np.r_[np.zeros(n), np.ones(n)] if terminal else np.r_[np.ones(n), np.full(n, 0.3)]


def ur5_crocoddyl(soft: ExampleProblem):
    x0 = soft.problem.x0
    target = soft.problem.terminal.costs["goal"].cost.residual.target
    weights = {**UR5_WEIGHTS, "state activation": ur5_state_weights(False),
               "terminal state activation": ur5_state_weights(True)}
    return croc.ur5_problem(soft.model, x0, soft.us0[0], UR5_TOOL, np.asarray(target).reshape(-1)[:3], UR5_T, UR5_DT,
                            weights)


# ---- the cases -------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Case:
    """A problem in its forms: lietraj's ``hard`` and ``soft`` ExampleProblems, Crocoddyl's ``(problem, xs, us)``,
    whether Crocoddyl's solution lives on the hard problem's knots (``same_knots``), whether IPOPT takes it, and
    notes to print."""

    name: str
    hard: ExampleProblem
    soft: ExampleProblem
    crocoddyl: tuple
    same_knots: bool
    ipopt: bool
    notes: list[str]


def gait_case(name: str, robot: str) -> Case:
    hard, soft = make_problem("jump", robot), make_problem("jump", robot, constraints="soft")
    problem, xs, us, parameters = croc.jump_problem(hard.model)
    shown = ", ".join(f"{k}={np.round(v, 4).tolist() if isinstance(v, list) else round(v, 4)}"
                      for k, v in parameters.items())
    return Case(name, hard, soft, (problem, xs, us), False, False,
                [f"crocoddyl: its createJumpingProblem({shown}), T = {problem.T} (lietraj's T = {hard.problem.T}): "
                 "a different problem, cost and violation n/a"])


def squat_case(name: str, robot: str) -> Case:
    hard, soft = make_problem("squat", robot), make_problem("squat", robot, constraints="soft")
    theirs = croc.squat_problem(soft)
    return Case(name, hard, soft, theirs, True, False, [mirror_check(soft, theirs)])


def ur5_case(name: str) -> Case:
    hard, soft = ur5("hard"), ur5("soft")
    theirs = ur5_crocoddyl(soft)
    return Case(name, hard, soft, theirs, True, True, [mirror_check(soft, theirs)])


CASES: dict[str, Callable[[], Case]] = {
    "jump_anymal": lambda: gait_case("jump_anymal", "anymal"),
    "jump_solo12": lambda: gait_case("jump_solo12", "solo12"),
    "squat_talos": lambda: squat_case("squat_talos", "talos"),
    "ur5": lambda: ur5_case("ur5"),
}


def mirror_check(soft: ExampleProblem, theirs) -> str:
    """A line saying how far Crocoddyl's cost at the guess is from lietraj's soft cost without its torque barrier
    (Crocoddyl keeps the torques by bounds) and its wrench-cone barrier (Crocoddyl's cone has other rows; both are
    zero at the guesses here, whose forces are well inside the cones)."""
    problem, xs, us = theirs
    total = problem.calc(list(xs), list(us))
    X, U = croc.lietraj_trajectory(soft.model, xs), np.asarray(us)
    ours, running, a = 0.0, soft.problem.running, 0
    while a < len(running):  # each run of knots sharing a cost object at once (tracking costs take all its knots)
        b = a + 1
        while b < len(running) and running[b].cost is running[a].cost:
            b += 1
        values = running[a].cost.values(X[a:b], U[a:b])
        ours += sum(float(v.sum()) for name, v in values.items() if name not in ("torque limits", "wrench cone"))
        a = b
    ours += soft.problem.terminal_cost(X)
    return (f"crocoddyl: lietraj's soft problem term for term (cones: Crocoddyl's; torques: its control bounds); "
            f"cost at the guess {total:.9g}, lietraj's {ours:.9g} (relative difference "
            f"{abs(total - ours) / max(abs(ours), 1e-300):.1e})")


# ---- one solve of each solver ----------------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    status: str
    iterations: int
    seconds: float
    own_cost: float
    cost: float = math.nan
    violation: float = math.nan
    worst: str = ""
    torque: float = math.nan
    friction: float = math.nan
    result: object = None  # lietraj's SolverResult


def measured(case: Case, outcome: Outcome, xs, us) -> Outcome:
    """``outcome`` with the hard problem's cost, violations and metrics at ``(xs, us)`` (on its knots)."""
    hard = case.hard
    violations = hard.problem.violations(xs, us)
    worst = max(violations, key=lambda n: violations[n].value, default="")
    metrics = hard.metrics(SimpleNamespace(xs=xs, us=us, cost=math.nan, iterations=0, converged=False))
    return dataclasses.replace(outcome, cost=hard.problem.cost(xs, us),
                               violation=violations[worst].value if worst else 0.0,
                               worst=worst if worst and violations[worst].value > 0 else "",
                               torque=metrics.get("torque_ratio", math.nan),
                               friction=metrics.get("friction_margin", math.nan))


def lietraj_run(case: Case, ex: ExampleProblem) -> Callable[[], Outcome]:
    options = dataclasses.replace(ex.options, threads=1)

    def run() -> Outcome:
        ex.problem.forget_evaluations()  # the last solve's iterates are this one's: nothing recalled from it
        t = time.perf_counter()
        r = ex.solve(options=options)
        elapsed = time.perf_counter() - t
        return measured(case, Outcome(r.status, r.iterations, elapsed, r.cost, result=r), r.xs, r.us)

    return run


def crocoddyl_run(case: Case) -> Callable[[], Outcome]:
    problem, xs, us = case.crocoddyl
    model = case.hard.model
    max_iter = case.soft.options.max_iter
    weight = model.total_mass * float(np.linalg.norm(model.gravity))

    def run() -> Outcome:
        solver = crocoddyl.SolverBoxFDDP(crocoddyl_threads(problem))
        t = time.perf_counter()
        converged = solver.solve(list(xs), list(us), max_iter, False)
        elapsed = time.perf_counter() - t
        outcome = Outcome("converged" if converged else "max_iterations", croc_iterations(solver, converged), elapsed,
                          solver.cost)
        if case.same_knots:
            return measured(case, outcome, croc.lietraj_trajectory(model, solver.xs), np.array(solver.us))
        effort = model.effort_limit
        torque = max(float(np.max(np.abs(u) / effort)) for u in solver.us if len(u))
        friction, _ = croc.contact_margins(problem, case.hard.friction, weight)
        return dataclasses.replace(outcome, torque=torque, friction=friction)

    return run


def ipopt_run(case: Case) -> Callable[[], Outcome]:
    ex = case.hard

    def run() -> Outcome:
        s = solve_ipopt(ex.problem, ex.xs0, ex.us0, tol=IPOPT_TOL)
        return measured(case, Outcome(s.status, s.iterations, s.time, s.cost), s.xs, s.us)

    return run


# ---- the table -------------------------------------------------------------------------------------------------


def fmt(value: float, spec: str, width: int) -> str:
    return f"{'n/a':>{width}s}" if not np.isfinite(value) else f"{value:{width}{spec}}"


def binding(case: Case, result) -> str:
    """The constraints with nonzero multipliers at the hard solution, with their counts of active rows."""
    counts = {name: int(np.count_nonzero(np.abs(m.values) > 1e-9)) for name, m in result.multipliers.items()}
    active = [f"{name} {count}" for name, count in counts.items() if count]
    return ", ".join(active) + " rows" if active else "none (no constraint binds)"


def compare(name: str, repeats: int, quietness: Quietness) -> str:
    """Run and print the comparison on problem ``name``; returns its summary line."""
    case = CASES[name]()
    hard = case.hard
    print(f"{name}: {hard.description}; T = {hard.problem.T}, dt = {hard.dt}")
    for note in case.notes:
        print(f"  {note}")
    runs = {"lietraj AL-FDDP": lietraj_run(case, case.hard), "lietraj FDDP+barriers": lietraj_run(case, case.soft),
            "crocoddyl BoxFDDP": crocoddyl_run(case)}
    if case.ipopt:
        runs["ipopt"] = ipopt_run(case)
    last = {label: run() for label, run in runs.items()}  # warm: compile, caches
    times = {label: [] for label in runs}
    for _ in range(repeats):
        for label, run in runs.items():
            last[label] = run()
            times[label].append(last[label].seconds)
    median = {label: float(np.median(t)) for label, t in times.items()}
    print(f"  binding at the constrained solution: {binding(case, last['lietraj AL-FDDP'].result)}")
    print(f"  {'solver':22s} {'status':>15s} {'iters':>5s} {'ms':>8s} {'own cost':>11s} {'cost':>11s} "
          f"{'violation':>9s} {'worst':14s} {'torque':>6s} {'friction':>8s}")
    for label, o in last.items():
        status = o.status if len(o.status) <= 15 else o.status[:14] + "…"
        print(f"  {label:22s} {status:>15s} {o.iterations:5d} {1e3 * median[label]:8.1f} {o.own_cost:11.6g} "
              f"{fmt(o.cost, '.6g', 11)} {fmt(o.violation, '.2e', 9)} {o.worst or '-':14s} {fmt(o.torque, '.3f', 6)} "
              f"{fmt(o.friction, '.4f', 8)}")
    for label, o in last.items():
        if len(o.status) > 15:
            print(f"  {label}: {o.status}")
    ours = "lietraj AL-FDDP"
    ratio = median[ours] / median["lietraj FDDP+barriers"]
    print(f"  wall time ratio lietraj constrained / lietraj penalty = {ratio:.2f} "
          f"({'within' if ratio <= 2.0 else 'ABOVE'} the goal of 2) [{quietness.verdict()}]")
    bound = max(last[ours].violation, FEASIBILITY_TOL)
    faster = [label for label in last if label != ours and median[label] < median[ours]]
    winners = [f"{label} (violation {last[label].violation:.1e})" for label in faster
               if last[label].violation <= bound]
    unknown = [label for label in faster if not np.isfinite(last[label].violation)]
    line = (f"  faster than lietraj constrained and as feasible (violation <= {bound:.1e}): "
            f"{', '.join(winners) if winners else 'none'}; faster: {', '.join(faster) if faster else 'none'}")
    if unknown:
        line += f"; of these not comparable (a different problem): {', '.join(unknown)}"
    print(line)
    return (f"{name:12s} constrained / penalty = {ratio:5.2f}, constrained {last[ours].status.split(':')[0]} "
            f"(violation {last[ours].violation:.1e}), penalty violation {last['lietraj FDDP+barriers'].violation:.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default=",".join(CASES), help=f"comma-separated (default {','.join(CASES)})")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds after a warm-up solve (default 3)")
    parser.add_argument("--settle", type=float, default=30.0,
                        help="seconds to wait at most for a quiet machine before starting (default 30)")
    args = parser.parse_args()
    names = [n.strip() for n in args.problems.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown problem(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    print(describe())
    settle(args.settle)
    quietness = Quietness(1)
    import casadi
    import pinocchio

    print(f"lietraj {lietraj.__version__}, crocoddyl {crocoddyl.__version__}, pinocchio {pinocchio.__version__}, "
          f"casadi {casadi.__version__}; median of {args.repeats} round(s) after a warm-up; OMP_NUM_THREADS="
          f"{os.environ['OMP_NUM_THREADS']}; load average {os.getloadavg()[0]:.2f} at the start")
    start = time.perf_counter()
    summary = []
    for name in names:
        print()
        summary.append(compare(name, args.repeats, quietness))
    print()
    print(f"wall time ratios (goal <= 2) [{quietness.verdict()}]:")
    for line in summary:
        print(f"  {line}")
    print(f"{time.perf_counter() - start:.0f} s; {describe()}")


if __name__ == "__main__":
    main()
