"""Pinocchio models built exactly as example-robot-data's loader builds them: the test oracle."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pinocchio as pin

from lietraj.dynamics.robots import ROBOTS, robot_data_dir


@lru_cache(maxsize=None)
def pin_model(name: str) -> pin.Model:
    e = ROBOTS[name]
    root = robot_data_dir()
    urdf = str(root / e.path / e.urdf_subpath / e.urdf)
    model = pin.buildModelFromUrdf(urdf, pin.JointModelFreeFlyer()) if e.floating_base else pin.buildModelFromUrdf(urdf)
    if e.keep_bodies is not None:
        model = _first_joints(model, e.keep_bodies + 1)
    if e.srdf is not None:
        srdf = str(root / e.path / "srdf" / e.srdf)
        if e.rotor_parameters:
            pin.loadRotorParameters(model, srdf, False)
        model.armature = np.multiply(model.rotorInertia.flat, np.square(model.rotorGearRatio.flat))
    return model


def _first_joints(m1: pin.Model, n_joints: int) -> pin.Model:
    """The example-robot-data talos_legs reduction: keep joints with id < n_joints, drop the rest and its mass.

    Frames are re-added without their inertia: example-robot-data's loader calls ``addFrame(f)``, which with
    Pinocchio >= 3 appends each frame's inertia a second time (0.01 kg per sole on Talos).
    """
    m2 = pin.Model()
    for j, M, name, parent, Y in zip(m1.joints, m1.jointPlacements, m1.names, m1.parents, m1.inertias):
        if 0 < j.id < n_joints:
            jid = m2.addJoint(parent, getattr(pin, j.shortname())(), M, name)
            m2.appendBodyToJoint(jid, Y, pin.SE3.Identity())
    for f in m1.frames:
        if f.parentJoint < n_joints and f.name != "universe":
            m2.addFrame(f, False)
    return m2
