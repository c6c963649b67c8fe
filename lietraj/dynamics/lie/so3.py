"""SO(3): exponential and logarithm of rotations, and the right/left Jacobians of exp, in plain and compiled forms.

Conventions (README): a rotation is a 3x3 numpy array ``R``; its tangent vector ``w`` is
the rotation vector, ``R = exp(w) = expm(hat(w))``. Perturbations are on the right,
``R = Rbar exp(z)``. The right Jacobian satisfies ``exp(w + d) ~= exp(w) exp(Jr(w) d)`` and the
left Jacobian ``exp(w + d) ~= exp(Jl(w) d) exp(w)``; ``Jl(w) = Jr(-w) = Jr(w)^T = R Jr(w)``.

With ``theta = |w|`` and ``W = hat(w)`` everything is a polynomial in ``W``::

    exp(w)   = I + S1 W + S2 W^2          S1 = sin(theta)/theta,  S2 = (1 - cos(theta))/theta^2
    Jr(w)    = I - S2 W + S3 W^2          S3 = (theta - sin(theta))/theta^3
    Jr(w)^-1 = I + W/2 + D W^2            D  = (1 - (theta/2) cot(theta/2))/theta^2

``S_m(theta) = sum_j (-1)^j theta^(2j) / (2j+m)!``; the closed forms cancel catastrophically for
small ``theta``, so below ``_SERIES_BELOW`` the series is summed instead (truncation < 1e-19); ``D`` and
``D'/theta`` (for SE(3)'s Jlog6) are summed as series below ``_JLOG_SERIES_BELOW``.
The inverse Jacobians are singular at ``theta = 2 pi``: they are valid for ``|w| < 2 pi`` and
accurate for ``|w| <= pi``, which covers every vector returned by ``log``.

Each formula is written once, as a compiled helper (``lietraj._jit.helper``) on tuples, without input checks:
a 3-vector is a 3-tuple, a rotation a row-major 9-tuple. They carry Pinocchio's names: ``exp3``, ``log3``,
``jexp3`` (``Jr``), ``jlog3`` (``Jr⁻¹``), with the coefficients ``exp_coefficients`` and ``jlog_coefficients``,
the polynomial ``skew_polynomial`` and ``axis_angle`` (Rodrigues' formula for a unit axis: the joint rotations).
The plain functions (``exp``, ``log``, ``right_jacobian``, ...) take and return numpy arrays, check their inputs
and run the same helpers as Python. The module has the operations every group of ``lie.group.LieGroup`` has.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from lietraj._jit import helper
from lietraj.dynamics._tuples import dot, scale, skew

from . import group

_GROUP = sys.modules[__name__]  # this module, as the group the generic ⊕/⊖ Jacobians of ``group`` act on
ORTHONORMAL_TOL = 1e-6
"""Largest ``||R^T R - I||_F`` accepted as a rotation by ``log`` and ``check_rotation``."""

_SERIES_BELOW = 0.5
_SERIES_TERMS = 8
# Taylor coefficients of S1 .. S5 in theta^2, highest power first (for Horner's scheme).
_S1, _S2, _S3, _S4, _S5 = (
    tuple((-1) ** j / math.factorial(2 * j + m) for j in reversed(range(_SERIES_TERMS))) for m in range(1, 6)
)
# Below this angle D(θ) and D'(θ)/θ are summed as series (truncation < 1e-17), above it in closed form
# (cancellation < 1e-13 relative on D'/θ, which multiplies terms of size θ²).
_JLOG_SERIES_BELOW = 0.25


def _checked(x, shape: tuple[int, ...], name: str) -> np.ndarray:
    """Return ``x`` as a float array, or raise ValueError if its shape is wrong or it is not finite."""
    a = np.asarray(x, dtype=float)
    if a.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or inf")
    return a


# ---------------------------------------------------------------- compiled forms (tuples, unchecked)


@helper
def _horner(c, x):
    acc = 0.0
    for k in range(len(c)):
        acc = acc * x + c[k]
    return acc


@helper
def exp_coefficients(theta):
    """``(S1, ..., S5)`` at ``theta >= 0``, each accurate to a few ulp; NaN at ``theta = inf`` (a diverged step)."""
    t2 = theta * theta
    if theta < _SERIES_BELOW:
        return _horner(_S1, t2), _horner(_S2, t2), _horner(_S3, t2), _horner(_S4, t2), _horner(_S5, t2)
    if theta == math.inf:  # NaN, as compiled code gives; Python's math.sin would raise
        return math.nan, math.nan, math.nan, math.nan, math.nan
    s1 = math.sin(theta) / theta
    half_sinc = math.sin(0.5 * theta) / (0.5 * theta)
    s2 = 0.5 * half_sinc * half_sinc  # (1 - cos)/theta^2 without the cancellation of 1 - cos
    # S_m = 1/m! - theta^2 S_{m+2}. The cancellation costs S_m about eps/theta^(m-1), but S_m only
    # multiplies terms of size theta^(m-1), so above the threshold every term keeps a few ulp.
    s3 = (1.0 - s1) / t2
    s4 = (0.5 - s2) / t2
    s5 = (1.0 / 6.0 - s3) / t2
    return s1, s2, s3, s4, s5


@helper
def jlog_coefficients(theta):
    """``D(θ) = (1 - (θ/2) cot(θ/2)) / θ²`` and ``D'(θ)/θ``, finite up to ``θ = pi`` and beyond."""
    t2 = theta * theta
    if theta < _JLOG_SERIES_BELOW:
        # (x/2) cot(x/2) = 1 - sum_n |B_2n| x^2n / (2n)!
        D = 1.0 / 12.0 + t2 * (1.0 / 720.0 + t2 * (1.0 / 30240.0 + t2 * (1.0 / 1209600.0 + t2 * (
            1.0 / 47900160.0 + t2 * (691.0 / 1307674368000.0)))))
        Dd = 1.0 / 360.0 + t2 * (1.0 / 7560.0 + t2 * (1.0 / 201600.0 + t2 * (1.0 / 5987520.0 + t2 * (
            6910.0 / 1307674368000.0))))
        return D, Dd
    half = 0.5 * theta
    sh = math.sin(half)
    D = (1.0 - half * math.cos(half) / sh) / t2
    Dd = (-2.0 / t2 + (1.0 + math.sin(theta) / theta) / (4.0 * sh * sh)) / t2
    return D, Dd


@helper
def skew_polynomial(w, c1, c2):
    """I + c1 [w]x + c2 [w]x^2 as a row-major 9-tuple ([w]x^2 = w w^T - |w|^2 I): the form of exp, Jl, Jr on SO(3)."""
    x, y, z = w
    d = 1.0 - c2 * (x * x + y * y + z * z)
    return (d + c2 * x * x, c2 * x * y - c1 * z, c2 * x * z + c1 * y,
            c2 * x * y + c1 * z, d + c2 * y * y, c2 * y * z - c1 * x,
            c2 * x * z - c1 * y, c2 * y * z + c1 * x, d + c2 * z * z)


@helper
def axis_angle(a, q):
    """``exp(q a)`` for a unit axis ``a`` (Rodrigues' formula: one sine and one cosine, for the joint rotations)."""
    c, s = math.cos(q), math.sin(q)
    t = 1.0 - c
    x, y, z = a
    return (
        c + t * x * x, t * x * y - s * z, t * x * z + s * y,
        t * x * y + s * z, c + t * y * y, t * y * z - s * x,
        t * x * z - s * y, t * y * z + s * x, c + t * z * z,
    )


@helper
def exp3(w):
    """``exp(w) = I + S1 W + S2 W²``."""
    s1, s2, _, _, _ = exp_coefficients(math.sqrt(dot(w, w)))
    return skew_polynomial(w, s1, s2)


@helper
def log3(R):
    """Rotation vector ``w`` with ``exp(w) = R``, ``|w| <= pi``. Past ``pi/2`` the axis comes from the symmetric part
    ``B = (1 - cos) n nᵀ`` (``sin(theta)`` loses it there): its row with the largest diagonal entry, ``>= (1 - cos)/3``,
    is the best conditioned; at exactly ``pi`` both ``w`` and ``-w`` are logarithms."""
    a, b, c, d, e, f, g, h, i = R
    s = (0.5 * (h - f), 0.5 * (c - g), 0.5 * (d - b))  # vee(R) = sin(theta) n
    sin_t = math.sqrt(dot(s, s))
    cos_t = 0.5 * (a + e + i - 1.0)
    theta = math.atan2(sin_t, cos_t)
    if cos_t >= 0.0:
        return scale(s, 1.0 + sin_t * sin_t / 6.0 if sin_t < 1e-6 else theta / sin_t)  # theta / sin(theta)
    b00, b11, b22 = a - cos_t, e - cos_t, i - cos_t
    if b00 >= b11 and b00 >= b22:
        row, bkk = (b00, 0.5 * (b + d), 0.5 * (c + g)), b00
    elif b11 >= b22:
        row, bkk = (0.5 * (b + d), b11, 0.5 * (f + h)), b11
    else:
        row, bkk = (0.5 * (c + g), 0.5 * (f + h), b22), b22
    k = theta / math.sqrt(bkk * (1.0 - cos_t))
    return scale(row, -k if dot(row, s) < 0.0 else k)


@helper
def jexp3(w):
    """``Jr(w) = I - S2 W + S3 W²`` (Pinocchio's ``Jexp3``); ``Jl(w) = jexp3(-w)``."""
    _, s2, s3, _, _ = exp_coefficients(math.sqrt(dot(w, w)))
    return skew_polynomial(w, -s2, s3)


@helper
def jlog3(w):
    """``Jr(w)⁻¹ = I + W/2 + D W²`` (Pinocchio's ``Jlog3`` at ``exp(w)``); ``Jl(w)⁻¹ = jlog3(-w)``."""
    D, _ = jlog_coefficients(math.sqrt(dot(w, w)))
    return skew_polynomial(w, 0.5, D)


# ---------------------------------------------------------------- plain forms (numpy, checked)


def _matrix(t) -> np.ndarray:
    return np.array(t).reshape(3, 3)


def _tangent(w) -> list[float]:
    return _checked(w, (3,), "w").tolist()


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
    return _matrix(skew(_tangent(w)))


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


def identity() -> np.ndarray:
    """The identity rotation."""
    return np.eye(3)


def compose(R1, R2) -> np.ndarray:
    """Group product ``R1 R2``."""
    return check_rotation(R1, "R1") @ check_rotation(R2, "R2")


def inverse(R) -> np.ndarray:
    """``R⁻¹ = Rᵀ``."""
    return check_rotation(R).T.copy()


def exp(w) -> np.ndarray:
    """Rotation ``expm(hat(w))`` (Rodrigues' formula)."""
    return _matrix(exp3(_tangent(w)))


def log(R) -> np.ndarray:
    """Rotation vector ``w`` with ``exp(w) = R`` and ``|w| <= pi``.

    At exactly ``|w| = pi`` both ``w`` and ``-w`` are logarithms; either may be returned.
    """
    return np.array(log3(check_rotation(R).ravel().tolist()))


def integrate(R, w) -> np.ndarray:
    """``R ⊕ w = R exp(w)``."""
    return check_rotation(R) @ exp(w)


def difference(R0, R1) -> np.ndarray:
    """``R1 ⊖ R0 = log(R0⁻¹ R1)``."""
    return log(inverse(R0) @ check_rotation(R1, "R1"))


def Ad(R) -> np.ndarray:
    """Adjoint ``Ad_R = R``: ``R exp(w) R⁻¹ = exp(R w)``."""
    return check_rotation(R).copy()


def right_jacobian(w) -> np.ndarray:
    """``Jr(w)``: ``exp(w + d) ~= exp(w) exp(Jr(w) d)``."""
    return _matrix(jexp3(_tangent(w)))


def left_jacobian(w) -> np.ndarray:
    """``Jl(w)``: ``exp(w + d) ~= exp(Jl(w) d) exp(w)``."""
    return _matrix(jexp3(scale(_tangent(w), -1.0)))


def right_jacobian_inverse(w) -> np.ndarray:
    """``Jr(w)^-1``, i.e. ``log(exp(w) exp(d)) ~= w + Jr(w)^-1 d``; valid for ``|w| < 2 pi``."""
    return _matrix(jlog3(_tangent(w)))


def left_jacobian_inverse(w) -> np.ndarray:
    """``Jl(w)^-1``, i.e. ``log(exp(d) exp(w)) ~= w + Jl(w)^-1 d``; valid for ``|w| < 2 pi``."""
    return _matrix(jlog3(scale(_tangent(w), -1.0)))


def integrate_jacobians(R, w) -> tuple[np.ndarray, np.ndarray]:
    """``(J_x, J_z) = (Ad_{exp(-w)}, Jr(w))``: ``(R exp(dx)) ⊕ (w + dz) ~= (R ⊕ w) exp(J_x dx + J_z dz)``."""
    check_rotation(R)
    return group.integrate_jacobians(_GROUP, _checked(w, (3,), "w"))


def difference_jacobians(R0, R1) -> tuple[np.ndarray, np.ndarray]:
    """``(J_x0, J_x1) = (-Jl⁻¹(z), Jr⁻¹(z))`` at ``z = R1 ⊖ R0``:
    ``(R1 exp(d1)) ⊖ (R0 exp(d0)) ~= z + J_x0 d0 + J_x1 d1``."""
    return group.difference_jacobians(_GROUP, R0, R1)


def random(rng: np.random.Generator | int | None = None) -> np.ndarray:
    """Rotation drawn uniformly (Haar measure), from a normalized Gaussian quaternion."""
    q = np.random.default_rng(rng).standard_normal(4)
    x, y, z, qw = q / math.sqrt(q @ q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * qw), 2 * (x * z + y * qw)],
        [2 * (x * y + z * qw), 1 - 2 * (x * x + z * z), 2 * (y * z - x * qw)],
        [2 * (x * z - y * qw), 2 * (y * z + x * qw), 1 - 2 * (x * x + y * y)],
    ])
