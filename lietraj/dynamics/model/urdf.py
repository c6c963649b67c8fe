"""Build a RobotModel from a URDF file (parsed by yourdfpy), and read SRDF postures and rotor parameters.

The tree is laid out as Pinocchio's URDF parser lays it out, so that a lietraj model and a Pinocchio model of
the same file have the same joints in the same order: depth first from the root link, a link's child joints
taken in the order of their names (urdfdom keeps joints in a name-sorted map). Fixed joints are merged into
their parent body (their inertia added to it), but every link and joint stays available as a frame.
Continuous joints become revolute joints without limits (Pinocchio gives them a (cos, sin) coordinate;
``pinocchio_interop`` converts). Mimic joints (``<mimic joint=... multiplier=... offset=...>`` on a moving joint)
are loaded as independent joints by default, as Pinocchio does; with ``mimic=True`` they follow their primary and add
no coordinate (``RobotModel.mimic``), as Pinocchio's ``buildModelFromUrdf(path, mimic=True)``. A ``<mimic>`` on a
fixed joint is ignored, as Pinocchio ignores it.
"""

from __future__ import annotations

import io
import math
import os
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

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


class URDFError(ValueError):
    """A URDF (or SRDF) that cannot describe a robot; the message names the offending element."""


_MOVING = {"revolute": JOINT_REVOLUTE, "continuous": JOINT_REVOLUTE, "prismatic": JOINT_PRISMATIC}
_SUPPORTED = set(_MOVING) | {"fixed", "floating"}


def _parse(source: str | os.PathLike) -> "yourdfpy.Robot":  # noqa: F821
    import yourdfpy

    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"URDF file not found: {path}")
    text = path.read_bytes()
    try:
        ET.fromstring(text)
    except ET.ParseError as e:
        raise URDFError(f"{path}: not well-formed XML ({e})") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            urdf = yourdfpy.URDF.load(io.BytesIO(text), load_meshes=False, build_scene_graph=False,
                                      build_collision_scene_graph=False, load_collision_meshes=False)
    except ValueError as e:
        raise URDFError(f"{path}: bad number in the URDF ({e})") from None
    except Exception as e:  # yourdfpy raises assorted types on malformed elements
        raise URDFError(f"{path}: cannot parse the URDF ({type(e).__name__}: {e})") from None
    return urdf.robot


def _finite(what: str, *arrays) -> None:
    for a in arrays:
        if a is not None and not np.all(np.isfinite(np.asarray(a, dtype=float))):
            raise URDFError(f"{what}: contains NaN or inf")


def _origin(T) -> np.ndarray:
    return np.eye(4) if T is None else np.asarray(T, dtype=float)


def _link_inertia(link) -> tuple[float, np.ndarray, np.ndarray]:
    """Mass, centre of mass and rotational inertia about the COM, in the link frame."""
    inertial = link.inertial
    if inertial is None:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    what = f"link {link.name!r} <inertial>"
    if inertial.mass is None:
        raise URDFError(f"{what}: missing <mass>")
    if inertial.inertia is None:
        raise URDFError(f"{what}: missing <inertia>")
    T = _origin(inertial.origin)
    I = np.asarray(inertial.inertia, dtype=float)
    _finite(what, [inertial.mass], T, I)
    m = float(inertial.mass)
    if m < 0:
        raise URDFError(f"{what}: negative mass {m}")
    R = T[:3, :3]
    return m, T[:3, 3].copy(), R @ I @ R.T


def _is_psd(I: np.ndarray) -> bool:
    return bool(np.linalg.eigvalsh(0.5 * (I + I.T)).min() >= -1e-9 * max(1.0, np.abs(I).max()))


def _combine(m1, c1, I1, m2, c2, I2):
    """Mass, COM and COM inertia of two rigid bodies expressed in one frame (parallel-axis theorem)."""
    m = m1 + m2
    if m <= 0:
        return 0.0, np.zeros(3), I1 + I2
    c = (m1 * c1 + m2 * c2) / m
    def shift(mk, ck):
        d = ck - c
        return mk * (d @ d * np.eye(3) - np.outer(d, d))
    return m, c, I1 + shift(m1, c1) + I2 + shift(m2, c2)


def _transform_inertia(T, m, c, I):
    R = T[:3, :3]
    return m, R @ c + T[:3, 3], R @ I @ R.T


def resolve_mesh_path(filename: str, urdf_dir: Path, package_dirs: list[Path]) -> str:
    """Absolute path of a mesh given as ``package://pkg/rest``, ``file://...`` or relative to the URDF.

    ``package:///pkg/rest`` (an empty host, as in example-robot-data's ``talos_full``) is read as ``package://pkg/rest``.
    A path that resolves nowhere is returned unchanged."""
    if filename.startswith("package://"):
        rel = filename[len("package://"):].lstrip("/")
        for d in package_dirs:
            if (d / rel).exists():
                return str(d / rel)
        pkg, _, rest = rel.partition("/")
        for d in package_dirs:  # a package directory may be the package itself
            if d.name == pkg and (d / rest).exists():
                return str(d / rest)
        return filename
    if filename.startswith("file://"):
        return filename[len("file://"):]
    p = Path(filename)
    return str(p if p.is_absolute() else (urdf_dir / p))


def _visuals(robot, link, body: int, T_body_link: np.ndarray, urdf_dir: Path, package_dirs) -> list[Visual]:
    colors = {m.name: m.color.rgba for m in (robot.materials or []) if m.color is not None}
    out = []
    for k, vis in enumerate(link.visuals):
        T = T_body_link @ _origin(vis.origin)
        g = vis.geometry
        rgba = None
        if vis.material is not None:
            if vis.material.color is not None:
                rgba = np.asarray(vis.material.color.rgba, dtype=float)
            elif vis.material.name in colors:
                rgba = np.asarray(colors[vis.material.name], dtype=float)
        common = dict(name=vis.name or f"{link.name}_{k}", body=body, R=T[:3, :3].copy(), p=T[:3, 3].copy(), rgba=rgba)
        if g.mesh is not None:
            scale = np.ones(3) if g.mesh.scale is None else np.broadcast_to(np.asarray(g.mesh.scale, float), 3).copy()
            out.append(Visual(shape="mesh", filename=resolve_mesh_path(g.mesh.filename, urdf_dir, package_dirs),
                              scale=scale, **common))
        elif g.box is not None:
            out.append(Visual(shape="box", size=np.asarray(g.box.size, float), **common))
        elif g.cylinder is not None:
            out.append(Visual(shape="cylinder", radius=float(g.cylinder.radius), length=float(g.cylinder.length), **common))
        elif g.sphere is not None:
            out.append(Visual(shape="sphere", radius=float(g.sphere.radius), **common))
    return out


@dataclass
class _Body:
    name: str
    joint: str
    parent: int
    jtype: int
    placement: np.ndarray
    axis: np.ndarray
    mass: float = 0.0
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    inertia: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))
    limits: tuple = (-np.inf, np.inf, np.inf, np.inf)
    continuous: bool = False


def load_urdf(path: str | os.PathLike, floating_base: bool | None = None, *, name: str | None = None,
              package_dirs: list[str | os.PathLike] | None = None, mimic: bool = False) -> RobotModel:
    """Load a robot from a URDF file.

    ``floating_base``: True adds a free joint (SE(3)) under the root link, as Pinocchio's
    ``JointModelFreeFlyer`` root joint; False fixes the root link to the world; None (default) is True only
    when the URDF itself attaches its root through a ``floating`` joint. ``package_dirs`` are searched to
    resolve ``package://`` mesh paths (the URDF's own ancestors are always searched).

    ``mimic``: False (the default, as Pinocchio's) reads each ``<mimic>`` joint as an independent joint with its own
    coordinate; True makes it follow ``multiplier * s[primary] + offset`` with no coordinate of its own
    (``model.mimic`` lists them, ``model.n`` counts the independent joints: Pinocchio's ``mimic=True``). A mimic of
    a mimic joint is composed into a mimic of the independent one.

    Raises ``URDFError`` naming the offending element for malformed files: bad numbers, unknown or
    unsupported joint types, links with several parents, kinematic loops, several roots, broken inertias, a mimic
    joint whose primary is not a moving joint of the tree (with ``mimic=True``).
    """
    path = Path(path).resolve()
    robot = _parse(path)
    links = {l.name: l for l in robot.links}
    if not links:
        raise URDFError(f"{path}: the URDF has no <link>")
    parent_joint: dict[str, object] = {}
    children: dict[str, list] = {n: [] for n in links}
    for j in robot.joints:
        what = f"joint {j.name!r}"
        if j.type not in _SUPPORTED:
            raise URDFError(f"{what}: unsupported joint type {j.type!r} (supported: {', '.join(sorted(_SUPPORTED))})")
        for role, link in (("parent", j.parent), ("child", j.child)):
            if link not in links:
                raise URDFError(f"{what}: {role} link {link!r} is not defined")
        if j.child in parent_joint:
            raise URDFError(f"{what}: link {j.child!r} already has parent joint {parent_joint[j.child].name!r} "
                            "(closed loops are not supported)")
        _finite(what, _origin(j.origin), j.axis)
        parent_joint[j.child] = j
        children[j.parent].append(j)
    roots = [n for n in links if n not in parent_joint]
    if len(roots) != 1:
        if not roots:
            raise URDFError(f"{path}: every link has a parent joint: the joints form a loop")
        raise URDFError(f"{path}: several root links {roots}: the links do not form one tree")
    root = roots[0]
    for js in children.values():
        js.sort(key=lambda j: j.name)

    # A URDF that attaches its robot to a 'world' link by a floating joint describes a floating base.
    floating_joint = None
    kids = children[root]
    if len(kids) == 1 and kids[0].type == "floating" and links[root].inertial is None and not links[root].visuals:
        floating_joint = kids[0]
        root = floating_joint.child
    for j in robot.joints:
        if j.type == "floating" and j is not floating_joint:
            raise URDFError(f"joint {j.name!r}: a floating joint is only supported as the root of the tree")
    if floating_base is None:
        floating_base = floating_joint is not None

    urdf_dir = path.parent
    pkg_dirs = [Path(d) for d in (package_dirs or [])] + list(path.parents)

    bodies: list[_Body] = []
    frames: list[Frame] = []
    visuals: list[Visual] = []
    seen: set[str] = set()
    not_psd: dict[int, list[str]] = {}  # body -> its links whose own inertia is not positive semi-definite

    def add_frame(name, body, T, kind):
        frames.append(Frame(name, body, T[:3, :3].copy(), T[:3, 3].copy(), kind))

    def add_link(link_name: str, body: int, T_body_link: np.ndarray) -> None:
        """Attach a link (and, through fixed joints, its fixed descendants) to a body."""
        if link_name in seen:
            raise URDFError(f"link {link_name!r} is reached twice: the joints form a loop")
        seen.add(link_name)
        link = links[link_name]
        m, c, I = _transform_inertia(T_body_link, *_link_inertia(link))
        if not _is_psd(I):
            not_psd.setdefault(body, []).append(link_name)
        if body >= 0:
            b = bodies[body]
            b.mass, b.com, b.inertia = _combine(b.mass, b.com, b.inertia, m, c, I)
        add_frame(link_name, body, T_body_link, "body")
        visuals.extend(_visuals(robot, link, body, T_body_link, urdf_dir, pkg_dirs))
        for j in children[link_name]:
            T_joint = T_body_link @ _origin(j.origin)
            if j.type == "fixed":
                add_frame(j.name, body, T_joint, "fixed_joint")
                add_link(j.child, body, T_joint)
                continue
            axis = np.asarray(j.axis if j.axis is not None else [1.0, 0.0, 0.0], dtype=float)
            if axis.shape != (3,) or np.linalg.norm(axis) < 1e-9:
                raise URDFError(f"joint {j.name!r}: the axis must be a non-zero 3-vector, got {axis.tolist()}")
            lim = (-np.inf, np.inf, np.inf, np.inf)
            if j.type != "continuous":
                if j.limit is None:
                    raise URDFError(f"joint {j.name!r}: a {j.type} joint needs a <limit> element")
                L = j.limit
                # The URDF specification (and urdfdom, hence Pinocchio) reads a missing lower or upper as 0.
                lim = tuple(float(d) if x is None else float(x)
                            for x, d in ((L.lower, 0.0), (L.upper, 0.0), (L.velocity, np.inf), (L.effort, np.inf)))
                if any(math.isnan(x) for x in lim) or lim[0] > lim[1]:
                    raise URDFError(f"joint {j.name!r}: bad <limit> (lower={L.lower}, upper={L.upper})")
            elif j.limit is not None:
                L = j.limit
                lim = (-np.inf, np.inf, np.inf if L.velocity is None else float(L.velocity),
                       np.inf if L.effort is None else float(L.effort))
            bodies.append(_Body(j.child, j.name, body, _MOVING[j.type], T_joint, axis / np.linalg.norm(axis),
                                limits=lim, continuous=j.type == "continuous"))
            k = len(bodies) - 1
            add_frame(j.name, k, np.eye(4), "joint")
            add_link(j.child, k, np.eye(4))

    if floating_base:
        bodies.append(_Body(root, "root_joint", -1, JOINT_FREE, np.eye(4), np.zeros(3)))
        add_frame("root_joint", 0, np.eye(4), "joint")
        add_link(root, 0, np.eye(4))
    else:
        add_link(root, -1, np.eye(4))
    if floating_joint is not None:
        frames.insert(0, Frame(floating_joint.parent, -1, np.eye(3), np.zeros(3), "body"))

    if not bodies:
        raise URDFError(f"{path}: the robot has no moving joint")
    # A link's inertia that is not positive semi-definite is an error when the body it is merged into is too (the
    # dynamics would be wrong); merged into a body whose inertia is, it is negligible (example-robot-data's tiago has
    # such an antenna, of 1 mg) and only warned about: Pinocchio accepts both without a word.
    for body, names in not_psd.items():
        b = bodies[body] if body >= 0 else None
        if b is None or _is_psd(b.inertia):
            warnings.warn(f"{path.name}: the inertia of link(s) {names} is not positive semi-definite; merged into "
                          f"{'the world' if b is None else f'body {b.name!r}'} it is negligible", stacklevel=2)
        else:
            raise URDFError(f"link {names[0]!r} <inertial>: the inertia matrix is not positive semi-definite")
    massless = [b.joint for k, b in enumerate(bodies) if b.jtype != JOINT_FREE and _subtree_is_massless(bodies, k)]
    if massless:
        warnings.warn(f"{path.name}: joints {massless} move no mass (their links carry no inertia): the mass "
                      "matrix is singular and forward dynamics undefined unless they get armature", stacklevel=2)

    rules = _mimic_rules(robot, bodies) if mimic else ()
    followers = {m.joint for m in rules}
    joints = [b for b in bodies if b.jtype != JOINT_FREE and b.joint not in followers]
    nv = len(joints) + (6 if floating_base else 0)
    return RobotModel(
        name=name or robot.name or path.stem,
        floating_base=floating_base,
        **tree_fields(bodies),
        armature=np.zeros(nv),
        lower_limit=np.array([b.limits[0] for b in joints]),
        upper_limit=np.array([b.limits[1] for b in joints]),
        velocity_limit=np.array([b.limits[2] for b in joints]),
        effort_limit=np.array([b.limits[3] for b in joints]),
        continuous=np.array([b.continuous for b in joints], dtype=bool),
        frames=tuple(frames),
        visuals=tuple(visuals),
        source=str(path),
        mimic=rules,
    )


def _mimic_rules(robot, bodies: list[_Body]) -> tuple[Mimic, ...]:
    """The ``<mimic>`` elements of the moving joints, in body order, each composed down to an independent joint."""
    moving = {b.joint for b in bodies if b.jtype != JOINT_FREE}
    declared = {}
    for j in robot.joints:
        if j.mimic is None or j.name not in moving:
            continue
        what = f"joint {j.name!r} <mimic>"
        m, o = (1.0 if j.mimic.multiplier is None else float(j.mimic.multiplier),
                0.0 if j.mimic.offset is None else float(j.mimic.offset))
        _finite(what, [m, o])
        if j.mimic.joint not in moving:
            raise URDFError(f"{what}: its primary joint {j.mimic.joint!r} is not a moving joint of the tree")
        declared[j.name] = (j.mimic.joint, m, o)
    rules = []
    for b in bodies:
        if b.joint not in declared:
            continue
        primary, m, o = declared[b.joint]
        seen = {b.joint}
        while primary in declared:  # q_j = m (m2 q_p + o2) + o
            if primary in seen:
                raise URDFError(f"joint {b.joint!r} <mimic>: the mimic joints {sorted(seen)} follow each other in a loop")
            seen.add(primary)
            p2, m2, o2 = declared[primary]
            primary, m, o = p2, m * m2, m * o2 + o
        rules.append(Mimic(b.joint, primary, m, o))
    return tuple(rules)


def _subtree_is_massless(bodies: list[_Body], k: int) -> bool:
    stack = [k]
    while stack:
        i = stack.pop()
        if bodies[i].mass > 0 or np.abs(bodies[i].inertia).max() > 0:
            return False
        stack.extend(j for j in range(i + 1, len(bodies)) if bodies[j].parent == i)
    return True


def read_srdf(model: RobotModel, path: str | os.PathLike, *, rotor_parameters: bool = False,
              default_posture: str | None = None) -> RobotModel:
    """A copy of ``model`` with the SRDF's named postures (``group_state``) and, optionally, rotor armature.

    Postures list joint values by name; joints not listed take 0, and ``root_joint`` (Pinocchio's
    ``[x, y, z, qx, qy, qz, qw]``) sets the base pose. With ``rotor_parameters``, each ``<rotor_params>``
    joint gets armature ``mass * gear_ratio**2``, as example-robot-data's loader does. ``default_posture``
    is put first, so that ``model.reference_state()`` returns it.
    """
    path = Path(path)
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        raise URDFError(f"{path}: cannot read the SRDF ({e})") from None
    names = model.actuated_joint_names
    postures: dict[str, Posture] = {}
    for gs in root.iter("group_state"):
        pname = gs.get("name")
        s = np.zeros(model.n)
        H = np.eye(4) if model.floating_base else None
        for jel in gs.iter("joint"):
            jname = jel.get("name")
            try:
                values = [float(x) for x in (jel.get("value") or "").split()]
            except ValueError:
                raise URDFError(f"{path}: group_state {pname!r}, joint {jname!r}: bad value {jel.get('value')!r}") from None
            if jname in names and len(values) == 1:
                s[names.index(jname)] = values[0]
            elif jname == "root_joint" and model.floating_base and len(values) == 7:
                from lietraj.dynamics.model.pinocchio_interop import pose_from_xyzquat

                H = pose_from_xyzquat(np.array(values))
        postures[pname] = Posture(H, s)
    if default_posture is not None:
        if default_posture not in postures:
            raise URDFError(f"{path}: no group_state named {default_posture!r}")
        postures = {default_posture: postures[default_posture], **postures}
    armature = model.armature.copy()
    if rotor_parameters:
        offset = 6 if model.floating_base else 0
        for jel in root.iter("rotor_params"):
            for j in jel.iter("joint"):
                if j.get("name") in names:
                    try:
                        armature[offset + names.index(j.get("name"))] = float(j.get("mass")) * float(j.get("gear_ratio")) ** 2
                    except (TypeError, ValueError):
                        raise URDFError(f"{path}: rotor_params of joint {j.get('name')!r}: bad mass or gear_ratio") from None
    return model.replace(reference_postures=postures, armature=armature)
