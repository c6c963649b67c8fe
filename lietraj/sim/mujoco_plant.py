"""A MuJoCo simulation of a lietraj robot: joint torques in, lietraj states out, pushes as external wrenches.

``MujocoPlant`` owns the ``MjModel`` of ``build_mujoco_model`` and an ``MjData``. Its inputs and outputs are in
lietraj's conventions (``State``: base pose ``H``, body twist ``ν`` linear first, joints in lietraj's order); the
conversions are ``MujocoRobot``'s. Every step is checked: a non-finite state, or MuJoCo's warnings of a bad
position, velocity or acceleration (``mjWARN_BADQPOS``, ``mjWARN_BADQVEL``, ``mjWARN_BADQACC``: the simulation
is unstable), raise ``SimulationDiverged`` naming the time and the joint, instead of passing a NaN on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

from lietraj.dynamics.lie.state import State
from lietraj.dynamics.model.model import RobotModel
from lietraj.sim.mujoco_model import MujocoRobot, build_mujoco_model, finite_vector

_INSTABILITY_WARNINGS = {
    mujoco.mjtWarning.mjWARN_BADQPOS: "bad position (NaN, inf or huge value in qpos)",
    mujoco.mjtWarning.mjWARN_BADQVEL: "bad velocity (NaN, inf or huge value in qvel)",
    mujoco.mjtWarning.mjWARN_BADQACC: "bad acceleration (NaN, inf or huge value in qacc)",
}


class SimulationDiverged(Exception):
    """MuJoCo's simulation became non-finite or unstable; the message names the time and what went wrong."""


@dataclass
class _Push:
    """An external wrench ``[force; torque]`` (world frame) on a MuJoCo body for ``steps`` more physics steps."""

    body: int
    wrench: np.ndarray
    steps: int


class MujocoPlant:
    """MuJoCo simulating ``robot``, driven by joint torques and read as lietraj states.

    ``MujocoPlant(robot, timestep=0.001, **options)`` builds the model with ``build_mujoco_model(robot,
    timestep=timestep, **options)`` (``floor``, ``friction``, ``torque_limits``, ``integrator``, ``cone``,
    ``package_dirs``) and starts at ``robot.reference_state()`` (example-robot-data's legged robots stand on the
    floor there, their feet within a few millimetres of it). Attributes: ``robot``, ``mujoco`` (the
    ``MujocoRobot``: model, coordinate maps, URDF edits), ``model`` and ``data`` (MuJoCo's, for anything not
    wrapped here), ``torque_lower`` / ``torque_upper`` (n,) (the motors' ranges, ±inf where unlimited).
    """

    def __init__(self, robot: RobotModel, timestep: float = 0.001, **options):
        self.robot = robot
        self.mujoco: MujocoRobot = build_mujoco_model(robot, timestep=timestep, **options)
        self.model = self.mujoco.model
        self.data = mujoco.MjData(self.model)
        limited = self.model.actuator_ctrllimited.astype(bool)
        self.torque_lower = np.where(limited, self.model.actuator_ctrlrange[:, 0], -np.inf)
        self.torque_upper = np.where(limited, self.model.actuator_ctrlrange[:, 1], np.inf)
        self._pushes: list[_Push] = []
        self.reset()

    def __repr__(self) -> str:
        return f"MujocoPlant({self.robot.name!r}, t={self.time:.4f} s, timestep={self.timestep} s)"

    @property
    def time(self) -> float:
        """Simulated time in seconds since the last ``reset``."""
        return float(self.data.time)

    @property
    def timestep(self) -> float:
        """MuJoCo's physics time step in seconds."""
        return float(self.model.opt.timestep)

    def reset(self, x: State | None = None) -> None:
        """Back to time 0 at the state ``x`` (default ``robot.reference_state()``), with no push and zero torque."""
        mujoco.mj_resetData(self.model, self.data)
        self._pushes.clear()
        self.set_state(self.robot.reference_state() if x is None else x)

    def state(self) -> State:
        """The current lietraj state (new arrays)."""
        return self.mujoco.from_mujoco(self.data.qpos, self.data.qvel)

    def set_state(self, x: State) -> None:
        """Put the robot at the state ``x`` (time, torques and pushes unchanged); MuJoCo's derived quantities
        (contacts, accelerations) are recomputed (``mj_forward``). Raises ValueError naming the field of a
        malformed state (wrong shape, NaN, non-rigid ``H``)."""
        self.data.qpos[:], self.data.qvel[:] = self.mujoco.to_mujoco(x)
        mujoco.mj_forward(self.model, self.data)
        self._check(f"at t = {self.time:.6g} s")

    def step(self, u, duration: float | None = None) -> State:
        """Apply the joint torques ``u`` (n,) (lietraj's joint order, N m or N; clipped to ``torque_lower``,
        ``torque_upper``) for one physics step, or for ``duration`` seconds rounded to whole steps (at least one),
        and return the new state. Active pushes are applied on each step. Raises ValueError naming ``u`` or
        ``duration`` for a wrong shape, a NaN, a torque beyond MuJoCo's ``mjMAXVAL`` (1e10, which MuJoCo would
        replace by zero) or a duration that is not positive; ``SimulationDiverged`` when the simulation becomes
        non-finite or unstable."""
        ctrl = np.clip(finite_vector(u, self.robot.n, "u"), self.torque_lower, self.torque_upper)
        huge = [self.robot.actuated_joint_names[k] for k in np.flatnonzero(np.abs(ctrl) > mujoco.mjMAXVAL)]
        if huge:  # MuJoCo would replace the whole ctrl by zero, with a warning
            raise ValueError(f"u has torques beyond MuJoCo's largest value {mujoco.mjMAXVAL:g} at joints {huge}")
        self.data.ctrl[:] = ctrl
        for _ in range(self._whole_steps(duration, "duration")):
            self._apply_pushes()
            start = self.time
            mujoco.mj_step(self.model, self.data)
            self._check(f"in the step from t = {start:.6g} s")
        return self.state()

    def push(self, name: str, force, torque=(0.0, 0.0, 0.0), duration: float = 0.1) -> None:
        """Push the body or frame ``name`` with ``force`` (3,) N and ``torque`` (3,) N m, both in the world frame,
        for the next ``duration`` seconds of simulated time (rounded to whole steps, at least one), on top of any
        other push. MuJoCo applies the wrench (``xfrc_applied``) at the centre of mass of the MuJoCo body holding
        the frame, i.e. of the lietraj body the link is fused into (``MujocoRobot.body_id``). Raises KeyError for
        an unknown name, ValueError for a frame fixed in the world, a malformed wrench or a non-positive
        duration."""
        body = self.mujoco.body_id(name)
        wrench = np.concatenate([finite_vector(force, 3, "force"), finite_vector(torque, 3, "torque")])
        self._pushes.append(_Push(body, wrench, self._whole_steps(duration, "push duration")))

    def contact_forces(self) -> dict[str, float]:
        """Normal force (N) of the floor on each robot geom touching it, by geom name (the URDF link it comes
        from, ``link_k`` for the k-th geom of a link with several: e.g. ``"FR_foot"`` on the A1), at the current
        state; empty without contact or floor."""
        forces: dict[str, float] = {}
        floor, wrench = self.mujoco.floor_geom, np.zeros(6)
        for i in range(self.data.ncon):
            geoms = self.data.contact[i].geom
            if floor < 0 or floor not in geoms:
                continue
            mujoco.mj_contactForce(self.model, self.data, i, wrench)
            other = int(geoms[1] if geoms[0] == floor else geoms[0])
            name = mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_GEOM, other) or f"geom {other}"
            forces[name] = forces.get(name, 0.0) + float(wrench[0])  # contact frame: normal first
        return forces

    def _whole_steps(self, duration: float | None, what: str) -> int:
        """``duration`` seconds in physics steps, rounded, at least one (one for None)."""
        if duration is None:
            return 1
        if not (duration > 0 and math.isfinite(duration)):
            raise ValueError(f"{what} must be a positive number of seconds, got {duration!r}")
        return max(1, round(duration / self.timestep))

    def _apply_pushes(self) -> None:
        """``xfrc_applied`` for the coming step: the sum of the active pushes; each then has one step less."""
        self.data.xfrc_applied[:] = 0.0
        for push in self._pushes:
            self.data.xfrc_applied[push.body] += push.wrench
            push.steps -= 1
        self._pushes = [p for p in self._pushes if p.steps > 0]

    def _check(self, when: str) -> None:
        """Raise ``SimulationDiverged``, saying ``when``, if MuJoCo warned of instability or its state is not
        finite."""
        d = self.data
        for warning, what in _INSTABILITY_WARNINGS.items():
            if d.warning[warning].number > 0:
                index = int(d.warning[warning].lastinfo)
                where = self._joint_of_qpos(index) if warning == mujoco.mjtWarning.mjWARN_BADQPOS \
                    else self._joint_of_dof(index)
                raise SimulationDiverged(f"MuJoCo simulation of {self.robot.name} diverged {when}: {what} at {where}")
        for name in ("qpos", "qvel", "qacc"):
            bad = np.flatnonzero(~np.isfinite(getattr(d, name)))
            if bad.size:
                where = self._joint_of_qpos(bad[0]) if name == "qpos" else self._joint_of_dof(bad[0])
                raise SimulationDiverged(f"MuJoCo simulation of {self.robot.name} diverged {when}: {name} is not "
                                         f"finite at {where}")

    def _joint_of_dof(self, dof: int) -> str:
        joint = int(self.model.dof_jntid[dof])
        return f"dof {dof} (joint {mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_JOINT, joint)!r})"

    def _joint_of_qpos(self, index: int) -> str:
        joint = int(np.searchsorted(self.model.jnt_qposadr, index, side="right") - 1)
        return f"qpos[{index}] (joint {mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_JOINT, joint)!r})"
