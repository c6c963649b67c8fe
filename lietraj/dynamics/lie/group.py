"""The interface SO(3), SE(3) and the robot state groups share: one set of operation names (jaxlie's habit).

``so3`` and ``se3`` (modules of functions on numpy arrays) and every ``StateSpace`` (methods on ``State``) have
these operations, each checking its inputs and returning new arrays; tangent vectors are 1-D arrays in the
group's tangent order (linear first on SE(3), ``StateSpace``'s order for states)::

    x ⊕ z = x exp(z)                x₁ ⊖ x₀ = log(x₀⁻¹ x₁)
    exp(z + d) ≈ exp(z) exp(Jr(z) d) ≈ exp(Jl(z) d) exp(z),        Jl(z) = Ad_{exp(z)} Jr(z)
    (x exp(dx)) ⊕ (z + dz) ≈ (x ⊕ z) exp(Ad_{exp(-z)} dx + Jr(z) dz)
    (x₁ exp(d₁)) ⊖ (x₀ exp(d₀)) ≈ x₁ ⊖ x₀ - Jl⁻¹(x₁ ⊖ x₀) d₀ + Jr⁻¹(x₁ ⊖ x₀) d₁

The Jacobians of ⊕ and ⊖ follow from ``Ad`` and those of ``exp`` alike in every group: ``integrate_jacobians``
and ``difference_jacobians`` below write them once. ``tests/test_lie_groups.py`` checks the axioms, the round trips
and every Jacobian once, for every group.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class LieGroup(Protocol):
    """What ``so3``, ``se3`` and ``StateSpace(n, floating_base)`` provide; an element is a rotation matrix, a 4x4
    transform or a ``State``."""

    def identity(self) -> Any: ...

    def random(self, rng: np.random.Generator | int | None = None) -> Any: ...

    def compose(self, x1: Any, x2: Any) -> Any: ...

    def inverse(self, x: Any) -> Any: ...

    def exp(self, z) -> Any: ...

    def log(self, x: Any) -> np.ndarray: ...

    def integrate(self, x: Any, z) -> Any: ...

    def difference(self, x0: Any, x1: Any) -> np.ndarray: ...

    def integrate_jacobians(self, x: Any, z) -> tuple[np.ndarray, np.ndarray]: ...

    def difference_jacobians(self, x0: Any, x1: Any) -> tuple[np.ndarray, np.ndarray]: ...

    def Ad(self, x: Any) -> np.ndarray: ...

    def right_jacobian(self, z) -> np.ndarray: ...

    def left_jacobian(self, z) -> np.ndarray: ...

    def right_jacobian_inverse(self, z) -> np.ndarray: ...

    def left_jacobian_inverse(self, z) -> np.ndarray: ...


def integrate_jacobians(group: LieGroup, z) -> tuple[np.ndarray, np.ndarray]:
    """``(J_x, J_z) = (Ad_{exp(-z)}, Jr(z))``, the Jacobians of ``x ⊕ z`` (the same at every ``x``)."""
    return group.Ad(group.exp(-z)), group.right_jacobian(z)


def difference_jacobians(group: LieGroup, x0, x1) -> tuple[np.ndarray, np.ndarray]:
    """``(J_x0, J_x1) = (-Jl⁻¹(z), Jr⁻¹(z))``, the Jacobians of ``z = x₁ ⊖ x₀``."""
    z = group.difference(x0, x1)
    return -group.left_jacobian_inverse(z), group.right_jacobian_inverse(z)
