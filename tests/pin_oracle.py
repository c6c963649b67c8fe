"""Pinocchio models built exactly as example-robot-data's loader builds them: the test oracle."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pinocchio as pin

from lietraj.dynamics.model.robots import ROBOTS, robot_data_dir


@lru_cache(maxsize=None)
def pin_model(name: str) -> pin.Model:
    e = ROBOTS[name]
    root = robot_data_dir()
    urdf = str(root / e.path / e.urdf_subpath / e.urdf)
    model = pin.buildModelFromUrdf(urdf, pin.JointModelFreeFlyer()) if e.floating_base else pin.buildModelFromUrdf(urdf)
    if e.keep_bodies is not None:
        model = _first_joints(model, e.keep_bodies + 1)
    if e.base_rotation is not None:  # HumanLoader turns the free-flyer
        model.jointPlacements[1].rotation = e.base_rotation
    if e.srdf is not None:
        srdf = str(root / e.path / e.srdf_subpath / e.srdf)
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
            j2 = m2.joints[jid]
            for limits in ("lowerPositionLimit", "upperPositionLimit"):
                values = getattr(m2, limits)
                values[j2.idx_q:j2.idx_q + j.nq] = getattr(m1, limits)[j.idx_q:j.idx_q + j.nq]
                setattr(m2, limits, values)
            for limits in ("velocityLimit", "effortLimit"):
                values = getattr(m2, limits)
                values[j2.idx_v:j2.idx_v + j.nv] = getattr(m1, limits)[j.idx_v:j.idx_v + j.nv]
                setattr(m2, limits, values)
            m2.appendBodyToJoint(jid, Y, pin.SE3.Identity())
    for f in m1.frames:
        if f.parentJoint < n_joints and f.name != "universe":
            m2.addFrame(f, False)
    return m2


def pin_model_from(model) -> pin.Model:
    """A Pinocchio model of a lietraj model (for builder-made trees): same bodies, joints and inertias."""
    from lietraj.dynamics.model.model import JOINT_FREE, JOINT_PRISMATIC

    pm = pin.Model()
    pm.gravity = pin.Motion(np.concatenate([model.gravity, np.zeros(3)]))
    ids = []
    for i in range(model.nb):
        parent = 0 if model.parent[i] < 0 else ids[model.parent[i]]
        T = model.joint_placement[i]
        M = pin.SE3(T[:3, :3].copy(), T[:3, 3].copy())
        jt = model.joint_type[i]
        if jt == JOINT_FREE:
            joint = pin.JointModelFreeFlyer()
        elif jt == JOINT_PRISMATIC:
            joint = pin.JointModelPrismaticUnaligned(model.axis[i].copy())
        else:
            joint = pin.JointModelRevoluteUnaligned(model.axis[i].copy())
        jid = pm.addJoint(parent, joint, M, model.joint_names[i])
        pm.appendBodyToJoint(jid, pin.Inertia(model.mass[i], model.com[i].copy(), model.inertia[i].copy()), pin.SE3.Identity())
        ids.append(jid)
    pm.armature = model.armature.copy()
    return pm


PIN_CONTACT_TYPE = {"6d": pin.ContactType.CONTACT_6D, "3d": pin.ContactType.CONTACT_3D}
PIN_REFERENCE = {"local": pin.LOCAL, "local_world_aligned": pin.LOCAL_WORLD_ALIGNED}
PROXIMAL_SETTINGS = (1e-14, 0.0, 1)  # (accuracy, mu, max_iter): one exact KKT solve, no proximal damping


def pin_constraints(name: str, contacts):
    """``(model, data, constraint models, constraint datas)``: Pinocchio's model of the robot and one frame-to-world
    ``RigidConstraintModel`` per lietraj ``Contact`` (its kind, reference, target pose (identity when None) and
    Baumgarte gains), initialized for ``constraintDynamics`` / ``impulseDynamics``."""
    pm = pin_model(name)
    pd = pm.createData()
    cmodels, cdatas = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
    for c in contacts:
        frame = pm.frames[pm.getFrameId(c.frame)]
        target = pin.SE3.Identity() if c.target is None else pin.SE3(c.target[:3, :3], c.target[:3, 3])
        cm = pin.RigidConstraintModel(PIN_CONTACT_TYPE[c.kind], pm, frame.parentJoint, frame.placement, 0, target,
                                      PIN_REFERENCE[c.reference])
        gains = cm.m_baumgarte_parameters
        gains.Kp, gains.Kd = c.baumgarte
        cm.m_baumgarte_parameters = gains
        cmodels.append(cm)
        cdatas.append(cm.createData())
    pin.initConstraintDynamics(pm, pd, cmodels, cdatas)
    return pm, pd, cmodels, cdatas
