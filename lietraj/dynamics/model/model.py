"""Robot model: a kinematic tree of rigid bodies as plain data, plus its packed form for the kernels.

The model is read-only data in the spirit of spatial_v2's model record: a parent array, one joint per body,
constant joint placements and body inertias. Bodies are numbered in topological order (``parent[i] < i``),
depth first, which is Pinocchio's order for the same URDF, so joint ``k`` of a lietraj model is joint ``k``
of the Pinocchio model of the same name.

Conventions (README): spatial vectors are linear first; a floating base is body 0 with a free joint whose
velocity is the body twist ``nu`` (Pinocchio's free-flyer ``v``); the generalized velocity is
``v = [nu; sdot]`` (``nv = 6 + n``) or ``v = sdot`` (``nv = n``) for a fixed base.

The kernels read the model through two C-contiguous arrays:

- ``mi`` (nb, 4) int64: ``[parent, joint_type, idx_v, idx_s]`` (``idx_s = -1`` for the free joint);
- ``mf`` (nb, 26) float64: ``[R (9, row major), p (3), axis (3), mass, h = mass*com (3),
  I_o (6: xx, yy, zz, xy, xz, yz, rotational inertia about the body origin), armature]``,
  where ``(R, p)`` is the joint placement: the pose of the joint frame at zero joint position in the parent
  body frame (in the world for a root body).

Every kernel takes them, with the gravity, as its first argument: ``model.packed``, the fields of a ``ModelArrays``
in a plain tuple; the kernels that walk the tree of dofs also take ``model.dof_tables`` (``DofTables``). All of it is
read-only: the work arrays of the algorithms live in a ``Workspace`` (``workspace.py``), so that threads can share
one model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Callable, Mapping, NamedTuple

import numpy as np

from lietraj.dynamics.lie.state import State, StateSpace

JOINT_FREE = 0
JOINT_REVOLUTE = 1
JOINT_PRISMATIC = 2
JOINT_TYPE_NAMES = {JOINT_FREE: "free", JOINT_REVOLUTE: "revolute", JOINT_PRISMATIC: "prismatic"}

# Column offsets of the packed float array ``mf``.
MF_R, MF_P, MF_AXIS, MF_MASS, MF_H, MF_IO, MF_ARMATURE, MF_COLS = 0, 9, 12, 15, 16, 19, 25, 26


class ModelArrays(NamedTuple):
    """The packed model every kernel reads (module docstring), all arrays read-only.

    Kernels receive it as ``model.packed``, a plain tuple in this field order, and name it first thing
    (``m = ModelArrays(*model)``): numba's dispatcher types a plain tuple in C but a named tuple in Python, which
    costs about 1.5 us per call, more than an RNEA of a quadruped. Each array in it costs about 0.1 us of dispatch
    per call: it holds only what every kernel reads.
    """

    joints: np.ndarray
    """(nb, 4) int64 ``mi``: ``[parent, joint_type, idx_v, idx_s]``."""
    bodies: np.ndarray
    """(nb, 26) float64 ``mf``: joint placement, axis, mass, first and second moments, armature."""
    gravity: np.ndarray
    """(3,) gravity in the world frame."""
    floating: bool
    """Whether body 0 is a free-floating base."""
    n: int
    """Number of 1-DoF joints (the size of ``s``)."""


class DofTables(NamedTuple):
    """The tree of dofs, read-only, for the kernels that walk it (IDSVA and what builds on it, the contact dynamics'
    sparse factorization); they receive it as ``model.dof_tables``, a plain tuple (see ``ModelArrays``)."""

    subtree_end: np.ndarray
    """(nb,) int64: one past the last dof of each body's subtree (bodies are numbered depth first)."""
    dof_parent: np.ndarray
    """(nv,) int64: parent of each dof in the tree of dofs (-1 for a root): the previous dof of the same joint,
    else the last dof of the parent body's joint; the sparsity pattern of the LTDL factorization."""


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _subtree_end(mi: np.ndarray) -> np.ndarray:
    end = mi[:, 2] + np.where(mi[:, 1] == JOINT_FREE, 6, 1)
    for i in range(mi.shape[0] - 1, 0, -1):
        p = mi[i, 0]
        if p >= 0:
            end[p] = max(end[p], end[i])
    return end.astype(np.int64)


def _dof_parent(mi: np.ndarray, nv: int) -> np.ndarray:
    dp = np.empty(nv, dtype=np.int64)
    for parent, jt, iv, _ in mi:
        if jt == JOINT_FREE:
            dp[iv:iv + 6] = np.arange(iv - 1, iv + 5)
            dp[iv] = -1
        else:
            dp[iv] = -1 if parent < 0 else mi[parent, 2] + (5 if mi[parent, 1] == JOINT_FREE else 0)
    return dp


@dataclass(frozen=True, eq=False)
class Frame:
    """A named frame rigidly attached to a body: ``(R, p)`` is its pose in the body frame.

    ``kind`` is ``"body"`` (a URDF link), ``"joint"`` (a moving joint's frame) or ``"fixed_joint"``
    (a fixed joint merged into its parent body). ``body`` is -1 for frames fixed in the world.
    """

    name: str
    body: int
    R: np.ndarray
    p: np.ndarray
    kind: str


@dataclass(frozen=True, eq=False)
class Visual:
    """Visual geometry of a body, for the viewer: a mesh or a primitive at pose ``(R, p)`` in the body frame.

    ``shape`` is ``"mesh"`` (``filename``, ``scale``), ``"box"`` (``size``: 3 edge lengths), ``"cylinder"``
    (``radius``, ``length``, along its z axis) or ``"sphere"`` (``radius``). ``rgba`` is None when the
    URDF gives no colour.
    """

    name: str
    body: int
    R: np.ndarray
    p: np.ndarray
    shape: str
    filename: str | None = None
    scale: np.ndarray | None = None
    size: np.ndarray | None = None
    radius: float | None = None
    length: float | None = None
    rgba: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Posture:
    """A named configuration: base pose ``H`` (None for a fixed base) and joint positions ``s``."""

    H: np.ndarray | None
    s: np.ndarray


@dataclass(frozen=True, eq=False)
class RobotModel:
    """A rigid-body tree with 1-DoF joints (revolute, prismatic) and an optional free-floating base.

    Per body ``i`` (``nb`` bodies, topological order): ``parent[i]`` (-1 for the world), ``joint_type[i]``,
    ``joint_placement[i]`` (4x4 pose of the joint frame at zero position in the parent body frame),
    ``axis[i]`` (unit joint axis in the joint frame), ``mass[i]``, ``com[i]`` and ``inertia[i]`` (3x3
    rotational inertia about the centre of mass), both in the body frame. Per joint coordinate ``k``
    (``n`` of them): names, limits, whether it is continuous. ``armature`` has one entry per generalized
    velocity (zero on the base) and is added to the mass-matrix diagonal as Pinocchio does.
    """

    name: str
    floating_base: bool
    body_names: tuple[str, ...]
    joint_names: tuple[str, ...]
    parent: np.ndarray
    joint_type: np.ndarray
    joint_placement: np.ndarray
    axis: np.ndarray
    mass: np.ndarray
    com: np.ndarray
    inertia: np.ndarray
    armature: np.ndarray
    lower_limit: np.ndarray
    upper_limit: np.ndarray
    velocity_limit: np.ndarray
    effort_limit: np.ndarray
    continuous: np.ndarray
    frames: tuple[Frame, ...] = ()
    visuals: tuple[Visual, ...] = ()
    reference_postures: Mapping[str, Posture] = field(default_factory=dict)
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    source: str | None = None
    nb: int = field(init=False)
    n: int = field(init=False)
    nv: int = field(init=False)
    mi: np.ndarray = field(init=False, repr=False)
    mf: np.ndarray = field(init=False, repr=False)
    packed: tuple = field(init=False, repr=False)
    dof_tables: tuple = field(init=False, repr=False)
    _derived: dict = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        nb = len(self.body_names)
        if nb == 0:
            raise ValueError(f"model {self.name!r} has no moving body")
        parent = np.asarray(self.parent, dtype=np.int64)
        jtype = np.asarray(self.joint_type, dtype=np.int64)
        if np.any(parent >= np.arange(nb)):
            raise ValueError("bodies must be in topological order (parent[i] < i)")
        n_free = int(np.sum(jtype == JOINT_FREE))
        if n_free != (1 if self.floating_base else 0) or (self.floating_base and jtype[0] != JOINT_FREE):
            raise ValueError("a floating-base model has exactly one free joint, on body 0; a fixed base has none")
        if self.floating_base and np.any(parent[1:] < 0):
            raise ValueError("a floating-base model has a single root body (body 0)")
        n = nb - n_free
        nv = n + 6 * n_free
        for label, arr, shape in (
            ("joint_placement", self.joint_placement, (nb, 4, 4)),
            ("axis", self.axis, (nb, 3)),
            ("mass", self.mass, (nb,)),
            ("com", self.com, (nb, 3)),
            ("inertia", self.inertia, (nb, 3, 3)),
            ("armature", self.armature, (nv,)),
            ("lower_limit", self.lower_limit, (n,)),
            ("upper_limit", self.upper_limit, (n,)),
            ("velocity_limit", self.velocity_limit, (n,)),
            ("effort_limit", self.effort_limit, (n,)),
            ("continuous", self.continuous, (n,)),
            ("gravity", self.gravity, (3,)),
        ):
            if np.shape(arr) != shape:
                raise ValueError(f"model {self.name!r}: {label} has shape {np.shape(arr)}, expected {shape}")
        if len(self.joint_names) != nb:
            raise ValueError("one joint name per body is required (the free joint included)")

        mi = np.zeros((nb, 4), dtype=np.int64)
        mf = np.zeros((nb, MF_COLS))
        idx_v = 6 if self.floating_base else 0
        for i in range(nb):
            mi[i, 0], mi[i, 1] = parent[i], jtype[i]
            if jtype[i] == JOINT_FREE:
                mi[i, 2], mi[i, 3] = 0, -1
            else:
                mi[i, 2], mi[i, 3] = idx_v, idx_v - 6 * n_free
                mf[i, MF_ARMATURE] = self.armature[idx_v]
                idx_v += 1
            X = np.asarray(self.joint_placement[i], dtype=float)
            mf[i, MF_R:MF_R + 9] = X[:3, :3].ravel()
            mf[i, MF_P:MF_P + 3] = X[:3, 3]
            mf[i, MF_AXIS:MF_AXIS + 3] = self.axis[i]
            m, c, Ic = float(self.mass[i]), np.asarray(self.com[i], float), np.asarray(self.inertia[i], float)
            Io = Ic + m * (c @ c * np.eye(3) - np.outer(c, c))
            mf[i, MF_MASS] = m
            mf[i, MF_H:MF_H + 3] = m * c
            mf[i, MF_IO:MF_IO + 6] = [Io[0, 0], Io[1, 1], Io[2, 2], Io[0, 1], Io[0, 2], Io[1, 2]]
        # Plain attributes, not properties: every kernel wrapper reads them on its hot path.
        object.__setattr__(self, "nb", nb)
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "nv", nv)
        object.__setattr__(self, "mi", _read_only(mi))
        object.__setattr__(self, "mf", _read_only(mf))
        arrays = ModelArrays(mi, mf, _read_only(np.array(self.gravity, dtype=np.float64)), bool(self.floating_base), n)
        object.__setattr__(self, "packed", tuple(arrays))
        object.__setattr__(self, "dof_tables", (_read_only(_subtree_end(mi)), _read_only(_dof_parent(mi, nv))))

    @property
    def state_space(self) -> StateSpace:
        """The state group of this robot: SE(3) x R^n x R^6 x R^n, or R^n x R^n for a fixed base."""
        return StateSpace(self.n, self.floating_base)

    @property
    def total_mass(self) -> float:
        return float(np.sum(self.mass))

    @property
    def actuated_joint_names(self) -> tuple[str, ...]:
        """Names of the 1-DoF joints, in the order of ``s``."""
        return self.joint_names[1:] if self.floating_base else self.joint_names

    def joint_index(self, name: str) -> int:
        """Index in ``s`` of the 1-DoF joint called ``name``."""
        try:
            return self.actuated_joint_names.index(name)
        except ValueError:
            raise KeyError(f"model {self.name!r} has no joint {name!r}") from None

    def frame_index(self, name: str) -> int:
        """Index in ``frames`` of the frame called ``name`` (body frames win over joint frames of the same name)."""
        found = [k for k, f in enumerate(self.frames) if f.name == name]
        if not found:
            raise KeyError(f"model {self.name!r} has no frame {name!r}")
        return min(found, key=lambda k: self.frames[k].kind != "body")

    def reference_state(self, name: str | None = None) -> State:
        """The state at rest in a named posture (e.g. Talos ``"half_sitting"``, from the SRDF).

        Without a name: the robot's default posture (its loader's reference posture, else the first one known),
        or the neutral state when the model has none.
        """
        if name is None:
            if not self.reference_postures:
                return self.state_space.neutral()
            name = next(iter(self.reference_postures))
        try:
            posture = self.reference_postures[name]
        except KeyError:
            known = ", ".join(self.reference_postures) or "none"
            raise KeyError(f"model {self.name!r} has no posture {name!r} (known: {known})") from None
        H = None if posture.H is None else np.array(posture.H, dtype=float)
        return State(H, np.array(posture.s, dtype=float), np.zeros(self.nv))

    def replace(self, **changes) -> "RobotModel":
        """A copy with some fields changed (e.g. ``model.replace(gravity=np.zeros(3))``); packed arrays are rebuilt."""
        return replace(self, **changes)

    def derived(self, key: str, build: Callable[["RobotModel"], object]) -> object:
        """Immutable data derived from this model by ``build`` (read-only arrays, tuples, models, or a thread-safe
        memo of such data), computed on first use and kept with the model. Two threads may both compute it; both
        get the one that is kept. Work arrays never go here but into a ``Workspace``."""
        value = self._derived.get(key)
        if value is None:
            value = self._derived.setdefault(key, build(self))
        return value

    def __reduce__(self):
        """Pickled as the arguments it was made from: unpickling runs ``__post_init__`` again, so the packed arrays
        are read-only again (numpy does not pickle the flag, and numba compiles read-only and writeable arrays
        apart) and the derived data, memos with locks among them, is rebuilt on first use."""
        return _from_fields, (type(self), {f.name: getattr(self, f.name) for f in fields(self) if f.init})

    def __repr__(self) -> str:
        base = "floating base" if self.floating_base else "fixed base"
        return f"RobotModel({self.name!r}, {base}, n={self.n}, nv={self.nv}, bodies={self.nb}, frames={len(self.frames)})"


def _from_fields(cls: type, arguments: dict) -> RobotModel:
    return cls(**arguments)
