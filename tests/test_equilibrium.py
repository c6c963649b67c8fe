"""Quasi-static equilibrium: the balance equation against Pinocchio's RNEA with contact wrenches, the contact
constraints, infeasible supports and torque limits, bad input."""

import numpy as np
import pinocchio as pin
import pytest

import lietraj
from conftest import relative_error
from lietraj.dynamics import State
from lietraj.dynamics.contacts.contact_dynamics import Contact, contact_dynamics
from lietraj.dynamics.kinematics.kinematics import frame_id
from lietraj.dynamics.contacts.equilibrium import static_equilibrium
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.algorithms.rnea import generalized_gravity, rnea
from pin_oracle import pin_model

SOLES = {"left_sole_link": (0.1, 0.05), "right_sole_link": (0.1, 0.05)}
FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
NARROW = {"left_sole_link": (0.02, 0.001), "right_sole_link": (0.02, 0.001)}
MU = 0.7


@pytest.fixture(scope="module")
def talos():
    model = lietraj.load_robot("talos")
    return model, model.reference_state("half_sitting")


@pytest.fixture(scope="module")
def solo():
    model = lietraj.load_robot("solo12")
    return model, model.reference_state("standing")


def world_wrenches(model, pm, x, wrenches):
    """Per-body wrenches (world frame, at the world origin) and Pinocchio's per-joint LOCAL fext, from the
    contact wrenches, built with Pinocchio's frame placements."""
    q, _ = to_pinocchio(model, x)
    pd = pm.createData()
    pin.forwardKinematics(pm, pd, q)
    pin.updateFramePlacements(pm, pd)
    per_body = np.zeros((model.nb, 6))
    fext = [pin.Force.Zero() for _ in range(pm.njoints)]
    for name, w in wrenches.items():
        fid = pm.getFrameId(name)
        oMf, j = pd.oMf[fid], pm.frames[fid].parentJoint
        if w.shape == (6,):
            fw = oMf.act(pin.Force(w))
        else:  # a world-aligned force at the frame origin
            fw = pin.Force(w, np.cross(oMf.translation, w))
        per_body[j - 1] += fw.vector
        fext[j] = fext[j] + pd.oMi[j].actInv(fw)
    return per_body, fext, q


def check_contact_constraints(result, mu, sole, exact, tol):
    for name, w in result.wrenches.items():
        fx, fy, fz = w[:3]
        assert fz >= -tol
        if exact:
            assert np.hypot(fx, fy) <= mu * fz + tol
        else:
            assert max(abs(fx), abs(fy)) <= mu / np.sqrt(2) * fz + tol
        if w.shape == (6,):
            hl, hw = sole[name]
            assert abs(w[4]) <= hl * fz + tol and abs(w[3]) <= hw * fz + tol


def check_balance(model, x, result, exact, mu, sole=None):
    """g = S^T u + sum J^T w to 1e-8 (relative), the same identity through Pinocchio's RNEA with the wrenches as
    external forces and through ours, the constraints, and the torque limits."""
    assert result.feasible, result.message
    g = generalized_gravity(model, x)
    weight = model.total_mass * 9.81
    assert result.residual <= 1e-8 * np.abs(g).max()
    pm = pin_model(model.name)
    per_body, fext, q = world_wrenches(model, pm, x, result.wrenches)
    expected = np.concatenate([np.zeros(6), result.tau])
    tau_pin = pin.rnea(pm, pm.createData(), q, np.zeros(model.nv), np.zeros(model.nv), fext)
    assert relative_error(tau_pin, expected) < 1e-9
    ours = rnea(model, x, np.zeros(model.nv), per_body, fext_reference="world")
    assert relative_error(ours, expected) < 1e-9
    check_contact_constraints(result, mu, sole, exact, 1e-7 * weight)
    assert np.all(np.abs(result.tau) <= model.effort_limit + 1e-7 * weight)
    total_fz = sum(w[2] for w in result.wrenches.values())
    return total_fz


# Narrow soles and low friction make the centre-of-pressure and friction constraints active.
@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("sole, mu", [(SOLES, MU), (NARROW, 0.05)])
def test_talos_on_both_soles(talos, exact, sole, mu):
    model, x = talos
    r = static_equilibrium(model, x, ["left_sole_link", "right_sole_link"], friction=mu, sole=sole, exact_cone=exact)
    assert r.status == "optimal"
    assert set(r.wrenches) == set(sole) and all(w.shape == (6,) for w in r.wrenches.values())
    check_balance(model, x, r, exact, mu, sole)
    # The soles are flat at half_sitting: their normal forces carry the weight.
    fz = [w[2] for w in r.wrenches.values()]
    assert min(fz) > 0.3 * model.total_mass * 9.81


@pytest.mark.parametrize("exact", [True, False])
def test_solo12_on_four_feet(solo, exact):
    model, x = solo
    # A small friction coefficient makes the cone constraints active (torque minimization wants friction).
    for mu in (MU, 0.1):
        r = static_equilibrium(model, x, FEET, friction=mu, exact_cone=exact)
        assert all(w.shape == (3,) for w in r.wrenches.values())
        total_fz = check_balance(model, x, r, exact, mu)
        assert abs(total_fz - model.total_mass * 9.81) < 1e-6 * total_fz


@pytest.mark.parametrize("reference", ["local", "local_world_aligned"])
def test_wrenches_are_the_forces_of_the_contact_dynamics_at_rest(solo, talos, reference):
    """Given contact_dynamics' Contacts, the equilibrium reports its forces in their reference: the KKT solve at rest
    with the equilibrium torques finds the same forces and no acceleration."""
    for (model, x), frames, kind, sole in ((solo, FEET, "3d", None),
                                           (talos, list(SOLES), "6d", SOLES)):
        contacts = [Contact(f, kind, reference) for f in frames]
        r = static_equilibrium(model, x, contacts, sole=sole)
        names = [model.frames[frame_id(model, f)].name for f in frames]
        if reference == "local_world_aligned" and kind == "3d":
            assert all(np.array_equal(r.wrenches[n], static_equilibrium(model, x, frames, sole=sole).wrenches[n])
                       for n in names)
        tau = np.concatenate([np.zeros(6), r.tau])
        d = contact_dynamics(model, x, tau, contacts)
        weight = model.total_mass * 9.81
        assert np.abs(d.a).max() < 1e-6
        assert np.abs(d.lagrangian - np.concatenate([r.wrenches[n] for n in names])).max() < 1e-6 * weight


def test_unsupported_postures_have_no_equilibrium(talos, solo):
    model, x = solo
    for feet in (["FL_FOOT"], ["FL_FOOT", "FR_FOOT"]):  # the CoM is behind the front feet
        r = static_equilibrium(model, x, feet)
        assert not r.feasible and r.tau is None and r.wrenches is None and r.residual == np.inf
        assert r.status == "infeasible"
        assert "CoM" in r.message and "outside the support polygon" in r.message
    model, x = talos  # on the left foot only, the CoM is 8 cm to the right of the sole
    r = static_equilibrium(model, x, ["left_sole_link"], sole=SOLES)
    assert not r.feasible and "outside the support polygon" in r.message


def test_torque_limits(talos):
    model, x = talos
    weak = model.replace(effort_limit=model.effort_limit * 0.01)
    contacts = ["left_sole_link", "right_sole_link"]
    r = static_equilibrium(weak, x, contacts, sole=SOLES)
    assert not r.feasible and "torque limits" in r.message
    r = static_equilibrium(weak, x, contacts, sole=SOLES, torque_limits=False)
    assert r.feasible and np.any(np.abs(r.tau) > weak.effort_limit)


def test_bad_input(talos, solo):
    model, x = solo
    for contacts in (["NO_SUCH_FRAME"], [10_000], [], "FL_FOOT", ["FL_FOOT", "FL_FOOT"], [("FL_FOOT", "2d")]):
        with pytest.raises(ValueError):
            static_equilibrium(model, x, contacts)
    with pytest.raises(ValueError, match="at rest"):
        static_equilibrium(model, State(x.H, x.s, np.full(model.nv, 0.1)), FEET)
    with pytest.raises(ValueError, match="at rest"):
        static_equilibrium(model, State(x.H, x.s, np.zeros(model.nv + 1)), FEET)
    with pytest.raises(ValueError):
        static_equilibrium(model, State(x.H, np.full(model.n, np.nan), x.v), FEET)
    for kwargs in ({"friction": -1.0}, {"weights": (1.0, 0.0)}, {"sole": {"FL_FOOT": (0.1, -0.1)}}):
        with pytest.raises(ValueError):
            static_equilibrium(model, x, FEET, **kwargs)
    with pytest.raises(ValueError, match="sole"):  # a 6D contact needs its sole size
        static_equilibrium(model, x, [Contact(f, "6d") for f in FEET])
    model, x = talos
    with pytest.raises(ValueError):
        static_equilibrium(model, x, ["left_sole_link"], sole={"no_sole": (0.1, 0.05)})
