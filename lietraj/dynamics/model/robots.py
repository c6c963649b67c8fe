"""Real robots from the ``example-robot-data`` package, loaded as its own Python loader loads them.

Each entry uses the same URDF file, root joint (free-flyer or fixed), SRDF reference posture and rotor
parameters as ``example_robot_data.load(name)``, so that ``load_robot(name)`` and the Pinocchio model of the
same name have the same joints in the same order. ``talos_legs`` keeps, as that loader does, the base and
the twelve leg joints of ``talos`` and drops the upper body altogether (its mass included). Unlike that
loader run with Pinocchio >= 3, it does not count the sole links' inertia twice (its ``addFrame`` appends
each frame's inertia to the joint that already holds it).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.model.urdf import load_urdf, read_srdf


@dataclass(frozen=True)
class RobotEntry:
    """Where a robot lives in example-robot-data and how its loader builds it."""

    path: str
    urdf: str
    urdf_subpath: str = "robots"
    srdf: str | None = None
    posture: str | None = "half_sitting"
    floating_base: bool = False
    rotor_parameters: bool = False
    keep_bodies: int | None = None


ROBOTS: dict[str, RobotEntry] = {
    "a1": RobotEntry("a1_description", "a1.urdf", "urdf", "a1.srdf", "standing", True),
    "anymal": RobotEntry("anymal_b_simple_description", "anymal.urdf", "robots", "anymal.srdf", "standing", True),
    "anymal_c": RobotEntry("anymal_c_simple_description", "anymal.urdf", "urdf", "anymal.srdf", "standing", True),
    "b1": RobotEntry("b1_description", "b1.urdf", "urdf", "b1.srdf", "standing", True),
    "bolt": RobotEntry("bolt_description", "bolt.urdf", "robots", "bolt.srdf", "standing", True),
    "double_pendulum": RobotEntry("double_pendulum_description", "double_pendulum.urdf", "urdf"),
    "go1": RobotEntry("go1_description", "go1.urdf", "urdf", "go1.srdf", "standing", True),
    "hyq": RobotEntry("hyq_description", "hyq_no_sensors.urdf", "robots", "hyq.srdf", "standing", True),
    "icub": RobotEntry("icub_description", "icub.urdf", "robots", "icub.srdf", "half_sitting", True),
    "icub_reduced": RobotEntry("icub_description", "icub_reduced.urdf", "robots", "icub.srdf", "half_sitting", True),
    "kinova": RobotEntry("kinova_description", "kinova.urdf", "robots", "kinova.srdf", "arm_up"),
    "panda": RobotEntry("panda_description", "panda.urdf", "urdf", "panda.srdf", "default"),
    "romeo": RobotEntry("romeo_description", "romeo.urdf", "urdf", None, None, True),
    "solo8": RobotEntry("solo_description", "solo.urdf", "robots", "solo.srdf", "standing", True),
    "solo12": RobotEntry("solo_description", "solo12.urdf", "robots", "solo.srdf", "standing", True),
    "talos": RobotEntry("talos_data", "talos_reduced.urdf", "robots", "talos.srdf", "half_sitting", True, True),
    "talos_arm": RobotEntry("talos_data", "talos_left_arm.urdf", "robots", "talos.srdf", "half_sitting", False, True),
    "talos_full": RobotEntry("talos_data", "talos_full_v2.urdf", "robots", "talos.srdf", "half_sitting", True, True),
    "talos_legs": RobotEntry("talos_data", "talos_reduced.urdf", "robots", "talos.srdf", "half_sitting", True, True, 13),
    "ur3": RobotEntry("ur_description", "ur3_robot.urdf", "urdf"),
    "ur5": RobotEntry("ur_description", "ur5_robot.urdf", "urdf", "ur5.srdf", None),
    "ur10": RobotEntry("ur_description", "ur10_robot.urdf", "urdf"),
    "z1": RobotEntry("z1_description", "z1.urdf", "urdf", "z1.srdf", "arm_up"),
}


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
    """Names accepted by ``load_robot``."""
    return sorted(ROBOTS)


def load_robot(name: str) -> RobotModel:
    """Load a robot of example-robot-data by name (see ``available_robots()``), e.g. ``load_robot("talos")``.

    Models are cached: calling twice returns the same (immutable) model.
    """
    if name not in ROBOTS:
        raise KeyError(f"unknown robot {name!r}; available: {', '.join(available_robots())}")
    return _load(name)


@lru_cache(maxsize=None)
def _load(name: str) -> RobotModel:
    e = ROBOTS[name]
    root = robot_data_dir()
    model = load_urdf(root / e.path / e.urdf_subpath / e.urdf, floating_base=e.floating_base, name=name,
                      package_dirs=[root.parent.parent])
    if e.keep_bodies is not None:
        model = _first_bodies(model, e.keep_bodies)
    if e.srdf is not None:
        model = read_srdf(model, root / e.path / "srdf" / e.srdf, rotor_parameters=e.rotor_parameters,
                          default_posture=e.posture)
    return model


def _first_bodies(model: RobotModel, nb: int) -> RobotModel:
    """The model restricted to its first ``nb`` bodies (a prefix of the depth-first order is a subtree)."""
    n_free = 1 if model.floating_base else 0
    nj, nv = nb - n_free, nb + 5 * n_free
    return model.replace(
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

