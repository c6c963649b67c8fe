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
Pinocchio's free-flyer ``difference`` (``log6(M₀⁻¹ M₁)``, linear first). ``Ad`` and the Jacobians of ``exp`` are
the SE(3) ones on the base block and the identity elsewhere, so ``StateSpace`` has the operations every group of
``lie.group.LieGroup`` has.

``StateSpace`` is the plain form (checked inputs, new arrays). The compiled forms, unchecked, for the kernels and
the solvers' hot paths: ``chart_integrate`` and ``chart_difference`` for one knot, ``tangent_integrate`` and
``tangent_difference`` for every knot of a trajectory in one compiled call.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from lietraj._jit import kernel
from lietraj.dynamics._tuples import base_placement

from . import group, se3
from .se3 import between, log6, pose_exp
from .so3 import _checked


@kernel
def _first_non_finite(floating, H, S, V):
    """The first knot k whose S[k], V[k] or (``floating``) H[k] holds a NaN or an infinity, or -1 (``x - x`` is 0
    only for a finite x)."""
    for k in range(S.shape[0]):
        bad = 0.0
        for i in range(S.shape[1]):
            bad += S[k, i] - S[k, i]
        for i in range(V.shape[1]):
            bad += V[k, i] - V[k, i]
        if floating:
            for i in range(4):
                for j in range(4):
                    bad += H[k, i, j] - H[k, i, j]
        if bad != 0.0:
            return k
    return -1


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
        floating = self.H is not None
        k = _first_non_finite(floating, self.H if floating else _NO_POSES, self.s, self.v)
        return None if k < 0 else int(k)

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
    new arrays. ``neutral()`` is ``identity()``, the name the other groups share.
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

    def identity(self) -> State:
        """Identity element: ``H = I``, zero joints and velocities."""
        return self._state(np.eye(4), np.zeros(self.n), np.zeros(self.nv))

    neutral = identity

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

    def _lift(self, base_block, argument, sign: float = 1.0) -> np.ndarray:
        """``sign I`` (ndx, ndx) with ``base_block(argument)`` (6x6) in the SE(3) block of a floating base."""
        J = sign * np.eye(self.ndx)
        if self.floating_base:
            J[:6, :6] = base_block(argument)
        return J

    def Ad(self, x: State) -> np.ndarray:
        """Adjoint ``Ad_x = diag(Ad_H, I)``: ``x exp(z) x⁻¹ = exp(Ad_x z)``."""
        self.check(x)
        return self._lift(se3.Ad, x.H)

    def right_jacobian(self, z) -> np.ndarray:
        """``Jr(z) = diag(Jr(z_H), I)``: ``exp(z + d) ~= exp(z) exp(Jr(z) d)``."""
        return self._lift(se3.right_jacobian, self._check_tangent(z)[:6])

    def left_jacobian(self, z) -> np.ndarray:
        """``Jl(z) = diag(Jl(z_H), I)``: ``exp(z + d) ~= exp(Jl(z) d) exp(z)``."""
        return self._lift(se3.left_jacobian, self._check_tangent(z)[:6])

    def right_jacobian_inverse(self, z) -> np.ndarray:
        """``Jr(z)⁻¹ = diag(Jr(z_H)⁻¹, I)``; valid for ``|w| < 2 pi``."""
        return self._lift(se3.right_jacobian_inverse, self._check_tangent(z)[:6])

    def left_jacobian_inverse(self, z) -> np.ndarray:
        """``Jl(z)⁻¹ = diag(Jl(z_H)⁻¹, I)``; valid for ``|w| < 2 pi``."""
        return self._lift(se3.left_jacobian_inverse, self._check_tangent(z)[:6])

    def integrate_jacobians(self, x: State, z) -> tuple[np.ndarray, np.ndarray]:
        """``(J_x, J_z) = (Ad_{exp(-z)}, Jr(z))``: ``(x exp(dx)) ⊕ (z + dz) ~= (x ⊕ z) exp(J_x dx + J_z dz)``."""
        self.check(x)
        return group.integrate_jacobians(self, self._check_tangent(z))

    def difference_jacobians(self, x0: State, x1: State) -> tuple[np.ndarray, np.ndarray]:
        """``(J_x0, J_x1) = (-Jl⁻¹(z), Jr⁻¹(z))`` at ``z = x₁ ⊖ x₀``:
        ``(x₁ exp(d₁)) ⊖ (x₀ exp(d₀)) ~= x₁ ⊖ x₀ + J_x0 d₀ + J_x1 d₁``."""
        return group.difference_jacobians(self, x0, x1)

    def trajectory(self, N: int) -> Trajectory:
        """Trajectory of ``N`` identity states."""
        return Trajectory.repeat(self.identity(), N)

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


# ---------------------------------------------------------------- compiled forms (unchecked)


@kernel
def chart_integrate(H, s, v, z, floating, H_out, s_out, v_out, E):
    """(H_out, s_out, v_out) = (H, s, v) exp(z) for one knot (StateSpace.integrate, compiled); the outputs may be the
    inputs. E is a 4x4 work array."""
    n = s.shape[0]
    nh = 6 if floating else 0
    if floating:
        pose_exp(H, z, H_out, E)
    for i in range(n):
        s_out[i] = s[i] + z[nh + i]
    for i in range(v.shape[0]):
        v_out[i] = v[i] + z[nh + n + i]


@kernel
def chart_difference(H0, s0, v0, H1, s1, v1, floating, out):
    """out = log(x0⁻¹ x1) for one knot (StateSpace.difference, compiled)."""
    n = s0.shape[0]
    nh = 6 if floating else 0
    if floating:
        R0, p0 = base_placement(H0)
        R1, p1 = base_placement(H1)
        R, p = between(R0, p0, R1, p1)
        u, w = log6(R, p)
        out[0], out[1], out[2], out[3], out[4], out[5] = u[0], u[1], u[2], w[0], w[1], w[2]
    for i in range(n):
        out[nh + i] = s1[i] - s0[i]
    for i in range(v0.shape[0]):
        out[nh + n + i] = v1[i] - v0[i]


@kernel
def _difference_batch(H0, S0, V0, H1, S1, V1, floating, out):
    """out[k] = log(X0[k]⁻¹ X1[k]) for every knot."""
    for k in range(S0.shape[0]):
        h = k if floating else 0
        chart_difference(H0[h], S0[k], V0[k], H1[h], S1[k], V1[k], floating, out[k])


@kernel
def _integrate_batch(H, S, V, Z, floating, H_out, S_out, V_out, E):
    """X_out[k] = X[k] exp(Z[k]) for every knot; X_out may be X."""
    for k in range(S.shape[0]):
        h = k if floating else 0
        chart_integrate(H[h], S[k], V[k], Z[k], floating, H_out[h], S_out[k], V_out[k], E)


_NO_POSES = np.zeros((1, 4, 4))  # read at index 0 only for a floating base


def tangent_difference(X0: Trajectory, X1: Trajectory, out: np.ndarray | None = None) -> np.ndarray:
    """Knot-wise ``X1[k] ⊖ X0[k]`` in one compiled call, without ``StateSpace``'s input checks (the solvers' hot
    path: their states are made by the dynamics)."""
    floating = X0.H is not None
    if out is None:
        out = np.empty((len(X0), (6 if floating else 0) + X0.s.shape[1] + X0.v.shape[1]))
    _difference_batch(X0.H if floating else _NO_POSES, X0.s, X0.v, X1.H if floating else _NO_POSES, X1.s, X1.v,
                      floating, out)
    return out


def tangent_integrate(X: Trajectory, Z: np.ndarray, out: Trajectory | None = None) -> Trajectory:
    """Knot-wise ``X[k] ⊕ Z[k]`` in one compiled call, without input checks; ``out`` may be ``X`` itself."""
    floating = X.H is not None
    if out is None:
        out = Trajectory(np.empty_like(X.H) if floating else None, np.empty_like(X.s), np.empty_like(X.v))
    _integrate_batch(X.H if floating else _NO_POSES, X.s, X.v, np.ascontiguousarray(Z), floating,
                     out.H if floating else _NO_POSES, out.s, out.v, np.empty((4, 4)))
    return out
