"""Robots load as example-robot-data loads them: same joints, order, limits, inertias, armature, postures."""

import warnings

import numpy as np
import pinocchio as pin
import pytest

import lietraj
from lietraj.dynamics.model.robots import _load
from lietraj.dynamics.model.pinocchio_interop import from_pinocchio, to_pinocchio, xyzquat_from_pose
from pin_oracle import pin_model

ISSUE_ROBOTS = ["talos", "talos_legs", "solo12", "anymal", "go1", "a1", "hyq", "icub", "romeo", "ur5", "panda"]


UNSUPPORTED = {"cassie"}  # built from an SDF with closed loops: test_all_robots checks that lietraj refuses it


@pytest.mark.parametrize("name", [n for n in lietraj.available_robots() if n not in UNSUPPORTED])
def test_robot_matches_pinocchio_model(name):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = _load.__wrapped__(name)
    if name in ("romeo", "bravo7_gripper", "falcon_bravo7_gripper", "bluevolta_bravo7_gripper"):
        assert any("move no mass" in str(w.message) for w in caught)  # their finger links carry no inertia
    pm = pin_model(name)
    assert model.nv == pm.nv
    pin_joints = [n for n in pm.names[1:] if n != "root_joint"]
    assert list(model.actuated_joint_names) == pin_joints
    off = 1 if model.floating_base else 0
    for k in range(model.n):
        j = pm.joints[k + 1 + off]
        if model.continuous[k]:
            assert j.nq == 2 and np.isinf(model.lower_limit[k]) and np.isinf(model.upper_limit[k])
        else:
            assert model.lower_limit[k] == pytest.approx(pm.lowerPositionLimit[j.idx_q])
            assert model.upper_limit[k] == pytest.approx(pm.upperPositionLimit[j.idx_q])
        assert model.velocity_limit[k] == pytest.approx(pm.velocityLimit[j.idx_v])
        assert model.effort_limit[k] == pytest.approx(pm.effortLimit[j.idx_v])
    for i in range(model.nb):
        Y = pm.inertias[i + 1]
        assert model.mass[i] == pytest.approx(Y.mass, abs=1e-12)
        np.testing.assert_allclose(model.com[i], Y.lever, atol=1e-12)
        np.testing.assert_allclose(model.inertia[i], Y.inertia, atol=1e-12)
        M = pm.jointPlacements[i + 1]
        np.testing.assert_allclose(model.joint_placement[i][:3, :3], M.rotation, atol=1e-12)
        np.testing.assert_allclose(model.joint_placement[i][:3, 3], M.translation, atol=1e-12)
    np.testing.assert_allclose(model.armature, pm.armature, atol=1e-15)


def test_every_robot_the_issue_names_is_available():
    assert set(ISSUE_ROBOTS) <= set(lietraj.available_robots())


def test_talos_has_rotor_armature_and_half_sitting():
    talos = lietraj.load_robot("talos")
    assert np.count_nonzero(talos.armature == 0.1) >= 20
    x = talos.reference_state("half_sitting")
    assert x.H[2, 3] == pytest.approx(1.01927)
    assert lietraj.load_robot("talos").reference_state() is not None


def test_reference_posture_matches_pinocchio_srdf():
    from lietraj.dynamics.model.robots import ROBOTS, robot_data_dir

    for name in ["talos", "solo12", "panda", "anymal"]:
        model, pm = lietraj.load_robot(name), pin_model(name).copy()
        e = ROBOTS[name]
        pin.loadReferenceConfigurations(pm, str(robot_data_dir() / e.path / e.srdf_subpath / e.srdf), False)
        q_pin = pm.referenceConfigurations[e.posture]
        q, _ = to_pinocchio(model, model.reference_state(e.posture))
        np.testing.assert_allclose(q, q_pin, atol=1e-12)


def test_pinocchio_roundtrip_of_states():
    rng = np.random.default_rng(0)
    for name in ["talos", "ur5"]:
        model = lietraj.load_robot(name)
        x = model.state_space.random(rng)
        q, v = to_pinocchio(model, x)
        y = from_pinocchio(model, q, v)
        np.testing.assert_allclose(y.s, x.s)
        if model.floating_base:
            np.testing.assert_allclose(y.H, x.H, atol=1e-14)
            assert xyzquat_from_pose(x.H)[6] >= 0
        np.testing.assert_allclose(pin.normalize(pin_model(name), q), q, atol=1e-14)


def test_unknown_robot_lists_the_known_ones():
    with pytest.raises(KeyError, match="available: .*talos"):
        lietraj.load_robot("robby")


def test_visual_geometry_resolves_meshes():
    import os

    talos = lietraj.load_robot("talos")
    meshes = [v for v in talos.visuals if v.shape == "mesh"]
    assert len(meshes) > 20
    assert all(os.path.exists(v.filename) for v in meshes)
    solo = lietraj.load_robot("solo12")
    assert any(v.rgba is not None for v in solo.visuals) or all(v.shape == "mesh" for v in solo.visuals)
