"""Costs of one knot, evaluated over many knots at once: the interface the solvers minimise, and the built-in costs.

A cost ``l(x, u)`` is differentiated in the tangent chart of the state (``x exp(dx)``, order
``[z_H; z_s; z_ν; z_ṡ]``) and in ``u``; every call takes all knots of a trajectory at once. Terminal costs have
``nu = 0`` and are called with ``U = None``.

- ``ResidualCost``: ``l = a(r(x, u))`` for a residual (``residuals.py``) and an activation (``activations.py``),
  ``l_x = R_xᵀ a'``, ``l_u = R_uᵀ a'`` and the Gauss–Newton Hessian ``[R_x R_u]ᵀ a'' [R_x R_u]``, which drops
  ``Σᵢ a'ᵢ ∇²rᵢ`` (Crocoddyl's residual costs). It is the exact Hessian for residuals that are affine in
  ``(dx, du)``: controls, joint positions, the state on a fixed base.
- ``CostSum``: named, weighted terms, ``l = Σ wᵢ lᵢ``.
- ``FunctionCost``: a plain Python function ``fn(x, u)`` of one knot; derivatives it is not given are taken by
  central differences on the group (step sizes and accuracy in its docstring).
- ``state_regularization``, ``control_regularization``, ``joint_limit_cost``, ``torque_limit_cost``: the usual
  terms in one call.

A cost's ``exact_hessian`` says whether ``l_xx, l_xu, l_uu`` are the true second derivatives (``check_derivatives``
compares them with finite differences only then).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics.lie import se3
from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.lie.state import State, StateSpace, Trajectory
from lietraj.optimal_control.costs.activations import Activation, Quadratic, QuadraticBarrier, WeightedQuadratic
from lietraj.optimal_control.costs.residuals import (
    ControlResidual,
    JointPositionResidual,
    JointTorqueResidual,
    Residual,
    KnotsChecked,
    StateResidual,
    check_knots,
)


@dataclass(eq=False)
class CostDerivatives:
    """Value and derivatives of a cost at N knots: ``l`` (N,), ``l_x`` (N, ndx), ``l_u`` (N, nu), ``l_xx``
    (N, ndx, ndx), ``l_xu`` (N, ndx, nu), ``l_uu`` (N, nu, nu)."""

    l: np.ndarray
    l_x: np.ndarray
    l_u: np.ndarray
    l_xx: np.ndarray
    l_xu: np.ndarray
    l_uu: np.ndarray

    @classmethod
    def zeros(cls, N: int, ndx: int, nu: int) -> CostDerivatives:
        return cls(np.zeros(N), np.zeros((N, ndx)), np.zeros((N, nu)), np.zeros((N, ndx, ndx)),
                   np.zeros((N, ndx, nu)), np.zeros((N, nu, nu)))


class CostModel(ABC):
    """Anything a solver can minimise at a knot: ``value`` and ``derivatives`` over all knots of ``X``.

    A subclass sets ``state_space`` and ``nu`` (0 for a terminal cost).
    """

    state_space: StateSpace
    nu: int

    @abstractmethod
    def value(self, X: Trajectory, U: np.ndarray | None) -> np.ndarray:
        """``l(X[k], U[k])`` for every knot, shape (N,)."""

    @abstractmethod
    def derivatives(self, X: Trajectory, U: np.ndarray | None, out: CostDerivatives | None = None) -> CostDerivatives:
        """Value, gradient and Hessian at every knot; ``out`` is overwritten when given."""


# ---------------------------------------------------------------- helpers


def _output(out: CostDerivatives | None, N: int, ndx: int, nu: int, what: object) -> CostDerivatives:
    """``out`` checked to hold N knots of a cost on ndx tangent and nu control coordinates, or new arrays; ``what``
    as for ``check_knots``."""
    if out is None:
        return CostDerivatives(np.empty(N), np.empty((N, ndx)), np.empty((N, nu)), np.empty((N, ndx, ndx)),
                               np.empty((N, ndx, nu)), np.empty((N, nu, nu)))
    if not isinstance(out, CostDerivatives):
        raise TypeError(f"{what}: out must be a CostDerivatives, got {type(out).__name__}")
    shapes = {"l": (N,), "l_x": (N, ndx), "l_u": (N, nu), "l_xx": (N, ndx, ndx), "l_xu": (N, ndx, nu),
              "l_uu": (N, nu, nu)}
    for name, shape in shapes.items():
        a = getattr(out, name)
        if not (isinstance(a, np.ndarray) and a.shape == shape and a.dtype == np.float64 and a.flags.c_contiguous
                and a.flags.writeable):
            raise ValueError(f"{what}: out.{name} must be a writeable C-contiguous float64 array of shape {shape}")
    return out


def _fields(d: CostDerivatives) -> tuple[np.ndarray, ...]:
    return d.l, d.l_x, d.l_u, d.l_xx, d.l_xu, d.l_uu


def _compatible(a: StateSpace | None, b: StateSpace | None) -> bool:
    return a is None or b is None or (a.n == b.n and a.floating_base == b.floating_base)


def _activation(weights, nr: int, what: str) -> Activation:
    """``Quadratic`` for None, else ``WeightedQuadratic`` of a scalar, a vector (nr,) or a matrix (nr, nr)."""
    if weights is None:
        return Quadratic(nr)
    W = np.array(weights, dtype=np.float64)
    if W.ndim == 0:
        W = np.full(nr, float(W))
    if W.shape[0] != nr:
        raise ValueError(f"{what}: weights must be a scalar, a vector ({nr},) or a matrix ({nr}, {nr}), got {W.shape}")
    return WeightedQuadratic(W)


# ---------------------------------------------------------------- residual costs


@helper
def _row_nonzeros(A, I, C):
    """I[r, :C[r]] = the columns of row r of A that are not zero."""
    for r in range(A.shape[0]):
        c = 0
        for a in range(A.shape[1]):
            if A[r, a] != 0.0:
                I[r, c] = a
                c += 1
        C[r] = c


@helper
def add_symmetric_products(P, IP, CP, weight, diagonal, D, H, kd, out):
    """``out += weight Pᵀ H P`` for one knot's P (nr, m) and the Hessian ``H[kd]`` (nr, nr), or ``diag(D[kd])`` when
    ``diagonal``, summing only the products of the non-zero columns of P's rows ``IP[r, :CP[r]]``, each once for
    both triangles."""
    for r in range(P.shape[0]):
        for s in range(r if diagonal else 0, r + 1 if diagonal else P.shape[0]):
            w = weight * (D[kd, r] if diagonal else H[kd, r, s])
            if w == 0.0:
                continue
            for i in range(CP[r]):
                a = IP[r, i]
                wa = w * P[r, a]
                for j in range(CP[s]):
                    b = IP[s, j]
                    if b < a:
                        continue
                    x = wa * P[s, b]
                    out[a, b] += x
                    if b != a:
                        out[b, a] += x


@helper
def add_products(P, IP, CP, Q, IQ, CQ, weight, diagonal, D, H, kd, out):
    """``out += weight Pᵀ H Q`` (``add_symmetric_products`` for two matrices of nr rows, each with its rows'
    non-zero columns)."""
    for r in range(P.shape[0]):
        for s in range(r if diagonal else 0, r + 1 if diagonal else P.shape[0]):
            w = weight * (D[kd, r] if diagonal else H[kd, r, s])
            if w == 0.0:
                continue
            for i in range(CP[r]):
                a = IP[r, i]
                wa = w * P[r, a]
                for j in range(CQ[s]):
                    b = IQ[s, j]
                    out[a, b] += wa * Q[s, b]


@helper
def add_gradient(P, IP, CP, weight, g, out):
    """``out += weight Pᵀ g`` over the non-zero columns of P's rows (``add_symmetric_products``)."""
    for r in range(P.shape[0]):
        wg = weight * g[r]
        for i in range(CP[r]):
            a = IP[r, i]
            out[a] += wg * P[r, a]


@kernel
def _add_weighted_products(P, Q, symmetric, g, D, H, weight, PHQ, gP, nonzeros, counts, p_known, rows):
    """``PHQ[row] += weight P[k]ᵀ H[k] Q[k]`` and, when ``gP`` is not empty, ``gP[row] += weight P[k]ᵀ g[k]``, for
    P (N, nr, m), Q (N, nr, p) and a Hessian H (N, nr, nr), or, when H is empty, ``diag(D[k])`` with D (N, nr);
    a D or H of one knot serves every knot. ``row = rows[k]``, or ``k`` when ``rows`` is empty: a term
    held by several runs of knots adds into their rows of the problem's arrays, without a buffer to scatter.
    ``symmetric``: Q is P (and H symmetric), so each product is computed once for both triangles.

    Residual Jacobians are mostly zeros (a frame's non-ancestor joints, the velocity columns, the identity blocks
    of a state error), so each row's non-zero columns are gathered first and only their products summed:
    Σ_r nnz_P(r) nnz_Q(r) multiplications for a diagonal H instead of nr m p. No BLAS (whose threads stall when
    the cores are busy). ``nonzeros`` (2, nr, max(m, p)) and ``counts`` (2, nr) are integer work arrays; with
    ``p_known`` their first halves hold P's pattern already (``ResidualDerivatives.x_columns``), the same at every
    knot, and P is not searched."""
    diagonal = H.shape[0] == 0
    IP, IQ, CP, CQ = nonzeros[0], nonzeros[1], counts[0], counts[1]
    for k in range(P.shape[0]):
        row = rows[k] if rows.shape[0] else k
        Pk, Qk, out = P[k], Q[k], PHQ[row]
        kd = k if (H.shape[0] if not diagonal else D.shape[0]) > 1 else 0
        if not p_known:
            _row_nonzeros(Pk, IP, CP)
        if symmetric:
            add_symmetric_products(Pk, IP, CP, weight, diagonal, D, H, kd, out)
        else:
            _row_nonzeros(Qk, IQ, CQ)
            add_products(Pk, IP, CP, Qk, IQ, CQ, weight, diagonal, D, H, kd, out)
        if gP.shape[0]:
            add_gradient(Pk, IP, CP, weight, g[k], gP[row])


_NO_GRADIENT, _NO_DIAGONAL, _NO_MATRIX = np.empty((0, 0)), np.empty((0, 0)), np.empty((0, 0, 0))
_EACH_KNOT = np.empty(0, dtype=np.int64)


def _x_pattern(d, nr: int, ndx: int, nonzeros: np.ndarray, counts: np.ndarray, known) -> tuple | None:
    """Copy the residual's pattern of ``R_x`` (``ResidualDerivatives.x_columns``) into the first halves of the
    work arrays and return it, or None when it gives none, for the kernel to search ``R_x``. ``known``: the pattern
    these work arrays hold already (a residual returns the same one at every call), checked and copied before."""
    pattern = getattr(d, "x_columns", None)
    if pattern is None or pattern is known:
        return pattern
    columns, count = pattern
    # the kernel indexes without bounds checks: a pattern out of range would read outside R_x
    if (columns.shape[0] != nr or count.shape != (nr,) or columns.shape[1] > ndx or columns.dtype != np.int64
            or count.dtype != np.int64 or count.min(initial=0) < 0 or count.max(initial=0) > columns.shape[1]
            or columns.min(initial=0) < 0 or columns.max(initial=0) >= ndx):
        raise ValueError(f"x_columns of the residual's derivatives: expected int64 arrays ({nr}, <= {ndx}) and ({nr},) "
                         f"with columns in [0, {ndx}) and counts within the width, got {columns.shape}, {count.shape}")
    nonzeros[0, :, :columns.shape[1]] = columns
    counts[0] = count
    return pattern


def _hessian_data(a) -> tuple[np.ndarray, np.ndarray]:
    """An activation's Hessian for ``_add_weighted_products``: ``(D, empty)`` for a diagonal one, ``(empty, H)``
    otherwise, as writeable contiguous arrays, of one knot when the Hessian is the same at every knot."""
    diagonal = a.diagonal is not None
    A = a.diagonal if diagonal else a.hessian
    if A.shape[0] > 1 and A.strides[0] == 0:
        A = A[:1]
    A = np.array(A, dtype=np.float64) if not (A.flags.c_contiguous and A.flags.writeable) else A
    return (A, _NO_MATRIX) if diagonal else (_NO_DIAGONAL, A)


HESSIANS = ("gauss-newton", "exact")


class ResidualCost(CostModel):
    """``l = a(r(x, u))``: a residual through an activation (default ``Quadratic``), with ``l_x = R_xᵀ a'``,
    ``l_u = R_uᵀ a'`` and the Gauss–Newton Hessian ``l_xx = R_xᵀ a'' R_x``, ``l_xu = R_xᵀ a'' R_u``,
    ``l_uu = R_uᵀ a'' R_u``.

    ``hessian="exact"`` asks for the exact Hessian, which is the same formula when the residual is affine in
    ``(dx, du)``: ``ControlResidual``, ``JointTorqueResidual``, ``JointPositionResidual`` and ``StateResidual`` on a
    fixed base; other residuals raise a ValueError (their exact Hessian would need ``∇²r``).
    """

    def __init__(self, residual: Residual, activation: Activation | None = None, hessian: str = "gauss-newton"):
        if not isinstance(residual, Residual):
            raise TypeError(f"ResidualCost: residual must be a Residual, got {type(residual).__name__}")
        activation = Quadratic() if activation is None else activation
        if not isinstance(activation, Activation):
            raise TypeError(f"ResidualCost: activation must be an Activation, got {type(activation).__name__}")
        if activation.nr is not None and activation.nr != residual.nr:
            raise ValueError(f"ResidualCost: {activation!r} takes residuals of size {activation.nr}, {residual!r} has "
                             f"size {residual.nr}")
        if hessian not in HESSIANS:
            raise ValueError(f"ResidualCost: hessian must be one of {HESSIANS}, got {hessian!r}")
        if hessian == "exact" and not residual.linear:
            raise ValueError(f"ResidualCost: hessian='exact' is available for residuals affine in (dx, du) (controls, "
                             f"joint positions, the state on a fixed base), not for {residual!r}")
        self.residual, self.activation, self.hessian = residual, activation, hessian
        self.state_space, self.nu = residual.state_space, residual.nu
        self.exact_hessian = residual.linear

    def __repr__(self) -> str:
        return f"ResidualCost({self.residual!r}, {self.activation!r})"

    def value(self, X: Trajectory, U: np.ndarray | None) -> np.ndarray:
        return self.activation.value(self.residual.value(X, U))

    def derivatives(self, X: Trajectory, U: np.ndarray | None, out: CostDerivatives | None = None) -> CostDerivatives:
        d = self.residual.derivatives(X, U)
        out = _output(out, len(X), 2 * X.v.shape[1], self.nu, self)
        for a in _fields(out):
            a[...] = 0.0
        self._add(d, 1.0, out)
        return out

    def _work(self, nr: int, width: int) -> tuple[np.ndarray, np.ndarray, tuple | None]:
        """The products' integer work arrays (``_add_weighted_products``) and the pattern of ``R_x`` their first halves
        hold (None: none), kept from call to call (a cost serves one solve at a time, as a ``CostSum``)."""
        work = getattr(self, "_pattern", None)
        if work is None or work[0].shape != (2, nr, width):
            work = self._pattern = (np.empty((2, nr, width), np.int64), np.empty((2, nr), np.int64), None)
        return work

    def _add(self, d, weight: float, out: CostDerivatives, rows: np.ndarray | None = None) -> None:
        """out += weight * (value and derivatives) from the residual's derivatives ``d``: into ``out``'s knots, or
        into its ``rows`` (int64, one per knot of ``d``; a row listed twice adds twice) of a larger ``out``."""
        res = self.residual
        a = self.activation.derivatives(d.r)
        N, ndx, nu = out.l_x.shape[0] if rows is None else len(rows), out.l_x.shape[1], self.nu
        nr = d.r.shape[1] if d.r.ndim == 2 else -1
        D, H = _hessian_data(a)
        # The kernel reads without bounds checks: a custom residual or activation of the wrong shape must stop here.
        if (d.r.shape != (N, nr) or d.R_x.shape != (N, nr, ndx) or d.R_u.shape != (N, nr, nu)
                or a.value.shape != (N,) or a.gradient.shape != (N, nr)
                or not (D.shape[0] == 0 or (D.shape[0] in (1, N) and D.shape[1:] == (nr,)))
                or not (H.shape[0] == 0 or (H.shape[0] in (1, N) and H.shape[1:] == (nr, nr)))):
            raise ValueError(f"{self!r}: inconsistent shapes: r {d.r.shape}, R_x {d.R_x.shape}, R_u {d.R_u.shape} "
                             f"(expected ({N}, nr), ({N}, nr, {ndx}), ({N}, nr, {nu})); activation value {a.value.shape}, "
                             f"gradient {a.gradient.shape}, Hessian {(D if D.size else H).shape}")
        if rows is None:
            out.l += weight * a.value
            rows = _EACH_KNOT
        else:
            np.add.at(out.l, rows, weight * a.value)
        g = np.ascontiguousarray(a.gradient, dtype=np.float64)
        R_x = np.ascontiguousarray(d.R_x, dtype=np.float64) if res.uses_x else None
        R_u = np.ascontiguousarray(d.R_u, dtype=np.float64) if res.uses_u else None
        nonzeros, counts, held = self._work(nr, max(ndx, nu))
        # the products with R_x first, while the first halves of the work arrays hold its pattern
        pattern = _x_pattern(d, nr, ndx, nonzeros, counts, held) if res.uses_x else None
        known = pattern is not None
        if res.uses_x:
            _add_weighted_products(R_x, R_x, True, g, D, H, weight, out.l_xx, out.l_x, nonzeros, counts, known, rows)
        if res.uses_x and res.uses_u:
            _add_weighted_products(R_x, R_u, False, g, D, H, weight, out.l_xu, _NO_GRADIENT, nonzeros, counts, known,
                                   rows)
        if res.uses_u:  # searches R_u's pattern into the first halves
            _add_weighted_products(R_u, R_u, True, g, D, H, weight, out.l_uu, out.l_u, nonzeros, counts, False, rows)
        self._pattern = (nonzeros, counts, None if res.uses_u else pattern)


# ---------------------------------------------------------------- sums


@dataclass(eq=False)
class CostTerm:
    """One term of a ``CostSum``: a cost and its weight (settable; 0 switches the term off)."""

    cost: CostModel
    weight: float


@kernel
def _accumulate(w, x, y):
    """y += w x on flat arrays (in place, no temporary, no BLAS)."""
    for i in range(x.shape[0]):
        y[i] += w * x[i]


def _weight(weight, what: str) -> float:
    if not (isinstance(weight, (int, float, np.integer, np.floating)) and math.isfinite(weight) and weight >= 0):
        raise ValueError(f"{what}: the weight must be a finite number >= 0, got {weight!r}")
    return float(weight)


class CostSum(CostModel):
    """``l = Σᵢ wᵢ lᵢ`` over named terms (``add``, ``remove``, ``costs[name]`` -> ``CostTerm``); ``values`` gives
    each term's weighted value for logging. Every term must have the sum's ``nu`` (0 for a terminal cost). The sum
    owns the output arrays of its terms' derivatives (``_term_outputs``), reused call after call: like the
    workspaces of its residuals, they make a cost serve one solve at a time."""

    def __init__(self, state_space: StateSpace | None, nu: int):
        if state_space is not None and not isinstance(state_space, StateSpace):
            raise TypeError(f"CostSum: state_space must be a StateSpace, got {type(state_space).__name__}")
        if not (isinstance(nu, (int, np.integer)) and nu >= 0):
            raise ValueError(f"CostSum: nu must be an integer >= 0, got {nu!r}")
        self.state_space, self.nu = state_space, int(nu)
        self.costs: dict[str, CostTerm] = {}
        self._term_outputs: dict[str, CostDerivatives] = {}

    def __repr__(self) -> str:
        return f"CostSum({', '.join(f'{k}: {t.weight:g}' for k, t in self.costs.items())})"

    @property
    def exact_hessian(self) -> bool:
        return all(getattr(t.cost, "exact_hessian", True) for t in self.costs.values())

    def add(self, name: str, cost: CostModel, weight: float = 1.0) -> None:
        """Add the term ``weight * cost`` under a new ``name``."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"CostSum.add: name must be a non-empty string, got {name!r}")
        if name in self.costs:
            raise ValueError(f"CostSum.add: a term called {name!r} exists already")
        if not isinstance(cost, CostModel):
            raise TypeError(f"CostSum.add({name!r}): cost must be a CostModel, got {type(cost).__name__}")
        if cost.nu != self.nu:
            hint = " (for a terminal cost, build its residual with nu=0)" if self.nu == 0 else ""
            raise ValueError(f"CostSum.add({name!r}): the cost has nu = {cost.nu}, the sum nu = {self.nu}{hint}")
        if not _compatible(self.state_space, cost.state_space):
            raise ValueError(f"CostSum.add({name!r}): the cost is on {cost.state_space}, the sum on {self.state_space}")
        self.costs[name] = CostTerm(cost, _weight(weight, f"CostSum.add({name!r})"))

    def remove(self, name: str) -> None:
        """Remove the term called ``name``."""
        if name not in self.costs:
            raise KeyError(f"CostSum has no term {name!r} (terms: {', '.join(self.costs) or 'none'})")
        del self.costs[name]
        self._term_outputs.pop(name, None)

    def _active(self) -> list[tuple[str, CostTerm]]:
        for name, term in self.costs.items():
            _weight(term.weight, f"CostSum term {name!r}")
        return [(name, term) for name, term in self.costs.items() if term.weight != 0.0]

    def values(self, X: Trajectory, U: np.ndarray | None) -> dict[str, np.ndarray]:
        """Each term's weighted value ``wᵢ lᵢ`` (N,) by name; they add up to ``value``."""
        with KnotsChecked(self.state_space, self.nu, X, U, "CostSum"):
            return {name: term.weight * term.cost.value(X, U) for name, term in self.costs.items()}

    def value(self, X: Trajectory, U: np.ndarray | None) -> np.ndarray:
        with KnotsChecked(self.state_space, self.nu, X, U, "CostSum") as knots:
            total = np.zeros(knots.N)
            for _, term in self._active():
                total += term.weight * term.cost.value(X, U)
            return total

    def derivatives(self, X: Trajectory, U: np.ndarray | None, out: CostDerivatives | None = None) -> CostDerivatives:
        with KnotsChecked(self.state_space, self.nu, X, U, "CostSum") as knots:
            return self._derivatives(X, U, knots.N, out)

    def _derivatives(self, X: Trajectory, U: np.ndarray | None, N: int, out: CostDerivatives | None) -> CostDerivatives:
        out = _output(out, N, 2 * X.v.shape[1], self.nu, "CostSum")
        totals = _fields(out)
        for a in totals:
            a[...] = 0.0
        for name, term in self._active():
            if isinstance(term.cost, ResidualCost):  # adds its sparse products in place
                term.cost._add(term.cost.residual.derivatives(X, U), term.weight, out)
                continue
            buffer = self._term_outputs.get(name)
            if buffer is None or buffer.l_xx.shape != out.l_xx.shape or buffer.l_u.shape != out.l_u.shape:
                buffer = self._term_outputs[name] = _output(None, N, out.l_x.shape[1], self.nu, "CostSum")
            d = term.cost.derivatives(X, U, buffer)
            for field, total, part in zip(("l", "l_x", "l_u", "l_xx", "l_xu", "l_uu"), totals, _fields(d)):
                if np.shape(part) != total.shape:
                    raise ValueError(f"CostSum: term {name!r} returned {field} of shape {np.shape(part)}, expected "
                                     f"{total.shape}")
                _accumulate(term.weight, np.ascontiguousarray(part, dtype=np.float64).reshape(-1), total.reshape(-1))
        return out


# ---------------------------------------------------------------- user functions

GRADIENT_STEP = 6e-6
"""Central-difference step of ``FunctionCost``'s numerical gradient, ≈ ε^(1/3) (ε = 2.2e-16)."""
HESSIAN_STEP = 1.2e-4
"""Step of ``FunctionCost``'s second differences of ``fn`` (when no gradient is given), ≈ ε^(1/4)."""


class FunctionCost(CostModel):
    """A cost given as a plain Python function of one knot, ``fn(x: State, u: ndarray) -> float`` (``u`` has shape
    (0,) for a terminal cost, ``nu = 0``), which must not modify its arguments. Called once per knot: this is user
    code, not the compiled hot path.

    ``gradient(x, u) -> (l_x (ndx,), l_u (nu,))`` and ``hessian(x, u) -> (l_xx, l_xu, l_uu)`` are optional (with
    ``nu = 0`` they may return ``l_x`` / ``l_xx`` alone); they are derivatives in the chart ``x exp(dx)``, ``u + du``
    (``x`` is perturbed on the group, as ``numerical_jacobian`` does). Missing ones are computed numerically:

    - gradient: central differences of ``fn(x exp(±h eᵢ), u)`` / ``fn(x, u ± h eᵢ)``, ``h = GRADIENT_STEP``
      (2 (ndx + nu) calls); error ≈ ε^(2/3) ≈ 4e-11 times the size of ``l`` and of its third derivatives;
    - Hessian from a given gradient: central differences of the gradient, ``h = GRADIENT_STEP`` (2 (ndx + nu)
      gradient calls), symmetrised; same accuracy relative to the gradient and its third derivatives;
    - Hessian without a gradient: second differences of ``fn``, ``h = HESSIAN_STEP``, ``(f(+j, +i) − f(+j, −i) −
      f(−j, +i) + f(−j, −i)) / 4h²`` with ``f(a, b) = fn(x exp(a h e_j) exp(b h e_i))`` (about 2 (ndx + nu)² calls);
      error ≈ ε^(1/2) ≈ 1e-8 times the size of ``l`` and of its fourth derivatives.

    On the SE(3) factor the differences of the gradient taken at ``x exp(h e_j)`` (in that point's chart) contain
    the antisymmetric term ``½ ∇l · [e_j, e_i]`` (BCH); symmetrising removes it exactly, leaving the Hessian of
    ``l(x exp(dx))`` at ``dx = 0``.
    """

    exact_hessian = True

    def __init__(self, state_space: StateSpace, nu: int, fn: Callable, gradient: Callable | None = None,
                 hessian: Callable | None = None):
        if not isinstance(state_space, StateSpace):
            raise TypeError(f"FunctionCost: state_space must be a StateSpace, got {type(state_space).__name__}")
        if not (isinstance(nu, (int, np.integer)) and nu >= 0):
            raise ValueError(f"FunctionCost: nu must be an integer >= 0, got {nu!r}")
        for name, f in (("fn", fn), ("gradient", gradient), ("hessian", hessian)):
            if f is not None and not callable(f):
                raise TypeError(f"FunctionCost: {name} must be callable, got {type(f).__name__}")
        if fn is None:
            raise TypeError("FunctionCost: fn is required")
        self.state_space, self.nu = state_space, int(nu)
        self.fn, self.gradient, self.hessian = fn, gradient, hessian
        self.name = getattr(fn, "__name__", "fn")
        # what check_derivatives has nothing to check in: blocks computed here by finite differences
        self.numerical_blocks = frozenset(() if hessian is not None else ("l_xx", "l_xu", "l_uu")) | frozenset(
            () if gradient is not None else ("l_x", "l_u"))

    def __repr__(self) -> str:
        return f"FunctionCost({self.name})"

    # -- one knot

    def _call(self, x: State, u: np.ndarray) -> float:
        value = self.fn(x, u)
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{self!r}: fn must return a number, got {type(value).__name__}") from None
        if not math.isfinite(value):
            raise ValueError(f"{self!r}: fn returned {value}")
        return value

    def _arrays(self, result, shapes: tuple[tuple[int, ...], ...], what: str) -> list[np.ndarray]:
        if not isinstance(result, tuple):
            result = (result,)
        if len(result) == 1 and self.nu == 0:
            result = result + tuple(np.zeros(s) for s in shapes[1:])
        if len(result) != len(shapes):
            raise ValueError(f"{self!r}: {what} must return a tuple of {len(shapes)} arrays of shapes {shapes}")
        arrays = []
        for a, shape in zip(result, shapes):
            a = np.asarray(a, dtype=np.float64)
            if a.shape != shape:
                raise ValueError(f"{self!r}: {what} must return arrays of shapes {shapes}, got {a.shape} for {shape}")
            if not np.isfinite(a).all():
                raise ValueError(f"{self!r}: {what} returned NaN or inf")
            arrays.append(a)
        return arrays

    def _gradient(self, x: State, u: np.ndarray) -> np.ndarray:
        """[l_x; l_u] at (x, u), the user's or by central differences."""
        ndx, nu = self.state_space.ndx, self.nu
        if self.gradient is not None:
            return np.concatenate(self._arrays(self.gradient(x, u), ((ndx,), (nu,)), "gradient"))
        g, h = np.empty(ndx + nu), GRADIENT_STEP
        for i in range(ndx + nu):
            g[i] = (self._at(x, u, ((i, h),)) - self._at(x, u, ((i, -h),))) / (2.0 * h)
        return g

    def _at(self, x: State, u: np.ndarray, steps, gradient: bool = False):
        """fn (or the gradient) at x exp(a e_i) exp(b e_j) ..., u + ..., for steps ((i, a), (j, b), ...)."""
        nh = 6 if self.state_space.floating_base else 0
        n, ndx = self.state_space.n, self.state_space.ndx
        for i, a in steps:
            if i < nh:
                z = np.zeros(6)
                z[i] = a
                x = State(x.H @ se3.exp(z), x.s, x.v)
            elif i < nh + n:
                x = State(x.H, x.s.copy(), x.v)
                x.s[i - nh] += a
            elif i < ndx:
                x = State(x.H, x.s, x.v.copy())
                x.v[i - nh - n] += a
            else:
                u = u.copy()
                u[i - ndx] += a
        return self._gradient(x, u) if gradient else self._call(x, u)

    def _hessian(self, x: State, u: np.ndarray, l0: float) -> np.ndarray:
        ndx, nu = self.state_space.ndx, self.nu
        m = ndx + nu
        if self.hessian is not None:
            blocks = self._arrays(self.hessian(x, u), ((ndx, ndx), (ndx, nu), (nu, nu)), "hessian")
            return np.block([[blocks[0], blocks[1]], [blocks[1].T, blocks[2]]])
        D = np.empty((m, m))
        if self.gradient is not None:
            h = GRADIENT_STEP
            for j in range(m):
                D[:, j] = (self._at(x, u, ((j, h),), True) - self._at(x, u, ((j, -h),), True)) / (2.0 * h)
            return 0.5 * (D + D.T)
        h = HESSIAN_STEP
        nh = 6 if self.state_space.floating_base else 0
        for j in range(m):
            D[j, j] = (self._at(x, u, ((j, 2 * h),)) - 2.0 * l0 + self._at(x, u, ((j, -2 * h),))) / (4.0 * h * h)
            for i in range(j):
                # Steps on different factors of the direct product commute: one order suffices.
                orders = ((j, i), (i, j)) if j < nh else ((j, i),)
                acc = 0.0
                for a, b in orders:
                    acc += (self._at(x, u, ((a, h), (b, h))) - self._at(x, u, ((a, h), (b, -h)))
                            - self._at(x, u, ((a, -h), (b, h))) + self._at(x, u, ((a, -h), (b, -h))))
                D[i, j] = D[j, i] = acc / (4.0 * h * h * len(orders))
        return D

    # -- all knots

    def value(self, X: Trajectory, U: np.ndarray | None) -> np.ndarray:
        N, U = check_knots(self.state_space, self.nu, X, U, self)
        return np.array([self._call(X[k].copy(), U[k].copy()) for k in range(N)])

    def derivatives(self, X: Trajectory, U: np.ndarray | None, out: CostDerivatives | None = None) -> CostDerivatives:
        N, U = check_knots(self.state_space, self.nu, X, U, self)
        ndx = self.state_space.ndx
        out = _output(out, N, ndx, self.nu, self)
        for k in range(N):
            x, u = X[k].copy(), U[k].copy()
            out.l[k] = self._call(x, u)
            g = self._gradient(x, u)
            out.l_x[k], out.l_u[k] = g[:ndx], g[ndx:]
            H = self._hessian(x, u, out.l[k])
            out.l_xx[k], out.l_xu[k], out.l_uu[k] = H[:ndx, :ndx], H[:ndx, ndx:], H[ndx:, ndx:]
        return out


# ---------------------------------------------------------------- conveniences


def state_regularization(state_space: StateSpace, x_ref: State | Trajectory, weights, nu: int) -> ResidualCost:
    """``½ ‖x ⊖ x_ref‖²_W`` with ``W`` from ``weights`` (None: identity; a scalar, a vector (ndx,) or a PSD matrix
    (ndx, ndx)); ``x_ref`` a State or a Trajectory to track; ``nu = 0`` for a terminal cost."""
    residual = StateResidual(state_space, x_ref, nu)
    return ResidualCost(residual, _activation(weights, residual.nr, "state_regularization"))


def control_regularization(nu: int, weights=None, reference=None, state_space: StateSpace | None = None) -> ResidualCost:
    """``½ ‖u − u_ref‖²_W`` (``u_ref`` default 0); exact Hessian."""
    residual = ControlResidual(nu, reference, state_space)
    return ResidualCost(residual, _activation(weights, residual.nr, "control_regularization"), hessian="exact")


def joint_limit_cost(model: RobotModel, margin: float = 0.0, nu: int | None = None) -> ResidualCost:
    """``½ ‖max(s − (ub − margin), 0)‖² + ½ ‖min(s − (lb + margin), 0)‖²`` with the model's (URDF) joint limits
    ``lb, ub``; continuous joints and joints without limits are unbounded. ``margin`` > 0 starts the barrier
    inside the limits. Exact Hessian."""
    if not (isinstance(margin, (int, float, np.integer, np.floating)) and math.isfinite(margin)):
        raise ValueError(f"joint_limit_cost: margin must be a finite number, got {margin!r}")
    lower = np.where(model.continuous, -np.inf, model.lower_limit) + margin
    upper = np.where(model.continuous, np.inf, model.upper_limit) - margin
    if (lower > upper).any():
        i = int(np.argmax(lower > upper))
        raise ValueError(f"joint_limit_cost: margin {margin:g} closes the range of joint "
                         f"{model.actuated_joint_names[i]!r} [{model.lower_limit[i]:g}, {model.upper_limit[i]:g}]")
    return ResidualCost(JointPositionResidual(model, nu), QuadraticBarrier(lower, upper), hessian="exact")


def torque_limit_cost(model: RobotModel, fraction: float = 1.0) -> ResidualCost:
    """``½ ‖max(u − s τ_max, 0)‖² + ½ ‖min(u + s τ_max, 0)‖²`` on the joint torques with the model's effort limits
    ``τ_max`` (unbounded where the URDF gives none or zero), starting at the ``fraction`` ``s`` of them: a barrier is
    soft, and one that starts inside the limits keeps a solution within them. Exact Hessian."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"torque_limit_cost: fraction must be in (0, 1], got {fraction!r}")
    effort = np.where(np.isfinite(model.effort_limit) & (model.effort_limit > 0), fraction * model.effort_limit, np.inf)
    return ResidualCost(JointTorqueResidual(model), QuadraticBarrier(-effort, effort), hessian="exact")
