"""Input checks of the dynamics: at the boundary of every public function (Python), and inside the kernels.

Two layers, both here. The public functions check the types and shapes of their arguments in Python before they
call a kernel (``checked_state``, ``checked_vector``, ``checked_wrenches``...): numba types a kernel for the
arguments it gets, so ``a`` of shape ``(1, nv)``, ``None`` or a string would otherwise fail deep inside numba with
a ``TypingError``, and a state of another robot would be read with the wrong layout. On the common path these
checks only compare types and shapes (a few hundred nanoseconds); anything else gets a ``TypeError`` (not an array
of numbers, not a State) or a ``ValueError`` (a wrong shape) naming the function, the argument, the expected shape
and what was given.

The values are checked inside the compiled call: numba does no bounds checking, and a NaN state or a rotation
that is not orthonormal would silently give wrong dynamics. Each kernel checks its inputs first (a few tens of
nanoseconds) and returns a status; the Python wrapper turns a non-zero status into a ``ValueError`` that says what
is wrong (``raise_for_status``, which then finds the argument holding a NaN). Functions that call other public
functions check the values of their own arguments first (``require_finite``), so that a message names the
function called and its argument.
"""

import functools
import math
from dataclasses import fields

import numpy as np

from lietraj._jit import helper
from lietraj.dynamics.lie import se3
from lietraj.dynamics.lie.state import State, Trajectory
from lietraj.dynamics.model.model import MimicRobotModel, RobotModel

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
def first_failure(result):
    """The first row ``(status, knot)`` of ``result`` ((parts, 2) int64, the parts of a split kernel's knots in
    order) whose status is not OK, else ``(OK, 0)``."""
    for i in range(result.shape[0]):
        if result[i, 0] != OK:
            return result[i, 0], result[i, 1]
    return OK, 0


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


# ---------------------------------------------------------------- at the boundary of the public functions

F64 = np.dtype(np.float64)
_ND = np.ndarray
_POSE_SHAPE = (4, 4)

# The arrays the public functions take: name -> (its noun in the messages, as in "the acceleration must have shape
# (nv,)", which the kernels' messages used too; what its entries are). "{...}" fields are filled in by _meaning.
_ARRAYS = {
    "x.s": ("the joint positions s", "n = {n} entries, one per joint of {robot}"),
    "x.v": ("the velocity v", "nv = {nv} entries{v_layout}"),
    "x.H": ("the base pose H", "the 4x4 homogeneous transform of the floating base of {robot}"),
    "a": ("the acceleration", "nv = {nv} entries, one per generalized velocity"),
    "a_known": ("the acceleration", "nv = {nv} entries, one per generalized velocity, read where known is True"),
    "tau": ("the {torques}", "nv = {nv} entries{tau_layout}"),
    "tau_known": ("the {torques}", "nv = {nv} entries{tau_layout}, read where known is False"),
    "u": ("the joint torques u", "n = {n} entries, one per joint{unactuated}"),
    "mu": ("the covector mu", "nv = {nv} multipliers, one per generalized acceleration"),
    "lam": ("the multipliers lam", "nv = {nv} multipliers, one per generalized acceleration"),
    "known": ("the mask known", "nv = {nv} flags, one per generalized velocity, True where the acceleration is given"),
    "fext": ("the external wrenches fext", "one wrench [f; tau] per body, nb = {nb}"),
    "target": ("the target pose", "a 4x4 homogeneous transform in the world frame"),
}


def _meaning(model: RobotModel, name: str) -> tuple[str, str]:
    noun, meaning = _ARRAYS[name]
    floating = model.floating_base
    fields = dict(robot=model.name, n=model.n, nv=model.nv, nb=model.nb,
                  torques="generalized torques" if floating else "joint torques",
                  v_layout=": the base twist nu, then the joint velocities" if floating else f", one per joint of {model.name}",
                  tau_layout=": the base wrench, then the joint torques" if floating else ", one per joint",
                  unactuated=", the floating base being unactuated" if floating else "")
    return noun.format(**fields), meaning.format(**fields)


def _prefix(model: RobotModel, what: str, knot: int | None = None) -> str:
    return f"{what}({model.name})" + ("" if knot is None else f" at knot {knot}")


def _given(value) -> str:
    """How a wrong argument is described: an array by its shape (and dtype if not numbers), else by its type."""
    if value is None:
        return "None"
    if isinstance(value, (str, bytes)):
        text = repr(value)
        return f"the {type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"
    if isinstance(value, np.ndarray):
        kind = "" if value.dtype.kind in "biuf" else f" and dtype {value.dtype}"
        return f"shape {value.shape}{kind}"
    try:
        shape = np.shape(value)
    except ValueError:  # a ragged sequence
        return f"a ragged {type(value).__name__}"
    return f"a {type(value).__name__}" + (f" of shape {shape}" if shape else "")


def _shape_text(shape: tuple) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _numbers(value) -> np.ndarray | None:
    """``value`` as a float64 array, or None if it is not an array of real numbers (None, a string, objects)."""
    if value is None or isinstance(value, (str, bytes)):
        return None
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):  # a ragged sequence
        return None
    if array.dtype.kind not in "biuf":
        return None
    return array.astype(np.float64, copy=False)


def _array(value, shape: tuple, model: RobotModel, what: str, name: str, more: str = "") -> np.ndarray:
    """``value`` as a float64 array of ``shape`` (an entry "N" stands for any length), else a TypeError (not an array
    of numbers) or a ValueError (another shape), naming the argument and what was expected (``more`` ends the
    explanation: the knots of a trajectory, a hint)."""
    noun, meaning = _meaning(model, name)
    expected = _shape_text(shape)
    array = _numbers(value)
    if array is None:
        raise TypeError(f"{_prefix(model, what)}: {name} must be an array of numbers of shape {expected}, got "
                        f"{_given(value)} ({noun}: {meaning}{more})")
    if len(array.shape) != len(shape) or any(e != "N" and e != g for e, g in zip(shape, array.shape)):
        raise ValueError(f"{_prefix(model, what)}: {name} must have shape {expected}, got {_given(value)} ({noun} must "
                         f"have shape {expected}: {meaning}{more})")
    return array


def _knots(N: int | None, of: str = "the trajectory x") -> str:
    return f", at each of the N = {N} knots of {of}: the same number of knots" if N is not None else ""


def check_model(model, what: str) -> None:
    if not isinstance(model, RobotModel):
        raise TypeError(f"{what}: model must be a RobotModel (from load_robot or load_urdf), got {type(model).__name__}")


def checked_state(model: RobotModel, x, what: str) -> State | Trajectory:
    """``x`` if it is a State, or a Trajectory, of ``model``'s layout with float64 arrays; a copy with converted
    arrays if they only need converting; else a TypeError (not a State or a Trajectory, not numbers) or a ValueError
    (the layout of another robot, a wrong shape) naming ``what``, the field, the expected shape and what was given.

    Only types and shapes are compared here (the common path costs a few hundred nanoseconds); the values (NaN, a
    rigid base pose) are checked by the kernels, or by ``require_finite``."""
    t = type(x)
    if t is State and (type(model) is RobotModel or type(model) is MimicRobotModel):
        s, v, H = x.s, x.v, x.H
        if (type(s) is _ND and type(v) is _ND and s.dtype == F64 and v.dtype == F64 and s.ndim == 1 and v.ndim == 1
                and len(s) == model.n and len(v) == model.nv
                and (type(H) is _ND and H.dtype == F64 and H.shape == _POSE_SHAPE if model.floating_base else H is None)):
            return x
    elif t is Trajectory and (type(model) is RobotModel or type(model) is MimicRobotModel):
        s, v, H = x.s, x.v, x.H
        if type(s) is _ND and type(v) is _ND and s.dtype == F64 and v.dtype == F64 and s.ndim == 2:
            N = s.shape[0]
            if (s.shape[1] == model.n and v.shape == (N, model.nv)
                    and (type(H) is _ND and H.dtype == F64 and H.shape == (N, 4, 4) if model.floating_base
                         else H is None)):
                return x
    return _converted_state(model, x, what)


def _converted_state(model: RobotModel, x, what: str) -> State | Trajectory:
    """checked_state's slow path: the error, or ``x`` with its arrays converted to float64."""
    check_model(model, what)
    prefix = _prefix(model, what)
    if not isinstance(x, (State, Trajectory)):
        raise TypeError(f"{prefix}: expected a State or a Trajectory of {model.name} for x, got {type(x).__name__}")
    batch = isinstance(x, Trajectory)
    lead = ("N",) if batch else ()
    if model.floating_base and x.H is None:
        raise ValueError(f"{prefix}: x.H is None (a fixed-base state) but {model.name} has a floating base: x.H must "
                         f"be its base pose, shape {_shape_text(lead + (4, 4))} (is x a state of another robot?)")
    if not model.floating_base and x.H is not None:
        raise ValueError(f"{prefix}: x.H must be None: {model.name} has a fixed base, but x has a base pose (is x a "
                         "state of another robot?)")
    s = _array(x.s, lead + (model.n,), model, what, "x.s", "; is x a state of another robot?")
    N = s.shape[0] if batch else None
    lead = (N,) if batch else ()
    of = _knots(N, "x.s")
    v = _array(x.v, lead + (model.nv,), model, what, "x.v", of)
    H = None if x.H is None else _array(x.H, lead + (4, 4), model, what, "x.H", of)
    return (Trajectory if batch else State)(H, s, v)


def checked_vector(value, size: int, N: int | None, model: RobotModel, what: str, name: str) -> np.ndarray:
    """The argument ``name`` of ``what``, one vector of ``size`` entries (``N`` None) or one per knot of a trajectory
    of ``N`` knots, as a float64 array of shape ``(size,)`` or ``(N, size)`` (converted only when needed), else the
    TypeError or ValueError that says what was expected. ``name`` is a key of the table of messages above."""
    if type(value) is _ND and value.dtype == F64 and value.shape == ((size,) if N is None else (N, size)):
        return value
    return _array(value, (size,) if N is None else (N, size), model, what, name, _knots(N))


def checked_mask(known, model: RobotModel, what: str) -> np.ndarray:
    """The boolean mask ``known`` over the nv generalized velocities."""
    if type(known) is _ND and known.dtype == np.bool_ and known.shape == (model.nv,):
        return known
    mask = None if known is None or isinstance(known, (str, bytes)) else np.asarray(known)
    noun, meaning = _meaning(model, "known")
    if mask is None or mask.dtype != np.bool_:
        numbers = mask is not None and mask.dtype.kind in "iuf"  # a value error: numbers where flags were expected
        raise (ValueError if numbers else TypeError)(
            f"{_prefix(model, what)}: known must be a boolean mask of shape ({model.nv},), got {_given(known)}"
            + (f" of dtype {mask.dtype}" if numbers else "") + f" ({noun}: {meaning})")
    if mask.shape != (model.nv,):
        raise ValueError(f"{_prefix(model, what)}: known must have shape ({model.nv},), got shape {mask.shape} ({noun}: "
                         f"{meaning}; the same mask for every knot of a trajectory)")
    return mask


def checked_pose(value, model: RobotModel, what: str, name: str = "target") -> np.ndarray:
    """A rigid transform (4, 4): a rotation block orthonormal with det > 0, the last row [0, 0, 0, 1], finite."""
    pose = _array(value, (4, 4), model, what, name)
    try:
        return se3.check_transform(pose, name)
    except ValueError as e:
        raise ValueError(f"{_prefix(model, what)}: {e}") from None


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


# Read-only, as numba types a global array a kernel uses: "no wrenches" passed from Python and the one a kernel
# takes from this module then have one type, and the helpers that take it compile once.
NO_FEXT = _read_only(np.zeros((0, 6)))
NO_FEXT_BATCH = _read_only(np.zeros((1, 0, 6)))


def checked_wrenches(fext, N: int | None, model: RobotModel, what: str) -> np.ndarray | None:
    """Optional per-body wrenches: None, or a float64 array ``(nb, 6)`` (``N`` None) or ``(N, nb, 6)`` for a
    trajectory of N knots."""
    if fext is None:
        return None
    shape = (model.nb, 6) if N is None else (N, model.nb, 6)
    if type(fext) is _ND and fext.dtype == F64 and fext.shape == shape:
        return fext
    return _array(fext, shape, model, what, "fext", _knots(N))


def kernel_wrenches(fext: np.ndarray | None, batch: bool) -> np.ndarray:
    """Checked wrenches in the kernels' form: an empty array stands for none."""
    if fext is None:
        return NO_FEXT_BATCH if batch else NO_FEXT
    return fext


def checked_real(value, model: RobotModel, what: str, name: str, low: float = 0.0, high: float = math.inf) -> float:
    """A real number in ``[low, high]``, finite: ``damping``, ``restitution``."""
    if type(value) is _ND and value.ndim == 0:  # a 0-d array of a number
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{_prefix(model, what)}: {name} must be a real number, got {_given(value)}")
    if not (math.isfinite(value) and low <= value <= high):
        bounds = f"in [{low:g}, {high:g}]" if math.isfinite(high) else f">= {low:g}"
        raise ValueError(f"{_prefix(model, what)}: {name} must be finite and {bounds}, got {value!r}")
    return float(value)


def _first_non_finite(arrays, knot: int | None) -> tuple[int | None, str] | None:
    """The first non-finite entry of the named ``arrays`` (at ``knot`` if given, the arrays then having one row per
    knot; else anywhere, a trajectory's arrays being searched knot by knot): ``(knot, "name[index] = value")``."""
    found = None
    for name, array, batch in arrays:
        if array is None or np.size(array) == 0:
            continue
        array = np.asarray(array)
        part = array[knot] if knot is not None and batch else array
        bad = np.argwhere(~np.isfinite(part))
        if len(bad) == 0:
            continue
        index = tuple(int(i) for i in bad[0])
        if knot is not None and batch:
            index = (knot,) + index
        at = index[0] if batch else None
        if found is None or (at is not None and at < found[0]):
            text = f"{name}[{', '.join(map(str, index))}] = {array[index]}"
            found = (at, text)
        if knot is not None or not batch:
            break
    return found


def _named(x, inputs: dict) -> list[tuple[str, np.ndarray, bool]]:
    batch = type(x) is Trajectory
    arrays = [] if x is None else [("x.s", x.s, batch), ("x.v", x.v, batch), ("x.H", x.H, batch)]
    return arrays + [(name, array, batch) for name, array in inputs.items()]


def all_finite(a: np.ndarray) -> bool:
    """Whether ``a`` holds no NaN and no infinity. For float entries their squared norm (a vector) or their sum is
    tested first, finite exactly when the entries are unless it overflows (entries near 1e154 or 1e308: numpy warns
    of the overflow, and the exact test clears them): half the time of ``np.isfinite(a).all()`` on the few entries
    of one state, a third on a run of knots."""
    if a.dtype == F64 and math.isfinite(a @ a if a.ndim == 1 else np.add.reduce(a, axis=None)):
        return True
    return bool(np.isfinite(a).all())


def require_finite(model: RobotModel, what: str, x=None, **inputs) -> None:
    """A ValueError naming the first argument (state field or input) holding a NaN or an infinity, and its knot.
    For the functions that call other public functions: their kernels would name themselves, and their own
    arguments, in the message. Inputs of a trajectory have one row per knot, as ``x``'s arrays."""
    arrays = _named(x, inputs)
    if all(a is None or all_finite(a) for _, a, _ in arrays):
        return
    knot, text = _first_non_finite(arrays, None)
    raise ValueError(f"{_prefix(model, what, knot)}: the state or an input contains NaN or inf: {text}")


def raise_for_status(status: int, model, what: str, knot: int | None = None, x=None, **inputs) -> None:
    """Raise the ValueError that a kernel status stands for. For NOT_FINITE, the state ``x`` and the named
    ``inputs`` the kernel checked (in its order; one row per knot for a trajectory) are searched for the argument
    holding the NaN or the infinity."""
    if status == OK:
        return
    msg = _MESSAGES.get(status, "invalid input (status {status})").format(
        n=model.n, nv=model.nv, nb=model.nb, status=status)
    if status == NOT_FINITE:
        msg += non_finite_entry(knot, x, **inputs)
    raise ValueError(f"{_prefix(model, what, knot)}: {msg}")


def non_finite_entry(knot: int | None, x=None, **inputs) -> str:
    """``": name[index] = value"`` for the first NaN or infinity among the state ``x`` and the named ``inputs``
    at ``knot`` (as ``raise_for_status`` searches them), or ``""`` if there is none."""
    found = _first_non_finite(_named(x, inputs), knot)
    return "" if found is None else f": {found[1]}"


def result_arrays(out, cls, shapes: tuple[tuple[int, ...], ...], what: str) -> tuple[np.ndarray, ...]:
    """The output arrays of a result dataclass ``cls`` whose first fields have the given shapes: new ones if ``out``
    is None, else those fields of ``out`` (checked), to be overwritten. Reusing ``out`` over a trajectory saves the first
    touch of fresh memory, which costs more than some kernels."""
    if out is None:
        return tuple(np.empty(shape) for shape in shapes)
    if not isinstance(out, cls):
        raise TypeError(f"{what}: out must be a {cls.__name__}, got {type(out).__name__}")
    names = _field_names(cls)[:len(shapes)]
    arrays = tuple(getattr(out, name) for name in names)
    for name, x, shape in zip(names, arrays, shapes):
        if not (isinstance(x, _ND) and x.shape == shape and x.dtype == F64 and _writeable_c(x.flags)):
            raise ValueError(f"{what}: out.{name} must be a writeable C-contiguous float64 array of shape {shape}")
    return arrays


def _writeable_c(flags) -> bool:
    """Whether an array's ``flags`` (a new object at every access of ``.flags``: read once) say writeable and
    C-contiguous."""
    return flags.c_contiguous and flags.writeable


@functools.cache
def _field_names(cls) -> tuple[str, ...]:
    """The field names of a result dataclass (``dataclasses.fields`` builds them anew on every call)."""
    return tuple(f.name for f in fields(cls))


def base_pose(x: State) -> np.ndarray:
    return IDENTITY4 if x.H is None else x.H


def base_poses(X: Trajectory) -> np.ndarray:
    """Per-knot base poses; for a fixed base a single identity that batched kernels read at index 0."""
    return IDENTITY4_STACK if X.H is None else X.H

