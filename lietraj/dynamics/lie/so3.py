"""SO(3): exponential and logarithm of rotations, and the right/left Jacobians of exp.

Conventions (DESIGN.md): a rotation is a 3x3 numpy array ``R``; its tangent vector ``w`` is
the rotation vector, ``R = exp(w) = expm(hat(w))``. Perturbations are on the right,
``R = Rbar exp(z)``. The right Jacobian satisfies ``exp(w + d) ~= exp(w) exp(Jr(w) d)`` and the
left Jacobian ``exp(w + d) ~= exp(Jl(w) d) exp(w)``; ``Jl(w) = Jr(-w) = Jr(w)^T = R Jr(w)``.

With ``theta = |w|`` and ``W = hat(w)`` everything is a polynomial in ``W``::

    exp(w)   = I + S1 W + S2 W^2          S1 = sin(theta)/theta,  S2 = (1 - cos(theta))/theta^2
    Jr(w)    = I - S2 W + S3 W^2          S3 = (theta - sin(theta))/theta^3
    Jr(w)^-1 = I + W/2 + D W^2            D  = (1 - (theta/2) cot(theta/2))/theta^2

``S_m(theta) = sum_j (-1)^j theta^(2j) / (2j+m)!``; the closed forms cancel catastrophically for
small ``theta``, so below ``_SERIES_BELOW`` the series is summed instead (truncation < 1e-19).
The inverse Jacobians are singular at ``theta = 2 pi``: they are valid for ``|w| < 2 pi`` and
accurate for ``|w| <= pi``, which covers every vector returned by ``log``.
"""

from __future__ import annotations

import math

import numpy as np

ORTHONORMAL_TOL = 1e-6
"""Largest ``||R^T R - I||_F`` accepted as a rotation by ``log`` and ``check_rotation``."""

_SERIES_BELOW = 0.5
_SERIES_TERMS = 8
_SERIES = {
    m: tuple((-1) ** j / math.factorial(2 * j + m) for j in reversed(range(_SERIES_TERMS)))
    for m in range(1, 6)
}
# Taylor series of D(theta); below 1e-2 its terms past theta^4 are < 1e-18 relative, and above
# it the closed form loses only eps/theta^2 on D, which multiplies W^2 ~ theta^2.
_D_SERIES = (1.0 / 30240.0, 1.0 / 720.0, 1.0 / 12.0)
_D_SERIES_BELOW = 1e-2


def _checked(x, shape: tuple[int, ...], name: str) -> np.ndarray:
    """Return ``x`` as a float array, or raise ValueError if its shape is wrong or it is not finite."""
    a = np.asarray(x, dtype=float)
    if a.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or inf")
    return a


def _horner(coefficients: tuple[float, ...], x: float) -> float:
    acc = 0.0
    for c in coefficients:
        acc = acc * x + c
    return acc


def _exp_coefficients(theta: float) -> tuple[float, float, float, float, float]:
    """``(S1, ..., S5)`` at ``theta >= 0``, each accurate to a few ulp."""
    t2 = theta * theta
    if theta < _SERIES_BELOW:
        return tuple(_horner(_SERIES[m], t2) for m in range(1, 6))
    s1 = math.sin(theta) / theta
    half_sinc = math.sin(0.5 * theta) / (0.5 * theta)
    s2 = 0.5 * half_sinc * half_sinc  # (1 - cos)/theta^2 without the cancellation of 1 - cos
    # S_m = 1/m! - theta^2 S_{m+2}. The cancellation costs S_m about eps/theta^(m-1), but S_m only
    # multiplies terms of size theta^(m-1), so above the threshold every term keeps a few ulp.
    s3 = (1.0 - s1) / t2
    s4 = (0.5 - s2) / t2
    s5 = (1.0 / 6.0 - s3) / t2
    return s1, s2, s3, s4, s5


def _inverse_jacobian_coefficient(theta: float) -> float:
    """``D(theta) = (1 - (theta/2) cot(theta/2)) / theta^2``, finite up to ``theta = pi`` and beyond."""
    if theta < _D_SERIES_BELOW:
        return _horner(_D_SERIES, theta * theta)
    half = 0.5 * theta
    return (1.0 - half * math.cos(half) / math.sin(half)) / (theta * theta)


# The 3x3 work below is written as scalar formulas: on arrays this small, numpy's per-call overhead
# costs more than the arithmetic, and scalar formulas are what a batched numba kernel would use.


def _polynomial(w: np.ndarray, c1: float, c2: float) -> np.ndarray:
    """``I + c1 hat(w) + c2 hat(w)^2``, using ``hat(w)^2 = w w^T - |w|^2 I``."""
    x, y, z = w.tolist()
    xy, xz, yz = c2 * x * y, c2 * x * z, c2 * y * z
    diagonal = 1.0 - c2 * (x * x + y * y + z * z)
    return np.array([
        [diagonal + c2 * x * x, xy - c1 * z, xz + c1 * y],
        [xy + c1 * z, diagonal + c2 * y * y, yz - c1 * x],
        [xz - c1 * y, yz + c1 * x, diagonal + c2 * z * z],
    ])


def _rotation_defects(R: np.ndarray) -> tuple[float, float]:
    """``(||R^T R - I||_F, det R)`` of a finite 3x3 array."""
    (a, b, c), (d, e, f), (g, h, i) = R.tolist()
    e00 = a * a + d * d + g * g - 1.0
    e11 = b * b + e * e + h * h - 1.0
    e22 = c * c + f * f + i * i - 1.0
    e01 = a * b + d * e + g * h
    e02 = a * c + d * f + g * i
    e12 = b * c + e * f + h * i
    error = math.sqrt(e00 * e00 + e11 * e11 + e22 * e22 + 2.0 * (e01 * e01 + e02 * e02 + e12 * e12))
    return error, a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)


def hat(w) -> np.ndarray:
    """Skew-symmetric matrix ``hat(w)`` with ``hat(w) u = w x u``."""
    x, y, z = _checked(w, (3,), "w")
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def vee(W) -> np.ndarray:
    """Inverse of ``hat``: the vector of the skew part of a 3x3 matrix."""
    W = _checked(W, (3, 3), "W")
    return 0.5 * np.array([W[2, 1] - W[1, 2], W[0, 2] - W[2, 0], W[1, 0] - W[0, 1]])


def is_rotation(R, tol: float = ORTHONORMAL_TOL) -> bool:
    """True if ``R`` is a finite 3x3 matrix with ``||R^T R - I||_F <= tol`` and ``det R > 0``."""
    R = np.asarray(R, dtype=float)
    if R.shape != (3, 3) or not np.isfinite(R).all():
        return False
    error, det = _rotation_defects(R)
    return error <= tol and det > 0.0


def _require_rotation(R: np.ndarray, name: str) -> None:
    """Raise ValueError unless the finite 3x3 array ``R`` is a rotation within ``ORTHONORMAL_TOL``."""
    error, det = _rotation_defects(R)
    if error > ORTHONORMAL_TOL:
        raise ValueError(f"{name} is not orthonormal: ||R^T R - I|| = {error:.3g} > {ORTHONORMAL_TOL:g}")
    if det <= 0.0:
        raise ValueError(f"{name} is a reflection, not a rotation: det = {det:.3g}")


def check_rotation(R, name: str = "R") -> np.ndarray:
    """Return ``R`` as a float array, or raise ValueError naming what makes it not a rotation."""
    R = _checked(R, (3, 3), name)
    _require_rotation(R, name)
    return R


def project_to_rotation(R) -> np.ndarray:
    """Nearest rotation to ``R`` in the Frobenius norm (SVD, with the sign fixed so det = +1)."""
    U, _, Vt = np.linalg.svd(_checked(R, (3, 3), "R"))
    if np.linalg.det(U @ Vt) < 0.0:
        U[:, 2] = -U[:, 2]
    return U @ Vt


def exp(w) -> np.ndarray:
    """Rotation ``expm(hat(w))`` (Rodrigues' formula)."""
    w = _checked(w, (3,), "w")
    s1, s2, _, _, _ = _exp_coefficients(math.sqrt(w @ w))
    return _polynomial(w, s1, s2)


def log(R) -> np.ndarray:
    """Rotation vector ``w`` with ``exp(w) = R`` and ``|w| <= pi``.

    At exactly ``|w| = pi`` both ``w`` and ``-w`` are logarithms; either may be returned.
    """
    return _log(check_rotation(R))


def _log(R: np.ndarray) -> np.ndarray:
    """``log`` of a checked rotation."""
    (a, b, c), (d, e, f), (g, h, i) = R.tolist()
    s = (0.5 * (h - f), 0.5 * (c - g), 0.5 * (d - b))  # vee(R) = sin(theta) n
    sin_theta = math.sqrt(s[0] * s[0] + s[1] * s[1] + s[2] * s[2])
    cos_theta = 0.5 * (a + e + i - 1.0)
    theta = math.atan2(sin_theta, cos_theta)
    if cos_theta >= 0.0:
        if sin_theta < 1e-6:
            scale = 1.0 + sin_theta * sin_theta / 6.0  # theta/sin(theta), series in sin(theta)
        else:
            scale = theta / sin_theta
        return np.array(s) * scale
    # Past pi/2, sin(theta) -> 0 loses the axis; the symmetric part B = (1 - cos) n n^T keeps it.
    # Its largest diagonal entry, >= (1 - cos)/3, gives the best-conditioned column.
    B = ((a - cos_theta, 0.5 * (b + d), 0.5 * (c + g)),
         (0.5 * (b + d), e - cos_theta, 0.5 * (f + h)),
         (0.5 * (c + g), 0.5 * (f + h), i - cos_theta))
    k = max(range(3), key=lambda j: B[j][j])
    n = np.array(B[k]) / math.sqrt(B[k][k] * (1.0 - cos_theta))
    if n[0] * s[0] + n[1] * s[1] + n[2] * s[2] < 0.0:
        n = -n
    return theta * n


def right_jacobian(w) -> np.ndarray:
    """``Jr(w)``: ``exp(w + d) ~= exp(w) exp(Jr(w) d)``."""
    w = _checked(w, (3,), "w")
    _, s2, s3, _, _ = _exp_coefficients(math.sqrt(w @ w))
    return _polynomial(w, -s2, s3)


def left_jacobian(w) -> np.ndarray:
    """``Jl(w)``: ``exp(w + d) ~= exp(Jl(w) d) exp(w)``."""
    w = _checked(w, (3,), "w")
    _, s2, s3, _, _ = _exp_coefficients(math.sqrt(w @ w))
    return _polynomial(w, s2, s3)


def right_jacobian_inverse(w) -> np.ndarray:
    """``Jr(w)^-1``, i.e. ``log(exp(w) exp(d)) ~= w + Jr(w)^-1 d``; valid for ``|w| < 2 pi``."""
    w = _checked(w, (3,), "w")
    return _polynomial(w, 0.5, _inverse_jacobian_coefficient(math.sqrt(w @ w)))


def left_jacobian_inverse(w) -> np.ndarray:
    """``Jl(w)^-1``, i.e. ``log(exp(d) exp(w)) ~= w + Jl(w)^-1 d``; valid for ``|w| < 2 pi``."""
    w = _checked(w, (3,), "w")
    return _polynomial(w, -0.5, _inverse_jacobian_coefficient(math.sqrt(w @ w)))


def random(rng: np.random.Generator | int | None = None) -> np.ndarray:
    """Rotation drawn uniformly (Haar measure), from a normalized Gaussian quaternion."""
    q = np.random.default_rng(rng).standard_normal(4)
    x, y, z, qw = q / math.sqrt(q @ q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * qw), 2 * (x * z + y * qw)],
        [2 * (x * y + z * qw), 1 - 2 * (x * x + z * z), 2 * (y * z - x * qw)],
        [2 * (x * z - y * qw), 2 * (y * z + x * qw), 1 - 2 * (x * x + y * y)],
    ])
