"""Scalar spatial-algebra helpers for the compiled kernels (linear-first, Featherstone's operators).

Every helper works on scalars and tuples, never on small arrays, so that LLVM keeps 3-vectors and 3x3 blocks in
registers. A spatial vector is a pair of 3-tuples ``(linear, angular)``;
3-vectors, 3x3 matrices and poses are the tuples of ``_tuples``, whose helpers the kernels import from here with
the spatial ones (this module is the kernels' one import of scalar helpers; the Lie groups import ``_tuples``
directly, below the model).

Placements ``(R, p)`` are the pose of a child frame in its parent frame: ``act`` maps child coordinates to
parent ones, ``act_inv`` the reverse (Pinocchio's ``SE3::act`` / ``actInv``).
"""

from lietraj._jit import helper
from lietraj.dynamics._tuples import (  # noqa: F401 (dot, outer, base_placement: for the kernels, see above)
    add,
    base_placement,
    cross,
    dot,
    inv3,
    madd,
    mm,
    msub,
    mtv,
    mv,
    outer,
    scale,
    skew,
    sub,
    transpose,
)
from lietraj.dynamics.lie.so3 import axis_angle
from lietraj.dynamics.model.model import (
    JOINT_PRISMATIC,
    JOINT_REVOLUTE,
    MF_AXIS,
    MF_H,
    MF_IO,
    MF_MASS,
    MF_P,
    MF_R,
)


@helper
def load3(W, i, o):
    return (W[i, o], W[i, o + 1], W[i, o + 2])


@helper
def store3(W, i, o, x):
    W[i, o], W[i, o + 1], W[i, o + 2] = x[0], x[1], x[2]


@helper
def load9(W, i, o):
    return (W[i, o], W[i, o + 1], W[i, o + 2], W[i, o + 3], W[i, o + 4], W[i, o + 5], W[i, o + 6], W[i, o + 7], W[i, o + 8])


@helper
def store9(W, i, o, R):
    for k in range(9):
        W[i, o + k] = R[k]


@helper
def joint_placement(mf, jtype, i, q):
    """Pose (R, p) of body i in its parent for joint position q: placement * joint motion."""
    R0 = load9(mf, i, MF_R)
    p0 = load3(mf, i, MF_P)
    a = load3(mf, i, MF_AXIS)
    if jtype == JOINT_REVOLUTE:
        return mm(R0, axis_angle(a, q)), p0
    return R0, add(p0, scale(mv(R0, a), q))


@helper
def motion_subspace(mf, jtype, i):
    """S of a 1-DoF joint in the body frame, as (linear, angular)."""
    a = load3(mf, i, MF_AXIS)
    if jtype == JOINT_PRISMATIC:
        return a, (0.0, 0.0, 0.0)
    return (0.0, 0.0, 0.0), a


@helper
def act_inv_motion(R, p, v, w):
    """Motion (v, w) given in the parent frame, expressed in the child frame."""
    return mtv(R, sub(v, cross(p, w))), mtv(R, w)


@helper
def act_force(R, p, f, n):
    """Force (f, n) given in the child frame, expressed in the parent frame."""
    fp = mv(R, f)
    return fp, add(mv(R, n), cross(p, fp))


@helper
def cross_motion(v, w, mv_, mw):
    """(v, w) x (mv_, mw): the spatial motion cross product."""
    return add(cross(w, mv_), cross(v, mw)), cross(w, mw)


@helper
def cross_force(v, w, f, n):
    """(v, w) x* (f, n): the spatial force cross product."""
    return cross(w, f), add(cross(w, n), cross(v, f))


@helper
def inertia_times(mf, i, v, w):
    """Spatial inertia of body i (about its origin) times the motion (v, w)."""
    m = mf[i, MF_MASS]
    h = load3(mf, i, MF_H)
    xx, yy, zz = mf[i, MF_IO], mf[i, MF_IO + 1], mf[i, MF_IO + 2]
    xy, xz, yz = mf[i, MF_IO + 3], mf[i, MF_IO + 4], mf[i, MF_IO + 5]
    Iw = (xx * w[0] + xy * w[1] + xz * w[2], xy * w[0] + yy * w[1] + yz * w[2], xz * w[0] + yz * w[1] + zz * w[2])
    return sub(scale(v, m), cross(h, w)), add(Iw, cross(h, v))


# Symmetric 6x6 inertias (rigid, composite or articulated) as three 3x3 blocks [[A, B], [B^T, C]]:
# force = A v + B w, moment = B^T v + C w for a motion (v, w).


@helper
def body_inertia_blocks(mf, i):
    """Blocks of body i's spatial inertia about its origin: A = m I, B = -[h]x, C = I_o."""
    m = mf[i, MF_MASS]
    h = load3(mf, i, MF_H)
    xx, yy, zz = mf[i, MF_IO], mf[i, MF_IO + 1], mf[i, MF_IO + 2]
    xy, xz, yz = mf[i, MF_IO + 3], mf[i, MF_IO + 4], mf[i, MF_IO + 5]
    return ((m, 0.0, 0.0, 0.0, m, 0.0, 0.0, 0.0, m), skew(scale(h, -1.0)), (xx, xy, xz, xy, yy, yz, xz, yz, zz))


@helper
def inertia_blocks_times(A, B, C, v, w):
    """[[A, B], [B^T, C]] (v, w)."""
    return add(mv(A, v), mv(B, w)), add(mtv(B, v), mv(C, w))


@helper
def inertia_to_parent(R, p, A, B, C):
    """Blocks of X^* I X: an inertia given in a child frame, expressed in the parent frame (notes rule 5)."""
    Ar, Br, Cr = mm(mm(R, A), transpose(R)), mm(mm(R, B), transpose(R)), mm(mm(R, C), transpose(R))
    P = skew(p)
    PB = mm(P, Br)
    return Ar, msub(Br, mm(Ar, P)), madd(msub(Cr, mm(mm(P, Ar), P)), madd(PB, transpose(PB)))


@helper
def load_inertia_blocks(W, i, o):
    """Blocks A (sym, 6 values), B (9) and C (sym, 6) stored at W[i, o:o+21]."""
    A = (W[i, o], W[i, o + 3], W[i, o + 4], W[i, o + 3], W[i, o + 1], W[i, o + 5], W[i, o + 4], W[i, o + 5], W[i, o + 2])
    B = load9(W, i, o + 6)
    C = (W[i, o + 15], W[i, o + 18], W[i, o + 19], W[i, o + 18], W[i, o + 16], W[i, o + 20], W[i, o + 19], W[i, o + 20],
         W[i, o + 17])
    return A, B, C


@helper
def store_inertia_blocks(W, i, o, A, B, C):
    W[i, o], W[i, o + 1], W[i, o + 2], W[i, o + 3], W[i, o + 4], W[i, o + 5] = A[0], A[4], A[8], A[1], A[2], A[5]
    store9(W, i, o + 6, B)
    W[i, o + 15], W[i, o + 16], W[i, o + 17] = C[0], C[4], C[8]
    W[i, o + 18], W[i, o + 19], W[i, o + 20] = C[1], C[2], C[5]


@helper
def add_inertia_blocks(W, i, o, A, B, C):
    A0, B0, C0 = load_inertia_blocks(W, i, o)
    store_inertia_blocks(W, i, o, madd(A0, A), madd(B0, B), madd(C0, C))


@helper
def solve_inertia(A, B, C, f, n):
    """[[A, B], [B^T, C]]^{-1} (f, n) by the Schur complement of A (symmetric positive definite)."""
    Ai = inv3(A)
    Si = inv3(msub(C, mm(mm(transpose(B), Ai), B)))
    w = mv(Si, sub(n, mtv(B, mv(Ai, f))))
    return mv(Ai, sub(f, mv(B, w))), w
