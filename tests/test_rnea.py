"""RNEA, generalized gravity and nonlinear effects against Pinocchio, with identities and bad input."""

import numpy as np
import pinocchio as pin
import pytest

import lietraj
from conftest import ORACLE_ROBOTS, relative_error
from lietraj.dynamics import Trajectory
from lietraj.dynamics.model.builder import ModelBuilder, random_tree
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.algorithms.crba import mass_matrix
from lietraj.dynamics.algorithms.rnea import generalized_gravity, nonlinear_effects, rnea
from pin_oracle import pin_model, pin_model_from


def pin_fext(pm, fext):
    """Our per-body fext as Pinocchio's per-joint list (joint k + 1 holds body k)."""
    return [pin.Force.Zero()] + [pin.Force(f) for f in fext]


@pytest.mark.parametrize("name", ORACLE_ROBOTS)
def test_rnea_matches_pinocchio(name, rng):
    model, pm = lietraj.load_robot(name), pin_model(name)
    pd = pm.createData()
    for _ in range(5):
        x = model.state_space.random(rng)
        a, fext = rng.normal(size=model.nv), rng.normal(size=(model.nb, 6))
        q, v = to_pinocchio(model, x)
        assert relative_error(rnea(model, x, a), pin.rnea(pm, pd, q, v, a)) < 1e-10
        assert relative_error(rnea(model, x, a, fext), pin.rnea(pm, pd, q, v, a, pin_fext(pm, fext))) < 1e-10
        assert relative_error(generalized_gravity(model, x), pin.computeGeneralizedGravity(pm, pd, q)) < 1e-10
        assert relative_error(nonlinear_effects(model, x), pin.nonLinearEffects(pm, pd, q, v)) < 1e-10


@pytest.mark.parametrize("floating", [False, True])
def test_rnea_on_random_trees_matches_pinocchio(floating, rng):
    for seed in range(3):
        model = random_tree(10, seed, floating_base=floating)
        pm = pin_model_from(model)
        pd = pm.createData()
        x, a = model.state_space.random(rng), rng.normal(size=model.nv)
        q, v = to_pinocchio(model, x)
        assert relative_error(rnea(model, x, a), pin.rnea(pm, pd, q, v, a)) < 1e-10


def test_batched_rnea_equals_per_state(rng):
    for name in ["talos", "ur5"]:
        model = lietraj.load_robot(name)
        X = model.state_space.random_trajectory(7, rng)
        A, F = rng.normal(size=(7, model.nv)), rng.normal(size=(7, model.nb, 6))
        TAU, TAUF = rnea(model, X, A), rnea(model, X, A, F)
        for k in range(7):
            np.testing.assert_array_equal(TAU[k], rnea(model, X[k], A[k]))
            np.testing.assert_array_equal(TAUF[k], rnea(model, X[k], A[k], F[k]))
        np.testing.assert_array_equal(generalized_gravity(model, X)[3], generalized_gravity(model, X[3]))


def test_power_balance_without_gravity(rng):
    """With g = 0 and no external force, d/dt (kinetic energy) = v^T tau along the motion."""
    model = random_tree(8, 1, floating_base=True).replace(gravity=np.zeros(3))
    space = model.state_space
    x, a = space.random(rng), rng.normal(size=model.nv)
    tau = rnea(model, x, a)

    def energy(y):
        return 0.5 * y.v @ mass_matrix(model, y) @ y.v

    dt = 1e-6
    z = np.concatenate([x.v, a]) * dt  # x(t + dt) = x exp(dt [v; a]) to first order
    dE = (energy(space.integrate(x, z)) - energy(space.integrate(x, -z))) / (2 * dt)
    assert dE == pytest.approx(x.v @ tau, rel=1e-6)


def test_static_body_on_vertical_prismatic_joint_is_held_up():
    """Gravity sign: holding 1 kg still on a vertical slider takes +9.81 N."""
    b = ModelBuilder("slider")
    b.add_body("cart", None, joint_type="prismatic", axis=(0, 0, 1), mass=1.0)
    model = b.build()
    tau = rnea(model, model.state_space.neutral(), np.zeros(1))
    assert tau[0] == pytest.approx(9.81)


def test_bad_inputs_raise_clear_errors():
    model = lietraj.load_robot("solo12")
    x = model.state_space.neutral()
    with pytest.raises(ValueError, match=r"acceleration must have shape \(18,\)"):
        rnea(model, x, np.zeros(17))
    with pytest.raises(ValueError, match="NaN"):
        rnea(model, x, np.full(18, np.nan))
    bad = x.copy()
    bad.s[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        rnea(model, bad, np.zeros(18))
    bad = x.copy()
    bad.H[:3, :3] *= 1.1
    with pytest.raises(ValueError, match="not a rotation matrix"):
        rnea(model, bad, np.zeros(18))
    bad = x.copy()
    bad.s = np.zeros(3)
    with pytest.raises(ValueError, match=r"joint positions s must have shape \(12,\)"):
        rnea(model, bad, np.zeros(18))
    with pytest.raises(ValueError, match="external wrenches"):
        rnea(model, x, np.zeros(18), np.zeros((3, 6)))
    X = model.state_space.random_trajectory(4, 0)
    X.v[2, 0] = np.inf
    with pytest.raises(ValueError, match="at knot 2"):
        rnea(model, X, np.zeros((4, 18)))
    with pytest.raises(ValueError, match="same number of knots"):
        rnea(model, model.state_space.random_trajectory(4, 0), np.zeros((3, 18)))
    with pytest.raises(TypeError, match="expected a State or a Trajectory"):
        rnea(model, (x.H, x.s, x.v), np.zeros(18))


def test_fixed_base_trajectory():
    model = lietraj.load_robot("ur5")
    X = model.state_space.random_trajectory(3, 0)
    assert isinstance(X, Trajectory) and X.H is None
    assert rnea(model, X, np.zeros((3, 6))).shape == (3, 6)
