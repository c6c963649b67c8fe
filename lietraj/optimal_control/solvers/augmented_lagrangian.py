"""Hard constraints by an augmented Lagrangian around FDDP: ``solve_constrained``.

The problem: minimise the cost subject to the dynamics and to ``lower ≤ c(x_k, u_k) ≤ upper`` at the knots that
carry constraints (``constraints.Constraint``; rows scaled by their unit ``σ``, ``ĉ = c / σ``). For multipliers
``λ`` and a penalty ``ρ`` every constraint row adds to its knot's cost the Powell–Hestenes–Rockafellar term::

    ψ(ĉ) = ρ/2 ‖ŝ − Π(ŝ)‖² − ‖λ‖² / (2ρ),   ŝ = ĉ + λ/ρ,   Π the projection on [lower/σ, upper/σ]
    ∇ψ = λ⁺ = ρ (ŝ − Π(ŝ)),               ∇²ψ = ρ on the rows where ŝ is on or past a bound (equality rows: all)

so that the derivative of the augmented cost is the Lagrangian's with the first-order multiplier estimate ``λ⁺``.
These are costs like any other (``AugmentedLagrangianActivation`` through a ``ResidualCost``, Gauss–Newton): FDDP
minimises the augmented problem with its gaps, line search, control boxes (kept exactly by the box QP) and, with
``second_order``, DDP's exact dynamics term, all unchanged. Around it the outer loop of the bound-constrained
Lagrangian method (Conn, Gould & Toint's LANCELOT; Nocedal & Wright Algorithm 17.4), run inside FDDP's iterations
rather than as separate solves: once the inner problem is solved to the tolerance ``ω`` (stationarity, gaps
closed), either the violation is below the target ``η``, and the multipliers take ``λ ← λ⁺`` while ``ω, η``
tighten (``ω`` more slowly than Algorithm 17.4: ``INNER_TIGHTENING``), or it is not, and ``ρ`` grows (``η, ω``
reset to its scale). A multiplier update that cut the violation by less than ``PROGRESS`` since the last one raises
``ρ`` as well (Bertsekas's rule). The iterate, the regularization and the warm-started box QPs carry on from one
update to the next. The test comes before the sweep at a new guess (``ConstrainedSolver.compute_direction``): its
stationarity is the sweep's ``Q_u`` predicted along the last sweep's gains (``riccati.policy_gradient``, a tenth of
a sweep), so that an update changes the costs before the sweep sees them instead of after a sweep that is thrown
away; the sweep's own ``Q_u`` is tested after it too (``termination``), for the guesses the prediction misses.

A Gauss–Newton model of ``ψ`` has no curvature on a row inside its bounds, so its Newton step can drive the row far
past them (a torque limit, on the first steps of a reach: the line search then cut the step to 1/64 for twenty
iterations). The rows of constraints on the controls themselves (``ControlResidual``: torque limits) that are inside
their bounds at the guess are therefore clipped at those bounds in the trial rollouts, as a box is (``forward_pass``):
a step brings such a row onto its bound, where the model gives it its curvature ``ρ``, and from there the multiplier
update takes over (past the bound where a multiplier pushing the other way moves the start of ``ψ`` there:
``control_bounds``). It took the ur5 reach of ``bench_constrained`` from 72 to 28 iterations and a1's jump from 206
to 124.

Rows of every other kind (contact forces, joint positions) cannot be clipped in a rollout; for them the line search
looks ahead (``ConstrainedSolver.line_search``, ``_Lookahead``). When the full step is not acceptable, the rows it
carried from inside their bounds past one are what the model got wrong (on anymal's jump the cost they added was
all of the rise that made the line search cut the step to 1/64 after each outer update). Those rows are then held
active at that bound in a copy of the local model (``ψ`` taken as ``ρ/2 (ŝ + R δ − b)²`` about the guess: the
piecewise-quadratic ``ψ`` on the side the step goes to, as a primal-dual active-set method guesses its active set from
the last step), the sweep is run again on it (the dynamics' derivatives are not recomputed), and its full step is
tried, for up to ``LOOKAHEAD`` rounds (each holding what the last trial carried past), before the backtracking along
the direction itself (from a closed trajectory once the outer loop has started: ``line_search``). Its sweep visits
only the knots before the last one with a held row (``riccati.backward_pass`` from the direction's). The model's
predicted decrease for moving a held row onto its bound is not a decrease of ``ψ`` (zero on both sides) and is
taken off the expected decrease the step is judged by. Over seven hard problems (the
four of ``bench_constrained``, a1's jump and two trots) it took the FDDP iterations from 321 to 228 (anymal's jump
47 to 33, solo12's 78 to 58, a1's 123 to 72, the ur5 reach 25 to 21), to the same optima.

Why this method. It is the one that keeps every property of the existing solvers: multiple shooting from an
infeasible guess, the exact DDP term and the Riccati sweep are untouched, because the constraints only reshape the
cost the sweep sees (the backward pass needs no KKT system per knot); it meets equalities and inequalities of any
residual with the derivatives the costs already have; it tolerates infeasible starting points and reports
infeasible problems through the penalty's growth; and its multipliers are the Lagrange multipliers at convergence.
Its cost is more FDDP iterations than a penalty solve (the outer updates), not more work per iteration. An
interior-point DDP would need strictly feasible iterates, a stagewise SQP a QP per knot (ProxDDP's primal-dual
variant solves one per knot too).

Stopping (the KKT conditions, each relative): stationarity ``max |Q_u| / (1 + max |l_u|)`` over the free controls
(the reduced gradient of the Lagrangian along the closed trajectory: the Riccati sweep eliminates the states),
feasibility ``max`` violation in each constraint's unit, complementarity ``max |λ⁺ᵢ| |ĉᵢ − bᵢ| / (1 + max |λ⁺|)``
over the inequality rows (``bᵢ`` the bound ``λ⁺ᵢ`` pushes against), with the dynamics' gaps closed. The status is
"converged" when all three are below their tolerances; "infeasible: <constraints>" when a larger penalty left the
solved violation where it was (``STAGNATION``: where the constraints can be met it falls with the penalty), when the
penalty would pass ``penalty_max``, or at once when a constraint has ``lower > upper`` (the constraints named are
those violated at the returned iterate; a local method's verdict, as an NLP solver's "locally infeasible");
"max_iterations"; "failed: <why>" when FDDP cannot go on. Never NaN: a non-finite trial is rejected by the line
search as in FDDP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from lietraj.dynamics.lie.state import Trajectory
from lietraj.optimal_control.constraints import Constraint, Violation, largest_violations
from lietraj.optimal_control.costs.activations import AugmentedLagrangianActivation
from lietraj.optimal_control.costs.costs import CostDerivatives, CostModel, CostSum, ResidualCost
from lietraj.optimal_control.costs.residuals import ControlResidual
from lietraj.optimal_control.problem import ActionModel, Problem, ProblemDerivatives
from lietraj.optimal_control.solvers.riccati import BackwardPass, policy_gradient
from lietraj.optimal_control.solvers.solvers import (
    _NUMERICAL_ERRORS,
    IterationInfo,
    take_cost,
    SolveFailed,
    _forward_pass,
    LogTable,
    Solver,
    SolverOptions,
    SolverResult,
    SolverState,
    Step,
)


STALL = 5
"""Steps in a row without progress after which the inner solve counts as at its floor (``ConstrainedSolver.stalled``)."""
INNER_TIGHTENING = 0.6
"""After a multiplier update the inner tolerance ``ω`` shrinks by ``ρ`` to this power (Algorithm 17.4: 1), so that the
multipliers move sooner. Over the 26 hard ready problems (balances with a lifted foot included) and the ur5 reach of
``bench_constrained``, from a first penalty of 10 growing tenfold: 565 FDDP iterations in all at 0.6, 600 at 1, 575
at 0.3 (which helps the reach most, 16 against 28, but nearly triples anymal's balance on three feet: 28 against
10). With today's penalties (100, twentyfold), over the 36 and the reach: 714 at 0.6, 702 at 0.45, 732 at 0.8, 747
at 1, and at 0.3 g1_with_hands' balance stalls."""
LOOKAHEAD = 4
"""Rounds of the line search's look-ahead (``ConstrainedSolver.line_search``): full steps of models holding more
rows at their bounds, each round those the last trial carried past."""
PROGRESS = 0.25
"""A multiplier update whose violation is above this fraction of the last one's raises the penalty as well
(Bertsekas, Constrained Optimization and Lagrange Multiplier Methods, §2.2: γ = 0.25); the inner tolerance and the
violation target start again from the larger penalty's. Over the 36 hard ready problems and the ur5 reach of
``bench_constrained``, from a first penalty of 10: 804 FDDP iterations in all without it, 770 with it (the reach 16
to 12, solo12's jump 58 to 49, go2's 30 to 22; four slower: Talos's balance 17 to 18, go2's 10 to 13 and its trot 12
to 16, g1_with_hands' squat 144 to 148)."""
STAGNATION = 0.9
"""Two penalty increases in a row (no multiplier update between them, each after an inner solve to its tolerance)
after which the violation is still above this fraction of what it was at the first (it falls with the penalty where
the constraints can be met) end the solve as infeasible."""


@dataclass
class ConstraintOptions:
    """The outer loop's settings (module docstring): the penalty's start, growth factor and limit (past it the
    problem is declared infeasible), and the relative tolerances of the three KKT conditions. The start of 100: over
    the 36 hard ready problems and the ur5 reach of ``bench_constrained``, 738 FDDP iterations in all against 770
    from 10 (anymal's jump 33 to 31, a1's 72 to 60; g1's squat slower, 52 to 63); 1000 gave more (solo12's jump 77).
    The factor of 20: 714 against 748 from 10 (anymal's jump 31 to 28, a1's 60 to 42, go1's 49 to 42), 719 from 30,
    547 from 100 with solo12's jump at the iteration limit; ur5's unreachable target is found infeasible after 402
    iterations instead of 308."""

    penalty_init: float = 100.0
    penalty_factor: float = 20.0
    penalty_max: float = 1e10
    stationarity_tol: float = 1e-6
    feasibility_tol: float = 1e-6
    complementarity_tol: float = 1e-6

    def __post_init__(self):
        checks = {
            "penalty_init": 0 < self.penalty_init <= self.penalty_max, "penalty_factor": self.penalty_factor > 1,
            "penalty_max": math.isfinite(self.penalty_max), "stationarity_tol": self.stationarity_tol > 0,
            "feasibility_tol": self.feasibility_tol > 0, "complementarity_tol": self.complementarity_tol > 0,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"ConstraintOptions: invalid {', '.join(f'{n}={getattr(self, n)!r}' for n in bad)}")


@dataclass(frozen=True)
class KKTResiduals:
    """The three relative KKT residuals at a solution (module docstring)."""

    stationarity: float
    feasibility: float
    complementarity: float


@dataclass(frozen=True)
class Multipliers:
    """A named constraint's Lagrange multipliers: ``values`` (K, nr) at the ``knots`` (K,) that carry it (``T``: the
    terminal knot), in the units of the cost per unit of residual (``∂cost/∂r`` at the solution)."""

    knots: np.ndarray
    values: np.ndarray


@dataclass(eq=False, repr=False)
class ConstrainedResult(SolverResult):
    """``SolverResult`` with the constraints' outcome: the ``multipliers`` and the largest ``violations`` of each
    named constraint, the ``kkt`` residuals, the final ``penalty`` and the number of ``outer_iterations``
    (multiplier or penalty updates). ``cost`` is the problem's own cost (the history logs the augmented one)."""

    multipliers: dict[str, Multipliers] = field(default_factory=dict)
    violations: dict[str, Violation] = field(default_factory=dict)
    kkt: KKTResiduals | None = None
    penalty: float = math.nan
    outer_iterations: int = 0

    @property
    def max_violation(self) -> float:
        """The largest violation of any constraint, each in its own unit."""
        return max((v.value for v in self.violations.values()), default=0.0)

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, violation={self.max_violation:.3g}, penalty={self.penalty:.3g})"


@dataclass(eq=False)
class _Slot:
    """One constraint at a run of knots: its ``ψ`` (its multipliers a view of the group's array), where it starts."""

    name: str
    constraint: Constraint
    start: int
    activation: AugmentedLagrangianActivation

    @property
    def multipliers(self) -> np.ndarray:
        return self.activation.multipliers


class _Augmented:
    """The augmented problem of ``problem`` (same dynamics objects, each cost with its knots' ``ψ`` terms), the
    multipliers of every constraint group and the shared penalty."""

    def __init__(self, problem: Problem, penalty: float):
        self.original = problem
        self.penalty = np.array([penalty])
        self.slots: list[_Slot] = []
        T = problem.T
        owner = [None] * (T + 1)  # knot -> (group start, multiplier arrays of its group)
        for a, b, constraints in problem.constraint_groups():
            arrays = {name: np.zeros((b - a, c.nr)) for name, c in constraints.items()}
            for k in range(a, b):
                owner[k] = (a, arrays)
        models, previous = [], None
        for k, m in enumerate(problem.running):
            new_cost = previous is None or m.cost is not previous.cost or m.constraints is not previous.constraints
            if new_cost:
                run_cost = self._cost(m.cost, m.constraints, k, owner[k], problem.nu)
            if new_cost or m is not previous:  # one model for the knots that share the original's and the cost
                model = ActionModel(m.dynamics, run_cost, m.u_lb, m.u_ub)
            previous = m
            models.append(model)
        terminal = self._cost(problem.terminal, problem.terminal_constraints, T, owner[T], 0)
        self.problem = Problem(problem.x0, models, terminal)

    def _cost(self, cost: CostModel, constraints, k: int, owner, nu: int) -> CostModel:
        """``cost`` plus the ``ψ`` terms of the knots from ``k`` on that share it and ``constraints``."""
        if not constraints:
            return cost
        total = CostSum(self.original.state_space, nu)
        if isinstance(cost, CostSum):  # its terms themselves (shared, weights included): one sum, no copy of results
            total.costs.update(cost.costs)
        else:
            total.add("cost", cost)
        start, arrays = owner
        run = self._run_length(k, constraints, cost)
        for name, c in constraints.items():
            activation = AugmentedLagrangianActivation(c, arrays[name][k - start:k - start + run], self.penalty)
            self.slots.append(_Slot(name, c, k, activation))
            term = f"{name} (constraint)"
            while term in total.costs:
                term += "'"
            total.add(term, ResidualCost(c.residual, activation))
        return total

    def _run_length(self, k: int, constraints, cost) -> int:
        """The number of knots from ``k`` with this cost and constraint set (the terminal knot: 1)."""
        problem = self.original
        if k == problem.T:
            return 1
        stop = k
        while stop < problem.T and problem.running[stop].cost is cost and problem.running[stop].constraints is constraints:
            stop += 1
        return stop - k

    def residuals(self, X: Trajectory, U: np.ndarray) -> list[np.ndarray]:
        """The residuals ``c`` of every slot, in their own units."""
        T = self.original.T
        out = []
        for slot in self.slots:
            n = slot.multipliers.shape[0]
            knots_U = None if slot.start == T else U[slot.start:slot.start + n]
            out.append(slot.constraint.value(X[slot.start:slot.start + n], knots_U))
        return out

    def violations(self, residuals: list[np.ndarray]) -> dict[str, Violation]:
        """``Problem.violations`` from the slots' residuals (no second evaluation of the constraints)."""
        return largest_violations((slot.name, slot.start, np.abs(slot.constraint.excess(r)).max(axis=1, initial=0.0),
                                   slot.constraint.scale) for slot, r in zip(self.slots, residuals))

    def estimates(self, residuals: list[np.ndarray]) -> list[np.ndarray]:
        """``λ⁺ = ρ (ŝ − Π(ŝ))`` of every slot."""
        out = []
        for slot, r in zip(self.slots, residuals):
            _, e, rho = slot.activation.shifted(r)
            out.append(rho * e)
        return out


def _complementarity(slot: _Slot, r: np.ndarray, lam: np.ndarray) -> float:
    """``max |λ⁺ᵢ| |ĉᵢ − bᵢ|`` over the slot's inequality rows (module docstring), ``r`` in the constraint's units."""
    c = slot.constraint
    pushing = (lam != 0.0) & ~c.equality  # a multiplier pushes against a finite bound: the one it is past
    if not pushing.any():
        return 0.0
    bound = np.broadcast_to(np.where(lam > 0.0, c.upper, c.lower), lam.shape)[pushing]
    gap = np.abs(lam[pushing]) * np.abs(r[pushing] - bound)
    return float(gap[np.isfinite(gap)].max(initial=0.0)) / c.scale


def _relative_stationarity(state: SolverState, Q_u: np.ndarray) -> float:
    """``max |Q_u|`` over the controls the last sweep left free, relative to ``1 + max |l_u|`` (module docstring)."""
    gradient = float(np.abs(np.where(state.direction.free, Q_u, 0.0)).max(initial=0.0))
    return gradient / (1.0 + float(np.abs(state.derivatives.running.l_u).max(initial=0.0)))


class _Lookahead:
    """The local model of one line search's look-ahead (``ConstrainedSolver.line_search``): ``model``, a copy of the
    guess's, in which the inequality rows inside their bounds at the guess that a trial carried past one are held at
    that bound: their ``ψ`` taken as ``ρ/2 (ŝ + R δ − b)²`` about the guess (gradient ``ρ (ŝ − b) R``, Gauss–Newton
    curvature ``ρ RᵀR``; ``R`` the scaled residual's Jacobian). ``held``: ``Σ ρ/2 (ŝ − b)²`` over the held rows, the
    model's decrease for moving them onto their bounds, which is not a decrease of ``ψ`` (zero on both sides).
    ``first_unchanged``: the knot from which on the model is the guess's (T with terminal rows held), so that its
    sweep need only visit the knots before (on anymal's jump the take-off's first four of 52)."""

    def __init__(self, augmented: _Augmented, state: SolverState, model: ProblemDerivatives):
        self.augmented, self.state, self.model = augmented, state, model
        self.rho = float(augmented.penalty[0])
        self.held = 0.0
        self.first_unchanged = 0
        self.parts = []  # per slot: ŝ and whether inside at the guess, rows held so far
        for slot, r in zip(augmented.slots, augmented.residuals(state.xs, state.us)):
            s, outside, _ = slot.activation.shifted(r)
            self.parts.append((s, outside == 0.0, np.zeros(s.shape, dtype=bool)))
        self._derivatives: dict[int, object] = {}

    def hold(self, X: Trajectory, U: np.ndarray) -> bool:
        """Hold the rows the trial ``(X, U)`` carried past a bound that are not held yet; whether there were any."""
        added, T = False, self.augmented.problem.T
        for i, (slot, (s, inside, held), r) in enumerate(zip(self.augmented.slots, self.parts,
                                                             self.augmented.residuals(X, U))):
            _, past, _ = slot.activation.shifted(r)
            rows = inside & (past != 0.0) & ~held
            if not rows.any():
                continue
            held |= rows
            added = True
            act, scale = slot.activation, slot.constraint.scale
            pull = np.where(rows, s - np.where(past > 0.0, act.upper, act.lower), 0.0)
            self.held += 0.5 * self.rho * float(np.einsum("kr,kr->", pull, pull))
            knots, terminal = slice(slot.start, slot.start + len(rows)), slot.start == T
            if i not in self._derivatives:
                self._derivatives[i] = slot.constraint.derivatives(self.state.xs[knots],
                                                                   None if terminal else self.state.us[knots])
            d = self._derivatives[i]
            k = np.flatnonzero(rows.any(axis=1))  # the knots with rows held from now on
            g = (self.rho / scale) * pull[k, None, :]  # (K, 1, nr): rows of the gradient ρ (ŝ − b) R
            h = np.where(rows[k, :, None], self.rho / scale ** 2, 0.0)  # (K, nr, 1): the curvature of each row
            R_x, R_u = d.R_x[k], d.R_u[k]
            target = self.model.terminal if terminal else self.model.running
            at = k if terminal else slot.start + k
            self.first_unchanged = max(self.first_unchanged, T if terminal else int(at[-1]) + 1)
            target.l_x[at] += (g @ R_x)[:, 0]
            target.l_xx[at] += np.swapaxes(R_x, 1, 2) @ (h * R_x)
            if not terminal:
                target.l_u[at] += (g @ R_u)[:, 0]
                target.l_xu[at] += np.swapaxes(h * R_x, 1, 2) @ R_u
                target.l_uu[at] += np.swapaxes(R_u, 1, 2) @ (h * R_u)
        return added


class ConstrainedLogTable(LogTable):
    """``LogTable`` with the KKT columns: the relative stationarity at the guess, the largest violation and the
    complementarity at the last outer update, the penalty and the worst constraint."""

    HEADER = LogTable.HEADER + f" {'stat':>9} {'viol':>9} {'comp':>9} {'penalty':>8}  worst"

    def row(self, info: IterationInfo) -> str:
        return (f"{super().row(info)} {info.stationarity:>9.2e} {info.violation:>9.2e} {info.complementarity:>9.2e} "
                f"{info.penalty:>8.1e}  {info.worst}")


class ConstrainedSolver(Solver):
    """FDDP (DDP's term with ``second_order``) on the augmented problem, with the outer updates of the module
    docstring in its ``termination`` step. ``solve`` returns a ``ConstrainedResult``."""

    def __init__(self, problem: Problem, options: SolverOptions | None = None,
                 constraint_options: ConstraintOptions | None = None, callback=None, verbose: bool = False, *,
                 second_order: bool = False, name: str | None = None):
        name = ("AL-FDDP-SO" if second_order else "AL-FDDP") if name is None else name
        if not isinstance(problem, Problem):
            raise ValueError(f"{name}: expected a Problem, got {type(problem).__name__}")
        copts = ConstraintOptions() if constraint_options is None else constraint_options
        if not isinstance(copts, ConstraintOptions):
            raise ValueError(f"{name}: constraint_options must be ConstraintOptions, got {type(copts).__name__}")
        self.constraint_options = copts
        self.augmented = _Augmented(problem, copts.penalty_init)
        super().__init__(self.augmented.problem, options, callback, False, second_order=second_order, name=name)
        if verbose:
            self.callbacks.append(ConstrainedLogTable())
        self.verbose = verbose
        self._reset_targets()
        self.outer_iterations = 0
        self._best, self._flat = math.inf, 0  # the inner solve's best stationarity and steps without progress
        self._stationarity = math.nan
        self._costs_changed = False  # an outer update changed the costs at the current guess
        self._verdict = ""  # the outer loop's status at the current guess
        self._bounds_key, self._bounds = None, None  # the trial controls' bounds of the last guess
        self._control_slots = [slot for slot in self.augmented.slots if isinstance(slot.constraint.residual,
                                                                                     ControlResidual)]
        self._updated_at: float | None = None  # the violation at the last multiplier update
        self._raised_at: float | None = None  # the violation of the inner solution at the last penalty increase
        self._last = (math.nan, math.nan, math.nan, "")  # violation, complementarity, penalty, worst: for the log
        self.kkt: KKTResiduals | None = None  # at the last outer update
        self._corrected: tuple[BackwardPass | None, float] = (None, 0.0)  # the last look-ahead direction, its held
        self._copy: ProblemDerivatives | None = None  # the look-ahead's local model

    # ---- the outer loop ------------------------------------------------------------------------------------

    def _reset_targets(self) -> None:
        """``ω, η`` for the current penalty (Nocedal & Wright, Algorithm 17.4)."""
        rho = float(self.augmented.penalty[0])
        self._omega, self._eta = 1.0 / rho, rho ** -0.1

    def warm_start(self, previous: ConstrainedResult) -> None:
        """Start the outer loop where ``previous`` (a result of this problem or of one with the same constraint names
        and knots, e.g. the last solve of a receding horizon) ended: its multipliers, wherever a constraint of the same
        name and size is at the same knot (zeros elsewhere), and its penalty."""
        if not isinstance(previous, ConstrainedResult):
            raise ValueError(f"{self.name}: warm_start takes a ConstrainedResult, got {type(previous).__name__}")
        for slot in self.augmented.slots:
            given = previous.multipliers.get(slot.name)
            slot.multipliers[...] = 0.0
            if given is None or given.values.shape[1] != slot.constraint.nr:
                continue
            knots = np.arange(slot.start, slot.start + slot.multipliers.shape[0])
            rows = np.searchsorted(given.knots, knots)
            found = (rows < len(given.knots)) & (given.knots[np.minimum(rows, len(given.knots) - 1)] == knots)
            slot.multipliers[found] = given.values[rows[found]] * slot.constraint.scale
        if math.isfinite(previous.penalty):
            self.augmented.penalty[0] = min(max(previous.penalty, self.constraint_options.penalty_init),
                                            self.constraint_options.penalty_max)
        self._reset_targets()

    def start(self, xs0: Trajectory | None = None, us0=None) -> SolverState:
        state = super().start(xs0, us0)
        contradictory = self.augmented.original.contradictory_constraints()
        if contradictory and not state.status:
            state.status = "infeasible: lower > upper in " + "; ".join(contradictory)
        return state

    def stationarity(self, state: SolverState) -> float:
        """The relative stationarity of the Lagrangian at the guess (module docstring), from its sweep."""
        return _relative_stationarity(state, state.direction.Q_u)

    def predicted_stationarity(self, state: SolverState) -> float:
        """``stationarity`` before the sweep at the guess, from the gradient of the cost along the last sweep's
        policy (``riccati.policy_gradient``: its ``Q_u`` but for the terms of controls the box QPs clamped, which
        it leaves out) on the controls it left free."""
        return _relative_stationarity(state, policy_gradient(state.derivatives, state.direction.K))

    def compute_direction(self, state: SolverState) -> list[BackwardPass]:
        """Steps 1–2 with the outer loop's test before the sweep too: at a closed trajectory whose predicted
        stationarity meets the test (``outer_test``), the updates change the costs before the sweep sees them,
        rather than after it (a sweep each). The sweep runs after a verdict too: the result's gains are the final
        guess's."""
        if not state.linearized:
            self.linearize(state)
        self._verdict = ""
        while state.feasible and state.direction is not None and not self._verdict:
            self._stationarity = self.predicted_stationarity(state)
            self._verdict = self.outer_test(state, self._stationarity, False)
            if state.linearized:
                break
            self.linearize(state)
        return super().compute_direction(state)

    def termination(self, state: SolverState) -> str:
        """Step 3: the verdict of the test before the sweep, or the test on the sweep's stationarity (an update
        then marks the local model stale, and the iteration ends without a step), or the iteration limit."""
        if self._verdict:
            return self._verdict
        self._stationarity = stationarity = self.stationarity(state)
        verdict = self.outer_test(state, stationarity, self.stalled(state, stationarity)) if state.feasible else ""
        if verdict:
            return verdict
        if state.iteration >= self.options.max_iter:
            return "max_iterations"
        return ""

    def outer_test(self, state: SolverState, stationarity: float, stalled: bool) -> str:
        """Once the augmented problem is solved to ``ω`` on a closed trajectory (or its stationarity has stalled at
        its rounding floor: ``stalled``), the KKT test, then a multiplier or penalty update (``outer_update``); the
        status that ends the solve, or "". Without constraints this is FDDP's test on the relative stationarity."""
        tol = self.constraint_options.stationarity_tol
        if not self.augmented.slots and (stationarity <= tol or stalled):
            self.kkt = KKTResiduals(stationarity, 0.0, 0.0)
            return "converged" if stationarity <= tol else self._floor(stationarity)
        if stalled or stationarity <= max(self._omega, tol):
            return self.outer_update(state, stalled, stationarity)
        return ""

    def stalled(self, state: SolverState, stationarity: float) -> bool:
        """Whether the inner solve has stopped making progress: ``STALL`` steps in a row whose expected decrease was
        below ``min_expected`` (nothing left to gain at this precision) without halving the stationarity. A large
        penalty puts a floor of rounding errors under the stationarity (``ρ`` times the residuals' ε), which a
        tolerance below it would wait for until ``max_iter``."""
        last = state.history[-1] if state.history else None
        if last is None or last.step == 0.0 or abs(last.expected) >= self.options.min_expected or \
                stationarity < 0.5 * self._best:
            self._best, self._flat = min(self._best, stationarity), 0
            return False
        self._flat += 1
        return self._flat >= STALL

    def _slow(self, feasibility: float, rho: float) -> bool:
        """Whether a multiplier update at ``feasibility`` should raise the penalty too: the violation fell by less
        than ``PROGRESS`` since the last multiplier update (the multipliers converge linearly, the faster the larger
        the penalty), the constraints are not met yet, and the larger penalty keeps its rounding floor (``ρ ε``
        relative) a hundredfold below the stationarity tolerance."""
        opts = self.constraint_options
        raised = rho * opts.penalty_factor
        return (self._updated_at is not None and feasibility > PROGRESS * self._updated_at
                and feasibility > opts.feasibility_tol and raised <= opts.penalty_max
                and raised * np.finfo(float).eps <= 0.01 * opts.stationarity_tol)

    def _floor(self, stationarity: float) -> str:
        return (f"failed: the stationarity stalled at {stationarity:.3g}, above stationarity_tol = "
                f"{self.constraint_options.stationarity_tol:g}: its rounding floor at penalty "
                f"{self.augmented.penalty[0]:.3g} (loosen stationarity_tol, or start with a smaller penalty_init)")

    def outer_update(self, state: SolverState, stalled: bool, stationarity: float) -> str:
        """The multiplier or penalty update at an inner solution of relative ``stationarity``, or the status that
        ends the solve (``stalled``: the inner solve is at its floor, and ends the solve if the constraints are met
        but not the stationarity). An update that changes the costs marks the local model stale
        (``state.linearized``)."""
        aug, opts = self.augmented, self.constraint_options
        self.problem.parameters_changed()  # the multipliers and the penalty below are the costs' parameters
        residuals = aug.residuals(state.xs, state.us)
        estimates = aug.estimates(residuals)
        violations = aug.violations(residuals)
        worst = max(violations, key=lambda n: violations[n].value, default="")
        feasibility = violations[worst].value if worst else 0.0
        largest = max((float(np.abs(lam).max(initial=0.0)) for lam in estimates), default=0.0)
        complementarity = max((_complementarity(s, r, lam) for s, r, lam in zip(aug.slots, residuals, estimates)),
                              default=0.0) / (1.0 + largest)
        self._last = (feasibility, complementarity, float(aug.penalty[0]), worst)
        self.kkt = KKTResiduals(stationarity, feasibility, complementarity)
        self.outer_iterations += 1
        self._best, self._flat = math.inf, 0
        if feasibility <= self._eta or feasibility <= opts.feasibility_tol:
            changed = not all(np.array_equal(slot.multipliers, lam) for slot, lam in zip(aug.slots, estimates))
            for slot, lam in zip(aug.slots, estimates):
                slot.multipliers[...] = lam
            self._raised_at = None  # the problem moved: a later increase compares with itself only
            if feasibility <= opts.feasibility_tol and complementarity <= opts.complementarity_tol:
                if stationarity <= opts.stationarity_tol:
                    return "converged"
                if stalled:
                    return self._floor(stationarity)
            rho = float(aug.penalty[0])
            self._eta, self._omega = self._eta / rho ** 0.9, self._omega / rho ** INNER_TIGHTENING
            if self._slow(feasibility, rho):
                aug.penalty[0] = rho * opts.penalty_factor
                self._reset_targets()
                changed = True
            self._updated_at = feasibility
        else:
            changed = True
            rho = float(aug.penalty[0]) * opts.penalty_factor
            bad = ", ".join(f"{n} ({v.value:.3g} at knot {v.knot})" for n, v in violations.items()
                            if v.value > opts.feasibility_tol)
            if rho > opts.penalty_max:
                return f"infeasible: {bad} at penalty_max"
            if not stalled and self._raised_at is not None and feasibility > STAGNATION * self._raised_at:
                return (f"infeasible: {bad}: a {opts.penalty_factor:g} times larger penalty left "
                        f"{100 * feasibility / self._raised_at:.0f} % of the violation")
            self._raised_at = feasibility
            aug.penalty[0] = rho
            self._reset_targets()
        if state.iteration >= self.options.max_iter:
            return "max_iterations"
        if changed:  # else the local model's costs stand
            state.linearized, state.cost_pending, self._costs_changed = False, True, True
        return ""

    def linearize(self, state: SolverState) -> None:
        """Step 1; after an outer update, at the same guess, only the costs' derivatives (the multipliers and the
        penalty are in the costs; the dynamics' Jacobians and the gaps stand)."""
        if not self._costs_changed:
            super().linearize(state)
            return
        self._costs_changed = False
        try:
            self.problem.cost_derivatives(state.xs, state.us, state.derivatives, self.options.threads)
        except _NUMERICAL_ERRORS as e:
            raise SolveFailed(f"the derivatives cannot be evaluated ({e})") from e
        take_cost(state)
        state.hessian, state.linearized = None, True

    def forward_pass(self, state: SolverState, direction, alpha: float):
        """FDDP's trial, with the controls of the rows of control constraints that are inside their bounds at the
        guess clipped at those bounds: a step may bring such a row to its bound, where the model sees it (its
        curvature), not past it."""
        return _forward_pass(self.problem, state.xs, state.us, direction, alpha, state.gaps if self.fddp else None,
                             self.control_bounds(state), self.options.threads)

    def control_bounds(self, state: SolverState) -> tuple[np.ndarray, np.ndarray] | None:
        """The bounds of the trial controls (``(T, nu)`` each, None for none): the problem's box, tightened to the
        bounds of every control-constraint row that is inside them at the guess (module docstring)."""
        if not self._control_slots:
            return None
        key = (state.us, self.outer_iterations)  # the array itself: held here, its id cannot pass to another
        if self._bounds_key is not None and self._bounds_key[0] is key[0] and self._bounds_key[1] == key[1]:
            return self._bounds  # the trials of one line search share them
        problem = self.problem
        lb, ub = problem.u_lb.copy(), problem.u_ub.copy()
        for slot in self._control_slots:
            c, n, k = slot.constraint, slot.multipliers.shape[0], slot.start
            ref = c.residual.reference
            s, _, rho = slot.activation.shifted(state.us[k:k + n] - ref)  # the residual u − ref, as the cost sees it
            # the bound, or past it where ψ starts only there (ŝ on the bound with a multiplier that pushes the other
            # way, as a receding horizon's shifted ones can: at the bound itself the row would stay short of it)
            shift = c.scale * slot.multipliers / rho
            lower, upper = c.lower + ref - np.maximum(shift, 0.0), c.upper + ref - np.minimum(shift, 0.0)
            lb[k:k + n] = np.where(s > c.lower / c.scale, np.maximum(lb[k:k + n], lower), lb[k:k + n])
            ub[k:k + n] = np.where(s < c.upper / c.scale, np.minimum(ub[k:k + n], upper), ub[k:k + n])
        self._bounds_key, self._bounds = key, (lb, ub)
        return lb, ub

    def line_search(self, state: SolverState, direction: BackwardPass, terms: tuple[float, float],
                    alphas: tuple[float, ...] | None = None) -> Step:
        """FDDP's backtracking (on the caller's ``alphas`` when given), with the look-ahead of the module docstring:
        when the full step from a feasible guess is not acceptable and it carried inequality rows from inside their
        bounds past them, the full step of the model that holds those rows at their bounds is tried, for up to
        ``LOOKAHEAD`` rounds (each holding the rows the last trial carried past too); if none is acceptable, the
        backtracking goes on along ``direction`` from the next step length (backtracking along a look-ahead
        direction instead took ur5's unreachable target three times as many iterations to be found infeasible).
        From a guess with gaps the full step fails for the gaps it closes, not for the rows: on anymal's jump the
        look-ahead never helped there (seven rounds, the same iterations without them); nor before the first outer
        update, on a closed trajectory still far from the inner solution (six rounds on anymal's jump, none taken:
        without them 10 % less time, the same iterations; 748 against 738 over the 37 hard problems)."""
        if alphas is not None:
            return super().line_search(state, direction, terms, alphas)
        full = self.options.alphas[0]
        trial = self.forward_pass(state, direction, full)
        step = self.judge(state, direction, terms, full, trial)
        lookahead = None
        for _ in range(LOOKAHEAD):
            if step.accepted or trial is None or not state.feasible or not self.outer_iterations:
                break
            if lookahead is None:
                lookahead = _Lookahead(self.augmented, state, self._local_copy(state.derivatives))
            if not lookahead.hold(trial[0], trial[1]):
                break
            model, state.derivatives = state.derivatives, lookahead.model
            try:
                corrected = self.backward_pass(state, direction.reg, state.hessian if self.second_order else None,
                                               None if self.second_order else direction, lookahead.first_unchanged)
            finally:
                state.derivatives = model
            if not corrected.ok:
                break
            self._corrected = (corrected, lookahead.held)
            trial = self.forward_pass(state, corrected, full)
            step = self.judge(state, corrected, self.expected_improvement(corrected), full, trial)
        if step.accepted:
            return step
        return super().line_search(state, direction, terms, self.options.alphas[1:])

    def _local_copy(self, d: ProblemDerivatives) -> ProblemDerivatives:
        """A copy of the costs' part of ``d`` (the dynamics' shared), in arrays kept from one call to the next."""
        if self._copy is None:
            self._copy = ProblemDerivatives(d.dynamics, *(CostDerivatives(*(np.empty_like(a) for a in vars(c).values()))
                                                          for c in (d.running, d.terminal)))
        self._copy.dynamics = d.dynamics
        for source, target in ((d.running, self._copy.running), (d.terminal, self._copy.terminal)):
            for name, a in vars(source).items():
                np.copyto(getattr(target, name), a)
        return self._copy

    def expected_decrease(self, direction: BackwardPass, alpha: float, DX: np.ndarray,
                          terms: tuple[float, float]) -> float:
        """FDDP's, less (along a look-ahead direction) the part of the rows held at their bounds, which move onto
        them along the step: ``ρ/2 (ŝ − b)² α (2 − α)`` (``_Lookahead``)."""
        expected = super().expected_decrease(direction, alpha, DX, terms)
        if direction is self._corrected[0]:
            expected -= self._corrected[1] * alpha * (2.0 - alpha)
        return expected

    def iteration_info(self, state: SolverState, step, expected: float, clock: float) -> IterationInfo:
        """The iteration's ``IterationInfo`` with the stationarity of the guess it started from, and the violation,
        complementarity, penalty and worst constraint at the last outer update."""
        info = super().iteration_info(state, step, expected, clock)
        info.violation, info.complementarity, info.penalty, info.worst = self._last
        info.stationarity = self._stationarity
        return info

    # ---- the result ----------------------------------------------------------------------------------------

    def result(self, state: SolverState) -> ConstrainedResult:
        base = super().result(state)
        aug = self.augmented
        original = aug.original
        cost = original.cost(base.xs, base.us) if np.isfinite(base.cost) else base.cost
        multipliers: dict[str, list] = {}
        for slot in aug.slots:
            knots = np.arange(slot.start, slot.start + slot.multipliers.shape[0])
            multipliers.setdefault(slot.name, []).append((knots, slot.multipliers / slot.constraint.scale))
        merged = {name: Multipliers(np.concatenate([k for k, _ in parts]), np.concatenate([v for _, v in parts]))
                  for name, parts in multipliers.items()
                  if len({v.shape[1] for _, v in parts}) == 1}
        violations = original.violations(base.xs, base.us) if np.isfinite(base.cost) else {}
        kkt = self.kkt
        if kkt is not None and not state.status == "converged":
            kkt = KKTResiduals(kkt.stationarity, max((v.value for v in violations.values()), default=0.0),
                               kkt.complementarity)
        fields = {name: getattr(base, name) for name in base.__dataclass_fields__}
        fields["cost"] = float(cost)
        result = ConstrainedResult(**fields, multipliers=merged, violations=violations, kkt=kkt,
                                   penalty=float(aug.penalty[0]), outer_iterations=self.outer_iterations)
        if self.verbose and violations:
            worst = max(violations, key=lambda n: violations[n].value)
            print(f"{self.name}: largest violation {violations[worst].value:.3e} ({worst}, knot {violations[worst].knot})"
                  f", penalty {aug.penalty[0]:.1e}, {self.outer_iterations} outer update(s)")
        return result


def solve_constrained(problem: Problem, xs0: Trajectory | None = None, us0=None, options: SolverOptions | None = None,
                      constraint_options: ConstraintOptions | None = None, callback=None, verbose: bool = False,
                      second_order: bool = False, warm_start: ConstrainedResult | None = None) -> ConstrainedResult:
    """Minimise ``problem``'s cost subject to its dynamics, control bounds and constraints (``ActionModel``'s
    ``constraints``, ``Problem``'s ``terminal_constraints``) by the augmented-Lagrangian FDDP of the module
    docstring, from a possibly infeasible guess ``(xs0, us0)`` as ``solve_fddp``. ``options.max_iter`` bounds the
    FDDP iterations of the whole solve (default 100: constrained solves take more; raise it); ``second_order`` adds
    DDP's dynamics term; ``warm_start``, a previous result, its multipliers and penalty (``ConstrainedSolver.
    warm_start``: pass its ``xs, us`` as the guess too). Returns a ``ConstrainedResult`` (status "converged",
    "infeasible: ...", "max_iterations" or "failed: ..."), never raises on a numerical failure."""
    solver = ConstrainedSolver(problem, options, constraint_options, callback, verbose, second_order=second_order)
    if warm_start is not None:
        solver.warm_start(warm_start)
    return solver.solve(xs0, us0)
