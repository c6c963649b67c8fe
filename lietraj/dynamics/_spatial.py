"""Scalar spatial-algebra helpers for the compiled kernels (linear-first, Featherstone's operators).

Every helper is inlined into its caller and works on scalars and tuples, never on small arrays, so that LLVM
keeps 3-vectors and 3x3 blocks in registers (``notes/numba-patterns.md`` rules 2-3). A 3-vector is a
3-tuple, a 3x3 matrix a row-major 9-tuple, a spatial vector a pair of 3-tuples ``(linear, angular)``.

Placements ``(R, p)`` are the pose of a child frame in its parent frame: ``act`` maps child coordinates to
parent ones, ``act_inv`` the reverse (Pinocchio's ``SE3::act`` / ``actInv``).
"""

import math

from numba import njit

from lietraj.dynamics.model import (
    JOINT_PRISMATIC,
    JOINT_REVOLUTE,
    MF_AXIS,
    MF_H,
    MF_IO,
    MF_MASS,
    MF_P,
    MF_R,
)

inline = njit(cache=True, inline="always")


@inline
def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@inline
def add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@inline
def sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


@inline
def scale(a, k):
    return (a[0] * k, a[1] * k, a[2] * k)


@inline
def dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@inline
def mv(R, x):
    """R x."""
    return (
        R[0] * x[0] + R[1] * x[1] + R[2] * x[2],
        R[3] * x[0] + R[4] * x[1] + R[5] * x[2],
        R[6] * x[0] + R[7] * x[1] + R[8] * x[2],
    )


@inline
def mtv(R, x):
    """R^T x."""
    return (
        R[0] * x[0] + R[3] * x[1] + R[6] * x[2],
        R[1] * x[0] + R[4] * x[1] + R[7] * x[2],
        R[2] * x[0] + R[5] * x[1] + R[8] * x[2],
    )


@inline
def mm(A, B):
    """A B for row-major 3x3 tuples."""
    return (
        A[0] * B[0] + A[1] * B[3] + A[2] * B[6], A[0] * B[1] + A[1] * B[4] + A[2] * B[7], A[0] * B[2] + A[1] * B[5] + A[2] * B[8],
        A[3] * B[0] + A[4] * B[3] + A[5] * B[6], A[3] * B[1] + A[4] * B[4] + A[5] * B[7], A[3] * B[2] + A[4] * B[5] + A[5] * B[8],
        A[6] * B[0] + A[7] * B[3] + A[8] * B[6], A[6] * B[1] + A[7] * B[4] + A[8] * B[7], A[6] * B[2] + A[7] * B[5] + A[8] * B[8],
    )


@inline
def rodrigues(a, q):
    """Rotation by angle q about the unit axis a."""
    c, s = math.cos(q), math.sin(q)
    t = 1.0 - c
    x, y, z = a
    return (
        c + t * x * x, t * x * y - s * z, t * x * z + s * y,
        t * x * y + s * z, c + t * y * y, t * y * z - s * x,
        t * x * z - s * y, t * y * z + s * x, c + t * z * z,
    )


@inline
def load3(W, i, o):
    return (W[i, o], W[i, o + 1], W[i, o + 2])


@inline
def store3(W, i, o, x):
    W[i, o], W[i, o + 1], W[i, o + 2] = x[0], x[1], x[2]


@inline
def load9(W, i, o):
    return (W[i, o], W[i, o + 1], W[i, o + 2], W[i, o + 3], W[i, o + 4], W[i, o + 5], W[i, o + 6], W[i, o + 7], W[i, o + 8])


@inline
def store9(W, i, o, R):
    for k in range(9):
        W[i, o + k] = R[k]


@inline
def joint_placement(mf, jtype, i, q):
    """Pose (R, p) of body i in its parent for joint position q: placement * joint motion."""
    R0 = load9(mf, i, MF_R)
    p0 = load3(mf, i, MF_P)
    a = load3(mf, i, MF_AXIS)
    if jtype == JOINT_REVOLUTE:
        return mm(R0, rodrigues(a, q)), p0
    return R0, add(p0, scale(mv(R0, a), q))


@inline
def motion_subspace(mf, jtype, i):
    """S of a 1-DoF joint in the body frame, as (linear, angular)."""
    a = load3(mf, i, MF_AXIS)
    if jtype == JOINT_PRISMATIC:
        return a, (0.0, 0.0, 0.0)
    return (0.0, 0.0, 0.0), a


@inline
def act_inv_motion(R, p, v, w):
    """Motion (v, w) given in the parent frame, expressed in the child frame."""
    return mtv(R, sub(v, cross(p, w))), mtv(R, w)


@inline
def act_force(R, p, f, n):
    """Force (f, n) given in the child frame, expressed in the parent frame."""
    fp = mv(R, f)
    return fp, add(mv(R, n), cross(p, fp))


@inline
def cross_motion(v, w, mv_, mw):
    """(v, w) x (mv_, mw): the spatial motion cross product."""
    return add(cross(w, mv_), cross(v, mw)), cross(w, mw)


@inline
def cross_force(v, w, f, n):
    """(v, w) x* (f, n): the spatial force cross product."""
    return cross(w, f), add(cross(w, n), cross(v, f))


@inline
def inertia_times(mf, i, v, w):
    """Spatial inertia of body i (about its origin) times the motion (v, w)."""
    m = mf[i, MF_MASS]
    h = load3(mf, i, MF_H)
    xx, yy, zz = mf[i, MF_IO], mf[i, MF_IO + 1], mf[i, MF_IO + 2]
    xy, xz, yz = mf[i, MF_IO + 3], mf[i, MF_IO + 4], mf[i, MF_IO + 5]
    Iw = (xx * w[0] + xy * w[1] + xz * w[2], xy * w[0] + yy * w[1] + yz * w[2], xz * w[0] + yz * w[1] + zz * w[2])
    return sub(scale(v, m), cross(h, w)), add(Iw, cross(h, v))
