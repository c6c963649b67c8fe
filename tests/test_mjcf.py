"""load_mjcf: robots read from MuJoCo's compiled MJCF have MuJoCo's dynamics and kinematics.

Oracles: MuJoCo itself on the same file (mass matrix ``mj_fullM``, inverse dynamics ``mj_rne`` with and without
acceleration, bias ``qfrc_bias``, body, site and joint placements), mapped to lietraj's coordinates by
``lietraj.sim.mjcf_maps`` (a ball joint's quaternion and angular velocity through ``ball_quaternion`` and
``ball_rate_map``, each checked against MuJoCo's Euler angles and finite differences on its own); and Pinocchio's
``SphericalZYX`` joint for the balls; and lietraj's URDF models of example-robot-data robots, converted to MJCF by
MuJoCo (``build_mujoco_model``). Third-party models: dm_control's suite, read from its installed wheel.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import mujoco
import numpy as np
import pytest

import lietraj
from lietraj.dynamics import (
    MJCFError,
    State,
    aba,
    ball_angles,
    ball_quaternion,
    ball_rate_map,
    body_placements,
    frame_placements,
    load_mjcf,
    mass_matrix,
    rnea,
)
from lietraj.dynamics.model.model import JOINT_PRISMATIC
from lietraj.sim import build_mujoco_model, mjcf_maps

SUITE = Path(importlib.util.find_spec("dm_control").submodule_search_locations[0]) / "suite"
TOL = 1e-8

# dm_control suite models with only hinge, slide and free joints, no tendon, no equality constraint.
SUPPORTED = ["humanoid", "humanoid_CMU", "cheetah", "walker", "hopper", "acrobot", "cartpole", "reacher", "finger",
             "swimmer"]
# The others, and the first element each is refused for.
REFUSED = {
    "quadruped": "tendon 'coupling_front_left'",
    "dog": "tendon 'lumbar_extend'",
    "manipulator": "tendon 'grasp'",
    "fish": "tendon 'fins_flap'",
    "stacker": "tendon",
    "ball_in_cup": "tendon",
    "point_mass": "tendon",
    "lqr": "no joint",
}


def relative_error(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-6))  # forces of a few newtons and more


def random_state(robot, rng) -> State:
    x = robot.state_space.random(rng)
    return State(x.H, x.s, rng.standard_normal(robot.nv))


def check_against_mujoco(robot, mj, seed: int = 0, states: int = 2) -> None:
    """Mass matrix, bias, RNEA with acceleration, and the placements of every body, site and hinge frame equal
    MuJoCo's at random states. MuJoCo keeps a mimic joint's coordinate (bound by its joint equality): its quantities
    are those of ``robot.expanded``, contracted by the mimic map ``G`` (``M = Gᵀ M_full G``, ``τ = Gᵀ τ_full``)."""
    full = robot.expanded
    G = np.eye(robot.nv) if robot.mimic_map is None else robot.mimic_map.G
    maps, data, rng = mjcf_maps(full, mj), mujoco.MjData(mj), np.random.default_rng(seed)
    for _ in range(states):
        x = random_state(robot, rng)
        x_full = robot.expand_state(x)
        data.qpos[:], data.qvel[:] = maps.to_mujoco(x_full)
        mujoco.mj_forward(mj, data)
        T = maps.velocity_map(x_full) @ G
        M_mj = np.zeros((mj.nv, mj.nv))
        mujoco.mj_fullM(mj, data, M_mj)
        assert relative_error(mass_matrix(robot, x), T.T @ M_mj @ T) < TOL
        # qfrc_bias is the force at zero qacc: lietraj's acceleration there is not zero for a floating base.
        at_rest = np.linalg.pinv(G) @ maps.acceleration_from_mujoco(x_full, np.zeros(mj.nv))
        bias = G.T @ maps.force_from_mujoco(x_full, data.qfrc_bias)
        assert relative_error(rnea(robot, x, at_rest), bias) < TOL
        a = rng.standard_normal(robot.nv)
        data.qacc[:] = maps.acceleration_to_mujoco(x_full, G @ a)
        qfrc = np.zeros(mj.nv)
        mujoco.mj_rne(mj, data, 1, qfrc)
        qfrc += mj.dof_armature * data.qacc  # mj_rne leaves the armature to mj_inverse
        assert relative_error(rnea(robot, x, a), G.T @ maps.force_from_mujoco(x_full, qfrc)) < TOL

        placements = frame_placements(robot, x)
        for frame, H in zip(robot.frames, placements):
            if frame.kind == "body":
                i = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_BODY, frame.name)
                i = i if i >= 0 else int(frame.name.removeprefix("body"))  # load_mjcf's name of an unnamed body
                p, R = data.xpos[i], data.xmat[i].reshape(3, 3)
            elif frame.kind == "site":
                i = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_SITE, frame.name)
                p, R = data.site_xpos[i], data.site_xmat[i].reshape(3, 3)
            else:  # a hinge's frame: at the anchor, about MuJoCo's axis (a slide's anchor does not move with it)
                i = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, frame.name)
                if mj.jnt_type[i] == mujoco.mjtJoint.mjJNT_BALL:
                    np.testing.assert_allclose(H[:3, 3], data.xanchor[i], atol=1e-12, err_msg=frame.name)
                if mj.jnt_type[i] == mujoco.mjtJoint.mjJNT_HINGE:
                    np.testing.assert_allclose(H[:3, 3], data.xanchor[i], atol=1e-12, err_msg=frame.name)
                    np.testing.assert_allclose(H[:3, :3] @ full.axis[frame.body], data.xaxis[i], atol=1e-12,
                                               err_msg=frame.name)
                continue
            np.testing.assert_allclose(H[:3, 3], p, atol=1e-12, err_msg=frame.name)
            np.testing.assert_allclose(H[:3, :3], R, atol=1e-12, err_msg=frame.name)


@pytest.mark.parametrize("name", SUPPORTED)
def test_dm_control_suite_models_have_mujocos_dynamics(name):
    path = SUITE / f"{name}.xml"
    robot = load_mjcf(path)
    mj = mujoco.MjModel.from_xml_path(str(path))
    assert robot.nv == mj.nv and robot.floating_base == (mj.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE)
    assert robot.total_mass == pytest.approx(float(mj.body_subtreemass[0] - mj.body_mass[0]), rel=1e-12)
    check_against_mujoco(robot, mj)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_dm_control_models_lietraj_cannot_represent_are_refused_by_name(name):
    with pytest.raises(MJCFError, match=REFUSED[name]):
        load_mjcf(SUITE / f"{name}.xml")


def test_humanoid_multi_joint_bodies_are_chains_and_qpos0_is_a_posture():
    robot = load_mjcf(SUITE / "humanoid.xml")
    assert robot.name == "humanoid" and robot.joint_names[0] == "root"
    # lower_waist has two joints: a massless body for the first, the body's name and inertia on the second.
    first, second = robot.body_names.index("lower_waist/abdomen_z"), robot.body_names.index("lower_waist")
    assert robot.parent[second] == first and robot.mass[first] == 0 and robot.mass[second] > 0
    x0 = robot.reference_state()
    np.testing.assert_allclose(x0.H[:3, 3], [0, 0, 1.5])
    mj = mujoco.MjModel.from_xml_path(str(SUITE / "humanoid.xml"))
    for a in range(mj.nu):  # one motor per joint, ctrl in [-1, 1]: the effort limit is the gear
        joint = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_JOINT, mj.actuator_trnid[a, 0])
        assert robot.effort_limit[robot.joint_index(joint)] == mj.actuator_gear[a, 0]
    capsules = [v for v in robot.visuals if v.name.endswith("_top")]
    assert capsules and all(v.shape == "sphere" for v in capsules)


SYNTHETIC = """
<mujoco model="synthetic">
  <compiler angle="radian"/>
  <option gravity="0.3 -0.2 -9.5"/>
  <asset>
    <mesh name="tetra" vertex="0 0 0  0.1 0 0  0 0.1 0  0 0 0.1"/>
    <material name="blue" rgba="0 0 1 1"/>
  </asset>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.1"/>
    <body name="stand" pos="0 0 0.1">
      <geom name="stand_box" type="box" size="0.1 0.2 0.05" mass="3"/>
      <site name="stand_site" pos="0 0 0.05"/>
      <body name="base" pos="0.1 0.2 0.3" quat="0.9 0.1 0.2 0.3">
        <joint name="slide" type="slide" axis="1 1 0" ref="0.2" pos="0.05 0 0" range="-1 1" actuatorfrcrange="-7 7"/>
        <joint name="yaw" axis="0 0 1" ref="0.4" pos="0 0.1 0"/>
        <joint name="pitch" axis="0 1 0" pos="0.02 0 0.03" range="-2 2"/>
        <geom name="arm" type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
        <site name="tip" pos="0.3 0 0" euler="0.1 0.2 0.3"/>
        <body name="bracket" pos="0.3 0 0" euler="0.3 0 0.2">
          <inertial pos="0.01 0.02 0.03" mass="0.7" fullinertia="0.01 0.02 0.025 0.001 0.002 0.003"/>
          <geom name="bracket_shell" type="ellipsoid" size="0.03 0.02 0.01" group="2" material="blue"/>
          <body name="hand" pos="0.05 0 0">
            <joint name="wrist" axis="1 0 0" pos="0.01 0.01 0" ref="-0.3" armature="0.05"/>
            <geom name="hand_mesh" type="mesh" mesh="tetra" pos="0.01 0 0"/>
            <geom name="hand_collision" type="cylinder" size="0.02 0.05" group="3"/>
            <geom name="hand_ghost" type="sphere" size="0.03" rgba="1 0 0 0"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="yaw" gear="20" ctrlrange="-1 1"/>
    <motor joint="pitch" gear="-3" forcerange="-5 4"/>
    <position joint="wrist" kp="10" ctrlrange="-1 1"/>
  </actuator>
  <keyframe><key name="home" qpos="0.1 0.2 0.3 0.4"/></keyframe>
</mujoco>
"""


def test_joint_anchors_references_chains_and_fixed_bodies_follow_mujoco():
    """A slide and two hinges in one body with anchors and reference positions, a fixed body with a full inertia
    merged into it, a body welded to the world: MuJoCo's dynamics, placements and ``s = qpos``."""
    mj = mujoco.MjModel.from_xml_string(SYNTHETIC)
    robot = load_mjcf(mj)
    assert robot.actuated_joint_names == ("slide", "yaw", "pitch", "wrist")
    assert robot.body_names == ("base/slide", "base/yaw", "base", "hand")
    assert robot.joint_type[0] == JOINT_PRISMATIC
    np.testing.assert_array_equal(robot.gravity, [0.3, -0.2, -9.5])
    assert robot.mass[2] == pytest.approx(mj.body_mass[2] + mj.body_mass[3], rel=1e-14)  # bracket merged into base
    check_against_mujoco(robot, mj, seed=3, states=3)


def test_limits_efforts_armature_and_postures_come_from_the_compiled_model():
    robot = load_mjcf(mujoco.MjModel.from_xml_string(SYNTHETIC))
    np.testing.assert_array_equal(robot.lower_limit, [-1, -np.inf, -2, -np.inf])
    np.testing.assert_array_equal(robot.upper_limit, [1, np.inf, 2, np.inf])
    np.testing.assert_array_equal(robot.continuous, [False, True, False, True])
    # slide: the joint's actuatorfrcrange; yaw: a motor's ctrlrange x gear; pitch: forcerange x |gear|;
    # wrist: a position servo without forcerange is unbounded.
    np.testing.assert_array_equal(robot.effort_limit, [7, 20, 15, np.inf])
    np.testing.assert_array_equal(robot.armature, [0, 0, 0, 0.05])
    assert list(robot.reference_postures) == ["home", "qpos0"]
    np.testing.assert_array_equal(robot.reference_state().s, [0.1, 0.2, 0.3, 0.4])
    np.testing.assert_array_equal(robot.reference_state("qpos0").s, [0.2, 0.4, 0, -0.3])
    assert {f.name: f.kind for f in robot.frames if f.kind == "site"} == {"stand_site": "site", "tip": "site"}
    assert robot.frames[robot.frame_index("stand_site")].body == -1


def test_visuals_are_the_geoms_mujoco_draws_where_it_draws_them():
    """Primitives with MuJoCo's sizes, a capsule as a cylinder and two spheres, an ellipsoid as a scaled sphere mesh,
    a mesh as the compiled vertices in an STL file; collision-only (group 3) and transparent geoms and planes left
    out; every pose equal to MuJoCo's ``geom_xpos`` / ``geom_xmat``."""
    mj = mujoco.MjModel.from_xml_string(SYNTHETIC)
    robot = load_mjcf(mj)
    visuals = {v.name: v for v in robot.visuals}
    assert set(visuals) == {"stand_box", "arm", "arm_top", "arm_bottom", "bracket_shell", "hand_mesh"}
    np.testing.assert_allclose(visuals["stand_box"].size, [0.2, 0.4, 0.1])
    assert visuals["arm"].shape == "cylinder" and visuals["arm"].length == pytest.approx(0.3)
    assert visuals["arm"].radius == visuals["arm_top"].radius == pytest.approx(0.04)
    np.testing.assert_allclose(visuals["bracket_shell"].scale, [0.03, 0.02, 0.01])
    np.testing.assert_array_equal(visuals["bracket_shell"].rgba, [0, 0, 1, 1])  # its material's colour

    stl = Path(visuals["hand_mesh"].filename).read_bytes()
    triangles = np.frombuffer(stl[84:], dtype=[("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")])["v"]
    faces = mj.mesh_face[mj.mesh_faceadr[0]:mj.mesh_faceadr[0] + mj.mesh_facenum[0]]
    np.testing.assert_allclose(triangles, mj.mesh_vert[faces], atol=1e-7)

    data, rng = mujoco.MjData(mj), np.random.default_rng(5)
    x = random_state(robot, rng)
    data.qpos[:] = mjcf_maps(robot, mj).to_mujoco(x)[0]
    mujoco.mj_forward(mj, data)
    bodies = body_placements(robot, x)
    for v in robot.visuals:
        if v.name.endswith(("_top", "_bottom")):
            continue
        H = np.eye(4) if v.body < 0 else bodies[v.body]
        g = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_GEOM, v.name)
        np.testing.assert_allclose(H[:3, :3] @ v.p + H[:3, 3], data.geom_xpos[g], atol=1e-12, err_msg=v.name)
        np.testing.assert_allclose(H[:3, :3] @ v.R, data.geom_xmat[g].reshape(3, 3), atol=1e-12, err_msg=v.name)


def _body(name: str, joint: str) -> str:
    return f'<body name="{name}">{joint}<geom type="sphere" size="0.1"/></body>'


@pytest.mark.parametrize("world, message", [
    (_body("arm", '<joint name="shoulder" type="ball" armature="0.1"/>'), "ball joint 'shoulder': its armature"),
    (_body("a", '<freejoint name="fa"/>') + _body("b", '<freejoint name="fb"/>'), r"several free bodies \['a', 'b'\]"),
    (_body("a", '<freejoint name="fa"/>') + _body("b", '<joint name="hb"/>'),
     r"bodies \['b'\] move beside the free body 'a'"),
    (_body("a", '<joint name="f" type="free" armature="0.1"/>'), "free joint 'f': lietraj has no armature"),
    (_body("a", ""), "no joint"),
])
def test_what_lietraj_cannot_represent_is_refused_naming_the_element(world, message):
    mj = mujoco.MjModel.from_xml_string(f"<mujoco><worldbody>{world}</worldbody></mujoco>")
    with pytest.raises(MJCFError, match=message):
        load_mjcf(mj)


BALL_JOINTS = SUITE.parent / "mujoco" / "testing" / "assets" / "model_with_ball_joints.xml"

BALLS = """
<mujoco model="balls">
  <compiler angle="radian"/>
  <worldbody>
    <body name="upper" pos="0.1 0 1" quat="0.9 0.1 -0.3 0.2">
      <joint name="twist" axis="0 0.6 0.8" pos="0.01 0 0"/>
      <joint name="shoulder" type="ball" pos="0 0.05 0.02" range="0 1.2"/>
      <geom type="capsule" fromto="0 0 0 0.3 0.05 0" size="0.04"/>
      <body name="lower" pos="0.3 0.05 0" euler="0.2 0 0.1">
        <joint name="wrist" type="ball" pos="0.02 0 0"/>
        <inertial pos="0.1 0.01 0" mass="0.9" fullinertia="0.004 0.012 0.011 0.0003 -0.0002 0.0001"/>
        <site name="palm" pos="0.2 0 0" euler="0.3 0.2 0.1"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="shoulder" gear="1 0 0" ctrlrange="-3 3"/><motor joint="twist" gear="2" ctrlrange="-1 1"/></actuator>
  <keyframe><key name="reach" qpos="0.3  0.8 0.2 -0.4 0.4  0.5 0.5 0.5 0.5"/></keyframe>
</mujoco>
"""


def test_ball_joint_angles_are_mujocos_zyx_euler_angles_and_rates_its_angular_velocity():
    """``ball_quaternion`` is MuJoCo's intrinsic z-y'-x'' Euler angles (``mju_euler2Quat``), ``ball_angles`` its
    inverse (the rotation at ``y = ±π/2``), ``ball_rate_map`` the body angular velocity of the angles' rates
    (``Rᵀ Ṙ``, by central differences)."""
    rng = np.random.default_rng(4)

    def rotation(quaternion):
        R = np.zeros(9)
        mujoco.mju_quat2Mat(R, quaternion)
        return R.reshape(3, 3)

    for _ in range(20):
        angles = rng.uniform([-np.pi, -np.pi / 2, -np.pi], [np.pi, np.pi / 2, np.pi])
        expected = np.zeros(4)
        mujoco.mju_euler2Quat(expected, angles, "zyx")
        np.testing.assert_allclose(ball_quaternion(angles), expected, atol=1e-15)
        np.testing.assert_allclose(ball_angles(ball_quaternion(angles)), angles, atol=1e-12)
        np.testing.assert_allclose(ball_angles(-3.0 * expected), angles, atol=1e-12)  # any scale and sign
        rates, h = rng.standard_normal(3), 1e-6
        R = rotation(expected)
        dR = (rotation(ball_quaternion(angles + h * rates)) - rotation(ball_quaternion(angles - h * rates))) / (2 * h)
        W = R.T @ dR
        np.testing.assert_allclose(ball_rate_map(angles) @ rates, [W[2, 1], W[0, 2], W[1, 0]], atol=1e-8)
    for pitch in (np.pi / 2, -np.pi / 2):  # z and x turn about one axis: any split of their sum is the rotation
        q = ball_quaternion([0.4, pitch, -0.3])
        np.testing.assert_allclose(rotation(ball_quaternion(ball_angles(q))), rotation(q), atol=1e-12)
        assert ball_angles(q)[0] == 0 and abs(np.linalg.det(ball_rate_map(ball_angles(q)))) < 1e-12


def test_ball_joints_are_three_hinges_with_mujocos_dynamics():
    """dm_control's model with two ball joints: each ball three hinges about z, y and x at its anchor (two massless
    bodies, then the body), with MuJoCo's mass matrix, inverse dynamics and placements in those coordinates."""
    mj = mujoco.MjModel.from_xml_path(str(BALL_JOINTS))
    robot = load_mjcf(BALL_JOINTS)
    assert robot.actuated_joint_names == ("joint_1/z", "joint_1/y", "joint_1/x", "joint_2/z", "joint_2/y", "joint_2/x")
    assert robot.body_names[:3] == ("body2/joint_1/z", "body2/joint_1/y", "body2")
    assert robot.mass[0] == robot.mass[1] == 0 and robot.mass[2] == pytest.approx(mj.body_mass[2], rel=1e-14)
    assert robot.nv == mj.nv and robot.continuous.all()
    with pytest.raises(KeyError, match="no joint 'joint_1'; did you mean 'joint_1/z', 'joint_1/y', 'joint_1/x'"):
        robot.joint_index("joint_1")
    check_against_mujoco(robot, mj, seed=2, states=3)


def test_a_ball_beside_hinges_with_a_range_a_motor_and_a_keyframe():
    """A hinge followed by a ball joint with an anchor in the same body, and a second ball below: MuJoCo's dynamics
    and placements; the keyframe's quaternions as angles; the ball's range (a cone) left out with a warning, its
    motor giving no effort limit on the angles."""
    mj = mujoco.MjModel.from_xml_string(BALLS)
    with pytest.warns(UserWarning, match="ball joint 'shoulder': its range .* is not represented"):
        robot = load_mjcf(mj)
    assert robot.actuated_joint_names[:2] == ("twist", "shoulder/z")
    assert robot.body_names[:4] == ("upper/twist", "upper/shoulder/z", "upper/shoulder/y", "upper")
    np.testing.assert_array_equal(robot.lower_limit, np.full(7, -np.inf))
    np.testing.assert_array_equal(robot.effort_limit, [2, np.inf, np.inf, np.inf, np.inf, np.inf, np.inf])
    s = robot.reference_state("reach").s
    np.testing.assert_allclose(s[0], 0.3)
    np.testing.assert_allclose(ball_quaternion(s[1:4]), mj.key_qpos[0, 1:5] / np.linalg.norm(mj.key_qpos[0, 1:5]))
    np.testing.assert_allclose(ball_quaternion(s[4:]), [0.5, 0.5, 0.5, 0.5])
    check_against_mujoco(robot, mj, seed=5, states=3)


def test_mjcf_maps_convert_states_both_ways_with_a_floating_base_and_balls():
    """A free base with a ball joint below it: states round trip (``to_mujoco(from_mujoco(qpos, qvel))`` is MuJoCo's
    state, the quaternion up to its sign), accelerations too, each lietraj body on its MuJoCo body; a ball at the
    angles' singularity and a robot with mimic joints (without its expanded model) are clear errors. (The dynamics
    these maps give are checked in the tests above.)"""
    mj = mujoco.MjModel.from_xml_string("""
    <mujoco><worldbody><body name="torso" pos="0 0 1"><freejoint name="root"/><geom type="box" size="0.2 0.1 0.1"/>
      <body name="arm" pos="0.2 0 0"><joint name="shoulder" type="ball" pos="0.01 0 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <body name="hand" pos="0.3 0 0"><joint name="wrist" axis="0 1 0"/><geom type="sphere" size="0.04"/></body>
      </body></body></worldbody></mujoco>""")
    robot = load_mjcf(mj)
    maps, rng = mjcf_maps(robot, mj), np.random.default_rng(9)
    assert maps.ball_joints == ((0, 7, 6),)
    np.testing.assert_array_equal(maps.body_ids, [1, 2, 2, 2, 3])
    for _ in range(3):
        x = random_state(robot, rng)
        qpos, qvel = maps.to_mujoco(x)
        y = maps.from_mujoco(qpos, qvel)
        # the angles come back in ball_angles' range (another triple of the same rotation when |y| > π/2 was drawn)
        np.testing.assert_allclose(y.H, x.H, atol=1e-14)
        np.testing.assert_allclose(y.s[3], x.s[3], atol=1e-15)
        back = maps.to_mujoco(y)
        np.testing.assert_allclose(back[0][:7], qpos[:7], atol=1e-14)
        np.testing.assert_allclose(back[0][7:] * np.sign(back[0][7:11] @ qpos[7:11]), qpos[7:], atol=1e-12)
        np.testing.assert_allclose(back[1], qvel, atol=1e-12)
        a = rng.standard_normal(robot.nv)
        np.testing.assert_allclose(maps.acceleration_from_mujoco(x, maps.acceleration_to_mujoco(x, a)), a, atol=1e-10)
    qpos[7:11] = ball_quaternion([0.3, np.pi / 2, 0.2])  # the angles' singularity: no rates for MuJoCo's ω
    with pytest.raises(ValueError, match="ball joint 'shoulder' is at y = \\+90 degrees"):
        maps.from_mujoco(qpos, qvel)
    coupled = mujoco.MjModel.from_xml_string(COUPLED)
    with pytest.raises(ValueError, match="pass robot.expanded"):
        mjcf_maps(load_mjcf(coupled), coupled)
    assert mjcf_maps(load_mjcf(coupled).expanded, coupled).robot.nv == coupled.nv


def test_ball_joints_are_pinocchios_spherical_zyx_joints():
    """A ball's three hinges are Pinocchio's ``JointModelSphericalZYX`` (configuration ``(z, y, x)``, velocity their
    rates): RNEA, CRBA and ABA of the lietraj model equal Pinocchio's on the model with one such joint per ball."""
    import pinocchio as pin
    with pytest.warns(UserWarning):
        robot = load_mjcf(mujoco.MjModel.from_xml_string(BALLS))
    pm, ids, i = pin.Model(), [], 0
    pm.gravity = pin.Motion(np.concatenate([robot.gravity, np.zeros(3)]))
    while i < robot.nb:
        ball = robot.joint_names[i].endswith("/z")
        last = i + 2 if ball else i  # the body with the inertia
        assert not ball or robot.mass[i] == robot.mass[i + 1] == 0
        joint = pin.JointModelSphericalZYX() if ball else pin.JointModelRevoluteUnaligned(robot.axis[i].copy())
        T = robot.joint_placement[i]
        parent = 0 if robot.parent[i] < 0 else ids[robot.parent[i]]
        jid = pm.addJoint(parent, joint, pin.SE3(T[:3, :3].copy(), T[:3, 3].copy()), robot.joint_names[i])
        pm.appendBodyToJoint(jid, pin.Inertia(robot.mass[last], robot.com[last].copy(), robot.inertia[last].copy()),
                             pin.SE3.Identity())
        ids += [jid] * (last - i + 1)
        i = last + 1
    pd, rng = pm.createData(), np.random.default_rng(8)
    for _ in range(3):
        x, a, tau = random_state(robot, rng), rng.standard_normal(robot.nv), rng.standard_normal(robot.nv)
        np.testing.assert_allclose(rnea(robot, x, a), pin.rnea(pm, pd, x.s, x.v, a), rtol=0, atol=1e-12)
        np.testing.assert_allclose(mass_matrix(robot, x), pin.crba(pm, pd, x.s), rtol=0, atol=1e-12)
        np.testing.assert_allclose(aba(robot, x, tau), pin.aba(pm, pd, x.s, x.v, tau), rtol=1e-10, atol=1e-10)


def test_a_ball_joint_model_has_exact_derivatives_and_solves_with_ddp():
    """The massless bodies of the balls' hinges change nothing for the derivatives (finite differences of the
    discrete dynamics at a random state, the gimbal far) and DDP, with its second-order term, turns the two balls
    and the hinge towards a goal posture from the torques that hold the first one, to FDDP's optimum."""
    from lietraj.dynamics import generalized_gravity
    from lietraj.optimal_control import (
        ActionModel,
        CostSum,
        Problem,
        RobotDynamics,
        check_derivatives,
        control_regularization,
        solve_ddp,
        solve_fddp,
        state_regularization,
    )

    with pytest.warns(UserWarning):
        robot = load_mjcf(mujoco.MjModel.from_xml_string(BALLS))
    dynamics, rng = RobotDynamics(robot, 0.01), np.random.default_rng(6)
    x = State(None, rng.uniform(-1.0, 1.0, robot.n), rng.standard_normal(robot.nv))
    report = check_derivatives(dynamics, x, rng.standard_normal(robot.n))
    assert report.ok, report
    start = robot.state_space.neutral()
    goal = State(None, np.array([0.3, 0.4, -0.3, 0.2, -0.3, 0.2, 0.4]), np.zeros(robot.nv))

    def costs(nu: int) -> CostSum:
        c = CostSum(robot.state_space, nu)
        c.add("x", state_regularization(robot.state_space, goal, 1e-1 if nu else 1e2, nu))
        if nu:
            c.add("u", control_regularization(nu, 1e-4, state_space=robot.state_space))
        return c

    problem = Problem(start, ActionModel(dynamics, costs(robot.n)), costs(0), horizon=40)
    hold = np.tile(generalized_gravity(robot, start), (40, 1))
    result, gauss_newton = solve_ddp(problem, us0=hold), solve_fddp(problem, us0=hold)
    assert result.converged and gauss_newton.converged, (result, gauss_newton)
    assert result.cost == pytest.approx(gauss_newton.cost, rel=1e-8)  # the same optimum
    assert np.linalg.norm(result.xs.s[-1] - goal.s) < 0.25 * np.linalg.norm(start.s - goal.s)


def _two_hinges(equality: str) -> str:
    return ("<mujoco><worldbody>" + _body("a", '<joint name="ha"/>') + _body("b", '<joint name="hb"/>') +
            "</worldbody><equality>" + equality + "</equality></mujoco>")


@pytest.mark.parametrize("equality, message", [
    ('<connect name="loop" body1="a" body2="b" anchor="0 0 0"/>', "equality constraint 'loop' \\(connect\\)"),
    ('<weld name="glue" body1="a" body2="b"/>', "equality constraint 'glue' \\(weld\\)"),
    ('<joint name="lock" joint1="ha"/>', "'lock' \\(joint\\): it holds joint 'ha' at a position"),
    ('<joint name="cam" joint1="hb" joint2="ha" polycoef="0 1 0.5 0 0"/>', "'cam' .*polynomial of degree > 1"),
    ('<joint name="later" joint1="hb" joint2="ha" active="false"/>', "'later' .*inactive"),
    ('<joint name="ab" joint1="hb" joint2="ha"/><joint name="ba" joint1="ha" joint2="hb"/>', "loop"),
])
def test_equality_constraints_other_than_linear_joint_couplings_are_refused_by_name(equality, message):
    with pytest.raises(MJCFError, match=message):
        load_mjcf(mujoco.MjModel.from_xml_string(_two_hinges(equality)))


COUPLED = """
<mujoco model="coupled">
  <compiler angle="radian"/>
  <worldbody>
    <body name="root" pos="0 0 1"><freejoint name="root"/><geom type="box" size="0.2 0.1 0.05"/>
      <body name="proximal" pos="0.2 0 0">
        <joint name="drive" axis="0 1 0" ref="0.2" range="-1 2" armature="0.1"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.03"/>
        <body name="distal" pos="0.2 0 0">
          <joint name="follow" axis="0 1 0" ref="-0.1" range="-0.5 0.5" armature="0.02"/>
          <geom type="capsule" fromto="0 0 0 0.15 0 0" size="0.025"/>
          <body name="tip" pos="0.15 0 0">
            <joint name="extend" type="slide" axis="1 0 0" armature="0.03"/>
            <geom type="sphere" size="0.03"/><site name="fingertip"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <equality>
    <joint joint1="follow" joint2="drive" polycoef="0.05 -0.5 0 0 0"/>
    <joint joint1="extend" joint2="follow" polycoef="0.01 0.2 0 0 0"/>
  </equality>
</mujoco>
"""


def test_linear_joint_equalities_are_mimic_joints_with_mujocos_dynamics():
    """MuJoCo's joint equality ``y - y0 = a0 + a1 (x - x0)`` is a mimic joint (composed down a chain of them):
    lietraj's reduced dynamics equal MuJoCo's full ones contracted by the coupling, the followers' armature and
    ranges carried to their primary."""
    mj = mujoco.MjModel.from_xml_string(COUPLED)
    robot = load_mjcf(mj)
    assert robot.actuated_joint_names == ("drive",) and robot.nv == 7
    (follow, follow_offset), (extend, extend_offset) = [(m, m.offset) for m in robot.mimic]
    assert (follow.joint, follow.primary, follow.multiplier) == ("follow", "drive", -0.5)
    assert follow_offset == pytest.approx(-0.1 + 0.05 + 0.5 * 0.2)
    assert (extend.joint, extend.primary, extend.multiplier) == ("extend", "drive", pytest.approx(-0.1))
    assert extend_offset == pytest.approx(0.2 * follow_offset + 0.01 - 0.2 * -0.1)
    assert robot.armature[6] == pytest.approx(0.1 + 0.25 * 0.02 + 0.01 * 0.03)
    # follow = -0.5 drive + o in [-0.5, 0.5] bounds drive to [2 (o - 0.5), 2 (o + 0.5)] within its own [-1, 2].
    np.testing.assert_allclose([robot.lower_limit[0], robot.upper_limit[0]],
                               [max(-1, 2 * (follow_offset - 0.5)), min(2, 2 * (follow_offset + 0.5))])
    check_against_mujoco(robot, mj, seed=7, states=3)


def test_files_mujoco_cannot_compile_or_find_are_reported(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<mujoco><worldbody><body><joint type='hinge' axis='0 0 0'/></body></worldbody></mujoco>")
    with pytest.raises(MJCFError, match="bad.xml: MuJoCo cannot compile it"):
        load_mjcf(bad)
    nested = tmp_path / "nested.xml"
    nested.write_text('<mujoco><worldbody><body name="a"><joint/><geom size="0.1"/>' + _body("b", "<freejoint/>")
                      + "</body></worldbody></mujoco>")
    with pytest.raises(MJCFError, match="free joint can only be used on top level"):
        load_mjcf(nested)
    with pytest.raises(FileNotFoundError, match="missing.xml"):
        load_mjcf(tmp_path / "missing.xml")


def joint_permutation(reference, other) -> np.ndarray:
    """Index in ``other``'s generalized velocity of each of ``reference``'s (joints matched by name)."""
    base = reference.nv - reference.n
    return np.concatenate([np.arange(base), base + np.array([other.joint_index(j)
                                                             for j in reference.actuated_joint_names], dtype=int)])


def check_same_robot(reference, other, tol: float, seed: int = 0) -> None:
    """RNEA, CRBA, ABA and the placements of every body frame the two share agree at a random state."""
    rng = np.random.default_rng(seed)
    perm = joint_permutation(reference, other)
    base = reference.nv - reference.n
    x = random_state(reference, rng)
    y = State(x.H, np.empty(other.n), np.empty(other.nv))
    y.s[perm[base:] - base], y.v[perm] = x.s, x.v
    a, tau = rng.standard_normal(reference.nv), rng.standard_normal(reference.nv)
    assert relative_error(rnea(other, y, a[np.argsort(perm)]), rnea(reference, x, a)[np.argsort(perm)]) < tol
    assert relative_error(mass_matrix(other, y)[np.ix_(perm, perm)], mass_matrix(reference, x)) < tol
    assert relative_error(aba(other, y, tau[np.argsort(perm)])[perm], aba(reference, x, tau)) < tol
    shared = [f.name for f in other.frames if f.kind == "body" and f.body >= 0]
    F, G = frame_placements(reference, x), frame_placements(other, y)
    assert len(shared) == reference.nb
    for name in shared:
        np.testing.assert_allclose(G[other.frame_index(name)], F[reference.frame_index(name)], atol=tol, err_msg=name)


@pytest.mark.parametrize("name", ["solo12", "ur5", "talos_legs", "anymal", "panda"])
def test_urdf_robots_converted_by_mujoco_have_the_urdf_dynamics(name, tmp_path):
    """example-robot-data's URDF compiled by MuJoCo (``build_mujoco_model``), read back by load_mjcf: the MjModel
    gives load_robot's dynamics to 1e-10 (the ANYmal's base with the isotropic 3e-6 kg m² build_mujoco_model adds so
    that MuJoCo accepts its inertia: ``equivalent_robot``; the panda's mimic finger, a joint equality in MuJoCo, as
    ``load_robot(name, mimic=True)``); its MJCF file, which MuJoCo writes with six significant digits, gives MuJoCo's
    dynamics of that file to 1e-8 and the URDF's to the file's precision."""
    plant = build_mujoco_model(lietraj.load_robot(name))
    robot = lietraj.load_robot(name, mimic=bool(plant.model.neq))
    reference = robot.replace(inertia=plant.equivalent_robot().inertia)
    converted = load_mjcf(plant.model)
    check_same_robot(reference, converted, 1e-10)
    perm = joint_permutation(reference, converted)[reference.nv - reference.n:] - (reference.nv - reference.n)
    np.testing.assert_array_equal(converted.armature[reference.nv - reference.n:][perm], robot.armature[robot.nv - robot.n:])
    efforts = np.where((robot.effort_limit > 0) & np.isfinite(robot.effort_limit), robot.effort_limit, np.inf)
    np.testing.assert_array_equal(converted.effort_limit[perm], efforts)

    path = tmp_path / f"{name}.xml"
    path.write_text(plant.spec.to_xml())
    from_file = load_mjcf(path)
    check_against_mujoco(from_file, mujoco.MjModel.from_xml_path(str(path)), states=1)
    check_same_robot(reference, from_file, 1e-5)


URDF = """<robot name="two_links">
  <link name="base"><inertial><mass value="2"/><inertia ixx="0.1" iyy="0.2" izz="0.15" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="upper"><inertial><origin xyz="0.1 0.02 0.3" rpy="0.1 0.2 0.3"/><mass value="1.5"/>
    <inertia ixx="0.03" iyy="0.04" izz="0.02" ixy="0.001" ixz="0.002" iyz="0.003"/></inertial></link>
  <link name="lower"><inertial><origin xyz="0 0 0.2"/><mass value="0.8"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.005" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="tool"><inertial><origin xyz="0.05 0 0"/><mass value="0.3"/>
    <inertia ixx="0.001" iyy="0.002" izz="0.002" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/>
    <origin xyz="0 0 0.5" rpy="0.3 0 0.1"/><axis xyz="0 1 0"/><limit lower="-1" upper="1.5" effort="30" velocity="2"/></joint>
  <joint name="elbow" type="continuous"><parent link="upper"/><child link="lower"/>
    <origin xyz="0.02 0 0.6"/><axis xyz="1 0 1"/></joint>
  <joint name="flange" type="fixed"><parent link="lower"/><child link="tool"/><origin xyz="0 0.1 0.4" rpy="0 1 0"/></joint>
</robot>
"""


def test_a_urdf_compiled_by_mujoco_is_the_urdf_robot(tmp_path):
    """MuJoCo compiles URDF too: read through it, a URDF whose links all have inertias (MuJoCo's compiler changes
    none of them) is load_urdf's robot, the fixed link merged into its parent as load_urdf merges it."""
    path = tmp_path / "two_links.urdf"
    path.write_text(URDF)
    robot = lietraj.load_urdf(path)
    through_mujoco = load_mjcf(path)
    assert through_mujoco.actuated_joint_names == robot.actuated_joint_names
    np.testing.assert_allclose(through_mujoco.upper_limit, [1.5, np.inf])
    np.testing.assert_allclose(through_mujoco.effort_limit, [30, np.inf])  # MuJoCo's actuatorfrcrange of <limit effort>
    check_same_robot(robot, through_mujoco, 1e-10)


def test_inertias_are_the_ones_mujocos_compiler_leaves_and_disabled_gravity_is_zero():
    """``boundmass`` and ``boundinertia`` raise a body's mass and moments: lietraj has MuJoCo's compiled values, not
    the file's, so that its dynamics stay MuJoCo's (here without gravity, which the model disables)."""
    mj = mujoco.MjModel.from_xml_string("""
    <mujoco><compiler boundmass="0.5" boundinertia="0.01"/><option><flag gravity="disable"/></option>
    <worldbody><body name="bob" pos="0 0 1">
      <joint name="swing" axis="0 1 0" pos="0 0 0.3"/><inertial pos="0 0 -0.2" mass="0.001" diaginertia="1e-8 1e-8 1e-8"/>
    </body></worldbody></mujoco>""")
    robot = load_mjcf(mj)
    assert robot.mass[0] == 0.5 and not robot.gravity.any()
    np.testing.assert_allclose(robot.inertia[0], 0.01 * np.eye(3))
    check_against_mujoco(robot, mj)


def test_the_exported_page_draws_every_visual_with_its_mesh(tmp_path):
    """The viewer takes the visuals of an MJCF model as it takes a URDF's: one object per visual, the STL files (the
    compiled mesh, the ellipsoid's sphere) carried in the page."""
    from html_pages import read_page

    from lietraj.viz import export_html

    robot = load_mjcf(mujoco.MjModel.from_xml_string(SYNTHETIC))
    xs = robot.state_space.random_trajectory(3, np.random.default_rng(1))
    commands, meshes = read_page(export_html(robot, xs, 0.1, tmp_path / "synthetic.html"))
    drawn = [c for c in commands if c["type"] == "set_object" and "/robot/" in c["path"]]
    assert len(drawn) == len(robot.visuals)
    assert sorted(meshes.values()) == sorted(Path(v.filename).read_bytes() for v in robot.visuals if v.shape == "mesh")
