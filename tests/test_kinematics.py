"""Forward kinematics, frame twists and accelerations, frame Jacobians: Pinocchio agreement and identities.

Every lietraj frame is compared with the Pinocchio frame of the same name, in all three references, on an
arm, an arm with prismatic fingers (panda), quadrupeds and humanoids, at several random states.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
import zlib
from functools import lru_cache

import numpy as np
import pinocchio as pin
import pytest

from lietraj.dynamics.kinematics.kinematics import (
    body_placements,
    frame_acceleration,
    frame_jacobian,
    frame_placement,
    frame_placements,
    frame_velocity,
)
from lietraj.dynamics.model.model import JOINT_FREE
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.model.robots import load_robot
from lietraj.dynamics.lie.state import State, Trajectory
from pin_oracle import pin_model

ALL_ROBOTS = ["ur5", "panda", "solo12", "talos", "talos_legs", "hyq", "anymal", "go1", "a1", "icub", "romeo"]
ROBOTS = ["ur5", "panda", "solo12", "anymal", "talos", "icub"]
REFERENCES = {"local": pin.LOCAL, "local_world_aligned": pin.LOCAL_WORLD_ALIGNED, "world": pin.WORLD}
RTOL = 1e-10


@lru_cache(maxsize=None)
def robot(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # romeo's massless finger joints
        return load_robot(name)


def samples(name: str, count: int = 3):
    """(model, pin model, pin data, x, a, q, v) at `count` random states, Pinocchio's kinematics run with a."""
    model, pm = robot(name), pin_model(name)
    pd = pm.createData()
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    for _ in range(count):
        x = model.state_space.random(rng)
        a = rng.standard_normal(model.nv)
        q, v = to_pinocchio(model, x)
        pin.forwardKinematics(pm, pd, q, v, a)
        pin.updateFramePlacements(pm, pd)
        yield model, pm, pd, x, a, q, v


def assert_close(actual, expected, rtol=RTOL):
    """Max-norm error at most rtol relative to the expected value's size (absolute below 1)."""
    expected = np.asarray(expected)
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(actual, expected, rtol=0.0, atol=rtol * scale)


def pin_frame(model, pm, k: int) -> int:
    return pm.getFrameId(model.frames[k].name)


# ---------------------------------------------------------------- placements


@pytest.mark.parametrize("name", ALL_ROBOTS)
def test_frame_names_match_pinocchio(name):
    """Every URDF link is a 'body' frame and every joint a 'joint'/'fixed_joint' frame, as in Pinocchio."""
    ours = [f.name for f in robot(name).frames]
    theirs = [f.name for f in pin_model(name).frames if f.name != "universe"]
    assert len(ours) == len(set(ours))
    assert sorted(set(theirs) - set(ours)) == [], "frames lietraj lacks"
    assert sorted(set(ours) - set(theirs)) == [], "frames lietraj has in excess"


@pytest.mark.parametrize("name", ROBOTS)
def test_frame_placements_match_pinocchio(name):
    for model, pm, pd, x, *_ in samples(name):
        P = frame_placements(model, x)
        assert P.shape == (len(model.frames), 4, 4)
        for k in range(len(model.frames)):
            assert_close(P[k], pd.oMf[pin_frame(model, pm, k)].homogeneous)


@pytest.mark.parametrize("name", ROBOTS)
def test_body_placements_match_pinocchio_joint_placements(name):
    for model, pm, pd, x, *_ in samples(name):
        B = body_placements(model, x)
        assert B.shape == (model.nb, 4, 4)
        for i in range(model.nb):
            assert_close(B[i], pd.oMi[i + 1].homogeneous)


def test_frame_placement_by_name_or_index_is_a_row_of_all_placements():
    model = robot("talos")
    x = model.state_space.random(3)
    P = frame_placements(model, x)
    for name in ("left_sole_link", "arm_right_7_joint", "torso_2_link"):
        k = model.frame_index(name)
        np.testing.assert_array_equal(frame_placement(model, x, name), P[k])
        np.testing.assert_array_equal(frame_placement(model, x, k), P[k])


def test_world_fixed_frames_do_not_move():
    model = robot("ur5")
    k = model.frame_index("world")
    assert model.frames[k].body == -1
    x = model.state_space.random(4)
    a = np.ones(model.nv)
    np.testing.assert_array_equal(frame_placement(model, x, k), np.eye(4))
    np.testing.assert_array_equal(frame_velocity(model, x, k), np.zeros(6))
    np.testing.assert_array_equal(frame_acceleration(model, x, a, k, classical=True), np.zeros(6))
    np.testing.assert_array_equal(frame_jacobian(model, x, k, "world"), np.zeros((6, model.nv)))


# ---------------------------------------------------------------- velocities and accelerations


@pytest.mark.parametrize("name", ROBOTS)
def test_frame_velocity_matches_pinocchio(name):
    for model, pm, pd, x, *_ in samples(name):
        for k in range(len(model.frames)):
            for ref, pin_ref in REFERENCES.items():
                expected = pin.getFrameVelocity(pm, pd, pin_frame(model, pm, k), pin_ref).vector
                assert_close(frame_velocity(model, x, k, ref), expected)


@pytest.mark.parametrize("name", ROBOTS)
def test_frame_acceleration_matches_pinocchio(name):
    for model, pm, pd, x, a, *_ in samples(name):
        for k in range(len(model.frames)):
            fid = pin_frame(model, pm, k)
            for ref, pin_ref in REFERENCES.items():
                assert_close(frame_acceleration(model, x, a, k, ref),
                             pin.getFrameAcceleration(pm, pd, fid, pin_ref).vector)
                assert_close(frame_acceleration(model, x, a, k, ref, classical=True),
                             pin.getFrameClassicalAcceleration(pm, pd, fid, pin_ref).vector)


@pytest.mark.parametrize("name", ["panda", "talos"])
def test_classical_acceleration_is_spatial_plus_w_cross_v(name):
    for model, _, _, x, a, *_ in samples(name, 2):
        for k in range(0, len(model.frames), 3):
            for ref in REFERENCES:
                v = frame_velocity(model, x, k, ref)
                spatial = frame_acceleration(model, x, a, k, ref)
                classical = frame_acceleration(model, x, a, k, ref, classical=True)
                assert_close(classical[:3], spatial[:3] + np.cross(v[3:], v[:3]), 1e-12)
                np.testing.assert_array_equal(classical[3:], spatial[3:])


def test_classical_acceleration_is_the_second_derivative_of_the_frame_origin():
    """Along x(t) = (H exp(t nu + t^2/2 nudot), s + t sdot + t^2/2 sddot), the world origin's second derivative."""
    model = robot("solo12")
    rng = np.random.default_rng(7)
    x, a = model.state_space.random(rng), rng.standard_normal(model.nv)
    k, h = model.frame_index("FL_FOOT"), 1e-3

    def origin(t):
        z = np.concatenate([t * x.v + 0.5 * t * t * a, np.zeros(model.nv)])
        xt = model.state_space.integrate(State(x.H, x.s, np.zeros(model.nv)), z)
        return frame_placement(model, xt, k)[:3, 3]

    second = (origin(h) - 2 * origin(0.0) + origin(-h)) / h**2
    np.testing.assert_allclose(frame_acceleration(model, x, a, k, "local_world_aligned", True)[:3], second,
                               rtol=0, atol=1e-5 * max(1.0, np.abs(second).max()))


# ---------------------------------------------------------------- Jacobians


@pytest.mark.parametrize("name", ROBOTS)
def test_frame_jacobian_matches_pinocchio(name):
    for model, pm, pd, x, _, q, _ in samples(name, 2):
        for k in range(len(model.frames)):
            fid = pin_frame(model, pm, k)
            for ref, pin_ref in REFERENCES.items():
                expected = pin.computeFrameJacobian(pm, pd, q, fid, pin_ref).copy()
                assert_close(frame_jacobian(model, x, k, ref), expected)


@pytest.mark.parametrize("name", ["ur5", "panda", "anymal", "talos"])
def test_jacobian_times_velocity_is_frame_velocity(name):
    for model, _, _, x, *_ in samples(name, 2):
        for k in range(len(model.frames)):
            for ref in REFERENCES:
                assert_close(frame_jacobian(model, x, k, ref) @ x.v, frame_velocity(model, x, k, ref))


def test_jacobian_columns_vanish_off_the_ancestor_chain():
    model = robot("talos")
    x = model.state_space.random(5)
    for k, frame in enumerate(model.frames):
        chain, j = set(), frame.body
        while j >= 0:
            iv = int(model.mi[j, 2])
            chain |= set(range(iv, iv + (6 if model.joint_type[j] == JOINT_FREE else 1)))
            j = int(model.parent[j])
        off = [c for c in range(model.nv) if c not in chain]
        for ref in REFERENCES:
            assert not np.any(frame_jacobian(model, x, k, ref)[:, off])


# ---------------------------------------------------------------- batched form


@pytest.mark.parametrize("name", ["panda", "talos"])
def test_trajectory_form_equals_per_state_form(name):
    model = robot(name)
    rng = np.random.default_rng(11)
    X = model.state_space.random_trajectory(5, rng)
    A = rng.standard_normal((5, model.nv))
    k = len(model.frames) - 1
    batched = {
        "body": body_placements(model, X), "frames": frame_placements(model, X), "frame": frame_placement(model, X, k),
        "vel": frame_velocity(model, X, k, "world"), "acc": frame_acceleration(model, X, A, k, "local", True),
        "jac": frame_jacobian(model, X, k, "local_world_aligned"),
    }
    for t in range(len(X)):
        x = X[t]
        single = {
            "body": body_placements(model, x), "frames": frame_placements(model, x),
            "frame": frame_placement(model, x, k), "vel": frame_velocity(model, x, k, "world"),
            "acc": frame_acceleration(model, x, A[t], k, "local", True),
            "jac": frame_jacobian(model, x, k, "local_world_aligned"),
        }
        for key, value in single.items():
            assert batched[key].shape == (len(X),) + value.shape, key
            np.testing.assert_array_equal(batched[key][t], value, err_msg=key)


# ---------------------------------------------------------------- bad inputs


def test_invalid_frames_and_references_are_rejected():
    model = robot("ur5")
    x = model.state_space.random(0)
    with pytest.raises(KeyError, match="no frame 'no_such_link'"):
        frame_placement(model, x, "no_such_link")
    for k in (len(model.frames), -1):
        with pytest.raises(IndexError, match="out of range"):
            frame_velocity(model, x, k)
    with pytest.raises(TypeError, match="name or an index"):
        frame_jacobian(model, x, 1.5)
    for ref in ("LOCAL", "body", None):
        with pytest.raises(ValueError, match="reference must be one of"):
            frame_jacobian(model, x, 0, ref)


def test_bad_states_and_accelerations_raise_value_error():
    model = robot("solo12")
    x = model.state_space.random(0)
    a = np.zeros(model.nv)
    k = model.frame_index("FL_FOOT")
    nan_s = x.copy()
    nan_s.s[2] = np.nan
    bad_R = x.copy()
    bad_R.H[:3, :3] *= 2.0
    cases = [
        (lambda: frame_placements(model, State(x.H, x.s[:-1], x.v)), "joint positions"),
        (lambda: frame_velocity(model, State(x.H, x.s, x.v[:-1]), k), "velocity v"),
        (lambda: frame_jacobian(model, nan_s, k), "NaN"),
        (lambda: body_placements(model, bad_R), "rotation"),
        (lambda: frame_acceleration(model, x, a[:-1], k), "acceleration"),
        (lambda: frame_acceleration(model, x, np.full(model.nv, np.inf), k), "NaN or inf"),
        (lambda: frame_acceleration(model, x, np.zeros((2, model.nv)), k), "a must have shape"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


def test_bad_trajectories_raise_value_error_naming_the_knot():
    model = robot("solo12")
    X = model.state_space.random_trajectory(4, 0)
    X.s[2, 0] = np.nan
    with pytest.raises(ValueError, match="at knot 2"):
        frame_jacobian(model, X, 0)
    X = model.state_space.random_trajectory(4, 0)
    short = Trajectory(X.H, X.s, X.v[:3])
    with pytest.raises(ValueError, match="same number of knots"):
        frame_placements(model, short)
    with pytest.raises(ValueError, match="same number of knots"):
        frame_acceleration(model, X, np.zeros((3, model.nv)), 0)
    with pytest.raises(TypeError, match="State or a Trajectory"):
        frame_placements(model, (X.H[0], X.s[0], X.v[0]))


# ---------------------------------------------------------------- debugging mode


def test_kernels_give_the_same_results_without_jit(tmp_path):
    """NUMBA_DISABLE_JIT=1 (pure Python kernels, for debugging) reproduces the compiled results."""
    script = textwrap.dedent("""
        import sys
        import numpy as np
        from lietraj.dynamics.kinematics.center_of_mass import center_of_mass, center_of_mass_jacobian, center_of_mass_velocity
        from lietraj.dynamics.kinematics.kinematics import frame_acceleration, frame_jacobian, frame_placements, frame_velocity
        from lietraj.dynamics.model.robots import load_robot
        model = load_robot("solo12")
        rng = np.random.default_rng(1)
        X = model.state_space.random_trajectory(2, rng)
        A = rng.standard_normal((2, model.nv))
        x, k = X[0], model.frame_index("HR_FOOT")
        np.savez(sys.argv[1], P=frame_placements(model, x), V=frame_velocity(model, X, k, "world"),
                 A=frame_acceleration(model, x, A[0], k, "local_world_aligned", True),
                 J=frame_jacobian(model, X, k), c=center_of_mass(model, x), vc=center_of_mass_velocity(model, X),
                 Jc=center_of_mass_jacobian(model, x))
    """)
    out = tmp_path / "nojit.npz"
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    subprocess.run([sys.executable, "-c", script, str(out)], check=True, env=env, timeout=120)
    from lietraj.dynamics.kinematics.center_of_mass import center_of_mass, center_of_mass_jacobian, center_of_mass_velocity

    model = robot("solo12")
    rng = np.random.default_rng(1)
    X = model.state_space.random_trajectory(2, rng)
    A = rng.standard_normal((2, model.nv))
    x, k = X[0], model.frame_index("HR_FOOT")
    ref = np.load(out)
    assert_close(ref["P"], frame_placements(model, x), 1e-14)
    assert_close(ref["V"], frame_velocity(model, X, k, "world"), 1e-14)
    assert_close(ref["A"], frame_acceleration(model, x, A[0], k, "local_world_aligned", True), 1e-14)
    assert_close(ref["J"], frame_jacobian(model, X, k), 1e-14)
    assert_close(ref["c"], center_of_mass(model, x), 1e-14)
    assert_close(ref["vc"], center_of_mass_velocity(model, X), 1e-14)
    assert_close(ref["Jc"], center_of_mass_jacobian(model, x), 1e-14)
