"""The MuJoCo model of a lietraj robot, compiled by MuJoCo from the robot's own URDF, and the maps between the two
coordinate systems.

MuJoCo's URDF compiler reads ``robot.source``; the file is edited, as XML, only where MuJoCo could not read it or
where lietraj's model leaves part of it out (``_mujoco_urdf``), and the model is then completed through the ``MjSpec``
API (free joint, armature, limits, motors, floor, solver options; ``build_mujoco_model``). lietraj never hands MuJoCo
an inertia or a geometry it computed: MuJoCo derives the bodies from the same elements on its own, which is what
makes it an independent dynamics oracle next to Pinocchio.

Coordinates (``MujocoRobot``). A floating base is MuJoCo's free joint: ``qpos = [p (world); quaternion (w, x, y,
z)]`` and ``qvel = [ṗ in the WORLD frame; ω in the BODY frame]``, while lietraj's ``v[:6] = ν = [Rᵀṗ; ω]`` is the
body twist (DESIGN.md, linear first). With ``T = diag(R, I₃, P)``, ``P`` the permutation from lietraj's joint order
to MuJoCo's (both depth first, siblings in different orders)::

    qvel = T v,    qacc = T a + [R (ω × v_b); 0],    τ = Tᵀ qfrc,    M = Tᵀ M_mj T

where ``a = v̇`` is lietraj's acceleration (the derivative of the body twist, so ``d(R v_b)/dt = R (v̇_b + ω × v_b)``)
and ``qfrc`` any MuJoCo generalized force (by the equality of the power, ``τᵀv = qfrcᵀqvel``). A revolute joint,
continuous or not, is one angle in both. MuJoCo's joint and body names are the URDF's; the free joint is named
after lietraj's (``root_joint``).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

import mujoco
import numpy as np

from lietraj.dynamics.lie.state import State
from lietraj.dynamics.model.mjcf import ball_angles, ball_quaternion, ball_rate_map
from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.model.pinocchio_interop import pose_from_xyzquat, xyzquat_from_pose
from lietraj.dynamics.model.urdf import resolve_mesh_path

MESH_FORMATS = (".stl", ".obj", ".msh")
"""Mesh files MuJoCo's compiler reads; a collision mesh in another format (COLLADA ``.dae``) is dropped."""

INTEGRATORS = {"euler": mujoco.mjtIntegrator.mjINT_EULER, "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST,
               "implicit": mujoco.mjtIntegrator.mjINT_IMPLICIT, "rk4": mujoco.mjtIntegrator.mjINT_RK4}
CONES = {"elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC, "pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL}

_TORSIONAL_FRICTION, _ROLLING_FRICTION = 0.005, 0.0001  # MuJoCo's defaults
# MuJoCo rejects a principal moment below mjEPS = 1e-14 and fuses a link lighter than mjMINVAL = 1e-15 kg without its
# inertia: twice these, so that the rounding of MuJoCo's eigen-solver cannot fail a repaired inertia.
_MIN_MOMENT, _MIN_MASS = 2e-14, 2e-15
_REPAIR_MARGIN = 1e-9  # relative margin on the triangle inequality, for the same reason


@dataclass(frozen=True)
class UrdfEdits:
    """What ``build_mujoco_model`` changed in the URDF so that MuJoCo reads it and keeps lietraj's dynamics.

    ``dropped_geoms``: the collision meshes MuJoCo cannot read, as ``"link: path"``. ``added_inertia``: link ->
    ``δ`` (kg m²), the isotropic inertia ``δ I₃`` added about the link's centre of mass without which MuJoCo rejects
    its inertia (``MujocoRobot.equivalent_robot`` adds the same). ``added_mass``: link -> kg (2e-15) added to a
    massless link, without which MuJoCo drops the link's inertia or rejects it as a moving body; below the rounding
    of the mass matrix, so not carried over to ``equivalent_robot``.
    """

    dropped_geoms: tuple[str, ...] = ()
    added_inertia: Mapping[str, float] = field(default_factory=dict)
    added_mass: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class MujocoRobot:
    """The MuJoCo model of ``robot`` and the maps between lietraj's and MuJoCo's coordinates (module docstring).
    Built by ``build_mujoco_model``; read-only, like the robot model (an ``MjData`` holds a state).

    ``qpos_index[k]`` and ``dof_index[k]`` are the ``qpos`` and ``qvel`` entries of lietraj's joint ``k`` (the order
    of ``s``); MuJoCo's actuator ``k`` is the motor of lietraj's joint ``k``. ``body_ids[i]`` is the MuJoCo body of
    lietraj's body ``i``. ``spec``: the ``MjSpec`` it was compiled from (None for ``mjcf_maps``). ``edits``: what was
    changed in the URDF (``UrdfEdits``: dropped collision meshes, repaired inertias). ``floor_geom`` is the id of the
    floor plane, or -1.

    ``ball_joints`` (models read by ``load_mjcf``, ``mjcf_maps``): ``(k, qpos address, dof address)`` of each MuJoCo
    ball joint, whose angles ``(z, y, x)`` are lietraj's coordinates ``k .. k+2`` (their ``qpos_index`` is -1, their
    ``dof_index`` the ball's three dofs): its quaternion is ``ball_quaternion`` of them, its angular velocity
    ``ω = E φ̇`` (``ball_rate_map``), its ``qacc = E φ̈ + Ė φ̇``, so that ``T`` has ``E`` for its block.
    """

    robot: RobotModel
    model: mujoco.MjModel
    spec: mujoco.MjSpec | None
    edits: UrdfEdits
    qpos_index: np.ndarray
    dof_index: np.ndarray
    body_ids: np.ndarray
    floor_geom: int
    ball_joints: tuple[tuple[int, int, int], ...] = ()

    def to_mujoco(self, x: State) -> tuple[np.ndarray, np.ndarray]:
        """MuJoCo's ``(qpos, qvel)`` of the lietraj state ``x`` (checked: shapes, finite, rigid ``H``)."""
        self.robot.state_space.check(x)
        qpos, qvel = np.zeros(self.model.nq), np.zeros(self.model.nv)
        scalar = self.qpos_index >= 0
        qpos[self.qpos_index[scalar]] = x.s[scalar]
        qvel[self.dof_index] = x.sdot
        for k, q, d in self.ball_joints:
            qpos[q:q + 4] = ball_quaternion(x.s[k:k + 3])
            qvel[d:d + 3] = ball_rate_map(x.s[k:k + 3]) @ x.sdot[k:k + 3]
        if self.robot.floating_base:
            xyz_xyzw = xyzquat_from_pose(x.H)
            qpos[:3], qpos[3], qpos[4:7] = xyz_xyzw[:3], xyz_xyzw[6], xyz_xyzw[3:6]
            qvel[:3], qvel[3:6] = x.H[:3, :3] @ x.nu[:3], x.nu[3:]
        return qpos, qvel

    def from_mujoco(self, qpos, qvel) -> State:
        """The lietraj state of MuJoCo's ``(qpos, qvel)`` (the quaternion normalized; new arrays). Raises
        ValueError naming ``qpos`` or ``qvel`` for a wrong shape or a NaN."""
        qpos = finite_vector(qpos, self.model.nq, "qpos")
        qvel = finite_vector(qvel, self.model.nv, "qvel")
        s, sdot = qpos[self.qpos_index], qvel[self.dof_index]
        for k, q, d in self.ball_joints:
            s[k:k + 3] = ball_angles(qpos[q:q + 4])
            self._check_gimbal(k, s[k + 1])
            sdot[k:k + 3] = np.linalg.solve(ball_rate_map(s[k:k + 3]), qvel[d:d + 3])
        if not self.robot.floating_base:
            return State(None, s, sdot)
        H = pose_from_xyzquat(np.concatenate([qpos[:3], qpos[4:7], qpos[3:4]]))
        nu = np.concatenate([H[:3, :3].T @ qvel[:3], qvel[3:6]])
        return State(H, s, np.concatenate([nu, sdot]))

    def velocity_map(self, x: State) -> np.ndarray:
        """``T`` (nv, nv) with ``qvel = T v`` at the state ``x``: the joint permutation and, for a floating base,
        the base rotation ``R`` on the linear rows; ``τ = Tᵀ qfrc`` and ``M = Tᵀ M_mj T``."""
        self.robot.state_space.check(x)
        nb = self.robot.nv - self.robot.n
        T = np.zeros((self.model.nv, self.robot.nv))
        T[self.dof_index, np.arange(nb, self.robot.nv)] = 1.0
        if nb:
            T[:3, :3] = x.H[:3, :3]
            T[3:6, 3:6] = np.eye(3)
        for k, _, d in self.ball_joints:
            T[d:d + 3, nb + k:nb + k + 3] = ball_rate_map(x.s[k:k + 3])
        return T

    def _check_gimbal(self, k: int, y: float) -> None:
        """ValueError naming the ball joint of coordinates ``k .. k+2`` when its ``y`` angle is ±π/2 (to rounding),
        where its angular velocity and acceleration have no angle rates (``ball_rate_map`` is singular)."""
        if abs(math.cos(y)) < 1e-12:
            raise ValueError(f"ball joint {self.robot.actuated_joint_names[k].rpartition('/')[0]!r} is at y = "
                             f"{math.degrees(y):+.0f} degrees, where z and x turn about one axis: its angular velocity "
                             "has no rates of its three angles (the z-y-x angles' singularity)")

    def _drift(self, x: State) -> np.ndarray:
        """``qacc - T a``: ``R (ω × v_b)`` on the free joint's linear rows, ``Ė φ̇`` on a ball's."""
        drift = np.zeros(self.model.nv)
        if self.robot.floating_base:
            drift[:3] = x.H[:3, :3] @ np.cross(x.nu[3:], x.nu[:3])
        for k, _, d in self.ball_joints:
            (_, y, ax), (dz, dy, dx) = x.s[k:k + 3], x.sdot[k:k + 3]
            cy, sy, cx, sx = np.cos(y), np.sin(y), np.cos(ax), np.sin(ax)
            # the time derivative of ball_rate_map's columns (-sy, cy sx, cy cx) and (0, cx, -sx), times their rates
            drift[d:d + 3] = dz * np.array([-cy * dy, cy * cx * dx - sy * sx * dy, -cy * sx * dx - sy * cx * dy]) \
                - dy * dx * np.array([0.0, sx, cx])
        return drift

    def acceleration_to_mujoco(self, x: State, a) -> np.ndarray:
        """MuJoCo's ``qacc`` of lietraj's acceleration ``a = v̇`` at ``x``: ``T a``, plus ``R (ω × v_b)`` on the
        free joint's linear rows and ``Ė φ̇`` on a ball joint's."""
        return self.velocity_map(x) @ finite_vector(a, self.robot.nv, "a") + self._drift(x)

    def acceleration_from_mujoco(self, x: State, qacc) -> np.ndarray:
        """lietraj's ``a = v̇`` at ``x`` of MuJoCo's ``qacc``, the inverse of ``acceleration_to_mujoco``."""
        qacc = finite_vector(qacc, self.model.nv, "qacc") - self._drift(x)
        for k, _, _ in self.ball_joints:
            self._check_gimbal(k, x.s[k + 1])
        T = self.velocity_map(x)
        return np.linalg.solve(T, qacc) if self.ball_joints else T.T @ qacc  # without balls T is orthogonal

    def force_from_mujoco(self, x: State, qfrc) -> np.ndarray:
        """lietraj's generalized force ``τ = Tᵀ qfrc`` (base wrench in the base frame, linear first) of a MuJoCo
        generalized force ``qfrc`` (the free joint's force in the world frame, its torque in the body frame)."""
        return self.velocity_map(x).T @ finite_vector(qfrc, self.model.nv, "qfrc")

    def body_id(self, name: str) -> int:
        """The MuJoCo body holding lietraj's body or frame ``name``: a link on fixed joints gives the moving body
        it is fused into. Raises KeyError for an unknown name, ValueError for a frame fixed in the world."""
        r = self.robot
        if name in r.body_names:
            return int(self.body_ids[r.body_names.index(name)])
        body = r.frames[r.frame_index(name)].body
        if body < 0:
            raise ValueError(f"frame {name!r} of {r.name} is fixed in the world, not on a moving body")
        return int(self.body_ids[body])

    def equivalent_robot(self) -> RobotModel:
        """The lietraj model whose dynamics MuJoCo's model has: ``robot`` with each ``edits.added_inertia`` ``δ I₃``
        added to the body its link is fused into (an isotropic inertia about the link's centre of mass is the same
        in every frame and leaves the mass and centre of mass alone); ``robot`` itself when nothing was added."""
        r, added = self.robot, self.edits.added_inertia
        inertia = np.array(r.inertia, dtype=float)
        for link, delta in added.items():
            body = r.frames[r.frame_index(link)].body
            if body >= 0:
                inertia[body] += delta * np.eye(3)
        return r.replace(inertia=inertia) if added else r


def build_mujoco_model(robot: RobotModel, *, timestep: float = 0.001, floor: bool | None = None,
                       friction: float = 1.0, torque_limits: bool = True, integrator: str = "implicitfast",
                       cone: str = "elliptic", package_dirs: list[str | Path] | None = None) -> MujocoRobot:
    """The MuJoCo model of ``robot``, compiled by MuJoCo from ``robot.source`` (its URDF), and its coordinate maps.

    What the model holds, each choice made so that MuJoCo's dynamics are lietraj's:

    - bodies, inertias, joint axes, collision geometry: MuJoCo's URDF compiler on the file, with
      ``inertiafromgeom="false"`` (a link without ``<inertial>`` has no mass, as in lietraj, instead of the mass of
      its geoms at density 1000) and ``fusestatic`` (links on fixed joints merged into their moving parent, a fixed
      base's root into the world, as lietraj merges them). Links lietraj's model leaves out (``talos_legs`` keeps 13
      of Talos's bodies) are removed from the file with the joints leading to them;
    - inertias MuJoCo rejects (a principal moment below 1e-14, or ``A + B < C``: the rank-one 1e-6 "dummy"
      inertias of the ANYmal, Go1, HyQ and B1 base links; a point mass on a moving body, iCub's hips) get the
      smallest isotropic ``δ I₃`` that passes MuJoCo's tests with a margin, recorded in ``edits.added_inertia``;
      ``equivalent_robot()`` is the lietraj model with the same additions, the one MuJoCo's dynamics equal. A
      massless link with an inertia (Bolt's feet), whose inertia MuJoCo would drop when fusing it, or a massless
      moving body, which MuJoCo rejects, gets 2e-15 kg (``edits.added_mass``; ``_repair_inertial``);
    - collision meshes: ``package://`` paths resolved to absolute paths (``resolve_mesh_path``, searching
      ``package_dirs`` and the URDF's ancestors, so example-robot-data's meshes are found in the installed
      package); meshes MuJoCo cannot read (``MESH_FORMATS``: COLLADA ``.dae``) dropped and listed in
      ``edits.dropped_geoms``; primitives (boxes, spheres, cylinders: the quadrupeds' feet, Talos's soles) and STL/OBJ
      meshes (in contact through their convex hulls) kept. Visual elements are discarded;
    - a floating base: a free joint named ``robot.joint_names[0]`` on the root link (MuJoCo's URDF compiler would
      otherwise weld the jointless root to the world);
    - joints: ``armature`` from ``robot.armature`` (example-robot-data's rotor inertias), zero damping, friction
      loss and stiffness whatever the URDF's ``<dynamics>`` says (lietraj models none of them), position limits
      where the model has ``lower < upper`` (a continuous joint, or a URDF's ``0 0``, is unlimited);
    - one motor per joint, in lietraj's joint order (gear 1: ``ctrl`` is the joint torque), ``ctrlrange`` ± the
      effort limit where the URDF gives a positive finite one and ``torque_limits`` is True, unlimited otherwise;
      no joint-side ``actuatorfrcrange``;
    - contacts robot–floor only (robot geoms ``contype=1, conaffinity=0``, the floor ``contype=0,
      conaffinity=1``: no self-collision), sliding friction ``friction`` on both sides (MuJoCo takes the larger),
      MuJoCo's default torsional and rolling friction, ``condim=3``. ``floor`` (default: True for a floating base)
      adds an infinite plane at ``z = 0``;
    - solver: ``timestep`` seconds, the robot's gravity, ``integrator`` (``"implicitfast"``: implicit in the
      velocity-dependent forces, MuJoCo's recommendation for stiff contact and actuators; or ``"euler"``,
      ``"implicit"``, ``"rk4"``), ``cone`` (``"elliptic"`` Coulomb cones, exact with MuJoCo's default Newton solver,
      or ``"pyramidal"``), MuJoCo's default soft-contact parameters. The automatic reset of a bad state is disabled
      (``mjDSBL_AUTORESET``) so that a diverged state stays in ``MjData`` to be reported.

    Raises ValueError when ``robot`` has no URDF ``source``, for a bad option, when a floor is asked for and no
    collision geometry is left (iCub and Romeo: all their collision meshes are COLLADA), when MuJoCo cannot compile
    the model (its message) or its model does not have lietraj's joints or mass; FileNotFoundError for a collision
    mesh that is not found.
    """
    if robot.source is None:
        raise ValueError(f"robot {robot.name!r} has no URDF source to build a MuJoCo model from")
    if not (timestep > 0 and math.isfinite(timestep)):
        raise ValueError(f"timestep must be a positive number of seconds, got {timestep!r}")
    if not (friction >= 0 and math.isfinite(friction)):
        raise ValueError(f"friction must be a finite coefficient >= 0, got {friction!r}")
    if integrator not in INTEGRATORS or cone not in CONES:
        raise ValueError(f"integrator must be one of {sorted(INTEGRATORS)} and cone one of {sorted(CONES)}, "
                         f"got {integrator!r} and {cone!r}")
    floor = robot.floating_base if floor is None else bool(floor)
    text, edits = _mujoco_urdf(robot, [Path(d) for d in package_dirs or []])
    spec = mujoco.MjSpec.from_string(text)
    if floor and not spec.geoms:
        raise ValueError(f"robot {robot.name!r} has no collision geometry MuJoCo can read (dropped: "
                         f"{', '.join(edits.dropped_geoms) or 'none'}): it would fall through the floor")
    _set_geoms(spec, friction)
    root = spec.body(robot.body_names[0])
    if robot.floating_base and not root.joints:
        root.add_freejoint(name=robot.joint_names[0])
    _set_joints(spec, robot, torque_limits)
    if floor:
        spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05], contype=0,
                                conaffinity=1, friction=[friction, _TORSIONAL_FRICTION, _ROLLING_FRICTION])
    _set_options(spec, robot, timestep, INTEGRATORS[integrator], CONES[cone])
    try:
        model = spec.compile()
    except ValueError as e:
        raise ValueError(f"MuJoCo cannot compile the model of {robot.name!r}: {e}") from None
    return _index_maps(robot, model, spec, edits)


def _mujoco_urdf(robot: RobotModel, package_dirs: list[Path]) -> tuple[str, UrdfEdits]:
    """The URDF text MuJoCo compiles, and what was changed in it.

    Edits of ``robot.source`` (build_mujoco_model): links absent from lietraj's model and the joints leading to
    them removed; ``<visual>`` removed; collision meshes resolved or dropped; inertias MuJoCo rejects repaired; a
    ``<mujoco><compiler>`` element (``strippath="false"`` keeps the absolute mesh paths, which MuJoCo strips from
    a URDF's by default).
    """
    path = Path(robot.source)
    root = ET.parse(path).getroot()
    kept = {f.name for f in robot.frames if f.kind == "body"}
    for element in list(root):
        if element.tag == "mujoco" or (element.tag == "link" and element.get("name") not in kept):
            root.remove(element)
        elif element.tag == "joint" and element.find("child").get("link") not in kept:
            root.remove(element)
    dropped, added_inertia, added_mass = [], {}, {}
    search = package_dirs + list(path.parents)
    for link in root.iter("link"):
        for visual in link.findall("visual"):
            link.remove(visual)
        dropped += _resolve_collision_meshes(link, path.parent, search)
        delta, mass = _repair_inertial(link, link.get("name") in robot.body_names)
        if delta:
            added_inertia[link.get("name")] = delta
        if mass:
            added_mass[link.get("name")] = mass
    ET.SubElement(root, "mujoco").append(ET.Element("compiler", {
        "strippath": "false", "fusestatic": "true", "discardvisual": "true", "inertiafromgeom": "false",
        "balanceinertia": "false", "angle": "radian"}))
    edits = UrdfEdits(tuple(dropped), MappingProxyType(added_inertia), MappingProxyType(added_mass))
    return ET.tostring(root, encoding="unicode"), edits


def _resolve_collision_meshes(link: ET.Element, urdf_dir: Path, search: list[Path]) -> list[str]:
    """Make the link's collision mesh paths absolute; remove the meshes MuJoCo cannot read, returned as
    ``"link: path"``."""
    dropped = []
    for collision in link.findall("collision"):
        mesh = collision.find("geometry/mesh")
        if mesh is None:
            continue
        name = mesh.get("filename", "")
        if name.startswith("package://"):  # talos_full writes package:///pkg/...: the package is the first name
            name = "package://" + name[len("package://"):].lstrip("/")
        filename = resolve_mesh_path(name, urdf_dir, search)
        if Path(filename).suffix.lower() not in MESH_FORMATS:
            link.remove(collision)
            dropped.append(f"{link.get('name')}: {filename}")
        elif not Path(filename).is_file():
            raise FileNotFoundError(f"collision mesh {mesh.get('filename')!r} of link {link.get('name')!r} not found "
                                    f"(searched {', '.join(map(str, search))})")
        else:
            mesh.set("filename", filename)
    return dropped


def _repair_inertial(link: ET.Element, moving: bool) -> tuple[float, float]:
    """Make MuJoCo accept and keep the link's ``<inertial>``; returns the isotropic inertia ``δ`` and the mass added.

    MuJoCo reads a non-zero URDF inertia in full and requires principal moments ``λ₁ <= λ₂ <= λ₃`` with
    ``λ₁ >= 1e-14`` and ``λ₁ + λ₂ >= λ₃``; the smallest ``δ I₃`` passing both with ``_MIN_MOMENT`` and a relative margin
    of ``_REPAIR_MARGIN`` is added. An all-zero inertia stays undefined (zero), except on a moving body, which
    MuJoCo requires to have inertia (iCub's point-mass hip links): it gets ``_MIN_MOMENT``. A link lighter than
    MuJoCo's ``mjMINVAL`` loses its inertia when fused into its parent (Bolt's massless feet), and a moving body
    that light is rejected, so such a link gets the mass ``_MIN_MASS`` when it has an inertia or moves.
    """
    inertial = link.find("inertial")
    inertia = None if inertial is None else inertial.find("inertia")
    if inertia is None:
        return 0.0, 0.0
    keys = ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")
    ixx, iyy, izz, ixy, ixz, iyz = (float(inertia.get(k, 0.0)) for k in keys)
    zero = not any((ixx, iyy, izz, ixy, ixz, iyz))
    if zero:
        delta = _MIN_MOMENT if moving else 0.0
    else:
        lam = np.linalg.eigvalsh(np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]]))
        margin = _REPAIR_MARGIN * abs(lam[2])
        # λᵢ + δ passes both tests with the margin: λ₁ + δ >= min + margin, (λ₁ + δ) + (λ₂ + δ) >= (λ₃ + δ) + margin.
        delta = float(max(_MIN_MOMENT + margin - lam[0], lam[2] + margin - lam[0] - lam[1], 0.0))
    for key in ("ixx", "iyy", "izz") if delta > 0 else ():
        inertia.set(key, repr(float(inertia.get(key, 0.0)) + delta))
    mass = inertial.find("mass")
    value = 0.0 if mass is None else float(mass.get("value", 0.0))
    if value >= _MIN_MASS or (zero and not moving):
        return delta, 0.0
    if mass is None:
        mass = ET.SubElement(inertial, "mass")
    mass.set("value", repr(_MIN_MASS))
    return delta, _MIN_MASS - value


def _set_geoms(spec: mujoco.MjSpec, friction: float) -> None:
    """Name each collision geom after its URDF link (``link``, or ``link_k`` when it has several) so that geoms
    fused into a moving body keep a name (``contact_forces`` reports by it); make it collide with the floor only,
    with sliding friction ``friction``."""
    for body in spec.bodies:
        geoms = body.geoms
        for k, geom in enumerate(geoms):
            geom.name = body.name if len(geoms) == 1 else f"{body.name}_{k}"
            geom.contype, geom.conaffinity, geom.condim = 1, 0, 3
            geom.friction = [friction, _TORSIONAL_FRICTION, _ROLLING_FRICTION]


def _set_joints(spec: mujoco.MjSpec, robot: RobotModel, torque_limits: bool) -> None:
    """Armature, no damping/friction loss/stiffness, position limits and one motor per joint (build_mujoco_model)."""
    base = robot.nv - robot.n
    for k, name in enumerate(robot.actuated_joint_names):
        joint = spec.joint(name)
        joint.armature = float(robot.armature[base + k])
        joint.damping = np.zeros_like(joint.damping)
        joint.stiffness = np.zeros_like(joint.stiffness)
        joint.frictionloss = 0.0
        joint.actfrclimited = mujoco.mjtLimited.mjLIMITED_FALSE
        lower, upper = float(robot.lower_limit[k]), float(robot.upper_limit[k])
        limited = not robot.continuous[k] and math.isfinite(lower) and math.isfinite(upper) and lower < upper
        joint.limited = mujoco.mjtLimited.mjLIMITED_TRUE if limited else mujoco.mjtLimited.mjLIMITED_FALSE
        if limited:
            joint.range = [lower, upper]
        motor = spec.add_actuator(name=name, target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        motor.set_to_motor()
        effort = float(robot.effort_limit[k])
        if torque_limits and 0 < effort < math.inf:
            motor.ctrllimited, motor.ctrlrange = mujoco.mjtLimited.mjLIMITED_TRUE, [-effort, effort]
        else:
            motor.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE


def _set_options(spec: mujoco.MjSpec, robot: RobotModel, timestep: float, integrator, cone) -> None:
    option = spec.option
    option.timestep = timestep
    option.gravity = np.asarray(robot.gravity, dtype=float)
    option.integrator = integrator
    option.cone = cone
    option.disableflags |= mujoco.mjtDisableBit.mjDSBL_AUTORESET


def _index_maps(robot: RobotModel, model: mujoco.MjModel, spec: mujoco.MjSpec, edits: UrdfEdits) -> MujocoRobot:
    """The ``MujocoRobot`` of a compiled model, after checking that it has lietraj's joints and mass."""
    names = robot.actuated_joint_names
    joint_ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name) for name in names]
    missing = [name for name, j in zip(names, joint_ids) if j < 0]
    nq = robot.n + (7 if robot.floating_base else 0)
    if missing or model.nv != robot.nv or model.nq != nq or model.nu != robot.n:
        raise ValueError(f"MuJoCo's model of {robot.name!r} (nq={model.nq}, nv={model.nv}) does not have lietraj's "
                         f"joints (nq={nq}, nv={robot.nv}){'; missing: ' + ', '.join(missing) if missing else ''}")
    if robot.floating_base and (model.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE or model.jnt_dofadr[0] != 0):
        raise ValueError(f"MuJoCo's model of {robot.name!r} does not start with the free joint of its base")
    mass = float(model.body_subtreemass[0])
    if not math.isclose(mass, robot.total_mass, rel_tol=1e-9, abs_tol=1e-12):
        raise ValueError(f"MuJoCo's model of {robot.name!r} weighs {mass} kg, lietraj's {robot.total_mass} kg")
    body_ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name) for name in robot.body_names]
    floor = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    return MujocoRobot(robot, model, spec, edits, _index_array(model.jnt_qposadr[joint_ids]),
                       _index_array(model.jnt_dofadr[joint_ids]), _index_array(body_ids), floor)


def mjcf_maps(robot: RobotModel, model: mujoco.MjModel) -> MujocoRobot:
    """The coordinate maps between ``robot``, read by ``load_mjcf`` from ``model``, and ``model``: a ``MujocoRobot``
    without ``spec`` (``edits`` empty, ``floor_geom`` -1), so that a lietraj state and MuJoCo's ``qpos, qvel`` (and
    accelerations, generalized forces, mass matrices) convert both ways. Joints are found by name, a ball joint's
    angles by their names ``"<joint>/z"``, ``"/y"``, ``"/x"``, each lietraj body's MuJoCo body by its joint. A
    robot with mimic joints: pass its ``expanded`` model (MuJoCo keeps the followers' coordinates). Raises
    ValueError naming what the model does not have."""
    names, ball = robot.actuated_joint_names, mujoco.mjtJoint.mjJNT_BALL

    def joint(name: str) -> int:
        return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)

    def ball_of(name: str) -> int:
        """The MuJoCo ball joint whose angle lietraj's joint ``name`` is, or -1."""
        prefix, _, letter = name.rpartition("/")
        j = joint(prefix) if letter in ("z", "y", "x") else -1
        return j if j >= 0 and model.jnt_type[j] == ball else -1

    qpos_index, dof_index, balls, missing = [], [], [], []
    for k, name in enumerate(names):
        j = joint(name)
        if j >= 0:
            qpos_index.append(model.jnt_qposadr[j])
            dof_index.append(model.jnt_dofadr[j])
            continue
        j = ball_of(name)
        if j < 0:
            missing.append(name)
            continue
        angle = "zyx".index(name[-1])
        if angle == 0:
            balls.append((k, int(model.jnt_qposadr[j]), int(model.jnt_dofadr[j])))
        qpos_index.append(-1)
        dof_index.append(model.jnt_dofadr[j] + angle)
    if missing or model.nv != robot.nv:
        raise ValueError(f"the MuJoCo model (nv={model.nv}) does not have the joints of {robot.name!r} (nv={robot.nv})"
                         + (f"; missing: {', '.join(missing)}" if missing else " (mimic joints: pass robot.expanded)"))
    body_ids = []
    for name in robot.joint_names:
        j = joint(name)
        body_ids.append(model.jnt_bodyid[j if j >= 0 else ball_of(name)])
    return MujocoRobot(robot, model, None, UrdfEdits(), _index_array(qpos_index), _index_array(dof_index),
                       _index_array(body_ids), -1, tuple(balls))


def _index_array(a) -> np.ndarray:
    a = np.array(a, dtype=np.int64)
    a.flags.writeable = False
    return a


def finite_vector(a, size: int, name: str) -> np.ndarray:
    """``a`` as a float array of shape ``(size,)`` with finite entries, else ValueError naming it."""
    a = np.asarray(a, dtype=float)
    if a.shape != (size,):
        raise ValueError(f"{name} must have shape ({size},), got {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or inf: {a.tolist()}")
    return a
