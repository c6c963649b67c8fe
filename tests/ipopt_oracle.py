"""IPOPT (through casadi) as the oracle of ``solve_constrained``: a ``Problem`` transcribed by multiple shooting,
with lietraj's own values and derivatives as casadi callbacks.

The NLP's variables are tangent increments in a local chart about a reference trajectory ``x̄_0 .. x̄_T``: knot
``k``'s state is ``x_k = x̄_k ⊕ z_k = x̄_k exp(z_k)``, and ``w = [z_0; u_0; z_1; u_1; ..; u_{T-1}; z_T]``::

    minimise    Σ_k l_k(x_k, u_k) + l_T(x_T)                        Problem.cost; ∇: l_x, l_u (Problem.derivatives)
    subject to  z_0 − (x0 ⊖ x̄_0) = 0
                z_{k+1} − (f_k(x_k, u_k) ⊖ x̄_{k+1}) = 0,  k < T     Problem.step; F_x, F_u (Problem.derivatives)
                lower ≤ r(x_k, u_k) ≤ upper  every constraint row     Constraint.value; R_x, R_u (.derivatives)
                u_lb ≤ u_k ≤ u_ub                                    variable bounds

(rows whose two bounds are infinite are left out). On a fixed base the chart is the vector space (``x ⊕ z = x +
z``) and the default reference is the zero state, so that ``z_k = x_k`` and the dynamics rows are ``x_{k+1} −
f_k(x_k, u_k)``: lietraj's Jacobians are the NLP's. On a floating base (``State(H, s, v)``, ``H ∈ SE(3)``) the
reference is the guess by default (``solve_ipopt``'s ``reference``: e.g. lietraj's own solution), and every
Jacobian lietraj returns, taken in the chart ``x exp(dx)`` at the current point ``x_k``, is chained with the right
Jacobian of ``exp`` (``Jr``, identity but on the SE(3) block ``z_H``)::

    x̄ exp(z + dz) = x exp(Jr(z) dz)                   ∂l/∂z_k = Jr(z_k)ᵀ l_x,   ∂r/∂z_k = R_x Jr(z_k)
    e_k = f_k ⊖ x̄_{k+1} = log(x̄_{k+1}⁻¹ f_k),        ∂e_k/∂(z_k, u_k) = Jr(e_k)⁻¹ [F_x Jr(z_k), F_u]

(``f(x exp(dx), u + du) ≈ f exp(F_x dx + F_u du)`` is lietraj's convention, ``log(exp(e) exp(δ)) ≈ e + Jr(e)⁻¹ δ``
the derivative of ``⊖`` in its first argument). The dynamics rows are the defects in the chart of the NEXT knot's
reference, ``z_{k+1} − (f_k ⊖ x̄_{k+1})``, rather than ``x_{k+1} ⊖ f_k``: both vanish exactly when ``x_{k+1} = f_k``
(within the chart, ``|w| < π`` in every SE(3) part), but this one is linear in ``z_{k+1}``, so the Lagrangian
stays a sum of functions of one knot's ``(z_k, u_k)`` each plus linear terms, and its Hessian block diagonal by
knots, as on a fixed base. The dynamics multipliers are then the co-states in that chart (they are not compared
with lietraj's); the constraint and control-bound rows are the problem's own, in its units, whatever the chart.

The objective and the constraints are each one ``casadi.Callback`` whose Jacobian is another callback with the
declared block sparsity; all share a cache keyed on ``w`` (IPOPT asks for f, g, ∇f and ∂g at one point in turn).
The Hessian of the Lagrangian is, by default, central differences of its exact gradient ``∇f + ∂gᵀλ`` (block
diagonal by knots, so ``2 (nx + nu)`` gradients a Hessian, ``Transcription.hess_lag``): IPOPT then meets ``tol =
1e-10`` in 15-20 iterations, where its limited-memory Hessian (``hessian="limited-memory"``) stalls on the UR5
reach at a dual infeasibility of ~1e-6 after ~280 iterations ("Error_In_Step_Computation"), its cost right but its
multipliers less so. Either way the KKT conditions IPOPT checks use lietraj's exact first derivatives.

``solve_ipopt`` returns an ``IpoptSolution``: the optimal ``xs`` (a ``Trajectory``), ``us``, the cost, IPOPT's
multipliers of every constraint row (``lam_g``, the convention of ``solve_constrained``'s: ``∂cost/∂r``, positive
at an upper bound) and of the control bounds, and the active set; ``active_set`` computes the latter for any
trajectory (e.g. ``solve_constrained``'s), so that both solutions are classified by one rule.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import casadi
import numpy as np

from lietraj.dynamics.lie import se3
from lietraj.dynamics.lie.state import Trajectory, tangent_difference, tangent_integrate
from lietraj.optimal_control.problem import Problem


@dataclass(eq=False)
class IpoptSolution:
    """IPOPT's answer: ``status`` (its return status), ``success``, ``iterations``, wall ``time`` (s, the solve
    alone), ``xs``, ``us``, ``cost``, the multipliers ``name -> (knots, values (K, nr))`` (0 on left-out rows) and
    ``control_multipliers`` (T, nu) (positive at ``u_ub``), the ``active`` set (``active_set``), the largest
    dynamics ``defect`` (``Problem.gaps``) and the ``primal_infeasibility`` and ``dual_infeasibility`` of IPOPT's
    last iterate (its log's ``inf_pr``, ``inf_du``), and the chart's ``reference`` trajectory (module docstring)."""

    status: str
    success: bool
    iterations: int
    time: float
    xs: Trajectory
    us: np.ndarray
    cost: float
    multipliers: dict[str, tuple[np.ndarray, np.ndarray]]
    control_multipliers: np.ndarray
    active: dict[str, tuple[np.ndarray, np.ndarray]]
    defect: float
    primal_infeasibility: float
    dual_infeasibility: float
    reference: Trajectory | None = None


def active_set(problem: Problem, xs: Trajectory, us, tol: float = 1e-6) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Name -> ``(knots (K,), active (K, nr) bool)`` for every constraint: a row is active when it is within ``tol``
    (in the constraint's unit) of a finite bound (equality rows always are); the key ``"controls"`` holds the
    controls within ``tol`` of ``u_lb`` or ``u_ub`` (T, nu). Names shared by several sets are merged, as
    ``Problem.violations`` merges them."""
    us = np.asarray(us, dtype=np.float64)
    parts: dict[str, list] = {}
    for a, b, constraints in problem.constraint_groups():
        for name, c in constraints.items():
            r = c.value(xs[a:b], None if a == problem.T else us[a:b])
            near = (np.abs(r - c.upper) <= tol * c.scale) | (np.abs(r - c.lower) <= tol * c.scale)
            parts.setdefault(name, []).append((np.arange(a, b), near))
    out = {name: (np.concatenate([k for k, _ in p]), np.concatenate([v for _, v in p])) for name, p in parts.items()}
    out["controls"] = (np.arange(problem.T), (np.abs(us - problem.u_ub) <= tol) | (np.abs(us - problem.u_lb) <= tol))
    return out


class Transcription:
    """The layout of ``w`` (knot by knot: ``[z_0; u_0; z_1; u_1; ..; z_T]``, so that knot ``k``'s variables are
    contiguous) and of ``g``, their values and derivatives at one ``w`` (cached), and the Hessian of the
    Lagrangian by differences. ``reference``: the chart's ``x̄_0 .. x̄_T`` (module docstring); default the zero
    state on a fixed base (``z_k = x_k``), ``x0`` at every knot on a floating base."""

    def __init__(self, problem: Problem, reference: Trajectory | None = None):
        sp = problem.state_space
        self.problem, self.T, self.n, self.nx, self.nu = problem, problem.T, sp.n, sp.ndx, problem.nu
        self.floating = sp.floating_base
        if reference is None:
            reference = problem.constant_trajectory() if self.floating else sp.trajectory(self.T + 1)
        self.reference = problem.check_trajectory(reference).copy()
        # the constant of the initial row, x0 ⊖ x̄_0 (x0 itself on a fixed base about the zero state)
        self.start = tangent_difference(self.reference[:1], Trajectory.repeat(problem.x0, 1))[0]
        self.m = self.nx + self.nu
        self.nw = self.T * self.m + self.nx
        self.rows = []  # (name, knots a..b, constraint, kept rows, first g row)
        first = (self.T + 1) * self.nx
        for a, b, constraints in problem.constraint_groups():
            for name, c in constraints.items():
                kept = np.flatnonzero(np.isfinite(c.lower) | np.isfinite(c.upper))
                self.rows.append((name, a, b, c, kept, first))
                first += (b - a) * len(kept)
        self.ng = first
        self.lbg, self.ubg = np.zeros(self.ng), np.zeros(self.ng)  # the dynamics rows: 0
        for _, a, b, c, kept, g0 in self.rows:
            self.lbg[g0:g0 + (b - a) * len(kept)] = np.tile(c.lower[kept], b - a)
            self.ubg[g0:g0 + (b - a) * len(kept)] = np.tile(c.upper[kept], b - a)
        jacobian = np.zeros((self.ng, self.nw), dtype=bool)
        for rows, k, width in self._jacobian_blocks():
            jacobian[rows, self.z(k)][:, :width] = True
        hessian = np.zeros((self.nw, self.nw), dtype=bool)
        for k in range(self.T + 1):
            hessian[self.z(k), self.z(k)] = True
        self.jacobian_sparsity, self._jacobian_nz = _sparsity(jacobian)
        self.hessian_sparsity, self._hessian_nz = _sparsity(np.triu(hessian))
        self._w = None

    # ---- layout

    def z(self, k: int) -> slice:
        """Knot ``k``'s variables in ``w``: ``[z_k; u_k]``, ``z_T`` for ``k = T``."""
        return slice(k * self.m, k * self.m + (self.m if k < self.T else self.nx))

    def tangents(self, w) -> np.ndarray:
        """The chart coordinates ``z_0 .. z_T`` of ``w``, (T + 1, nx)."""
        w = np.asarray(w, dtype=np.float64)
        return np.vstack([w[:self.T * self.m].reshape(self.T, self.m)[:, :self.nx], w[None, self.T * self.m:]])

    def pack(self, xs: Trajectory, us) -> np.ndarray:
        """``w`` of the states ``xs`` (``z_k = x_k ⊖ x̄_k``) and controls ``us``."""
        Z = tangent_difference(self.reference, self.problem.check_trajectory(xs))
        return np.concatenate([np.hstack([Z[:-1], np.asarray(us, dtype=np.float64)]).ravel(), Z[-1]])

    def unpack(self, w) -> tuple[Trajectory, np.ndarray]:
        """The states ``x_k = x̄_k ⊕ z_k`` and the controls of ``w``."""
        w = np.asarray(w, dtype=np.float64)
        U = w[:self.T * self.m].reshape(self.T, self.m)[:, self.nx:].copy()
        return tangent_integrate(self.reference, self.tangents(w)), U

    def _jacobian_blocks(self):
        """``(g rows, knot k, width)``: the (dense) blocks of ∂g/∂w, the first ``width`` columns of ``z(k)``."""
        nx = self.nx
        yield slice(0, nx), 0, nx
        for k in range(self.T):
            rows = slice((k + 1) * nx, (k + 2) * nx)
            yield rows, k, self.m
            yield rows, k + 1, nx
        for _, a, b, _, kept, g0 in self.rows:
            for i, k in enumerate(range(a, b)):
                yield slice(g0 + i * len(kept), g0 + (i + 1) * len(kept)), k, self.m if k < self.T else nx

    # ---- values and derivatives

    def at(self, w) -> dict:
        """The cache of ``w``: its ``X, U`` and whatever was computed there."""
        w = np.asarray(w, dtype=np.float64).ravel()
        if self._w is None or not np.array_equal(w, self._w):
            self._w, self._cache = w.copy(), dict(zip("XU", self.unpack(w)))
        return self._cache

    def f(self, w) -> float:
        c = self.at(w)
        if "f" not in c:
            c["f"] = self.problem.cost(c["X"], c["U"])
        return c["f"]

    def _defects(self, c: dict) -> np.ndarray:
        """``e_k = f_k(x_k, u_k) ⊖ x̄_{k+1}`` (T, nx) at the cached point (and the states ``f_k``, ``c["step"]``)."""
        if "e" not in c:
            c["step"] = self.problem.step(c["X"], c["U"])
            c["e"] = tangent_difference(self.reference[1:], c["step"])
        return c["e"]

    def g(self, w) -> np.ndarray:
        c = self.at(w)
        if "g" not in c:
            X, U, Z = c["X"], c["U"], self.tangents(self._w)
            g = [Z[0] - self.start, (Z[1:] - self._defects(c)).ravel()]
            for _, a, b, con, kept, _ in self.rows:
                g.append(con.value(X[a:b], None if a == self.T else U[a:b])[:, kept].ravel())
            c["g"] = np.concatenate(g)
        return c["g"]

    def _charts(self, c: dict) -> tuple[np.ndarray, np.ndarray] | None:
        """``Jr(z_k)`` (T + 1, 6, 6) and ``Jr(e_k)⁻¹`` (T, 6, 6) of the SE(3) blocks (None on a fixed base), each in
        one compiled call."""
        if not self.floating:
            return None
        if "charts" not in c:
            self._defects(c)
            e, inverse = np.empty((self.T, 6)), np.empty((self.T, 6, 6))
            se3.difference_batch(self.reference.H[1:], c["step"].H, True, e, inverse)
            c["charts"] = (se3.exp_blocks(self.tangents(self._w)[:, :6])[2], inverse)
        return c["charts"]

    def _derivatives(self, c: dict) -> dict:
        """∇f and the blocks of ∂g/∂w at the cached point (``Problem.derivatives`` and ``Constraint.derivatives``,
        chained with the chart's Jacobians on a floating base, module docstring): ``D`` (T, nx, nx + nu), the
        derivative of row ``k + 1`` in ``(z_k, u_k)`` (its derivative in ``z_{k+1}`` is the identity, as that of row
        0 in ``z_0``), and for every entry of ``rows`` the derivatives ``R`` (b - a, kept, width) of its rows in
        their knot's variables."""
        if "grad" not in c:
            X, U = c["X"], c["U"]
            d = self.problem.derivatives(X, U)
            charts = self._charts(c)
            l_x, l_T = d.running.l_x.copy(), d.terminal.l_x[0].copy()
            F_x, F_u = d.dynamics.F_x.copy(), d.dynamics.F_u.copy()
            if charts is not None:
                JR, JE = charts
                l_x[:, :6] = np.einsum("kji,kj->ki", JR[:-1], l_x[:, :6])  # Jr(z_k)ᵀ l_x
                l_T[:6] = JR[-1].T @ l_T[:6]
                F_x[:, :, :6] = F_x[:, :, :6] @ JR[:-1]  # F_x Jr(z_k)
                F_x[:, :6], F_u[:, :6] = JE @ F_x[:, :6], JE @ F_u[:, :6]  # Jr(e_k)⁻¹ [F_x Jr, F_u]
            c["grad"] = np.concatenate([np.hstack([l_x, d.running.l_u]).ravel(), l_T])
            c["D"] = -np.concatenate([F_x, F_u], axis=2)
            c["R"] = []
            for _, a, b, con, kept, _ in self.rows:
                r = con.derivatives(X[a:b], None if a == self.T else U[a:b])
                R_x = r.R_x[:, kept]
                if charts is not None:
                    R_x = np.concatenate([R_x[:, :, :6] @ charts[0][a:b], R_x[:, :, 6:]], axis=2)
                c["R"].append(np.concatenate([R_x, r.R_u[:, kept]], axis=2))
        return c

    def jacobian(self, w) -> np.ndarray:
        """The dense ∂g/∂w."""
        c = self._derivatives(self.at(w))
        J, nx = np.zeros((self.ng, self.nw)), self.nx
        J[:nx, :nx] = np.eye(nx)  # z_0 - (x0 ⊖ x̄_0)
        for k in range(self.T):  # z_{k+1} - (f_k(x_k, u_k) ⊖ x̄_{k+1})
            rows = slice((k + 1) * nx, (k + 2) * nx)
            J[rows, self.z(k)] = c["D"][k]
            J[rows, self.z(k + 1).start:self.z(k + 1).start + nx] = np.eye(nx)
        for (_, a, b, _, kept, g0), R in zip(self.rows, c["R"]):
            for i, k in enumerate(range(a, b)):
                J[g0 + i * len(kept):g0 + (i + 1) * len(kept), self.z(k)] = R[i]
        return J

    def grad_f(self, w) -> np.ndarray:
        return self._derivatives(self.at(w))["grad"]

    def jac_g(self, w) -> np.ndarray:
        """The nonzeros of ∂g/∂w in casadi's order."""
        return self.jacobian(w)[self._jacobian_nz]

    def lagrangian_gradient(self, w, lam_f: float, lam_g) -> np.ndarray:
        """∇(λ_f f + λ_gᵀ g) (casadi's Lagrangian), block by block."""
        c = self._derivatives(self.at(w))
        T, nx, m = self.T, self.nx, self.m
        out = lam_f * c["grad"]
        knots = out[:T * m].reshape(T, m)  # views: (z_k, u_k) for k < T, then z_T
        terminal = out[T * m:]
        lam_dyn = np.asarray(lam_g[:(T + 1) * nx]).reshape(T + 1, nx)
        knots[:, :nx] += lam_dyn[:-1]
        terminal += lam_dyn[-1]
        knots += np.einsum("kij,ki->kj", c["D"], lam_dyn[1:])
        for (_, a, b, _, kept, g0), R in zip(self.rows, c["R"]):
            contribution = np.einsum("kij,ki->kj", R, np.asarray(lam_g[g0:g0 + (b - a) * len(kept)]).reshape(b - a, -1))
            if a == T:
                terminal += contribution[0]
            else:
                knots[a:b] += contribution
        return out

    def hess_lag(self, w, lam_f: float, lam_g, step: float = 1e-5) -> np.ndarray:
        """The nonzeros (upper triangle, casadi's order) of ∇²(λ_f f + λ_gᵀ g), by central differences of the exact
        gradient: the Lagrangian is a sum of functions of one knot's ``z_k`` each (plus terms linear in ``w``), so
        its Hessian is block diagonal and one pair of gradients gives column ``j`` of every knot's block at once
        (2 (nx + nu) gradients in all)."""
        H = np.zeros((self.nw, self.nw))
        h = step * np.maximum(1.0, np.abs(w))
        for j in range(self.m):
            e = np.zeros(self.nw)
            e[j::self.m] = h[j::self.m]
            dG = (self.lagrangian_gradient(w + e, lam_f, lam_g) - self.lagrangian_gradient(w - e, lam_f, lam_g))
            for k in range(self.T + 1 if j < self.nx else self.T):
                z = self.z(k)
                H[z, z.start + j] = dG[z] / (2.0 * e[z.start + j])
        return (0.5 * (H + H.T))[self._hessian_nz]


def _sparsity(mask: np.ndarray) -> tuple[casadi.Sparsity, tuple[np.ndarray, np.ndarray]]:
    """casadi's sparsity of a boolean pattern and the (rows, columns) of its nonzeros in casadi's order."""
    r, c = np.nonzero(mask)
    sparsity = casadi.Sparsity.triplet(*mask.shape, r.tolist(), c.tolist())
    return sparsity, tuple(np.array(a) for a in sparsity.get_triplet())


class _Callback(casadi.Callback):
    """A casadi function of dense inputs (``sizes``) with one output of ``sparsity`` whose nonzeros are
    ``value(*inputs)``; with ``jacobian = (sparsity, nonzeros)``, its Jacobian (with respect to the first input) is
    another ``_Callback``, of the inputs and the nominal output."""

    def __init__(self, name: str, sizes, sparsity, value, jacobian=None, nominal: int | None = None):
        casadi.Callback.__init__(self)
        self.sizes, self.sparsity, self.value, self.jacobian, self.nominal = sizes, sparsity, value, jacobian, nominal
        self.construct(name, {"enable_fd": False})

    def get_n_in(self):
        return len(self.sizes) + (self.nominal is not None)

    def get_n_out(self):
        return 1

    def get_sparsity_in(self, i):
        return casadi.Sparsity.dense(self.sizes[i], 1) if i < len(self.sizes) else casadi.Sparsity(self.nominal, 1)

    def get_sparsity_out(self, i):
        return self.sparsity

    def eval(self, arg):
        inputs = [np.asarray(a).ravel() for a in arg[:len(self.sizes)]]
        return [casadi.DM(self.sparsity, self.value(*inputs))]

    def has_jacobian(self):
        return self.jacobian is not None

    def has_jac_sparsity(self, oind, iind):  # without it casadi takes the Jacobian for dense
        return self.jacobian is not None

    def get_jac_sparsity(self, oind, iind, symmetric):
        return self.jacobian[0]

    def get_jacobian(self, name, inames, onames, opts):
        # casadi holds no Python reference to the callback it gets: keep one
        self._jacobian = _Callback(name, self.sizes, *self.jacobian, nominal=self.sparsity.size1())
        return self._jacobian


def solve_ipopt(problem: Problem, xs0: Trajectory | None = None, us0=None, hessian: str = "finite-differences",
                tol: float = 1e-10, max_iter: int = 500, active_tol: float = 1e-6,
                options: dict | None = None, reference: Trajectory | None = None) -> IpoptSolution:
    """Solve ``problem`` by IPOPT (module docstring) from the guess ``(xs0, us0)`` (defaults: zero controls and
    their rollout). ``hessian``: "finite-differences" (``Transcription.hess_lag``) or "limited-memory" (IPOPT's
    L-BFGS). ``options``: more IPOPT options. ``reference``: the chart's trajectory (default: the zero state on a
    fixed base, the guess ``xs0`` on a floating base)."""
    us0 = np.zeros((problem.T, problem.nu)) if us0 is None else np.asarray(us0, dtype=np.float64)
    xs0 = problem.rollout(us0) if xs0 is None else xs0
    if reference is None and problem.state_space.floating_base:
        reference = xs0
    t = Transcription(problem, reference)
    f = _Callback("f", [t.nw], casadi.Sparsity.dense(1, 1), t.f, (casadi.Sparsity.dense(1, t.nw), t.grad_f))
    g = _Callback("g", [t.nw], casadi.Sparsity.dense(t.ng, 1), t.g, (t.jacobian_sparsity, t.jac_g))
    w = casadi.MX.sym("w", t.nw)
    ipopt = {"tol": tol, "constr_viol_tol": tol, "dual_inf_tol": tol, "compl_inf_tol": tol, "acceptable_tol": 100 * tol,
             "max_iter": max_iter, "mu_strategy": "adaptive", "print_level": 0, "sb": "yes"}
    settings = {"print_time": False, "error_on_fail": False}
    if hessian == "limited-memory":
        ipopt.update(hessian_approximation="limited-memory", limited_memory_max_history=20)
    elif hessian == "finite-differences":
        hess = _Callback("hess_lag", [t.nw, 0, 1, t.ng], t.hessian_sparsity,
                         lambda w, p, lam_f, lam_g: t.hess_lag(w, lam_f[0], lam_g))
        settings["hess_lag"] = hess
    else:
        raise ValueError(f"solve_ipopt: hessian must be 'finite-differences' or 'limited-memory', got {hessian!r}")
    solver = casadi.nlpsol("oracle", "ipopt", {"x": w, "f": f(w), "g": g(w)},
                           {**settings, "ipopt": {**ipopt, **(options or {})}})
    lbx, ubx = np.full(t.nw, -np.inf), np.full(t.nw, np.inf)
    for k in range(problem.T):
        lbx[t.z(k)][t.nx:], ubx[t.z(k)][t.nx:] = problem.u_lb[k], problem.u_ub[k]
    start = time.perf_counter()
    sol = solver(x0=t.pack(xs0, us0), lbx=lbx, ubx=ubx, lbg=t.lbg, ubg=t.ubg)
    elapsed = time.perf_counter() - start
    stats = solver.stats()
    wopt, lam_g, lam_x = (np.asarray(sol[key]).ravel() for key in ("x", "lam_g", "lam_x"))
    xs, us = t.unpack(wopt)
    parts: dict[str, list] = {}
    for name, a, b, c, kept, g0 in t.rows:
        values = np.zeros((b - a, c.nr))
        values[:, kept] = lam_g[g0:g0 + (b - a) * len(kept)].reshape(b - a, len(kept))
        parts.setdefault(name, []).append((np.arange(a, b), values))
    multipliers = {name: (np.concatenate([k for k, _ in p]), np.concatenate([v for _, v in p]))
                   for name, p in parts.items()}
    control_multipliers = lam_x[:t.T * t.m].reshape(t.T, t.m)[:, t.nx:].copy()
    defect = float(np.abs(problem.gaps(xs, us)).max())
    log = stats["iterations"]
    return IpoptSolution(stats["return_status"], bool(stats["success"]), int(stats["iter_count"]), elapsed, xs, us,
                         problem.cost(xs, us), multipliers, control_multipliers,
                         active_set(problem, xs, us, active_tol), defect, float(log["inf_pr"][-1]),
                         float(log["inf_du"][-1]), t.reference)


def assert_same_active_sets(problem, result, oracle, tolerances=(2e-7, 5e-6)) -> None:
    """The active sets of ``result`` (lietraj's) and ``oracle`` (IPOPT's) equal IPOPT's at every tolerance: one rule
    classifies both solutions, and it is not ambiguous (every row is within the smallest tolerance of its bound or
    further than the largest, in both)."""
    sets = [active_set(problem, xs, us, tol) for xs, us in ((result.xs, result.us), (oracle.xs, oracle.us))
            for tol in tolerances]
    for key, (knots, active) in oracle.active.items():
        for other in sets:
            assert np.array_equal(other[key][0], knots) and np.array_equal(other[key][1], active), key


def assert_derivatives_are_differences(t: Transcription, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The transcription's ∇f and ∂g/∂w at ``w`` (lietraj's derivatives in the NLP's layout) equal the central
    differences of its f and g to 1e-6, and the declared sparsity holds every nonzero; returns the differences of f
    and g and the analytic ∂g/∂w, dense."""
    h = 1e-6 * np.maximum(1.0, np.abs(w))
    E = np.diag(h)
    grad = np.array([(t.f(w + e) - t.f(w - e)) for e in E]) / (2 * h)
    jac = np.array([(t.g(w + e) - t.g(w - e)) for e in E]).T / (2 * h)
    assert np.abs(t.grad_f(w) - grad).max() < 1e-6 * max(1.0, np.abs(grad).max())
    dense = np.zeros((t.ng, t.nw))
    dense[t._jacobian_nz] = t.jac_g(w)
    assert np.abs(dense - jac).max() < 1e-6 * max(1.0, np.abs(jac).max())
    assert np.count_nonzero(jac[dense == 0]) == 0  # the declared sparsity holds every nonzero
    return grad, jac, dense
