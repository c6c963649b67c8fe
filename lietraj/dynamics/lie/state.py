"""Robot state groups: x ⊕ z, x₁ ⊖ x₀ and their Jacobians, for single states and trajectories.

A floating-base state is ``x = (H, s, ν, ṡ) ∈ G = SE(3) × Rⁿ × R⁶ × Rⁿ``, a direct-product group
(seed 000 eq. 17): ``x₁ x₂ = (H₁ H₂, s₁ + s₂, ν₁ + ν₂, ṡ₁ + ṡ₂)``. A fixed-base state is
``x = (s, ṡ) ∈ Rⁿ × Rⁿ``. The generalized velocity ``v = [ν; ṡ]`` (or ``ṡ``) is stored as one
contiguous array because the kernels consume it whole.

Tangent vectors are ``z = [z_H (6, linear first); z_s (n); z_ν (6); z_ṡ (n)]`` (no ``z_H`` for a
fixed base), so ``z[-nv:]`` is the velocity part in the same order as ``v``. With right
perturbations (seed 000 §2–3)::

    x ⊕ z = x exp(z)                 d(x ⊕ z)/dx = diag(Ad_{exp(z_H)⁻¹}, I),  d(x ⊕ z)/dz = diag(Jr(z_H), I)
    x₁ ⊖ x₀ = log(x₀⁻¹ x₁) = z       dz/dx₀ = diag(-Jl⁻¹(z_H), -I),          dz/dx₁ = diag(Jr⁻¹(z_H), I)

where a derivative with respect to a state is taken in the chart ``x exp(dx)`` and, when the
result is a state, measured in the chart ``(x ⊕ z) exp(·)``. The SE(3) part of ``⊖`` equals
Pinocchio's free-flyer ``difference`` (``log6(M₀⁻¹ M₁)``, linear first).
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from . import se3
from .so3 import _checked


@dataclass(eq=False)
class State:
    """One robot state: base pose ``H`` (4x4, None for a fixed base), joint positions ``s``, and
    generalized velocity ``v = [ν; ṡ]`` (floating base, ``6 + n``) or ``v = ṡ`` (fixed base, ``n``)."""

    H: np.ndarray | None
    s: np.ndarray
    v: np.ndarray

    @property
    def nu(self) -> np.ndarray:
        """Body twist of the base ``ν = (H⁻¹Ḣ)^∨`` (linear first), a view of ``v[:6]``."""
        if self.H is None:
            raise AttributeError("a fixed-base state has no base twist nu")
        return self.v[:6]

    @property
    def sdot(self) -> np.ndarray:
        """Joint velocities ``ṡ``, a view of the joint part of ``v``."""
        return self.v if self.H is None else self.v[6:]

    def copy(self) -> State:
        """Deep copy (no array shared with ``self``)."""
        return State(None if self.H is None else self.H.copy(), self.s.copy(), self.v.copy())

    def __repr__(self) -> str:
        norms = f"|s|={np.linalg.norm(self.s):.3g}, |v|={np.linalg.norm(self.v):.3g}"
        if self.H is None:
            return f"State(fixed base, n={self.s.shape[0]}, {norms})"
        p = np.array2string(self.H[:3, 3], precision=3, separator=", ")
        return f"State(floating base, n={self.s.shape[0]}, p={p}, {norms})"


@dataclass(eq=False)
class Trajectory:
    """States at ``N`` knots, one array per component: ``H`` (N, 4, 4) or None, ``s`` (N, n),
    ``v`` (N, nv).

    ``X[k]`` is a ``State`` whose arrays are views into the trajectory; ``X[a:b]`` a ``Trajectory`` of views (a
    slice with a step too); ``X[ks]``, with a 1-D array of knot indices, a ``Trajectory`` of copies (numpy's
    indexing). ``X[k] = x`` and ``X[a:b] = Y`` write states in.
    """

    H: np.ndarray | None
    s: np.ndarray
    v: np.ndarray

    @classmethod
    def from_states(cls, states: list[State]) -> Trajectory:
        """Stack a non-empty list of states of one kind (all floating or all fixed base)."""
        if len(states) == 0:
            raise ValueError("from_states needs at least one state")
        floating = [x.H is not None for x in states]
        if any(floating) != all(floating):
            raise ValueError("from_states got both floating-base and fixed-base states")
        H = np.stack([x.H for x in states], dtype=float) if floating[0] else None
        return cls(H, np.stack([x.s for x in states], dtype=float), np.stack([x.v for x in states], dtype=float))

    @classmethod
    def repeat(cls, x: State, N: int) -> Trajectory:
        """``N`` copies of the state ``x`` (new float arrays): a constant guess or reference, or a one-knot
        trajectory for the batched functions (``N = 1``)."""
        N = operator.index(N)
        if N < 0:
            raise ValueError(f"Trajectory.repeat: N must be >= 0, got {N}")

        def knots(a):
            return np.repeat(np.asarray(a, dtype=float)[None], N, axis=0)

        return cls(None if x.H is None else knots(x.H), knots(x.s), knots(x.v))

    def copy(self) -> Trajectory:
        """Deep copy (no array shared with ``self``)."""
        return Trajectory(None if self.H is None else self.H.copy(), self.s.copy(), self.v.copy())

    def is_finite(self) -> bool:
        """Whether every component of every knot is finite."""
        return bool(np.isfinite(self.s).all() and np.isfinite(self.v).all()
                    and (self.H is None or np.isfinite(self.H).all()))

    def first_non_finite(self) -> int | None:
        """The first knot with a NaN or an infinity in any component, or None."""
        bad = ~(np.isfinite(self.s).all(axis=1) & np.isfinite(self.v).all(axis=1))
        if self.H is not None:
            bad |= ~np.isfinite(self.H).all(axis=(1, 2))
        return int(np.argmax(bad)) if bad.any() else None

    def __len__(self) -> int:
        return self.s.shape[0]

    def __iter__(self) -> Iterator[State]:
        return (self[k] for k in range(len(self)))

    @staticmethod
    def _knots(key) -> int | slice | np.ndarray:
        """``key`` as one knot (an int), a slice, or a 1-D integer array of knots."""
        if isinstance(key, slice):
            return key
        if not isinstance(key, tuple):  # a tuple would index several axes of the arrays
            try:
                return operator.index(key)
            except TypeError:
                ks = np.asarray(key)
                if ks.ndim == 1 and (np.issubdtype(ks.dtype, np.integer) or ks.size == 0):
                    return ks
        raise TypeError(f"a Trajectory is indexed by a knot, a slice or a 1-D array of knots, got {key!r}")

    def __getitem__(self, key) -> State | Trajectory:
        k = self._knots(key)
        if isinstance(k, int):
            return State(None if self.H is None else self.H[k], self.s[k], self.v[k])
        return Trajectory(None if self.H is None else self.H[k], self.s[k], self.v[k])

    def __setitem__(self, key, x: State | Trajectory) -> None:
        k = self._knots(key)
        kind = State if isinstance(k, int) else Trajectory
        if not isinstance(x, kind):
            raise ValueError(f"expected a {kind.__name__} to store at {key!r}, got {type(x).__name__}")
        if (x.H is None) != (self.H is None):
            base = "fixed" if self.H is None else "floating"
            raise ValueError(f"cannot store this {kind.__name__.lower()} in a {base}-base trajectory")
        if self.H is not None:
            self.H[k] = x.H
        self.s[k] = x.s
        self.v[k] = x.v

    def __repr__(self) -> str:
        kind = "fixed" if self.H is None else "floating"
        return f"Trajectory(N={len(self)}, n={self.s.shape[1]}, {kind} base)"


class StateSpace:
    """The state group of a robot with ``n_joints`` scalar joints, on a floating or a fixed base.

    Attributes: ``n`` (joints), ``nv`` (velocity size, ``6 + n`` or ``n``), ``ndx`` (tangent
    size, ``2 nv``), ``floating_base``. Every method checks its inputs (``check``) and returns
    new arrays.
    """

    def __init__(self, n_joints: int, floating_base: bool):
        if operator.index(n_joints) < 0:
            raise ValueError(f"n_joints must be >= 0, got {n_joints}")
        self.n = operator.index(n_joints)
        self.floating_base = bool(floating_base)
        self.nv = self.n + 6 if self.floating_base else self.n
        self.ndx = 2 * self.nv
        self._nh = 6 if self.floating_base else 0  # size of z_H

    def __repr__(self) -> str:
        kind = "floating" if self.floating_base else "fixed"
        return f"StateSpace(n_joints={self.n}, {kind} base, ndx={self.ndx})"

    def check(self, x: State) -> None:
        """Raise ValueError, naming the field and the expected shape, unless ``x`` is a finite
        state of this space whose ``H`` is a rigid transform (``R`` orthonormal within 1e-6 with
        det > 0, last row exactly ``[0, 0, 0, 1]``)."""
        if not isinstance(x, State):
            raise ValueError(f"expected a State, got {type(x).__name__}")
        if self.floating_base:
            if x.H is None:
                raise ValueError("State.H is None but the state space has a floating base")
            se3.check_transform(x.H, "State.H")
        elif x.H is not None:
            raise ValueError("State.H must be None for a fixed-base state space")
        _checked(x.s, (self.n,), "State.s")
        _checked(x.v, (self.nv,), "State.v")

    def _check_tangent(self, z, name: str = "z") -> np.ndarray:
        return _checked(z, (self.ndx,), name)

    def _state(self, H: np.ndarray | None, s: np.ndarray, v: np.ndarray) -> State:
        return State(H if self.floating_base else None, s, v)

    def neutral(self) -> State:
        """Identity element: ``H = I``, zero joints and velocities."""
        return self._state(np.eye(4), np.zeros(self.n), np.zeros(self.nv))

    def random(self, rng: np.random.Generator | int | None = None, scale: float = 1.0) -> State:
        """Random state: uniform base rotation; base position, ``s`` and ``v`` standard normal times ``scale``."""
        rng = np.random.default_rng(rng)
        H = None
        if self.floating_base:
            H = se3.random(rng)
            H[:3, 3] *= scale
        return self._state(H, scale * rng.standard_normal(self.n), scale * rng.standard_normal(self.nv))

    def compose(self, x1: State, x2: State) -> State:
        """Group product ``x₁ x₂``."""
        self.check(x1)
        self.check(x2)
        H = x1.H @ x2.H if self.floating_base else None
        return self._state(H, x1.s + x2.s, x1.v + x2.v)

    def inverse(self, x: State) -> State:
        """Group inverse ``x⁻¹``."""
        self.check(x)
        return self._state(se3.inverse(x.H) if self.floating_base else None, -x.s, -x.v)

    def exp(self, z) -> State:
        """``exp(z)``: SE(3) exp on ``z_H``, identity on the vector parts."""
        z = self._check_tangent(z)
        nh, n = self._nh, self.n
        H = se3.exp(z[:6]) if self.floating_base else None
        return self._state(H, z[nh:nh + n].copy(), z[nh + n:].copy())

    def log(self, x: State) -> np.ndarray:
        """``log(x)``, the inverse of ``exp``, with ``|w| <= pi`` in the SE(3) part."""
        self.check(x)
        parts = (se3.log(x.H), x.s, x.v) if self.floating_base else (x.s, x.v)
        return np.concatenate(parts, dtype=float)

    def integrate(self, x: State, z) -> State:
        """``x ⊕ z = x exp(z)``."""
        self.check(x)
        z = self._check_tangent(z)
        nh, n = self._nh, self.n
        H = x.H @ se3.exp(z[:6]) if self.floating_base else None
        return self._state(H, x.s + z[nh:nh + n], x.v + z[nh + n:])

    def difference(self, x0: State, x1: State) -> np.ndarray:
        """``x₁ ⊖ x₀ = log(x₀⁻¹ x₁)``, so that ``x₀ ⊕ (x₁ ⊖ x₀) = x₁``."""
        self.check(x0)
        self.check(x1)
        parts = (x1.s - x0.s, x1.v - x0.v)
        if self.floating_base:
            parts = (se3.log(se3.inverse(x0.H) @ x1.H),) + parts
        return np.concatenate(parts, dtype=float)

    def integrate_jacobians(self, x: State, z) -> tuple[np.ndarray, np.ndarray]:
        """``(J_x, J_z)`` with ``(x exp(dx)) ⊕ (z + dz) ~= (x ⊕ z) exp(J_x dx + J_z dz)``."""
        self.check(x)
        z = self._check_tangent(z)
        J_x = np.eye(self.ndx)
        J_z = np.eye(self.ndx)
        if self.floating_base:
            J_x[:6, :6] = se3.Ad(se3.exp(-z[:6]))
            J_z[:6, :6] = se3.right_jacobian(z[:6])
        return J_x, J_z

    def difference_jacobians(self, x0: State, x1: State) -> tuple[np.ndarray, np.ndarray]:
        """``(J_x0, J_x1)`` with ``(x₁ exp(d₁)) ⊖ (x₀ exp(d₀)) ~= x₁ ⊖ x₀ + J_x0 d₀ + J_x1 d₁``."""
        self.check(x0)
        self.check(x1)
        J_x0 = -np.eye(self.ndx)
        J_x1 = np.eye(self.ndx)
        if self.floating_base:
            z_H = se3.log(se3.inverse(x0.H) @ x1.H)
            J_x0[:6, :6] = -se3.left_jacobian_inverse(z_H)
            J_x1[:6, :6] = se3.right_jacobian_inverse(z_H)
        return J_x0, J_x1

    def trajectory(self, N: int) -> Trajectory:
        """Trajectory of ``N`` neutral states."""
        return Trajectory.repeat(self.neutral(), N)

    def random_trajectory(self, N: int, rng: np.random.Generator | int | None = None, scale: float = 1.0) -> Trajectory:
        """Trajectory of ``N`` independent ``random`` states."""
        rng = np.random.default_rng(rng)
        return Trajectory.from_states([self.random(rng, scale) for _ in range(N)])

    def integrate_trajectory(self, X: Trajectory, Z) -> Trajectory:
        """Knot-wise ``X[k] ⊕ Z[k]``, with ``Z`` of shape (N, ndx)."""
        Z = _checked(Z, (len(X), self.ndx), "Z")
        out = self.trajectory(len(X))
        for k in range(len(X)):
            out[k] = self.integrate(X[k], Z[k])
        return out

    def difference_trajectory(self, X0: Trajectory, X1: Trajectory) -> np.ndarray:
        """Knot-wise ``X1[k] ⊖ X0[k]``, shape (N, ndx)."""
        if len(X0) != len(X1):
            raise ValueError(f"trajectories have different lengths: {len(X0)} and {len(X1)}")
        Z = np.empty((len(X0), self.ndx))
        for k in range(len(X0)):
            Z[k] = self.difference(X0[k], X1[k])
        return Z
