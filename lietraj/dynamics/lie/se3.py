"""SE(3): exponential and logarithm of rigid transforms, adjoints, and the right/left Jacobians of exp, in plain and
compiled forms.

Conventions (README): a transform is a 4x4 homogeneous numpy array ``H = [[R, p], [0, 1]]``;
twists are LINEAR FIRST, ``xi = [v; w]``, with ``hat(xi) = [[hat(w), v], [0, 0]]``. Then

    Ad_H  = [[R, hat(p) R], [0, R]]          ad_xi = [[hat(w), hat(v)], [0, hat(w)]]

so that ``ad_x y = vee([hat x, hat y])`` and ``Ad_{exp(x)} = expm(ad_x)``. Perturbations are on the
right, ``H = Hbar exp(z)``; ``exp(xi + d) ~= exp(xi) exp(Jr(xi) d) ~= exp(Jl(xi) d) exp(xi)``, with

    Jl(xi) = [[Jl3(w), Q(v, w)], [0, Jl3(w)]],    Jr(xi) = Jl(-xi),    Jl(xi) = Ad_{exp(xi)} Jr(xi),

where ``Q`` is the classical coupling block (Barfoot, "State Estimation for Robotics", eq. 7.86,
whose twists are also linear first). The inverse Jacobians are valid for ``|w| < 2 pi``; they are written in the
translation ``p = Jl3(w) v`` of ``exp(xi)`` (Pinocchio's ``Jlog6``, the derivative of ``log6``)::

    Jr(xi)^-1 = [[A, C A], [0, A]],   A = Jr3(w)^-1 = I + W/2 + D W²,   D(θ) = (1 - (θ/2) cot(θ/2)) / θ²,
    C = ((D'/θ)(w·p) w - (θ² D'/θ + 2D) p) wᵀ + D w pᵀ + D (w·p) I + [p]x / 2

with ``θ = |w|``, ``W = [w]x`` and ``D``, ``D'/θ`` from ``so3.jlog_coefficients``.

Each formula is written once, as a compiled helper (``lietraj._jit.helper``) on tuples and poses ``(R, p)`` (a
row-major 9-tuple and a 3-tuple), without input checks: ``exp6``, ``log6``, ``jexp6`` (the blocks of ``Jr``),
``jlog6`` (the blocks of ``Jr⁻¹``), ``between`` (``H0⁻¹ H1``), and on arrays ``exp_into`` (``exp(xi)`` with
``Ad_{exp(-xi)}`` and ``Jr(xi)``), ``pose_exp`` (``H exp(xi)``) and ``ad_into``; ``exp_blocks`` and
``difference_batch`` run them over knots in one compiled call. The plain functions (``exp``, ``log``,
``right_jacobian``, ...) take and return numpy arrays, check their inputs and run the same helpers as Python. The
module has the operations every group of ``lie.group.LieGroup`` has.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics._tuples import base_placement, dot, mm, mtv, mv, scale, skew, sub, transpose

from . import group, so3
from .so3 import _checked, _require_rotation, exp_coefficients, jlog_coefficients, log3, skew_polynomial

_GROUP = sys.modules[__name__]  # this module, as the group the generic ⊕/⊖ Jacobians of ``group`` act on

# ---------------------------------------------------------------- compiled forms (tuples, unchecked)


@helper
def _combine(a, A, b, B, c, C, d, D):
    """a A + b B + c C + d D for 9-tuples."""
    return (a * A[0] + b * B[0] + c * C[0] + d * D[0], a * A[1] + b * B[1] + c * C[1] + d * D[1],
            a * A[2] + b * B[2] + c * C[2] + d * D[2], a * A[3] + b * B[3] + c * C[3] + d * D[3],
            a * A[4] + b * B[4] + c * C[4] + d * D[4], a * A[5] + b * B[5] + c * C[5] + d * D[5],
            a * A[6] + b * B[6] + c * C[6] + d * D[6], a * A[7] + b * B[7] + c * C[7] + d * D[7],
            a * A[8] + b * B[8] + c * C[8] + d * D[8])


@helper
def coupling(v, w, s3, s4, s5):
    """The block ``Q(v, w)`` of ``Jl([v; w])`` (Barfoot eq. 7.86) from ``S3, S4, S5`` at ``|w|``."""
    V, W = skew(v), skew(w)
    WV, VW = mm(W, V), mm(V, W)
    WVW = mm(WV, W)
    c3 = 0.5 * (s4 - 3.0 * s5)  # (2 theta - 3 sin + theta cos) / (2 theta^5)
    first = _combine(0.5, V, s3, WV, s3, VW, s3, WVW)
    second = _combine(1.0, first, s4, mm(W, WV), s4, mm(VW, W), -3.0 * s4, WVW)
    return _combine(1.0, second, c3, mm(WVW, W), c3, mm(W, WVW), 0.0, WVW)


@helper
def exp6(v, w):
    """The pose ``(R, p)`` of ``exp([v; w])``: ``R = exp3(w)``, ``p = Jl3(w) v``."""
    s1, s2, s3, _, _ = exp_coefficients(math.sqrt(dot(w, w)))
    return skew_polynomial(w, s1, s2), mv(skew_polynomial(w, s2, s3), v)


@helper
def jexp6(v, w):
    """``(J, Q)`` with ``Jr([v; w]) = [[J, Q], [0, J]] = Jl(-[v; w])``: ``J = Jr3(w)``, ``Q = Q(-v, -w)``
    (Pinocchio's ``Jexp6``)."""
    _, s2, s3, s4, s5 = exp_coefficients(math.sqrt(dot(w, w)))
    return skew_polynomial(w, -s2, s3), coupling(scale(v, -1.0), scale(w, -1.0), s3, s4, s5)


@helper
def log6(R, p):
    """The twist ``(u, w)`` of ``log`` of the pose ``(R, p)``: ``w = log3(R)``, ``u = Jl3(w)⁻¹ p``."""
    w = log3(R)
    D, _ = jlog_coefficients(math.sqrt(dot(w, w)))
    return mv(skew_polynomial(w, -0.5, D), p), w


@helper
def jlog6(w, p):
    """``(A, C)`` with ``Jr(e)⁻¹ = [[A, C A], [0, A]]`` (module docstring) at ``e = (u, w) = log6(R, p)``, from ``w``
    and the translation ``p``."""
    theta = math.sqrt(dot(w, w))
    D, Dd = jlog_coefficients(theta)
    A = skew_polynomial(w, 0.5, D)
    wp = dot(w, p)
    t = sub(scale(w, Dd * wp), scale(p, theta * theta * Dd + 2.0 * D))
    C = (t[0] * w[0] + D * (w[0] * p[0] + wp), t[0] * w[1] + D * w[0] * p[1] - 0.5 * p[2],
         t[0] * w[2] + D * w[0] * p[2] + 0.5 * p[1],
         t[1] * w[0] + D * w[1] * p[0] + 0.5 * p[2], t[1] * w[1] + D * (w[1] * p[1] + wp),
         t[1] * w[2] + D * w[1] * p[2] - 0.5 * p[0],
         t[2] * w[0] + D * w[2] * p[0] - 0.5 * p[1], t[2] * w[1] + D * w[2] * p[1] + 0.5 * p[0],
         t[2] * w[2] + D * (w[2] * p[2] + wp))
    return A, C


@helper
def between(R0, p0, R1, p1):
    """The pose ``H0⁻¹ H1 = (R0ᵀ R1, R0ᵀ (p1 - p0))``, whose ``log6`` is ``H1 ⊖ H0``."""
    return mm(transpose(R0), R1), mtv(R0, sub(p1, p0))


@helper
def exp_into(xi, E, PHI, JR, blocks):
    """``E = exp(xi)`` (4x4); with ``blocks``, also ``PHI = Ad_{exp(-xi)}`` and ``JR = Jr(xi)`` (6x6)."""
    v, w = (xi[0], xi[1], xi[2]), (xi[3], xi[4], xi[5])
    R, p = exp6(v, w)
    for r in range(3):
        for c in range(3):
            E[r, c] = R[3 * r + c]
        E[r, 3] = p[r]
        E[3, r] = 0.0
    E[3, 3] = 1.0
    if not blocks:
        return
    RT = transpose(R)
    B = mm(RT, skew(p))  # Ad_{H^-1} = [[R^T, -R^T [p]x], [0, R^T]]
    J, Q = jexp6(v, w)
    for r in range(3):
        for c in range(3):
            PHI[r, c] = PHI[r + 3, c + 3] = RT[3 * r + c]
            PHI[r, c + 3] = -B[3 * r + c]
            PHI[r + 3, c] = 0.0
            JR[r, c] = JR[r + 3, c + 3] = J[3 * r + c]
            JR[r, c + 3] = Q[3 * r + c]
            JR[r + 3, c] = 0.0


@helper
def pose_exp(H, xi, H_out, E):
    """``H_out = H exp(xi)`` for a 4x4 pose (``H_out`` may be ``H``); ``E`` is a 4x4 work array. Called, not
    inlined, from the rollout's steps, which keeps the rollout kernel's compile time down."""
    exp_into(xi, E, E, E, False)
    pose_times(H, E, H_out)


@helper
def pose_times(H, E, H_out):
    """``H_out = H E`` for 4x4 poses (``H_out`` may be ``H``): the product ``pose_exp`` takes, for a caller that has
    ``E = exp(xi)`` already (the Euler step's Jacobians)."""
    for r in range(3):  # row by row, so that H_out may be H
        h0, h1, h2, h3 = H[r, 0], H[r, 1], H[r, 2], H[r, 3]
        for c in range(4):
            H_out[r, c] = h0 * E[0, c] + h1 * E[1, c] + h2 * E[2, c] + h3 * E[3, c]
    H_out[3, 0], H_out[3, 1], H_out[3, 2], H_out[3, 3] = 0.0, 0.0, 0.0, 1.0


@helper
def _skew_into(A, i, j, x, y, z, k):
    """``A[i:i+3, j:j+3] = k [(x, y, z)]x``."""
    A[i, j], A[i, j + 1], A[i, j + 2] = 0.0, -k * z, k * y
    A[i + 1, j], A[i + 1, j + 1], A[i + 1, j + 2] = k * z, 0.0, -k * x
    A[i + 2, j], A[i + 2, j + 1], A[i + 2, j + 2] = -k * y, k * x, 0.0


@helper
def ad_into(A, r, c, xi, k):
    """``A[r:r+6, c:c+6] = k ad(xi)`` (module docstring)."""
    _skew_into(A, r, c, xi[3], xi[4], xi[5], k)
    _skew_into(A, r, c + 3, xi[0], xi[1], xi[2], k)
    _skew_into(A, r + 3, c + 3, xi[3], xi[4], xi[5], k)
    for i in range(3):
        for j in range(3):
            A[r + 3 + i, c + j] = 0.0


@kernel
def _exp_blocks_batch(XI, E, PHI, JR, blocks):
    for k in range(XI.shape[0]):
        exp_into(XI[k], E[k], PHI[k], JR[k], blocks)


def exp_blocks(XI: np.ndarray, blocks: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``exp(ξ)`` (N, 4, 4) and, with ``blocks``, ``Ad_{exp(−ξ)}`` and ``Jr(ξ)`` (N, 6, 6) for twists XI (N, 6), in
    one compiled call: the pieces of the chain rule through ``H exp(ξ)`` for a user's dynamics on SE(3)."""
    N = XI.shape[0]
    E, PHI, JR = np.empty((N, 4, 4)), np.empty((N, 6, 6)), np.empty((N, 6, 6))
    _exp_blocks_batch(np.ascontiguousarray(XI), E, PHI, JR, blocks)
    return E, PHI, JR


@kernel
def difference_batch(H0, H1, jacobian, Z, J):
    """``Z[k] = H1[k] ⊖ H0[k] = log(H0[k]⁻¹ H1[k])`` (linear first) and, with ``jacobian``, its derivative in
    ``H1[k]``, ``J[k] = Jr(Z[k])⁻¹`` (6x6); a one-knot ``H0`` serves every knot. Unchecked poses."""
    single = H0.shape[0] == 1
    for k in range(H1.shape[0]):
        R0, p0 = base_placement(H0[0 if single else k])
        R1, p1 = base_placement(H1[k])
        R, p = between(R0, p0, R1, p1)
        u, w = log6(R, p)
        for m in range(3):
            Z[k, m], Z[k, 3 + m] = u[m], w[m]
        if not jacobian:
            continue
        A, C = jlog6(w, p)
        CA = mm(C, A)
        for r in range(3):
            for c in range(3):
                J[k, r, c] = J[k, r + 3, c + 3] = A[3 * r + c]
                J[k, r, c + 3] = CA[3 * r + c]
                J[k, r + 3, c] = 0.0


# ---------------------------------------------------------------- plain forms (numpy, checked)


def _twist(xi) -> tuple[list[float], list[float]]:
    v_w = _checked(xi, (6,), "xi").tolist()
    return v_w[:3], v_w[3:]


def _pose(H: np.ndarray) -> tuple[list[float], list[float]]:
    return H[:3, :3].ravel().tolist(), H[:3, 3].tolist()


def _upper_triangular(D, U) -> np.ndarray:
    """The 6x6 matrix ``[[D, U], [0, D]]`` of two row-major 9-tuples."""
    out = np.zeros((6, 6))
    out[:3, :3] = out[3:, 3:] = so3._matrix(D)
    out[:3, 3:] = so3._matrix(U)
    return out


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
    v, w = _twist(xi)
    out = np.zeros((4, 4))
    out[:3, :3] = so3.hat(w)
    out[:3, 3] = v
    return out


def vee(X) -> np.ndarray:
    """Inverse of ``hat``: the twist ``[v; w]`` of a 4x4 matrix of se(3)."""
    X = _checked(X, (4, 4), "X")
    return np.concatenate((X[:3, 3], so3.vee(X[:3, :3])))


def identity() -> np.ndarray:
    """The identity transform."""
    return np.eye(4)


def compose(H1, H2) -> np.ndarray:
    """Group product ``H1 H2``."""
    return check_transform(H1, "H1") @ check_transform(H2, "H2")


def exp(xi) -> np.ndarray:
    """Transform ``expm(hat(xi))``: ``R = exp3(w)``, ``p = Jl3(w) v``."""
    R, p = exp6(*_twist(xi))
    H = np.eye(4)
    H[:3, :3] = so3._matrix(R)
    H[:3, 3] = p
    return H


def log(H) -> np.ndarray:
    """Twist ``xi = [v; w]`` with ``exp(xi) = H`` and ``|w| <= pi``."""
    u, w = log6(*_pose(check_transform(H)))
    return np.array(u + w)


def inverse(H) -> np.ndarray:
    """``H^-1 = [[R^T, -R^T p], [0, 1]]``."""
    H = check_transform(H)
    out = np.eye(4)
    out[:3, :3] = H[:3, :3].T
    out[:3, 3] = -(H[:3, :3].T @ H[:3, 3])
    return out


def integrate(H, xi) -> np.ndarray:
    """``H ⊕ xi = H exp(xi)``."""
    return check_transform(H) @ exp(xi)


def difference(H0, H1) -> np.ndarray:
    """``H1 ⊖ H0 = log(H0⁻¹ H1)``."""
    return log(inverse(H0) @ check_transform(H1, "H1"))


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
    out = np.empty((6, 6))
    ad_into(out, 0, 0, _checked(xi, (6,), "xi").tolist(), 1.0)
    return out


def right_jacobian(xi) -> np.ndarray:
    """``Jr(xi)`` (6x6): ``exp(xi + d) ~= exp(xi) exp(Jr(xi) d)``; Pinocchio's ``Jexp6``."""
    return _upper_triangular(*jexp6(*_twist(xi)))


def left_jacobian(xi) -> np.ndarray:
    """``Jl(xi) = Jr(-xi)`` (6x6): ``exp(xi + d) ~= exp(Jl(xi) d) exp(xi)``."""
    return right_jacobian(-_checked(xi, (6,), "xi"))


def right_jacobian_inverse(xi) -> np.ndarray:
    """``Jr(xi)^-1``: ``log(exp(xi) exp(d)) ~= xi + Jr(xi)^-1 d``; Pinocchio's ``Jlog6(exp(xi))``;
    valid for ``|w| < 2 pi``."""
    v, w = _twist(xi)
    A, C = jlog6(w, exp6(v, w)[1])
    return _upper_triangular(A, mm(C, A))


def left_jacobian_inverse(xi) -> np.ndarray:
    """``Jl(xi)^-1 = Jr(-xi)^-1``: ``log(exp(d) exp(xi)) ~= xi + Jl(xi)^-1 d``; valid for ``|w| < 2 pi``."""
    return right_jacobian_inverse(-_checked(xi, (6,), "xi"))


def integrate_jacobians(H, xi) -> tuple[np.ndarray, np.ndarray]:
    """``(J_x, J_z) = (Ad_{exp(-xi)}, Jr(xi))``: ``(H exp(dx)) ⊕ (xi + dz) ~= (H ⊕ xi) exp(J_x dx + J_z dz)``."""
    check_transform(H)
    return group.integrate_jacobians(_GROUP, _checked(xi, (6,), "xi"))


def difference_jacobians(H0, H1) -> tuple[np.ndarray, np.ndarray]:
    """``(J_x0, J_x1) = (-Jl⁻¹(z), Jr⁻¹(z))`` at ``z = H1 ⊖ H0``:
    ``(H1 exp(d1)) ⊖ (H0 exp(d0)) ~= z + J_x0 d0 + J_x1 d1``."""
    return group.difference_jacobians(_GROUP, H0, H1)


_AD_BASIS = np.stack([ad(e) for e in np.eye(6)])  # ad(e_i)


def bracket_rows(lam: np.ndarray) -> np.ndarray:
    """``M[..., i, j] = λᵀ ad(e_i) e_j = λᵀ [e_i, e_j]`` for covectors ``lam`` (..., 6)."""
    return np.einsum("...k,ikj->...ij", lam, _AD_BASIS)


def right_jacobian_derivative_contraction(c: np.ndarray, lam: np.ndarray, tol: float = 1e-18) -> np.ndarray:
    """``DJ[..., i, j] = λᵀ DJr(c)[e_i] e_j`` for twists ``c`` and covectors ``λ`` of shape (..., 6): the derivative of
    ``Jr`` contracted with ``λ``, summed from the series ``Jr(c) = Σ_k (-1)^k ad_c^k / (k+1)!`` as
    ``DJr[d] = Σ_k a_k Σ_m ad_c^m ad_d ad_c^(k-1-m)``, with vector-matrix products only, each twist's series until
    its terms fall below ``tol`` relative to its sum (one compiled call for all of them)."""
    c, lam = np.broadcast_arrays(np.asarray(c, dtype=float), np.asarray(lam, dtype=float))
    C, LAM = np.ascontiguousarray(c.reshape(-1, 6)), np.ascontiguousarray(lam.reshape(-1, 6))
    DJ = np.empty((len(C), 6, 6))
    _right_jacobian_derivative_batch(C, LAM, float(tol), _AD_BASIS, np.empty((3, 6, 6)), np.empty((2, 6)), DJ)
    return DJ.reshape(c.shape + (6,))


@kernel
def _right_jacobian_derivative_batch(C, LAM, tol, basis, M, v, DJ):
    """``right_jacobian_derivative_contraction`` at every row of ``C``, ``LAM`` (N, 6) into ``DJ`` (N, 6, 6): with
    ``q_k[i] = λᵀ Q_k(e_i)`` and ``p_k = λᵀ ad_c^k``, ``q_k = q_{k-1} ad_c + [p_{k-1}ᵀ ad(e_i)]_i``. ``basis`` holds
    ``ad(e_i)``; ``M`` (3, 6, 6) and ``v`` (2, 6) are scratch."""
    A, q, t = M[0], M[1], M[2]
    for n in range(C.shape[0]):
        ad_into(A, 0, 0, C[n], 1.0)
        for i in range(6):
            v[0, i] = LAM[n, i]
            for j in range(6):
                q[i, j] = 0.0
                DJ[n, i, j] = 0.0
        coefficient = 1.0
        for k in range(1, 60):
            for i in range(6):
                for j in range(6):
                    acc = 0.0
                    for m in range(6):
                        acc += q[i, m] * A[m, j] + v[0, m] * basis[i, m, j]
                    t[i, j] = acc
            for j in range(6):
                acc = 0.0
                for m in range(6):
                    acc += v[0, m] * A[m, j]
                v[1, j] = acc
            coefficient *= -1.0 / (k + 1)
            big_q = big_p = big = 0.0
            for i in range(6):
                v[0, i] = v[1, i]
                big_p = max(big_p, abs(v[0, i]))
                for j in range(6):
                    q[i, j] = t[i, j]
                    DJ[n, i, j] += coefficient * t[i, j]
                    big_q = max(big_q, abs(t[i, j]))
                    big = max(big, abs(DJ[n, i, j]))
            if abs(coefficient) * (big_q + big_p) < tol * max(1.0, big):
                break


def random(rng: np.random.Generator | int | None = None) -> np.ndarray:
    """Transform with a uniformly random rotation and a standard-normal translation."""
    rng = np.random.default_rng(rng)
    H = np.eye(4)
    H[:3, :3] = so3.random(rng)
    H[:3, 3] = rng.standard_normal(3)
    return H
