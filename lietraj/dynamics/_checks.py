"""Input checks shared by the kernels: done inside the compiled call, reported as a status code.

Numba does no bounds checking, so an array of the wrong size would read garbage or crash; and a NaN state
or a rotation that is not orthonormal would silently give wrong dynamics. Each kernel therefore checks its
inputs first (a few tens of nanoseconds) and returns a status; the Python wrapper turns a non-zero status
into a ``ValueError`` that says what is wrong.
"""

import math
from dataclasses import fields

import numpy as np

from lietraj._jit import helper
from lietraj.dynamics.lie.state import State, Trajectory

OK, BAD_S, BAD_V, BAD_A, BAD_FEXT, NOT_FINITE, BAD_ROTATION, BAD_H, BAD_TAU, BAD_N, SINGULAR = range(11)

_MESSAGES = {
    BAD_S: "joint positions s must have shape ({n},)",
    BAD_V: "velocity v must have shape ({nv},)",
    BAD_A: "acceleration must have shape ({nv},)",
    BAD_FEXT: "external wrenches must have shape ({nb}, 6): one local-frame wrench [f; tau] per body",
    NOT_FINITE: "the state or an input contains NaN or inf",
    BAD_ROTATION: "the base rotation H[:3, :3] is not a rotation matrix (R^T R != I or det R != 1, tolerance 1e-6)",
    BAD_H: "the base pose H must be a 4x4 homogeneous matrix with last row [0, 0, 0, 1]",
    BAD_TAU: "joint torques must have shape ({nv},)",
    BAD_N: "trajectory arrays must all have the same number of knots",
    SINGULAR: "the mass matrix is singular: some joint moves no mass (give it inertia or armature)",
}

IDENTITY4 = np.eye(4)
IDENTITY4_STACK = np.eye(4)[None]


@helper
def finite(x):
    for k in range(x.size):
        if not math.isfinite(x.flat[k]):
            return False
    return True


@helper
def check_state(floating, n, nv, H, s, v):
    """Status of a state (H, s, v): shapes, finiteness and, for a floating base, a proper rigid transform."""
    if s.shape[0] != n:
        return BAD_S
    if v.shape[0] != nv:
        return BAD_V
    if not (finite(s) and finite(v)):
        return NOT_FINITE
    if floating:
        if H.shape[0] != 4 or H.shape[1] != 4:
            return BAD_H
        if not finite(H):
            return NOT_FINITE
        if H[3, 0] != 0.0 or H[3, 1] != 0.0 or H[3, 2] != 0.0 or H[3, 3] != 1.0:
            return BAD_H
        for r in range(3):
            for c in range(3):
                e = H[0, r] * H[0, c] + H[1, r] * H[1, c] + H[2, r] * H[2, c] - (1.0 if r == c else 0.0)
                if abs(e) > 1e-6:
                    return BAD_ROTATION
        det = (H[0, 0] * (H[1, 1] * H[2, 2] - H[1, 2] * H[2, 1]) - H[0, 1] * (H[1, 0] * H[2, 2] - H[1, 2] * H[2, 0])
               + H[0, 2] * (H[1, 0] * H[2, 1] - H[1, 1] * H[2, 0]))
        if det < 0.0:
            return BAD_ROTATION
    return OK


@helper
def check_vector(x, size, code):
    if x.shape[0] != size:
        return code
    if not finite(x):
        return NOT_FINITE
    return OK


@helper
def check_fext(nb, fext):
    """Status of optional per-body wrenches: an empty array means none."""
    if fext.shape[0] == 0:
        return OK
    if fext.shape[0] != nb or fext.shape[1] != 6:
        return BAD_FEXT
    return OK if finite(fext) else NOT_FINITE


@helper
def check_dynamics_inputs(mi, floating, n, nv, H, s, v, u, code, fext):
    """Status of the inputs of inverse or forward dynamics: the state, the nv-vector ``u`` (an acceleration or a
    torque, reported as ``code``) and the optional per-body wrenches."""
    status = check_state(floating, n, nv, H, s, v)
    if status == OK:
        status = check_vector(u, nv, code)
    if status == OK:
        status = check_fext(mi.shape[0], fext)
    return status


def raise_for_status(status: int, model, what: str, knot: int | None = None) -> None:
    """Raise the ValueError that a kernel status stands for."""
    if status == OK:
        return
    msg = _MESSAGES.get(status, "invalid input (status {status})").format(
        n=model.n, nv=model.nv, nb=model.nb, status=status)
    where = f" at knot {knot}" if knot is not None else ""
    raise ValueError(f"{what}({model.name}){where}: {msg}")


def as_vector(x) -> np.ndarray:
    """A float64 array view of x, converting only when needed (kept cheap: it is on every call's path)."""
    if type(x) is np.ndarray and x.dtype == np.float64:
        return x
    return np.asarray(x, dtype=np.float64)


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


# Read-only, as numba types a global array a kernel uses: "no wrenches" passed from Python and the one a kernel
# takes from this module then have one type, and the helpers that take it compile once.
NO_FEXT = _read_only(np.zeros((0, 6)))
_NO_FEXT_BATCH = _read_only(np.zeros((1, 0, 6)))


def as_fext(fext, model, what: str) -> np.ndarray:
    """Per-body wrenches for one state, ``(nb, 6)``; an empty array stands for none."""
    if fext is None:
        return NO_FEXT
    fe = as_vector(fext)
    if fe.ndim != 2:
        raise ValueError(f"{what}({model.name}): fext must have shape ({model.nb}, 6)")
    return fe


def as_fext_batch(fext, model, what: str) -> np.ndarray:
    """Per-knot, per-body wrenches ``(N, nb, 6)``; an empty array stands for none."""
    if fext is None:
        return _NO_FEXT_BATCH
    fe = np.asarray(fext, dtype=np.float64)
    if fe.ndim != 3:
        raise ValueError(f"{what}({model.name}): for a trajectory, fext must have shape (N, {model.nb}, 6)")
    return fe


def result_arrays(out, cls, shapes: tuple[tuple[int, ...], ...], what: str) -> tuple[np.ndarray, ...]:
    """The output arrays of a result dataclass ``cls`` with fields of the given shapes: new ones if ``out`` is None,
    else the fields of ``out`` (checked), to be overwritten. Reusing ``out`` over a trajectory saves the first
    touch of fresh memory, which costs more than some kernels."""
    if out is None:
        return tuple(np.empty(shape) for shape in shapes)
    if not isinstance(out, cls):
        raise TypeError(f"{what}: out must be a {cls.__name__}, got {type(out).__name__}")
    arrays = tuple(getattr(out, f.name) for f in fields(cls))
    for f, x, shape in zip(fields(cls), arrays, shapes):
        if not (isinstance(x, np.ndarray) and x.shape == shape and x.dtype == np.float64 and x.flags.c_contiguous
                and x.flags.writeable):
            raise ValueError(f"{what}: out.{f.name} must be a writeable C-contiguous float64 array of shape {shape}")
    return arrays


def base_pose(x: State) -> np.ndarray:
    return IDENTITY4 if x.H is None else x.H


def base_poses(X: Trajectory) -> np.ndarray:
    """Per-knot base poses; for a fixed base a single identity that batched kernels read at index 0."""
    return IDENTITY4_STACK if X.H is None else X.H


def check_type(x, what: str) -> None:
    if not isinstance(x, (State, Trajectory)):
        raise TypeError(f"{what}: expected a State or a Trajectory, got {type(x).__name__}")
