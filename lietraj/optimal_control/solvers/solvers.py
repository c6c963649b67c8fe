"""iLQR, DDP and FDDP on the state group, with optional box bounds on the controls: one loop, one backward pass.

Each iteration (Crocoddyl's SolverDDP / SolverFDDP / SolverBoxFDDP, Mastalli et al. 2020):

1. the local model at the current guess ``(x̄, ū)``: ``Problem.derivatives`` (one batched call per group) and, for
   an infeasible guess, the gaps ``f̄``;
2. the Riccati backward pass (``riccati.backward_pass``) with regularization ``μ``. DDP adds the second-order
   dynamics term ``H = ∇²(λᵀ f)``; its covectors ``λ_{k+1}`` come from a Gauss–Newton sweep at the same guess, so
   that all knots are contracted in one batched call. They differ from the exact DDP costates by ``O(|Q_u|)``,
   which keeps the Hessian error ``O(|ū - u*|)`` and hence DDP's local quadratic convergence. A failed sweep
   (``Q_uu`` not positive definite) multiplies ``μ`` by ``reg_factor`` and is repeated. Far from the optimum ``H``
   alone can make ``Q_uu`` indefinite: the ``μ`` raised for that lasts only this iteration (``H`` shrinks with
   ``λ`` near the optimum, and a lasting ``μ`` would slow every later Newton step), and the line search is run on
   both that sweep and the Gauss–Newton one, the lower cost winning (no ``μ`` up to ``reg_max`` helps: the
   Gauss–Newton sweep alone);
3. stop when the guess is feasible and the stationarity measure ``Σ |Q_u|²`` (free controls) is below ``tol``;
4. the nonlinear forward pass for ``α = 1, ½, ¼, ...``::

       x_0 = x0 ⊕ (α - 1) f̄_0,  u_k = clip(ū_k + α k_k + K_k (x_k ⊖ x̄_k)),  x_{k+1} = f_k(x_k, u_k) ⊕ (α - 1) f̄_{k+1}

   (no gap terms for a feasible guess: iLQR and DDP always roll out) and the first step whose actual decrease is at
   least ``accept_ratio`` times the expected one is taken (FDDP also takes a step that raises the cost by less
   than ``accept_ascent_ratio`` times a negative expected decrease: closing gaps may cost). A full step closes all
   gaps;
5. ``μ`` is divided by ``reg_factor`` after a step longer than ``step_dec`` and multiplied after a step of at most
   ``step_inc`` or a failed line search; past ``reg_max`` the solve fails.

Iterations count the steps taken; the gains ``K, k`` of the result come from the backward pass at the returned
trajectory, so ``u = us[k] + K[k] (x ⊖ xs[k])`` is the local feedback policy. A diverging rollout or a failing
factorization never raises: the result's ``status`` says what happened. Bad inputs raise ValueError.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from lietraj.dynamics.lie.state import Trajectory
from lietraj.optimal_control.dynamics.discrete_dynamics import rollout_policy_per_knot
from lietraj.optimal_control.problem import Problem, ProblemDerivatives, finite_trajectory
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
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"SolverOptions: invalid {', '.join(f'{n}={getattr(self, n)!r}' for n in bad)}")


@dataclass(eq=False)
class IterationInfo:
    """One iteration: ``stop``, ``expected`` (the full-step expected decrease) and ``gap_norm`` (∞-norm of the
    gaps) at the guess it starts from; ``cost`` after it; the accepted ``step`` (0 if none), the ``regularization`` used,
    the actual and expected decrease of the taken step, the wall ``time`` in seconds, and the guess ``xs, us``
    after the step (references, not copies: the solver never writes into an accepted guess)."""

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


@dataclass(eq=False)
class SolverResult:
    """``xs`` (T+1 knots), ``us`` (T, nu), the feedback gains ``K`` (T, nu, ndx) and ``k`` (T, nu) of the last
    backward pass, the final ``cost``, ``status`` ("converged", "max_iterations" or "failed: <why>"), the number of
    ``iterations`` (steps taken), the per-iteration ``history``, the final ``stop`` measure and ``gap_norm``, and
    the ``total_time`` in seconds."""

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
        print(f"{info.iteration:>5} {info.cost:>14.8e} {info.stop:>10.3e} {info.expected:>10.3e} {info.step:>8.4f} "
              f"{info.regularization:>9.2e} {info.gap_norm:>9.2e} {1e3 * info.time:>9.2f}", file=stream, flush=True)


def _gap_norm(gaps: np.ndarray | None) -> float:
    return 0.0 if gaps is None else float(np.abs(gaps).max(initial=0.0))


def _forward_pass(problem: Problem, xs: Trajectory, us: np.ndarray, bp: BackwardPass, alpha: float,
                  gaps: np.ndarray | None):
    """The nonlinear rollout of the policy with step ``alpha`` (module docstring, step 4): ``(X, U, DX, cost)``,
    or None if it diverged. Knots sharing one dynamics object (the common case) roll out in one ``rollout_policy``
    call (compiled for RobotDynamics), others one knot at a time."""
    dynamics = problem.running[0].dynamics
    bounds = (problem.u_lb, problem.u_ub) if problem.has_control_limits else (None, None)
    args = (problem.x0, xs, us, bp.k, bp.K, alpha, gaps, *bounds)
    try:
        if all(m.dynamics is dynamics for m in problem.running):
            trial = dynamics.rollout_policy(*args)
        else:
            trial = rollout_policy_per_knot([m.dynamics for m in problem.running], *args)
        if not trial.ok:
            return None
        cost = problem.cost(trial.X, trial.U)
    except _NUMERICAL_ERRORS:
        return None
    return (trial.X, trial.U, trial.DX, cost) if math.isfinite(cost) else None


def _line_search(problem: Problem, xs: Trajectory, us: np.ndarray, cost: float, bp: BackwardPass,
                 gaps: np.ndarray | None, opts: SolverOptions, fddp: bool):
    """Backtracking on the step length (module docstring, step 4): ``(trial, alpha, improvement, expected)`` of the
    first accepted trial, or ``(None, 0, 0, 0)``."""
    terms = bp.improvement_terms()
    for alpha in opts.alphas:
        trial = _forward_pass(problem, xs, us, bp, alpha, gaps)
        if trial is None:
            continue
        improvement = cost - trial[3]
        expected = bp.expected_improvement(alpha, trial[2], terms)
        if abs(terms[0]) < opts.min_expected:
            return trial, alpha, improvement, expected
        if expected >= 0:
            if improvement > opts.accept_ratio * expected:
                return trial, alpha, improvement, expected
        elif fddp and improvement > opts.accept_ascent_ratio * expected:
            return trial, alpha, improvement, expected
    return None, 0.0, 0.0, 0.0


def _failed(why: str) -> str:
    return f"failed: {why}"


def _solve(problem: Problem, xs0, us0, options: SolverOptions | None, callback, verbose: bool, name: str,
           second_order: bool, fddp: bool) -> SolverResult:
    start = time.perf_counter()
    if not isinstance(problem, Problem):
        raise ValueError(f"{name}: expected a Problem, got {type(problem).__name__}")
    opts = SolverOptions() if options is None else options
    if not isinstance(opts, SolverOptions):
        raise ValueError(f"{name}: options must be SolverOptions, got {type(opts).__name__}")
    callbacks: list[Callable[[IterationInfo], None]] = []
    if callback is not None:
        if not callable(callback):
            raise ValueError(f"{name}: callback must be callable")
        callbacks.append(callback)
    if verbose:
        callbacks.append(LogTable())
    T, nu, ndx = problem.T, problem.nu, problem.ndx
    us = np.zeros((T, nu)) if us0 is None else problem.check_controls(us0).copy()
    if problem.has_control_limits:
        np.clip(us, problem.u_lb, problem.u_ub, out=us)
    xs = None if xs0 is None else problem.check_trajectory(xs0)

    K, k = np.zeros((T, nu, ndx)), np.zeros((T, nu))
    history: list[IterationInfo] = []

    def result(X, U, cost, status, iterations, stop=math.nan, gap=0.0):
        if verbose:
            print(f"{name}: {status} after {iterations} iteration(s), cost {cost:.8e}, stop {stop:.3e}, "
                  f"gap {gap:.2e}, {time.perf_counter() - start:.3f} s")
        return SolverResult(X, U, K, k, float(cost), status, iterations, history, float(stop), float(gap),
                            time.perf_counter() - start, name)

    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        try:
            if xs is None or not fddp:
                xs, feasible = problem.rollout(us), True
            else:
                xs, feasible = Trajectory(None if xs.H is None else xs.H.copy(), xs.s.copy(), xs.v.copy()), False
            cost = problem.cost(xs, us) if finite_trajectory(xs) else math.nan
        except _NUMERICAL_ERRORS as e:
            return result(xs if xs is not None else problem.constant_trajectory(), us, math.nan,
                          _failed(f"the initial guess cannot be evaluated ({e})"), 0)
        if not math.isfinite(cost):
            return result(xs, us, cost, _failed("the initial rollout or its cost is not finite"), 0)

        mu = max(opts.reg_init, opts.reg_min)
        bounded = problem.has_control_limits
        D = ProblemDerivatives.empty(T, ndx, nu)
        gaps, H, bp = None, None, None
        recalc, iteration, stop = True, 0, math.nan
        while True:
            t_iter = time.perf_counter()
            if recalc:
                try:
                    problem.derivatives(xs, us, out=D)
                    gaps = None if feasible else problem.gaps(xs, us)
                except _NUMERICAL_ERRORS as e:
                    return result(xs, us, cost, _failed(f"the derivatives cannot be evaluated ({e})"), iteration, stop,
                                  _gap_norm(gaps))
                if gaps is not None and _gap_norm(gaps) <= opts.gap_tol:
                    feasible, gaps = True, None
                H = None
            du_lb, du_ub = (problem.u_lb - us, problem.u_ub - us) if bounded else (None, None)
            gauss_newton = None  # the Gauss-Newton sweep, when DDP's needed a raised μ
            while True:
                sweep = dict(gaps=gaps, du_lb=du_lb, du_ub=du_ub, regularize_vxx=opts.regularize_vxx,
                             k_guess=None if bp is None else bp.k, box_tol=opts.box_tol, box_max_iter=opts.box_max_iter)
                trial = backward_pass(D, mu, **sweep)
                if trial.ok and second_order:
                    if H is None:
                        try:
                            H = problem.dynamics_contraction(xs, us, trial.lam[1:])
                        except NotImplementedError as e:
                            raise ValueError(f"{name}: the dynamics cannot compute the second-order term ({e}); use "
                                             "solve_ilqr (Gauss-Newton) instead") from e
                        except _NUMERICAL_ERRORS as e:
                            return result(xs, us, cost, _failed(f"the second-order term cannot be evaluated ({e})"),
                                          iteration, stop, _gap_norm(gaps))
                    mu_h = mu
                    while True:
                        full = backward_pass(D, mu_h, hessian=H, **sweep)
                        if full.ok or mu_h >= opts.reg_max:
                            break
                        mu_h = min(mu_h * opts.reg_factor, opts.reg_max)
                    if full.ok:
                        trial, gauss_newton = full, (trial if mu_h > mu else None)
                if trial.ok:
                    bp = trial
                    break
                if mu >= opts.reg_max:
                    return result(xs, us, cost, _failed(f"regularization reached reg_max = {opts.reg_max:g} "
                                                        f"({trial.reason})"), iteration, stop, _gap_norm(gaps))
                mu = min(mu * opts.reg_factor, opts.reg_max)
            K, k = bp.K, bp.k
            stop = bp.stationarity()
            expected = -sum(a * b for a, b in zip(bp.improvement_terms(), (1.0, 0.5)))
            if feasible and stop <= opts.tol:
                return result(xs, us, cost, "converged", iteration, stop)
            if iteration >= opts.max_iter:
                return result(xs, us, cost, "max_iterations", iteration, stop, _gap_norm(gaps))

            step = _line_search(problem, xs, us, cost, bp, gaps, opts, fddp)
            if gauss_newton is not None:
                other = _line_search(problem, xs, us, cost, gauss_newton, gaps, opts, fddp)
                if other[0] is not None and (step[0] is None or other[0][3] < step[0][3]):
                    step, bp, K, k = other, gauss_newton, gauss_newton.K, gauss_newton.k
            accepted, alpha, improvement, expected_step = step
            used_mu = bp.mu
            if accepted is not None:
                xs, us, _, cost = accepted
                feasible = feasible or alpha == 1.0
                recalc = True
            else:
                recalc = False
            if accepted is not None and alpha > opts.step_dec:
                mu = max(mu / opts.reg_factor, opts.reg_min)
            if accepted is None or alpha <= opts.step_inc:
                mu = min(mu * opts.reg_factor, opts.reg_max)
            iteration += 1
            info = IterationInfo(iteration, cost, stop, expected, alpha, used_mu, _gap_norm(gaps), improvement,
                                 expected_step, time.perf_counter() - t_iter, name, xs, us)
            history.append(info)
            for cb in callbacks:
                cb(info)
            if accepted is None and used_mu >= opts.reg_max:
                return result(xs, us, cost, _failed(f"no step decreases the cost and regularization reached reg_max = "
                                                    f"{opts.reg_max:g}"), iteration, stop, _gap_norm(gaps))


def solve_ilqr(problem: Problem, us0=None, options: SolverOptions | None = None, callback=None,
               verbose: bool = False) -> SolverResult:
    """iLQR (Gauss–Newton DDP) from the rollout of ``us0`` (default zeros); box-constrained when the problem's
    models have control bounds."""
    return _solve(problem, None, us0, options, callback, verbose, "iLQR", second_order=False, fddp=False)


def solve_ddp(problem: Problem, us0=None, options: SolverOptions | None = None, callback=None,
              verbose: bool = False) -> SolverResult:
    """DDP with the second-order dynamics term (``trajectory_hessian_contraction`` of every dynamics model; a
    ValueError suggests iLQR when it is missing), from the rollout of ``us0``; box-constrained with bounds."""
    return _solve(problem, None, us0, options, callback, verbose, "DDP", second_order=True, fddp=False)


def solve_fddp(problem: Problem, xs0: Trajectory | None = None, us0=None, options: SolverOptions | None = None,
               callback=None, verbose: bool = False, second_order: bool = False) -> SolverResult:
    """Feasibility-driven DDP from a possibly infeasible guess ``(xs0, us0)`` (``xs0`` default: the rollout of
    ``us0``; ``problem.constant_trajectory()`` is the usual cold start): the gaps are closed by the forward pass.
    ``second_order`` adds DDP's dynamics term."""
    return _solve(problem, xs0, us0, options, callback, verbose, "FDDP" if not second_order else "FDDP-SO",
                  second_order=second_order, fddp=True)
