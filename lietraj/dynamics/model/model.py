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

Mimic joints (URDF ``<mimic>``, Pinocchio's ``JointModelMimic``). A model may declare 1-DoF joints that follow
another: ``RobotModel.mimic`` holds ``Mimic(joint, primary, multiplier, offset)``, the joint's position being
``multiplier * s[primary] + offset``; such a joint adds no coordinate, so ``n``, ``nv``, ``s`` and the
per-coordinate arrays (limits, armature) count the independent joints only, in body order (Pinocchio's
``mimic=True`` layout). The bodies, joints and frames are those of the whole tree, and ``model.expanded`` is the same
tree with every joint independent, whose ``packed`` arrays the kernels read. A model with mimic joints (a
``MimicRobotModel``) has none of its own: reading them raises ``MimicNotSupported``, so that no kernel reads one of
its states with the full tree's layout. The map between the two is affine, ``s_full = G_s s + o``, ``v_full = G v``
(``MimicMap``; ``G`` keeps the base block), so

    tau = G^T ID_full(G_s s + o, G v, G a),   M = G^T M_full G,   a = M^{-1} (tau - G^T h_full),

and every first- or second-order derivative is the full tree's contracted by ``G`` on each tangent index (the
configuration tangent maps by ``G`` too: the base block is the identity). The algorithms that support mimic joints
(RNEA, CRBA, ABA by the reduced system, M^{-1}, kinematics, centre of mass, the first- and second-order RNEA and ABA
derivatives, linearization) run their full-tree kernels on ``expanded`` between these maps; hybrid and extended
inverse dynamics and every contact function refuse a model with mimic joints, naming them (``MimicNotSupported``).
Models without mimic joints pay one attribute test per call.

Why not inside the kernels: folding the offset into the joint placement and the multiplier into the axis makes a
mimic joint a body sharing its primary's dof, but a shared dof breaks what the kernels rely on: one body per dof
(``tau[iv] = S^T f`` overwrites, ABA's articulated inertias and the LTDL sparsity of the contact dynamics assume a
tree of dofs, CRBA's branch sparsity is lost when the primary sits on another branch, as PR2's gripper fingers do).
Every kernel would need a second code path, for robots whose mimic joints are a few fingers; the reduced map costs
one small dense product per call, on those robots only.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, fields, replace
from typing import Callable, Mapping, NamedTuple

import numpy as np

from lietraj.dynamics.lie.state import State, StateSpace, Trajectory

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


def tree_fields(bodies) -> dict:
    """The per-body arguments of ``RobotModel`` (names, parents, joint types and placements, axes, inertias) from the
    bodies a loader collected, in order: objects with ``name``, ``joint``, ``parent``, ``jtype``, ``placement``
    (4, 4), ``axis`` (3,), ``mass``, ``com`` (3,) and ``inertia`` (3, 3)."""
    nb = len(bodies)
    return dict(
        body_names=tuple(b.name for b in bodies),
        joint_names=tuple(b.joint for b in bodies),
        parent=np.array([b.parent for b in bodies], dtype=np.int64),
        joint_type=np.array([b.jtype for b in bodies], dtype=np.int64),
        joint_placement=np.array([b.placement for b in bodies], dtype=float).reshape(nb, 4, 4),
        axis=np.array([b.axis for b in bodies], dtype=float).reshape(nb, 3),
        mass=np.array([b.mass for b in bodies], dtype=float),
        com=np.array([b.com for b in bodies], dtype=float).reshape(nb, 3),
        inertia=np.array([b.inertia for b in bodies], dtype=float).reshape(nb, 3, 3),
    )


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


class Mimic(NamedTuple):
    """A mimic joint: ``joint`` (a 1-DoF joint of the tree) is at ``multiplier * s[primary] + offset`` and moves at
    ``multiplier`` times its primary's velocity; it has no coordinate of its own."""

    joint: str
    primary: str
    multiplier: float = 1.0
    offset: float = 0.0


class MimicMap(NamedTuple):
    """The affine map from a mimic model's coordinates to those of its full tree (``model.expanded``), read-only:
    ``s_full = s[source] * multiplier + offset`` and ``v_full = G v``."""

    source: np.ndarray
    """(n_full,) int64: index in ``s`` of each full-tree joint's independent joint (itself, or its primary)."""
    multiplier: np.ndarray
    """(n_full,): 1 for an independent joint."""
    offset: np.ndarray
    """(n_full,): 0 for an independent joint."""
    G: np.ndarray
    """(nv_full, nv): ``v_full = G v``, the identity on the base block; ``G^T`` maps full-tree forces to ``tau``."""


class MimicNotSupported(ValueError):
    """An algorithm asked of a model with mimic joints that it does not support; the message names the algorithm
    and the mimic joints, and says how to load the model without them."""


def refuse_mimic(model: "RobotModel", what: str) -> None:
    """Raise ``MimicNotSupported`` if ``model`` has mimic joints: for the algorithms that do not support them."""
    if model.mimic:
        raise MimicNotSupported(f"{what}({model.name}): not supported for a model with mimic joints: "
                                f"{_followers(model)}; load it with mimic=False to treat them as independent joints")


def _followers(model: "RobotModel") -> str:
    return ", ".join(f"{m.joint} (follows {m.primary})" for m in model.mimic)


@dataclass(frozen=True, eq=False)
class Frame:
    """A named frame rigidly attached to a body: ``(R, p)`` is its pose in the body frame.

    ``kind`` is ``"body"`` (a URDF link, an MJCF body), ``"joint"`` (a moving joint's frame), ``"fixed_joint"``
    (a fixed joint merged into its parent body) or ``"site"`` (an MJCF site). ``body`` is -1 for frames fixed in the
    world.
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

    ``mimic``: the joints that follow another (module docstring); empty, the default, when every joint is
    independent. With mimic joints, the joint coordinates (``n``, ``s``, limits, ``continuous``, ``armature``) are
    those of the independent joints only, ``actuated_joint_names`` names them, and ``expanded`` is the full tree.
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
    mimic: tuple[Mimic, ...] = ()
    nb: int = field(init=False)
    n: int = field(init=False)
    nv: int = field(init=False)
    mi: np.ndarray = field(init=False, repr=False)
    mf: np.ndarray = field(init=False, repr=False)
    packed: tuple = field(init=False, repr=False)
    dof_tables: tuple = field(init=False, repr=False)
    expanded: "RobotModel" = field(init=False, repr=False)
    """The full tree, every joint independent: the model itself when it has no mimic joint."""
    mimic_map: MimicMap | None = field(init=False, repr=False)
    """The map from this model's coordinates to ``expanded``'s; None without mimic joints."""
    _coordinates: tuple = field(init=False, repr=False)
    _derived: dict = field(init=False, repr=False, default_factory=dict)

    def __new__(cls, *args, **kwargs):
        # A model with mimic joints is a MimicRobotModel: the refusal of its packed arrays needs a __getattr__, which
        # on RobotModel itself would slow every attribute read of every model (~0.25 us a call, measured).
        if cls is RobotModel or cls is MimicRobotModel:
            mimic = kwargs["mimic"] if "mimic" in kwargs else args[_MIMIC_ARG] if len(args) > _MIMIC_ARG else ()
            cls = MimicRobotModel if len(mimic) else RobotModel
        return super().__new__(cls)

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
        mimic = tuple(Mimic(str(j), str(p), float(mu), float(o)) for j, p, mu, o in (Mimic(*m) for m in self.mimic))
        object.__setattr__(self, "mimic", mimic)
        coordinates = _independent_joints(self.name, self.joint_names, jtype, mimic)
        n = len(coordinates)
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
                why = " (mimic joints have no coordinate)" if mimic and label != "gravity" else ""
                raise ValueError(f"model {self.name!r}: {label} has shape {np.shape(arr)}, expected {shape}{why}")
        if len(self.joint_names) != nb:
            raise ValueError("one joint name per body is required (the free joint included)")
        object.__setattr__(self, "_coordinates", coordinates)
        object.__setattr__(self, "nb", nb)
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "nv", nv)
        if mimic:  # no packed arrays of its own: ``__getattr__`` refuses a kernel caller that does not know mimic joints
            full, mimic_map = _expand(self, coordinates)
            object.__setattr__(self, "expanded", full)
            object.__setattr__(self, "mimic_map", mimic_map)
            return
        object.__setattr__(self, "expanded", self)
        object.__setattr__(self, "mimic_map", None)

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
        """Names of the 1-DoF joints that have a coordinate (all but the mimic joints), in the order of ``s``."""
        return self._coordinates

    def expand_state(self, x: State | Trajectory) -> State | Trajectory:
        """The state (or trajectory) of ``expanded``, the full tree, for a state of this model: each mimic joint at
        ``multiplier * s[primary] + offset``, moving at ``multiplier`` times its primary's velocity. ``x`` itself
        for a model without mimic joints."""
        if self.mimic_map is None:
            return x
        m = self.mimic_map
        s = np.asarray(x.s)[..., m.source] * m.multiplier + m.offset
        return type(x)(x.H, s, np.asarray(x.v) @ m.G.T)

    def joint_index(self, name: str) -> int:
        """Index in ``s`` of the 1-DoF joint called ``name``."""
        try:
            return self.actuated_joint_names.index(name)
        except ValueError:
            close = [j for j in self.actuated_joint_names if j.startswith(f"{name}/")] or difflib.get_close_matches(
                name, self.actuated_joint_names, n=3)  # an MJCF ball joint's angles are "<joint>/z", "/y", "/x"
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise KeyError(f"model {self.name!r} has no joint {name!r}{hint}") from None

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
        mimic = ""
        if self.mimic:
            rules = [f"{m.joint} = {m.multiplier:g}*{m.primary}"
                     + (f" {'+' if m.offset >= 0 else '-'} {abs(m.offset):g}" if m.offset else "") for m in self.mimic]
            if len(rules) > 4:  # PR2's grippers have ten: the model's mimic field lists them all
                rules = rules[:3] + [f"... {len(rules) - 3} more"]
            mimic = ", mimic=[" + ", ".join(rules) + "]"
        return (f"RobotModel({self.name!r}, {base}, n={self.n}, nv={self.nv}, bodies={self.nb}, "
                f"frames={len(self.frames)}{mimic})")


_MIMIC_ARG = [f.name for f in fields(RobotModel) if f.init].index("mimic")
_PACKED = frozenset({"mi", "mf", "packed", "dof_tables"})


class MimicRobotModel(RobotModel):
    """The class of a ``RobotModel`` with mimic joints, which ``RobotModel(..., mimic=...)`` makes: it has no packed
    kernel arrays of its own (module docstring)."""

    def __getattr__(self, name: str):
        # Only reached for an attribute the instance lacks: the packed arrays of a model with mimic joints. A kernel
        # given its full tree's arrays with a state of this model would read the joint positions out of bounds.
        if name in _PACKED:
            raise MimicNotSupported(f"{self.name}: model.{name}: a model with mimic joints ({_followers(self)}) has no "
                                    "packed arrays of its own, and the code reading them does not support mimic joints "
                                    "(the kernels take model.expanded's, at model.expand_state(x)); load the model with "
                                    "mimic=False to treat them as independent joints")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def _from_fields(cls: type, arguments: dict) -> RobotModel:
    return cls(**arguments)


def _independent_joints(name: str, joint_names, jtype: np.ndarray, mimic: tuple[Mimic, ...]) -> tuple[str, ...]:
    """The names of the 1-DoF joints that have a coordinate, in body order, after checking ``mimic``."""
    moving = [j for j, t in zip(joint_names, jtype) if t != JOINT_FREE]
    followers = {m.joint for m in mimic}
    if len(followers) != len(mimic):
        raise ValueError(f"model {name!r}: a joint is declared mimic twice")
    for m in mimic:
        for role, j in (("the joint", m.joint), ("its primary", m.primary)):
            if j not in moving:
                raise ValueError(f"model {name!r}: mimic joint {m.joint!r}: {role} {j!r} is not a 1-DoF joint of the "
                                 "model")
        if m.primary in followers:
            raise ValueError(f"model {name!r}: mimic joint {m.joint!r} follows {m.primary!r}, itself a mimic joint "
                             "(compose the two: multiplier m1*m2, offset m1*o2 + o1)")
        if not np.isfinite(m.multiplier) or not np.isfinite(m.offset):
            raise ValueError(f"model {name!r}: mimic joint {m.joint!r}: multiplier and offset must be finite")
    return tuple(j for j in moving if j not in followers)


def _expand(model: RobotModel, coordinates: tuple[str, ...]) -> tuple[RobotModel, MimicMap]:
    """The full tree of a model with mimic joints (each joint independent) and the map to it."""
    index = {j: k for k, j in enumerate(coordinates)}
    rule = {m.joint: m for m in model.mimic}
    moving = [j for j, t in zip(model.joint_names, model.joint_type) if t != JOINT_FREE]
    n_full, base = len(moving), 6 if model.floating_base else 0
    source = np.empty(n_full, dtype=np.int64)
    multiplier, offset = np.ones(n_full), np.zeros(n_full)
    for k, j in enumerate(moving):
        m = rule.get(j)
        source[k] = index[j if m is None else m.primary]
        if m is not None:
            multiplier[k], offset[k] = m.multiplier, m.offset
    G = np.zeros((base + n_full, model.nv))
    G[:base, :base] = np.eye(base)
    G[base + np.arange(n_full), base + source] = multiplier
    lower, upper = np.empty(n_full), np.empty(n_full)
    for k in range(n_full):  # the range a mimic joint sweeps as its primary sweeps its own
        lo, hi = model.lower_limit[source[k]], model.upper_limit[source[k]]
        ends = (offset[k], offset[k]) if multiplier[k] == 0 else (multiplier[k] * lo + offset[k], multiplier[k] * hi + offset[k])
        lower[k], upper[k] = min(ends), max(ends)
    follower = np.array([j in rule for j in moving], dtype=bool)
    armature = np.zeros(base + n_full)
    armature[:base] = model.armature[:base]
    armature[base:] = np.where(follower, 0.0, model.armature[base + source])  # a mimic joint has no rotor of its own
    full = RobotModel(
        name=model.name, floating_base=model.floating_base, body_names=model.body_names,
        joint_names=model.joint_names, parent=model.parent, joint_type=model.joint_type,
        joint_placement=model.joint_placement, axis=model.axis, mass=model.mass, com=model.com,
        inertia=model.inertia, armature=armature, lower_limit=lower, upper_limit=upper,
        velocity_limit=np.abs(multiplier) * model.velocity_limit[source],
        effort_limit=np.where(follower, np.inf, model.effort_limit[source]),
        continuous=model.continuous[source], frames=model.frames, visuals=model.visuals,
        reference_postures={k: Posture(p.H, p.s[..., source] * multiplier + offset)
                            for k, p in model.reference_postures.items()},
        gravity=model.gravity, source=model.source)
    return full, MimicMap(*(_read_only(a) for a in (source, multiplier, offset, G)))
