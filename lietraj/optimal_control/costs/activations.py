"""Activations ``a(r)``: the scalar a residual ``r`` is turned into by a residual cost, with its derivatives.

Every activation works on all knots at once: ``r`` is (N, nr), the value (N,), the gradient ``a'`` (N, nr), the
Hessian ``a''`` (N, nr, nr). The four of Crocoddyl's residual costs, with the same formulas::

    Quadratic             a = ½ ‖r‖²                                        a' = r          a'' = I
    WeightedQuadratic     a = ½ rᵀ W r   (W diagonal or a full PSD matrix)    a' = W r        a'' = W
    QuadraticBarrier      a = ½ ‖max(r − ub, 0)‖² + ½ ‖min(r − lb, 0)‖²       a' = e          a'' = diag(e ≠ 0)
    SmoothAbs             a = Σᵢ √(rᵢ² + ε²) − ε   (pseudo-Huber)            a' = r / ρ      a'' = diag(ε² / ρ³)

and ``AugmentedLagrangianActivation``, the term a constraint adds to its knots' cost in an augmented Lagrangian.

with ``e = max(r − ub, 0) + min(r − lb, 0)`` and ``ρ = √(r² + ε²)``. Unlike Crocoddyl, a Hessian need not be
diagonal (``WeightedQuadratic`` with a full matrix); when it is, ``ActivationDerivatives.diagonal`` holds it so that
costs can use cheaper products.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from lietraj._jit import kernel


def broadcast_view(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``np.broadcast_to(a, shape)`` for a contiguous ``a`` whose shape ends ``shape``: a read-only view, no copy, in
    a third of the time (the costs make several per call, at every iteration)."""
    view = np.ndarray(shape, a.dtype, a, 0, (0,) * (len(shape) - a.ndim) + a.strides)
    view.flags.writeable = False
    return view


_ONE = np.ones(())


class ActivationDerivatives:
    """Value (N,), gradient (N, nr) and Hessian (N, nr, nr) of an activation at N residuals.

    ``diagonal`` (N, nr) is the Hessian's diagonal when the Hessian is diagonal (else None); ``hessian`` is then
    built from it on first access.
    """

    __slots__ = ("value", "gradient", "diagonal", "_hessian")

    def __init__(self, value: np.ndarray, gradient: np.ndarray, hessian: np.ndarray | None = None,
                 diagonal: np.ndarray | None = None):
        if (hessian is None) == (diagonal is None):
            raise ValueError("ActivationDerivatives: give exactly one of hessian and diagonal")
        self.value, self.gradient, self.diagonal, self._hessian = value, gradient, diagonal, hessian

    @property
    def hessian(self) -> np.ndarray:
        if self._hessian is None:
            N, nr = self.diagonal.shape
            H = np.zeros((N, nr, nr))
            H.reshape(N, nr * nr)[:, ::nr + 1] = self.diagonal
            self._hessian = H
        return self._hessian


def _vector(values, what: str, allow_inf: bool = False) -> np.ndarray:
    a = np.array(values, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{what} must be a non-empty 1-D array, got shape {a.shape}")
    if np.isnan(a).any() or (not allow_inf and not np.isfinite(a).all()):
        raise ValueError(f"{what} contains NaN" + ("" if allow_inf else " or inf"))
    return a


_NO_VECTOR, _NO_MATRIX = np.zeros(0), np.zeros((0, 0))


@kernel
def _diagonal_quadratic(r, w, lower, upper, value, gradient, diagonal):
    """``value[k] = ½ Σᵢ wᵢ eᵢ²`` over the rows of ``r`` (N, nr), with ``e = r``, or its excess over the box
    ``[lower, upper]`` when the bounds have entries; ``w`` empty stands for ones. When they have rows, ``gradient =
    w e`` and ``diagonal = w`` where ``e ≠ 0`` for a box, ``w`` elsewhere (the Hessian's diagonal). Returns whether
    ``r`` is finite (the outputs are then not to be read)."""
    N, nr = r.shape
    box, weighted = lower.shape[0] != 0, w.shape[0] != 0
    for k in range(N):
        acc = 0.0
        for i in range(nr):
            x = r[k, i]
            if not (x - x == 0.0):
                return False
            e = x
            if box:
                e = x - upper[i] if x > upper[i] else (x - lower[i] if x < lower[i] else 0.0)
            wi = w[i] if weighted else 1.0
            we = wi * e
            acc += we * e
            if gradient.shape[0] != 0:
                gradient[k, i] = we
            if diagonal.shape[0] != 0:
                diagonal[k, i] = wi if (not box or e != 0.0) else 0.0
        value[k] = 0.5 * acc
    return True


class Activation(ABC):
    """A scalar function of a residual vector, evaluated at N residuals at once.

    ``nr`` is the residual size it accepts (None: any size). Hessians must be symmetric.
    """

    nr: int | None = None

    def _checked(self, r) -> np.ndarray:
        r = np.asarray(r, dtype=np.float64)
        if r.ndim != 2 or (self.nr is not None and r.shape[1] != self.nr):
            size = "nr" if self.nr is None else str(self.nr)
            raise ValueError(f"{type(self).__name__}: residuals must have shape (N, {size}), got {r.shape}")
        if not np.isfinite(r).all():
            raise ValueError(f"{type(self).__name__}: the residual contains NaN or inf")
        return r

    def _diagonal(self, r, w: np.ndarray, lower: np.ndarray, upper: np.ndarray, derivatives: bool):
        """``(value, gradient, diagonal)`` of a diagonal quadratic (``_diagonal_quadratic``) at the rows of ``r``,
        checked as ``_checked`` checks them; the last two None without ``derivatives``."""
        r = np.asarray(r, dtype=np.float64)
        if r.ndim != 2 or (self.nr is not None and r.shape[1] != self.nr):
            self._checked(r)
        r = np.ascontiguousarray(r)
        N, nr = r.shape
        value = np.empty(N)
        gradient, diagonal = (np.empty((N, nr)), np.empty((N, nr))) if derivatives else (_NO_MATRIX, _NO_MATRIX)
        if not _diagonal_quadratic(r, w, lower, upper, value, gradient, diagonal):
            raise ValueError(f"{type(self).__name__}: the residual contains NaN or inf")
        return (value, gradient, diagonal) if derivatives else (value, None, None)

    @abstractmethod
    def value(self, r) -> np.ndarray:
        """``a(r[k])`` for each row, shape (N,)."""

    @abstractmethod
    def derivatives(self, r) -> ActivationDerivatives:
        """Value, gradient and Hessian at each row of ``r``."""


class Quadratic(Activation):
    """``a(r) = ½ ‖r‖²``."""

    def __init__(self, nr: int | None = None):
        self.nr = nr

    def value(self, r) -> np.ndarray:
        return self._diagonal(r, _NO_VECTOR, _NO_VECTOR, _NO_VECTOR, False)[0]

    def derivatives(self, r) -> ActivationDerivatives:
        value, gradient, _ = self._diagonal(r, _NO_VECTOR, _NO_VECTOR, _NO_VECTOR, True)
        return ActivationDerivatives(value, gradient, diagonal=broadcast_view(_ONE, gradient.shape))

    def __repr__(self) -> str:
        return "Quadratic()"


class WeightedQuadratic(Activation):
    """``a(r) = ½ rᵀ W r`` with ``W = diag(weights)`` for a vector (entries >= 0), or ``W = weights`` for a
    symmetric positive semi-definite matrix."""

    def __init__(self, weights):
        W = np.array(weights, dtype=np.float64)
        if W.ndim == 1:
            W = _vector(W, "WeightedQuadratic: weights")
            if (W < 0).any():
                raise ValueError("WeightedQuadratic: weights must be >= 0")
        elif W.ndim == 2 and W.shape[0] == W.shape[1] and W.size:
            if not np.isfinite(W).all():
                raise ValueError("WeightedQuadratic: the weight matrix contains NaN or inf")
            scale = max(np.abs(W).max(), 1e-300)
            if np.abs(W - W.T).max() > 1e-12 * scale:
                raise ValueError("WeightedQuadratic: the weight matrix is not symmetric")
            if np.linalg.eigvalsh(W)[0] < -1e-12 * scale:
                raise ValueError("WeightedQuadratic: the weight matrix is not positive semi-definite")
            W = 0.5 * (W + W.T)
        else:
            raise ValueError(f"WeightedQuadratic: weights must be a vector (nr,) or a matrix (nr, nr), got {W.shape}")
        self.weights = W
        self.nr = W.shape[0]
        self._is_diagonal = W.ndim == 1

    def value(self, r) -> np.ndarray:
        if self._is_diagonal:
            return self._diagonal(r, self.weights, _NO_VECTOR, _NO_VECTOR, False)[0]
        r = self._checked(r)
        return 0.5 * np.einsum("ki,ki->k", r, r @ self.weights)

    def derivatives(self, r) -> ActivationDerivatives:
        if self._is_diagonal:
            value, gradient, _ = self._diagonal(r, self.weights, _NO_VECTOR, _NO_VECTOR, True)
            return ActivationDerivatives(value, gradient, diagonal=broadcast_view(self.weights, gradient.shape))
        r = self._checked(r)
        N = r.shape[0]
        Wr = r @ self.weights
        return ActivationDerivatives(0.5 * np.einsum("ki,ki->k", r, Wr), Wr,
                                     hessian=broadcast_view(self.weights, (N, self.nr, self.nr)))

    def __repr__(self) -> str:
        kind = "diagonal" if self._is_diagonal else "full"
        return f"WeightedQuadratic(nr={self.nr}, {kind})"


class QuadraticBarrier(Activation):
    """``a(r) = ½ ‖max(r − upper, 0)‖² + ½ ‖min(r − lower, 0)‖²``: zero inside the box ``lower <= r <= upper``
    (bounds included), quadratic outside; ``±inf`` bounds leave a side free. Its Hessian is 1 on the components
    strictly outside the box and 0 elsewhere."""

    def __init__(self, lower, upper):
        lb = _vector(lower, "QuadraticBarrier: lower", allow_inf=True)
        ub = _vector(upper, "QuadraticBarrier: upper", allow_inf=True)
        if lb.shape != ub.shape:
            raise ValueError(f"QuadraticBarrier: lower and upper have different shapes {lb.shape} and {ub.shape}")
        if (lb > ub).any():
            i = int(np.argmax(lb > ub))
            raise ValueError(f"QuadraticBarrier: lower[{i}] = {lb[i]:g} > upper[{i}] = {ub[i]:g}")
        self.lower, self.upper, self.nr = lb, ub, lb.shape[0]

    def value(self, r) -> np.ndarray:
        return self._diagonal(r, _NO_VECTOR, self.lower, self.upper, False)[0]

    def derivatives(self, r) -> ActivationDerivatives:
        value, gradient, diagonal = self._diagonal(r, _NO_VECTOR, self.lower, self.upper, True)
        return ActivationDerivatives(value, gradient, diagonal=diagonal)

    def __repr__(self) -> str:
        return f"QuadraticBarrier(nr={self.nr})"


class SmoothAbs(Activation):
    """``a(r) = Σᵢ √(rᵢ² + ε²) − ε``: about ``|r|`` far from 0 and ``r² / 2ε`` near it (a pseudo-Huber)."""

    def __init__(self, eps: float, nr: int | None = None):
        if not (isinstance(eps, (int, float, np.floating)) and np.isfinite(eps) and eps > 0):
            raise ValueError(f"SmoothAbs: eps must be a finite positive number, got {eps!r}")
        self.eps, self.nr = float(eps), nr

    def value(self, r) -> np.ndarray:
        r = self._checked(r)
        return (np.sqrt(r * r + self.eps ** 2) - self.eps).sum(axis=1)

    def derivatives(self, r) -> ActivationDerivatives:
        r = self._checked(r)
        rho = np.sqrt(r * r + self.eps ** 2)
        return ActivationDerivatives((rho - self.eps).sum(axis=1), r / rho, diagonal=self.eps ** 2 / rho ** 3)

    def __repr__(self) -> str:
        return f"SmoothAbs(eps={self.eps:g})"


class AugmentedLagrangianActivation(Activation):
    """The Powell–Hestenes–Rockafellar term of an augmented Lagrangian for one constraint (``constraints.Constraint``:
    ``nr``, ``lower``, ``upper``, ``scale`` σ) at ``N`` knots, with ``ŝ = r/σ + λ/ρ`` and ``Π`` the projection on
    ``[lower/σ, upper/σ]``::

        ψ = ρ/2 ‖ŝ − Π(ŝ)‖² − ‖λ‖² / (2ρ),   ψ' = ρ (ŝ − Π(ŝ)) / σ,   ψ'' = diag(ρ/σ²) on the rows at or past a bound

    (``solvers.augmented_lagrangian`` explains its use). ``multipliers`` (N, nr), the multipliers of the scaled
    rows, and ``penalty`` (1,) ρ are read at every call (the solver updates them in place)."""

    def __init__(self, constraint, multipliers: np.ndarray, penalty: np.ndarray):
        self.nr = constraint.nr
        self.lower, self.upper = constraint.lower / constraint.scale, constraint.upper / constraint.scale
        self.scale = constraint.scale
        self.multipliers, self.penalty = multipliers, penalty

    def __repr__(self) -> str:
        return f"AugmentedLagrangianActivation(nr={self.nr}, penalty={self.penalty[0]:g})"

    def shifted(self, r) -> tuple[np.ndarray, np.ndarray, float]:
        """``(ŝ, ŝ − Π(ŝ), ρ)`` at the residuals ``r`` (N, nr), in their own units (module docstring)."""
        r = self._checked(r)
        if r.shape[0] != self.multipliers.shape[0]:
            raise ValueError(f"{self!r}: {r.shape[0]} residuals for {self.multipliers.shape[0]} knots")
        rho = float(self.penalty[0])
        s = r / self.scale + self.multipliers / rho
        return s, s - np.clip(s, self.lower, self.upper), rho

    def _psi(self, e: np.ndarray, rho: float) -> np.ndarray:
        return 0.5 * rho * np.einsum("ki,ki->k", e, e) - np.einsum("ki,ki->k", self.multipliers, self.multipliers) / (
            2.0 * rho)

    def value(self, r) -> np.ndarray:
        _, e, rho = self.shifted(r)
        return self._psi(e, rho)

    def derivatives(self, r) -> ActivationDerivatives:
        s, e, rho = self.shifted(r)
        active = (s >= self.upper) | (s <= self.lower)
        return ActivationDerivatives(self._psi(e, rho), rho * e / self.scale,
                                     diagonal=np.where(active, rho / self.scale ** 2, 0.0))
