"""Model-predictive control: ``ModelPredictiveController``, a receding-horizon solve per tick.

Each ``tick(x)`` takes the measured state and

1. recedes the window by one knot (``Problem.shift``: the schedule's next model enters, no model is built) and
   shifts the last plan by one knot as the warm start (the last control repeated; the last state kept), with the
   measured ``x`` as its first knot (FDDP closes the gap it leaves);
2. sets the window's per-knot references (``Schedule.apply_references``) and calls ``update(controller)``, the
   user's hook for time-varying references (a moving target, a commanded velocity);
3. runs at most ``iterations`` solver iterations, fewer when the ``deadline`` (seconds of wall time) would pass:
   an iteration is started only when the time left exceeds the longest iteration of this tick so far; the first
   iteration's line search starts at twice the step the last tick's took (successive windows take similar steps,
   and a rejected trial costs a rollout and a cost evaluation);
4. returns a ``Tick`` whose ``Plan`` is the new solution with its Riccati gains, so that a faster inner loop applies
   ``u = ū_k + K_k (x ⊖ x̄_k(τ))`` between ticks (``Tick.control``), ``x̄_k(τ)`` the plan's state interpolated
   along the group between its knots ``k`` and ``k + 1``: by default the gains of one more linearization and sweep
   at the new solution (that sweep over the first ``MPCOptions.gains_knots`` knots when set, the later knots keeping
   the last iteration's gains); with ``MPCOptions.relinearize`` False (or when the deadline leaves no time for them)
   those of the last iteration's sweep, about the guess before its step.

A real-time iteration (Diehl's RTI; acados' preparation and feedback phases) splits a tick in two: ``prepare()``,
called after a tick while the plant runs, does steps 1 and 2 and the solver's linearization at the shifted plan,
whose first knot is then the last plan's prediction of the next state (not yet the measured one: the derivatives
at the guess do not depend on it, and ``update`` runs before the measurement); the next ``tick(x)`` takes the
measured ``x`` as the initial state, whose only effect on the linearized model is the gap ``x ⊖ x̄_0`` into the
first knot, and sweeps, steps and returns: its ``solve_time`` is the delay from measurement to control, the
preparation's seconds are its ``prepare_time``. ``MPCOptions.preparation`` makes ``closed_loop`` call it; a tick
that finds no preparation does it all itself.

A tick whose solve fails (a diverging rollout, a failed factorization, a non-finite plan) keeps the previous plan,
one knot further on: its feedback policy goes on, and the tick's ``status`` says so ("failed: ... (previous plan,
knot j)"); the next tick starts again from that plan. The controller never raises from a solve; a measured state
of the wrong space or not finite raises ValueError (the caller's plant has failed: ``closed_loop`` stops there).

A knot that takes no time (an impact, ``dt = 0``) is never the first of a window: the tick after the knot before
it recedes past it too (the plant makes its own impact; the plan's velocity jump is in the previous solve).

Solvers: "fddp" (default: the shifted plan is an infeasible guess, which FDDP takes as it is), "ddp" (FDDP with
DDP's second-order term), "ilqr" (its first step rolls out the policy about the guess); a problem with constraints
is solved by the augmented-Lagrangian FDDP (``solve_constrained``, DDP's term with "ddp"), warm-started with the
last tick's multipliers moved one knot and its penalty.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from lietraj.dynamics.lie.state import State, Trajectory
from lietraj.optimal_control.problem import Problem
from lietraj.optimal_control.solvers.augmented_lagrangian import (
    ConstrainedResult,
    ConstrainedSolver,
    ConstraintOptions,
    Multipliers,
)
from lietraj.optimal_control.solvers.solvers import Solver, SolverOptions, SolverResult, SolverState

from .schedule import Schedule

SOLVERS = ("fddp", "ddp", "ilqr")


@dataclass
class MPCOptions:
    """``horizon`` (knots per window), the ``solver`` ("fddp", "ddp", "ilqr"), at most ``iterations`` solver
    iterations per tick and a ``deadline`` (seconds of wall time per tick, None: none); the first solve, from the
    cold guess before the loop starts (``ModelPredictiveController.start``), takes up to ``start_iterations``.
    ``solver_options`` and ``constraint_options`` go to the solver (their ``max_iter`` is replaced).
    ``adaptive_step``: a tick's first line search starts at twice the last tick's step instead of at 1 (module
    docstring, step 3): on solo12's trot a tick takes 18 ms instead of 26, for plans whose cost is a third higher
    at the tick (the robot trots the same). ``relinearize``: after the last iteration, linearize at the new plan and
    sweep once more for its gains (module docstring, step 4; skipped when the deadline would pass, as an iteration
    is); False: the gains of the last iteration's sweep, about the guess before its step, as Crocoddyl's solvers
    return them, for a linearization and a sweep less a tick (solo12's trot 6.2-6.8 ms against 7.5-8.4; a pushed
    g1 balancing falls with them, Talos does not). ``gains_knots``: with ``relinearize``, that sweep covers the
    first ``gains_knots`` knots only, from the value function the iteration's sweep left at knot ``gains_knots``,
    whose gains the later knots keep (``SolverState.keep_after``): the gains the plant applies until the next tick
    are the new plan's, for a fraction of a sweep; None: the whole window (Talos's balance sweeps 4 knots of 20: the
    tick 6.3-6.9 -> 4.9-5.9 ms, the CoM tracked and a pushed g1 kept up as with the whole sweep). ``preparation``:
    ``closed_loop`` calls ``prepare`` after each tick (module docstring: a real-time iteration)."""

    horizon: int
    solver: str = "fddp"
    iterations: int = 1
    deadline: float | None = None
    start_iterations: int = 100
    adaptive_step: bool = True
    relinearize: bool = True
    gains_knots: int | None = None
    preparation: bool = False
    solver_options: SolverOptions | None = None
    constraint_options: ConstraintOptions | None = None

    def __post_init__(self):
        def positive_int(v) -> bool:
            return not isinstance(v, bool) and isinstance(v, (int, np.integer)) and v >= 1
        checks = {"horizon": positive_int(self.horizon), "solver": self.solver in SOLVERS,
                  "iterations": positive_int(self.iterations), "start_iterations": positive_int(self.start_iterations),
                  "adaptive_step": isinstance(self.adaptive_step, bool),
                  "relinearize": isinstance(self.relinearize, bool),
                  "gains_knots": self.gains_knots is None or positive_int(self.gains_knots),
                  "preparation": isinstance(self.preparation, bool),
                  "deadline": self.deadline is None or (math.isfinite(self.deadline) and self.deadline > 0),
                  "solver_options": self.solver_options is None or isinstance(self.solver_options, SolverOptions),
                  "constraint_options": self.constraint_options is None or isinstance(self.constraint_options,
                                                                                      ConstraintOptions)}
        bad = [f"{n}={getattr(self, n)!r}" for n, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"MPCOptions: invalid {', '.join(bad)} (horizon, iterations, start_iterations: positive "
                             f"integers; gains_knots: a positive integer or None; solver: one of {', '.join(SOLVERS)}; "
                             "deadline: seconds > 0 or None)")


@dataclass(eq=False)
class Plan:
    """A solution over a window: ``xs`` (T + 1 knots), ``us`` (T, nu), the gains ``K`` (T, nu, ndx), each knot's
    ``dt`` (T,) and control bounds ``u_lb, u_ub`` (T, nu); ``space`` is the state space of ``xs``."""

    xs: Trajectory
    us: np.ndarray
    K: np.ndarray
    dt: np.ndarray
    u_lb: np.ndarray
    u_ub: np.ndarray
    space: object

    def reference(self, knot: int, tau: float = 0.0) -> State:
        """``x̄_k(τ) = x̄_k ⊕ (τ / dt_k)(x̄_{k+1} ⊖ x̄_k)``: the plan's state ``tau`` seconds after its knot ``knot``."""
        x = self.xs[knot]
        if tau <= 0.0 or self.dt[knot] <= 0.0:
            return x
        s = min(tau / self.dt[knot], 1.0)
        return self.space.integrate(x, s * self.space.difference(x, self.xs[knot + 1]))

    def control(self, x: State, knot: int = 0, tau: float = 0.0) -> np.ndarray:
        """``clip(ū_k + K_k (x ⊖ x̄_k(τ)))`` for the state ``x`` measured ``tau`` seconds after knot ``knot``."""
        u = self.us[knot] + self.K[knot] @ self.space.difference(self.reference(knot, tau), x)
        return np.clip(u, self.u_lb[knot], self.u_ub[knot])


@dataclass(eq=False)
class Tick:
    """One tick: the schedule's ``knot`` the window started at, the ``plan`` to follow from its knot ``plan_knot``
    (0, or j > 0 when the tick's solve failed and the previous plan goes on), the solve's ``status`` ("converged",
    "max_iterations": the tick's iterations spent, "deadline", "failed: ... (previous plan, knot j)"), the
    ``iterations`` taken, the wall ``solve_time`` (seconds, the whole tick), whether it ``overran`` the deadline, the
    plan's ``cost`` and the seconds ``prepare_time`` of its window's preparation (0 without one: module docstring).
    ``u`` is the control to apply now; ``control(x, tau)`` the feedback policy ``tau`` seconds later."""

    knot: int
    plan: Plan
    plan_knot: int
    status: str
    iterations: int
    solve_time: float
    overran: bool
    cost: float
    prepare_time: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status.startswith("failed")

    @property
    def u(self) -> np.ndarray:
        return self.plan.us[self.plan_knot]

    @property
    def dt(self) -> float:
        """How long this tick's control lasts: the duration of its first knot."""
        return float(self.plan.dt[self.plan_knot])

    def control(self, x: State, tau: float = 0.0) -> np.ndarray:
        return self.plan.control(x, self.plan_knot, tau)


@dataclass(eq=False)
class _Prepared:
    """A window made ready before its state is measured (``prepare``): the solver's state linearized at the shifted
    plan (None for a constrained problem, whose solve starts at the tick) and the seconds it took."""

    state: SolverState | None
    seconds: float


@dataclass(eq=False)
class _Warm:
    """What the next tick starts from: the guess and, for constraints, the last result (multipliers, penalty)."""

    xs: Trajectory
    us: np.ndarray
    constrained: ConstrainedResult | None = None


class ModelPredictiveController:
    """Receding-horizon control along a ``Schedule`` (module docstring). ``x0`` is the state the first window starts
    from; ``update(controller)``, if given, is called every tick after the window moved and before the solve (read
    ``controller.knot``, ``controller.time``, ``controller.problem``); ``us0`` (T, nu) and ``xs0`` the cold guess
    (default: zero controls, or the quasi-static ones a problem builder gives; ``x0`` at every knot). Call
    ``start()`` once (it solves the first window to convergence, up to ``start_iterations``), then ``tick(x)`` at
    every knot."""

    def __init__(self, schedule: Schedule, x0: State, options: MPCOptions, update: Callable | None = None,
                 us0=None, xs0: Trajectory | None = None):
        if not isinstance(schedule, Schedule):
            raise ValueError(f"ModelPredictiveController: expected a Schedule, got {type(schedule).__name__}")
        if not isinstance(options, MPCOptions):
            raise ValueError(f"ModelPredictiveController: options must be MPCOptions, got {type(options).__name__}")
        if update is not None and not callable(update):
            raise ValueError("ModelPredictiveController: update must be callable")
        self.schedule, self.options, self.update = schedule, options, update
        self._first_step = 1.0  # the step of the last tick's first line search (module docstring, step 3)
        self._default_options = SolverOptions()
        T = options.horizon
        self.knot = 0  # the schedule's knot at which the current window starts
        self.problem = Problem(x0, [schedule.model(k) for k in range(T)], schedule.terminal,
                               terminal_constraints=schedule.terminal_constraints)
        self.constrained = self.problem.has_constraints
        xs, us = self.problem.constant_trajectory() if xs0 is None else self.problem.check_trajectory(xs0).copy(), \
            np.zeros((T, self.problem.nu)) if us0 is None else self.problem.check_controls(us0).copy()
        self._warm = _Warm(xs, us)
        self._solver = None if self.constrained else self._make_solver(options.iterations)
        self.last: Tick | None = None
        self._prepared: _Prepared | None = None
        self.ticks = 0
        self._solved_knot = 0  # the knot of the window the warm start's multipliers belong to

    # ---- the solver ---------------------------------------------------------------------------------------------

    def _solver_options(self, iterations: int, first: bool = False) -> SolverOptions:
        """The solver's options for a tick: ``iterations`` at most; for its ``first`` iteration the line search
        started at twice the last tick's first step (``_first_step``). A copy of the user's options with those
        fields set: they passed their checks, and the values set are valid by construction (``replace`` would check
        every field again, twice a tick)."""
        base = self.options.solver_options or self._default_options
        options = copy.copy(base)
        options.max_iter = iterations
        if first and self.options.adaptive_step:
            start = min(1.0, 2.0 * self._first_step)
            options.alphas = tuple(a for a in base.alphas if a <= start + 1e-12) or base.alphas[-1:]
        return options

    def _make_solver(self, iterations: int) -> Solver:
        opts, second_order = self._solver_options(iterations), self.options.solver == "ddp"
        if self.constrained:
            return ConstrainedSolver(self.problem, opts, self.options.constraint_options, second_order=second_order)
        if self.options.solver == "ilqr":
            return Solver(self.problem, opts, fddp=False)
        return Solver(self.problem, opts, second_order=second_order)

    @property
    def time(self) -> float:
        """The schedule's time at the current window's first knot (the sum of the knots' ``dt`` before it)."""
        return float(self.schedule.times([self.knot])[0])

    # ---- ticks ------------------------------------------------------------------------------------------------

    def start(self, x: State | None = None) -> Tick:
        """The first window solved from the cold guess (at ``x``, default ``x0``) with up to ``start_iterations``:
        the plan the loop starts from (a tick at knot 0 that does not recede)."""
        return self._solve(self.problem.x0 if x is None else x, self.options.start_iterations, deadline=None)

    def tick(self, x: State) -> Tick:
        """Recede by one knot (past a knot without duration too) and solve from the measured ``x`` (module
        docstring); from the window ``prepare`` made ready, if it was called since the last tick."""
        if self.last is None:
            return self.start(x)
        prepared, self._prepared = self._prepared, None
        if prepared is None:
            self._advance()
        return self._solve(x, self.options.iterations, self.options.deadline, prepared)

    def prepare(self) -> None:
        """The preparation phase of a real-time iteration (module docstring): recede to the next tick's window, set
        its references (``update`` included) and linearize at the shifted plan, before the next state is measured;
        the next ``tick`` starts from there. Called again before that tick, it does nothing. A linearization that
        fails is that tick's status (the previous plan goes on), never raised here."""
        if self.last is None:
            raise ValueError("ModelPredictiveController.prepare: solve the first window first (start or tick)")
        if self._prepared is not None:
            return
        clock = time.perf_counter()
        self._advance()
        self._set_window()
        state = None
        if not self.constrained:
            solver = self._solver
            solver.options = self._solver_options(self.options.iterations, first=True)
            state = solver.start(self._warm.xs, self._warm.us)
            if not state.status:
                solver.prepare(state)
        self._prepared = _Prepared(state, time.perf_counter() - clock)

    def _advance(self) -> None:
        """Recede by one knot, and past the knots without duration that follow."""
        self._recede()
        while self.problem.running[0].dynamics.dt <= 0.0:
            self._recede()

    def _set_window(self) -> None:
        """The window's per-knot references, then the user's ``update``."""
        segments = self.schedule.window(self.knot, self.options.horizon)
        self.schedule.apply_references(segments, self.knot)
        if self.update is not None:
            self.update(self)

    def _recede(self) -> None:
        T, warm = self.options.horizon, self._warm
        self.knot += 1
        self.problem.shift(self.schedule.model(self.knot + T - 1))
        warm.xs[:T] = warm.xs[1:]  # numpy copies overlapping ranges as if through a buffer
        warm.us[:-1] = warm.us[1:]

    def _solve(self, x: State, iterations: int, deadline: float | None, prepared: _Prepared | None = None) -> Tick:
        clock = time.perf_counter()
        warm, state = self._warm, None if prepared is None else prepared.state
        if state is None:
            self.problem.set_initial_state(x)  # checked: a state of another space, or not finite, raises here
            if prepared is None:
                self._set_window()
            warm.xs[0] = x
        else:  # linearized at the last plan's prediction of x: only the gap into the first knot is new
            self._solver.set_initial_state(state, x)  # checked as above
        solver = self._make_solver(iterations) if self.constrained else self._solver
        if self.constrained and warm.constrained is not None:
            solver.warm_start(_shifted(warm.constrained, self.knot - self._solved_knot))
        if state is None:
            solver.options = self._solver_options(iterations, first=self.last is not None)
        result, overran = _run(solver, warm.xs, warm.us, clock, deadline, self._solver_options(iterations),
                                self.options.relinearize, state, self.options.gains_knots)
        if result.history:
            self._first_step = result.history[0].step or min(solver.options.alphas)
        plan_ok = not result.status.startswith("failed") and np.isfinite(result.us).all() and result.xs.is_finite() \
            and np.isfinite(result.K).all()
        elapsed = time.perf_counter() - clock
        if plan_ok or self.last is None:
            plan = Plan(result.xs, result.us, result.K, self.problem.time_steps(), self.problem.u_lb.copy(),
                        self.problem.u_ub.copy(), self.problem.state_space)
            tick = Tick(self.knot, plan, 0, result.status, result.iterations, elapsed, overran, float(result.cost),
                        0.0 if prepared is None else prepared.seconds)
            if plan_ok:  # copies: the next tick shifts its warm start in place, and this plan is its fallback
                self._warm = _Warm(result.xs.copy(), result.us.copy(),
                                   result if isinstance(result, ConstrainedResult) else None)
                self._solved_knot = self.knot
        else:
            previous = self.last
            j = min(previous.plan_knot + self.knot - previous.knot, len(previous.plan.us) - 1)
            tick = Tick(self.knot, previous.plan, j, f"{result.status} (previous plan, knot {j})", result.iterations,
                        elapsed, overran, previous.cost, 0.0 if prepared is None else prepared.seconds)
        self.last = tick
        self.ticks += 1
        return tick


def _run(solver: Solver, xs: Trajectory, us: np.ndarray, clock: float, deadline: float | None,
         then: SolverOptions, relinearize: bool = True, state: SolverState | None = None,
         gains_knots: int | None = None) -> tuple[SolverResult, bool]:
    """Iterate from the guess (or from the solver's ``state`` a preparation linearized) until the solver's own
    status, or until the next iteration would pass the deadline (measured from ``clock``): the result (status
    "deadline" then) and whether the tick overran. The solver's options serve the first iteration, ``then`` the
    others. The solver counts its iterations once it has linearized and swept at its new guess, whose gains the
    result then has (that sweep over the first ``gains_knots`` knots only, when given); without ``relinearize`` the
    count is checked here, before that (status "max_iterations" too)."""
    state = solver.start(xs, us) if state is None else state
    longest = 0.0
    while not state.status:
        now = time.perf_counter()
        last = state.iteration >= then.max_iter
        if last and not relinearize:
            state.status = "max_iterations"
            break
        if deadline is not None and state.iteration > 0 and now - clock + longest > deadline:
            state.status = "deadline"
            break
        if last:
            state.keep_after = gains_knots
        solver.iterate(state)
        solver.options = then
        longest = max(longest, time.perf_counter() - now)
    state.keep_after = None
    result = solver.result(state)
    return result, deadline is not None and time.perf_counter() - clock > deadline


def _shifted(previous: ConstrainedResult, knots: int) -> ConstrainedResult:
    """``previous`` with its multipliers moved ``knots`` knots earlier (those that leave the window dropped)."""
    moved = {}
    for name, m in previous.multipliers.items():
        keep = m.knots >= knots
        moved[name] = Multipliers(m.knots[keep] - knots, m.values[keep])
    return replace(previous, multipliers=moved)
