"""Contact-constrained forward dynamics: Pinocchio agreement and the constraint / inverse-dynamics identities.

The oracle is Pinocchio's ``constraintDynamics`` with rigid constraint models between each contact frame and
the world (its own drift and Baumgarte terms), on a humanoid standing on both soles (6d) and a quadruped on its
four point feet (3d), with and without Baumgarte gains, in both references; redundant contacts with damping
are checked against ``forwardDynamics(q, v, tau, J, gamma, damping)``. Further robots and contact sets (anymal's
point feet, a fixed-base arm holding its tool, a humanoid with mixed 6d / 3d contacts and references), the packed
contact sets, the knot-wise errors of the batched kernel and the pure-Python run of the kernels complete it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from functools import lru_cache

import numpy as np
import pinocchio as pin
import pytest

from conftest import relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.algorithms.aba import aba
from lietraj.dynamics.contacts.contact_dynamics import CF_KP, CF_P, CF_R, CF_TP, CF_TR, Contact, contact_dynamics, pack_contacts
from lietraj.dynamics.kinematics.kinematics import frame_acceleration, frame_placement, frame_velocity
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.algorithms.rnea import rnea
from lietraj.dynamics.model.robots import load_robot
from pin_oracle import PROXIMAL_SETTINGS, pin_constraints, pin_model

FEET = {
    "talos": (("left_sole_link", "right_sole_link"), "6d"),
    "solo12": (("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"), "3d"),
}
GAINS = [(0.0, 0.0), (30.0, 8.0)]
RTOL = 1e-9


@lru_cache(maxsize=None)
def robot(name: str):
    return load_robot(name)


def case(name: str, seed: int, gains, reference: str = "local"):
    """(model, x, tau, contacts): a random state and torque, contacts on the feet with targets slightly off the
    current foot poses (so that the position term of the Baumgarte stabilization is not zero)."""
    model = robot(name)
    rng = np.random.default_rng(zlib.crc32(f"{name}{seed}".encode()))
    x = model.state_space.random(rng)
    tau = rng.standard_normal(model.nv)
    frames, kind = FEET[name]
    contacts = [Contact(f, kind, reference, gains, frame_placement(model, x, f) @ se3.exp(0.05 * rng.standard_normal(6)))
                for f in frames]
    return model, x, tau, contacts


def pinocchio_constraint_dynamics(name: str, model, x, tau, contacts):
    """Pinocchio's constraintDynamics with one frame-to-world constraint per contact: (model, data, constraint
    models, constraint datas, a)."""
    pm, pd, cmodels, cdatas = pin_constraints(name, contacts)
    q, v = to_pinocchio(model, x)
    a = np.array(pin.constraintDynamics(pm, pd, q, v, tau, cmodels, cdatas, pin.ProximalSettings(*PROXIMAL_SETTINGS)))
    return pm, pd, cmodels, cdatas, a


def pinocchio_contact_dynamics(name: str, model, x, tau, contacts):
    """Pinocchio's (a, lambda)."""
    _, pd, _, _, a = pinocchio_constraint_dynamics(name, model, x, tau, contacts)
    return a, np.array(pd.lambda_c)


@pytest.mark.parametrize("reference", ["local", "local_world_aligned"])
@pytest.mark.parametrize("gains", GAINS)
@pytest.mark.parametrize("name", list(FEET))
def test_matches_pinocchio_constraint_dynamics(name, gains, reference):
    for seed in range(3):
        model, x, tau, contacts = case(name, seed, gains, reference)
        r = contact_dynamics(model, x, tau, contacts)
        a, lam = pinocchio_contact_dynamics(name, model, x, tau, contacts)
        assert relative_error(r.a, a) <= RTOL
        assert relative_error(r.lagrangian, lam) <= RTOL
        assert np.array_equal(np.concatenate(r.forces), r.lagrangian)
        assert [f.shape for f in r.forces] == [(c.dim,) for c in contacts]


@pytest.mark.parametrize("gains", GAINS)
@pytest.mark.parametrize("name", list(FEET))
def test_constraint_and_inverse_dynamics_hold(name, gains):
    """The contact frames accelerate as the stabilization asks (a_c = -Kv v_c - Kp e_c, from forward kinematics
    at the solved a, not from J), and the inverse dynamics with the contact forces as external wrenches on the
    feet's bodies gives back tau."""
    model, x, tau, contacts = case(name, 0, gains)
    r = contact_dynamics(model, x, tau, contacts)
    Kp, Kv = gains
    fext = np.zeros((model.nb, 6))
    for c, f in zip(contacts, r.forces):
        d = c.dim
        ac = frame_acceleration(model, x, r.a, c.frame, "local", classical=c.kind == "3d")[:d]
        P = frame_placement(model, x, c.frame)
        e = se3.log(se3.inverse(c.target) @ P) if d == 6 else P[:3, :3].T @ (P[:3, 3] - c.target[:3, 3])
        expected = -Kv * frame_velocity(model, x, c.frame, "local")[:d] - Kp * e
        assert relative_error(ac, expected) <= 1e-9
        frame = model.frames[model.frame_index(c.frame)]
        force = frame.R @ f[:3]
        torque = frame.R @ f[3:] if d == 6 else np.zeros(3)
        fext[frame.body] += np.concatenate([force, torque + np.cross(frame.p, force)])
    assert relative_error(rnea(model, x, r.a, fext), tau) <= 1e-9
    assert relative_error(rnea(model, x, r.a), tau + r.jacobian.T @ r.lagrangian) <= 1e-9
    assert relative_error(r.jacobian @ r.a + r.drift, np.zeros(len(r.drift))) <= 1e-9


@pytest.mark.parametrize("name", list(FEET))
def test_trajectory_equals_states(name):
    model, x, _, contacts = case(name, 0, GAINS[1])
    X = model.state_space.random_trajectory(3, np.random.default_rng(5))
    TAU = np.random.default_rng(6).standard_normal((3, model.nv))
    R = contact_dynamics(model, X, TAU, contacts)
    assert R.a.shape == (3, model.nv) and R.lagrangian.shape == (3, sum(c.dim for c in contacts))
    for k in range(3):
        r = contact_dynamics(model, X[k], TAU[k], contacts)
        assert np.allclose(R.a[k], r.a, rtol=1e-12, atol=1e-12)
        assert np.allclose(R.lagrangian[k], r.lagrangian, rtol=1e-12, atol=1e-10)
        assert all(np.allclose(F[k], f, rtol=1e-12, atol=1e-10) for F, f in zip(R.forces, r.forces))


def test_redundant_contacts_raise_or_are_damped():
    """The same sole twice: J is rank deficient. Without damping a clear error; with damping Pinocchio's
    damped forwardDynamics on the same J and gamma."""
    model, x, tau, contacts = case("talos", 0, GAINS[1])
    contacts = contacts + [contacts[0]]
    with pytest.raises(ValueError, match="rank deficient"):
        contact_dynamics(model, x, tau, contacts)
    r = contact_dynamics(model, x, tau, contacts, damping=1e-6)
    pm = pin_model("talos")
    pd = pm.createData()
    q, v = to_pinocchio(model, x)
    a = np.array(pin.forwardDynamics(pm, pd, q, v, tau, r.jacobian, r.drift, 1e-6))
    assert relative_error(r.a, a) <= RTOL
    assert relative_error(r.lagrangian, np.array(pd.lambda_c)) <= RTOL
    assert relative_error(r.forces[0], r.forces[2]) <= 1e-8  # the load is shared equally (damping 1e-6: ill-conditioned)


def test_no_contacts_is_aba():
    model, x, tau, _ = case("solo12", 0, GAINS[0])
    r = contact_dynamics(model, x, tau, [])
    assert relative_error(r.a, aba(model, x, tau)) <= 1e-12
    assert r.forces == () and r.lagrangian.shape == (0,)


def test_bad_inputs_raise():
    model, x, tau, contacts = case("solo12", 0, GAINS[0])
    with pytest.raises(ValueError, match="unknown contact frame 'nope'"):
        contact_dynamics(model, x, tau, [Contact("nope", "3d")])
    with pytest.raises(ValueError, match="unknown contact frame"):
        contact_dynamics(model, x, tau, [Contact(10**6, "3d")])
    with pytest.raises(ValueError, match="NaN"):
        contact_dynamics(model, x, np.full(model.nv, np.nan), contacts)
    with pytest.raises(ValueError, match="shape"):
        contact_dynamics(model, x, tau[:-1], contacts)
    with pytest.raises(ValueError, match="damping"):
        contact_dynamics(model, x, tau, contacts, damping=-1.0)
    bad = x.copy()
    bad.v[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        contact_dynamics(model, bad, tau, contacts)
    with pytest.raises(ValueError, match="kind"):
        Contact("FL_FOOT", "2d")
    with pytest.raises(ValueError, match="reference"):
        Contact("FL_FOOT", "3d", "world")
    with pytest.raises(ValueError, match="baumgarte"):
        Contact("FL_FOOT", "3d", baumgarte=(1.0, np.nan))


# More contact sets, each against Pinocchio: (robot, [(frame, kind, reference)]).
MORE_CONTACTS = {
    "anymal": [(f, "3d", "local") for f in ("LF_FOOT", "LH_FOOT", "RF_FOOT", "RH_FOOT")],
    "ur5": [("tool0", "6d", "local_world_aligned")],
    "talos": [("left_sole_link", "6d", "local"), ("right_sole_link", "6d", "local_world_aligned"),
              ("gripper_left_fingertip_1_link", "3d", "local_world_aligned"), ("gripper_right_base_link", "3d", "local")],
}


@pytest.mark.parametrize("gains", GAINS)
@pytest.mark.parametrize("name", list(MORE_CONTACTS))
def test_more_contact_sets_match_pinocchio(name, gains):
    """A second quadruped, a fixed base (the tree's roots are joints, not a free flyer), mixed kinds and references
    on one robot, a contact on an arm; targets off the current poses."""
    model = robot(name)
    for seed in range(2):
        rng = np.random.default_rng(zlib.crc32(f"{name}{seed}more".encode()))
        x = model.state_space.random(rng)
        tau = rng.standard_normal(model.nv)
        contacts = [Contact(f, kind, ref, gains, frame_placement(model, x, f) @ se3.exp(0.05 * rng.standard_normal(6)))
                    for f, kind, ref in MORE_CONTACTS[name]]
        r = contact_dynamics(model, x, tau, contacts)
        a, lam = pinocchio_contact_dynamics(name, model, x, tau, contacts)
        assert relative_error(r.a, a) <= RTOL
        assert relative_error(r.lagrangian, lam) <= RTOL
        assert relative_error(rnea(model, x, r.a), tau + r.jacobian.T @ r.lagrangian) <= 1e-9


def test_contacts_are_packed_once_per_contact_set():
    model, x, tau, contacts = case("talos", 0, GAINS[1], "local_world_aligned")
    packed = pack_contacts(model, contacts)
    assert pack_contacts(model, tuple(contacts)) is packed  # the same Contact objects: the cached arrays
    frame = model.frames[model.frame_index("right_sole_link")]
    assert packed.CI[1].tolist() == [frame.body, 6, 1, 1]
    assert np.array_equal(packed.CF[1, CF_R:CF_R + 9], frame.R.ravel()) and np.array_equal(packed.CF[1, CF_P:CF_P + 3],
                                                                                          frame.p)
    assert tuple(packed.CF[1, CF_KP:CF_KP + 2]) == GAINS[1]
    T = contacts[1].target
    assert np.array_equal(packed.CF[1, CF_TR:CF_TR + 9], T[:3, :3].ravel()) and np.array_equal(
        packed.CF[1, CF_TP:CF_TP + 3], T[:3, 3])
    assert packed.nc == 12 and packed.offsets == (0, 6, 12)
    # Equal but new Contact objects: packed again, to the same arrays.
    again = [Contact(c.frame, c.kind, c.reference, c.baumgarte, c.target) for c in contacts]
    other = pack_contacts(model, again)
    assert other is not packed and np.array_equal(other.CI, packed.CI) and np.array_equal(other.CF, packed.CF)
    no_target = pack_contacts(model, [Contact("left_sole_link", "6d")])
    assert no_target.CI[0].tolist() == [model.frames[model.frame_index("left_sole_link")].body, 6, 0, 0]
    with pytest.raises(TypeError, match="Contact objects"):
        pack_contacts(model, ["left_sole_link"])


def test_trajectory_errors_name_the_knot():
    model, _, _, contacts = case("solo12", 0, GAINS[1])
    X = model.state_space.random_trajectory(4, np.random.default_rng(1))
    TAU = np.random.default_rng(2).standard_normal((4, model.nv))
    X.v[2, 3] = np.nan
    with pytest.raises(ValueError, match="at knot 2: the state or an input contains NaN"):
        contact_dynamics(model, X, TAU, contacts)
    X.v[2, 3] = 0.0
    TAU[3, 0] = np.inf
    with pytest.raises(ValueError, match="at knot 3: tau contains NaN or inf"):
        contact_dynamics(model, X, TAU, contacts)
    TAU[3, 0] = 0.0
    with pytest.raises(ValueError, match="at knot 0: the contact Jacobian is rank deficient"):
        contact_dynamics(model, X, TAU, contacts + [contacts[1]])
    with pytest.raises(ValueError, match=r"tau must have shape \(4, 18\)"):
        contact_dynamics(model, X, TAU[1:], contacts)


def test_kernels_run_without_jit():
    """NUMBA_DISABLE_JIT=1 (for debugging in pure Python) gives the compiled result."""
    code = ("import sys; sys.path.insert(0, 'tests'); import numpy as np;"
            "from test_contact_dynamics import case, GAINS;"
            "from lietraj.dynamics.contacts.contact_dynamics import contact_dynamics;"
            "model, x, tau, contacts = case('talos', 1, GAINS[1], 'local_world_aligned');"
            "r = contact_dynamics(model, x, tau, contacts);"
            "print(repr(np.concatenate([r.a, r.lagrangian, r.drift, r.jacobian.ravel()]).tolist()))")
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         cwd=root).stdout
    model, x, tau, contacts = case("talos", 1, GAINS[1], "local_world_aligned")
    r = contact_dynamics(model, x, tau, contacts)
    expected = np.concatenate([r.a, r.lagrangian, r.drift, r.jacobian.ravel()])
    assert relative_error(np.array(eval(out)), expected) <= 1e-12
