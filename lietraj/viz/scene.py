"""Meshcat scene of a robot: its URDF visuals placed by forward kinematics, and animations of trajectories.

``RobotViewer`` records the scene, draws a trajectory's extras (ghosts, a moving plan ghost, centre of mass,
contact forces, targets), serves it live (``lietraj.viz.server``) and redraws a solver's iterates;
``lietraj.viz.html`` writes it to a page.

The scene is a tree of meshcat nodes under ``/meshcat/<model name>``::

    robot/<body>            one node per body; its transform is the body's world pose (``body_placements``)
    robot/<body>/<visual>   one node per visual: transform = the visual's pose in the body frame, object = its
                            mesh or primitive (scale and the primitive's own axes in the object's matrix)
    robot/world/<visual>    visuals of links fixed in the world (a fixed base's base link)
    ghosts/<k>/...          translucent copies of the robot at knot k
    plan/<body>/<visual>    a translucent copy that moves with the robot (``animate(plan=...)``: one state per knot)
    com/line, com/marker    the centre-of-mass path and a sphere following it
    forces/<i>/shaft|head   one arrow per contact i, from the contact point along the world force
    targets/<name>          small spheres at world points, fixed or moving

so that showing a state sets ``nb`` transforms and an animation has one position and one quaternion track per
body. Poses are 4x4 world matrices (README, Conventions); three.js wants them column major and its quaternions as
``(x, y, z, w)``. Meshcat primitives follow three.js, whose cylinders lie along y: a URDF cylinder (along z)
gets the rotation ``Rx(+90°)`` (y -> z) in its object matrix.

A mesh keeps its file's own materials (DAE colours and textures, OBJ + MTL) when the URDF gives no colour;
otherwise, and for STL, it is drawn in the URDF colour (``DEFAULT_RGBA`` without one); ``lietraj.viz.meshes``
reads and repairs the files.

Every change goes through one scene state (the latest command per node and kind), which a live server replays
to browsers that connect late and ``lietraj.viz.html`` writes into a self-contained page. Besides meshcat's own
commands, the state holds one of ours, ``SetCamera`` (``lietraj_camera``), which the page script of
``lietraj.viz.page`` handles.

This module imports meshcat (which imports IPython and zmq): ``lietraj.viz`` loads it only when a scene is
built.
"""

from __future__ import annotations

import itertools
import math
import operator
import threading
import time
import webbrowser
from collections.abc import Callable, Mapping, Sequence

import meshcat.geometry as mg
import numpy as np
import umsgpack
from meshcat.animation import Animation, AnimationClip, AnimationTrack
from meshcat.commands import Delete, SetAnimation, SetObject, SetTransform
from meshcat.path import Path

from lietraj.dynamics.kinematics.center_of_mass import center_of_mass
from lietraj.dynamics.kinematics.kinematics import body_placements, frame_placements
from lietraj.dynamics.lie.state import State, Trajectory
from lietraj.dynamics.model.model import RobotModel, Visual
from lietraj.viz.meshes import MeshFiles, mesh_payload, mtl_library
from lietraj.viz.server import LiveServer

DEFAULT_RGBA = (0.7, 0.7, 0.72, 1.0)
GHOST_COLOR, GHOST_OPACITY = 0x4f86d9, 0.3
COM_COLOR, FORCE_COLOR, TARGET_COLOR = 0xff8c00, 0xd62728, 0x2ca02c
CAMERA_FOV = 75.0  # meshcat's default perspective camera (degrees, vertical)
_RX90 = np.array([[1.0, 0, 0, 0], [0, 0, -1, 0], [0, 1, 0, 0], [0, 0, 0, 1]])  # three.js y axis -> URDF z axis


def color_int(rgb) -> int:
    """``0xRRGGBB`` of a colour with components in [0, 1]."""
    red, green, blue = (int(round(255 * min(max(float(level), 0.0), 1.0))) for level in rgb[:3])
    return (red << 16) | (green << 8) | blue


def quaternions_xyzw(R: np.ndarray) -> np.ndarray:
    """Unit quaternions ``(x, y, z, w)`` (..., 4) of rotation matrices (..., 3, 3) (Shepperd's method: the
    largest of ``w, x, y, z`` is taken from the diagonal, the others from off-diagonal sums; ``wx`` is ``4 w x``,
    and so on, and ``s`` four times the largest)."""
    m = np.asarray(R, dtype=float)
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    wx, wy = m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0]
    wz, xy = m[..., 1, 0] - m[..., 0, 1], m[..., 0, 1] + m[..., 1, 0]
    xz, yz = m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1]
    big = np.stack([m00 + m11 + m22, m00, m11, m22], axis=-1).argmax(axis=-1)[..., None]
    s = 2.0 * np.sqrt(np.maximum(1.0 + np.stack([m00 + m11 + m22, m00 - m11 - m22, -m00 + m11 - m22,
                                                 -m00 - m11 + m22], axis=-1), 1e-300))
    s = np.take_along_axis(s, big, axis=-1)[..., 0]
    cases = np.stack([np.stack([wx / s, wy / s, wz / s, s / 4], -1), np.stack([s / 4, xy / s, xz / s, wx / s], -1),
                      np.stack([xy / s, s / 4, yz / s, wy / s], -1), np.stack([xz / s, yz / s, s / 4, wz / s], -1)],
                     -2)
    q = np.take_along_axis(cases, big[..., None], axis=-2)[..., 0, :]
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def _continuous(q: np.ndarray) -> np.ndarray:
    """Quaternion tracks (N, ..., 4) with signs chosen so that consecutive keys are in the same hemisphere."""
    q = q.copy()
    for k in range(1, q.shape[0]):
        q[k] *= np.where(np.sum(q[k] * q[k - 1], axis=-1, keepdims=True) < 0.0, -1.0, 1.0)
    return q


def _node_name(name: str) -> str:
    """A meshcat path component: meshcat splits paths at '/'."""
    return name.replace("/", "_") or "_"


def _path(path: str) -> Path:
    """The meshcat path of the node at ``path`` ("/meshcat/...")."""
    return Path(tuple(part for part in path.split("/") if part))


def _matrix_list(T: np.ndarray) -> list[float]:
    """A 4x4 matrix as three.js stores it: column major."""
    return np.asarray(T, dtype=float).T.ravel().tolist()


class _Geometry(mg.Geometry):
    """A three.js geometry given as its JSON record (``type`` and parameters)."""

    def __init__(self, record: dict):
        super().__init__()
        self.record = record

    def lower(self, object_data):
        return {"uuid": self.uuid, **self.record}


class _Mesh(mg.Mesh):
    """A three.js mesh whose object matrix (scale, primitive axes) is given explicitly."""

    def __init__(self, geometry: mg.Geometry, material: mg.Material, matrix: np.ndarray):
        super().__init__(geometry, material)
        self.matrix = matrix

    def lower(self):
        record = super().lower()
        record["object"]["matrix"] = _matrix_list(self.matrix)
        return record


class _MeshFileObject(mg.Object):
    """A mesh file drawn with its own materials (meshcat's ``_meshfile_object``): DAE colours and textures (its
    images inlined), OBJ with its MTL library ``mtl``."""

    def __init__(self, payload, mesh_format: str, matrix: np.ndarray, mtl: str | None):
        mg.SceneElement.__init__(self)
        self.payload, self.mesh_format, self.matrix, self.mtl = payload, mesh_format, matrix, mtl

    def lower(self):
        record = {"uuid": self.uuid, "type": "_meshfile_object", "format": self.mesh_format, "data": self.payload,
                  "resources": {}, "matrix": _matrix_list(self.matrix)}
        if self.mtl is not None:
            record["mtl_library"] = self.mtl
        return {"metadata": {"version": 4.5, "type": "Object"}, "geometries": [], "materials": [], "object": record}


class SetCamera:
    """Our camera command (``lietraj_camera``): world ``position`` and ``target`` of meshcat's default camera,
    z up. The page script (``lietraj.viz.page.VIEWER_SCRIPT``) applies it; meshcat itself has no such command."""

    def __init__(self, position, target):
        self.position = [float(coordinate) for coordinate in position]
        self.target = [float(coordinate) for coordinate in target]

    def lower(self):
        return {"type": "lietraj_camera", "path": "", "position": self.position, "target": self.target}


def _visual_object(visual: Visual, files: MeshFiles, model_name: str, ghost: bool = False) -> mg.Object:
    """The meshcat object of one visual, in the visual's own frame. A mesh without a URDF colour keeps the
    materials of its file (DAE, OBJ) or gets ``DEFAULT_RGBA`` (STL); ghosts get one translucent colour."""
    rgba = DEFAULT_RGBA if visual.rgba is None else tuple(float(level) for level in visual.rgba)
    if ghost:
        material = mg.MeshPhongMaterial(color=GHOST_COLOR, opacity=GHOST_OPACITY, transparent=True, depthWrite=False)
    else:
        material = mg.MeshPhongMaterial(color=color_int(rgba), opacity=rgba[3], transparent=rgba[3] < 1.0)
    matrix = np.eye(4)
    if visual.shape == "mesh":
        contents, mesh_format = files.read(visual, model_name)
        scale = np.ones(3) if visual.scale is None else np.asarray(visual.scale, dtype=float)
        matrix[:3, :3] = np.diag(scale)
        if visual.rgba is None and mesh_format != "stl" and not ghost:
            payload = mesh_payload(contents, mesh_format, visual.filename, textured=True)
            mtl = mtl_library(visual.filename, payload) if mesh_format == "obj" else None
            return _MeshFileObject(payload, mesh_format, matrix, mtl)
        payload = mesh_payload(contents, mesh_format, visual.filename, textured=False)
        geometry = _Geometry({"type": "_meshfile_geometry", "format": mesh_format, "data": payload})
    elif visual.shape == "box":
        size_x, size_y, size_z = (float(side) for side in visual.size)
        geometry = _Geometry({"type": "BoxGeometry", "width": size_x, "height": size_y, "depth": size_z})
    elif visual.shape == "sphere":
        geometry = _Geometry({"type": "SphereGeometry", "radius": float(visual.radius), "widthSegments": 24,
                              "heightSegments": 16})
    elif visual.shape == "cylinder":
        radius = float(visual.radius)
        geometry = _Geometry({"type": "CylinderGeometry", "radiusTop": radius, "radiusBottom": radius,
                              "height": float(visual.length), "radialSegments": 32})
        matrix = _RX90
    else:
        raise ValueError(f"{model_name}: visual {visual.name!r} has an unknown shape {visual.shape!r}")
    return _Mesh(geometry, material, matrix)


def _overlay(color: int, material_type=mg.MeshPhongMaterial) -> mg.Material:
    """A material drawn over the robot: contact forces and the CoM are mostly inside it. Transparent objects are
    drawn after the opaque ones, and these ignore the depth buffer."""
    return material_type(color=color, opacity=0.95, transparent=True, depthTest=False, depthWrite=False)


def _arrow_part(length: float, radius_top: float, radius_bottom: float, color: int) -> _Mesh:
    """A cylinder or cone along +z from 0 to ``length``, drawn over the robot."""
    geometry = _Geometry({"type": "CylinderGeometry", "radiusTop": radius_top, "radiusBottom": radius_bottom,
                          "height": length, "radialSegments": 16})
    matrix = _RX90.copy()
    matrix[2, 3] = 0.5 * length
    return _Mesh(geometry, _overlay(color), matrix)


def _sphere(radius: float, material: mg.Material) -> _Mesh:
    return _Mesh(_Geometry({"type": "SphereGeometry", "radius": radius, "widthSegments": 16, "heightSegments": 12}),
                 material, np.eye(4))


def _rotations_z_to(d: np.ndarray) -> np.ndarray:
    """Rotations (..., 3, 3) taking +z onto the directions of ``d`` (..., 3) (identity where ``d`` is ~0)."""
    n = np.linalg.norm(d, axis=-1, keepdims=True)
    u = np.where(n > 1e-12, d / np.maximum(n, 1e-300), [0.0, 0.0, 1.0])
    # Rodrigues about z x u (cosine uz, h = 1 / (1 + uz)); the antipodal case is the half turn about x.
    ux, uy, uz = u[..., 0], u[..., 1], u[..., 2]
    h = np.where(uz > -1.0 + 1e-12, 1.0 / (1.0 + np.maximum(uz, -1.0 + 1e-12)), 0.0)
    R = np.empty(u.shape[:-1] + (3, 3))
    R[..., 0, 0], R[..., 0, 1], R[..., 0, 2] = 1.0 - h * ux * ux, -h * ux * uy, ux
    R[..., 1, 0], R[..., 1, 1], R[..., 1, 2] = -h * ux * uy, 1.0 - h * uy * uy, uy
    R[..., 2, 0], R[..., 2, 1], R[..., 2, 2] = -ux, -uy, uz
    flip = uz <= -1.0 + 1e-12
    R[flip] = np.diag([1.0, -1.0, -1.0])
    return R


def _clip(knots: int, position=None, quaternion=None, scale=None, fps: float = 30.0) -> AnimationClip:
    """A meshcat clip with one key per knot ``0..knots-1`` (one animation frame each) for each given (knots, k)
    value array."""
    tracks = {}
    for name, jstype, values in (("position", "vector3", position), ("quaternion", "quaternion", quaternion),
                                 ("scale", "vector3", scale)):
        if values is not None:
            tracks[name] = AnimationTrack(name, jstype, list(range(knots)), np.asarray(values, float).tolist())
    return AnimationClip(tracks=tracks, fps=fps)


def _body_clips(placements: np.ndarray, paths: Sequence[str], fps: float) -> dict[Path, AnimationClip]:
    """One clip per body node (``paths``) through its world poses ``placements`` (N, nb, 4, 4)."""
    q = _continuous(quaternions_xyzw(placements[..., :3, :3]))
    return {_path(path): _clip(len(placements), placements[:, b, :3, 3], q[:, b], fps=fps)
            for b, path in enumerate(paths)}


def _placements(model: RobotModel, xs: Trajectory, what: str) -> np.ndarray:
    if not isinstance(xs, Trajectory):
        raise TypeError(f"{what}: xs must be a Trajectory, got {type(xs).__name__}")
    if len(xs) == 0:
        raise ValueError(f"{what}: xs has no knot")
    return body_placements(model, xs)


def _check_dt(dt: float, what: str) -> float:
    dt = float(dt)
    if not (math.isfinite(dt) and dt > 0.0):
        raise ValueError(f"{what}: dt must be a positive finite time step, got {dt}")
    return dt


def _check_points(name: str, value, shape: tuple[int | None, ...], what: str) -> np.ndarray:
    a = np.asarray(value, dtype=float)
    if a.ndim != len(shape) or any(want is not None and want != got for want, got in zip(shape, a.shape)):
        expected = "(" + ", ".join("*" if want is None else str(want) for want in shape) + ")"
        raise ValueError(f"{what}: {name} has shape {a.shape}, expected {expected}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: {name} contains NaN or inf")
    return a


def _check_targets(targets: Mapping[str, np.ndarray] | None, what: str) -> dict[str, np.ndarray]:
    return {str(name): _check_points(f"target {name!r}", p, (3,), what) for name, p in (targets or {}).items()}


def camera_framing(points: np.ndarray, azimuth: float = 35.0, elevation: float = 20.0,
                   margin: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Camera ``(position, target)`` (world) looking at the centre of the bounding box of ``points`` (M, 3)
    from ``azimuth`` (degrees from +x towards -y) and ``elevation`` above the horizon, at the distance where
    the box fits in meshcat's 75° field of view (a square window; ``margin`` >= 1 leaves room around it)."""
    lo, hi = points.min(axis=0), points.max(axis=0)
    # Frame origins sit inside the links: pad for the shells around them.
    pad = 0.08 * max(float(np.max(hi - lo)), 0.3)
    lo, hi = lo - pad, hi + pad
    target = 0.5 * (lo + hi)
    az, el = math.radians(azimuth), math.radians(elevation)
    back = np.array([math.cos(el) * math.cos(az), -math.cos(el) * math.sin(az), math.sin(el)])
    right = np.cross(-back, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, -back)
    corners = np.array(list(itertools.product(*zip(lo, hi)))) - target
    # A corner at lateral offsets (a, b), c nearer the camera than the target, is in view when
    # max(|a|, |b|) <= tan(fov/2) (d - c).
    lateral = np.maximum(np.abs(corners @ right), np.abs(corners @ up))
    distance = float(np.max(lateral / math.tan(math.radians(0.5 * CAMERA_FOV)) + corners @ back))
    return target + margin * distance * back, target


class RobotViewer:
    """A meshcat scene of ``model``: ``display`` a state, ``animate`` a trajectory with optional extras, serve it
    live to a browser (``serve``) or write it to a self-contained page (``lietraj.viz.html.save_html``).

    Without ``serve`` nothing runs: the viewer only records the scene. Meshes are read when the viewer is made,
    so a missing or unknown mesh file fails here (ValueError), not in the browser.
    """

    def __init__(self, model: RobotModel):
        self.model = model
        self.root = f"/meshcat/{_node_name(model.name)}"
        self.body_paths = tuple(f"{self.root}/robot/{_node_name(name)}" for name in model.body_names)
        self._files = MeshFiles()
        self._visual_nodes: list[tuple[int, str]] = []
        seen: set[str] = set()
        for index, v in enumerate(model.visuals):
            name = _node_name(v.name) if v.name and _node_name(v.name) not in seen else f"visual_{index}"
            seen.add(name)
            self._visual_nodes.append((v.body, name))
        self._state: dict[tuple[str, str], object] = {}
        self._lock = threading.Lock()
        self._server: LiveServer | None = None
        for path, obj, pose in self._robot_objects(f"{self.root}/robot", ghost=False):
            self._send(SetObject(obj, path=_path(path)))
            self._send(SetTransform(pose, _path(path)))

    # --- scene state -------------------------------------------------------------------------------------

    def _send(self, command) -> None:
        """Record ``command`` in the scene state and forward it to live browsers."""
        if isinstance(command, SetAnimation):
            key = ("", "animation")
        elif isinstance(command, SetCamera):
            key = ("", "camera")
        else:
            kind = "object" if isinstance(command, SetObject) else "transform"
            key = (command.path.lower(), kind)
        with self._lock:
            if isinstance(command, Delete):
                prefix = command.path.lower()
                for key in [key for key in self._state if key[0] == prefix or key[0].startswith(prefix + "/")]:
                    del self._state[key]
            else:
                self._state.pop(key, None)  # re-inserted last: replay keeps the order of the latest changes
                self._state[key] = command
        if self._server is not None:
            self._server.broadcast(umsgpack.packb(command.lower()))

    def commands(self) -> list:
        """The current scene as meshcat commands (and our ``SetCamera``), in the order to replay them: objects,
        transforms and camera as last set, then the animation."""
        with self._lock:
            items = list(self._state.items())
        return ([command for key, command in items if key[1] != "animation"]
                + [command for key, command in items if key[1] == "animation"])

    def _robot_objects(self, prefix: str, ghost: bool):
        """``(path, object, pose in the body frame)`` of every visual, under body nodes ``prefix/<body>``; the
        visuals of links fixed in the world (body -1) under ``prefix/world``, which never moves (and which
        ghosts leave out)."""
        names = self.model.body_names
        for v, (body, name) in zip(self.model.visuals, self._visual_nodes):
            if body < 0 and ghost:
                continue
            pose = np.eye(4)
            pose[:3, :3], pose[:3, 3] = v.R, v.p
            node = "world" if body < 0 else _node_name(names[body])
            yield f"{prefix}/{node}/{name}", _visual_object(v, self._files, self.model.name, ghost=ghost), pose

    def _set_bodies(self, placements: np.ndarray, prefix: str | None = None) -> None:
        paths = self.body_paths if prefix is None else [f"{prefix}/{_node_name(name)}" for name in self.model.body_names]
        for path, T in zip(paths, placements):
            self._send(SetTransform(T, _path(path)))

    def _clear_extras(self) -> None:
        for part in ("ghosts", "plan", "com", "forces", "targets"):
            if any(key[0].startswith(f"{self.root}/{part}/") for key in list(self._state)):
                self._send(Delete(_path(f"{self.root}/{part}")))

    def _draw_targets(self, targets: dict[str, np.ndarray], radius: float) -> None:
        for name, p in targets.items():
            path = _path(f"{self.root}/targets/{_node_name(name)}")
            self._send(SetObject(_sphere(radius, mg.MeshPhongMaterial(color=TARGET_COLOR)), path=path))
            T = np.eye(4)
            T[:3, 3] = p
            self._send(SetTransform(T, path))

    def _moving_sphere(self, path, radius: float, color: int, positions: np.ndarray, fps: float) -> AnimationClip:
        """A sphere at ``path`` placed at the first of ``positions`` (N, 3), and its clip through all of them."""
        self._send(SetObject(_sphere(radius, _overlay(color)), path=path))
        T = np.eye(4)
        T[:3, 3] = positions[0]
        self._send(SetTransform(T, path))
        return _clip(len(positions), position=positions, fps=fps)

    def _origins(self, x: State | Trajectory, placements: np.ndarray) -> np.ndarray:
        """World origins (M, 3) of the bodies and of all frames (links, joints, feet, tools) at ``x``, knot by
        knot for a trajectory."""
        frame_origins = frame_placements(self.model, x)[..., :3, 3]
        return np.concatenate([placements[..., :3, 3], frame_origins], axis=-2).reshape(-1, 3)

    @staticmethod
    def _robot_size(origins: np.ndarray) -> float:
        """A length scale of the robot (m): the spread of its frame origins, at least 0.3 m."""
        return max(float(np.max(origins.max(axis=0) - origins.min(axis=0))), 0.3)

    def _aim_camera(self, points: np.ndarray) -> None:
        """Aim the camera at ``points`` unless it has been aimed already (a browser's view is not reset at
        every iterate of a solve)."""
        if ("", "camera") not in self._state:
            self._send(SetCamera(*camera_framing(points)))

    # --- public API ----------------------------------------------------------------------------------------

    def set_camera(self, position, target) -> None:
        """Put the camera at world ``position`` looking at world ``target`` (z up). Otherwise the first
        ``display`` or ``animate`` aims it at what it draws, and later ones keep the camera where it is."""
        position = _check_points("position", position, (3,), "set_camera")
        target = _check_points("target", target, (3,), "set_camera")
        if np.allclose(position, target):
            raise ValueError("set_camera: position and target coincide")
        self._send(SetCamera(position, target))

    def display(self, x: State, targets: Mapping[str, np.ndarray] | None = None) -> None:
        """Show the robot at state ``x`` (stops any animation; removes ghosts, CoM path, force arrows) and the
        ``targets`` (name -> world point) as small spheres."""
        if not isinstance(x, State):
            raise TypeError(f"display: x must be a State, got {type(x).__name__}")
        placements = body_placements(self.model, x)
        origins = self._origins(x, placements)
        targets = _check_targets(targets, "display")
        self._clear_extras()
        self._send(SetAnimation(Animation(), play=False))
        self._set_bodies(placements)
        self._draw_targets(targets, 0.03 * self._robot_size(origins))
        self._aim_camera(np.vstack([origins, *(p[None] for p in targets.values())]))

    def animate(self, xs: Trajectory, dt: float, *, ghosts: Sequence[int] = (), plan: Trajectory | None = None,
                com: bool = False, contact_points=None, contact_forces=None, force_scale: float | None = None,
                targets: Mapping[str, np.ndarray] | None = None, loop: bool = True) -> None:
        """Play the trajectory ``xs`` (N knots ``dt`` seconds apart) in real time, looping unless ``loop=False``.

        Extras: ``ghosts`` (knot indices, negative from the end) drawn as fixed translucent copies; ``plan`` (a
        Trajectory of N states of the same robot) as a translucent copy that moves with the robot, at ``plan[k]``
        while the robot is at ``xs[k]`` (e.g. where a controller is heading); ``com`` draws the centre-of-mass path
        and a marker on it; ``contact_points`` and ``contact_forces`` (N or N-1, nc, 3; world frame; N-1 = one per
        running knot, the last held) draw one arrow per contact, ``force_scale`` metres per newton (default: the
        robot's weight is drawn as long as the robot); ``targets`` (name -> world point (3,), or one point per
        knot (N, 3) for a target that moves) as small spheres; a moving one is drawn over the robot, since what
        moves is often inside it (a centre-of-mass reference)."""
        what = "animate"
        dt = _check_dt(dt, what)
        placements = _placements(self.model, xs, what)
        origins = self._origins(xs, placements)
        N = placements.shape[0]
        if plan is not None:
            plan_placements = _placements(self.model, plan, f"{what}: plan")
            if plan_placements.shape[0] != N:
                raise ValueError(f"{what}: plan has {plan_placements.shape[0]} states, expected one per knot ({N})")
        robot_size = self._robot_size(origins[:len(origins) // N])  # at the first knot
        ghost_knots = []
        for k in ghosts:
            k = operator.index(k)
            if not -N <= k < N:
                raise ValueError(f"{what}: ghost knot {k} is outside the trajectory (N = {N})")
            ghost_knots.append(k % N)
        if (contact_points is None) != (contact_forces is None):
            raise ValueError(f"{what}: give both contact_points and contact_forces, or neither")
        if contact_points is not None:
            P = _check_points("contact_points", contact_points, (None, None, 3), what)
            F = _check_points("contact_forces", contact_forces, P.shape, what)
            if P.shape[0] not in (N, N - 1):
                raise ValueError(f"{what}: contact arrays have {P.shape[0]} knots, expected {N} or {N - 1}")
            if P.shape[0] == N - 1:
                P, F = np.concatenate([P, P[-1:]]), np.concatenate([F, F[-1:]])
        if force_scale is not None and not (math.isfinite(force_scale) and force_scale > 0):
            raise ValueError(f"{what}: force_scale must be positive, got {force_scale}")
        fixed_targets, moving_targets = {}, {}
        for name, p in (targets or {}).items():
            if np.ndim(p) == 2:
                moving_targets[str(name)] = _check_points(f"target {name!r}", p, (N, 3), what)
            else:
                fixed_targets[str(name)] = _check_points(f"target {name!r}", p, (3,), what)

        self._clear_extras()
        fps = 1.0 / dt
        clips = _body_clips(placements, self.body_paths, fps)
        self._set_bodies(placements[0])
        points = [origins]

        for k in ghost_knots:
            prefix = f"{self.root}/ghosts/{k}"
            for path, obj, pose in self._robot_objects(prefix, ghost=True):
                self._send(SetObject(obj, path=_path(path)))
                self._send(SetTransform(pose, _path(path)))
            self._set_bodies(placements[k], prefix)

        if plan is not None:
            prefix = f"{self.root}/plan"
            for path, obj, pose in self._robot_objects(prefix, ghost=True):
                self._send(SetObject(obj, path=_path(path)))
                self._send(SetTransform(pose, _path(path)))
            self._set_bodies(plan_placements[0], prefix)
            paths = [f"{prefix}/{_node_name(name)}" for name in self.model.body_names]
            clips.update(_body_clips(plan_placements, paths, fps))
            points.append(plan_placements[..., :3, 3].reshape(-1, 3))

        if com:
            com_points = center_of_mass(self.model, xs)
            line = mg.Line(mg.PointsGeometry(com_points.T.astype(np.float32)),
                           _overlay(COM_COLOR, mg.LineBasicMaterial))
            self._send(SetObject(line, path=_path(f"{self.root}/com/line")))
            marker = _path(f"{self.root}/com/marker")
            clips[marker] = self._moving_sphere(marker, 0.025 * robot_size, COM_COLOR, com_points, fps)

        if contact_points is not None:
            metres_per_newton = force_scale if force_scale is not None else robot_size / (
                self.model.total_mass * float(np.linalg.norm(self.model.gravity)))
            radius, head_length = 0.008 * robot_size, 0.06 * robot_size
            # Zero forces get a tiny length: three.js inverts the scale for normals.
            length = np.maximum(metres_per_newton * np.linalg.norm(F, axis=-1), 1e-6)  # (N, nc)
            qf = _continuous(quaternions_xyzw(_rotations_z_to(F)))
            direction = F / np.maximum(np.linalg.norm(F, axis=-1, keepdims=True), 1e-300)
            ones = np.ones(N)
            for i in range(P.shape[1]):
                shaft_path, head_path = _path(f"{self.root}/forces/{i}/shaft"), _path(f"{self.root}/forces/{i}/head")
                self._send(SetObject(_arrow_part(1.0, radius, radius, FORCE_COLOR), path=shaft_path))
                self._send(SetObject(_arrow_part(head_length, 0.0, 2.5 * radius, FORCE_COLOR), path=head_path))
                clips[shaft_path] = _clip(N, P[:, i], qf[:, i], np.stack([ones, ones, length[:, i]], -1), fps=fps)
                # The head shrinks with short arrows so that a zero force draws nothing.
                head_scale = np.minimum(1.0, length[:, i] / (2.0 * head_length))[:, None] * np.ones(3)
                clips[head_path] = _clip(N, P[:, i] + length[:, i, None] * direction[:, i], qf[:, i], head_scale,
                                         fps=fps)
            points.append(P.reshape(-1, 3))

        self._draw_targets(fixed_targets, 0.03 * robot_size)
        for name, p in moving_targets.items():
            path = _path(f"{self.root}/targets/{_node_name(name)}")
            clips[path] = self._moving_sphere(path, 0.03 * robot_size, TARGET_COLOR, p, fps)
        points += [p.reshape(-1, 3) for p in (*fixed_targets.values(), *moving_targets.values())]
        self._aim_camera(np.vstack(points))
        self._send(SetAnimation(Animation(clips=clips), play=True, repetitions=math.inf if loop else 1))

    def solver_callback(self, dt: float, min_interval: float = 0.2, **extras) -> Callable[[object], None]:
        """A solver ``callback`` that animates each iterate ``info.xs`` (``animate(info.xs, dt, **extras)``) at
        most every ``min_interval`` seconds (the first iterate always). Animate the solution once more after
        the solve: its last iterate may have been skipped."""
        dt = _check_dt(dt, "solver_callback")
        last = [-math.inf]

        def callback(info) -> None:
            now = time.perf_counter()
            if now - last[0] >= min_interval:
                self.animate(info.xs, dt, **extras)
                last[0] = time.perf_counter()

        return callback

    # --- live server ---------------------------------------------------------------------------------------

    def serve(self, port: int | None = None, open_browser: bool = False) -> str:
        """Start a local meshcat server on 127.0.0.1 only (``port``: None = the first free from 7000, 0 = any)
        and return its URL; ``open_browser`` opens it in the user's browser. Browsers that connect get the
        current scene, then every change."""
        if self._server is None:
            self._server = LiveServer(self._scene_messages, port)
        if open_browser:
            webbrowser.open(self._server.url, new=2)
        return self._server.url

    @property
    def url(self) -> str | None:
        """The live viewer's URL, None when not serving."""
        return None if self._server is None else self._server.url

    @property
    def server_address(self) -> tuple[str, int] | None:
        """``(host, port)`` the live server listens on, None when not serving."""
        return None if self._server is None else self._server.address

    def wait_for_browser(self, timeout: float | None = None) -> bool:
        """Block until a browser is connected to the live viewer (False on timeout)."""
        if self._server is None:
            raise ValueError("wait_for_browser: the viewer is not serving (call serve() first)")
        return self._server.connected.wait(timeout)

    def close(self) -> None:
        """Stop the live server (if any)."""
        if self._server is not None:
            self._server.close()
            self._server = None

    def __enter__(self) -> RobotViewer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _scene_messages(self) -> list[bytes]:
        """The scene's commands as the live server sends them (msgpack of their ``lower()``)."""
        return [umsgpack.packb(command.lower()) for command in self.commands()]
