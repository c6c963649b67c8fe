"""SE(3): exponential and logarithm of rigid transforms, adjoints, and the right/left Jacobians of exp.

Conventions (DESIGN.md): a transform is a 4x4 homogeneous numpy array ``H = [[R, p], [0, 1]]``;
twists are LINEAR FIRST, ``xi = [v; w]``, with ``hat(xi) = [[hat(w), v], [0, 0]]``. Then

    Ad_H  = [[R, hat(p) R], [0, R]]          ad_xi = [[hat(w), hat(v)], [0, hat(w)]]

so that ``ad_x y = vee([hat x, hat y])`` and ``Ad_{exp(x)} = expm(ad_x)``. Perturbations are on the
right, ``H = Hbar exp(z)``; ``exp(xi + d) ~= exp(xi) exp(Jr(xi) d) ~= exp(Jl(xi) d) exp(xi)``, with

    Jl(xi) = [[Jl3(w), Q(v, w)], [0, Jl3(w)]],    Jr(xi) = Jl(-xi),    Jl(xi) = Ad_{exp(xi)} Jr(xi),

where ``Q`` is the classical coupling block (Barfoot, "State Estimation for Robotics", eq. 7.86,
whose twists are also linear first). The inverse Jacobians are valid for ``|w| < 2 pi``.
"""

from __future__ import annotations

import math

import numpy as np

from . import so3
from .so3 import _checked, _exp_coefficients, _inverse_jacobian_coefficient, _log, _polynomial, _require_rotation


def check_transform(H, name: str = "H") -> np.ndarray:
    """Return ``H`` as a float array, or raise ValueError naming what makes it not a rigid transform:
    rotation block orthonormal within ``so3.ORTHONORMAL_TOL`` with det > 0, last row exactly [0, 0, 0, 1]."""
    H = _checked(H, (4, 4), name)
    _require_rotation(H[:3, :3], f"rotation block of {name}")
    last_row = H[3].tolist()
    if last_row != [0.0, 0.0, 0.0, 1.0]:
        raise ValueError(f"last row of {name} must be [0, 0, 0, 1], got {last_row}")
    return H


def hat(xi) -> np.ndarray:
    """4x4 matrix ``[[hat(w), v], [0, 0]]`` of the twist ``xi = [v; w]``."""
    xi = _checked(xi, (6,), "xi")
    out = np.zeros((4, 4))
    out[:3, :3] = so3.hat(xi[3:])
    out[:3, 3] = xi[:3]
    return out


def vee(X) -> np.ndarray:
    """Inverse of ``hat``: the twist ``[v; w]`` of a 4x4 matrix of se(3)."""
    X = _checked(X, (4, 4), "X")
    return np.concatenate((X[:3, 3], so3.vee(X[:3, :3])))


def exp(xi) -> np.ndarray:
    """Transform ``expm(hat(xi))``: ``R = exp3(w)``, ``p = Jl3(w) v``."""
    xi = _checked(xi, (6,), "xi")
    w = xi[3:]
    s1, s2, s3, _, _ = _exp_coefficients(math.sqrt(w @ w))
    H = np.eye(4)
    H[:3, :3] = _polynomial(w, s1, s2)
    H[:3, 3] = _polynomial(w, s2, s3) @ xi[:3]
    return H


def log(H) -> np.ndarray:
    """Twist ``xi = [v; w]`` with ``exp(xi) = H`` and ``|w| <= pi``."""
    H = check_transform(H)
    w = _log(H[:3, :3])
    jl_inverse = _polynomial(w, -0.5, _inverse_jacobian_coefficient(math.sqrt(w @ w)))
    return np.concatenate((jl_inverse @ H[:3, 3], w))


def inverse(H) -> np.ndarray:
    """``H^-1 = [[R^T, -R^T p], [0, 1]]``."""
    H = check_transform(H)
    out = np.eye(4)
    out[:3, :3] = H[:3, :3].T
    out[:3, 3] = -(H[:3, :3].T @ H[:3, 3])
    return out


def act(H, points) -> np.ndarray:
    """Apply ``H`` to one point (shape (3,)) or to a batch of points (shape (k, 3))."""
    H = check_transform(H)
    points = np.asarray(points, dtype=float)
    if points.ndim not in (1, 2) or points.shape[-1] != 3:
        raise ValueError(f"points must have shape (3,) or (k, 3), got {points.shape}")
    if not np.all(np.isfinite(points)):
        raise ValueError("points contains NaN or inf")
    return points @ H[:3, :3].T + H[:3, 3]


def Ad(H) -> np.ndarray:
    """Adjoint ``Ad_H = [[R, hat(p) R], [0, R]]`` mapping body twists to the frame of ``H``."""
    H = _checked(H, (4, 4), "H")
    R = H[:3, :3]
    out = np.zeros((6, 6))
    out[:3, :3] = R
    out[3:, 3:] = R
    out[:3, 3:] = so3.hat(H[:3, 3]) @ R
    return out


def ad(xi) -> np.ndarray:
    """Adjoint of the algebra ``ad_xi = [[hat(w), hat(v)], [0, hat(w)]]``, ``ad_x y = [x, y]``."""
    xi = _checked(xi, (6,), "xi")
    out = np.zeros((6, 6))
    W = so3.hat(xi[3:])
    out[:3, :3] = W
    out[3:, 3:] = W
    out[:3, 3:] = so3.hat(xi[:3])
    return out


def _coupling(v: np.ndarray, w: np.ndarray, s: tuple[float, ...]) -> np.ndarray:
    """Upper-right block ``Q(v, w)`` of ``Jl``, from ``s = (S1, ..., S5)`` at ``|w|``."""
    _, _, s3, s4, s5 = s
    c3 = 0.5 * (s4 - 3.0 * s5)  # (2 theta - 3 sin + theta cos) / (2 theta^5)
    V = so3.hat(v)
    W = so3.hat(w)
    WV = W @ V
    VW = V @ W
    WVW = WV @ W
    return (
        0.5 * V
        + s3 * (WV + VW + WVW)
        + s4 * (W @ WV + VW @ W - 3.0 * WVW)
        + c3 * (WVW @ W + W @ WVW)
    )


def _jacobian(xi, sign: float) -> np.ndarray:
    """``Jl(sign * xi)``: ``sign = +1`` gives ``Jl(xi)``, ``sign = -1`` gives ``Jr(xi)``."""
    xi = sign * _checked(xi, (6,), "xi")
    w = xi[3:]
    s = _exp_coefficients(math.sqrt(w @ w))
    out = np.zeros((6, 6))
    out[:3, :3] = out[3:, 3:] = _polynomial(w, s[1], s[2])
    out[:3, 3:] = _coupling(xi[:3], w, s)
    return out


def _jacobian_inverse(xi, sign: float) -> np.ndarray:
    """``Jl(sign * xi)^-1 = [[Jl3^-1, -Jl3^-1 Q Jl3^-1], [0, Jl3^-1]]``."""
    xi = sign * _checked(xi, (6,), "xi")
    w = xi[3:]
    theta = math.sqrt(w @ w)
    rotation_inverse = _polynomial(w, -0.5, _inverse_jacobian_coefficient(theta))
    out = np.zeros((6, 6))
    out[:3, :3] = out[3:, 3:] = rotation_inverse
    out[:3, 3:] = -rotation_inverse @ _coupling(xi[:3], w, _exp_coefficients(theta)) @ rotation_inverse
    return out


def right_jacobian(xi) -> np.ndarray:
    """``Jr(xi)`` (6x6): ``exp(xi + d) ~= exp(xi) exp(Jr(xi) d)``; Pinocchio's ``Jexp6``."""
    return _jacobian(xi, -1.0)


def left_jacobian(xi) -> np.ndarray:
    """``Jl(xi)`` (6x6): ``exp(xi + d) ~= exp(Jl(xi) d) exp(xi)``."""
    return _jacobian(xi, 1.0)


def right_jacobian_inverse(xi) -> np.ndarray:
    """``Jr(xi)^-1``: ``log(exp(xi) exp(d)) ~= xi + Jr(xi)^-1 d``; Pinocchio's ``Jlog6(exp(xi))``;
    valid for ``|w| < 2 pi``."""
    return _jacobian_inverse(xi, -1.0)


def left_jacobian_inverse(xi) -> np.ndarray:
    """``Jl(xi)^-1``: ``log(exp(d) exp(xi)) ~= xi + Jl(xi)^-1 d``; valid for ``|w| < 2 pi``."""
    return _jacobian_inverse(xi, 1.0)


def random(rng: np.random.Generator | int | None = None) -> np.ndarray:
    """Transform with a uniformly random rotation and a standard-normal translation."""
    rng = np.random.default_rng(rng)
    H = np.eye(4)
    H[:3, :3] = so3.random(rng)
    H[:3, 3] = rng.standard_normal(3)
    return H
