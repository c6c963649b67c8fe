"""Every robot of the ``example-robot-data`` package, built as that package's own loader builds it.

The list of robots and how each is built come from the package's registry,
``example_robot_data.robots_loader.ROBOTS`` (a name -> loader class), read from its source without importing it:
importing it imports Pinocchio, which lietraj does not need at run time. Each loader class names its URDF
(``path``, ``urdf_subpath``, ``urdf_filename``), whether a free-flyer is added (``free_flyer``), its SRDF
(``srdf_subpath``, ``srdf_filename``) with the reference posture (``ref_posture``) and whether the SRDF's rotor
parameters become armature (``has_rotor_parameters``). What a loader's ``__init__`` does beyond that is reproduced
here for the loaders that do something (``_LOADER_STEPS``), and a loader not listed there is refused rather than
built differently:

- ``HumanLoader`` turns the free-flyer joint (90 degrees about x): the model keeps that rotation as the free joint's
  placement (``joint_placement[0]``); lietraj's ``H`` stays the world pose of the base body, and only the Pinocchio
  interop (``to_pinocchio``, ``from_pinocchio``) applies it. Its reference posture, ``"neutral"``, is the loader's
  ``q0``: Pinocchio's neutral configuration, the base turned upright (``H`` = that rotation).
- ``TalosLegsLoader`` keeps the joints of ``talos`` with Pinocchio id below 14 (the base and the twelve leg joints)
  and drops the upper body altogether, its mass included (it is not ``buildReducedModel``: nothing is merged).
  Unlike that loader run with Pinocchio >= 3, lietraj does not count the sole links' inertia twice (the loader's
  ``addFrame`` appends each frame's inertia to the joint that already holds it: 0.01 kg per sole).
- ``PandaLoaderCollision`` changes the collision geometry, which lietraj does not read, and takes the neutral
  configuration as its ``q0``. Whenever a loader names no reference posture but its SRDF has some, the loader's ``q0``
  is the neutral configuration: lietraj puts a ``"neutral"`` posture first, so that ``reference_state()`` is it too.

The reference state (``model.reference_state()``) is the loader's ``q0`` for every robot. Note that the registry maps
``ur3`` to ``UR5Loader`` (the UR5's URDF): ``load_robot("ur3")`` follows it, as ``example_robot_data.load("ur3")``
does; ``ur3_limited`` and ``ur3_gripper`` are UR3s.

Cassie's loader reads an SDF file with closed kinematic loops: ``load_robot("cassie")`` says so.

Mimic joints (the grippers of panda, baxter, PR2, tiago_pro and talos_full, romeo's hands): ``load_robot(name)``
reads them as independent joints, as ``example_robot_data.load`` and Pinocchio do by default;
``load_robot(name, mimic=True)`` makes them follow their primary joint with no coordinate of their own, as
``buildModelFromUrdf(path, mimic=True)`` (``model.mimic`` lists them, and the model's repr shows them). Pinocchio 4.0
refuses romeo's and talos_full's URDFs with ``mimic=True`` (a mimic joint comes before its primary in depth-first
order); lietraj loads them.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from lietraj.dynamics.model.model import Posture, RobotModel
from lietraj.dynamics.model.urdf import URDFError, load_urdf, read_srdf


class RobotNotAvailable(KeyError):
    """A robot name that example-robot-data does not have."""

    def __str__(self) -> str:  # KeyError quotes its message
        return str(self.args[0])


class RobotNotSupported(URDFError):
    """A robot of example-robot-data that lietraj cannot represent; the message says what and why."""


@dataclass(frozen=True)
class RobotEntry:
    """How example-robot-data's loader class builds a robot: its attributes, and what its ``__init__`` adds."""

    loader: str
    path: str
    urdf: str
    urdf_subpath: str = "robots"
    srdf: str | None = None
    srdf_subpath: str = "srdf"
    posture: str | None = "half_sitting"
    floating_base: bool = False
    rotor_parameters: bool = False
    init: str = "RobotLoader"
    """The loader class whose ``__init__`` runs (``RobotLoader``'s loads the URDF and SRDF, nothing else)."""
    keep_joints: int | None = None
    """TalosLegsLoader: keep the Pinocchio joints of id below this (the universe is joint 0)."""
    base_rotation: np.ndarray | None = field(default=None, compare=False)
    """HumanLoader: the rotation it gives the free-flyer joint."""

    @property
    def keep_bodies(self) -> int | None:
        return None if self.keep_joints is None else self.keep_joints - 1


# --- reading example-robot-data's registry from its source -------------------------------------------------------

_UNKNOWN = object()  # an attribute whose value is not a literal (or is set under a condition)


def _value(node: ast.expr):
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "array" \
            and len(node.args) == 1:
        try:
            return np.array(ast.literal_eval(node.args[0]), dtype=float)
        except ValueError:
            pass
    return _UNKNOWN


@dataclass
class _LoaderClass:
    bases: list[str]
    attrs: dict
    init: ast.FunctionDef | None


def _loader_package() -> Path:
    spec = importlib.util.find_spec("example_robot_data")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("example-robot-data's Python loaders are not installed: `pip install example-robot-data`")
    return Path(list(spec.submodule_search_locations)[0])


@lru_cache(maxsize=None)
def _registry() -> tuple[dict[str, str], dict[str, _LoaderClass]]:
    """``(ROBOTS as name -> loader class name, loader classes by name)``, read from the package's source files."""
    names: dict[str, str] = {}
    classes: dict[str, _LoaderClass] = {}
    for source in sorted(_loader_package().glob("*.py")):
        tree = ast.parse(source.read_text(), str(source))
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                attrs, init = {}, None
                for stmt in node.body:
                    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                        for t in targets:
                            if isinstance(t, ast.Name):
                                attrs[t.id] = _value(stmt.value)
                    elif isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                        init = stmt
                    elif isinstance(stmt, ast.If):  # e.g. CassieLoader picks its file by Pinocchio's version
                        for sub in ast.walk(stmt):
                            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                                attrs[sub.id] = _UNKNOWN
                bases = [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases]
                classes[node.name] = _LoaderClass(bases, attrs, init)
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ROBOTS" for t in node.targets):
                if isinstance(node.value, ast.Dict):
                    for k, v in zip(node.value.keys, node.value.values):
                        if isinstance(k, ast.Constant) and isinstance(v, ast.Name):
                            names[k.value] = v.id
    if not names:
        raise RuntimeError(f"no ROBOTS registry found in {_loader_package()}")
    return names, classes


def _mro(cls: str, classes: dict[str, _LoaderClass]) -> list[str]:
    order = [cls]
    for b in classes[cls].bases:
        if b in classes:
            order += [c for c in _mro(b, classes) if c not in order]
    return order


def _attr(mro: list[str], classes, key: str, default=None):
    for c in mro:
        if key in classes[c].attrs:
            return classes[c].attrs[key]
    return default


def _init_constant(init: ast.FunctionDef, name: str):
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return _value(node.value)
    return _UNKNOWN


# What the loaders' own ``__init__`` do beyond loading the URDF and SRDF (module docstring); any other is refused.
_LOADER_STEPS = {"RobotLoader", "HumanLoader", "TalosLegsLoader", "PandaLoaderCollision"}


def _entry(name: str) -> RobotEntry:
    names, classes = _registry()
    cls = names[name]
    mro = _mro(cls, classes)
    init = next((c for c in mro if classes[c].init is not None), "RobotLoader")
    get = lambda key, default=None: _attr(mro, classes, key, default)  # noqa: E731
    what = f"robot {name!r} (example_robot_data loader {cls})"
    if init not in _LOADER_STEPS:
        raise RobotNotSupported(f"{what}: its loader's __init__ ({init}) does more than load the URDF and SRDF, "
                                "and lietraj does not know what")
    urdf, sdf = get("urdf_filename", ""), get("sdf_filename", "")
    if not urdf:
        which = sdf if isinstance(sdf, str) and sdf else "an SDF file"
        raise RobotNotSupported(f"{what}: it is built from {which}, not a URDF; lietraj reads URDF only "
                                "(and this model closes kinematic loops, which lietraj's trees cannot)")
    values = {k: get(k) for k in ("path", "urdf_subpath", "srdf_filename", "srdf_subpath", "ref_posture",
                                  "free_flyer", "has_rotor_parameters")}
    unknown = [k for k, v in values.items() if v is _UNKNOWN] + (["urdf_filename"] if urdf is _UNKNOWN else [])
    if unknown:
        raise RobotNotSupported(f"{what}: attributes {unknown} are not plain values in the loader's source")
    keep_joints, rotation = None, None
    if init == "TalosLegsLoader":
        keep_joints = _init_constant(classes[init].init, "legMaxId")
        if not isinstance(keep_joints, int):
            raise RobotNotSupported(f"{what}: cannot read legMaxId from TalosLegsLoader.__init__")
    if init == "HumanLoader" and values["free_flyer"]:
        rotation = get("freeflyer_ori")
        if not isinstance(rotation, np.ndarray) or rotation.shape != (3, 3):
            raise RobotNotSupported(f"{what}: cannot read freeflyer_ori from HumanLoader")
    srdf = values["srdf_filename"] or None
    return RobotEntry(
        loader=cls, path=values["path"], urdf=urdf, urdf_subpath=values["urdf_subpath"], srdf=srdf,
        srdf_subpath=values["srdf_subpath"],
        posture=None if init == "PandaLoaderCollision" else values["ref_posture"],
        floating_base=bool(values["free_flyer"]), rotor_parameters=bool(values["has_rotor_parameters"]),
        init=init, keep_joints=keep_joints, base_rotation=rotation)


class _Robots(Mapping):
    """``ROBOTS[name]``: the ``RobotEntry`` of each robot of example-robot-data, read from its registry on first use."""

    def __getitem__(self, name: str) -> RobotEntry:
        if name not in _registry()[0]:
            raise KeyError(name)
        return _cached_entry(name)

    def __iter__(self):
        return iter(_registry()[0])

    def __len__(self) -> int:
        return len(_registry()[0])


_cached_entry = lru_cache(maxsize=None)(_entry)
ROBOTS: Mapping[str, RobotEntry] = _Robots()


def robot_data_dir() -> Path:
    """The ``robots`` directory of example-robot-data (``LIETRAJ_ROBOT_DATA`` overrides the search)."""
    candidates = []
    if os.environ.get("LIETRAJ_ROBOT_DATA"):
        candidates.append(Path(os.environ["LIETRAJ_ROBOT_DATA"]))
    rel = Path("share") / "example-robot-data" / "robots"
    candidates += [Path(p) / "cmeel.prefix" / rel for p in sys.path if p]
    candidates += [Path(sys.prefix) / rel, Path("/opt/openrobots") / rel, Path("/usr") / rel]
    for c in candidates:
        if c.is_dir():
            return c
    raise FileNotFoundError("example-robot-data not found: `pip install example-robot-data`, "
                            "or set LIETRAJ_ROBOT_DATA to its 'robots' directory")


def available_robots() -> list[str]:
    """Names accepted by ``load_robot``: every robot of example-robot-data's registry (sorted)."""
    return sorted(ROBOTS)


def load_robot(name: str, mimic: bool = False) -> RobotModel:
    """Load a robot of example-robot-data by name (see ``available_robots()``), e.g. ``load_robot("talos")``.

    Built as ``example_robot_data.load(name)`` builds it (module docstring), without Pinocchio. ``mimic``: False
    (the default, as Pinocchio's and example-robot-data's) reads the URDF's mimic joints as independent joints;
    True makes each follow ``multiplier * s[primary] + offset`` with no coordinate of its own (``model.mimic``
    lists them; see ``load_urdf``). A robot without mimic joints is the same either way. Models are cached: calling
    twice returns the same (immutable) model. Raises ``RobotNotAvailable`` (a ``KeyError``) for a name the package
    does not have, listing close names, and ``RobotNotSupported`` for a robot lietraj cannot represent.
    """
    if name not in ROBOTS:
        close = difflib.get_close_matches(name, list(ROBOTS), n=5, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise RobotNotAvailable(f"unknown robot {name!r}; {hint}available: {', '.join(available_robots())}")
    return _load(name, bool(mimic))


@lru_cache(maxsize=None)
def _load(name: str, mimic: bool = False) -> RobotModel:
    e = ROBOTS[name]
    root = robot_data_dir()
    model = load_urdf(root / e.path / e.urdf_subpath / e.urdf, floating_base=e.floating_base, name=name,
                      package_dirs=[root.parent.parent], mimic=mimic)
    if e.keep_bodies is not None:
        model = _first_bodies(model, e.keep_bodies)
    if e.base_rotation is not None:
        placement = model.joint_placement.copy()
        placement[0, :3, :3] = e.base_rotation
        # Its reference posture (the loader's q0) is Pinocchio's neutral configuration: the base turned upright.
        model = model.replace(joint_placement=placement,
                              reference_postures={"neutral": Posture(placement[0].copy(), np.zeros(model.n))})
    if e.srdf is not None:
        model = read_srdf(model, root / e.path / e.srdf_subpath / e.srdf, rotor_parameters=e.rotor_parameters,
                          default_posture=e.posture)
        if e.posture is None and model.reference_postures:  # the loader's q0 is then the neutral configuration
            neutral = model.state_space.neutral()
            model = model.replace(reference_postures={"neutral": Posture(neutral.H, neutral.s),
                                                      **model.reference_postures})
    return model


def _first_bodies(model: RobotModel, nb: int) -> RobotModel:
    """The model restricted to its first ``nb`` bodies (a prefix of the depth-first order is a subtree)."""
    n_free = 1 if model.floating_base else 0
    kept = set(model.joint_names[:nb])
    mimic = tuple(m for m in model.mimic if m.joint in kept)
    if any(m.primary not in kept for m in mimic):
        raise RobotNotSupported(f"{model.name}: the reduction drops the primary of a kept mimic joint")
    followers = {m.joint for m in mimic}
    nj = sum(j not in followers for j in model.joint_names[n_free:nb])  # the coordinates of a prefix are a prefix
    nv = nj + 6 * n_free
    return model.replace(mimic=mimic,
        body_names=model.body_names[:nb], joint_names=model.joint_names[:nb], parent=model.parent[:nb],
        joint_type=model.joint_type[:nb], joint_placement=model.joint_placement[:nb], axis=model.axis[:nb],
        mass=model.mass[:nb], com=model.com[:nb], inertia=model.inertia[:nb], armature=model.armature[:nv],
        lower_limit=model.lower_limit[:nj], upper_limit=model.upper_limit[:nj],
        velocity_limit=model.velocity_limit[:nj], effort_limit=model.effort_limit[:nj],
        continuous=model.continuous[:nj],
        frames=tuple(f for f in model.frames if f.body < nb),
        visuals=tuple(v for v in model.visuals if v.body < nb),
        reference_postures={k: type(p)(p.H, p.s[:nj]) for k, p in model.reference_postures.items()},
    )

