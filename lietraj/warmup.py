"""Compile the kernels of a solve ahead of time, on every core: ``lietraj warmup``, and the first ``lietraj solve``.

numba compiles each kernel on its first call and caches it on disk (``lietraj/_jit.py``); from an empty cache a
first solve spends most of its time compiling, one kernel after the other, on one core. The kernels of one solver
iteration fall into independent stages, each of which can be run on any trajectory of the problem (its default
guess will do) without the others:

- ``evaluate``: the rollout of the controls, the cost and the gaps (the dynamics' step, the costs' values);
- ``contact_derivatives``: the derivatives of the contact dynamics alone, given zero accelerations and forces as
  their solution (``contact_dynamics_derivatives(..., dynamics=)``), so that they compile without the contact
  dynamics' own kernel, which ``evaluate`` compiles;
- ``cost_derivatives``: the gradients and Hessians of the costs;
- ``derivatives``: the Jacobians of the dynamics and the costs' derivatives, as the solver asks for them;
- ``second_order``: DDP's second-order dynamics term (``ddp`` only);
- ``backward``: the Riccati backward pass (the same kernel for every problem);
- ``forward``: the solvers' forward pass, the closed-loop rollout of a policy;
- ``split``: on two threads only, the split kernels (``_jit.split_kernel``) of the costs and the fields, which call
  the kernels the other stages compile.

``warm_up`` compiles stages of problems in worker processes, one per core, which write the kernels to numba's
disk cache; ``ColdStart`` does it for the first solve of a problem in ``lietraj solve``. A worker started with the
command compiles the Riccati sweep, which needs no problem, while the command builds the problem; it then builds
the problem too, loading the kinematics the command compiled, and compiles the derivatives (and DDP's term), the
longest stage, starting with those of the contact dynamics, while the command compiles the contact dynamics
(``evaluate``), the costs' derivatives and the forward pass, which the worker then loads. The solve loads
everything from the cache. Both processes compile the small helpers they share (numba keeps those per process); the
algorithms' cores are kernels, cached on disk, which the slower process loads from the faster one's cache. A stamp
in the cache directory records which (problem, robot, solver) have been compiled for the installed sources, so
that later runs skip all this.
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np
import numba.core.event

STAGES = ("evaluate", "contact_derivatives", "cost_derivatives", "step_jacobians", "derivatives", "second_order",
          "backward", "forward", "split")
# The worker's stages; the command runs the others, in STAGES' order.
_WORKER_STAGES = ("backward", "contact_derivatives", "derivatives", "second_order")
# The worker's stages whose kernels the split kernels call: a first solve's command compiles those (``split``) once
# these are done.
_BEFORE_SPLIT = ("backward", "contact_derivatives")


def split_stages(stages) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``stages`` as the two parts two processes compile side by side: the worker's, and the others (in order)."""
    return tuple(s for s in stages if s in _WORKER_STAGES), tuple(s for s in stages if s not in _WORKER_STAGES)


@dataclass(frozen=True)
class Spec:
    """One ready problem to compile: its name, robot (None: the problem's default), solver and threads (two add the
    split kernels, ``_jit.split_kernel``). Its other parameters (horizon, time step, depth...) change the sizes of
    the arrays, not the kernels."""

    problem: str
    robot: str | None = None
    solver: str = "fddp"
    threads: int = 1

    def __str__(self) -> str:
        robot = f" --robot {self.robot}" if self.robot else ""
        threads = f" --threads {self.threads}" if self.threads > 1 else ""
        return f"{self.problem}{robot} --solver {self.solver}{threads}"


def stages_for(solver: str, threads: int = 1) -> tuple[str, ...]:
    """The stages a solver's iterations run on ``threads`` threads (DDP adds the second-order term; two threads, the
    split kernels)."""
    return tuple(s for s in STAGES if (s != "second_order" or solver == "ddp") and (s != "split" or threads > 1))


class CompileNotice(numba.core.event.Listener):
    """Prints one line on ``stream`` when numba starts compiling for the first time in this process, so that a
    first run does not sit in silence, and then, while the compiling goes on, a line as a kernel's compile starts
    or ends at most every ``every`` seconds (how many kernels, how long, which one: a cold start compiles for tens
    of seconds, some kernels for several). ``install()`` registers it for numba's compile events, which numba's
    compiler lock serialises."""

    def __init__(self, stream: TextIO | None = None, every: float = 10.0):
        self.stream = stream
        self.every = every
        self.shown = False
        self._depth = 0  # a kernel's compile compiles the helpers it calls: events nest
        self._kernels = 0
        self._started = self._reported = 0.0

    def show(self, what: str = "") -> None:
        if not self.shown:
            self.shown = True
            self._started = self._reported = time.perf_counter()
            print(f"compiling kernels, first run only{what} (`lietraj warmup` compiles them ahead of time)",
                  file=self.stream or sys.stderr, flush=True)

    def on_start(self, event) -> None:
        self.show()
        if self._depth == 0:
            self._report(event, "now")
        self._depth += 1

    def on_end(self, event) -> None:
        self._depth = max(self._depth - 1, 0)
        if self._depth == 0:
            self._kernels += 1
            self._report(event, "the last")

    def _report(self, event, which: str) -> None:
        """A progress line, if ``every`` seconds passed since the last line, naming the kernel of ``event``."""
        now = time.perf_counter()
        if now - self._reported < self.every:
            return
        self._reported = now
        dispatcher = (event.data or {}).get("dispatcher")
        name = getattr(getattr(dispatcher, "py_func", None), "__name__", "")
        kernels = f"{self._kernels} kernel" + ("s" if self._kernels != 1 else "")
        print(f"  ... {kernels} compiled in {now - self._started:.0f} s" + (f" ({which}: {name})" if name else ""),
              file=self.stream or sys.stderr, flush=True)

    def install(self) -> CompileNotice:
        numba.core.event.register("numba:compile", self)
        return self


# ---- stamps: which specs the cache holds for these sources -----------------------------------------------------

@functools.cache
def _sources_key() -> str:
    """A hash of lietraj's source files (path, size, modification time): numba's cache is invalidated by the
    same stamps, so a stamp written for other sources means nothing. Once per process, as numba reads a module's
    stamps when the module is imported (walking the ~120 files took 1.5-2.5 ms, most of a batch's warm-cache
    check)."""
    root = Path(__file__).parent
    h = hashlib.sha1()
    for p in sorted(root.rglob("*.py")):
        st = p.stat()
        h.update(f"{p.relative_to(root)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:16]


def _stamp(spec: Spec) -> Path:
    """The stamp file of ``spec``, in the cache directory of the kernels (numba's: beside the sources, or under
    ``NUMBA_CACHE_DIR``), so that clearing the cache clears the stamps too."""
    from lietraj.optimal_control.solvers.riccati import riccati_sweep

    key = hashlib.sha1(f"{spec}|{_sources_key()}".encode()).hexdigest()[:16]
    return Path(riccati_sweep._cache._cache_path) / f"lietraj-warm-{key}.nbi"


def is_warm(spec: Spec) -> bool:
    """Whether a solve of ``spec`` has compiled (and cached) its kernels for the installed sources."""
    try:
        return _stamp(spec).exists()
    except (AttributeError, OSError):
        return True  # no cache to look into: nothing to warm up in parallel


def mark_warm(spec: Spec) -> None:
    try:
        path = _stamp(spec)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{spec}\n")
    except (AttributeError, OSError):
        pass


# ---- the stages -------------------------------------------------------------------------------------------------

def _guess(problem, xs0, us0):
    """The trajectory the stages run on: the example's guess, its states or else the rollout of its controls
    (the kernels' types do not depend on which)."""
    us = np.zeros((problem.T, problem.nu)) if us0 is None else np.asarray(us0, dtype=np.float64)
    if xs0 is not None:
        return xs0, us
    with np.errstate(all="ignore"):
        try:
            return problem.rollout(us), us
        except (ValueError, ArithmeticError):
            return problem.constant_trajectory(), us


def run_stages(problem, xs0, us0, solver: str, stages) -> None:
    """Run ``stages`` (names of ``STAGES``) of ``solver`` once on ``problem`` at its guess ``(xs0, us0)``:
    every kernel they call is compiled and cached. A stage that fails numerically at the guess (a rollout that
    diverges) has compiled its kernels all the same, and the next stage runs."""
    xs, us = _guess(problem, xs0, us0)
    steps = {
        "evaluate": lambda: (problem.cost(xs, us), problem.rollout(us)),
        "contact_derivatives": lambda: _contact_derivatives(problem, xs, us),
        "cost_derivatives": lambda: problem.cost_derivatives(xs, us, problem.empty_derivatives()),
        "step_jacobians": lambda: _step_jacobians(problem, xs),
        "derivatives": lambda: problem.derivatives(xs, us, out=problem.empty_derivatives()),
        "second_order": lambda: problem.dynamics_contraction(xs, us, np.zeros((problem.T, problem.ndx))),
        "backward": lambda: _backward(problem.has_control_limits),
        "forward": lambda: _rollout(problem, xs, us, problem.gaps(xs, us) if solver == "fddp" else None),
        "split": lambda: _split(problem, xs, us, solver),
    }
    for stage in stages:
        with np.errstate(all="ignore"):
            try:
                steps[stage]()
            except (ValueError, ArithmeticError):
                pass


def _step_jacobians(problem, xs) -> None:
    """The Euler step's Jacobian kernel on zero field derivatives: it needs no field, so the command compiles it
    while the worker compiles the contact derivatives that the step's field needs (the worker's ``derivatives``
    stage then loads it)."""
    from lietraj.optimal_control.dynamics.euler import EulerStructure, euler_jacobians
    from lietraj.optimal_control.dynamics.field import FieldDerivatives

    nv, nu, ndx = xs.v.shape[1], problem.nu, problem.ndx
    d = FieldDerivatives(np.zeros((1, nv)), np.zeros((1, nv, nv)), np.zeros((1, nv, nv)), np.zeros((1, nv, nu)))
    euler_jacobians(0.01, xs[:1], d, np.empty((1, ndx, ndx)), np.empty((1, ndx, nu)),
                    EulerStructure.empty(1, 0 if xs.H is None else 6))


def _split(problem, xs, us, solver: str) -> None:
    """The costs' values and derivatives, and the fields' derivatives (and DDP's term) at two knots of each field,
    on two threads: their split kernels (``_jit.split_kernel``), which call the one-thread kernels of the stages
    ``_BEFORE_SPLIT``, ``evaluate`` and ``cost_derivatives``."""
    problem.cost(xs, us, 2)
    problem.cost_derivatives(xs, us, problem.empty_derivatives(), 2)
    for t, dynamics in _firsts(problem.dynamics_sequence):
        field = getattr(dynamics, "field", None)
        if field is None or t + 2 > problem.T:
            continue
        X, U = xs[t:t + 2], us[t:t + 2]
        field.shared_derivatives(X, U, 2)
        if solver == "ddp":
            try:
                field.shared_hessian_contraction(X, U, np.zeros((2, field.state_space.nv)), 2)
            except NotImplementedError:  # DDP will say so
                pass


def _firsts(objects) -> list[tuple[int, object]]:
    """``(index, object)`` of the first occurrence of each distinct object of a sequence."""
    seen: set[int] = set()
    return [(i, o) for i, o in enumerate(objects) if id(o) not in seen and not seen.add(id(o))]


def _contact_derivatives(problem, xs, us) -> None:
    """The contact-dynamics derivatives of each contact field of ``problem``, at one knot of each, with zero
    accelerations and forces given as the contact dynamics' solution: their kernel compiles, not the solution's
    (the kernels' types do not depend on the values)."""
    from lietraj.dynamics.contacts.contact_dynamics import ContactDynamicsResult
    from lietraj.dynamics.contacts.contact_dynamics_derivatives import contact_dynamics_derivatives
    from lietraj.optimal_control.dynamics.contact_field import ContactField

    for t, dynamics in _firsts(problem.dynamics_sequence):
        field = getattr(dynamics, "field", None)
        if type(field) is not ContactField:
            continue
        X, nv, nc = xs[t:t + 1], field.model.nv, field.nc
        solution = ContactDynamicsResult(np.zeros((1, nv)), (), np.zeros((1, nc)), np.zeros((1, nc, nv)),
                                         np.zeros((1, nc)))
        contact_dynamics_derivatives(field.model, X, field.torques(X, us[t:t + 1]), field.contacts, field.damping,
                                     dynamics=solution, workspace=field.workspace)


def _backward(bounded: bool) -> None:
    """The Riccati sweep and the policy gradient (the constrained solver's test before a sweep) on a small LQ
    problem: their kernels' types do not depend on the problem."""
    from lietraj.optimal_control.problem import ProblemDerivatives
    from lietraj.optimal_control.solvers.riccati import backward_pass, policy_gradient

    T, ndx, nu = 2, 2, 1
    D = ProblemDerivatives.empty(T, ndx, nu)
    D.dynamics.F_x[:] = np.eye(ndx)
    D.dynamics.F_u[:] = 1.0
    D.running.l_xx[:] = np.eye(ndx)
    D.running.l_uu[:] = np.eye(nu)
    D.terminal.l_xx[:] = np.eye(ndx)
    backward_pass(D, 1e-6, gaps=np.zeros((T + 1, ndx)))
    policy_gradient(D, np.zeros((T, nu, ndx)))
    if bounded:
        backward_pass(D, 1e-6, du_lb=-np.ones((T, nu)), du_ub=np.ones((T, nu)))


def _rollout(problem, xs, us, gaps) -> None:
    """The solvers' forward pass (``solvers._forward_pass``, the kernel of ``forward_pass``) of the open-loop policy
    at a step of one half."""
    from lietraj.optimal_control.solvers.riccati import Gains
    from lietraj.optimal_control.solvers.solvers import _forward_pass

    T, nu = problem.T, problem.nu
    gains = Gains(np.zeros((T, nu)), np.zeros((T, nu, problem.ndx)), np.ones((T, nu), dtype=np.bool_))
    _forward_pass(problem, xs, us, gains, 0.5, gaps)


# ---- worker processes --------------------------------------------------------------------------------------------

def _worker_init() -> None:
    import lietraj.optimal_control  # noqa: F401  (pay the imports while the parent builds its problem)


def _worker_spec(spec: Spec, stages, parameters: dict | None = None) -> float:
    t = time.perf_counter()
    if "backward" in stages:
        # the sweep needs no problem: compiled while the command builds its problem, whose kernels (kinematics,
        # RNEA) the worker then loads from the cache instead of compiling them too
        _backward(False)
    example = _example(spec, tuple(sorted((parameters or {}).items())))
    run_stages(example.problem, example.xs0, example.us0, spec.solver, stages)
    return time.perf_counter() - t


def _built(spec: Spec, parameters: tuple):
    from lietraj.problems import make_problem

    return make_problem(spec.problem, spec.robot, **dict(parameters))


_cached_example = functools.lru_cache(maxsize=1)(_built)


def _example(spec: Spec, parameters: tuple):
    """The problem a worker compiles on, built once for its tasks of one spec (parameters that cannot be hashed:
    for each task)."""
    try:
        return _cached_example(spec, parameters)
    except TypeError:
        return _built(spec, parameters)


def _pool(workers: int) -> concurrent.futures.ProcessPoolExecutor:
    # spawn, not fork: a forked child of a process that has started numba's compiler may deadlock on its locks
    return concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                                  initializer=_worker_init)


class ColdStart:
    """The first solve of a problem with a worker process compiling beside it (module docstring): ``start()``
    before building the problem, ``compile(example)`` once it is built (returns when every stage is compiled),
    ``close()`` in the end. On one core, or when a stage fails in the worker, the solve compiles what is left.
    On two threads the command compiles the split kernels (``split``) last, once the worker has cached the
    kernels they call (its first task, ``_BEFORE_SPLIT``), while the worker compiles the rest."""

    def __init__(self, spec: Spec, notice: CompileNotice | None = None, parameters: dict | None = None):
        self.spec = spec
        self.notice = notice
        self.parameters = dict(parameters or {})
        self.stages = stages_for(spec.solver, spec.threads)
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._workers: list[concurrent.futures.Future] = []

    def start(self) -> ColdStart:
        if (os.cpu_count() or 1) > 1:
            if self.notice is not None:
                self.notice.show(", on two cores")
            self._pool = _pool(1)
            theirs = split_stages(self.stages)[0]
            for part in (tuple(s for s in theirs if s in _BEFORE_SPLIT), tuple(s for s in theirs
                                                                                if s not in _BEFORE_SPLIT)):
                self._workers.append(self._pool.submit(_worker_spec, self.spec, part, self.parameters))
        return self

    def compile(self, example) -> None:
        if self._pool is None:
            return
        here = split_stages(self.stages)[1]
        run_stages(example.problem, example.xs0, example.us0, self.spec.solver, [s for s in here if s != "split"])
        for i, worker in enumerate(self._workers):
            try:
                worker.result()
            except Exception:  # the solve compiles whatever the worker could not
                pass
            if i == 0 and "split" in here:
                run_stages(example.problem, example.xs0, example.us0, self.spec.solver, ["split"])

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


@dataclass
class WarmupReport:
    """What ``warm_up`` compiled: per problem and robot, the wall seconds of its longest task (None: a task
    failed, with its error in ``errors``), and the wall ``total``."""

    seconds: dict[str, float | None]
    errors: dict[str, str]
    total: float


def default_specs(threads: int = 1) -> list[Spec]:
    """Every ready problem with its default robot and a quadruped, with FDDP and DDP, on ``threads`` threads: the
    kernels of the floating base with 6D and 3D contacts, touchdown impulses, and DDP's second-order terms."""
    from lietraj.problems import PROBLEMS

    specs = []
    for name, entry in PROBLEMS.items():
        robots = [entry.robots[0]] + (["solo12"] if "solo12" in entry.robots[1:] else [])
        for robot in robots:
            for solver in ("fddp", "ddp"):
                specs.append(Spec(name, robot, solver, threads))
    return specs


def warm_up(specs: list[Spec] | None = None, workers: int | None = None, stream: TextIO | None = None,
            force: bool = False) -> WarmupReport:
    """Compile the kernels of ``specs`` (default ``default_specs()``) in ``workers`` processes (default: one per
    core), printing a line per problem and robot on ``stream``; specs already compiled for these sources are
    skipped unless ``force``. The solvers of one problem and robot share their kernels: each such group is built
    once per task, and its stages are split in two tasks that run side by side."""
    specs = default_specs() if specs is None else list(specs)
    groups: dict[tuple[str, str | None], list[Spec]] = {}
    for spec in specs:
        if force or not is_warm(spec):
            groups.setdefault((spec.problem, spec.robot), []).append(spec)
    workers = max(1, min(workers or os.cpu_count() or 1, 2 * len(groups) or 1))
    out = stream or sys.stdout
    start = time.perf_counter()
    seconds: dict[str, float | None] = {_label(s.problem, s.robot): 0.0 for s in specs}
    errors: dict[str, str] = {}
    if groups:
        with _pool(workers) as pool:
            tasks = {}
            for (problem, robot), members in groups.items():
                stages = [s for s in STAGES if any(s in stages_for(m.solver, m.threads) for m in members)]
                for part in split_stages(stages):
                    if part:
                        tasks[pool.submit(_worker_spec, Spec(problem, robot, members[0].solver), tuple(part))] = \
                            (problem, robot)
            pending = {key: sum(1 for k in tasks.values() if k == key) for key in groups}
            for future in concurrent.futures.as_completed(tasks):
                key = tasks[future]
                label = _label(*key)
                try:
                    took = future.result()
                    if seconds[label] is not None:
                        seconds[label] = max(seconds[label], took)
                except Exception as e:
                    seconds[label] = None
                    errors[label] = f"{type(e).__name__}: {e}"
                pending[key] -= 1
                if pending[key] == 0:
                    if seconds[label] is not None:
                        for spec in groups[key]:
                            mark_warm(spec)
                    status = f"{seconds[label]:.1f} s" if seconds[label] is not None else f"failed: {errors[label]}"
                    print(f"  {label:32s} {', '.join(m.solver for m in groups[key]):12s} {status}", file=out, flush=True)
    return WarmupReport(seconds, errors, time.perf_counter() - start)


def _label(problem: str, robot: str | None) -> str:
    return problem + (f" --robot {robot}" if robot else "")
