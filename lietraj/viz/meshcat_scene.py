"""Meshcat scene of a robot: its URDF visuals placed by forward kinematics, animations of trajectories, and a
live viewer on a loopback-only server.

The scene is a tree of meshcat nodes under ``/meshcat/<model name>``::

    robot/<body>            one node per body; its transform is the body's world pose (``body_placements``)
    robot/<body>/<visual>   one node per visual: transform = the visual's pose in the body frame, object = its
                            mesh or primitive (scale and the primitive's own axes in the object's matrix)
    robot/world/<visual>    visuals of links fixed in the world (a fixed base's base link)
    ghosts/<k>/...          translucent copies of the robot at knot k
    com/line, com/marker    the centre-of-mass path and a sphere following it
    forces/<c>/shaft|head   one arrow per contact, from the contact point along the world force
    targets/<name>          small spheres at world points

so that showing a state sets ``nb`` transforms and an animation has one position and one quaternion track per
body. Poses are 4x4 world matrices (DESIGN.md); three.js wants them column major and its quaternions as
``(x, y, z, w)``. Meshcat primitives follow three.js, whose cylinders lie along y: a URDF cylinder (along z)
gets the rotation ``Rx(+90°)`` (y -> z) in its object matrix.

Meshes go to the browser as meshcat sends them (STL bytes, DAE and OBJ text) and are parsed there by three.js.
A mesh keeps its file's own materials (DAE colours and textures, OBJ + MTL) when the URDF gives no colour;
otherwise, and for STL, it is drawn in the URDF colour (``DEFAULT_RGBA`` without one). Two DAE adjustments
keep three.js loading every file of example-robot-data: ``uniform_dae`` (meshcat merges a DAE's surfaces, and
three.js refuses surfaces with and without texture coordinates together) and ``embed_dae_images`` (textures
inlined, so that a page never fetches a file).

Every change goes through one scene state (the latest command per node and kind), which a live server replays
to browsers that connect late and ``lietraj.viz.html`` writes into a self-contained page. Besides meshcat's own
commands, the state holds one of ours, ``lietraj_camera`` (camera position and target, world frame), which the
page script in ``VIEWER_SCRIPT`` handles: meshcat's stock camera orbits the world origin in a y-up frame,
which frames a standing robot badly.
"""

from __future__ import annotations

import asyncio
import base64
import html
import math
import operator
import os
import re
import threading
import time
import webbrowser
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path as FilePath

import meshcat
import meshcat.geometry as mg
import numpy as np
import tornado.httpserver
import tornado.netutil
import tornado.web
import tornado.websocket
import umsgpack
from meshcat.animation import Animation, AnimationClip, AnimationTrack
from meshcat.commands import Delete, SetAnimation, SetObject, SetTransform
from meshcat.path import Path

from lietraj.dynamics.kinematics.center_of_mass import center_of_mass
from lietraj.dynamics.kinematics.kinematics import body_placements, frame_placements
from lietraj.dynamics.model.model import RobotModel, Visual
from lietraj.dynamics.lie.state import State, Trajectory

VIEWER_DIST = FilePath(meshcat.viewer_assets_path()) / "dist"
MESH_FORMATS = {".stl": "stl", ".dae": "dae", ".obj": "obj"}
DEFAULT_RGBA = (0.7, 0.7, 0.72, 1.0)
GHOST_COLOR, GHOST_OPACITY = 0x4f86d9, 0.3
COM_COLOR, FORCE_COLOR, TARGET_COLOR = 0xff8c00, 0xd62728, 0x2ca02c
CAMERA_FOV = 75.0  # meshcat's default perspective camera (degrees, vertical)
_UINT8_EXT = 0x12  # msgpack extension code meshcat's JavaScript decodes as a Uint8Array
_RX90 = np.array([[1.0, 0, 0, 0], [0, 0, -1, 0], [0, 1, 0, 0], [0, 0, 0, 1]])  # three.js y axis -> URDF z axis


def color_int(rgb) -> int:
    """``0xRRGGBB`` of a colour with components in [0, 1]."""
    r, g, b = (int(round(255 * min(max(float(c), 0.0), 1.0))) for c in rgb[:3])
    return (r << 16) | (g << 8) | b


def quaternions_xyzw(R: np.ndarray) -> np.ndarray:
    """Unit quaternions ``(x, y, z, w)`` (..., 4) of rotation matrices (..., 3, 3) (Shepperd's method: the
    largest of ``w, x, y, z`` is taken from the diagonal, the others from off-diagonal sums)."""
    m = np.asarray(R, dtype=float)
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    a, b = m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0]
    c, d = m[..., 1, 0] - m[..., 0, 1], m[..., 0, 1] + m[..., 1, 0]
    e, f = m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1]
    big = np.stack([m00 + m11 + m22, m00, m11, m22], axis=-1).argmax(axis=-1)[..., None]
    s = 2.0 * np.sqrt(np.maximum(1.0 + np.stack([m00 + m11 + m22, m00 - m11 - m22, -m00 + m11 - m22,
                                                 -m00 - m11 + m22], axis=-1), 1e-300))
    s = np.take_along_axis(s, big, axis=-1)[..., 0]
    cases = np.stack([np.stack([a / s, b / s, c / s, s / 4], -1), np.stack([s / 4, d / s, e / s, a / s], -1),
                      np.stack([d / s, s / 4, f / s, b / s], -1), np.stack([e / s, f / s, s / 4, c / s], -1)], -2)
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
        data = super().lower()
        data["object"]["matrix"] = _matrix_list(self.matrix)
        return data


class _MeshFileObject(mg.Object):
    """A mesh file drawn with its own materials (meshcat's ``_meshfile_object``): DAE colours and textures (its
    images inlined), OBJ with its MTL library ``mtl``."""

    def __init__(self, data, mesh_format: str, matrix: np.ndarray, mtl: str | None):
        mg.SceneElement.__init__(self)
        self.data, self.format, self.matrix, self.mtl = data, mesh_format, matrix, mtl

    def lower(self):
        obj = {"uuid": self.uuid, "type": "_meshfile_object", "format": self.format, "data": self.data,
               "resources": {}, "matrix": _matrix_list(self.matrix)}
        if self.mtl is not None:
            obj["mtl_library"] = self.mtl
        return {"metadata": {"version": 4.5, "type": "Object"}, "geometries": [], "materials": [], "object": obj}


class SetCamera:
    """Our camera command (``lietraj_camera``): world ``position`` and ``target`` of meshcat's default camera,
    z up. The page script (``VIEWER_SCRIPT``) applies it; meshcat itself has no such command."""

    def __init__(self, position, target):
        self.position = [float(c) for c in position]
        self.target = [float(c) for c in target]

    def lower(self):
        return {"type": "lietraj_camera", "path": "", "position": self.position, "target": self.target}


class _MeshFiles:
    """The bytes of the mesh files of a model, read once, with the format their extension says."""

    def __init__(self):
        self._data: dict[str, bytes] = {}

    def read(self, visual: Visual, model_name: str) -> tuple[bytes, str]:
        filename = visual.filename or ""
        ext = os.path.splitext(filename)[1].lower()
        if ext not in MESH_FORMATS:
            raise ValueError(f"{model_name}: visual {visual.name!r} has a mesh {filename!r} of unknown format "
                             f"(known: {', '.join(sorted(MESH_FORMATS))})")
        if filename not in self._data:
            if not os.path.isfile(filename):
                raise ValueError(f"{model_name}: the mesh file {filename!r} of visual {visual.name!r} does not exist")
            self._data[filename] = FilePath(filename).read_bytes()
        return self._data[filename], MESH_FORMATS[ext]


_DAE_MESH = re.compile(r"<mesh\b.*?</mesh>", re.S)
_DAE_VERTICES = re.compile(r"<vertices\b.*?</vertices>", re.S)
_DAE_SURFACES = re.compile(r"<(?:triangles|polylist|polygons|trifans|tristrips)\b(.*?)<p>", re.S)
_DAE_SEMANTIC = re.compile(r'<input\b[^>]*\bsemantic="(\w+)"')


def uniform_dae(text: str) -> str:
    """A DAE whose surfaces all give three.js the same vertex attributes. meshcat merges the surfaces of a DAE
    into one geometry, which three.js refuses when some have texture coordinates and others not; there the
    TEXCOORD inputs are renamed to a semantic the loader ignores (their offsets stay, so do the index strides)."""
    kinds = set()
    for mesh in _DAE_MESH.findall(text):
        vertices = _DAE_VERTICES.search(mesh)
        shared = set(_DAE_SEMANTIC.findall(vertices.group(0))) - {"POSITION"} if vertices else set()
        for head in _DAE_SURFACES.findall(mesh):
            kinds.add(frozenset(shared | set(_DAE_SEMANTIC.findall(head)) - {"VERTEX"}))
    if len({k - {"TEXCOORD"} for k in kinds}) == len(kinds):
        return text
    return text.replace('semantic="TEXCOORD"', 'semantic="LIETRAJ_UNUSED_TEXCOORD"')


# A 1x1 grey PNG: what a DAE's texture images become where they are not drawn or not found.
_BLANK_PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNYsGABAAPEAeGUtBWxAAAAAElFTkSuQmCC"
_IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
_DAE_IMAGE = re.compile(r"<init_from>\s*([^<\s]+?\.(?:png|jpe?g|tga|bmp|gif|tiff?))\s*</init_from>", re.I)


def embed_dae_images(text: str, folder: str | None) -> str:
    """The DAE with its texture images inlined as data URIs: read from ``folder`` (where the DAE is), or
    ``_BLANK_PNG`` when missing or when ``folder`` is None (meshes drawn in one colour). A page then never
    fetches a file: a file:// fetch is refused (and can stall headless Chromium), over http it would hit the
    viewer's server."""
    def inline(match: re.Match) -> str:
        name = match.group(1)
        path = None if folder is None else os.path.join(folder, name)
        kind = _IMAGE_TYPES.get(os.path.splitext(name)[1].lower())
        if path is None or kind is None or not os.path.isfile(path):
            return f"<init_from>{_BLANK_PNG}</init_from>"
        return f"<init_from>data:{kind};base64,{base64.b64encode(FilePath(path).read_bytes()).decode('ascii')}</init_from>"

    return _DAE_IMAGE.sub(inline, text)


def _mesh_payload(data: bytes, mesh_format: str, filename: str, textured: bool):
    """Mesh file contents as meshcat sends them: STL as a Uint8Array, DAE and OBJ as text (a DAE with uniform
    surfaces and inline images, the real ones when ``textured``)."""
    if mesh_format == "stl":
        return umsgpack.Ext(_UINT8_EXT, data)
    text = data.decode("utf-8", errors="replace")
    if mesh_format == "dae":
        text = embed_dae_images(uniform_dae(text), os.path.dirname(filename) if textured else None)
    return text


def _mtl_library(filename: str, text: str) -> str | None:
    """The MTL library an OBJ names (``mtllib``), if it exists beside it."""
    folder = os.path.dirname(filename)
    for name in re.findall(r"^mtllib\s+(\S+)", text, re.MULTILINE):
        if os.path.isfile(os.path.join(folder, name)):
            return FilePath(folder, name).read_text(errors="replace")
    return None


def _visual_object(visual: Visual, files: _MeshFiles, model_name: str, ghost: bool = False) -> mg.Object:
    """The meshcat object of one visual, in the visual's own frame. A mesh without a URDF colour keeps the
    materials of its file (DAE, OBJ) or gets ``DEFAULT_RGBA`` (STL); ghosts get one translucent colour."""
    rgba = DEFAULT_RGBA if visual.rgba is None else tuple(float(c) for c in visual.rgba)
    if ghost:
        material = mg.MeshPhongMaterial(color=GHOST_COLOR, opacity=GHOST_OPACITY, transparent=True, depthWrite=False)
    else:
        material = mg.MeshPhongMaterial(color=color_int(rgba), opacity=rgba[3], transparent=rgba[3] < 1.0)
    matrix = np.eye(4)
    if visual.shape == "mesh":
        data, fmt = files.read(visual, model_name)
        scale = np.ones(3) if visual.scale is None else np.asarray(visual.scale, dtype=float)
        matrix[:3, :3] = np.diag(scale)
        if visual.rgba is None and fmt != "stl" and not ghost:
            payload = _mesh_payload(data, fmt, visual.filename, textured=True)
            return _MeshFileObject(payload, fmt, matrix, _mtl_library(visual.filename, payload) if fmt == "obj" else None)
        payload = _mesh_payload(data, fmt, visual.filename, textured=False)
        geometry = _Geometry({"type": "_meshfile_geometry", "format": fmt, "data": payload})
    elif visual.shape == "box":
        x, y, z = (float(c) for c in visual.size)
        geometry = _Geometry({"type": "BoxGeometry", "width": x, "height": y, "depth": z})
    elif visual.shape == "sphere":
        geometry = _Geometry({"type": "SphereGeometry", "radius": float(visual.radius), "widthSegments": 24,
                              "heightSegments": 16})
    elif visual.shape == "cylinder":
        r = float(visual.radius)
        geometry = _Geometry({"type": "CylinderGeometry", "radiusTop": r, "radiusBottom": r,
                              "height": float(visual.length), "radialSegments": 32})
        matrix = _RX90
    else:
        raise ValueError(f"{model_name}: visual {visual.name!r} has an unknown shape {visual.shape!r}")
    return _Mesh(geometry, material, matrix)


def _overlay(color: int, material=mg.MeshPhongMaterial) -> mg.Material:
    """A material drawn over the robot: contact forces and the CoM are mostly inside it. Transparent objects are
    drawn after the opaque ones, and these ignore the depth buffer."""
    return material(color=color, opacity=0.95, transparent=True, depthTest=False, depthWrite=False)


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
    """Rotations (..., 3, 3) taking +z onto the unit vectors ``d`` (..., 3) (identity where ``d`` is ~0)."""
    n = np.linalg.norm(d, axis=-1, keepdims=True)
    u = np.where(n > 1e-12, d / np.maximum(n, 1e-300), [0.0, 0.0, 1.0])
    # Rodrigues about z x u; the antipodal case is the half turn about x.
    x, y, c = u[..., 0], u[..., 1], u[..., 2]
    k = np.where(c > -1.0 + 1e-12, 1.0 / (1.0 + np.maximum(c, -1.0 + 1e-12)), 0.0)
    R = np.empty(u.shape[:-1] + (3, 3))
    R[..., 0, 0], R[..., 0, 1], R[..., 0, 2] = 1.0 - k * x * x, -k * x * y, x
    R[..., 1, 0], R[..., 1, 1], R[..., 1, 2] = -k * x * y, 1.0 - k * y * y, y
    R[..., 2, 0], R[..., 2, 1], R[..., 2, 2] = -x, -y, c
    flip = c <= -1.0 + 1e-12
    R[flip] = np.diag([1.0, -1.0, -1.0])
    return R


def _clip(frames: int, position=None, quaternion=None, scale=None, fps: float = 30.0) -> AnimationClip:
    """A meshcat clip with one key per frame ``0..frames-1`` for each given (frames, k) value array."""
    tracks = {}
    for name, jstype, values in (("position", "vector3", position), ("quaternion", "quaternion", quaternion),
                                 ("scale", "vector3", scale)):
        if values is not None:
            tracks[name] = AnimationTrack(name, jstype, list(range(frames)), np.asarray(values, float).tolist())
    return AnimationClip(tracks=tracks, fps=fps)


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
    if a.ndim != len(shape) or any(s is not None and s != t for s, t in zip(shape, a.shape)):
        want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
        raise ValueError(f"{what}: {name} has shape {a.shape}, expected {want}")
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
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]) - target
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
        self.body_paths = tuple(f"{self.root}/robot/{_node_name(b)}" for b in model.body_names)
        self._files = _MeshFiles()
        self._visual_paths: list[tuple[int, str]] = []
        seen: set[str] = set()
        for k, v in enumerate(model.visuals):
            name = _node_name(v.name) if v.name and _node_name(v.name) not in seen else f"visual_{k}"
            seen.add(name)
            self._visual_paths.append((v.body, name))
        self._state: dict[tuple[str, str], object] = {}
        self._lock = threading.Lock()
        self._server: _LiveServer | None = None
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
                for k in [k for k in self._state if k[0] == prefix or k[0].startswith(prefix + "/")]:
                    del self._state[k]
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
        return [c for k, c in items if k[1] != "animation"] + [c for k, c in items if k[1] == "animation"]

    def _robot_objects(self, prefix: str, ghost: bool):
        """``(path, object, pose in the body frame)`` of every visual, under body nodes ``prefix/<body>``; the
        visuals of links fixed in the world (body -1) under ``prefix/world``, which never moves (and which
        ghosts leave out)."""
        names = self.model.body_names
        for v, (body, name) in zip(self.model.visuals, self._visual_paths):
            if body < 0 and ghost:
                continue
            pose = np.eye(4)
            pose[:3, :3], pose[:3, 3] = v.R, v.p
            node = "world" if body < 0 else _node_name(names[body])
            yield f"{prefix}/{node}/{name}", _visual_object(v, self._files, self.model.name, ghost=ghost), pose

    def _set_bodies(self, placements: np.ndarray, prefix: str | None = None) -> None:
        paths = self.body_paths if prefix is None else [f"{prefix}/{_node_name(b)}" for b in self.model.body_names]
        for path, T in zip(paths, placements):
            self._send(SetTransform(T, _path(path)))

    def _clear_extras(self) -> None:
        for part in ("ghosts", "com", "forces", "targets"):
            if any(k[0].startswith(f"{self.root}/{part}/") for k in list(self._state)):
                self._send(Delete(_path(f"{self.root}/{part}")))

    def _draw_targets(self, targets: dict[str, np.ndarray], radius: float) -> None:
        for name, p in targets.items():
            path = _path(f"{self.root}/targets/{_node_name(name)}")
            self._send(SetObject(_sphere(radius, mg.MeshPhongMaterial(color=TARGET_COLOR)), path=path))
            T = np.eye(4)
            T[:3, 3] = p
            self._send(SetTransform(T, path))

    def _origins(self, x: State | Trajectory, placements: np.ndarray) -> np.ndarray:
        """World origins (M, 3) of the bodies and of all frames (links, joints, feet, tools) at ``x``, knot by
        knot for a trajectory."""
        frames = frame_placements(self.model, x)[..., :3, 3]
        return np.concatenate([placements[..., :3, 3], frames], axis=-2).reshape(-1, 3)

    @staticmethod
    def _size(origins: np.ndarray) -> float:
        """A length scale of the robot (m): the spread of its frame origins, at least 0.3 m."""
        return max(float(np.max(origins.max(axis=0) - origins.min(axis=0))), 0.3)

    def _frame(self, points: np.ndarray) -> None:
        """Aim the camera at ``points`` unless it has been aimed already (a browser's view is not reset at
        every iterate of a solve)."""
        if ("", "camera") not in self._state:
            self._send(SetCamera(*camera_framing(points)))

    # --- public API ----------------------------------------------------------------------------------------

    def set_camera(self, position, target) -> None:
        """Put the camera at world ``position`` looking at world ``target`` (z up). Otherwise the first
        ``display`` or ``animate`` frames what it draws, and later ones keep the camera where it is."""
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
        self._draw_targets(targets, 0.03 * self._size(origins))
        self._frame(np.vstack([origins, *(p[None] for p in targets.values())]))

    def animate(self, xs: Trajectory, dt: float, *, ghosts: Sequence[int] = (), com: bool = False,
                contact_points=None, contact_forces=None, force_scale: float | None = None,
                targets: Mapping[str, np.ndarray] | None = None, loop: bool = True) -> None:
        """Play the trajectory ``xs`` (knots ``dt`` seconds apart) in real time, looping unless ``loop=False``.

        Extras: ``ghosts`` (knot indices, negative from the end) drawn as translucent copies; ``com`` draws the
        centre-of-mass path and a marker on it; ``contact_points`` and ``contact_forces`` (N or N-1, nc, 3;
        world frame; N-1 = one per running knot, the last held) draw one arrow per contact, ``force_scale``
        metres per newton (default: the robot's weight is drawn as long as the robot); ``targets`` (name ->
        world point) as small spheres."""
        what = "animate"
        dt = _check_dt(dt, what)
        placements = _placements(self.model, xs, what)
        origins = self._origins(xs, placements)
        N = placements.shape[0]
        size = self._size(origins[:len(origins) // N])  # at the first knot
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
        targets = _check_targets(targets, what)

        self._clear_extras()
        fps = 1.0 / dt
        clips: dict[Path, AnimationClip] = {}
        q = _continuous(quaternions_xyzw(placements[..., :3, :3]))
        for b, path in enumerate(self.body_paths):
            clips[_path(path)] = _clip(N, placements[:, b, :3, 3], q[:, b], fps=fps)
        self._set_bodies(placements[0])
        points = [origins]

        for k in ghost_knots:
            prefix = f"{self.root}/ghosts/{k}"
            for path, obj, pose in self._robot_objects(prefix, ghost=True):
                self._send(SetObject(obj, path=_path(path)))
                self._send(SetTransform(pose, _path(path)))
            self._set_bodies(placements[k], prefix)

        if com:
            c = center_of_mass(self.model, xs)
            line = mg.Line(mg.PointsGeometry(c.T.astype(np.float32)), _overlay(COM_COLOR, mg.LineBasicMaterial))
            self._send(SetObject(line, path=_path(f"{self.root}/com/line")))
            marker = _path(f"{self.root}/com/marker")
            self._send(SetObject(_sphere(0.025 * size, _overlay(COM_COLOR)), path=marker))
            T = np.eye(4)
            T[:3, 3] = c[0]
            self._send(SetTransform(T, marker))
            clips[marker] = _clip(N, position=c, fps=fps)

        if contact_points is not None:
            scale = force_scale if force_scale is not None else size / (self.model.total_mass *
                                                                         float(np.linalg.norm(self.model.gravity)))
            radius, head = 0.008 * size, 0.06 * size
            # Zero forces get a tiny length: three.js inverts the scale for normals.
            length = np.maximum(scale * np.linalg.norm(F, axis=-1), 1e-6)  # (N, nc)
            qf = _continuous(quaternions_xyzw(_rotations_z_to(F)))
            direction = F / np.maximum(np.linalg.norm(F, axis=-1, keepdims=True), 1e-300)
            for c in range(P.shape[1]):
                shaft, tip = _path(f"{self.root}/forces/{c}/shaft"), _path(f"{self.root}/forces/{c}/head")
                self._send(SetObject(_arrow_part(1.0, radius, radius, FORCE_COLOR), path=shaft))
                self._send(SetObject(_arrow_part(head, 0.0, 2.5 * radius, FORCE_COLOR), path=tip))
                ones = np.ones(N)
                clips[shaft] = _clip(N, P[:, c], qf[:, c], np.stack([ones, ones, length[:, c]], -1), fps=fps)
                # The head shrinks with short arrows so that a zero force draws nothing.
                s = np.minimum(1.0, length[:, c] / (2.0 * head))[:, None] * np.ones(3)
                clips[tip] = _clip(N, P[:, c] + length[:, c, None] * direction[:, c], qf[:, c], s, fps=fps)
            points.append(P.reshape(-1, 3))

        self._draw_targets(targets, 0.03 * size)
        points += [p[None] for p in targets.values()]
        self._frame(np.vstack(points))
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
            self._server = _LiveServer(self._packed_scene, port)
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

    def _packed_scene(self) -> list[bytes]:
        return [umsgpack.packb(c.lower()) for c in self.commands()]


def _path(path: str) -> Path:
    return Path(tuple(p for p in path.split("/") if p))


class _Socket(tornado.websocket.WebSocketHandler):
    def initialize(self, server: _LiveServer) -> None:
        self.server = server

    def open(self) -> None:
        self.server.join(self)

    def on_close(self) -> None:
        self.server.clients.discard(self)


class _Page(tornado.web.RequestHandler):
    def initialize(self, page: str) -> None:
        self.page = page

    def get(self) -> None:
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.write(self.page)


class _LiveServer:
    """Meshcat's page and websocket protocol served by tornado in a background thread, bound to 127.0.0.1:
    ``/static/`` is the viewer page, ``/`` the websocket that carries msgpack commands."""

    def __init__(self, scene: Callable[[], list[bytes]], port: int | None):
        self.scene = scene
        self.clients: set[_Socket] = set()
        self.connected = threading.Event()
        self._loop = asyncio.new_event_loop()
        ports = range(7000, 7100) if port is None else [int(port)]
        sockets = None
        for p in ports:
            try:
                sockets = tornado.netutil.bind_sockets(p, address="127.0.0.1")
                break
            except OSError:
                continue
        if sockets is None:
            raise ValueError(f"serve: no free port on 127.0.0.1 among {ports[0]}..{ports[-1]}")
        self.address = sockets[0].getsockname()[:2]
        self.url = f"http://{self.address[0]}:{self.address[1]}/static/"
        page = viewer_page('<script src="main.min.js"></script>', "lietrajInstall(viewer, null);\nviewer.connect();")
        app = tornado.web.Application([
            (r"/static/", _Page, {"page": page}),
            (r"/static/(main\.min\.js)", tornado.web.StaticFileHandler, {"path": str(VIEWER_DIST)}),
            (r"/", _Socket, {"server": self}),
        ], log_function=lambda handler: None)
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._http = tornado.httpserver.HTTPServer(app)
            self._http.add_sockets(sockets)
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="lietraj-meshcat", daemon=True)
        self._thread.start()
        ready.wait()

    def join(self, client: _Socket) -> None:
        for data in self.scene():
            client.write_message(data, binary=True)
        self.clients.add(client)
        self.connected.set()

    def broadcast(self, data: bytes) -> None:
        def send() -> None:
            for client in list(self.clients):
                client.write_message(data, binary=True)

        self._loop.call_soon_threadsafe(send)

    def close(self) -> None:
        def stop() -> None:
            self._http.stop()
            for client in list(self.clients):
                client.close()
            self._loop.stop()

        self._loop.call_soon_threadsafe(stop)
        self._thread.join(timeout=5.0)
        self._loop.close()


VIEWER_SCRIPT = r"""
"use strict";
// lietraj's additions to meshcat's viewer: the lietraj_camera command, meshes shared by reference
// ({lietraj_mesh: key} in place of a mesh file's contents), and #t=SECONDS to show one time of the animation.
function lietrajSetCamera(viewer, position, target) {
    // meshcat turns its z-up world into three.js's y-up frame, (x, y, z) -> (x, z, -y), in which the camera
    // and its orbit controls live; the controls orbit their target, the world origin by default.
    viewer.camera.position.set(position[0], position[2], -position[1]);
    viewer.controls.target.set(target[0], target[2], -target[1]);
    viewer.controls.update();
    viewer.set_dirty();
}
function lietrajResolveMeshes(object, meshes) {
    const resolve = (record) => {
        if (record && record.data && record.data.lietraj_mesh !== undefined) {
            record.data = meshes[record.data.lietraj_mesh];
        }
    };
    (object.geometries || []).forEach(resolve);
    resolve(object.object);
}
function lietrajInstall(viewer, meshes) {
    const handle = viewer.handle_command.bind(viewer);
    viewer.handle_command = (cmd) => {
        if (cmd.type === "lietraj_camera") {
            lietrajSetCamera(viewer, cmd.position, cmd.target);
            return;
        }
        if (cmd.type === "set_object" && meshes) {
            lietrajResolveMeshes(cmd.object, meshes);
        }
        handle(cmd);
    };
}
function lietrajSeek(t) {
    viewer.animator.pause();
    viewer.animator.seek(t);
}
function lietrajSeekTime() {
    const m = /(?:^#|&)t=([0-9.eE+-]+)/.exec(window.location.hash);
    return m ? parseFloat(m[1]) : null;
}
"""

PAGE_TEMPLATE = """<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<title>@TITLE@</title>
<style>
body { margin: 0; overflow: hidden; }
#meshcat-pane { width: 100vw; height: 100vh; overflow: hidden; }
</style>
</head>
<body>
<div id="meshcat-pane"></div>
@MESHCAT@
<script>@SCRIPT@</script>
@DATA@
<script>
var viewer = new MeshCat.Viewer(document.getElementById("meshcat-pane"));
@BOOT@
</script>
</body>
</html>
"""


def viewer_page(meshcat_tag: str, boot: str, data: str = "", title: str = "lietraj") -> str:
    """The viewer page: meshcat's viewer (``meshcat_tag``: a script element), ``VIEWER_SCRIPT``, optional
    ``data`` elements and the ``boot`` script run after the viewer ``viewer`` is made."""
    return (PAGE_TEMPLATE.replace("@TITLE@", html.escape(title)).replace("@SCRIPT@", VIEWER_SCRIPT)
            .replace("@BOOT@", boot).replace("@DATA@", data).replace("@MESHCAT@", meshcat_tag))
