"""IPOPT (through casadi) as the oracle of ``solve_constrained``: a fixed-base ``Problem`` transcribed by multiple
shooting, with lietraj's own values and derivatives as casadi callbacks.

The NLP, over ``w = [x_0; u_0; x_1; u_1; ..; u_{T-1}; x_T]`` (each ``x_k = [s_k; v_k]``: on a fixed base the
tangent chart is the plain vector space, ``x ⊕ z = x + z``, so lietraj's Jacobians are the NLP's)::

    minimise    Σ_k l_k(x_k, u_k) + l_T(x_T)                        Problem.cost; ∇: l_x, l_u (Problem.derivatives)
    subject to  x_0 − x0 = 0
                x_{k+1} − f_k(x_k, u_k) = 0,  k < T                  Problem.step; F_x, F_u (Problem.derivatives)
                lower ≤ r(x_k, u_k) ≤ upper  every constraint row     Constraint.value; R_x, R_u (.derivatives)
                u_lb ≤ u_k ≤ u_ub                                    variable bounds

(rows whose two bounds are infinite are left out). The objective and the constraints are each one
``casadi.Callback`` whose Jacobian is another callback with the declared block sparsity; all share a cache keyed
on ``w`` (IPOPT asks for f, g, ∇f and ∂g at one point in turn). The Hessian of the Lagrangian is, by default,
central differences of its exact gradient ``∇f + ∂gᵀλ`` (block diagonal by knots, so ``2 (nx + nu)`` gradients a
Hessian, ``Transcription.hess_lag``): IPOPT then meets ``tol = 1e-10`` in 15-20 iterations, where its
limited-memory Hessian (``hessian="limited-memory"``) stalls on the UR5 reach at a dual infeasibility of ~1e-6
after ~280 iterations ("Error_In_Step_Computation"), its cost right but its multipliers less so. Either way the
KKT conditions IPOPT checks use lietraj's exact first derivatives.

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

from lietraj.dynamics.lie.state import Trajectory
from lietraj.optimal_control.problem import Problem


@dataclass(eq=False)
class IpoptSolution:
    """IPOPT's answer: ``status`` (its return status), ``success``, ``iterations``, wall ``time`` (s, the solve
    alone), ``xs``, ``us``, ``cost``, the multipliers ``name -> (knots, values (K, nr))`` (0 on left-out rows) and
    ``control_multipliers`` (T, nu) (positive at ``u_ub``), the ``active`` set (``active_set``), the largest
    dynamics ``defect`` and the ``primal_infeasibility`` and ``dual_infeasibility`` of IPOPT's last iterate (its log's
    ``inf_pr``, ``inf_du``)."""

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
    """The layout of ``w`` (knot by knot: ``[x_0; u_0; x_1; u_1; ..; x_T]``, so that knot ``k``'s variables ``z_k``
    are contiguous) and of ``g``, their values and derivatives at one ``w`` (cached), and the Hessian of the
    Lagrangian by differences."""

    def __init__(self, problem: Problem):
        sp = problem.state_space
        if sp.floating_base:
            raise ValueError("ipopt_oracle: fixed-base problems only (the tangent chart must be the vector space)")
        self.problem, self.T, self.n, self.nx, self.nu = problem, problem.T, sp.n, sp.ndx, problem.nu
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
        """Knot ``k``'s variables in ``w``: ``[x_k; u_k]``, ``x_T`` for ``k = T``."""
        return slice(k * self.m, k * self.m + (self.m if k < self.T else self.nx))

    def pack(self, xs: Trajectory, us) -> np.ndarray:
        x = np.hstack([xs.s, xs.v])
        return np.concatenate([np.hstack([x[:-1], np.asarray(us, dtype=np.float64)]).ravel(), x[-1]])

    def unpack(self, w) -> tuple[Trajectory, np.ndarray]:
        Z = w[:self.T * self.m].reshape(self.T, self.m)
        x = np.vstack([Z[:, :self.nx], w[None, self.T * self.m:]])
        return Trajectory(None, x[:, :self.n].copy(), x[:, self.n:].copy()), Z[:, self.nx:].copy()

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

    def g(self, w) -> np.ndarray:
        c = self.at(w)
        if "g" not in c:
            p, X, U = self.problem, c["X"], c["U"]
            x, step = np.hstack([X.s, X.v]), p.step(X, U)
            g = [x[0] - np.concatenate([p.x0.s, p.x0.v]), (x[1:] - np.hstack([step.s, step.v])).ravel()]
            for _, a, b, con, kept, _ in self.rows:
                g.append(con.value(X[a:b], None if a == self.T else U[a:b])[:, kept].ravel())
            c["g"] = np.concatenate(g)
        return c["g"]

    def _derivatives(self, c: dict) -> dict:
        """∇f and the dense ∂g/∂w at the cached point: ``Problem.derivatives`` and ``Constraint.derivatives``."""
        if "grad" not in c:
            X, U = c["X"], c["U"]
            d = self.problem.derivatives(X, U)
            c["grad"] = np.concatenate([np.hstack([d.running.l_x, d.running.l_u]).ravel(), d.terminal.l_x[0]])
            J, nx = np.zeros((self.ng, self.nw)), self.nx
            J[:nx, :nx] = np.eye(nx)  # x_0 - x0
            for k in range(self.T):  # x_{k+1} - f_k(x_k, u_k)
                rows = slice((k + 1) * nx, (k + 2) * nx)
                J[rows, self.z(k)] = -np.hstack([d.dynamics.F_x[k], d.dynamics.F_u[k]])
                J[rows, self.z(k + 1).start:self.z(k + 1).start + nx] = np.eye(nx)
            for _, a, b, con, kept, g0 in self.rows:
                r = con.derivatives(X[a:b], None if a == self.T else U[a:b])
                R = np.concatenate([r.R_x, r.R_u], axis=2)[:, kept]
                for i, k in enumerate(range(a, b)):
                    J[g0 + i * len(kept):g0 + (i + 1) * len(kept), self.z(k)] = R[i]
            c["J"] = J
        return c

    def grad_f(self, w) -> np.ndarray:
        return self._derivatives(self.at(w))["grad"]

    def jac_g(self, w) -> np.ndarray:
        """The nonzeros of ∂g/∂w in casadi's order."""
        return self._derivatives(self.at(w))["J"][self._jacobian_nz]

    def lagrangian_gradient(self, w, lam_f: float, lam_g) -> np.ndarray:
        """∇(λ_f f + λ_gᵀ g) (casadi's Lagrangian)."""
        c = self._derivatives(self.at(w))
        return lam_f * c["grad"] + c["J"].T @ lam_g

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
                options: dict | None = None) -> IpoptSolution:
    """Solve ``problem`` by IPOPT (module docstring) from the guess ``(xs0, us0)`` (defaults: zero controls and
    their rollout). ``hessian``: "finite-differences" (``Transcription.hess_lag``) or "limited-memory" (IPOPT's
    L-BFGS). ``options``: more IPOPT options."""
    t = Transcription(problem)
    us0 = np.zeros((problem.T, problem.nu)) if us0 is None else np.asarray(us0, dtype=np.float64)
    xs0 = problem.rollout(us0) if xs0 is None else xs0
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
    defect = float(np.abs(t.g(wopt)[:(problem.T + 1) * t.nx]).max())
    log = stats["iterations"]
    return IpoptSolution(stats["return_status"], bool(stats["success"]), int(stats["iter_count"]), elapsed, xs, us,
                         problem.cost(xs, us), multipliers, control_multipliers,
                         active_set(problem, xs, us, active_tol), defect, float(log["inf_pr"][-1]),
                         float(log["inf_du"][-1]))
