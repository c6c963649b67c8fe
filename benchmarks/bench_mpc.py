"""Per-tick time of lietraj's receding-horizon controller and of Crocoddyl 3.2.1 driving the same loop, on the
closed-loop scenarios: solo12's trot and Talos's balance.

Cases (``--cases``): ``trot``, ``lietraj.scenarios.quadruped_trot("solo12")`` (a cyclic gait of two strides, 76 knots
with four touchdown impacts; windows of 50 knots of 10 ms), and ``balance``, ``humanoid_balance("talos")`` (both soles
in 6D contact, windows of 20 knots of 30 ms); both with their default options: one FDDP iteration per tick, the start
solve up to 100 iterations, three pushes.

Crocoddyl's controller (``benchmarks/croc_mpc.py``) is the same MPC written as Crocoddyl's users write one: one
``IntegratedActionModelEuler(DifferentialActionModelContactFwdDynamics)`` per knot of the cycle, an
``ActionModelImpulseFwdDynamics`` at the touchdown knots, the scenario's cost terms and weights translated term for
term (CoM, swing and landing feet, the weighted state residual about the scenario's reference with its base
velocity, the controls, the wrench-cone barrier with lietraj's rows exactly, the joint-limit and torque barriers);
per tick ``problem.circularAppend(model, data)``, the moving references (CoM, swing and landing targets, the terminal
CoM) set on the window's models, ``problem.x0 = x`` and ``SolverFDDP.solve(xs, us, 1, False)`` from the warm start
shifted as lietraj's (first knot dropped, last repeated); ``us[0]`` and ``K[0]`` read.

How. For each case:

1. the problem check: a fresh lietraj controller and a fresh Crocoddyl one start at the scenario's first state (the
   start solve of each from the same cold guess: costs and iterations printed), then both problems' costs, term by
   term, at lietraj's first plan and at a perturbed trajectory whose contact forces leave their cones and whose
   joints and torques pass their limits, with their relative differences (the target: ~1e-9), and the largest
   difference of the two libraries' next states ``f(x_k, u_k)`` over the window;
2. lietraj's scenario runs once in MuJoCo (``run_scenario``) and its measured state at every tick is recorded;
3. the recorded states are replayed, tick after tick, to a fresh lietraj controller (``controller.start(x0)``, then
   ``controller.tick(x)``), to a fresh Crocoddyl one, and to a second Crocoddyl one that sets only the appended
   models' references (a model's references do not change while it stays in the window: the cheapest correct
   update) and, when the scenario's controller linearizes and sweeps again at its new plan for its gains
   (``MPCOptions.relinearize``: the balance, whose second sweep covers its first 4 knots, ``gains_knots``), to a
   second lietraj controller without that, which does the work of Crocoddyl's tick (one linearization, one sweep,
   the line search; the gains of that sweep), and to a lietraj controller doing a real-time iteration (``prepare()``
   timed apart, then ``tick(x)``: the delay from the measured state to the control; ``MPCOptions.preparation``);
   they take turns of 50 ticks (``--block N``: N ticks each), the one going first changing every turn, so that
   whatever else the machine does falls on all alike; each tick is timed with ``time.perf_counter`` around
   everything it does (lietraj: ``tick(x)``; Crocoddyl: append, references, ``x0``,
   solve, reading ``u0``, ``K0`` and the warm start), the objects of the setup frozen out of Python's collector
   (``gc.freeze``, as ``closed_loop`` does). A turn keeps a controller's data in the caches from one of its ticks
   to the next, as in a control loop, where nothing else computes between two ticks but the plant; turns of one tick
   put the four other controllers' data there instead, which slowed both libraries' ticks alike (2026-11-27, quiet:
   the trot's 4.6-5.0 ms and 9.9-10.5 ms in turns of 50 ticks, 4.5 and 9.7 in one turn of all of them, 5.3 and 11.6-
   11.8 in turns of one), and a turn of 50 ticks (0.2 to 0.7 s of wall time) is short against the minutes over which
   the machine's speed drifts;
4. Crocoddyl's controller runs in closed loop against the same MuJoCo plant (``lietraj.sim.MujocoPlant``, the same
   pushes and fall test, ``lietraj.mpc.closed_loop``: its feedback ``u = ū - K (x ⊖ x̄(τ))`` re-evaluated every
   millisecond, in Pinocchio's coordinates and tangent) and its tracking is printed: does it trot, did it fall.

Printed: the machine and its load average before and after (``benchmarks/machine.py``), per case the median and
99th percentile tick times (ms), Crocoddyl's split into its problem update and its solve, the ratio of the medians
lietraj / Crocoddyl with the run's quietness (and that of the controller doing Crocoddyl's work, where it differs),
and the goals: solo12's tick <= 5 ms, Talos's <= 20 ms (medians of lietraj's ticks) and lietraj <= 0.5 x
Crocoddyl's tick. Threads: one by default (``OMP_NUM_THREADS=1``, set before
Crocoddyl is imported, the Crocoddyl problem's ``nthreads = 1``: Crocoddyl 3.2.1's ``ShootingProblem`` starts with
two threads whatever ``OMP_NUM_THREADS`` says, as its OpenMP loops name their thread count; lietraj's default
``SolverOptions``); ``--threads 2`` gives both two (``nthreads = 2``; ``MPCOptions.solver_options =
SolverOptions(threads=2)``)::

    python benchmarks/bench_mpc.py                      # both cases, every recorded tick, one thread
    python benchmarks/bench_mpc.py --cases trot --ticks 200 --threads 2
    python benchmarks/bench_mpc.py --quick              # 100 ticks of each case
    python benchmarks/bench_mpc.py --block 1            # the controllers take turns tick by tick

Caveats. Replayed states are lietraj's closed loop's, so Crocoddyl solves from states its own plans did not lead to
(its warm start is its own plan): the same work per tick, not the same trajectory. The states reach Crocoddyl already
in its coordinates (the conversion from lietraj's state, which a Crocoddyl user's plant would not need, is outside
the timing); lietraj's ``tick`` takes the lietraj state as its plant gives it. Crocoddyl's impulse knots have no
control, so lietraj's control regularization at its impact knots has no counterpart (printed apart: it is zero at
lietraj's plans). Crocoddyl's per-tick reference updates run Python (the scenario's own reference functions and
hook), as a user's would. The first tick of each run (the start solve) is left out of the statistics. Identical
problems and warm starts do not make identical plans: the two FDDPs may accept different step lengths along the same
direction (lietraj's controller starts a tick's line search at twice the last tick's first step, Crocoddyl's at 1,
and their expected-improvement tests for a step that keeps part of the gaps differ), so the replay prints how far the
plans are apart tick by tick; Crocoddyl is run as its users run it, with its default line search.
"""

from __future__ import annotations

import argparse
import os
import sys


def arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="trot,balance", help="comma-separated: trot, balance (default both)")
    parser.add_argument("--ticks", type=int, default=None,
                        help="ticks of each run after the start solve (default: all of the scenario's duration)")
    parser.add_argument("--quick", action="store_true", help="100 ticks of each case")
    parser.add_argument("--block", type=int, default=50,
                        help="the controllers take turns every BLOCK ticks of the replay (default 50)")
    parser.add_argument("--threads", type=int, default=1, choices=(1, 2), help="threads of both libraries (default 1)")
    parser.add_argument("--settle", type=float, default=60.0,
                        help="seconds to wait at most for a quiet machine before starting (default 60)")
    return parser.parse_args(argv)


ARGS = arguments() if __name__ == "__main__" else None
# Crocoddyl's OpenMP and the BLAS read it when they load: before any import of them.
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads if ARGS is not None else 1)

import dataclasses  # noqa: E402
import gc  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import crocoddyl  # noqa: E402
import numpy as np  # noqa: E402

import lietraj  # noqa: E402
from lietraj.dynamics import se3  # noqa: E402
from lietraj.mpc.closed_loop import closed_loop  # noqa: E402
from lietraj.optimal_control.solvers.solvers import SolverOptions  # noqa: E402
from lietraj.scenarios.balance import humanoid_balance  # noqa: E402
from lietraj.scenarios.scenario import Scenario, run_scenario  # noqa: E402
from lietraj.scenarios.trot import quadruped_trot  # noqa: E402

import croc_mpc  # noqa: E402 (puts tests/ on the path, through croc_constrained)
from croc_oracle import iterations as croc_iterations  # noqa: E402
from machine import Quietness, describe, settle  # noqa: E402

RATIO_GOAL = 0.5
SAME_WORK = "lietraj, the iteration's gains (relinearize=False)"
PREPARED, PREPARATION = "lietraj, prepared (RTI): the tick", "lietraj, prepared (RTI): its preparation"


@dataclasses.dataclass(frozen=True)
class Case:
    """A scenario builder, the goal on lietraj's median tick (ms) and the robot's name for the goal line."""

    build: Callable[[], Scenario]
    goal_ms: float
    robot: str


CASES = {
    "trot": Case(lambda: quadruped_trot("solo12"), 5.0, "solo12"),
    "balance": Case(lambda: humanoid_balance("talos"), 20.0, "Talos"),
}


def lietraj_scenario(case: Case, threads: int) -> Scenario:
    """A fresh scenario whose controller's solver runs on ``threads`` threads."""
    scenario = case.build()
    scenario.controller.options.solver_options = SolverOptions(threads=threads)
    return scenario


def shortened(scenario: Scenario, ticks: int | None) -> Scenario:
    """``scenario`` lasting its start tick and ``ticks`` more (all of it for None)."""
    if ticks is not None:
        dt = float(scenario.controller.problem.running[0].dynamics.dt)
        scenario.duration = min(scenario.duration, (ticks + 1) * dt)
    return scenario


def stats(times: list[float]) -> tuple[float, float]:
    t = 1e3 * np.asarray(times)
    return float(np.median(t)), float(np.percentile(t, 99))


def relative(a: float, b: float, floor: float = 1e-12) -> float:
    """``|a - b| / max(|a|, |b|, floor)``: costs below ``floor`` count as zero (a term inactive in both)."""
    return abs(a - b) / max(abs(a), abs(b), floor)


# ---- 1. the problem check ---------------------------------------------------------------------------------------


def perturbed(problem, plan, rng: np.random.Generator):
    """A trajectory near ``plan`` off its dynamics: base poses moved by 0.02, joints by 0.05 rad (three of them past
    their limits at some knots), velocities by 0.3, controls by a third of the effort limits (some past them)."""
    model = problem.running[0].dynamics.model
    X, U = plan.xs.copy(), plan.us.copy()
    for k in range(len(X)):
        X.H[k] = X.H[k] @ se3.exp(0.02 * rng.standard_normal(6))
    X.s[:] += 0.05 * rng.standard_normal(X.s.shape)
    X.v[:] += 0.3 * rng.standard_normal(X.v.shape)
    knots = np.arange(2, len(X) - 1, 7)
    joints = rng.integers(0, model.n, len(knots))
    X.s[knots, joints] = np.where(rng.random(len(knots)) < 0.5, model.lower_limit[joints] - 0.05,
                                  model.upper_limit[joints] + 0.05)
    effort = np.where(np.isfinite(model.effort_limit), model.effort_limit, 100.0)
    U += rng.standard_normal(U.shape) * effort / 3.0
    U[2::9] = 1.1 * effort * np.sign(rng.standard_normal((len(U[2::9]), model.n)))
    return X, U


def check_problem(case: Case, x0) -> None:
    """Part 1 of the module docstring, printed."""
    ours = case.build().controller
    theirs = croc_mpc.CrocoddylMPC(case.build().controller)
    t = time.perf_counter()
    first = ours.start(x0)
    t_ours = time.perf_counter() - t
    t = time.perf_counter()
    converged = theirs.begin(theirs.mirror.x(x0))
    t_theirs = time.perf_counter() - t
    n_theirs = croc_iterations(theirs.solver, converged)
    print(f"  start solves from the same cold guess (at most {ours.options.start_iterations} iterations): lietraj cost "
          f"{first.cost:.9g} in {first.iterations} iterations ({first.status}, {t_ours:.2f} s), crocoddyl "
          f"{theirs.solver.cost:.9g} in {n_theirs} ({t_theirs:.2f} s); relative difference "
          f"{relative(first.cost, theirs.solver.cost):.1e}")
    rng = np.random.default_rng(0)
    points = {"lietraj's first plan": (first.plan.xs, first.plan.us),
              "a perturbed trajectory": perturbed(ours.problem, first.plan, rng)}
    rows = {}
    for label, (X, U) in points.items():
        xs, us = croc_mpc.crocoddyl_trajectory(theirs, X, U)
        total, croc_terms = croc_mpc.crocoddyl_terms(theirs, xs, us)
        terms = croc_mpc.lietraj_terms(ours.problem, X, U)
        unmatched = sum(v for k, v in terms.items() if k not in croc_terms)
        matched = sum(v for k, v in terms.items() if k in croc_terms)
        gap = croc_mpc.dynamics_difference(ours.problem, theirs, X, U)
        print(f"  at {label}: lietraj {matched:.12g}, crocoddyl {total:.12g}, relative difference "
              f"{relative(matched, total):.1e}" + (f" (lietraj's terms without a counterpart left out: "
                                                    f"{unmatched:.3g})" if unmatched else "")
              + f"; largest |f_lietraj(x, u) ⊖ f_crocoddyl(x, u)| over the knots {gap:.1e}")
        for name in dict.fromkeys([*terms, *croc_terms]):
            rows.setdefault(name, []).extend([terms.get(name, np.nan), croc_terms.get(name, np.nan)])
    print(f"    {'term':24s}" + "".join(f" {f'{who} ({i})':>17s}" for i in (1, 2) for who in ("lietraj", "crocoddyl"))
          + f" {'rel. diff (1)':>13s} {'rel. diff (2)':>13s}")
    for name, v in rows.items():
        diffs = [relative(v[0], v[1]) if np.isfinite(v[0]) and np.isfinite(v[1]) else np.nan,
                 relative(v[2], v[3]) if np.isfinite(v[2]) and np.isfinite(v[3]) else np.nan]
        print(f"    {name:24s}" + "".join(f" {x:17.10g}" for x in v)
              + "".join(f" {d:13.1e}" if np.isfinite(d) else f" {'(no match)':>13s}" for d in diffs))
    print("    (1) lietraj's first plan, (2) the perturbed trajectory" +
          (f"; without a Crocoddyl counterpart: {'; '.join(sorted(theirs.mirror.unmatched))}"
           if theirs.mirror.unmatched else ""))


# ---- 2.-4. the recorded run, the replay, Crocoddyl's closed loop ------------------------------------------------


def replay(case: Case, states: list, threads: int, block: int) -> tuple[dict[str, list[float]], str]:
    """Part 3 of the module docstring: the tick times (s) of each controller and Crocoddyl's update times; a line
    saying how far lietraj's and Crocoddyl's plans are apart, tick by tick."""
    ours = lietraj_scenario(case, threads).controller
    theirs = croc_mpc.CrocoddylMPC(case.build().controller, threads)
    appended = croc_mpc.CrocoddylMPC(case.build().controller, threads, references="appended")
    # a scenario whose ticks linearize and sweep again at the new plan for its gains does more than Crocoddyl's tick:
    # the same controller without that is timed too, the work of Crocoddyl's tick exactly
    same = None
    if ours.options.relinearize:
        same = lietraj_scenario(case, threads).controller
        same.options.relinearize = False
    # a real-time iteration: the tick from the measured state, its window prepared before (MPCOptions.preparation)
    prepared = lietraj_scenario(case, threads).controller
    vectors = [theirs.mirror.x(x) for x in states]  # Crocoddyl's plant would give [q; v]: not timed
    ours.start(states[0])
    prepared.start(states[0])
    theirs.begin(vectors[0])
    appended.begin(vectors[0])
    if same is not None:
        same.start(states[0])
    times = {"lietraj": [], SAME_WORK: [], PREPARED: [], PREPARATION: [], "crocoddyl": [],
             "crocoddyl, appended models' references": [], "crocoddyl update": []}
    plans = {"lietraj": {}, "crocoddyl": {}}  # tick -> (cost, u0)

    def tick_ours(k: int) -> None:
        t = time.perf_counter()
        tick = ours.tick(states[k])
        times["lietraj"].append(time.perf_counter() - t)
        plans["lietraj"][k] = (tick.cost, tick.u.copy())

    def tick_theirs(k: int) -> None:
        t = time.perf_counter()
        u0, _ = theirs.step(vectors[k])
        times["crocoddyl"].append(time.perf_counter() - t)
        times["crocoddyl update"].append(theirs.update_time)
        plans["crocoddyl"][k] = (theirs.solver.cost, np.array(u0))

    def tick_appended(k: int) -> None:
        t = time.perf_counter()
        appended.step(vectors[k])
        times["crocoddyl, appended models' references"].append(time.perf_counter() - t)

    def tick_same(k: int) -> None:
        t = time.perf_counter()
        same.tick(states[k])
        times[SAME_WORK].append(time.perf_counter() - t)

    def tick_prepared(k: int) -> None:
        t = time.perf_counter()
        prepared.prepare()
        t1 = time.perf_counter()
        prepared.tick(states[k])
        times[PREPARATION].append(t1 - t)
        times[PREPARED].append(time.perf_counter() - t1)

    turns = [tick_ours, tick_theirs, tick_appended, tick_prepared] + ([tick_same] if same is not None else [])
    gc.freeze()  # as closed_loop does: no full collection of the setup's objects inside a tick, of either library
    try:
        for b, first in enumerate(range(1, len(states), block)):
            for j in range(len(turns)):
                for k in range(first, min(first + block, len(states))):
                    turns[(b + j) % len(turns)](k)
    finally:
        gc.unfreeze()
    knots = {ours.knot, theirs.knot, appended.knot, prepared.knot} | ({same.knot} if same is not None else set())
    if len(knots) != 1:
        raise RuntimeError(f"the controllers ended at different knots: {sorted(knots)}")
    a, b = plans["lietraj"], plans["crocoddyl"]
    costs = np.array([relative(a[k][0], b[k][0]) for k in a])
    controls = np.array([np.abs(a[k][1] - b[k][1]).max() for k in a])
    effort = float(np.max(ours.problem.running[0].dynamics.model.effort_limit))
    ratios = np.array([a[k][0] / b[k][0] for k in a if b[k][0] > 0.0])
    agreement = (f"lietraj's and crocoddyl's plans at each tick: relative cost difference median "
                 f"{np.median(costs):.1e}, largest {costs.max():.1e} (lietraj's cost / crocoddyl's: median "
                 f"{np.median(ratios):.3g}); their first controls differ by at most {controls.max():.1e} N m (median "
                 f"{np.median(controls):.1e}; largest effort limit {effort:g} N m)")
    return times, agreement


def crocoddyl_closed_loop(case: Case, threads: int, ticks: int | None) -> list[str]:
    """Part 4 of the module docstring: the lines of its report."""
    from lietraj.sim import MujocoPlant

    scenario = shortened(case.build(), ticks)
    mpc = croc_mpc.CrocoddylMPC(scenario.controller, threads)
    plant = MujocoPlant(scenario.robot, **scenario.plant_options)
    plant.reset(scenario.x0)
    log = closed_loop(mpc, plant, scenario.duration, inner_period=scenario.inner_period, pushes=scenario.pushes,
                      stop=scenario.fell)
    s = log.statistics()
    tracking = scenario.tracking(log) if scenario.tracking is not None and log.ticks else {}
    lines = [f"simulated {log.simulated_time:.2f} s in {log.wall_time:.2f} s (real-time factor "
             f"{s['real_time_factor']:.2f}), {s['ticks']} ticks, median tick {s['tick_median_ms']:.2f} ms, failed "
             f"ticks {s['failed_ticks']}",
             ", ".join(f"{name} {value:.4g}" for name, value in tracking.items())]
    if log.error:
        lines.append(f"the simulation stopped: {log.error}")
    lines.append(f"fell: {log.stopped}" if log.stopped else "fell: no")
    return lines


def met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def run_case(name: str, ticks: int | None, threads: int, block: int, quietness: Quietness) -> str:
    case = CASES[name]
    scenario = shortened(lietraj_scenario(case, threads), ticks)
    options = scenario.controller.options
    dt = float(scenario.controller.problem.running[0].dynamics.dt)
    print(f"{name}: {scenario.description}")
    print(f"  horizon {options.horizon} knots of {1e3 * dt:g} ms, {options.iterations} {options.solver.upper()} "
          f"iteration(s) per tick, {threads} thread(s)")
    check_problem(case, scenario.x0)

    report = run_scenario(scenario)
    states = report.log.states
    tracking = ", ".join(f"{k} {v:.4g}" for k, v in report.tracking.items())
    print(f"  recorded run (lietraj in MuJoCo): {len(states)} ticks, {tracking}, fell: {report.fell or 'no'}"
          + (f", stopped: {report.log.error}" if report.log.error else ""))

    times, agreement = replay(case, states, threads, block)
    print(f"  replay of the {len(states) - 1} recorded states after the start solve, in turns of {block} tick(s); "
          f"{agreement}:")
    print(f"    {'':52s} {'median ms':>9s} {'p99 ms':>8s}")
    for label in ("lietraj", SAME_WORK, PREPARED, PREPARATION, "crocoddyl", "crocoddyl, appended models' references"):
        if not times[label]:
            continue
        median, p99 = stats(times[label])
        extra = ""
        if label == "crocoddyl":
            update = stats(times["crocoddyl update"])[0]
            extra = f"   (problem update {update:.2f} ms, solve and read-out {median - update:.2f} ms: medians)"
        print(f"    {label:52s} {median:9.2f} {p99:8.2f}{extra}")
    ours, theirs = stats(times["lietraj"])[0], stats(times["crocoddyl"])[0]
    cheapest = stats(times["crocoddyl, appended models' references"])[0]
    ratio = ours / theirs
    verdict = quietness.verdict()
    print(f"  ratio lietraj / crocoddyl (medians) {ratio:.2f}, against the appended-references update "
          f"{ours / cheapest:.2f}: goal <= {RATIO_GOAL} {met(ratio <= RATIO_GOAL)} [{verdict}]")
    if times[SAME_WORK]:
        same = stats(times[SAME_WORK])[0]
        print(f"  the same work per tick as Crocoddyl's (one linearization and sweep, relinearize=False): {same:.2f} ms, "
              f"ratio {same / theirs:.2f}: goal <= {RATIO_GOAL} {met(same / theirs <= RATIO_GOAL)} [{verdict}]")
    print(f"  lietraj's median tick {ours:.2f} ms: goal <= {case.goal_ms:g} ms for {case.robot} "
          f"{met(ours <= case.goal_ms)}")
    delay, preparation = stats(times[PREPARED])[0], stats(times[PREPARATION])[0]
    print(f"  a real-time iteration: {delay:.2f} ms from the measured state to the control ({met(delay <= case.goal_ms)} "
          f"<= {case.goal_ms:g} ms), after a preparation of {preparation:.2f} ms; the work per tick {delay + preparation:.2f}"
          f" ms, ratio {(delay + preparation) / theirs:.2f} [{verdict}]")
    for line in crocoddyl_closed_loop(case, threads, ticks):
        print(f"  crocoddyl's MPC in closed loop on MuJoCo: {line}")
    line = (f"{name:8s} lietraj {ours:6.2f} ms ({met(ours <= case.goal_ms)} <= {case.goal_ms:g}), crocoddyl "
            f"{theirs:6.2f} ms, ratio {ratio:.2f} ({met(ratio <= RATIO_GOAL)} <= {RATIO_GOAL})")
    if times[SAME_WORK]:
        same = stats(times[SAME_WORK])[0]
        line += f"; Crocoddyl's work per tick {same:.2f} ms, ratio {same / theirs:.2f}"
    line += f"; prepared (RTI) {delay:.2f} ms after {preparation:.2f}"
    return f"{line} [{verdict}]"


def main(args: argparse.Namespace) -> None:
    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        sys.exit(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    ticks = 100 if args.quick and args.ticks is None else args.ticks
    if ticks is not None and ticks < 1:
        sys.exit("--ticks must be at least 1")
    if args.block < 1:
        sys.exit("--block must be at least 1")
    print(describe())
    load = settle(args.settle)
    import pinocchio

    print(f"lietraj {lietraj.__version__}, crocoddyl {crocoddyl.__version__}, pinocchio {pinocchio.__version__}; "
          f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, threads {args.threads}, turns of {args.block} tick(s); "
          f"load average {load:.2f} at the start")
    quietness = Quietness(args.threads)
    start = time.perf_counter()
    summary = []
    for name in names:
        print()
        summary.append(run_case(name, ticks, args.threads, args.block, quietness))
    print()
    print("per-tick medians:")
    for line in summary:
        print(f"  {line}")
    print(f"{time.perf_counter() - start:.0f} s; {describe()}")


if __name__ == "__main__":
    main(ARGS)
