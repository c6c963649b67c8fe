"""The MuJoCo plant: MuJoCo's model of the same URDF as a second dynamics oracle (mass matrix, bias forces, inverse
and forward dynamics, a rollout), the state conversion, pushes, torque limits and the divergence check."""

from functools import lru_cache

import mujoco
import numpy as np
import pytest

from conftest import relative_error
from lietraj.dynamics import aba, body_placements, center_of_mass, center_of_mass_velocity, mass_matrix, nonlinear_effects, rnea
from lietraj.dynamics.model.robots import load_robot
from lietraj.optimal_control import RobotDynamics
from lietraj.sim import MujocoPlant, SimulationDiverged, build_mujoco_model

# Arms (UR5, Panda; Kinova with continuous joints; Z1), quadrupeds (Solo12 with STL feet, A1/Go1 with spheres,
# ANYmal/Go1/HyQ with repaired base inertias, HyQ with its COLLADA meshes dropped), Bolt (massless feet with an
# inertia), humanoids (Talos, its 13-body legs, iCub with point-mass links; no floor: no readable collision mesh).
ORACLE_ROBOTS = ["ur5", "panda", "kinova", "z1", "solo12", "a1", "go1", "anymal", "hyq", "bolt", "talos", "talos_legs",
                 "icub"]
TOL = 1e-8


@lru_cache(maxsize=None)
def oracle(name: str):
    """MuJoCo's model of ``name`` without floor, and the lietraj model whose dynamics it has."""
    mj = build_mujoco_model(load_robot(name), floor=False)
    return mj, mj.equivalent_robot()


def mujoco_at(mj, x) -> mujoco.MjData:
    """MjData at the lietraj state ``x``, every derived quantity computed (mj_forward)."""
    d = mujoco.MjData(mj.model)
    d.qpos[:], d.qvel[:] = mj.to_mujoco(x)
    mujoco.mj_forward(mj.model, d)
    return d


def random_states(robot, seed: int, count: int = 2):
    rng = np.random.default_rng(seed)
    return [robot.state_space.random(rng) for _ in range(count)]


@pytest.mark.parametrize("name", ORACLE_ROBOTS)
def test_mass_matrix_matches_mujoco(name):
    """lietraj's CRBA equals MuJoCo's mj_fullM in lietraj's coordinates, M = Tᵀ M_mj T (armature included)."""
    mj, robot = oracle(name)
    for x in random_states(robot, 1):
        d = mujoco_at(mj, x)
        M_mj = np.zeros((mj.model.nv, mj.model.nv))
        mujoco.mj_fullM(mj.model, d, M_mj)
        T = mj.velocity_map(x)
        assert relative_error(mass_matrix(robot, x), T.T @ M_mj @ T) < TOL


@pytest.mark.parametrize("name", ORACLE_ROBOTS)
def test_bias_and_inverse_dynamics_match_mujoco_rne(name):
    """lietraj's h(x) and RNEA at a random acceleration equal MuJoCo's mj_rne converted: τ = Tᵀ (rne(qacc) +
    armature qacc) with qacc = T a + [R (ω × v_b); 0], so zero lietraj acceleration is not zero qacc."""
    mj, robot = oracle(name)
    rng = np.random.default_rng(2)
    for x in random_states(robot, 3):
        d = mujoco_at(mj, x)
        for a in (np.zeros(robot.nv), rng.standard_normal(robot.nv)):
            d.qacc[:] = mj.acceleration_to_mujoco(x, a)
            qfrc = np.zeros(mj.model.nv)
            mujoco.mj_rne(mj.model, d, 1, qfrc)
            qfrc += mj.model.dof_armature * d.qacc  # mj_rne leaves the armature to mj_inverse
            assert relative_error(rnea(robot, x, a), mj.force_from_mujoco(x, qfrc)) < TOL
        # MuJoCo's bias qfrc_bias is the force at zero qacc, not at zero lietraj acceleration.
        M_mj = np.zeros((mj.model.nv, mj.model.nv))
        mujoco.mj_fullM(mj.model, d, M_mj)
        h = d.qfrc_bias + M_mj @ mj.acceleration_to_mujoco(x, np.zeros(robot.nv))
        assert relative_error(nonlinear_effects(robot, x), mj.force_from_mujoco(x, h)) < TOL


@pytest.mark.parametrize("name", ["talos_legs", "a1", "panda", "kinova"])
def test_forward_dynamics_matches_mujoco_qacc(name):
    """MuJoCo's qacc under the motors' torques (constraints off) equals lietraj's ABA, converted."""
    mj = build_mujoco_model(load_robot(name), floor=False, torque_limits=False)
    mj.model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT  # random states break joint limits
    robot = mj.equivalent_robot()
    rng = np.random.default_rng(4)
    for x in random_states(robot, 5):
        u = 10 * rng.standard_normal(robot.n)
        d = mujoco.MjData(mj.model)
        d.qpos[:], d.qvel[:] = mj.to_mujoco(x)
        d.ctrl[:] = u
        mujoco.mj_forward(mj.model, d)
        tau = np.concatenate([np.zeros(robot.nv - robot.n), u])
        assert relative_error(mj.acceleration_from_mujoco(x, d.qacc), aba(robot, x, tau)) < TOL


@pytest.mark.parametrize("name", ["a1", "talos_legs", "ur5", "kinova"])
def test_state_conversion_round_trip(name):
    """from_mujoco(to_mujoco(x)) = x, continuous joints' angles beyond pi included."""
    mj, robot = oracle(name)
    for x in random_states(robot, 6):
        x.s *= 3.0
        y = mj.from_mujoco(*mj.to_mujoco(x))
        assert (y.H is None) == (x.H is None)
        if x.H is not None:
            assert np.allclose(y.H, x.H, atol=1e-14)
        assert np.allclose(y.s, x.s, atol=1e-14) and np.allclose(y.v, x.v, atol=1e-14)


@pytest.mark.parametrize("name", ["a1", "talos_legs", "panda"])
def test_body_placements_match_mujoco(name):
    """MuJoCo's body poses (xpos, xmat) at the converted state are lietraj's: the quaternion is (w, x, y, z), the
    joints are mapped by name, their axes and zero positions agree."""
    mj, robot = oracle(name)
    for x in random_states(robot, 7):
        d = mujoco_at(mj, x)
        poses = body_placements(robot, x)
        assert np.allclose(d.xpos[mj.body_ids], poses[:, :3, 3], atol=1e-12)
        assert np.allclose(d.xmat[mj.body_ids].reshape(-1, 3, 3), poses[:, :3, :3], atol=1e-12)


def test_free_joint_velocity_is_world_linear_body_angular():
    """Verified through MuJoCo's own integrator: differentiating qpos along lietraj's x exp(h ν) gives qvel =
    [R v_b; ω] (mj_differentiatePos, central differences)."""
    mj, robot = oracle("a1")
    (x,) = random_states(robot, 8, 1)
    h = 1e-6
    ss = robot.state_space

    def qpos_at(t):
        return mj.to_mujoco(ss.integrate(x, np.concatenate([t * x.v, np.zeros(robot.nv)])))[0]

    qvel = np.zeros(mj.model.nv)
    mujoco.mj_differentiatePos(mj.model, qvel, 2 * h, qpos_at(-h), qpos_at(h))
    assert np.allclose(qvel, mj.to_mujoco(x)[1], rtol=0, atol=1e-8)
    assert np.allclose(qvel[:3], x.H[:3, :3] @ x.nu[:3], atol=1e-8)  # the world-frame linear velocity


def test_quaternion_is_scalar_first():
    mj, robot = oracle("solo12")
    x = robot.reference_state()
    theta = 0.7
    x.H[:3, :3] = [[np.cos(theta), -np.sin(theta), 0], [np.sin(theta), np.cos(theta), 0], [0, 0, 1]]
    qpos, _ = mj.to_mujoco(x)
    assert np.allclose(qpos[3:7], [np.cos(theta / 2), 0, 0, np.sin(theta / 2)], atol=1e-15)


@pytest.mark.parametrize("name", ["solo12", "talos_legs"])
def test_free_fall_rollout_matches_lietraj_rk4(name):
    """0.1 s of free fall (no floor, zero torque, random velocities) by MuJoCo's RK4 and lietraj's Lie-group RK4 at
    the same 1 ms step end at the same state (both fourth order: they agree to about 1e-14)."""
    robot = load_robot(name)
    plant = MujocoPlant(robot, floor=False, integrator="rk4")
    x0 = robot.reference_state()
    x0.v[:] = 0.5 * np.random.default_rng(9).standard_normal(robot.nv)
    plant.reset(x0)
    x = plant.step(np.zeros(robot.n), duration=0.1)
    assert plant.time == pytest.approx(0.1)
    X = RobotDynamics(plant.mujoco.equivalent_robot(), 1e-3, "rk4").rollout(x0, np.zeros((100, robot.n)))
    assert np.abs(robot.state_space.difference(X[100], x)).max() < 1e-9
    assert np.abs(x.v - x0.v).max() > 0.1  # it moved: gravity and the joints' coupling


def test_push_changes_momentum_by_its_impulse():
    """A push of F for T = 50 ms on a falling Solo12 (pushed at a foot, fused into its lower leg) changes the velocity
    of the centre of mass by F T/m besides gravity's, and moves it by F/m (T²/2 + T (0.1 s - T)) horizontally."""
    robot = load_robot("solo12")
    plant = MujocoPlant(robot, floor=False, integrator="rk4")
    x0 = plant.state()
    force = np.array([3.0, -1.0, 0.5])
    plant.push("FL_FOOT", force, duration=0.05)
    x = plant.step(np.zeros(robot.n), duration=0.1)
    expected = force * 0.05 / robot.total_mass + 0.1 * robot.gravity
    assert relative_error(center_of_mass_velocity(robot, x) - center_of_mass_velocity(robot, x0), expected) < 1e-8
    moved = center_of_mass(robot, x) - center_of_mass(robot, x0)
    assert relative_error(moved[:2], force[:2] / robot.total_mass * (0.05**2 / 2 + 0.05 * 0.05)) < 1e-8


def test_push_moves_a_standing_robot_sideways():
    """An A1 standing under gravity compensation and joint PD, pushed sideways at its trunk, moves sideways and
    keeps its four feet on the floor, the normal forces adding up to about its weight."""
    robot = load_robot("a1")
    plant = MujocoPlant(robot)
    x_ref = plant.state()

    def hold(x):
        return nonlinear_effects(robot, x)[6:] + 40.0 * (x_ref.s - x.s) - 1.0 * x.sdot

    for _ in range(200):
        plant.step(hold(plant.state()))
    before = plant.state().H[:3, 3]
    forces = plant.contact_forces()
    assert set(forces) == {"FR_foot", "FL_foot", "RR_foot", "RL_foot"}
    assert sum(forces.values()) == pytest.approx(robot.total_mass * 9.81, rel=0.2)
    plant.push("trunk", [0.0, 40.0, 0.0], duration=0.1)
    for _ in range(200):
        plant.step(hold(plant.state()))
    assert plant.state().H[1, 3] - before[1] > 0.01


def test_step_durations_are_whole_steps():
    plant = MujocoPlant(load_robot("ur5"))
    plant.step(np.zeros(6), duration=0.0104)
    assert plant.time == pytest.approx(0.010)
    plant.step(np.zeros(6), duration=0.0004)  # at least one step
    assert plant.time == pytest.approx(0.011)
    plant.step(np.zeros(6))
    assert plant.time == pytest.approx(0.012)


def test_torques_are_clipped_to_effort_limits():
    robot = load_robot("a1")
    plant = MujocoPlant(robot)
    u = 3.0 * robot.effort_limit * np.where(np.arange(robot.n) % 2, 1.0, -1.0)
    u[0] = 0.5 * robot.effort_limit[0]
    plant.step(u)
    clipped = np.clip(u, -robot.effort_limit, robot.effort_limit)
    assert np.array_equal(plant.torque_upper, robot.effort_limit)
    assert np.array_equal(plant.data.actuator_force, clipped)
    assert np.allclose(plant.data.qfrc_actuator[plant.mujoco.dof_index], clipped, rtol=0, atol=1e-12)


def test_diverging_simulation_raises(tmp_path, monkeypatch):
    """A huge torque on unlimited motors, or a NaN written into MuJoCo's state, raises SimulationDiverged naming
    the time and the joint, never a NaN state."""
    monkeypatch.chdir(tmp_path)  # MuJoCo's warning handler appends to ./MUJOCO_LOG.TXT
    robot = load_robot("a1")
    plant = MujocoPlant(robot, torque_limits=False)
    with pytest.raises(SimulationDiverged, match=r"diverged in the step from t = 0 s: bad acceleration .* at dof \d+"):
        plant.step(np.full(robot.n, 1e9))
    plant.reset()
    plant.data.qvel[8] = np.nan
    with pytest.raises(SimulationDiverged, match=r"bad velocity .* at dof 8 \(joint 'FR_calf_joint'\)"):
        plant.step(np.zeros(robot.n))


def test_wrong_inputs_raise_value_error_naming_them():
    robot = load_robot("a1")
    plant = MujocoPlant(robot)
    with pytest.raises(ValueError, match=r"u must have shape \(12,\)"):
        plant.step(np.zeros(13))
    with pytest.raises(ValueError, match="u contains NaN"):
        plant.step(np.full(12, np.nan))
    with pytest.raises(ValueError, match="u has torques beyond MuJoCo's largest value"):
        MujocoPlant(robot, torque_limits=False).step(np.full(12, 1e11))
    with pytest.raises(ValueError, match="duration must be a positive number of seconds"):
        plant.step(np.zeros(12), duration=-1e-3)
    x = plant.state()
    x.v[3] = np.nan
    with pytest.raises(ValueError, match="State.v"):
        plant.set_state(x)
    with pytest.raises(ValueError, match="State.s"):
        plant.reset(type(x)(x.H, np.zeros(11), np.zeros(18)))
    with pytest.raises(ValueError, match="force"):
        plant.push("trunk", [1.0, 2.0])
    with pytest.raises(ValueError, match="duration"):
        plant.push("trunk", [1.0, 2.0, 3.0], duration=0.0)
    with pytest.raises(KeyError, match="no frame"):
        plant.push("no_such_link", [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="qpos must have shape"):
        plant.mujoco.from_mujoco(np.zeros(18), np.zeros(18))


def test_unreadable_collision_meshes_are_dropped_or_refused():
    """HyQ's COLLADA meshes are dropped and listed, its sphere feet kept; iCub has nothing MuJoCo can read left, so
    a plant on a floor is refused (without a floor its model builds: the oracle tests use it)."""
    hyq = MujocoPlant(load_robot("hyq"))
    assert len(hyq.mujoco.edits.dropped_geoms) == 9
    assert all(g.endswith(".dae") for g in hyq.mujoco.edits.dropped_geoms)
    feet = {mujoco.mj_id2name(hyq.model, mujoco.mjtObj.mjOBJ_GEOM, g) for g in range(hyq.model.ngeom)}
    assert {"lf_foot", "rf_foot", "lh_foot", "rh_foot"} <= feet
    with pytest.raises(ValueError, match="'icub' has no collision geometry MuJoCo can read"):
        MujocoPlant(load_robot("icub"))


def test_repaired_inertias_are_recorded_and_carried_over():
    """ANYmal's rank-one base inertia gets the smallest isotropic addition MuJoCo accepts (3e-6 kg m², recorded),
    which equivalent_robot adds to body 0; Bolt's massless feet get 2e-15 kg so that MuJoCo keeps their inertia."""
    anymal, robot = oracle("anymal")
    delta = anymal.edits.added_inertia["base"]
    assert dict(anymal.edits.added_inertia) == {"base": delta} and delta == pytest.approx(3e-6, rel=1e-6)
    assert np.allclose(robot.inertia[0] - anymal.robot.inertia[0], delta * np.eye(3), rtol=0, atol=1e-15)
    assert np.array_equal(robot.inertia[1:], anymal.robot.inertia[1:]) and robot.total_mass == anymal.robot.total_mass
    bolt, _ = oracle("bolt")
    assert dict(bolt.edits.added_mass) == {"FL_FOOT": 2e-15, "FR_FOOT": 2e-15} and not bolt.edits.added_inertia


def test_reduced_model_keeps_only_its_bodies():
    """talos_legs: MuJoCo's model holds the base and the twelve leg bodies (world included, 14) and their mass."""
    mj, robot = oracle("talos_legs")
    assert mj.model.nbody == 14 and mj.model.nu == 12
    assert mj.model.body_subtreemass[0] == pytest.approx(robot.total_mass, rel=1e-12)
