"""Build a RobotModel from an MJCF file (or any model MuJoCo compiles) through MuJoCo's own compiler.

lietraj never parses MJCF: ``mujoco.MjModel.from_xml_path`` compiles the file (defaults, classes, includes,
``inertiafromgeom``, ``boundmass``, ``balanceinertia``, ``settotalmass``...), and the model is read from the compiled
``MjModel``, so that lietraj's dynamics are MuJoCo's whatever the compiler did to the file's numbers.

How MuJoCo's tree becomes lietraj's (bodies keep MuJoCo's order, depth first, so the coordinates of the lietraj model
are MuJoCo's hinge, slide and ball joints that follow no other (below) in MuJoCo's order, and ``s = qpos`` of the
hinges and slides):

- a hinge at ``jnt_pos`` (the anchor, in the body frame) with axis ``a`` and reference angle ``ref`` moves its body
  by ``T(pos) R(a, q - ref) T(-pos)`` (MuJoCo's ``mj_kinematics``); lietraj's joint frame is put at the anchor,
  turned by ``-ref`` about the axis, so that the lietraj body frame is MuJoCo's shifted to the anchor. A slide moves
  it by ``a (q - ref)``. Everything of the body (inertia, sites, geoms, children) is carried into that frame;
- a ball joint is three hinges at its anchor, about the z, y and x axes of its body in turn: lietraj joints
  ``"<joint>/z"``, ``"<joint>/y"``, ``"<joint>/x"`` whose angles ``φ = (z, y, x)`` turn the body by
  ``Rz(z) Ry(y) Rx(x)`` (MuJoCo's intrinsic ``"zyx"`` Euler angles, the angles of Drake's ``BallRpyJoint`` and of
  Pinocchio's ``SphericalZYX``, whose velocity is their rates as here). MuJoCo's ball coordinates are a quaternion
  and the angular velocity ``ω`` in the body frame: ``ball_angles``, ``ball_quaternion`` and ``ball_rate_map``
  (``ω = E(φ) φ̇``, ``τ = Eᵀ τ_mj``) convert (``lietraj.sim.mjcf_maps``: whole states, accelerations and forces).
  The motion is MuJoCo's, but the angles are singular where ``y = ±π/2`` (``det E = cos y``: the mass matrix loses
  rank there, and the dynamics are ill-conditioned near it); a range on a ball joint (a cone) is not represented (a
  warning says so), nor is an effort limit on the angles;
- several joints in one body (a ball's three hinges among them) become a chain of massless lietraj bodies, one per
  joint (as Pinocchio's composite joint), named ``"<body>/<joint>"`` except the last, which has the body's name and
  carries its inertia;
- a body without joint is merged into its parent (inertia added, parallel-axis theorem); merged into the world,
  its inertia does not move and is left out, its sites and geoms stay (``body = -1``);
- a free joint on a body of the world is the floating base (``H`` is the body's world pose, ``nu`` its body twist;
  MuJoCo's ``qvel`` has the linear velocity in the world frame: ``lietraj.sim``'s ``MujocoRobot`` converts).

Frames: every MuJoCo body (kind ``"body"``), joint (``"joint"``, at the joint's anchor) and site (``"site"``).
Visuals: the geoms MuJoCo's viewer shows by default (groups 0 to 2, not transparent): boxes, spheres, cylinders,
capsules (a cylinder and two spheres), ellipsoids and meshes (the compiled vertices, written once as binary STL
files under ``mesh_cache_dir()``); planes and height fields are not drawn. Limits: ``jnt_range`` where
``jnt_limited`` (an unlimited hinge is continuous); efforts from the joint's ``actfrcrange``, else from its
actuators' ``forcerange`` times the gear, or ``ctrlrange`` times the gear for a plain motor; no velocity limits.
``dof_armature`` is the armature. Gravity is ``opt.gravity`` (zero when MuJoCo's gravity is disabled). Keyframes and
``qpos0`` are the reference postures.

A joint equality with a linear polynomial (``joint1 - y0 = a0 + a1 (joint2 - x0)``; MuJoCo's URDF compiler makes one
of each ``<mimic>``) is a mimic joint (``RobotModel.mimic``): the follower has no coordinate, its armature is added to
its primary's times ``a1²`` and its range bounds the primary's; MuJoCo's soft constraint becomes exact. Its own
actuators do not count in the primary's effort limit.

What lietraj cannot represent is refused with ``MJCFError`` naming the element: armature on a ball joint (it acts on
``ω``: not diagonal in the angles), a free body beside another moving tree, several free bodies,
tendons, other equality constraints (connect, weld: closed loops; a locked joint, a nonlinear or inactive coupling),
flexes, armature on a free joint (a free joint below a body of the world MuJoCo's compiler refuses itself, and its
message is passed on). Passive forces (joint damping, springs, friction loss, gravity compensation) are not part of a
rigid-body model and are not read; nor is collision geometry.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lietraj.dynamics.model.model import (
    JOINT_FREE,
    JOINT_PRISMATIC,
    JOINT_REVOLUTE,
    Frame,
    Mimic,
    Posture,
    RobotModel,
    Visual,
    tree_fields,
)
from lietraj.dynamics.model.pinocchio_interop import pose_from_xyzquat
from lietraj.dynamics.model.urdf import _combine

if TYPE_CHECKING:
    import mujoco


class MJCFError(ValueError):
    """A model MuJoCo compiles but lietraj cannot represent (or a file MuJoCo cannot compile); the message names the
    element."""


_DEFAULT_RGBA = (0.5, 0.5, 0.5, 1.0)  # a geom's rgba when the file gives none: its material's then shows
_VISIBLE_GROUPS = 3  # MuJoCo's viewer shows geom groups 0, 1 and 2 by default (Menagerie: visual geoms in group 2)


def load_mjcf(source: str | os.PathLike | "mujoco.MjModel", *, name: str | None = None) -> RobotModel:
    """The robot of an MJCF file, compiled by MuJoCo (a URDF MuJoCo can compile works too), or of a compiled
    ``mujoco.MjModel``.

    ``name`` defaults to the model's name (``<mujoco model="...">``), else the file's stem. Raises
    FileNotFoundError for a missing file, ``MJCFError`` when MuJoCo cannot compile it (MuJoCo's message) or when the
    model has what lietraj cannot represent (module docstring).
    """
    import mujoco

    if isinstance(source, mujoco.MjModel):
        return _robot(source, name)
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"MJCF file not found: {path}")
    try:
        mj = mujoco.MjModel.from_xml_path(str(path))
    except ValueError as e:
        raise MJCFError(f"{path}: MuJoCo cannot compile it: {e}") from None
    return _robot(mj, name, fallback=path.stem)


def mesh_cache_dir() -> Path:
    """Where the meshes of MJCF models are written for the viewer: ``$XDG_CACHE_HOME/lietraj/meshes``, by default
    ``~/.cache/lietraj/meshes``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lietraj" / "meshes"


def ball_angles(quaternion) -> np.ndarray:
    """The angles ``(z, y, x)`` lietraj gives a ball joint at MuJoCo's position ``quaternion`` (``(w, x, y, z)``,
    normalized here): the rotation is ``Rz(z) Ry(y) Rx(x)``, ``y`` in ``[-π/2, π/2]``; at ``y = ±π/2`` (where ``z``
    and ``x`` turn about the same axis) ``z = 0``."""
    q = np.asarray(quaternion, dtype=float)
    R = _pose(np.zeros(3), q / np.linalg.norm(q))[:3, :3]
    c = np.hypot(R[0, 0], R[1, 0])
    if c < 1e-12:
        return np.array([0.0, np.arctan2(-R[2, 0], c), np.arctan2(-R[1, 2], R[1, 1])])
    return np.array([np.arctan2(R[1, 0], R[0, 0]), np.arctan2(-R[2, 0], c), np.arctan2(R[2, 1], R[2, 2])])


def ball_quaternion(angles) -> np.ndarray:
    """MuJoCo's ``(w, x, y, z)`` quaternion of a ball joint at lietraj's angles ``(z, y, x)``: ``Rz(z) Ry(y) Rx(x)``,
    the inverse of ``ball_angles`` (up to the quaternion's sign and the angles' periods)."""
    z, y, x = 0.5 * np.asarray(angles, dtype=float)
    cz, sz, cy, sy, cx, sx = np.cos(z), np.sin(z), np.cos(y), np.sin(y), np.cos(x), np.sin(x)
    return np.array([cz * cy * cx + sz * sy * sx, cz * cy * sx - sz * sy * cx, cz * sy * cx + sz * cy * sx,
                     sz * cy * cx - cz * sy * sx])


def ball_rate_map(angles) -> np.ndarray:
    """``E`` (3, 3) with ``ω = E (ż, ẏ, ẋ)``: a ball joint's angular velocity in its child's frame (MuJoCo's ball
    ``qvel``) of the rates of lietraj's angles ``(z, y, x)``; singular at ``y = ±π/2`` (``det E = cos y``). MuJoCo's
    generalized force ``τ_mj`` on the ball is ``Eᵀ τ_mj`` on the angles."""
    _, y, x = np.asarray(angles, dtype=float)
    cy, sy, cx, sx = np.cos(y), np.sin(y), np.cos(x), np.sin(x)
    return np.array([[-sy, 0.0, 1.0], [cy * sx, cx, 0.0], [cy * cx, -sx, 0.0]])


def _pose(pos, quat) -> np.ndarray:
    """4x4 pose of a MuJoCo position and (w, x, y, z) quaternion."""
    return pose_from_xyzquat(np.concatenate([pos, quat[1:4], quat[:1]]))


def _translation(p) -> np.ndarray:
    T = np.eye(4)
    T[:3, 3] = p
    return T


def _rotation(axis, angle: float) -> np.ndarray:
    """4x4 rotation by ``angle`` about the unit ``axis``."""
    x, y, z = axis
    K = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    T = np.eye(4)
    T[:3, :3] += np.sin(angle) * K + (1.0 - np.cos(angle)) * K @ K
    return T


@dataclass
class _Body:
    name: str
    joint: str
    parent: int
    jtype: int
    placement: np.ndarray
    axis: np.ndarray
    mj_joint: int = -1  # MuJoCo's joint id, -1 for none
    angle: int = -1  # for a ball joint's hinges, which of its angles (0: z, 1: y, 2: x); -1 for a scalar joint
    mass: float = 0.0
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    inertia: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))


class _Names:
    """MuJoCo's names of a model's elements, with a stand-in (``"body3"``) for an unnamed one."""

    def __init__(self, mj: "mujoco.MjModel"):
        self.mj = mj

    def __call__(self, kind: str, i: int) -> str:
        import mujoco

        obj = getattr(mujoco.mjtObj, f"mjOBJ_{kind.upper()}")
        return mujoco.mj_id2name(self.mj, obj, int(i)) or f"{kind}{int(i)}"


def _refuse_unsupported(mj: "mujoco.MjModel", name: _Names) -> None:
    """``MJCFError`` naming the first element of the model lietraj cannot represent (module docstring)."""
    import mujoco

    if mj.ntendon:
        raise MJCFError(f"tendon {name('tendon', 0)!r}: lietraj has no tendons ({mj.ntendon} in the model)")
    if mj.nflex:
        raise MJCFError(f"flex {name('flex', 0)!r}: lietraj has no deformable bodies")
    if not mj.njnt:
        raise MJCFError("the model has no joint: nothing moves")
    for j in np.flatnonzero(mj.jnt_type == mujoco.mjtJoint.mjJNT_BALL):
        if np.any(mj.dof_armature[mj.jnt_dofadr[j]:mj.jnt_dofadr[j] + 3] != 0):
            raise MJCFError(f"ball joint {name('joint', j)!r}: its armature acts on the angular velocity, which is "
                            "not diagonal in the three angles lietraj gives a ball joint")
    free = np.flatnonzero(mj.jnt_type == mujoco.mjtJoint.mjJNT_FREE)
    if len(free) > 1:
        raise MJCFError(f"several free bodies {[name('body', mj.jnt_bodyid[j]) for j in free]}: lietraj models one "
                        "robot, with one floating base")
    if len(free):
        base = int(mj.jnt_bodyid[free[0]])
        others = [name("body", b) for b in range(1, mj.nbody) if mj.body_parentid[b] == 0 and b != base
                  and _moves(mj, b)]
        if others:
            raise MJCFError(f"bodies {others} move beside the free body {name('body', base)!r}: a floating-base "
                            "model has a single tree")
        if np.any(mj.dof_armature[mj.jnt_dofadr[free[0]]:mj.jnt_dofadr[free[0]] + 6] != 0):
            raise MJCFError(f"free joint {name('joint', free[0])!r}: lietraj has no armature on the floating base")


def _mimic_rules(mj: "mujoco.MjModel", name: _Names) -> dict[int, tuple[int, float, float]]:
    """The joint equalities as mimic joints: follower joint id -> ``(primary joint id, multiplier, offset)``, each
    composed down to an independent primary; ``MJCFError`` naming any other equality constraint.

    MuJoCo's joint equality keeps ``y - y0 = a0 + a1 (x - x0)`` (``y`` joint1's position, ``x`` joint2's, ``y0`` and
    ``x0`` their ``qpos0``; ``polycoef = a0 ... a4``): with a linear polynomial, joint1 follows joint2 with
    multiplier ``a1`` and offset ``y0 + a0 - a1 x0``, exactly where MuJoCo's constraint is soft.
    """
    import mujoco

    declared: dict[int, tuple[int, float, float]] = {}
    for e in range(mj.neq):
        kind = mujoco.mjtEq(int(mj.eq_type[e])).name.removeprefix("mjEQ_").lower()
        what = f"equality constraint {name('equality', e)!r} ({kind})"
        if kind != "joint":
            raise MJCFError(f"{what}: lietraj has no equality constraints but joint couplings (closed loops, welds "
                            "and the like cannot be represented)")
        follower, primary = int(mj.eq_obj1id[e]), int(mj.eq_obj2id[e])
        coefficients = np.asarray(mj.eq_data[e, :5], dtype=float)
        if primary < 0:
            raise MJCFError(f"{what}: it holds joint {name('joint', follower)!r} at a position; lietraj has no locked "
                            "joints")
        if np.any(coefficients[2:] != 0):
            raise MJCFError(f"{what}: joint {name('joint', follower)!r} follows {name('joint', primary)!r} through a "
                            "polynomial of degree > 1; lietraj's mimic joints are linear")
        if not mj.eq_active0[e]:
            raise MJCFError(f"{what}: inactive at the start; lietraj cannot switch a joint coupling on")
        if follower in declared:
            raise MJCFError(f"{what}: joint {name('joint', follower)!r} already follows another joint")
        a0, a1 = coefficients[:2]
        y0, x0 = mj.qpos0[mj.jnt_qposadr[follower]], mj.qpos0[mj.jnt_qposadr[primary]]
        declared[follower] = (primary, float(a1), float(y0 + a0 - a1 * x0))
    rules = {}
    for follower, (primary, multiplier, offset) in declared.items():
        seen = {follower}
        while primary in declared:  # y = m (m2 z + o2) + o
            if primary in seen:
                raise MJCFError(f"joint {name('joint', follower)!r}: the joint equalities of "
                                f"{sorted(name('joint', j) for j in seen)} follow each other in a loop")
            seen.add(primary)
            next_primary, m2, o2 = declared[primary]
            primary, multiplier, offset = next_primary, multiplier * m2, multiplier * o2 + offset
        rules[follower] = (primary, multiplier, offset)
    return rules


def _robot(mj: "mujoco.MjModel", name: str | None, fallback: str = "mjcf") -> RobotModel:
    import mujoco

    names = _Names(mj)
    _refuse_unsupported(mj, names)
    jtypes = [int(t) for t in mj.jnt_type]
    FREE, HINGE, BALL = (int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_HINGE),
                         int(mujoco.mjtJoint.mjJNT_BALL))

    bodies: list[_Body] = []
    frames: list[Frame] = []
    # attach[b]: (lietraj body, pose of MuJoCo body b's frame in that body's frame); -1 for the world.
    attach: dict[int, tuple[int, np.ndarray]] = {0: (-1, np.eye(4))}
    for b in range(1, mj.nbody):
        lietraj_parent, T = attach[int(mj.body_parentid[b])]
        T = T @ _pose(mj.body_pos[b], mj.body_quat[b])
        bname = names("body", b)
        joints = range(mj.body_jntadr[b], mj.body_jntadr[b] + mj.body_jntnum[b])
        for k, j in enumerate(joints):
            jname = names("joint", j)
            if jtypes[j] == FREE:  # on a body of the world: MuJoCo sets its pose from qpos alone
                bodies.append(_Body(bname, jname, -1, JOINT_FREE, np.eye(4), np.zeros(3), j))
                T = np.eye(4)
            elif jtypes[j] == BALL:
                if mj.jnt_limited[j]:
                    warnings.warn(f"ball joint {jname!r}: its range (a rotation of at most {mj.jnt_range[j, 1]:g} rad) "
                                  "is not represented, its three angles are unlimited", stacklevel=3)
                last = k == len(joints) - 1
                for angle, (letter, axis) in enumerate(zip("zyx", np.eye(3)[::-1])):
                    hinge = f"{jname}/{letter}"
                    body = bname if last and angle == 2 else f"{bname}/{hinge}"
                    placement = T @ _translation(mj.jnt_pos[j]) if angle == 0 else np.eye(4)
                    bodies.append(_Body(body, hinge, len(bodies) - 1 if angle else lietraj_parent, JOINT_REVOLUTE,
                                        placement, axis.copy(), j, angle))
                T = _translation(-mj.jnt_pos[j])
            else:
                axis, anchor, ref = mj.jnt_axis[j], mj.jnt_pos[j], float(mj.qpos0[mj.jnt_qposadr[j]])
                if jtypes[j] == HINGE:
                    zero, jtype = _rotation(axis, -ref), JOINT_REVOLUTE
                else:
                    zero, jtype = _translation(-ref * axis), JOINT_PRISMATIC
                last = k == len(joints) - 1
                bodies.append(_Body(bname if last else f"{bname}/{jname}", jname, lietraj_parent, jtype,
                                    T @ _translation(anchor) @ zero, axis / np.linalg.norm(axis), j))
                T = _translation(-anchor)
            lietraj_parent = len(bodies) - 1
            frames.append(Frame(jname, lietraj_parent, np.eye(3), np.zeros(3), "joint"))
        attach[b] = (lietraj_parent, T)
        frames.append(Frame(bname, lietraj_parent, T[:3, :3].copy(), T[:3, 3].copy(), "body"))
        if lietraj_parent >= 0:
            _add_inertia(bodies[lietraj_parent], mj, b, T)

    for s in range(mj.nsite):
        body, T = attach[int(mj.site_bodyid[s])]
        T = T @ _pose(mj.site_pos[s], mj.site_quat[s])
        frames.append(Frame(names("site", s), body, T[:3, :3].copy(), T[:3, 3].copy(), "site"))

    floating = FREE in jtypes
    rules = _mimic_rules(mj, names)
    joints = [b for b in bodies if b.jtype != JOINT_FREE and b.mj_joint not in rules]
    n, base = len(joints), 6 if floating else 0
    coordinate = {b.mj_joint: k for k, b in enumerate(joints)}
    limited = [bool(mj.jnt_limited[b.mj_joint]) and b.angle < 0 for b in joints]
    lower = np.array([mj.jnt_range[b.mj_joint, 0] if lim else -np.inf for b, lim in zip(joints, limited)])
    upper = np.array([mj.jnt_range[b.mj_joint, 1] if lim else np.inf for b, lim in zip(joints, limited)])
    armature = np.zeros(base + n)
    armature[base:] = [mj.dof_armature[mj.jnt_dofadr[b.mj_joint]] for b in joints]
    for follower, (primary, multiplier, offset) in rules.items():
        k = coordinate[primary]
        # Its rotor turns multiplier times as fast as the primary's (M = G^T M_full G), and its range bounds the
        # primary's, as MuJoCo's constraints do together.
        armature[base + k] += multiplier ** 2 * mj.dof_armature[mj.jnt_dofadr[follower]]
        if mj.jnt_limited[follower] and multiplier != 0:
            ends = sorted((mj.jnt_range[follower] - offset) / multiplier)
            lower[k], upper[k] = max(lower[k], ends[0]), min(upper[k], ends[1])
    if np.any(lower > upper):
        k = int(np.argmax(lower > upper))
        raise MJCFError(f"joint {joints[k].joint!r}: the ranges of the joints that follow it leave it no position")
    gravity = np.array(mj.opt.gravity, dtype=float)
    if mj.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_GRAVITY:
        gravity = np.zeros(3)
    return RobotModel(
        name=name or _model_name(mj) or fallback,
        floating_base=floating,
        **tree_fields(bodies),
        armature=armature,
        lower_limit=lower,
        upper_limit=upper,
        velocity_limit=np.full(n, np.inf),
        effort_limit=_effort_limits(mj, [b.mj_joint for b in joints]),
        continuous=np.array([b.jtype == JOINT_REVOLUTE and lo == -np.inf and hi == np.inf
                             for b, lo, hi in zip(joints, lower, upper)], dtype=bool),
        frames=tuple(frames),
        visuals=tuple(_visuals(mj, names, attach)),
        reference_postures=_postures(mj, names, floating, joints),
        gravity=gravity,
        mimic=tuple(Mimic(names("joint", f), names("joint", p), m, o) for f, (p, m, o) in sorted(rules.items())),
    )


def _moves(mj: "mujoco.MjModel", root: int) -> bool:
    """Whether a joint of the subtree of body ``root`` moves it (MuJoCo numbers a subtree's bodies contiguously)."""
    end = root + 1
    while end < mj.nbody and mj.body_rootid[end] == root:
        end += 1
    return bool(np.any(mj.body_jntnum[root:end] > 0))


def _add_inertia(body: _Body, mj: "mujoco.MjModel", b: int, T: np.ndarray) -> None:
    """Add MuJoCo body ``b``'s compiled inertia (principal moments in the ``iquat`` frame at ``ipos``), its frame
    at ``T`` in the lietraj body's."""
    Ti = T @ _pose(mj.body_ipos[b], mj.body_iquat[b])
    R = Ti[:3, :3]
    inertia = R @ np.diag(mj.body_inertia[b]) @ R.T
    body.mass, body.com, body.inertia = _combine(body.mass, body.com, body.inertia, float(mj.body_mass[b]),
                                                 Ti[:3, 3].copy(), inertia)


def _effort_limits(mj: "mujoco.MjModel", joints: list[int]) -> np.ndarray:
    """Per joint, the largest torque (force) its actuators can apply: the joint's ``actfrcrange`` where limited,
    else the sum over its joint actuators of ``|gear|`` times the largest magnitude of ``forcerange`` (where
    limited) or, for a plain motor (force = ctrl), of ``ctrlrange``; inf when an actuator is unbounded, and when
    no actuator acts on the joint, and for a ball joint's angles (its actuators' torques are not about them)."""
    import mujoco

    effort = np.full(len(joints), np.inf)
    motor = ((mj.actuator_dyntype == mujoco.mjtDyn.mjDYN_NONE) & (mj.actuator_gaintype == mujoco.mjtGain.mjGAIN_FIXED)
             & (mj.actuator_biastype == mujoco.mjtBias.mjBIAS_NONE) & (mj.actuator_gainprm[:, 0] == 1.0))
    for k, j in enumerate(joints):
        if mj.jnt_type[j] == mujoco.mjtJoint.mjJNT_BALL:
            continue
        if mj.jnt_actfrclimited[j]:
            effort[k] = np.abs(mj.jnt_actfrcrange[j]).max()
            continue
        acting = np.flatnonzero((mj.actuator_trntype == mujoco.mjtTrn.mjTRN_JOINT) & (mj.actuator_trnid[:, 0] == j))
        if acting.size == 0:
            continue
        total = 0.0
        for a in acting:
            if mj.actuator_forcelimited[a]:
                bound = np.abs(mj.actuator_forcerange[a]).max()
            elif motor[a] and mj.actuator_ctrllimited[a]:
                bound = np.abs(mj.actuator_ctrlrange[a]).max()
            else:
                bound = np.inf
            total += abs(float(mj.actuator_gear[a, 0])) * bound
        effort[k] = total
    return effort


def _postures(mj: "mujoco.MjModel", names: _Names, floating: bool, joints: list[_Body]) -> dict[str, Posture]:
    """The model's keyframes by name (``"key<k>"`` unnamed), then ``"qpos0"``, MuJoCo's initial configuration; a
    ball joint's quaternion as its three angles."""
    def posture(qpos: np.ndarray) -> Posture:
        H = _pose(qpos[:3], qpos[3:7]) if floating else None  # the free joint is MuJoCo's first
        s = [qpos[mj.jnt_qposadr[b.mj_joint]] if b.angle < 0 else
             ball_angles(qpos[mj.jnt_qposadr[b.mj_joint]:mj.jnt_qposadr[b.mj_joint] + 4])[b.angle] for b in joints]
        return Posture(H, np.array(s, dtype=float))

    postures = {names("key", k): posture(mj.key_qpos[k]) for k in range(mj.nkey)}
    postures.setdefault("qpos0", posture(mj.qpos0))
    return postures


def _model_name(mj: "mujoco.MjModel") -> str:
    """``<mujoco model="...">``: the first of MuJoCo's names."""
    return bytes(mj.names).split(b"\0", 1)[0].decode("utf-8", errors="replace")


def _visuals(mj: "mujoco.MjModel", names: _Names, attach: dict[int, tuple[int, np.ndarray]]) -> list[Visual]:
    import mujoco

    G = mujoco.mjtGeom
    out: list[Visual] = []
    for g in range(mj.ngeom):
        rgba = np.array(mj.geom_rgba[g], dtype=float)
        if mj.geom_matid[g] >= 0 and np.allclose(rgba, _DEFAULT_RGBA):
            rgba = np.array(mj.mat_rgba[mj.geom_matid[g]], dtype=float)
        if mj.geom_group[g] >= _VISIBLE_GROUPS or rgba[3] <= 0:
            continue
        body, T = attach[int(mj.geom_bodyid[g])]
        T = T @ _pose(mj.geom_pos[g], mj.geom_quat[g])
        size, gtype, gname = mj.geom_size[g], int(mj.geom_type[g]), names("geom", g)

        def visual(shape: str, at: np.ndarray = T, name: str = gname, **geometry) -> Visual:
            return Visual(name=name, body=body, R=at[:3, :3].copy(), p=at[:3, 3].copy(), shape=shape, rgba=rgba,
                          **geometry)

        if gtype == G.mjGEOM_BOX:
            out.append(visual("box", size=2.0 * np.array(size, dtype=float)))
        elif gtype == G.mjGEOM_SPHERE:
            out.append(visual("sphere", radius=float(size[0])))
        elif gtype in (G.mjGEOM_CYLINDER, G.mjGEOM_CAPSULE):
            out.append(visual("cylinder", radius=float(size[0]), length=2.0 * float(size[1])))
            if gtype == G.mjGEOM_CAPSULE:
                for end, sign in (("top", 1.0), ("bottom", -1.0)):
                    out.append(visual("sphere", T @ _translation([0.0, 0.0, sign * size[1]]), f"{gname}_{end}",
                                      radius=float(size[0])))
        elif gtype == G.mjGEOM_ELLIPSOID:
            out.append(visual("mesh", filename=str(_unit_sphere_stl()), scale=np.array(size, dtype=float)))
        elif gtype == G.mjGEOM_MESH:
            out.append(visual("mesh", filename=str(_mesh_stl(mj, int(mj.geom_dataid[g]))), scale=np.ones(3)))
    return out


def _mesh_stl(mj: "mujoco.MjModel", mesh: int) -> Path:
    """The compiled mesh ``mesh`` (vertices in the geom's frame, as MuJoCo draws it) as a binary STL file."""
    v0, nv = mj.mesh_vertadr[mesh], mj.mesh_vertnum[mesh]
    f0, nf = mj.mesh_faceadr[mesh], mj.mesh_facenum[mesh]
    vertices = np.asarray(mj.mesh_vert[v0:v0 + nv], dtype=np.float32)
    return _write_stl(vertices[np.asarray(mj.mesh_face[f0:f0 + nf])])


def _unit_sphere_stl(segments: int = 16) -> Path:
    """A sphere of radius 1 (latitude-longitude triangles) as a binary STL file, scaled into ellipsoids."""
    theta = np.linspace(0.0, np.pi, segments + 1)
    phi = np.linspace(0.0, 2.0 * np.pi, 2 * segments + 1)
    points = np.stack(np.broadcast_arrays(np.sin(theta)[:, None] * np.cos(phi), np.sin(theta)[:, None] * np.sin(phi),
                                          np.cos(theta)[:, None]), axis=-1)
    a, b, c, d = points[:-1, :-1], points[1:, :-1], points[1:, 1:], points[:-1, 1:]
    triangles = np.concatenate([np.stack([a, b, c], -2).reshape(-1, 3, 3), np.stack([a, c, d], -2).reshape(-1, 3, 3)])
    return _write_stl(triangles.astype(np.float32))


def _write_stl(triangles: np.ndarray) -> Path:
    """Binary STL of the (nt, 3, 3) float32 triangles in ``mesh_cache_dir()``, named by its contents: written once,
    atomically, so that concurrent loads agree."""
    normals = np.cross(triangles[:, 1] - triangles[:, 0], triangles[:, 2] - triangles[:, 0])
    length = np.linalg.norm(normals, axis=1, keepdims=True)
    normals = np.divide(normals, length, out=np.zeros_like(normals), where=length > 0)
    records = np.zeros(len(triangles), dtype=[("normal", "<f4", 3), ("vertices", "<f4", (3, 3)), ("attr", "<u2")])
    records["normal"], records["vertices"] = normals, triangles
    contents = b"lietraj mesh compiled by MuJoCo".ljust(80, b" ") + np.uint32(len(triangles)).tobytes() + \
        records.tobytes()
    path = mesh_cache_dir() / f"{hashlib.sha1(contents).hexdigest()}.stl"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_bytes(contents)
        os.replace(temporary, path)
    return path
