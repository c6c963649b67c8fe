"""Optimal control problems on the state group: knots, rollouts, costs and their derivatives, batched over knots.

A problem of horizon ``T`` has states ``x_0 .. x_T`` (a ``Trajectory`` of ``T + 1`` knots), controls ``u_0 .. u_{T-1}``
(an array ``(T, nu)``), a running ``ActionModel`` per knot (dynamics ``x_{k+1} = f_k(x_k, u_k)`` and cost
``l_k(x_k, u_k)``) and a terminal cost ``l_T(x_T)``; it minimises ``Σ_k l_k(x_k, u_k) + l_T(x_T)`` from the initial
state ``x0`` (Crocoddyl's ShootingProblem). Everything is in the tangent chart of the state, ``x = x̄ exp(z)``,
order ``[z_H; z_s; z_ν; z_ṡ]`` (README, Conventions).

Knots are evaluated in groups: consecutive knots that share one dynamics object make one call of its batched
methods, consecutive knots that share one cost object one call of the cost's, so a problem whose knots all share
a model costs one compiled call per layer and trajectory, never one Python call per knot. Only the rollout, which
is sequential by nature, steps one knot at a time.

The gaps of a (possibly infeasible) guess are ``f̄_0 = x0 ⊖ X[0]`` and ``f̄_{k+1} = f_k(X[k], U[k]) ⊖ X[k+1]``
(Crocoddyl's ``fs``), so that a feasible trajectory has zero gaps.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import cached_property


import numpy as np

from lietraj.dynamics.lie.state import State, StateSpace, Trajectory, tangent_difference, tangent_integrate
from lietraj.optimal_control.constraints import ConstraintSet, Violation, largest_violations
from lietraj.optimal_control.costs.compiled_costs import CompiledCosts, TableChanged, compilable, table_model
from lietraj.optimal_control.costs.costs import CostDerivatives, CostModel, CostSum, ResidualCost
from lietraj.optimal_control.costs.residuals import KnotsChecked, check_knots
from lietraj.optimal_control.dynamics.discrete_dynamics import (
    DiscreteDerivatives,
    DiscreteDynamics,
    IntegratedDynamics,
    open_loop,
)
from lietraj.optimal_control.dynamics.euler import EulerStructure
from lietraj.optimal_control.dynamics.euler_second_order import StepHessian


WINDOWS_KEPT = 128
"""Groupings and cost tables a problem keeps, by window (``Problem._term_groups``)."""


def same_space(a: StateSpace, b: StateSpace) -> bool:
    """Whether two state spaces are the same group (joint count and base kind)."""
    return a.n == b.n and a.floating_base == b.floating_base


def knots(X: Trajectory, start: int, stop: int) -> Trajectory:
    """The knots ``start .. stop - 1`` of ``X`` as a trajectory of views: ``X[start:stop]``."""
    return X[start:stop]


def _bound(value, nu: int, fill: float, what: str) -> np.ndarray:
    if value is None:
        return np.full(nu, fill)
    b = np.array(np.broadcast_to(np.asarray(value, dtype=np.float64), (nu,)))
    if np.isnan(b).any():
        raise ValueError(f"ActionModel: {what} contains NaN")
    return b


def _check_constraints(constraints, space: StateSpace, nu: int, what: str) -> None:
    if constraints is None:
        return
    if not isinstance(constraints, ConstraintSet):
        raise ValueError(f"{what}: constraints must be a ConstraintSet, got {type(constraints).__name__}")
    if constraints.nu != nu:
        knot = "the terminal knot takes nu = 0" if "terminal" in what else f"the dynamics have nu = {nu}"
        raise ValueError(f"{what}: the constraints have nu = {constraints.nu}, {knot}")
    for name, c in [("", constraints)] + list(constraints.items()):
        if c.state_space is not None and not same_space(c.state_space, space):
            which = f"constraint {name!r} is" if name else "constraints are"
            raise ValueError(f"{what}: the {which} on {c.state_space}, the dynamics on {space}")


@dataclass(eq=False)
class ActionModel:
    """One running knot: discrete dynamics and a cost on the same state space and control size, with optional
    control bounds ``u_lb <= u <= u_ub`` (arrays of shape ``(nu,)`` or scalars; ``±inf`` for no bound) and
    ``constraints`` (a ``ConstraintSet`` of the same control size), which the constrained solver meets and the
    others ignore."""

    dynamics: DiscreteDynamics
    cost: CostModel
    u_lb: np.ndarray | float | None = None
    u_ub: np.ndarray | float | None = None
    constraints: ConstraintSet | None = None

    def __post_init__(self):
        if not isinstance(self.dynamics, DiscreteDynamics):
            raise ValueError(f"ActionModel: dynamics must be a DiscreteDynamics, got {type(self.dynamics).__name__}")
        if not isinstance(self.cost, CostModel):
            raise ValueError(f"ActionModel: cost must be a CostModel, got {type(self.cost).__name__}")
        if self.cost.state_space is not None and not same_space(self.dynamics.state_space, self.cost.state_space):
            raise ValueError(f"ActionModel: the cost's state space {self.cost.state_space} differs from the dynamics' "
                             f"{self.dynamics.state_space}")
        if self.cost.nu != self.dynamics.nu:
            raise ValueError(f"ActionModel: the cost has nu = {self.cost.nu} but the dynamics nu = {self.dynamics.nu}")
        nu = self.dynamics.nu
        self.u_lb = _bound(self.u_lb, nu, -np.inf, "u_lb")
        self.u_ub = _bound(self.u_ub, nu, np.inf, "u_ub")
        if not np.all(self.u_lb <= self.u_ub):
            raise ValueError(f"ActionModel: u_lb must not exceed u_ub, got {self.u_lb} and {self.u_ub}")
        _check_constraints(self.constraints, self.dynamics.state_space, nu, "ActionModel")

    @property
    def has_control_limits(self) -> bool:
        return bool(np.isfinite(self.u_lb).any() or np.isfinite(self.u_ub).any())


@dataclass(eq=False)
class ProblemDerivatives:
    """The local model of a problem along ``(X, U)``: dynamics Jacobians and running cost derivatives at the ``T``
    running knots, terminal cost derivatives at the one terminal knot (``CostDerivatives`` of ``N = 1``, ``nu = 0``)."""

    dynamics: DiscreteDerivatives
    running: CostDerivatives
    terminal: CostDerivatives

    @property
    def cost(self) -> float:
        """The total cost at the knots they were computed at (the sum of the costs ``l`` they carry)."""
        return float(self.running.l.sum() + self.terminal.l[0])

    @classmethod
    def empty(cls, T: int, ndx: int, nu: int, nh: int | None = None) -> ProblemDerivatives:
        """Arrays for ``T`` running knots; with ``nh`` (the size of the base block: 6 for a floating base, 0 for a
        fixed one), room for the dynamics' ``EulerStructure`` too."""
        running = CostDerivatives(np.empty(T), np.empty((T, ndx)), np.empty((T, nu)), np.empty((T, ndx, ndx)),
                                  np.empty((T, ndx, nu)), np.empty((T, nu, nu)))
        structure = None if nh is None else EulerStructure.empty(T, nh)
        return cls(DiscreteDerivatives(np.empty((T, ndx, ndx)), np.empty((T, ndx, nu)), structure), running,
                   CostDerivatives.zeros(1, ndx, 0))


@dataclass(eq=False)
class _TermGroup:
    """A cost and its weight at the knots of ``runs`` (``(start, stop)`` pairs, in order); ``whole``: the whole cost
    of one run (``Problem._term_groups``)."""

    cost: CostModel
    weight: float
    runs: list[tuple[int, int]]
    whole: bool = False

    def __len__(self) -> int:
        return sum(b - a for a, b in self.runs)

    @cached_property
    def key(self) -> tuple:
        """The runs as a tuple (read once they are all in)."""
        return tuple(self.runs)

    def knots(self) -> slice | np.ndarray:
        """A slice for one run, else the knots' indices."""
        if len(self.runs) == 1:
            return slice(*self.runs[0])
        return np.concatenate([np.arange(a, b) for a, b in self.runs])


@dataclass(eq=False)
class _CostPlan:
    """How the running costs are evaluated: the built-in terms in one compiled table (``compiled_costs``; None when
    there are none), the other groups by their own calls, adding into the same knots."""

    compiled: CompiledCosts | None
    groups: list[_TermGroup]


def _terms(cost: CostModel) -> list[tuple[CostModel, float]]:
    """A cost as weighted terms: a sum's active terms, or the cost itself."""
    return [(term.cost, term.weight) for _, term in cost._active()] if isinstance(cost, CostSum) else [(cost, 1.0)]


def _term_key(term, weight: float, start: int) -> tuple:
    """What groups a cost term over runs of knots: the term and its weight; and the run, for a residual that reads
    its dynamics' evaluations of the run (``Residual.reads_dynamics``): those are kept per run."""
    if getattr(getattr(term, "residual", None), "reads_dynamics", False):
        return id(term), weight, start
    return id(term), weight


def _runs(objects: list) -> list[tuple[int, int, object]]:
    """Maximal runs of consecutive knots sharing one object: ``(start, stop, object)``."""
    runs, start = [], 0
    for k in range(1, len(objects) + 1):
        if k == len(objects) or objects[k] is not objects[start]:
            runs.append((start, k, objects[start]))
            start = k
    return runs


def _copy_into(out, result, names: Sequence[str]) -> None:
    """Copy a plug-in's result into the out views when it did not write them in place."""
    if result is out:
        return
    for name in names:
        getattr(out, name)[...] = getattr(result, name)


def _sharing(dyn: DiscreteDynamics, threads: int) -> dict:
    """The keyword that lets a dynamics share its knots by two threads: only integrated dynamics take one
    (``Field.shared_derivatives``); any other ``DiscreteDynamics`` keeps its own signature."""
    return {"threads": threads} if threads > 1 and isinstance(dyn, IntegratedDynamics) else {}


class Problem:
    """Initial state, horizon, running models and a terminal cost (module docstring).

    ``running`` is one ``ActionModel`` used at every knot (``horizon`` is then required) or a sequence of ``T``
    models (``horizon``, if given, must equal their number). All models must share the state space of ``x0`` and
    of ``terminal`` (a ``CostModel`` with ``nu = 0``) and one control size ``nu``. ``dynamics_sequence`` lists the
    dynamics of the ``T`` running knots (the solvers' forward pass rolls runs of one object out together).
    ``terminal_constraints`` (a ``ConstraintSet`` with ``nu = 0``) constrain the final state, as the running
    models' ``constraints`` their knots (``constraints``).
    """

    def __init__(self, x0: State, running: ActionModel | Sequence[ActionModel], terminal: CostModel,
                 horizon: int | None = None, terminal_constraints: ConstraintSet | None = None):
        if isinstance(running, ActionModel):
            if horizon is None:
                raise ValueError("Problem: horizon is required when one running model is given for every knot")
            models = [running] * self._horizon(horizon)
        else:
            models = list(running)
            if not models:
                raise ValueError("Problem: running must hold at least one ActionModel")
            if horizon is not None and self._horizon(horizon) != len(models):
                raise ValueError(f"Problem: horizon = {horizon} but {len(models)} running models were given")
        if not isinstance(models[0], ActionModel):
            raise ValueError(f"Problem: running model 0 must be an ActionModel, got {type(models[0]).__name__}")
        space = models[0].dynamics.state_space
        self.nu = models[0].dynamics.nu
        for k, m in enumerate(models):
            self._check_model(m, space, f"running model {k}")
        if self.nu == 0:
            raise ValueError("Problem: the dynamics have no controls (nu = 0): there is nothing to optimise")
        if not isinstance(terminal, CostModel):
            raise ValueError(f"Problem: terminal must be a CostModel, got {type(terminal).__name__}")
        if terminal.state_space is not None and not same_space(terminal.state_space, space):
            raise ValueError(f"Problem: the terminal cost's state space {terminal.state_space} differs from the "
                             f"dynamics' {space}")
        if terminal.nu != 0:
            raise ValueError(f"Problem: the terminal cost must have nu = 0, got {terminal.nu}")
        _check_constraints(terminal_constraints, space, 0, "Problem: terminal_constraints")
        space.check(x0)
        self.state_space = space
        self.ndx = space.ndx
        self.x0 = x0.copy()
        self.running = models
        self.terminal = terminal
        self.T = len(models)
        self.u_lb = np.stack([m.u_lb for m in models])
        self.u_ub = np.stack([m.u_ub for m in models])
        self.terminal_constraints = terminal_constraints
        # the compiled tables' parts of each term, kept from one table to the next (``CompiledCosts``)
        self._records: tuple[dict, dict] = ({}, {})
        self._terminal: tuple | None = None  # (the terminal terms' signature, _terminal_table)
        self._buffers: dict = {}  # the running tables' work arrays
        # [term groups, cost plan or None] by window (terms, runs of knots, dynamics runs), the current one
        # ``_window`` (key, entry): a receding horizon's cyclic gait comes back to the windows it has had, whose
        # grouping and table it keeps, the last WINDOWS_KEPT of them
        self._windows: OrderedDict[tuple, list] = OrderedDict()
        self._window: tuple | None = None
        self._parameters_scope: object | None = None  # ``unchanged_parameters``: a token while inside
        # "running" plan and "terminal" table -> (scope, value) found inside ``unchanged_parameters`` (``_in_scope``)
        self._scoped: dict[str, tuple] = {}
        self._group_knots()

    def _check_model(self, m, space: StateSpace, what: str) -> None:
        if not isinstance(m, ActionModel):
            raise ValueError(f"Problem: {what} must be an ActionModel, got {type(m).__name__}")
        if not same_space(m.dynamics.state_space, space):
            raise ValueError(f"Problem: {what} has the state space {m.dynamics.state_space}, model 0 has {space}")
        if m.dynamics.nu != self.nu:
            raise ValueError(f"Problem: {what} has nu = {m.dynamics.nu}, model 0 has nu = {self.nu}")

    def _group_knots(self) -> None:
        """The runs of knots that share a dynamics, a cost or a constraint set (module docstring)."""
        self._scoped.clear()
        models = self.running
        self.dynamics_sequence = [m.dynamics for m in models]
        self._dynamics_runs = _runs(self.dynamics_sequence)
        self._cost_runs = _runs([m.cost for m in models])
        self.has_control_limits = bool(np.isfinite(self.u_lb).any() or np.isfinite(self.u_ub).any())
        self._constraint_runs = [run for run in _runs([m.constraints for m in models]) if run[2] is not None]
        # what of a window (``_windows``) only a shift changes: its runs of costs and of dynamics
        self._runs_key = (tuple((a, b) for a, b, _ in self._cost_runs),
                          tuple((a, b, id(dyn)) for a, b, dyn in self._dynamics_runs))

    @property
    def dynamics_runs(self) -> list[tuple[int, int, DiscreteDynamics]]:
        """The maximal runs ``(start, stop, dynamics)`` of running knots sharing one dynamics object, in order (read
        them, do not change them)."""
        return self._dynamics_runs

    def shift(self, model: ActionModel) -> None:
        """Recede the horizon by one knot, in place: knot 0 leaves, every knot moves one place forward and ``model``
        becomes the last running knot (a receding-horizon controller's step). No model is rebuilt or copied: the
        knots keep their objects, only the grouping into runs is read again (``O(T)`` list work, no array work but
        the two bound rows)."""
        self._check_model(model, self.state_space, "the shifted-in model")
        self.running.pop(0)
        self.running.append(model)
        for bound, new in ((self.u_lb, model.u_lb), (self.u_ub, model.u_ub)):
            bound[:-1] = bound[1:]
            bound[-1] = new
        self._group_knots()

    def set_initial_state(self, x: State) -> None:
        """Write ``x`` into ``x0`` (checked: the problem's space, finite), in place (a controller's measured state)."""
        self.state_space.check(x)
        if self.x0.H is not None:
            self.x0.H[...] = x.H
        self.x0.s[...] = x.s
        self.x0.v[...] = x.v

    @staticmethod
    def _horizon(horizon) -> int:
        if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
            raise ValueError(f"Problem: horizon must be a positive integer, got {horizon!r}")
        return int(horizon)

    def __repr__(self) -> str:
        return (f"Problem(T={self.T}, {self.state_space}, nu={self.nu}, {len(self._dynamics_runs)} dynamics group(s), "
                f"{len(self._cost_runs)} cost group(s))")

    @property
    def horizon(self) -> int:
        return self.T

    # ---- checks ---------------------------------------------------------------------------------------------

    def check_controls(self, U) -> np.ndarray:
        """``U`` as a finite float array of shape ``(T, nu)``, or ValueError."""
        U = np.asarray(U, dtype=np.float64)
        if U.shape != (self.T, self.nu):
            raise ValueError(f"Problem: controls must have shape ({self.T}, {self.nu}), got {U.shape}")
        if not np.all(np.isfinite(U)):
            raise ValueError("Problem: controls contain NaN or inf")
        return U

    def check_trajectory(self, X: Trajectory) -> Trajectory:
        """Raise ValueError unless ``X`` is a finite trajectory of ``T + 1`` states of the problem's space."""
        if not isinstance(X, Trajectory):
            raise ValueError(f"Problem: expected a Trajectory, got {type(X).__name__}")
        if len(X) != self.T + 1:
            raise ValueError(f"Problem: the trajectory must have T + 1 = {self.T + 1} knots, got {len(X)}")
        sp = self.state_space
        if (X.H is not None) != sp.floating_base or X.s.shape != (self.T + 1, sp.n) or X.v.shape != (self.T + 1, sp.nv):
            raise ValueError(f"Problem: the trajectory does not belong to {sp}: H {None if X.H is None else X.H.shape}, "
                             f"s {X.s.shape}, v {X.v.shape}")
        if not X.is_finite():
            raise ValueError("Problem: the trajectory contains NaN or inf")
        return X

    # ---- evaluation ---------------------------------------------------------------------------------------

    def rollout(self, U, x0: State | None = None) -> Trajectory:
        """States ``x_0 .. x_T`` from ``x0`` (default: the problem's) under the controls ``U``: the solvers' forward
        pass without feedback, one compiled call per run of knots sharing a dynamics with a compiled step. A
        non-finite or invalid state or control, or a step that fails, raises ValueError naming the knot, what failed
        and whether the rollout diverged on the way there."""
        U = self.check_controls(U)
        X = self.state_space.trajectory(self.T + 1)
        X[0] = self.x0 if x0 is None else x0
        for a, b, dyn in self._dynamics_runs:
            trial = open_loop(dyn, X[a], U[a:b])
            if not trial.ok:
                raise trial.error("Problem.rollout", a, getattr(dyn, "dt", None))
            X[a + 1:b + 1] = trial.X[1:]
        return X

    def step(self, X: Trajectory, U) -> Trajectory:
        """Knot-wise ``f_k(X[k], U[k])`` for the ``T`` running knots (not a rollout), one call per dynamics group."""
        return self._step_into(X, U, self.state_space.trajectory(self.T), every=True)

    def _step_into(self, X: Trajectory, U, out: Trajectory, every: bool) -> Trajectory:
        """``step`` into ``out``: every run, or (``every`` False) the runs whose dynamics do not step with their
        Jacobians (``DiscreteDynamics.steps_with_derivatives``), the others' knots left as they are."""
        U = np.asarray(U, dtype=np.float64)
        for a, b, dyn in self._dynamics_runs:
            if every or not dyn.steps_with_derivatives:
                out[a:b] = dyn.step_trajectory(X[a:b], U[a:b])
        return out

    def _term_groups(self) -> list[_TermGroup]:
        """The running costs as groups of knots evaluated together: a term of a ``CostSum`` that several runs hold
        (the very object, with the same weight) with the knots of all of them (a posture term shared by the phases of
        a gait is one call over all their knots, not one per phase), or a cost (not a sum) that several runs hold;
        the cost of a run that shares none of its terms, whole, with that run's knots (``whole``: the cost's own
        single pass). A term whose residual reads its dynamics' evaluations (contact forces) is grouped per run: the
        dynamics kept them per run (``_term_key``)."""
        # read at every evaluation: the terms as they stand, without checking their weights (done on a change)
        signature = tuple(pair for _, _, cost in self._cost_runs for pair in (
            [(id(term.cost), term.weight) for term in cost.costs.values()] if isinstance(cost, CostSum)
            else [(id(cost), 1.0)]))
        current = self._window
        if current is not None and current[0][1] is self._runs_key and current[0][0] == signature:
            return current[1][0]  # the current window (comparing is cheaper than hashing)
        window = (signature, self._runs_key)
        kept = self._windows.get(window)
        if kept is not None:
            self._windows.move_to_end(window)
            self._window = (window, kept)
            return kept[0]
        terms_of = [_terms(cost) for _, _, cost in self._cost_runs]
        keys = [[_term_key(term, weight, a) for term, weight in terms]
                for (a, _, _), terms in zip(self._cost_runs, terms_of)]
        count: dict[tuple, int] = {}
        for run_keys in keys:
            for key in run_keys:
                count[key] = count.get(key, 0) + 1
        groups: list[_TermGroup] = []
        shared: dict[tuple, _TermGroup] = {}
        for (a, b, cost), terms, run_keys in zip(self._cost_runs, terms_of, keys):
            if all(count[key] == 1 for key in run_keys):
                groups.append(_TermGroup(cost, 1.0, [(a, b)], whole=True))
                continue
            for (term, weight), key in zip(terms, run_keys):
                group = shared.get(key)
                if group is None:
                    group = shared[key] = _TermGroup(term, weight, [])
                    groups.append(group)
                group.runs.append((a, b))
        self._windows[window] = entry = [groups, None]
        self._window = (window, entry)
        while len(self._windows) > WINDOWS_KEPT:
            self._windows.popitem(last=False)
        return groups

    def _cost_plan(self) -> _CostPlan:
        """The term groups (``_term_groups``) split into a compiled table of the terms ``compilable`` takes (on the
        model of the first robot residual among them) and the groups left to their own calls; the cost of a run none
        of whose terms compiles stays whole."""
        return self._in_scope("running", self._window_cost_plan)

    def _window_cost_plan(self) -> _CostPlan:
        groups = self._term_groups()
        entry = self._window[1]
        if entry[1] is None:
            entry[1] = self._new_cost_plan(groups)
        return entry[1]

    def _in_scope(self, what: str, find):
        """``find()``, kept for the rest of the current ``unchanged_parameters`` scope under ``what`` (found again in
        the next scope, or at every call outside one)."""
        kept = self._scoped.get(what)
        if kept is not None and kept[0] is self._parameters_scope:
            return kept[1]
        value = find()
        if self._parameters_scope is not None:
            self._scoped[what] = (self._parameters_scope, value)
        return value

    def _new_cost_plan(self, groups: list[_TermGroup]) -> _CostPlan:
        items, rest = [], []
        terms_of = [_terms(group.cost) for group in groups]
        model = table_model([cost for terms in terms_of for cost, _ in terms])
        takes: dict[int, bool] = {}
        for group, terms in zip(groups, terms_of):
            knots = np.arange(*group.runs[0]) if len(group.runs) == 1 else \
                np.concatenate([np.arange(a, b) for a, b in group.runs])
            terms = [(cost, weight * group.weight) for cost, weight in terms]
            for cost, _ in terms:
                if id(cost) not in takes:
                    takes[id(cost)] = compilable(cost, model)
            taken = [takes[id(cost)] and self._reads_its_knots(cost, group.runs) for cost, _ in terms]
            if not any(taken):
                rest.append(group)
                continue
            for (cost, weight), compiled in zip(terms, taken):
                if compiled:
                    items.append((cost, weight, knots))
                else:
                    rest.append(_TermGroup(cost, weight, list(group.runs)))
        table = CompiledCosts(items, self.state_space, self.nu, self.T, model, self._records[0], self._dynamics_runs,
                              self._buffers) if items else None
        return _CostPlan(table, rest)

    def _reads_its_knots(self, cost, runs: list[tuple[int, int]]) -> bool:
        """Whether a cost that reads its dynamics' evaluations (contact forces) reads those of the dynamics of its
        knots, as a table gathers them; any other cost does."""
        dynamics = getattr(getattr(cost, "residual", None), "dynamics", None)
        return dynamics is None or all(d is dynamics for a, b in runs for d in self.dynamics_sequence[a:b])

    def _terminal_table(self) -> CompiledCosts | None:
        """The terminal cost as a compiled table when every term of it compiles, else None (its own call)."""
        return self._in_scope("terminal", self._find_terminal_table)

    def _find_terminal_table(self) -> CompiledCosts | None:
        terms = _terms(self.terminal)
        key = tuple((id(cost), weight) for cost, weight in terms)
        if self._terminal is not None and self._terminal[0] == key:
            return self._terminal[1]
        model = table_model([cost for cost, _ in terms])
        table = None
        if terms and all(compilable(cost, model) for cost, _ in terms):
            table = CompiledCosts([(cost, weight, np.zeros(1, np.int64)) for cost, weight in terms], self.state_space,
                                  0, 1, model, self._records[1])
        self._terminal = (key, table)
        return table

    def _gathered(self, X: Trajectory, U: np.ndarray, stack: ExitStack):
        """``knots -> (index, X[index], U[index])`` for a group's runs, each set of knots taken once per call and
        checked once for all the terms that read it (``KnotsChecked``, closed with ``stack``)."""
        taken: dict[tuple, tuple] = {}

        def gather(group: _TermGroup) -> tuple:
            key = group.key
            if key not in taken:
                knots = group.knots()
                Xg, Ug = X[knots], U[knots]
                stack.enter_context(KnotsChecked(self.state_space, self.nu, Xg, Ug, "Problem"))
                taken[key] = (knots, Xg, Ug)
            return taken[key]

        return gather

    def running_costs(self, X: Trajectory, U, threads: int = 1) -> np.ndarray:
        """``l_k(X[k], U[k])`` for ``k < T``, shape ``(T,)``: one call per term group (``_term_groups``), the compiled
        terms' knots shared by ``threads`` threads."""
        U = np.asarray(U, dtype=np.float64)
        out = np.zeros(self.T)
        plan = self._compiled_running(X, U, out, threads)
        with ExitStack() as stack:
            gather = self._gathered(X, U, stack)
            for group in plan.groups:
                knots, Xg, Ug = gather(group)
                # np.add.at: a term held under two names of one run lists the run twice
                np.add.at(out, knots, group.weight * group.cost.value(Xg, Ug))
        return out

    @contextmanager
    def unchanged_parameters(self):
        """A scope in which the cost terms and their parameters (references, weights, bounds, multipliers) do not
        change but where ``parameters_changed`` says so: each compiled table copies the parameters at its first
        evaluation inside, not at every one (``CompiledCosts.add``), and the grouping of the terms into tables is
        looked up once (``_cost_plan``, ``_terminal_table``). A solver's iteration is one: its linearization and
        line-search trials evaluate the same costs at other knots (on the solo12 trot the copies were 4 % of a
        solve). Nested, the outer scope holds."""
        if self._parameters_scope is not None:
            yield
            return
        self._parameters_scope = object()
        try:
            yield
        finally:
            self._parameters_scope = None

    def parameters_changed(self) -> None:
        """Inside ``unchanged_parameters``: the parameters were changed in place (an augmented Lagrangian's
        multipliers and penalty); each table copies them again at its next evaluation. Outside, nothing to do."""
        if self._parameters_scope is not None:
            self._parameters_scope = object()

    def _compiled_running(self, X: Trajectory, U: np.ndarray, out: np.ndarray | CostDerivatives,
                          threads: int = 1) -> _CostPlan:
        """Write the compiled running terms into ``out`` (values or derivatives, every knot written, the knots shared
        by ``threads`` threads) and return the plan; the plan is built again when a term's residual or activation
        was replaced by one the table does not take."""
        plan = self._cost_plan()
        if plan.compiled is None:
            return plan
        check_knots(self.state_space, self.nu, X[:self.T], U, "Problem")
        try:
            plan.compiled.add(X, U, out, clear=True, threads=threads, scope=self._parameters_scope)
        except TableChanged:
            self._window[1][1] = None
            self._scoped.pop("running", None)
            return self._compiled_running(X, U, out, threads)
        return plan

    def terminal_cost(self, X: Trajectory) -> float:
        """``l_T(X[T])``."""
        last = X[self.T:self.T + 1]
        value = np.zeros(1)
        if not self._compiled_terminal(last, value):
            return float(self.terminal.value(last, None)[0])
        return float(value[0])

    def _compiled_terminal(self, last: Trajectory, out: np.ndarray | CostDerivatives) -> bool:
        """Write the terminal cost into ``out`` by its compiled table, if it has one (``_terminal_table``)."""
        table = self._terminal_table()
        if table is None:
            return False
        check_knots(self.state_space, 0, last, None, "Problem: terminal cost")
        try:
            table.add(last, None, out, clear=True, scope=self._parameters_scope)
        except TableChanged:
            self._terminal = None
            self._scoped.pop("terminal", None)
            return self._compiled_terminal(last, out)
        return True

    def cost(self, X: Trajectory, U, threads: int = 1) -> float:
        """The total cost ``Σ_k l_k(X[k], U[k]) + l_T(X[T])``, the compiled running terms' knots shared by
        ``threads`` threads."""
        return float(self.running_costs(X, U, threads).sum()) + self.terminal_cost(X)

    # ---- constraints ----------------------------------------------------------------------------------------

    @property
    def has_constraints(self) -> bool:
        """Whether any knot carries a constraint."""
        return any(len(c) for _, _, c in self.constraint_groups())

    def constraint_groups(self) -> list[tuple[int, int, ConstraintSet]]:
        """``(start, stop, set)`` for each run of running knots sharing one ``ConstraintSet``, then ``(T, T + 1,
        terminal_constraints)`` when there are terminal constraints."""
        groups = list(self._constraint_runs)
        if self.terminal_constraints is not None:
            groups.append((self.T, self.T + 1, self.terminal_constraints))
        return groups

    def violations(self, X: Trajectory, U) -> dict[str, Violation]:
        """The largest violation of each named constraint over all the knots that carry it (a name shared by
        several sets, e.g. a friction cone in every stance phase, is one entry), in the constraint's unit."""
        U = np.asarray(U, dtype=np.float64)
        return largest_violations((name, a, v, constraints[name].scale) for a, b, constraints in self.constraint_groups()
                                  for name, v in constraints.violations(X[a:b], None if a == self.T else U[a:b]).items())

    def contradictory_constraints(self) -> list[str]:
        """``"name (knots a-b)"`` for every constraint with a row whose ``lower > upper``: no solution can meet it."""
        found = []
        for a, b, constraints in self.constraint_groups():
            for name, c in constraints.items():
                if c.contradictory.any():
                    row = int(np.argmax(c.contradictory))
                    found.append(f"{name} (knots {a}-{b - 1}, row {row}: lower {c.lower[row]:g} > upper "
                                 f"{c.upper[row]:g})")
        return found

    def gaps(self, X: Trajectory, U, derivatives: ProblemDerivatives | None = None) -> np.ndarray:
        """``(T + 1, ndx)``: ``x0 ⊖ X[0]`` and ``f_k(X[k], U[k]) ⊖ X[k+1]`` (zero on a rollout). ``derivatives``:
        those ``derivatives`` has just computed at ``(X, U)`` (a solver's linearization), whose dynamics wrote the
        steps they compute with their Jacobians (``DiscreteDerivatives.stepped``, the same numbers): only the other
        runs are stepped here, into the same rows of ``derivatives.dynamics.stepped``."""
        out = np.empty((self.T + 1, self.ndx))
        self.initial_gap(X, out[:1])
        stepped = None if derivatives is None else derivatives.dynamics.stepped
        tangent_difference(X[1:], self.step(X, U) if stepped is None else self._step_into(X, U, stepped, every=False),
                           out[1:])
        return out

    def initial_gap(self, X: Trajectory, out: np.ndarray | None = None) -> np.ndarray:
        """``x0 ⊖ X[0]`` as a (1, ndx) row, the first of ``gaps``: the only one the initial state enters."""
        out = np.empty((1, self.ndx)) if out is None else out
        tangent_difference(X[:1], Trajectory.repeat(self.x0, 1), out)
        return out

    def empty_derivatives(self) -> ProblemDerivatives:
        """The arrays ``derivatives`` fills, to reuse from one call to the next, with room for the steps its
        dynamics compute with their Jacobians (``gaps``)."""
        out = ProblemDerivatives.empty(self.T, self.ndx, self.nu, 6 if self.state_space.floating_base else 0)
        out.dynamics.stepped = self.state_space.trajectory(self.T)
        return out

    def derivatives(self, X: Trajectory, U, out: ProblemDerivatives | None = None,
                    threads: int = 1) -> ProblemDerivatives:
        """``F_x, F_u`` and the running cost derivatives at every running knot, the terminal cost derivatives at
        ``X[T]``: one ``trajectory_derivatives`` call per dynamics group and one ``derivatives`` call per cost group.
        ``out`` (from ``empty_derivatives``) is overwritten when given. With ``threads`` 2 (a solver's
        ``SolverOptions.threads``) the dynamics' knots are shared by two threads inside each compiled call
        (``_jit.split_kernel``). The dynamics' come first: the contact costs read the contact derivatives the
        dynamics keep."""
        U = np.asarray(U, dtype=np.float64)
        if out is None:
            out = self.empty_derivatives()
        self._dynamics_derivatives(X, U, out.dynamics, threads)
        self.cost_derivatives(X, U, out, threads)
        return out

    def cost_derivatives(self, X: Trajectory, U: np.ndarray, out: ProblemDerivatives, threads: int = 1) -> None:
        """The running and terminal cost derivatives, into ``out`` (``derivatives`` without the dynamics': for a
        solver whose costs changed at the same guess, e.g. an augmented Lagrangian's multipliers); the compiled
        terms' knots shared by ``threads`` threads."""
        names = ("l", "l_x", "l_u", "l_xx", "l_xu", "l_uu")
        r = out.running
        # the compiled terms write every knot (zero without a term), whole runs' costs write theirs, other terms add
        plan = self._compiled_running(X, U, r, threads)
        groups = plan.groups
        if plan.compiled is None and not all(group.whole for group in groups):
            for name in names:
                getattr(r, name)[...] = 0.0
        with ExitStack() as stack:
            gather = self._gathered(X, U, stack)
            for group in groups:
                knots, Xg, Ug = gather(group)
                contiguous = isinstance(knots, slice)
                if not contiguous and isinstance(group.cost, ResidualCost):  # adds into its knots' rows in place
                    group.cost._add(group.cost.residual.derivatives(Xg, Ug), group.weight, r, rows=knots)
                    continue
                # one run: the term adds into the running arrays' view; several: into a buffer scattered to their knots
                target = CostDerivatives(*(getattr(r, name)[knots] for name in names)) if contiguous else \
                    CostDerivatives.zeros(len(group), self.ndx, self.nu)
                if group.whole:
                    _copy_into(target, group.cost.derivatives(Xg, Ug, out=target), names)
                elif isinstance(group.cost, ResidualCost):
                    group.cost._add(group.cost.residual.derivatives(Xg, Ug), group.weight, target)
                else:
                    d = group.cost.derivatives(Xg, Ug)
                    for name in names:
                        getattr(target, name)[...] += group.weight * getattr(d, name)
                if not contiguous:
                    for name in names:
                        np.add.at(getattr(r, name), knots, getattr(target, name))
        last = X[self.T:self.T + 1]
        if not self._compiled_terminal(last, out.terminal):
            _copy_into(out.terminal, self.terminal.derivatives(last, None, out=out.terminal), names)

    def _dynamics_derivatives(self, X: Trajectory, U: np.ndarray, F: DiscreteDerivatives,
                              threads: int = 1) -> None:
        """``F_x, F_u`` (and their structure) at every running knot, into ``F``, and ``F.stepped`` (when there) at the
        knots of the dynamics that step with their Jacobians; integrated dynamics share their knots by ``threads``
        threads."""
        S = F.structure
        if S is not None:
            S.dt[:] = np.nan  # what a dynamics does not fill has no known structure
        stepped = F.stepped
        for a, b, dyn in self._dynamics_runs:
            structure = None if S is None else EulerStructure(*(s[a:b] for s in S))
            view = DiscreteDerivatives(F.F_x[a:b], F.F_u[a:b], structure,
                                       stepped[a:b] if stepped is not None and dyn.steps_with_derivatives else None)
            _copy_into(view, dyn.trajectory_derivatives(X[a:b], U[a:b], out=view, **_sharing(dyn, threads)),
                       ("F_x", "F_u"))

    def dynamics_contraction(self, X: Trajectory, U, LAM, threads: int = 1) -> StepHessian:
        """The second-order dynamics term of DDP at every running knot: the symmetric Hessian in ``(dx, du)`` of
        ``LAM[k]ᵀ log(f_k(X[k], U[k])⁻¹ f_k(X[k] exp dx, U[k] + du))``, one ``trajectory_hessian_contraction`` call
        per dynamics group. ``LAM`` is ``(T, ndx)``, the value gradients at the next knots. Raises NotImplementedError
        where a dynamics has no second-order term (``DiscreteDynamics``' default). Integrated dynamics share their
        knots by ``threads`` threads and write their knots' blocks in place."""
        U = np.asarray(U, dtype=np.float64)
        LAM = np.asarray(LAM, dtype=np.float64)
        if LAM.shape != (self.T, self.ndx):
            raise ValueError(f"Problem.dynamics_contraction: LAM must have shape ({self.T}, {self.ndx}), got {LAM.shape}")
        T, ndx, nu = self.T, self.ndx, self.nu
        out = StepHessian(np.empty((T, ndx, ndx)), np.empty((T, ndx, nu)), np.empty((T, nu, nu)))
        for a, b, dyn in self._dynamics_runs:
            if isinstance(dyn, IntegratedDynamics):
                view = StepHessian(out.xx[a:b], out.xu[a:b], out.uu[a:b])
                dyn.trajectory_hessian_contraction(X[a:b], U[a:b], LAM[a:b], threads, out=view)
                continue
            h = dyn.trajectory_hessian_contraction(X[a:b], U[a:b], LAM[a:b])
            out.xx[a:b], out.xu[a:b], out.uu[a:b] = h.xx, h.xu, h.uu
        return out

    def initial_guess(self, us=None, xs: Trajectory | None = None) -> tuple[Trajectory, np.ndarray]:
        """Checked copies of a guess: ``us`` defaults to zeros, ``xs`` to the rollout of ``us`` (not checked for
        feasibility: FDDP starts from infeasible guesses)."""
        U = np.zeros((self.T, self.nu)) if us is None else self.check_controls(us).copy()
        if xs is None:
            return self.rollout(U), U
        X = self.check_trajectory(xs)
        return X.copy(), U

    def constant_trajectory(self, x: State | None = None) -> Trajectory:
        """``T + 1`` copies of ``x`` (default ``x0``): FDDP's simplest infeasible guess."""
        x = self.x0 if x is None else x
        self.state_space.check(x)
        return Trajectory.repeat(x, self.T + 1)

    def forget_evaluations(self) -> None:
        """Drop the evaluations the dynamics keep for equal inputs (``DiscreteDynamics.forget_evaluations``): a solve
        repeated from the same guess then computes everything again, as a first one does (what a benchmark of
        repeated solves must time)."""
        for dyn in {id(d): d for d in self.dynamics_sequence}.values():
            dyn.forget_evaluations()

    def time_steps(self) -> np.ndarray:
        """``dt`` of each running knot, shape ``(T,)``."""
        return np.array([float(m.dynamics.dt) for m in self.running])


__all__ = ["ActionModel", "Problem", "ProblemDerivatives", "knots", "same_space",
           "tangent_difference", "tangent_integrate"]
