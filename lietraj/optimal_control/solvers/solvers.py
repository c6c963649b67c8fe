"""iLQR, DDP and FDDP on the state group, with optional box bounds on the controls: one loop of named steps.

``Solver.solve`` reads as Crocoddyl's SolverDDP / SolverFDDP / SolverBoxFDDP (Mastalli et al. 2020). Every step is a
method of ``Solver``; what an iteration hands to the next (the guess, its cost and gaps, the regularization, the
local model, the last direction, feasibility) is one ``SolverState``::

    state = solver.start(xs0, us0)       # the guess: controls clipped to the bounds, its rollout, its cost
    while not state.status:
        solver.iterate(state)            # steps 1-6 below; a step that cannot go on raises SolveFailed
    return solver.result(state)

1. ``linearize``: the local model at a new guess ``(x̄, ū)``: ``Problem.derivatives`` (one batched call per group)
   and, for an infeasible guess, the gaps ``f̄``. After a failed line search the guess, and so its model, stay;
2. ``compute_direction``: the Riccati backward pass (``riccati.backward_pass``) with regularization ``ρ``; a
   failed sweep (``Q_uu`` not positive definite) calls ``increase_regularization`` and is repeated. DDP
   (``second_order_pass``) adds the second-order dynamics term ``H = ∇²(λᵀ f)``; its covectors ``λ_{k+1}`` come
   from a Gauss–Newton sweep at the same guess, so that all knots are contracted in one batched call. They differ
   from the exact DDP costates by ``O(|Q_u|)``, which keeps the Hessian error ``O(|ū - u*|)`` and hence DDP's local
   quadratic convergence. Far from the optimum ``H`` alone can make ``Q_uu`` indefinite: the ``ρ`` raised for that
   lasts only this iteration (``H`` shrinks with ``λ`` near the optimum, and a lasting ``ρ`` would slow every later
   Newton step), and the line search is run on both that sweep and the Gauss–Newton one, the lower cost winning
   (no ``ρ`` up to ``reg_max`` helps: the Gauss–Newton sweep alone);
3. ``stopping_criteria``, ``termination``: stop when the guess is feasible and the stationarity measure
   ``Σ |Q_u|²`` (free controls) is below ``tol``, or after ``max_iter`` steps;
4. ``expected_improvement``, ``try_step``: the nonlinear forward pass (``forward_pass``) for ``α = 1, ½, ¼, ...``::

       x_0 = x0 ⊕ (α - 1) f̄_0,  u_k = clip(ū_k + α k_k + K_k (x_k ⊖ x̄_k)),  x_{k+1} = f_k(x_k, u_k) ⊕ (α - 1) f̄_{k+1}

   (no gap terms for a feasible guess; iLQR and DDP never keep gaps: every trial rolls out from ``x0``), and
   (``line_search``, ``acceptable``) the first step whose actual decrease is at least ``accept_ratio`` times the
   expected one is taken (FDDP also takes a step that raises the cost by less than ``accept_ascent_ratio`` times a
   negative expected decrease: closing gaps may cost). A full step closes all gaps. iLQR and DDP started from a
   state guess ``xs0`` take their first trial that rolls out, whatever its cost, as Crocoddyl's SolverDDP from an
   infeasible guess: the closed-loop rollout of the policy computed about ``xs0`` is the feasible guess they go on
   from (an open-loop rollout of ``us0`` alone may diverge, e.g. a robot that falls over a long horizon);
5. ``update_regularization``: ``ρ`` is divided by ``reg_factor`` after a step longer than ``step_dec`` and
   multiplied after a step of at most ``step_inc`` or a failed line search;
6. ``report``: the iteration's ``IterationInfo`` goes to the history and the callbacks; a failed line search at
   ``reg_max`` ends the solve.

Iterations count the steps taken; the gains ``K, k`` of the result come from the backward pass at the returned
trajectory, so ``u = us[k] + K[k] (x ⊖ xs[k])`` is the local feedback policy. A diverging rollout or a failing
factorization never raises: the result's ``status`` says what happened. Bad inputs raise ValueError.

Where extensions hook in. A receding-horizon controller (MPC) warm-starts ``solve`` from its shifted last solution
(FDDP takes an infeasible guess), bounds the iterations with ``max_iter``, or drives ``start`` / ``iterate`` /
``result`` itself, and a deadline is one more status in ``termination``. A constrained solver (augmented Lagrangian,
ProxDDP-like) extends ``SolverState`` with its multipliers and runs its outer loop around ``iterate``; its
constraint terms enter the local model in ``backward_pass`` (``riccati.LocalModel``), its merit function the
line search in ``line_search`` and ``acceptable``. ``forward_pass`` is the one place that rolls out a policy.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from lietraj.dynamics.lie.state import State, Trajectory
from lietraj.optimal_control.dynamics.euler_second_order import StepHessian
from lietraj.optimal_control.problem import Problem, ProblemDerivatives
from lietraj.optimal_control.solvers.forward_pass import rollout_policy
from lietraj.optimal_control.solvers.riccati import BackwardPass, backward_pass

# What a diverging model raises from inside: RobotDynamics reports a non-finite step with ValueError, numpy's
# linear algebra with LinAlgError (a ValueError), floating-point traps with ArithmeticError.
_NUMERICAL_ERRORS = (ValueError, ArithmeticError)


@dataclass
class SolverOptions:
    """Iteration limits, tolerances, regularization and line-search settings (Crocoddyl's defaults)."""

    max_iter: int = 100
    tol: float = 1e-9  # on the stationarity measure Σ|Q_u|² (Crocoddyl's th_stop)
    gap_tol: float = 1e-12  # a guess whose gaps are all below this (∞-norm) counts as feasible
    reg_init: float = 1e-9
    reg_min: float = 1e-9
    reg_max: float = 1e9
    reg_factor: float = 10.0
    regularize_vxx: bool = True
    alphas: tuple[float, ...] = tuple(0.5 ** n for n in range(10))
    accept_ratio: float = 0.1  # th_acceptstep
    accept_ascent_ratio: float = 2.0  # th_acceptnegstep (FDDP)
    min_expected: float = 1e-12  # th_grad: a step with a smaller expected first-order decrease is always taken
    step_dec: float = 0.5  # th_stepdec
    step_inc: float = 0.01  # th_stepinc
    box_tol: float = 1e-12
    box_max_iter: int = 100
    threads: int = 1  # 2 (or more; two are used): each compiled call over the dynamics' knots (derivatives, DDP's
    # term) computes half of them in a second thread (_jit.split_kernel)

    def __post_init__(self):
        checks = {
            "max_iter": isinstance(self.max_iter, (int, np.integer)) and self.max_iter >= 0,
            "tol": self.tol >= 0, "gap_tol": self.gap_tol >= 0,
            "reg_min": 0 < self.reg_min <= self.reg_max, "reg_init": 0 <= self.reg_init <= self.reg_max,
            "reg_factor": self.reg_factor > 1,
            "alphas": len(self.alphas) > 0 and all(0 < a <= 1 for a in self.alphas)
            and all(a > b for a, b in zip(self.alphas, self.alphas[1:])),
            "accept_ratio": 0 <= self.accept_ratio < 1, "accept_ascent_ratio": self.accept_ascent_ratio >= 1,
            "step_dec": 0 <= self.step_dec <= 1, "step_inc": 0 <= self.step_inc <= 1,
            "box_tol": self.box_tol > 0, "box_max_iter": self.box_max_iter >= 1,
            "threads": isinstance(self.threads, (int, np.integer)) and self.threads >= 1,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"SolverOptions: invalid {', '.join(f'{n}={getattr(self, n)!r}' for n in bad)}")


@dataclass(eq=False)
class IterationInfo:
    """One iteration: ``stop``, ``expected`` (the full-step expected decrease) and ``gap_norm`` (∞-norm of the
    gaps) at the guess it starts from; ``cost`` after it; the accepted ``step`` (0 if none), the ``regularization`` used,
    the actual and expected decrease of the taken step, the wall ``time`` in seconds, and the guess ``xs, us``
    after the step (references, not copies: the solver never writes into an accepted guess). A constrained solver
    adds the relative ``stationarity`` of the guess, the largest constraint ``violation``, the ``worst`` constraint
    and the ``complementarity`` at its last outer update, and its ``penalty``."""

    iteration: int
    cost: float
    stop: float
    expected: float
    step: float
    regularization: float
    gap_norm: float
    improvement: float
    expected_step: float
    time: float
    solver: str
    xs: Trajectory
    us: np.ndarray
    stationarity: float = math.nan
    violation: float = math.nan
    complementarity: float = math.nan
    worst: str = ""
    penalty: float = math.nan


@dataclass(eq=False)
class SolverResult:
    """``xs`` (T+1 knots), ``us`` (T, nu), the feedback gains ``K`` (T, nu, ndx) and ``k`` (T, nu) of the last
    backward pass, the final ``cost``, ``status`` ("converged", "max_iterations", "interrupted" (Ctrl-C) or
    "failed: <why>"), the number of ``iterations`` (steps taken), the per-iteration ``history``, the final ``stop``
    measure and ``gap_norm``, and the ``total_time`` in seconds."""

    xs: Trajectory
    us: np.ndarray
    K: np.ndarray
    k: np.ndarray
    cost: float
    status: str
    iterations: int
    history: list[IterationInfo] = field(default_factory=list)
    stop: float = math.nan
    gap_norm: float = 0.0
    total_time: float = 0.0
    solver: str = ""

    @property
    def converged(self) -> bool:
        return self.status == "converged"

    def __repr__(self) -> str:
        return (f"SolverResult({self.solver}: {self.status}, {self.iterations} iterations, cost={self.cost:.6g}, "
                f"stop={self.stop:.3g}, gap={self.gap_norm:.3g}, {self.total_time:.3f} s)")


class LogTable:
    """A per-iteration table like Crocoddyl's verbose callback, printed to ``stream`` (default stdout); pass an
    instance as ``callback`` or use ``verbose=True``."""

    HEADER = (f"{'iter':>5} {'cost':>14} {'stop':>10} {'expected':>10} {'step':>8} {'reg':>9} {'||gap||':>9} "
              f"{'time[ms]':>9}")

    def __init__(self, stream=None, every: int = 1, header_every: int = 25):
        self.stream, self.every, self.header_every, self._rows = stream, every, header_every, 0

    def __call__(self, info: IterationInfo) -> None:
        if info.iteration % self.every:
            return
        stream = self.stream or sys.stdout
        if self._rows % self.header_every == 0:
            print(self.HEADER, file=stream)
        self._rows += 1
        print(self.row(info), file=stream, flush=True)

    def row(self, info: IterationInfo) -> str:
        """The line of one iteration, under ``HEADER``."""
        return (f"{info.iteration:>5} {info.cost:>14.8e} {info.stop:>10.3e} {info.expected:>10.3e} {info.step:>8.4f} "
                f"{info.regularization:>9.2e} {info.gap_norm:>9.2e} {1e3 * info.time:>9.2f}")


def _gap_norm(gaps: np.ndarray | None) -> float:
    return 0.0 if gaps is None else float(np.abs(gaps).max(initial=0.0))


def _forward_pass(problem: Problem, xs: Trajectory, us: np.ndarray, bp: BackwardPass, alpha: float,
                  gaps: np.ndarray | None, bounds: tuple | None = None, threads: int = 1):
    """The nonlinear rollout of the policy with step ``alpha`` (module docstring, step 4): ``(X, U, DX, cost)``,
    or None if it diverged. ``forward_pass.rollout_policy`` rolls each run of knots sharing one dynamics object out
    in one compiled call where the dynamics has a compiled step, else one knot at a time. The controls are clipped
    to ``bounds`` ((T, nu) arrays), by default the problem's own; the cost's knots are shared by ``threads``
    threads."""
    if bounds is None:
        bounds = (problem.u_lb, problem.u_ub) if problem.has_control_limits else (None, None)
    try:
        trial = rollout_policy(problem.dynamics_sequence, problem.x0, xs, us, bp.k, bp.K, alpha, gaps, *bounds,
                               runs=problem.dynamics_runs)
        if not trial.ok:
            return None
        cost = problem.cost(trial.X, trial.U, threads)
    except _NUMERICAL_ERRORS:
        return None
    return (trial.X, trial.U, trial.DX, cost) if math.isfinite(cost) else None


class SolveFailed(Exception):
    """A step cannot go on (a model that cannot be evaluated, a regularization at ``reg_max``): ``Solver.iterate``
    ends the solve with the status ``failed: <message>``; it never reaches the caller of ``solve``."""


@dataclass(eq=False)
class SolverState:
    """What one iteration hands to the next: the guess ``xs, us``, its ``cost`` (``cost_pending``: not known yet,
    to be read from the derivatives the next linearization computes at the guess), ``feasible`` (no gaps left) and
    ``gaps`` (None when feasible), the regularization ``reg`` (``second_order_reg``: the one DDP's last sweep
    took), the local model at the guess (``derivatives``, DDP's ``hessian``; ``linearized``: it is the current
    guess's), the last backward pass ``direction``, the last ``stop`` measure, the ``iteration`` count (steps
    taken), the ``history``, the ``status`` ("" while the solve goes on) and the ``perf_counter`` time the solve
    ``started``. ``keep_after``: None, or a knot from which on the next sweep takes the rows of ``direction``
    instead of sweeping (``Solver.compute_direction``)."""

    xs: Trajectory
    us: np.ndarray
    cost: float
    feasible: bool
    reg: float
    derivatives: ProblemDerivatives
    started: float
    gaps: np.ndarray | None = None
    hessian: StepHessian | None = None
    linearized: bool = False
    direction: BackwardPass | None = None
    stop: float = math.nan
    iteration: int = 0
    history: list[IterationInfo] = field(default_factory=list)
    status: str = ""
    cost_pending: bool = False
    second_order_reg: float = 0.0
    keep_after: int | None = None


@dataclass(eq=False)
class Step:
    """The outcome of a line search along ``direction``: the accepted step length ``alpha`` (0: none), the trial
    guess ``xs, us`` and its ``cost`` (None, NaN when none), its actual and expected decrease."""

    direction: BackwardPass
    alpha: float = 0.0
    xs: Trajectory | None = None
    us: np.ndarray | None = None
    cost: float = math.nan
    improvement: float = 0.0
    expected: float = 0.0

    @property
    def accepted(self) -> bool:
        return self.xs is not None


class Solver:
    """FDDP on ``problem`` (``fddp=False``: iLQR; ``second_order=True``: with DDP's term, DDP without ``fddp``): the
    steps of the module docstring as methods, the state they share in a ``SolverState``. ``solve`` runs them all;
    ``start``, ``iterate`` and ``result`` let a caller run the iterations itself. ``name`` labels the logs and the
    results (default "iLQR", "DDP", "FDDP" or "FDDP-SO"). Bad arguments raise ValueError."""

    def __init__(self, problem: Problem, options: SolverOptions | None = None, callback=None, verbose: bool = False,
                 *, second_order: bool = False, fddp: bool = True, name: str | None = None):
        if name is None:
            name = ("FDDP-SO" if second_order else "FDDP") if fddp else ("DDP" if second_order else "iLQR")
        if not isinstance(problem, Problem):
            raise ValueError(f"{name}: expected a Problem, got {type(problem).__name__}")
        options = SolverOptions() if options is None else options
        if not isinstance(options, SolverOptions):
            raise ValueError(f"{name}: options must be SolverOptions, got {type(options).__name__}")
        self.callbacks: list[Callable[[IterationInfo], None]] = []
        if callback is not None:
            if not callable(callback):
                raise ValueError(f"{name}: callback must be callable")
            self.callbacks.append(callback)
        if verbose:
            self.callbacks.append(LogTable())
        self.problem, self.options, self.verbose = problem, options, verbose
        self.name, self.second_order, self.fddp = name, second_order, fddp

    def solve(self, xs0: Trajectory | None = None, us0=None) -> SolverResult:
        """Iterate from the guess until a status ends the solve (module docstring): from ``xs0, us0``, or from the
        rollout of ``us0`` (default zeros) without ``xs0``. Ctrl-C (KeyboardInterrupt) during the iterations ends
        the solve with the status "interrupted" at the last guess accepted; its gains ``K, k`` are those of the last
        backward pass done, which may be at the guess before the last step."""
        state = self.start(xs0, us0)
        try:
            while not state.status:
                self.iterate(state)
        except KeyboardInterrupt:  # a long solve stopped by its user keeps its iterate: a warm start, or to inspect
            state.status = "interrupted"
        return self.result(state)

    # ---- the guess ---------------------------------------------------------------------------------------------

    def start(self, xs0: Trajectory | None = None, us0=None) -> SolverState:
        """The state at the initial guess: checked controls (clipped to the bounds), the rollout of ``us0`` without
        ``xs0`` or a copy of ``xs0`` (infeasible until a step closes its gaps), and its cost: that of a rollout here,
        that of ``xs0`` at the first linearization, which computes it with the derivatives (a warm-started MPC tick
        evaluates its costs once, not twice). Bad inputs raise ValueError; a guess that cannot be evaluated gives a
        state whose status says so."""
        started = time.perf_counter()
        problem = self.problem
        T, nu = problem.T, problem.nu
        us = np.zeros((T, nu)) if us0 is None else problem.check_controls(us0).copy()
        if problem.has_control_limits:
            np.clip(us, problem.u_lb, problem.u_ub, out=us)
        xs = None if xs0 is None else problem.check_trajectory(xs0)
        feasible, cost, status = xs is None, math.nan, ""
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            try:
                xs = problem.rollout(us) if feasible else xs.copy()
                if feasible:
                    cost = problem.cost(xs, us) if xs.is_finite() else math.nan
                    if not math.isfinite(cost):
                        status = _failed("the initial rollout or its cost is not finite")
            except _NUMERICAL_ERRORS as e:
                what = "the initial rollout of the controls fails" if feasible else "the initial guess cannot be evaluated"
                status = _failed(f"{what} ({e})")
        return SolverState(problem.constant_trajectory() if xs is None else xs, us, cost, feasible,
                           max(self.options.reg_init, self.options.reg_min), problem.empty_derivatives(),
                           started, status=status, cost_pending=not feasible)

    def prepare(self, state: SolverState) -> None:
        """Step 1 alone, at the guess of a new ``state``, a failure its status: the first iteration starts from this
        linearization (a real-time iteration prepares it before the initial state is measured, then calls
        ``set_initial_state``: ``mpc``)."""
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            try:
                self.linearize(state)
            except SolveFailed as failure:
                state.status = _failed(str(failure))

    def set_initial_state(self, state: SolverState, x: State) -> None:
        """Make ``x`` the problem's initial state for a ``state`` that may be linearized already: its derivatives at
        the guess do not depend on it, only the gap ``x ⊖ X[0]`` into the first knot, which is computed again (a
        real-time iteration linearizes before the state is measured: ``mpc``). ``x`` is checked (ValueError)."""
        self.problem.set_initial_state(x)
        if not state.linearized:
            return
        gap = self.problem.initial_gap(state.xs)
        if state.gaps is None:
            if _gap_norm(gap) <= self.options.gap_tol:
                return
            state.gaps, state.feasible = np.zeros((self.problem.T + 1, self.problem.ndx)), False
        state.gaps[:1] = gap

    # ---- one iteration -----------------------------------------------------------------------------------------

    def iterate(self, state: SolverState) -> None:
        """One iteration (module docstring, steps 1–6); sets ``state.status`` when the solve ends. Up to the report,
        which calls the user's callback, the costs' parameters change only where the solver changes them
        (``Problem.unchanged_parameters``): the linearization and the trials share one copy of them."""
        clock = time.perf_counter()
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            try:
                with self.problem.unchanged_parameters():
                    directions = self.compute_direction(state)
                    state.stop = self.stopping_criteria(state)
                    state.status = self.termination(state)
                    if state.status or not state.linearized:  # done, or an outer loop changed the problem
                        return
                    terms = [self.expected_improvement(direction) for direction in directions]
                    step = self.try_step(state, directions, terms)
                self.update_regularization(state, step)
                self.report(state, step, directions[0].expected_improvement(1.0, terms=terms[0]), clock)
                if not step.accepted and step.direction.reg >= self.options.reg_max:
                    raise SolveFailed("no step decreases the cost and regularization reached reg_max = "
                                      f"{self.options.reg_max:g}")
            except SolveFailed as failure:
                state.status = _failed(str(failure))

    def linearize(self, state: SolverState) -> None:
        """Step 1: the derivatives and, for an infeasible guess, the gaps at the guess; a guess whose gaps are all
        below ``gap_tol`` counts as feasible from here on."""
        try:
            self.problem.derivatives(state.xs, state.us, out=state.derivatives, threads=self.options.threads)
            state.gaps = None if state.feasible else self.problem.gaps(state.xs, state.us, state.derivatives)
        except _NUMERICAL_ERRORS as e:
            raise SolveFailed(f"the derivatives cannot be evaluated ({e})") from e
        take_cost(state)
        if state.gaps is not None and _gap_norm(state.gaps) <= self.options.gap_tol:
            state.feasible, state.gaps = True, None
        state.hessian, state.linearized = None, True

    def compute_direction(self, state: SolverState) -> list[BackwardPass]:
        """Steps 1–2: the local model at a new guess, then the backward pass, ``ρ`` raised until it succeeds (past
        ``reg_max``: SolveFailed). The directions for the line search: the sweep (DDP's with its second-order term,
        when it succeeds), then the Gauss–Newton sweep when DDP's needed a raised ``ρ``. ``state.direction`` is the
        first.

        With ``state.keep_after = m`` the sweeps cover the knots before ``m`` only, from the value function the last
        direction left at knot ``m``, whose rows from there on they take: the gains of the first knots at a new
        guess for a fraction of a sweep (a receding-horizon controller's, ``MPCOptions.gains_knots``). Those rows
        were swept about the last guess: an approximation the caller chooses, exact where the guess did not move."""
        if not state.linearized:
            self.linearize(state)
        kept = {} if state.keep_after is None or state.direction is None or not state.direction.ok else \
            dict(previous=state.direction, first_unchanged=state.keep_after)
        while True:
            gauss_newton = self.backward_pass(state, state.reg, **kept)
            if gauss_newton.ok and self.second_order:
                full = self.second_order_pass(state, gauss_newton, kept)
                if full is not None:
                    state.direction = full
                    return [full, gauss_newton] if full.reg > state.reg else [full]
            if gauss_newton.ok:
                state.direction = gauss_newton
                return [gauss_newton]
            if state.reg >= self.options.reg_max:
                raise SolveFailed(f"regularization reached reg_max = {self.options.reg_max:g} ({gauss_newton.reason})")
            self.increase_regularization(state)

    def backward_pass(self, state: SolverState, reg: float, hessian: StepHessian | None = None,
                      previous: BackwardPass | None = None, first_unchanged: int | None = None) -> BackwardPass:
        """One Riccati sweep at the guess with regularization ``reg`` (and DDP's ``hessian``), on the bounds left
        to the controls, its box QPs warm-started from the last direction; from the knots of ``previous``, the sweep
        of a model that differs from the guess's before ``first_unchanged`` only, given both (``riccati``'s
        ``backward_pass``)."""
        opts, problem = self.options, self.problem
        bounded = problem.has_control_limits
        return backward_pass(state.derivatives, reg, gaps=state.gaps, hessian=hessian,
                             du_lb=problem.u_lb - state.us if bounded else None,
                             du_ub=problem.u_ub - state.us if bounded else None, regularize_vxx=opts.regularize_vxx,
                             k_guess=None if state.direction is None else state.direction.k, box_tol=opts.box_tol,
                             box_max_iter=opts.box_max_iter, previous=previous, first_unchanged=first_unchanged)

    def second_order_pass(self, state: SolverState, gauss_newton: BackwardPass, kept: dict) -> BackwardPass | None:
        """DDP's sweep: the second-order term (once per guess, contracted with the Gauss–Newton sweep's covectors),
        then sweeps with it, ``ρ`` raised for this iteration only until one succeeds; None if none does up to
        ``reg_max``. The first ``ρ`` is the iteration's, or a hundredth of the one DDP's last sweep took if larger:
        the curvature the term adds changes little from a guess to the next (on the solo12 reorientation 7.6 sweeps
        an iteration -> 3.8, the iterations 45 -> 44). Dynamics without the term raise ValueError (use iLQR).
        ``kept``: the last direction's rows the sweeps take (``compute_direction``'s ``keep_after``; empty: none)."""
        if state.hessian is None:
            try:
                state.hessian = self.problem.dynamics_contraction(state.xs, state.us, gauss_newton.lam[1:],
                                                                   threads=self.options.threads)
            except NotImplementedError as e:
                raise ValueError(f"{self.name}: the dynamics cannot compute the second-order term ({e}); use "
                                 "solve_ilqr (Gauss-Newton) instead") from e
            except _NUMERICAL_ERRORS as e:
                raise SolveFailed(f"the second-order term cannot be evaluated ({e})") from e
        opts = self.options
        reg = max(state.reg, min(state.second_order_reg / opts.reg_factor ** 2, opts.reg_max))
        while True:
            full = self.backward_pass(state, reg, state.hessian, **kept)
            if full.ok:
                state.second_order_reg = reg
                return full
            if reg >= opts.reg_max:
                return None
            reg = min(reg * opts.reg_factor, opts.reg_max)

    def stopping_criteria(self, state: SolverState) -> float:
        """Step 3: the stationarity measure ``Σ |Q_u|²`` of the direction (Crocoddyl's ``stoppingCriteria``)."""
        return state.direction.stationarity()

    def termination(self, state: SolverState) -> str:
        """Step 3: the status that ends the solve before a step ("converged": feasible and stationary to ``tol``;
        "max_iterations"), or "" to take one. A deadline (MPC) or an outer loop's own test extends this."""
        if state.feasible and state.stop <= self.options.tol:
            return "converged"
        if state.iteration >= self.options.max_iter:
            return "max_iterations"
        return ""

    def expected_improvement(self, direction: BackwardPass) -> tuple[float, float]:
        """``(g1, g2)`` of the local model's change ``ΔJ(α) = α g1 + ½ α² g2 + ...`` along ``direction``."""
        return direction.improvement_terms()

    def try_step(self, state: SolverState, directions: list[BackwardPass],
                 terms: list[tuple[float, float]]) -> Step:
        """Step 4: the line search along each direction; of the accepted steps the one of lowest cost (the first
        direction's when none is), taken: the guess moves, and its local model is to be computed again. The
        direction searched becomes ``state.direction``."""
        step = self.line_search(state, directions[0], terms[0])
        for direction, direction_terms in zip(directions[1:], terms[1:]):
            other = self.line_search(state, direction, direction_terms)
            if other.accepted and (not step.accepted or other.cost < step.cost):
                step = other
        state.direction = step.direction
        if step.accepted:
            state.xs, state.us, state.cost = step.xs, step.us, step.cost
            state.feasible = state.feasible or step.alpha == 1.0 or not self.fddp
            state.linearized = False
        return step

    def line_search(self, state: SolverState, direction: BackwardPass, terms: tuple[float, float],
                    alphas: tuple[float, ...] | None = None) -> Step:
        """Backtracking on the step length (``alphas``, by default the options'): the first trial whose decrease is
        ``acceptable``."""
        for alpha in self.options.alphas if alphas is None else alphas:
            step = self.judge(state, direction, terms, alpha, self.forward_pass(state, direction, alpha))
            if step.accepted:
                return step
        return Step(direction)

    def judge(self, state: SolverState, direction: BackwardPass, terms: tuple[float, float], alpha: float,
              trial) -> Step:
        """The step to the ``trial`` of ``forward_pass`` at ``alpha``, accepted if its decrease is ``acceptable``
        (an unaccepted ``Step`` when it is not, or when the trial is None: it diverged)."""
        if trial is None:
            return Step(direction)
        xs, us, DX, cost = trial
        improvement = state.cost - cost
        expected = self.expected_decrease(direction, alpha, DX, terms)
        if self.acceptable(state, terms[0], improvement, expected):
            return Step(direction, alpha, xs, us, cost, improvement, expected)
        return Step(direction)

    def expected_decrease(self, direction: BackwardPass, alpha: float, DX: np.ndarray,
                          terms: tuple[float, float]) -> float:
        """The decrease of the cost the local model predicts for the trial at ``alpha`` whose deviations are ``DX``
        (``BackwardPass.expected_improvement``)."""
        return direction.expected_improvement(alpha, DX, terms)

    def forward_pass(self, state: SolverState, direction: BackwardPass, alpha: float):
        """The nonlinear rollout of the direction's policy with step ``alpha`` (``_forward_pass``); FDDP keeps the
        part ``1 - alpha`` of the gaps, iLQR and DDP close them all."""
        return _forward_pass(self.problem, state.xs, state.us, direction, alpha, state.gaps if self.fddp else None,
                             threads=self.options.threads)

    def acceptable(self, state: SolverState, g1: float, improvement: float, expected: float) -> bool:
        """The acceptance rule for a trial from ``state`` that rolled out: for iLQR and DDP from an infeasible guess,
        any (module docstring, step 4); else any step when the first-order decrease ``g1`` is below
        ``min_expected``; a decrease of at least ``accept_ratio`` of the expected one; for FDDP also a rise under
        ``accept_ascent_ratio`` times a negative expected decrease."""
        opts = self.options
        if not (self.fddp or state.feasible) or abs(g1) < opts.min_expected:
            return True
        if expected >= 0:
            return improvement > opts.accept_ratio * expected
        return self.fddp and improvement > opts.accept_ascent_ratio * expected

    def update_regularization(self, state: SolverState, step: Step) -> None:
        """Step 5: ``ρ`` down after a long step, up after a short one or none."""
        if step.accepted and step.alpha > self.options.step_dec:
            self.decrease_regularization(state)
        if not step.accepted or step.alpha <= self.options.step_inc:
            self.increase_regularization(state)

    def increase_regularization(self, state: SolverState) -> None:
        state.reg = min(state.reg * self.options.reg_factor, self.options.reg_max)

    def decrease_regularization(self, state: SolverState) -> None:
        state.reg = max(state.reg / self.options.reg_factor, self.options.reg_min)

    def report(self, state: SolverState, step: Step, expected: float, clock: float) -> None:
        """Step 6: count the iteration and hand its ``IterationInfo`` to the history and the callbacks; ``expected``
        is the full step's expected decrease at the guess it started from, ``clock`` the time it started."""
        state.iteration += 1
        info = self.iteration_info(state, step, expected, clock)
        state.history.append(info)
        for callback in self.callbacks:
            callback(info)

    def iteration_info(self, state: SolverState, step: Step, expected: float, clock: float) -> IterationInfo:
        """The ``IterationInfo`` of the iteration just counted."""
        return IterationInfo(state.iteration, state.cost, state.stop, expected, step.alpha, step.direction.reg,
                             _gap_norm(state.gaps), step.improvement, step.expected, time.perf_counter() - clock,
                             self.name, state.xs, state.us)

    # ---- the result --------------------------------------------------------------------------------------------

    def result(self, state: SolverState) -> SolverResult:
        """The result at the state's guess, with the gains of its last direction (zeros before the first)."""
        problem = self.problem
        if state.direction is None:
            K, k = np.zeros((problem.T, problem.nu, problem.ndx)), np.zeros((problem.T, problem.nu))
        else:
            K, k = state.direction.K, state.direction.k
        gap = _gap_norm(state.gaps)
        if state.cost_pending:  # ended before linearizing its guess (interrupted, or a status set on the way)
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                try:
                    state.cost = problem.cost(state.xs, state.us)
                except _NUMERICAL_ERRORS:
                    state.cost = math.nan
            state.cost_pending = False
        if self.verbose:
            print(f"{self.name}: {state.status} after {state.iteration} iteration(s), cost {state.cost:.8e}, "
                  f"stop {state.stop:.3e}, gap {gap:.2e}, {time.perf_counter() - state.started:.3f} s")
        return SolverResult(state.xs, state.us, K, k, float(state.cost), state.status, state.iteration,
                            state.history, float(state.stop), gap, time.perf_counter() - state.started, self.name)


def take_cost(state: SolverState) -> None:
    """The guess's pending cost (``SolverState.cost_pending``) from the derivatives just computed at it."""
    if state.cost_pending:
        state.cost, state.cost_pending = state.derivatives.cost, False
        if not math.isfinite(state.cost):
            raise SolveFailed("the cost of the guess is not finite")


def _failed(why: str) -> str:
    return f"failed: {why}"


def solve_ilqr(problem: Problem, us0=None, options: SolverOptions | None = None, callback=None,
               verbose: bool = False, *, xs0: Trajectory | None = None) -> SolverResult:
    """iLQR (Gauss–Newton DDP) from the rollout of ``us0`` (default zeros), or from the guess ``(xs0, us0)`` whose
    first step is the closed-loop rollout of the policy computed about it (``Solver``, step 4); box-constrained
    when the problem's models have control bounds."""
    return Solver(problem, options, callback, verbose, fddp=False).solve(xs0, us0)


def solve_ddp(problem: Problem, us0=None, options: SolverOptions | None = None, callback=None,
              verbose: bool = False, *, xs0: Trajectory | None = None) -> SolverResult:
    """DDP with the second-order dynamics term (``trajectory_hessian_contraction`` of every dynamics model; a
    ValueError suggests iLQR when it is missing), from the rollout of ``us0`` or from the guess ``(xs0, us0)`` as
    ``solve_ilqr``; box-constrained with bounds."""
    return Solver(problem, options, callback, verbose, second_order=True, fddp=False).solve(xs0, us0)


def solve_fddp(problem: Problem, xs0: Trajectory | None = None, us0=None, options: SolverOptions | None = None,
               callback=None, verbose: bool = False, second_order: bool = False) -> SolverResult:
    """Feasibility-driven DDP from a possibly infeasible guess ``(xs0, us0)`` (``xs0`` default: the rollout of
    ``us0``; ``problem.constant_trajectory()`` is the usual cold start): the gaps are closed by the forward pass.
    ``second_order`` adds DDP's dynamics term."""
    return Solver(problem, options, callback, verbose, second_order=second_order).solve(xs0, us0)
