"""Mass matrix (CRBA) and recursive inverse mass matrix (IMMAmb) against Pinocchio, RNEA and each other."""

import os
import subprocess
import sys

import numpy as np
import pinocchio as pin
import pytest

import lietraj
from lietraj.dynamics.model.robots import _load
from conftest import ORACLE_ROBOTS, relative_error
from lietraj.dynamics.model.builder import ModelBuilder, placement, random_tree
from lietraj.dynamics.algorithms.crba import mass_matrix
from lietraj.dynamics.algorithms.inverse_mass_matrix import inverse_mass_matrix
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.algorithms.rnea import rnea
from lietraj.dynamics.lie.state import State, Trajectory
from pin_oracle import pin_model, pin_model_from

WELL_CONDITIONED = ["talos", "talos_legs", "solo12", "hyq", "anymal", "go1", "a1", "ur5", "panda"]


def symmetrized_upper(M):
    """Pinocchio's crba and computeMinverse fill the upper triangle only."""
    M = np.array(M)
    return np.triu(M) + np.triu(M, 1).T


def multi_root_tree():
    """A fixed-base tree with two roots, prismatic joints and a branch on each root."""
    b = ModelBuilder("two_roots")
    for name, parent, jtype, axis, xyz in [
        ("a1", None, "revolute", (0, 0, 1), (0.1, 0, 0)), ("a2", "a1", "prismatic", (1, 0, 0), (0, 0.2, 0)),
        ("a3", "a1", "revolute", (0, 1, 1), (0, 0, 0.3)), ("b1", None, "prismatic", (0, 0, 1), (-0.2, 0, 0)),
        ("b2", "b1", "revolute", (1, 0, 0), (0, 0, 0.1)), ("b3", "b2", "revolute", (0, 1, 0), (0.3, 0, 0)),
        ("b4", "b1", "revolute", (1, 1, 0), (0, -0.2, 0))]:
        b.add_body(name, parent, joint_type=jtype, axis=axis, joint_placement=placement(xyz, (0.3, -0.2, 0.5)),
                   mass=1.0, com=(0.05, 0.02, 0.1), inertia=np.diag([0.02, 0.03, 0.01]))
    return b.build()


TREES = {
    "floating_tree": lambda: random_tree(9, 1, floating_base=True),
    "fixed_tree": lambda: random_tree(9, 2),
    "two_roots": multi_root_tree,
}


@pytest.fixture(scope="module", params=list(TREES))
def tree(request):
    return TREES[request.param]()


# ---------------------------------------------------------------- against Pinocchio


@pytest.mark.parametrize("name", ORACLE_ROBOTS + ["talos_legs", "anymal", "go1", "a1"])
def test_mass_matrix_matches_pinocchio_crba(name, rng):
    model, pm = lietraj.load_robot(name), pin_model(name)
    pd = pm.createData()
    for _ in range(3):
        x = model.state_space.random(rng)
        M_pin = symmetrized_upper(pin.crba(pm, pd, to_pinocchio(model, x)[0]))
        assert relative_error(mass_matrix(model, x), M_pin) < 1e-10


@pytest.mark.parametrize("name", WELL_CONDITIONED)
def test_inverse_mass_matrix_matches_pinocchio_compute_minverse(name, rng):
    model, pm = lietraj.load_robot(name), pin_model(name)
    pd = pm.createData()
    for _ in range(3):
        x = model.state_space.random(rng)
        Minv_pin = symmetrized_upper(pin.computeMinverse(pm, pd, to_pinocchio(model, x)[0]))
        assert relative_error(inverse_mass_matrix(model, x), Minv_pin) < 1e-10


def test_icub_inverse_mass_matrix_is_accurate_for_its_condition_number(rng):
    """icub's tiny hand links give cond(M) up to 1e10 at random states, where an inverse is only good to
    ~cond * eps: there the residual M Minv - I is checked, scaled by cond(M)."""
    model = lietraj.load_robot("icub")
    for _ in range(3):
        x = model.state_space.random(rng)
        M, Minv = mass_matrix(model, x), inverse_mass_matrix(model, x)
        assert np.abs(M @ Minv - np.eye(model.nv)).max() < 1e-15 * np.linalg.cond(M)


def test_builder_trees_match_pinocchio(tree, rng):
    pm = pin_model_from(tree)
    pd = pm.createData()
    for _ in range(3):
        x = tree.state_space.random(rng)
        q = to_pinocchio(tree, x)[0]
        assert relative_error(mass_matrix(tree, x), symmetrized_upper(pin.crba(pm, pd, q))) < 1e-10
        assert relative_error(inverse_mass_matrix(tree, x), symmetrized_upper(pin.computeMinverse(pm, pd, q))) < 1e-10


# ---------------------------------------------------------------- identities


@pytest.mark.parametrize("name", ["talos", "panda", "solo12"])
def test_mass_matrix_columns_are_rnea_differences(name, rng):
    """M e_k = ID(q, 0, e_k) - ID(q, 0, 0): RNEA at zero velocity is M a + g."""
    model = lietraj.load_robot(name)
    x = model.state_space.random(rng)
    at_rest = State(x.H, x.s, np.zeros(model.nv))
    g = rnea(model, at_rest, np.zeros(model.nv))
    columns = np.column_stack([rnea(model, at_rest, e) - g for e in np.eye(model.nv)])
    assert relative_error(mass_matrix(model, x), columns) < 1e-10


def test_tree_mass_matrix_columns_are_rnea_differences(tree, rng):
    x = tree.state_space.random(rng)
    at_rest = State(x.H, x.s, np.zeros(tree.nv))
    g = rnea(tree, at_rest, np.zeros(tree.nv))
    columns = np.column_stack([rnea(tree, at_rest, e) - g for e in np.eye(tree.nv)])
    assert relative_error(mass_matrix(tree, x), columns) < 1e-10


@pytest.mark.parametrize("name", WELL_CONDITIONED)
def test_inverse_mass_matrix_inverts_mass_matrix(name, rng):
    model = lietraj.load_robot(name)
    for _ in range(3):
        x = model.state_space.random(rng)
        assert np.abs(mass_matrix(model, x) @ inverse_mass_matrix(model, x) - np.eye(model.nv)).max() < 1e-10


def test_tree_inverse_mass_matrix_inverts_mass_matrix(tree, rng):
    for _ in range(3):
        x = tree.state_space.random(rng)
        assert np.abs(mass_matrix(tree, x) @ inverse_mass_matrix(tree, x) - np.eye(tree.nv)).max() < 1e-10


@pytest.mark.parametrize("name", ["talos", "solo12", "panda", "icub"])
def test_mass_matrix_is_symmetric_positive_definite(name, rng):
    model = lietraj.load_robot(name)
    for _ in range(3):
        x = model.state_space.random(rng)
        M, Minv = mass_matrix(model, x), inverse_mass_matrix(model, x)
        np.testing.assert_array_equal(M, M.T)
        np.testing.assert_array_equal(Minv, Minv.T)
        np.linalg.cholesky(M)
        np.linalg.cholesky(Minv)


def test_base_block_is_the_composite_inertia_of_the_whole_robot(rng):
    """M11: total mass on the linear diagonal; its moment part about the base origin is m c of the whole robot."""
    model = lietraj.load_robot("talos")
    x = model.state_space.random(rng)
    M = mass_matrix(model, x)
    np.testing.assert_allclose(M[:3, :3], model.total_mass * np.eye(3), rtol=1e-14)
    pm = pin_model("talos")
    pd = pm.createData()
    pin.centerOfMass(pm, pd, to_pinocchio(model, x)[0])
    # -[m c]x with c the CoM in the base frame = R^T (c_world - p)
    c = x.H[:3, :3].T @ (pd.com[0] - x.H[:3, 3])
    mc = model.total_mass * c
    np.testing.assert_allclose(M[:3, 3:6], -np.array([[0, -mc[2], mc[1]], [mc[2], 0, -mc[0]], [-mc[1], mc[0], 0]]),
                               atol=1e-12)


def test_armature_is_added_on_the_diagonal(rng):
    model = lietraj.load_robot("talos")
    bare = model.replace(armature=np.zeros(model.nv))
    x = model.state_space.random(rng)
    np.testing.assert_allclose(mass_matrix(model, x) - mass_matrix(bare, x), np.diag(model.armature), atol=1e-13)
    Minv, Minv_bare = inverse_mass_matrix(model, x), inverse_mass_matrix(bare, x)
    np.testing.assert_allclose(Minv, np.linalg.inv(np.linalg.inv(Minv_bare) + np.diag(model.armature)), atol=1e-10)


def test_mass_matrix_does_not_depend_on_base_pose_or_velocity(rng):
    model = lietraj.load_robot("solo12")
    x, y = model.state_space.random(rng), model.state_space.random(rng)
    moved = State(y.H, x.s, y.v)
    np.testing.assert_array_equal(mass_matrix(model, x), mass_matrix(model, moved))
    np.testing.assert_allclose(inverse_mass_matrix(model, x), inverse_mass_matrix(model, moved), rtol=0, atol=1e-14)


# ---------------------------------------------------------------- batched form


@pytest.mark.parametrize("name", ["talos", "ur5"])
@pytest.mark.parametrize("fn", [mass_matrix, inverse_mass_matrix])
def test_batched_equals_per_state(name, fn, rng):
    model = lietraj.load_robot(name)
    states = [model.state_space.random(rng) for _ in range(4)]
    batch = fn(model, Trajectory.from_states(states))
    assert batch.shape == (4, model.nv, model.nv)
    for k, x in enumerate(states):
        np.testing.assert_array_equal(batch[k], fn(model, x))


def test_pure_python_mode_gives_the_same_matrices():
    """NUMBA_DISABLE_JIT=1 (for debugging in pure Python) gives the same results."""
    code = ("import numpy as np; from lietraj.dynamics.model.builder import random_tree;"
            "from lietraj.dynamics.algorithms.crba import mass_matrix; from lietraj.dynamics.algorithms.inverse_mass_matrix import "
            "inverse_mass_matrix; m = random_tree(6, 3, floating_base=True); x = m.state_space.random(0);"
            "print(repr((mass_matrix(m, x).tolist(), inverse_mass_matrix(m, x).tolist())))")
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    M, Minv = eval(out)
    model = random_tree(6, 3, floating_base=True)
    x = model.state_space.random(0)
    np.testing.assert_allclose(M, mass_matrix(model, x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(Minv, inverse_mass_matrix(model, x), rtol=0, atol=1e-12)


# ---------------------------------------------------------------- bad inputs


@pytest.mark.parametrize("fn", [mass_matrix, inverse_mass_matrix])
def test_bad_states_raise_value_errors(fn, rng):
    model = lietraj.load_robot("ur5")
    x = model.state_space.random(rng)
    with pytest.raises(ValueError, match=r"joint positions s must have shape \(6,\)"):
        fn(model, State(None, x.s[:5], x.v))
    with pytest.raises(ValueError, match="velocity v"):
        fn(model, State(None, x.s, np.zeros(7)))
    with pytest.raises(ValueError, match="NaN"):
        fn(model, State(None, np.full(6, np.nan), x.v))
    with pytest.raises(TypeError, match="State or a Trajectory"):
        fn(model, x.s)
    floating = lietraj.load_robot("solo12")
    y = floating.state_space.random(rng)
    H = y.H.copy()
    H[0, 0] += 0.1
    with pytest.raises(ValueError, match="rotation"):
        fn(floating, State(H, y.s, y.v))
    X = Trajectory.from_states([y, y])
    with pytest.raises(ValueError, match="same number of knots"):
        fn(floating, Trajectory(X.H, X.s, X.v[:1]))
    X.s[1, 3] = np.inf
    with pytest.raises(ValueError, match="at knot 1.*NaN or inf"):
        fn(floating, X)


def test_inverse_mass_matrix_rejects_a_massless_joint():
    """Romeo's finger joints move no mass and have no armature: M is singular."""
    with pytest.warns(UserWarning, match="move no mass"):
        model = _load.__wrapped__("romeo")
    with pytest.raises(ValueError, match="singular"):
        inverse_mass_matrix(model, model.state_space.neutral())


def test_builder_numbers_depth_first_and_minv_rejects_other_orders():
    b = ModelBuilder("added_breadth_first")
    b.add_body("a", None)
    b.add_body("b", None, joint_placement=placement((0.2, 0, 0)))
    b.add_body("c", "a", joint_placement=placement((0, 0, 0.2)))
    built = b.build()
    assert built.body_names == ("a", "c", "b")
    xb = built.state_space.random(0)
    np.testing.assert_allclose(mass_matrix(built, xb) @ inverse_mass_matrix(built, xb), np.eye(3), atol=1e-12)
    order = [0, 2, 1]  # the bodies as added: a, b, c (c child of a): not depth first
    model = built.replace(body_names=tuple(built.body_names[k] for k in order),
                          joint_names=tuple(built.joint_names[k] for k in order), parent=np.array([-1, -1, 0]),
                          **{f: getattr(built, f)[order] for f in ("joint_type", "joint_placement", "axis", "mass",
                                                                    "com", "inertia", "armature", "lower_limit",
                                                                    "upper_limit", "velocity_limit", "effort_limit",
                                                                    "continuous")})
    x = model.state_space.random(0)
    with pytest.raises(ValueError, match="depth first"):
        inverse_mass_matrix(model, x)
    at_rest = State(None, x.s, np.zeros(3))
    columns = np.column_stack([rnea(model, at_rest, e) - rnea(model, at_rest, np.zeros(3)) for e in np.eye(3)])
    assert relative_error(mass_matrix(model, x), columns) < 1e-10  # CRBA itself needs no depth-first order
