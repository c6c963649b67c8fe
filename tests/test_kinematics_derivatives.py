"""Frame velocity / acceleration derivatives, frame placement error, centre-of-mass derivatives.

Checked against Pinocchio 4.0.0 (``computeForwardKinematicsDerivatives`` + ``getFrame*Derivatives``,
``getCenterOfMassVelocityDerivatives``, ``log6``/``Jlog6``) on the oracle robots, frames matched by name, and
against geometric finite differences (``numerical_jacobian``) of the functions they differentiate, including the
classical acceleration, the placement error and floating bases pitched to +-90 degrees.

Pinocchio 4.0.0's LOCAL_WORLD_ALIGNED q-derivatives are not those of ``getFrameVelocity(..., LOCAL_WORLD_ALIGNED)``:
they keep the reference point fixed in space while the frame origin moves with q (pinocchio issue #2702). Ours are
the derivatives of ``frame_velocity``/``frame_acceleration`` in that reference (finite differences agree); against
Pinocchio they are checked through its LOCAL derivatives rotated to world axes, and the difference to its raw
LOCAL_WORLD_ALIGNED output is checked to be exactly that moving-point term.
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

from conftest import ORACLE_ROBOTS, relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.kinematics.center_of_mass import center_of_mass, center_of_mass_jacobian, center_of_mass_velocity
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.kinematics.kinematics import frame_acceleration, frame_jacobian, frame_placement, frame_velocity
from lietraj.dynamics.kinematics.kinematics_derivatives import (
    center_of_mass_derivatives,
    frame_acceleration_derivatives,
    frame_placement_error,
    frame_velocity_derivatives,
)
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.model.robots import load_robot
from lietraj.dynamics.lie.state import State, Trajectory
from pin_oracle import pin_model

REFERENCES = {"local": pin.LOCAL, "local_world_aligned": pin.LOCAL_WORLD_ALIGNED, "world": pin.WORLD}
PIN_TOL, FD_TOL = 1e-9, 1e-6
FD_ROBOTS = ["solo12", "talos", "panda", "icub"]


@lru_cache(maxsize=None)
def robot(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_robot(name)


def frames_to_check(model) -> list[int]:
    """The base (or first) body frame, the deepest frame, and the outermost frame of each leaf body (feet, hands,
    grippers, head), at most 6."""
    depth = np.zeros(model.nb, dtype=int)
    for i in range(model.nb):
        depth[i] = 0 if model.parent[i] < 0 else depth[model.parent[i]] + 1
    leaves = [i for i in range(model.nb) if i not in set(model.parent.tolist())]
    last = {f.body: k for k, f in enumerate(model.frames)}
    picks = [next(k for k, f in enumerate(model.frames) if f.body == 0),
             max(range(len(model.frames)), key=lambda k: depth[model.frames[k].body] if model.frames[k].body >= 0
                 else -1)]
    for i in leaves:
        if last[i] not in picks:
            picks.append(last[i])
    return picks[:6]


def pitched(model, x: State, angle: float) -> State:
    """x with its base rotated to pitch `angle` about the world y axis (fixed bases are returned unchanged)."""
    if not model.floating_base:
        return x
    c, s = np.cos(angle), np.sin(angle)
    H = x.H.copy()
    H[:3, :3] = np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
    return State(H, x.s, x.v)


def states(model, count: int, seed: int):
    rng = np.random.default_rng(seed)
    return [(model.state_space.random(rng), rng.standard_normal(model.nv)) for _ in range(count)]


def fd_states(name: str):
    """Two random states and, for a floating base, the base pitched to +90 and -90 degrees."""
    model = robot(name)
    (x0, a0), (x1, a1) = states(model, 2, zlib.crc32(name.encode()) + 1)
    out = [(x0, a0), (x1, a1)]
    if model.floating_base:
        out += [(pitched(model, x0, np.pi / 2), a0), (pitched(model, x1, -np.pi / 2), a1)]
    return out


def pin_setup(name: str, x: State, a: np.ndarray):
    model, pm = robot(name), pin_model(name)
    pd = pm.createData()
    q, v = to_pinocchio(model, x)
    pin.computeForwardKinematicsDerivatives(pm, pd, q, v, a)
    pin.updateFramePlacements(pm, pd)
    return pm, pd, q


def block_rotate(R: np.ndarray, D: np.ndarray) -> np.ndarray:
    return np.vstack([R @ D[:3], R @ D[3:]])


def skew(x):
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def check(errors: dict, key: str, actual, expected) -> None:
    errors[key] = max(errors.get(key, 0.0), relative_error(actual, expected))


# ---------------------------------------------------------------- against Pinocchio


@pytest.mark.parametrize("name", ORACLE_ROBOTS)
def test_frame_motion_derivatives_match_pinocchio(name):
    model = robot(name)
    errors: dict = {}
    for x, a in states(model, 2, zlib.crc32(name.encode())):
        pm, pd, _ = pin_setup(name, x, a)
        for k in frames_to_check(model):
            fid = pm.getFrameId(model.frames[k].name)
            pin_v = {r: [np.array(d) for d in pin.getFrameVelocityDerivatives(pm, pd, fid, p)]
                     for r, p in REFERENCES.items()}
            pin_a = {r: [np.array(d) for d in pin.getFrameAccelerationDerivatives(pm, pd, fid, p)]
                     for r, p in REFERENCES.items()}
            for ref in REFERENCES:
                dv_dq, dv_dv = frame_velocity_derivatives(model, x, k, ref)
                d = frame_acceleration_derivatives(model, x, a, k, ref)
                assert dv_dq.shape == dv_dv.shape == d.da_dq.shape == (6, model.nv)
                check(errors, "dv_dv", dv_dv, pin_v[ref][1])
                check(errors, "da_dv", d.da_dv, pin_a[ref][2])
                check(errors, "da_da", d.da_da, pin_a[ref][3])
                check(errors, "dv_dq(acc)", d.dv_dq, dv_dq)
                if ref != "local_world_aligned":
                    check(errors, "dv_dq", dv_dq, pin_v[ref][0])
                    check(errors, "da_dq", d.da_dq, pin_a[ref][1])
                    continue
                # d(R y_local) = R dy_local + (R y_local) x^T [J_ang]: Pinocchio's LOCAL derivatives moved with
                # the frame's rotation (the LOCAL_WORLD_ALIGNED Jacobian's angular rows are the rotation rate).
                R = pd.oMf[fid].rotation
                J_ang = pin.getFrameJacobian(pm, pd, fid, pin.LOCAL_WORLD_ALIGNED)[3:]
                for ours, dl, value in ((dv_dq, pin_v["local"][0], pin.getFrameVelocity),
                                        (d.da_dq, pin_a["local"][1], pin.getFrameAcceleration)):
                    y = value(pm, pd, fid, pin.LOCAL_WORLD_ALIGNED).vector
                    expected = block_rotate(R, dl) - np.vstack([skew(y[:3]) @ J_ang, skew(y[3:]) @ J_ang])
                    check(errors, "lwa_dq", ours, expected)
                    # Pinocchio's own LWA output lacks only the motion of the frame origin, dp = J_lin.
                    raw = pin_v[ref][0] if value is pin.getFrameVelocity else pin_a[ref][1]
                    J_lin = pin.getFrameJacobian(pm, pd, fid, pin.LOCAL_WORLD_ALIGNED)[:3]
                    check(errors, "lwa_raw", ours, raw + np.vstack([skew(y[3:]) @ J_lin, np.zeros_like(J_lin)]))
    assert max(errors.values()) <= PIN_TOL, errors


@pytest.mark.parametrize("name", ORACLE_ROBOTS)
def test_center_of_mass_derivatives_match_pinocchio(name):
    model, pm = robot(name), pin_model(name)
    pd = pm.createData()
    errors: dict = {}
    for x, a in states(model, 3, zlib.crc32(name.encode()) + 2):
        q, v = to_pinocchio(model, x)
        pin.computeForwardKinematicsDerivatives(pm, pd, q, v, a)
        pin.centerOfMass(pm, pd, q, v)
        dvcom_dq = np.array(pin.getCenterOfMassVelocityDerivatives(pm, pd))
        Jc = np.array(pin.jacobianCenterOfMass(pm, pd, q))
        d = center_of_mass_derivatives(model, x)
        assert d.dc_dq.shape == d.dcdot_dq.shape == d.dcdot_dv.shape == (3, model.nv)
        check(errors, "dc_dq", d.dc_dq, Jc)
        check(errors, "dcdot_dv", d.dcdot_dv, Jc)
        check(errors, "dcdot_dq", d.dcdot_dq, dvcom_dq)
    assert max(errors.values()) <= PIN_TOL, errors


@pytest.mark.parametrize("name", ORACLE_ROBOTS)
def test_frame_placement_error_matches_pinocchio_log6_jlog6(name):
    model = robot(name)
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 3)
    errors: dict = {}
    for x, a in states(model, 2, zlib.crc32(name.encode()) + 3):
        pm, pd, q = pin_setup(name, x, a)
        for k in frames_to_check(model):
            fid = pm.getFrameId(model.frames[k].name)
            target = se3.random(rng)
            E = pin.SE3(target).inverse() * pd.oMf[fid]
            e = frame_placement_error(model, x, k, target)
            check(errors, "residual", e.residual, pin.log6(E).vector)
            check(errors, "jacobian", e.jacobian, pin.Jlog6(E) @ pin.computeFrameJacobian(pm, pd, q, fid, pin.LOCAL))
    assert max(errors.values()) <= PIN_TOL, errors


@pytest.mark.parametrize("angle", [0.0, 1e-9, 1e-4, 0.1, 0.2499, 0.2501, 1.0, 2.0, 3.0, np.pi - 1e-4])
def test_placement_error_jacobian_is_right_jacobian_inverse_at_every_angle(angle):
    """A target chosen so that r = xi exactly: r = xi, dr/dq = Jr(xi)^-1 J_local (se3) = Jlog6 J_local (Pinocchio),
    across the series / closed-form switch of D(theta) and up to theta -> pi."""
    model = robot("solo12")
    rng = np.random.default_rng(17)
    x = model.state_space.random(rng)
    k = model.frame_index("FL_FOOT")
    axis = rng.standard_normal(3)
    xi = np.concatenate([rng.standard_normal(3), angle * axis / np.linalg.norm(axis)])
    target = frame_placement(model, x, k) @ se3.exp(-xi)
    e = frame_placement_error(model, x, k, target)
    J_local = frame_jacobian(model, x, k, "local")
    assert relative_error(e.residual, xi) <= 1e-11
    assert relative_error(e.jacobian, se3.right_jacobian_inverse(xi) @ J_local) <= 1e-11
    E = pin.SE3(se3.inverse(target) @ frame_placement(model, x, k))
    assert relative_error(e.jacobian, pin.Jlog6(E) @ J_local) <= 1e-11


# ---------------------------------------------------------------- against finite differences


@pytest.mark.parametrize("name", FD_ROBOTS)
def test_frame_motion_derivatives_match_finite_differences(name):
    model = robot(name)
    nv = model.nv
    errors: dict = {}
    for x, a in fd_states(name):
        for k in frames_to_check(model)[:4]:
            for ref in REFERENCES:
                dv_dq, dv_dv = frame_velocity_derivatives(model, x, k, ref)
                J = numerical_jacobian(lambda y: frame_velocity(model, y, k, ref), x)
                check(errors, "dv_dq", dv_dq, J[:, :nv])
                check(errors, "dv_dv", dv_dv, J[:, nv:])
                for classical in (False, True):
                    d = frame_acceleration_derivatives(model, x, a, k, ref, classical)
                    Jx, Ja = numerical_jacobian(lambda y, u: frame_acceleration(model, y, u, k, ref, classical), x, a)
                    tag = "classical " if classical else ""
                    check(errors, tag + "da_dq", d.da_dq, Jx[:, :nv])
                    check(errors, tag + "da_dv", d.da_dv, Jx[:, nv:])
                    check(errors, tag + "da_da", d.da_da, Ja)
                    check(errors, tag + "dv_dq", d.dv_dq, J[:, :nv])
    assert max(errors.values()) <= FD_TOL, errors


@pytest.mark.parametrize("name", FD_ROBOTS)
def test_frame_placement_error_matches_finite_differences(name):
    model = robot(name)
    nv = model.nv
    rng = np.random.default_rng(5)
    errors: dict = {}
    for x, _ in fd_states(name):
        for k in frames_to_check(model)[:4]:
            target = se3.random(rng)
            e = frame_placement_error(model, x, k, target)
            J = numerical_jacobian(lambda y: frame_placement_error(model, y, k, target).residual, x)
            check(errors, "dr_dq", e.jacobian, J[:, :nv])
            check(errors, "dr_dv", np.zeros((6, nv)), J[:, nv:])
            Jse3 = numerical_jacobian(lambda y: frame_placement(model, y, k), x, output="se3")
            check(errors, "Jr^-1 J_local", e.jacobian, se3.right_jacobian_inverse(e.residual) @ Jse3[:, :nv])
            check(errors, "residual", e.residual, se3.log(se3.inverse(target) @ frame_placement(model, x, k)))
    assert max(errors.values()) <= FD_TOL, errors


@pytest.mark.parametrize("name", FD_ROBOTS)
def test_center_of_mass_derivatives_match_finite_differences(name):
    model = robot(name)
    nv = model.nv
    errors: dict = {}
    for x, _ in fd_states(name):
        d = center_of_mass_derivatives(model, x)
        Jc = numerical_jacobian(lambda y: center_of_mass(model, y), x)
        Jcd = numerical_jacobian(lambda y: center_of_mass_velocity(model, y), x)
        check(errors, "dc_dq", d.dc_dq, Jc[:, :nv])
        check(errors, "dcdot_dq", d.dcdot_dq, Jcd[:, :nv])
        check(errors, "dcdot_dv", d.dcdot_dv, Jcd[:, nv:])
        check(errors, "jacobian", d.dc_dq, center_of_mass_jacobian(model, x))
    assert max(errors.values()) <= FD_TOL, errors


# ---------------------------------------------------------------- special frames, batches, bad input


def test_world_fixed_frame_has_zero_derivatives():
    model = robot("ur5")
    k = model.frame_index("world")
    assert model.frames[k].body == -1
    x, a = states(model, 1, 3)[0]
    for ref in REFERENCES:
        for D in frame_velocity_derivatives(model, x, k, ref):
            np.testing.assert_array_equal(D, 0.0)
        d = frame_acceleration_derivatives(model, x, a, k, ref, True)
        for D in (d.dv_dq, d.da_dq, d.da_dv, d.da_da):
            np.testing.assert_array_equal(D, 0.0)
    target = se3.random(4)
    e = frame_placement_error(model, x, k, target)
    np.testing.assert_array_equal(e.jacobian, 0.0)
    np.testing.assert_allclose(e.residual, se3.log(se3.inverse(target)), atol=1e-14)


@pytest.mark.parametrize("name", ["solo12", "panda"])
def test_trajectory_form_equals_per_state_form(name):
    model = robot(name)
    rng = np.random.default_rng(11)
    X = model.state_space.random_trajectory(4, rng)
    A = rng.standard_normal((4, model.nv))
    k = frames_to_check(model)[-1]
    target = se3.random(rng)
    dv = frame_velocity_derivatives(model, X, k, "local_world_aligned")
    da = frame_acceleration_derivatives(model, X, A, k, "world", True)
    pe = frame_placement_error(model, X, k, target)
    com = center_of_mass_derivatives(model, X)
    for t in range(len(X)):
        x = X[t]
        single = {
            "dv_dq": (dv[0], frame_velocity_derivatives(model, x, k, "local_world_aligned")[0]),
            "dv_dv": (dv[1], frame_velocity_derivatives(model, x, k, "local_world_aligned")[1]),
            **{f: (getattr(da, f), getattr(frame_acceleration_derivatives(model, x, A[t], k, "world", True), f))
               for f in ("dv_dq", "da_dq", "da_dv", "da_da")},
            "residual": (pe.residual, frame_placement_error(model, x, k, target).residual),
            "jacobian": (pe.jacobian, frame_placement_error(model, x, k, target).jacobian),
            **{f: (getattr(com, f), getattr(center_of_mass_derivatives(model, x), f))
               for f in ("dc_dq", "dcdot_dq", "dcdot_dv")},
        }
        for key, (batched, value) in single.items():
            assert batched.shape == (len(X),) + value.shape, key
            np.testing.assert_array_equal(batched[t], value, err_msg=key)


def test_bad_frames_references_and_targets_are_rejected():
    model = robot("ur5")
    x, a = states(model, 1, 0)[0]
    with pytest.raises(KeyError, match="no frame 'no_such_link'"):
        frame_velocity_derivatives(model, x, "no_such_link")
    with pytest.raises(IndexError, match="out of range"):
        frame_acceleration_derivatives(model, x, a, len(model.frames))
    with pytest.raises(IndexError, match="out of range"):
        frame_placement_error(model, x, -1, np.eye(4))
    with pytest.raises(TypeError, match="name or an index"):
        frame_velocity_derivatives(model, x, 2.5)
    for ref in ("LOCAL", "body", None):
        with pytest.raises(ValueError, match="reference must be one of"):
            frame_velocity_derivatives(model, x, 0, ref)
        with pytest.raises(ValueError, match="reference must be one of"):
            frame_acceleration_derivatives(model, x, a, 0, ref)
    bad_rotation = np.eye(4)
    bad_rotation[:3, :3] *= 1.1
    bad_row = np.eye(4)
    bad_row[3, 0] = 1.0
    nan = np.eye(4)
    nan[0, 3] = np.nan
    for target, message in ((bad_rotation, "not orthonormal"), (bad_row, "last row"), (nan, "NaN"),
                            (np.eye(3), "shape")):
        with pytest.raises(ValueError, match=message):
            frame_placement_error(model, x, 0, target)


def test_bad_states_and_accelerations_raise_value_error():
    model = robot("solo12")
    x, a = states(model, 1, 0)[0]
    k = model.frame_index("FL_FOOT")
    nan_s = x.copy()
    nan_s.s[1] = np.nan
    bad_R = x.copy()
    bad_R.H[:3, :3] *= 2.0
    cases = [
        (lambda: frame_velocity_derivatives(model, State(x.H, x.s[:-1], x.v), k), "joint positions"),
        (lambda: frame_velocity_derivatives(model, State(x.H, x.s, x.v[:-1]), k), "velocity v"),
        (lambda: frame_acceleration_derivatives(model, nan_s, a, k), "NaN"),
        (lambda: frame_placement_error(model, bad_R, k, np.eye(4)), "rotation"),
        (lambda: center_of_mass_derivatives(model, bad_R), "rotation"),
        (lambda: frame_acceleration_derivatives(model, x, a[:-1], k), "acceleration"),
        (lambda: frame_acceleration_derivatives(model, x, np.full(model.nv, np.inf), k), "NaN or inf"),
        (lambda: frame_acceleration_derivatives(model, x, np.zeros((2, model.nv)), k), "a must have shape"),
        (lambda: center_of_mass_derivatives(model.replace(mass=np.zeros(model.nb)), x), "no mass"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


def test_bad_trajectories_raise_value_error_naming_the_knot():
    model = robot("solo12")
    X = model.state_space.random_trajectory(4, 0)
    A = np.zeros((4, model.nv))
    X.v[3, 2] = np.inf
    for call in (lambda: frame_velocity_derivatives(model, X, 0), lambda: frame_acceleration_derivatives(model, X, A, 0),
                 lambda: frame_placement_error(model, X, 0, np.eye(4)), lambda: center_of_mass_derivatives(model, X)):
        with pytest.raises(ValueError, match="at knot 3"):
            call()
    X = model.state_space.random_trajectory(4, 0)
    with pytest.raises(ValueError, match="same number of knots"):
        frame_velocity_derivatives(model, Trajectory(X.H, X.s, X.v[:3]), 0)
    with pytest.raises(ValueError, match="same number of knots"):
        frame_acceleration_derivatives(model, X, A[:3], 0)
    with pytest.raises(TypeError, match="State or a Trajectory"):
        frame_placement_error(model, (X.H[0], X.s[0], X.v[0]), 0, np.eye(4))
    with pytest.raises(TypeError, match="State or a Trajectory"):
        center_of_mass_derivatives(model, (X.H[0], X.s[0], X.v[0]))


def test_kernels_give_the_same_results_without_jit(tmp_path):
    """NUMBA_DISABLE_JIT=1 (pure Python kernels, for debugging) reproduces the compiled results."""
    script = textwrap.dedent("""
        import sys
        import numpy as np
        from lietraj.dynamics import se3
        from lietraj.dynamics.kinematics.kinematics_derivatives import (center_of_mass_derivatives,
            frame_acceleration_derivatives, frame_placement_error, frame_velocity_derivatives)
        from lietraj.dynamics.model.robots import load_robot
        model = load_robot("solo12")
        rng = np.random.default_rng(1)
        X = model.state_space.random_trajectory(2, rng)
        A = rng.standard_normal((2, model.nv))
        x, k, T = X[0], model.frame_index("HR_FOOT"), se3.random(2)
        d = frame_acceleration_derivatives(model, X, A, k, "local_world_aligned", True)
        e = frame_placement_error(model, x, k, T)
        c = center_of_mass_derivatives(model, X)
        np.savez(sys.argv[1], V=np.stack(frame_velocity_derivatives(model, x, k, "world")),
                 A=np.stack([d.dv_dq, d.da_dq, d.da_dv, d.da_da]), r=e.residual, J=e.jacobian,
                 C=np.stack([c.dc_dq, c.dcdot_dq, c.dcdot_dv]))
    """)
    out = tmp_path / "nojit.npz"
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    subprocess.run([sys.executable, "-c", script, str(out)], check=True, env=env, timeout=120)
    model = robot("solo12")
    rng = np.random.default_rng(1)
    X = model.state_space.random_trajectory(2, rng)
    A = rng.standard_normal((2, model.nv))
    x, k, T = X[0], model.frame_index("HR_FOOT"), se3.random(2)
    d = frame_acceleration_derivatives(model, X, A, k, "local_world_aligned", True)
    e = frame_placement_error(model, x, k, T)
    c = center_of_mass_derivatives(model, X)
    ref = np.load(out)
    assert relative_error(ref["V"], np.stack(frame_velocity_derivatives(model, x, k, "world"))) <= 1e-14
    assert relative_error(ref["A"], np.stack([d.dv_dq, d.da_dq, d.da_dv, d.da_da])) <= 1e-14
    assert relative_error(ref["r"], e.residual) <= 1e-14
    assert relative_error(ref["J"], e.jacobian) <= 1e-14
    assert relative_error(ref["C"], np.stack([c.dc_dq, c.dcdot_dq, c.dcdot_dv])) <= 1e-14
