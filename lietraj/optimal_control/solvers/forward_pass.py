"""The solvers' forward pass: the closed-loop rollout of a policy through the knots' dynamics, written once.

From ``x_0 = x0``, knot after knot (module docstring of ``solvers``, step 4)::

    x_t ← x_t ⊕ (α - 1) f̄_t   (FDDP's gap shrinking, when gaps are given and α < 1)
    u_t = clip(ū_t + α k_t + K_t (x_t ⊖ x̄_t), u_lb_t, u_ub_t),   x_{t+1} = f_t(x_t, u_t)

with the chart deviations ``DX[t] = x_t ⊖ x̄_t`` kept for the caller, and a status naming the first knot whose
control or state is non-finite or invalid or whose step failed, and why.

The knots are taken in runs that share one dynamics object (a problem's contact phases). A run whose dynamics has
a compiled step (``DiscreteDynamics.compiled_step``: a built-in field, free or under contacts, times semi-implicit
Euler or RK4, or a touchdown impact; ``CompiledStep``) rolls out in one call of ``_rollout_kernel``, which selects
the field and the integrator by which of three arguments are None, so that numba compiles for each pair only its
own algorithms (numba caches no kernel that takes jitted functions as arguments). Any other dynamics (a user's
field or ``DiscreteDynamics``, ``LinearDynamics``) steps in Python, one ``step`` per knot, the policy of each knot
computed by the same compiled code (``policy_knot``). Both paths do the same floating-point operations up to the
rounding of numpy's 4x4 matrix products in a Python ``step``.

The kernels take their arguments grouped in plain tuples (``ReferenceArrays``, ``PolicyArrays``, ``BoundArrays``,
``RolloutArrays``, ``RolloutWork``), named inside: a NamedTuple argument costs numba's dispatcher
about 1.4 µs per call (``ModelArrays``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics._checks import IDENTITY4_STACK, NOT_FINITE, OK, SINGULAR, check_state
from lietraj.dynamics.contacts.contact_dynamics import NOT_FINITE_SOLUTION, RANK_DEFICIENT, contact_dynamics_core, \
    impact_core
from lietraj.dynamics.lie.state import State, StateSpace, Trajectory, chart_difference, chart_integrate
from lietraj.dynamics.algorithms.aba import aba_core
from lietraj.dynamics.model.model import DofTables, ModelArrays, RobotModel
from lietraj.optimal_control.dynamics.euler import euler_update
from lietraj.optimal_control.dynamics.field import FieldTables, FieldWork, field_work
from lietraj.optimal_control.dynamics.rk4 import rk4_combine, rk4_stage

_FAILURES = {NOT_FINITE: "a non-finite state or control", SINGULAR: "a singular articulated inertia",
             RANK_DEFICIENT: "redundant contacts (a rank-deficient contact Jacobian)",
             NOT_FINITE_SOLUTION: "a non-finite contact solution"}


@dataclass(eq=False)
class PolicyRollout:
    """The closed-loop rollout of ``rollout_policy``: states ``X`` (N + 1 knots), controls ``U`` (N, nu) and chart
    deviations ``DX`` (N + 1, ndx), ``DX[t] = X[t] ⊖ X_ref[t]``. ``failed_at`` is -1, or the first knot whose control
    is non-finite or whose state is non-finite, invalid or could not be computed (the step to it failed); ``what``
    says what failed there and ``who`` the dynamics (``reason``: both and the knot), and the arrays are filled only
    up to that knot."""

    X: Trajectory
    U: np.ndarray
    DX: np.ndarray
    failed_at: int = -1
    what: str = ""
    who: str = ""

    @property
    def ok(self) -> bool:
        return self.failed_at < 0

    @property
    def reason(self) -> str:
        return "" if self.ok else f"{self.who}.rollout_policy: {self.what} at knot {self.failed_at}"

    def error(self, who: str, first_knot: int = 0, dt: float | None = None) -> ValueError:
        """The ValueError of a failed rollout for ``who``: the knot (``first_knot`` + ``failed_at``), what failed
        and, when the velocities grew over the knots before it, that the rollout diverged, which is then the cause
        to look at rather than the failure it ended in (a robot folding over itself makes its contacts rank
        deficient). ``dt``: the time step of the dynamics, quoted in the advice."""
        knot = first_knot + self.failed_at
        message = f"{who}: {self.what} at knot {knot}"
        speeds = np.max(np.abs(self.X.v[:self.failed_at]), axis=1, initial=0.0) if self.failed_at >= 2 else None
        if speeds is not None and np.isfinite(speeds).all() and speeds[-1] > 10.0 * max(speeds[0], 1.0):
            message += (f", after the rollout diverged: the largest velocity grew from {speeds[0]:.3g} at knot "
                        f"{first_knot} to {speeds[-1]:.3g} at knot {knot - 1}. A shorter time step"
                        f"{'' if dt is None else f' than dt = {dt:g} s'}, or a guess that "
                        "holds the system (a state trajectory for FDDP, or iLQR/DDP from one), avoids it")
        return ValueError(message)


class CompiledStep(NamedTuple):
    """What the rollout kernel needs of a dynamics with a compiled step: the robot ``model``, the ``field``'s tables,
    whether the integrator is ``rk4`` (else semi-implicit Euler), ``dt``, and the kernel's ``work`` arrays
    (``rollout_work``, kept by the dynamics' workspace). ``remember``, for a contact field: called with the knots and
    controls of a run and the contact solution the rollout computed at them (accelerations, stacked forces, contact
    rows and drifts, a row per knot), which the field keeps so as not to solve it again when the solver linearizes at
    the rollout it accepts."""

    model: RobotModel
    field: FieldTables
    rk4: bool
    dt: float
    work: tuple
    remember: Callable[..., None] | None = None


class ReferenceArrays(NamedTuple):
    """The reference trajectory x̄ (``H`` (N + 1, 4, 4), or one identity for a fixed base; ``S``, ``V``)."""

    H: np.ndarray
    S: np.ndarray
    V: np.ndarray


class PolicyArrays(NamedTuple):
    """``ū`` (N, nu), ``k`` (N, nu), ``K`` (N, nu, ndx), the step ``alpha``, the ``gaps`` (N + 1, ndx) and whether
    they are shrunk (``shrink``: gaps given and α < 1)."""

    U: np.ndarray
    k: np.ndarray
    K: np.ndarray
    alpha: float
    gaps: np.ndarray
    shrink: bool


class BoundArrays(NamedTuple):
    """Control bounds ``lower``, ``upper`` (N, nu), applied when ``bounded``."""

    lower: np.ndarray
    upper: np.ndarray
    bounded: bool


class RolloutArrays(NamedTuple):
    """The outputs: states ``H`` (N + 1, 4, 4) (one identity for a fixed base), ``S``, ``V``; controls ``U``;
    deviations ``DX``."""

    H: np.ndarray
    S: np.ndarray
    V: np.ndarray
    U: np.ndarray
    DX: np.ndarray


class RolloutWork(NamedTuple):
    """Work arrays of the rollout: the field's (``FieldWork``), E (4, 4), tau and acc (nv), F (4, ndx) and z (ndx)
    for the stages, YH (2, 4, 4), YS (2, n), YV (2, nv) for Y₂ and Y₃/Y₄ of RK4."""

    field: tuple
    E: np.ndarray
    tau: np.ndarray
    acc: np.ndarray
    F: np.ndarray
    z: np.ndarray
    YH: np.ndarray
    YS: np.ndarray
    YV: np.ndarray


def rollout_work(model: RobotModel, nc: int) -> RolloutWork:
    nv, n = model.nv, model.n
    return RolloutWork(tuple(field_work(model, nc)), np.empty((4, 4)), np.zeros(nv), np.empty(nv),
                       np.empty((4, 2 * nv)), np.empty(2 * nv), np.empty((2, 4, 4)), np.empty((2, n)),
                       np.empty((2, nv)))


@helper
def _policy_control(u_ref, k, K, dx, alpha, lb, ub, bounded, u):
    """u = clip(u_ref + alpha k + K dx, lb, ub) (np.clip's branches); returns whether u is finite."""
    ok = True
    for i in range(u.shape[0]):
        acc = 0.0
        for j in range(dx.shape[0]):
            acc += K[i, j] * dx[j]
        ui = u_ref[i] + alpha * k[i] + acc
        if bounded:
            if ui < lb[i]:
                ui = lb[i]
            elif ui > ub[i]:
                ui = ub[i]
        u[i] = ui
        ok = ok and math.isfinite(ui)
    return ok


@helper
def policy_knot(t, floating, reference, policy, bounds, out, E, z):
    """Knot ``t`` of a closed-loop rollout, before its step: shrink the gap (FDDP), check the state, ``DX[t] = x ⊖
    x̄``, and for ``t < N`` the control ``U[t]``. Returns the status (OK, or why knot t fails)."""
    r, p, b, o = ReferenceArrays(*reference), PolicyArrays(*policy), BoundArrays(*bounds), RolloutArrays(*out)
    Ht = o.H[t] if floating else o.H[0]
    if p.shrink:
        for i in range(z.shape[0]):
            z[i] = (p.alpha - 1.0) * p.gaps[t, i]
        chart_integrate(Ht, o.S[t], o.V[t], z, floating, Ht, o.S[t], o.V[t], E)
    status = check_state(floating, o.S.shape[1], o.V.shape[1], Ht, o.S[t], o.V[t])
    if status != OK:
        return status
    chart_difference(r.H[t] if floating else r.H[0], r.S[t], r.V[t], Ht, o.S[t], o.V[t], floating, o.DX[t])
    if t == o.U.shape[0]:
        return OK
    if not _policy_control(p.U[t], p.k[t], p.K[t], o.DX[t], p.alpha, b.lower[t], b.upper[t], b.bounded, o.U[t]):
        return NOT_FINITE
    return OK


@kernel
def _policy_knot_kernel(t, floating, reference, policy, bounds, out, E, z):
    """``policy_knot`` from Python, for a knot stepped by a Python ``step``."""
    return policy_knot(t, floating, reference, policy, bounds, out, E, z)


@kernel
def _rollout_kernel(t0, t1, model, dofs, fext, contacts, stages, dt, reference, policy, bounds, out, work, solution):
    """Knots t0 .. t1 - 1 of the rollout (module docstring) into ``out``, from the state at t0, with the compiled
    step of a built-in field by RK4 (``stages`` = (YH, YS, YV) of ``RolloutWork``) or semi-implicit Euler
    (``stages`` None); the field is ABA with the body wrenches ``fext`` (``contacts`` None), or the contact dynamics
    of ``contacts`` = (CI, CF, damping, restitution) (``fext`` None), or, with a restitution >= 0, the impact on
    them (a touchdown knot: ``x⁺ = (H, s, v⁺)``, ``stages`` None). Knot t1 = N + 1 stands for the last knot N, which
    has no step.
    ``solution``, None or (A, LAM, J, GAMMA) with a row per knot from t0: the contact solution at each knot (its
    first stage). Returns (status, knot): OK and t1, or the knot of the first bad control or state (t + 1 when the
    step from knot t fails).

    numba prunes a branch on ``x is not None`` when the argument x is None (not the other way round: it cannot tell
    that a tuple is not None), so each (field, integrator) pair compiles only its own algorithms, from this one
    source."""
    m, o, w = ModelArrays(*model), RolloutArrays(*out), RolloutWork(*work)
    fw, dp = FieldWork(*w.field), DofTables(*dofs).dof_parent
    floating, n, N = m.floating, o.S.shape[1], o.U.shape[0]
    E, tau, acc, F, z = w.E, w.tau, w.acc, w.F, w.z
    nv = tau.shape[0]
    for t in range(t0, t1):
        status = policy_knot(t, floating, reference, policy, bounds, out, E, z)
        if status != OK:
            return status, t
        if t == N:
            break
        for i in range(n):
            tau[nv - n + i] = o.U[t, i]
        Ht, Hn = (o.H[t], o.H[t + 1]) if floating else (o.H[0], o.H[0])
        for stage in range(1 if stages is None else 4):  # one call site of the field, whichever the integrator
            YH, YS, YV = Ht, o.S[t], o.V[t]
            if stages is not None and stage > 0:
                SH, SS, SV = stages
                row = rk4_stage(stage, floating, Ht, o.S[t], o.V[t], F, z, SH, SS, SV, E)
                YH, YS, YV = SH[row], SS[row], SV[row]
                status = check_state(floating, n, nv, YH, YS, YV)
            # the field's algorithm, called here: a helper layer over it would cost LLVM another optimisation of
            # its whole call tree (_jit.py)
            if status == OK and fext is not None:
                status = aba_core(m.joints, m.bodies, m.gravity, YH, YS, YV, tau, fext, fw.aba, acc)
            if status == OK and contacts is not None:  # the cores are kernels: compiled once for every caller
                CI, CF, damping, restitution = contacts
                if restitution < 0.0:
                    status = contact_dynamics_core(m.joints, m.bodies, m.gravity, dp, YH, YS, YV, tau, CI, CF, damping,
                                                   fw.bodies, fw.crba, fw.M, fw.Z, fw.S, acc, fw.lam, fw.J, fw.gamma)
                else:
                    status = impact_core(m.joints, m.bodies, m.gravity, dp, YH, YS, YV, CI, CF, restitution, damping,
                                         fw.bodies, fw.crba, fw.M, fw.Z, fw.S, acc, fw.lam, fw.J, fw.gamma)
            if status != OK:
                return status, t + 1
            if solution is not None and stage == 0:
                A, LAM, J, GAMMA = solution
                r = t - t0
                for i in range(nv):
                    A[r, i] = acc[i]
                for c in range(LAM.shape[1]):
                    LAM[r, c] = fw.lam[c]
                    GAMMA[r, c] = fw.gamma[c]
                    for i in range(nv):
                        J[r, c, i] = fw.J[c, i]
            for i in range(nv):
                F[stage, i] = dt * YV[i]
                F[stage, nv + i] = dt * acc[i]
        if stages is not None:
            SH, SS, SV = stages
            rk4_combine(floating, Ht, o.S[t], o.V[t], F, z, SH, SS, SV, E, Hn, o.S[t + 1], o.V[t + 1])
        elif contacts is not None and contacts[3] >= 0.0:  # an impact: acc holds the velocity jump
            for i in range(4):
                for j in range(4):
                    Hn[i, j] = Ht[i, j]
            for i in range(n):
                o.S[t + 1, i] = o.S[t, i]
            for i in range(nv):
                o.V[t + 1, i] = o.V[t, i] + acc[i]
        else:
            euler_update(floating, dt, acc, Ht, o.S[t], o.V[t], Hn, o.S[t + 1], o.V[t + 1], z, E)
    return OK, t1


def _policy_array(x, shape: tuple[int, ...], name: str) -> np.ndarray:
    a = np.ascontiguousarray(x, dtype=np.float64)
    if a.shape != shape:
        raise ValueError(f"rollout_policy: {name} must have shape {shape}, got {a.shape}")
    return a


def _check_states(space: StateSpace, N: int, x0: State, X_ref: Trajectory) -> None:
    n, nv = space.n, space.nv
    for name, x, knots in (("x0", x0, None), ("X_ref", X_ref, N + 1)):
        kind = State if knots is None else Trajectory
        lead = () if knots is None else (knots,)
        if (type(x) is not kind or (x.H is not None) != space.floating_base
                or (x.H is not None and x.H.shape != lead + (4, 4)) or x.s.shape != lead + (n,)
                or x.v.shape != lead + (nv,)):
            raise ValueError(f"rollout_policy: {name} must be a {kind.__name__} of {space}"
                             + ("" if knots is None else f" with N + 1 = {knots} knots"))


def _bounds(u_lb, u_ub, N: int, nu: int, U_ref: np.ndarray) -> BoundArrays:
    if u_lb is None and u_ub is None:
        return BoundArrays(U_ref, U_ref, False)
    try:
        # writeable arrays (copies of broadcast ones): numba types a read-only array apart and compiles the rollout
        # kernel again for it, in a solve's first iteration (3 s of the trot's cold start)
        return BoundArrays(*(np.require(np.broadcast_to(np.asarray(fill if b is None else b, dtype=np.float64),
                                                        (N, nu)), np.float64, ["C", "W"])
                             for b, fill in ((u_lb, -np.inf), (u_ub, np.inf))), True)
    except ValueError:
        raise ValueError(f"rollout_policy: u_lb and u_ub must broadcast to ({N}, {nu})") from None


def _runs(dynamics, N: int) -> list[tuple[int, int, object]]:
    """Maximal runs ``(start, stop, dynamics)`` of knots sharing one dynamics object (of a sequence of N)."""
    if len(dynamics) != N:
        raise ValueError(f"rollout_policy: {len(dynamics)} dynamics objects for {N} knots")
    runs, start = [], 0
    for t in range(1, N + 1):
        if t == N or dynamics[t] is not dynamics[start]:
            runs.append((start, t, dynamics[start]))
            start = t
    return runs


def rollout_policy_per_knot(dynamics, x0: State, X_ref: Trajectory, U_ref, k, K, alpha: float, gaps=None, u_lb=None,
                            u_ub=None) -> PolicyRollout:
    """``rollout_policy`` with every knot stepped in Python by its dynamics' ``step`` (the generic path)."""
    return rollout_policy(dynamics, x0, X_ref, U_ref, k, K, alpha, gaps, u_lb, u_ub, compiled=False)


def rollout_policy(dynamics, x0: State, X_ref: Trajectory, U_ref, k, K, alpha: float, gaps=None, u_lb=None,
                   u_ub=None, compiled: bool = True, runs: list | None = None) -> PolicyRollout:
    """The closed-loop rollout (module docstring) through ``dynamics``: one ``DiscreteDynamics`` for every knot, or
    a sequence of N (one per knot). ``U_ref``, ``k`` are (N, nu), ``K`` (N, nu, ndx), ``X_ref`` has N + 1 knots,
    ``gaps`` (N + 1, ndx) or None; the bounds are (nu,) or (N, nu), ``None`` for none. Runs of knots whose dynamics
    has a compiled step roll out in one compiled call each (``compiled=False``: every knot steps in Python);
    ``runs``, those runs ``(start, stop, dynamics)`` when the caller has them (``Problem.dynamics_runs``). Bad
    shapes raise ValueError; a non-finite or invalid state or control, or a step that fails, ends the rollout with
    a status (``PolicyRollout.failed_at``; the knots after it are identity states)."""
    sequence = isinstance(dynamics, (list, tuple))
    if sequence and not dynamics:
        raise ValueError("rollout_policy: no dynamics objects")
    first = dynamics[0] if sequence else dynamics
    space, nu = first.state_space, first.nu
    U_ref = np.ascontiguousarray(U_ref, dtype=np.float64)
    if U_ref.ndim != 2 or U_ref.shape[1] != nu:
        raise ValueError(f"rollout_policy: U_ref must have shape (N, {nu}), got {U_ref.shape}")
    N, ndx, floating, alpha = U_ref.shape[0], space.ndx, space.floating_base, float(alpha)
    _check_states(space, N, x0, X_ref)
    if runs is None:
        runs = _runs(dynamics, N) if sequence else [(0, N, dynamics)]
    # Plain tuples for the kernels (a NamedTuple argument costs numba's dispatcher microseconds per call).
    reference = (np.ascontiguousarray(X_ref.H, dtype=np.float64) if floating else IDENTITY4_STACK,
                 np.ascontiguousarray(X_ref.s, dtype=np.float64), np.ascontiguousarray(X_ref.v, dtype=np.float64))
    k, K = _policy_array(k, (N, nu), "k"), _policy_array(K, (N, nu, ndx), "K")
    gaps = None if gaps is None else _policy_array(gaps, (N + 1, ndx), "gaps")
    policy = (U_ref, k, K, alpha, U_ref if gaps is None else gaps, gaps is not None and alpha != 1.0)
    bounds = tuple(_bounds(u_lb, u_ub, N, nu, U_ref))
    # every knot is written, up to a failure (after which they are made identity states)
    X = Trajectory(np.empty((N + 1, 4, 4)) if floating else None, np.empty((N + 1, space.n)), np.empty((N + 1, space.nv)))
    U, DX = np.empty((N, nu)), np.empty((N + 1, ndx))
    X[0] = x0
    out = (X.H if floating else IDENTITY4_STACK, X.s, X.v, U, DX)
    E, z = np.empty((4, 4)), np.empty(ndx)
    t, status, who = 0, OK, first
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # only Python steps warn on a divergence
        for start, stop, dyn in runs:
            form = dyn.compiled_step() if compiled else None
            who = dyn
            if form is not None:
                m, w = form.model, RolloutWork(*form.work)
                stages = (w.YH, w.YS, w.YV) if form.rk4 else None
                solution = None
                if form.remember is not None:
                    fw = FieldWork(*w.field)
                    solution = (np.empty((stop - start, m.nv)), np.empty((stop - start,) + fw.lam.shape),
                                np.empty((stop - start,) + fw.J.shape), np.empty((stop - start,) + fw.gamma.shape))
                status, t = _rollout_kernel(start, stop + (stop == N), m.packed, m.dof_tables, form.field.fext,
                                            form.field.contacts, stages, form.dt, reference, policy, bounds, out,
                                            form.work, solution)
                if status != OK:
                    break
                if solution is not None:
                    form.remember(X[start:stop], U[start:stop], *solution)
                continue
            for t in range(start, stop):
                status = _policy_knot_kernel(t, floating, reference, policy, bounds, out, E, z)
                if status != OK:
                    break
                try:
                    X[t + 1] = dyn.step(X[t], U[t])
                except (ValueError, ArithmeticError) as e:
                    X[t + 1:] = space.trajectory(N - t)
                    return PolicyRollout(X, U, DX, t + 1, f"a step that failed ({e})", _name(dyn))
            if status != OK:
                break
            if stop == N:
                t, status = N, _policy_knot_kernel(N, floating, reference, policy, bounds, out, E, z)
    if status == OK:
        return PolicyRollout(X, U, DX)
    X[t + 1:] = space.trajectory(N - t)
    what = _FAILURES.get(status, "an invalid base pose")
    return PolicyRollout(X, U, DX, int(t), what, _name(who))


def _name(dynamics) -> str:
    model = getattr(dynamics, "model", None)
    return type(dynamics).__name__ + ("" if model is None else f"({model.name})")
