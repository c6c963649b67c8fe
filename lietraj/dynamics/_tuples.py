"""3-vectors, 3x3 matrices and poses as tuples, for the compiled kernels.

A 3-vector is a 3-tuple, a 3x3 matrix a row-major 9-tuple, a pose the pair ``(R, p)``; a 6x6 block (a floating
base's in a Jacobian) a 6-tuple of row 6-tuples. Helpers on tuples, never on small arrays, let LLVM keep the values
in registers: the entries of an array a loop reads are read again after every store to an output that may alias
it. This is the algebra
under both the Lie groups (``lie/``) and the spatial operators (``_spatial``); it depends on nothing.
"""

from lietraj._jit import helper



@helper
def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@helper
def add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@helper
def sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


@helper
def scale(a, k):
    return (a[0] * k, a[1] * k, a[2] * k)


@helper
def dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@helper
def mv(R, x):
    """R x."""
    return (
        R[0] * x[0] + R[1] * x[1] + R[2] * x[2],
        R[3] * x[0] + R[4] * x[1] + R[5] * x[2],
        R[6] * x[0] + R[7] * x[1] + R[8] * x[2],
    )


@helper
def mtv(R, x):
    """R^T x."""
    return (
        R[0] * x[0] + R[3] * x[1] + R[6] * x[2],
        R[1] * x[0] + R[4] * x[1] + R[7] * x[2],
        R[2] * x[0] + R[5] * x[1] + R[8] * x[2],
    )


@helper
def mm(A, B):
    """A B for row-major 3x3 tuples."""
    return (
        A[0] * B[0] + A[1] * B[3] + A[2] * B[6], A[0] * B[1] + A[1] * B[4] + A[2] * B[7], A[0] * B[2] + A[1] * B[5] + A[2] * B[8],
        A[3] * B[0] + A[4] * B[3] + A[5] * B[6], A[3] * B[1] + A[4] * B[4] + A[5] * B[7], A[3] * B[2] + A[4] * B[5] + A[5] * B[8],
        A[6] * B[0] + A[7] * B[3] + A[8] * B[6], A[6] * B[1] + A[7] * B[4] + A[8] * B[7], A[6] * B[2] + A[7] * B[5] + A[8] * B[8],
    )


@helper
def transpose(A):
    return (A[0], A[3], A[6], A[1], A[4], A[7], A[2], A[5], A[8])


@helper
def madd(A, B):
    return (A[0] + B[0], A[1] + B[1], A[2] + B[2], A[3] + B[3], A[4] + B[4], A[5] + B[5], A[6] + B[6], A[7] + B[7], A[8] + B[8])


@helper
def msub(A, B):
    return (A[0] - B[0], A[1] - B[1], A[2] - B[2], A[3] - B[3], A[4] - B[4], A[5] - B[5], A[6] - B[6], A[7] - B[7], A[8] - B[8])


@helper
def outer(a, b, k):
    """k a b^T."""
    return (k * a[0] * b[0], k * a[0] * b[1], k * a[0] * b[2], k * a[1] * b[0], k * a[1] * b[1], k * a[1] * b[2],
            k * a[2] * b[0], k * a[2] * b[1], k * a[2] * b[2])


@helper
def skew(p):
    return (0.0, -p[2], p[1], p[2], 0.0, -p[0], -p[1], p[0], 0.0)


@helper
def inv3(A):
    """Inverse of a 3x3 matrix by its adjugate (used on symmetric positive-definite blocks)."""
    c0 = A[4] * A[8] - A[5] * A[7]
    c1 = A[5] * A[6] - A[3] * A[8]
    c2 = A[3] * A[7] - A[4] * A[6]
    d = 1.0 / (A[0] * c0 + A[1] * c1 + A[2] * c2)
    return (c0 * d, (A[2] * A[7] - A[1] * A[8]) * d, (A[1] * A[5] - A[2] * A[4]) * d,
            c1 * d, (A[0] * A[8] - A[2] * A[6]) * d, (A[2] * A[3] - A[0] * A[5]) * d,
            c2 * d, (A[1] * A[6] - A[0] * A[7]) * d, (A[0] * A[4] - A[1] * A[3]) * d)


@helper
def rows6(W, k):
    """The rows of ``k W`` for a 6x6 array ``W``."""
    return ((k * W[0, 0], k * W[0, 1], k * W[0, 2], k * W[0, 3], k * W[0, 4], k * W[0, 5]),
            (k * W[1, 0], k * W[1, 1], k * W[1, 2], k * W[1, 3], k * W[1, 4], k * W[1, 5]),
            (k * W[2, 0], k * W[2, 1], k * W[2, 2], k * W[2, 3], k * W[2, 4], k * W[2, 5]),
            (k * W[3, 0], k * W[3, 1], k * W[3, 2], k * W[3, 3], k * W[3, 4], k * W[3, 5]),
            (k * W[4, 0], k * W[4, 1], k * W[4, 2], k * W[4, 3], k * W[4, 4], k * W[4, 5]),
            (k * W[5, 0], k * W[5, 1], k * W[5, 2], k * W[5, 3], k * W[5, 4], k * W[5, 5]))


@helper
def vm6(x, w):
    """The row 6-vector ``x`` times the 6x6 matrix of rows ``w`` (``rows6``)."""
    r0, r1, r2, r3, r4, r5 = w
    return (x[0] * r0[0] + x[1] * r1[0] + x[2] * r2[0] + x[3] * r3[0] + x[4] * r4[0] + x[5] * r5[0],
            x[0] * r0[1] + x[1] * r1[1] + x[2] * r2[1] + x[3] * r3[1] + x[4] * r4[1] + x[5] * r5[1],
            x[0] * r0[2] + x[1] * r1[2] + x[2] * r2[2] + x[3] * r3[2] + x[4] * r4[2] + x[5] * r5[2],
            x[0] * r0[3] + x[1] * r1[3] + x[2] * r2[3] + x[3] * r3[3] + x[4] * r4[3] + x[5] * r5[3],
            x[0] * r0[4] + x[1] * r1[4] + x[2] * r2[4] + x[3] * r3[4] + x[4] * r4[4] + x[5] * r5[4],
            x[0] * r0[5] + x[1] * r1[5] + x[2] * r2[5] + x[3] * r3[5] + x[4] * r4[5] + x[5] * r5[5])


@helper
def base_placement(H):
    """(R, p) of a 4x4 homogeneous pose (an array)."""
    return (H[0, 0], H[0, 1], H[0, 2], H[1, 0], H[1, 1], H[1, 2], H[2, 0], H[2, 1], H[2, 2]), (H[0, 3], H[1, 3], H[2, 3])
