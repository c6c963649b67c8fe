"""Build robot models in code: a builder for arbitrary trees, plus chains and random trees for tests.

Bodies are added parent first and numbered depth first on ``build()``, as a URDF-loaded model is (the
recursive M^-1 needs contiguous subtrees, and so do Pinocchio's mass-matrix and derivative routines).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from lietraj.dynamics.model.model import JOINT_FREE, JOINT_PRISMATIC, JOINT_REVOLUTE, Frame, RobotModel, tree_fields

_TYPES = {"revolute": JOINT_REVOLUTE, "prismatic": JOINT_PRISMATIC}


def _rpy(rpy) -> np.ndarray:
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def placement(xyz=(0.0, 0.0, 0.0), rpy=(0.0, 0.0, 0.0)) -> np.ndarray:
    """4x4 pose from a translation and URDF roll-pitch-yaw angles (R = Rz(y) Ry(p) Rx(r))."""
    T = np.eye(4)
    T[:3, :3] = _rpy(rpy)
    T[:3, 3] = xyz
    return T


@dataclass
class _Spec:
    name: str
    joint: str
    parent: int
    jtype: int
    placement: np.ndarray
    axis: np.ndarray
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    limits: tuple
    armature: float


@dataclass
class ModelBuilder:
    """Accumulates bodies, then ``build()`` returns a RobotModel.

    >>> b = ModelBuilder("arm")
    >>> b.add_body("link1", parent=None, axis=(0, 0, 1), mass=1.0, com=(0, 0, 0.2))
    >>> b.add_body("link2", parent="link1", joint_placement=placement((0, 0, 0.4)), axis=(0, 1, 0))
    >>> model = b.build()
    """

    name: str = "custom"
    floating_base: bool = False
    base_mass: float = 1.0
    base_com: tuple = (0.0, 0.0, 0.0)
    base_inertia: np.ndarray | None = None
    gravity: tuple = (0.0, 0.0, -9.81)
    _bodies: list[_Spec] = field(default_factory=list, init=False)
    _frames: list[Frame] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if self.floating_base:
            I = np.diag([0.01, 0.01, 0.01]) if self.base_inertia is None else np.asarray(self.base_inertia, float)
            self._bodies.append(_Spec("base", "root_joint", -1, JOINT_FREE, np.eye(4), np.zeros(3), float(self.base_mass),
                                      np.asarray(self.base_com, float), I, (), 0.0))

    def _index(self, name: str | None) -> int:
        if name is None:
            if self.floating_base:
                raise ValueError("a floating-base model has one root: give a parent body")
            return -1
        for k, b in enumerate(self._bodies):
            if b.name == name:
                return k
        raise KeyError(f"no body named {name!r} (add parents before children)")

    def add_body(self, name: str, parent: str | None, *, joint_type: str = "revolute", axis=(0.0, 0.0, 1.0),
                 joint_placement: np.ndarray | None = None, joint_name: str | None = None, mass: float = 1.0,
                 com=(0.0, 0.0, 0.0), inertia: np.ndarray | None = None, lower: float = -np.inf,
                 upper: float = np.inf, velocity_limit: float = np.inf, effort_limit: float = np.inf,
                 armature: float = 0.0) -> int:
        """Add a body moved by a 1-DoF joint relative to ``parent`` (None: the world); returns its index.

        ``joint_placement`` is the 4x4 pose of the joint frame in the parent body frame (see ``placement``);
        ``com`` and ``inertia`` (3x3 about the centre of mass; default a uniform sphere of radius 0.1) are in
        the new body's frame.
        """
        if joint_type not in _TYPES:
            raise ValueError(f"joint_type must be one of {sorted(_TYPES)}, got {joint_type!r}")
        if any(b.name == name for b in self._bodies):
            raise ValueError(f"a body named {name!r} already exists")
        axis = np.asarray(axis, dtype=float)
        if axis.shape != (3,) or np.linalg.norm(axis) < 1e-9:
            raise ValueError(f"axis must be a non-zero 3-vector, got {axis}")
        if mass < 0:
            raise ValueError(f"mass must be non-negative, got {mass}")
        I = 0.4 * mass * 0.01 * np.eye(3) if inertia is None else np.asarray(inertia, dtype=float)
        T = np.eye(4) if joint_placement is None else np.asarray(joint_placement, dtype=float)
        self._bodies.append(_Spec(name, joint_name or f"{name}_joint", self._index(parent), _TYPES[joint_type], T,
                                  axis / np.linalg.norm(axis), float(mass), np.asarray(com, float), I,
                                  (lower, upper, velocity_limit, effort_limit), float(armature)))
        return len(self._bodies) - 1

    def add_frame(self, name: str, body: str, pose: np.ndarray | None = None) -> None:
        """Add a named frame fixed to ``body`` at ``pose`` (4x4, in the body frame)."""
        T = np.eye(4) if pose is None else np.asarray(pose, dtype=float)
        self._frames.append(Frame(name, self._index(body), T[:3, :3].copy(), T[:3, 3].copy(), "fixed_joint"))

    def build(self) -> RobotModel:
        """The model, with bodies renumbered depth first (children in the order they were added), the order a
        URDF-loaded model has and the recursive M^-1 requires."""
        bodies, frames_extra = self._depth_first()
        joints = [b for b in bodies if b.jtype != JOINT_FREE]
        frames = []
        for k, b in enumerate(bodies):
            frames.append(Frame(b.joint, k, np.eye(3), np.zeros(3), "joint"))
            frames.append(Frame(b.name, k, np.eye(3), np.zeros(3), "body"))
        armature = ([0.0] * 6 if self.floating_base else []) + [b.armature for b in joints]
        return RobotModel(
            name=self.name, floating_base=self.floating_base,
            **tree_fields(bodies),
            armature=np.array(armature, dtype=float),
            lower_limit=np.array([b.limits[0] for b in joints], dtype=float),
            upper_limit=np.array([b.limits[1] for b in joints], dtype=float),
            velocity_limit=np.array([b.limits[2] for b in joints], dtype=float),
            effort_limit=np.array([b.limits[3] for b in joints], dtype=float),
            continuous=np.zeros(len(joints), dtype=bool),
            frames=tuple(frames + frames_extra), gravity=np.asarray(self.gravity, dtype=float),
        )

    def _depth_first(self) -> tuple[list[_Spec], list[Frame]]:
        children: dict[int, list[int]] = {k: [] for k in range(-1, len(self._bodies))}
        for k, b in enumerate(self._bodies):
            children[b.parent].append(k)
        order, stack = [], children[-1][::-1]
        while stack:
            k = stack.pop()
            order.append(k)
            stack.extend(children[k][::-1])
        new = {old: i for i, old in enumerate(order)}
        new[-1] = -1
        bodies = [replace(self._bodies[old], parent=new[self._bodies[old].parent]) for old in order]
        frames = [replace(f, body=new[f.body]) for f in self._frames]
        return bodies, frames


def _random_inertia(rng: np.random.Generator) -> tuple[float, np.ndarray, np.ndarray]:
    """A physically valid random body: mass, COM and a rotated inertia satisfying the triangle inequality."""
    mass = rng.uniform(0.5, 3.0)
    d = rng.uniform(0.05, 0.3, size=3)
    principal = mass / 12 * np.array([d[1] ** 2 + d[2] ** 2, d[0] ** 2 + d[2] ** 2, d[0] ** 2 + d[1] ** 2])
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return mass, rng.uniform(-0.1, 0.1, size=3), Q @ np.diag(principal) @ Q.T


def chain(n: int, joint_types: str = "R", *, floating_base: bool = False, link_length: float = 0.3,
          name: str = "chain") -> RobotModel:
    """A serial chain of ``n`` links hanging along z, with joint types cycling through ``joint_types``.

    ``joint_types`` letters: ``R`` revolute, ``P`` prismatic; axes cycle through y, x, z. Each link has
    mass 1 with its centre of mass at mid-length.
    """
    b = ModelBuilder(name, floating_base=floating_base)
    axes = [(0.0, 1.0, 0.0), (1.0, 0.0, 0.0), (0.0, 0.0, 1.0)]
    parent = "base" if floating_base else None
    for k in range(n):
        jt = {"R": "revolute", "P": "prismatic"}[joint_types[k % len(joint_types)]]
        offset = placement((0.0, 0.0, -link_length if k > 0 else 0.0))
        b.add_body(f"link{k + 1}", parent, joint_type=jt, axis=axes[k % 3], joint_placement=offset,
                   com=(0.0, 0.0, -link_length / 2))
        parent = f"link{k + 1}"
    return b.build()


def random_tree(n: int, rng: np.random.Generator | int | None = None, *, floating_base: bool = False,
                prismatic_fraction: float = 0.3, name: str = "random_tree") -> RobotModel:
    """A random tree of ``n`` 1-DoF joints (revolute and prismatic, random axes, placements and inertias);
    with ``floating_base`` several branches start at the base."""
    rng = np.random.default_rng(rng)
    parents = [-1 if k == 0 or (floating_base and rng.random() < 0.3) else int(rng.integers(0, k)) for k in range(n)]
    mass, com, I = _random_inertia(rng)
    b = ModelBuilder(name, floating_base=floating_base, base_mass=mass, base_com=tuple(com), base_inertia=I)
    for k in range(n):
        mass, com, I = _random_inertia(rng)
        p = parents[k]
        parent_name = f"body{p}" if p >= 0 else ("base" if floating_base else None)
        T = placement(rng.uniform(-0.3, 0.3, size=3), rng.uniform(-np.pi, np.pi, size=3))
        b.add_body(f"body{k}", parent_name, joint_type="prismatic" if rng.random() < prismatic_fraction else "revolute",
                   axis=rng.normal(size=3), joint_placement=T, mass=mass, com=com, inertia=I,
                   armature=float(rng.uniform(0.0, 0.1)))
    return b.build()
