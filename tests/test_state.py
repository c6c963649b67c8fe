"""Robot state groups: layout, views, validation, trajectories, and agreement with Pinocchio.

The group axioms and the finite-difference checks of the ⊕/⊖ Jacobians run in
test_lie_groups.py, in the generic suite; this file covers what is specific to states.
"""

from __future__ import annotations

import numpy as np
import pytest

from lietraj.dynamics import se3
from lietraj.dynamics.lie.state import State, StateSpace, Trajectory

FLOATING = StateSpace(5, floating_base=True)
FIXED = StateSpace(4, floating_base=False)
SPACES = pytest.mark.parametrize("space", [FLOATING, FIXED], ids=["floating", "fixed"])


def assert_same_state(a: State, b: State, atol: float = 1e-12) -> None:
    assert (a.H is None) == (b.H is None)
    if a.H is not None:
        np.testing.assert_allclose(a.H, b.H, rtol=0.0, atol=atol)
    np.testing.assert_allclose(a.s, b.s, rtol=0.0, atol=atol)
    np.testing.assert_allclose(a.v, b.v, rtol=0.0, atol=atol)


# ---------------------------------------------------------------- layout and views


def test_dimensions_of_floating_and_fixed_spaces():
    assert (FLOATING.n, FLOATING.nv, FLOATING.ndx, FLOATING.floating_base) == (5, 11, 22, True)
    assert (FIXED.n, FIXED.nv, FIXED.ndx, FIXED.floating_base) == (4, 4, 8, False)
    with pytest.raises(ValueError, match="n_joints"):
        StateSpace(-1, True)


def test_nu_and_sdot_are_views_of_the_contiguous_velocity():
    x = FLOATING.random(0)
    x.nu[:] = 1.0
    x.sdot[:] = 2.0
    np.testing.assert_array_equal(x.v, [1.0] * 6 + [2.0] * 5)
    y = FIXED.random(0)
    y.sdot[:] = 3.0
    np.testing.assert_array_equal(y.v, [3.0] * 4)


def test_fixed_base_state_has_no_base_twist():
    with pytest.raises(AttributeError, match="fixed-base"):
        FIXED.neutral().nu


@SPACES
def test_copy_shares_no_memory(space):
    x = space.random(1)
    y = x.copy()
    y.s[:] += 1.0
    y.v[:] += 1.0
    if y.H is not None:
        y.H[0, 3] += 1.0
        assert x.H[0, 3] != y.H[0, 3]
    assert not np.any(x.s == y.s) and not np.any(x.v == y.v)


@SPACES
def test_repr_is_short(space):
    assert len(repr(space.random(2, scale=100.0))) < 120
    assert len(repr(space.random_trajectory(3, 2))) < 80


def test_tangent_vector_layout_is_base_then_joints_then_velocity():
    z = np.arange(FLOATING.ndx, dtype=float) / 100.0
    x = FLOATING.exp(z)
    np.testing.assert_allclose(x.H, se3.exp(z[:6]))
    np.testing.assert_array_equal(x.s, z[6:11])
    np.testing.assert_array_equal(x.nu, z[11:17])
    np.testing.assert_array_equal(x.sdot, z[17:])
    y = FIXED.exp(z[:8])
    np.testing.assert_array_equal(y.s, z[:4])
    np.testing.assert_array_equal(y.v, z[4:8])


def test_random_scale_scales_position_and_vectors():
    x = FLOATING.random(3, scale=0.0)
    assert not np.allclose(x.H[:3, :3], np.eye(3))  # the rotation stays uniform
    np.testing.assert_array_equal(x.H[:3, 3], 0.0)
    np.testing.assert_array_equal(x.s, 0.0)
    np.testing.assert_array_equal(x.v, 0.0)


@SPACES
def test_jacobians_are_identity_on_vector_blocks(space):
    rng = np.random.default_rng(4)
    x0, x1, z = space.random(rng), space.random(rng), rng.standard_normal(space.ndx)
    base = 6 if space.floating_base else 0
    for J, sign in (*zip(space.integrate_jacobians(x0, z), (1, 1)), *zip(space.difference_jacobians(x0, x1), (-1, 1))):
        np.testing.assert_array_equal(J[base:, base:], sign * np.eye(space.ndx - base))
        np.testing.assert_array_equal(J[:base, base:], 0.0)
        np.testing.assert_array_equal(J[base:, :base], 0.0)


def test_difference_jacobian_of_x0_is_minus_left_jacobian_inverse():
    rng = np.random.default_rng(5)
    x0, x1 = FLOATING.random(rng), FLOATING.random(rng)
    z = FLOATING.difference(x0, x1)
    J_x0, J_x1 = FLOATING.difference_jacobians(x0, x1)
    np.testing.assert_allclose(J_x0[:6, :6], -se3.left_jacobian_inverse(z[:6]))
    np.testing.assert_allclose(J_x1[:6, :6], se3.right_jacobian_inverse(z[:6]))
    # equivalently -Jr^-1(z) Ad_{exp(-z)}: the x0 perturbation carried to the frame of x1
    np.testing.assert_allclose(J_x0[:6, :6], -J_x1[:6, :6] @ se3.Ad(se3.exp(-z[:6])), atol=1e-12)


# ---------------------------------------------------------------- validation


def _with(x: State, **fields) -> State:
    y = x.copy()
    for name, value in fields.items():
        setattr(y, name, value)
    return y


@pytest.mark.parametrize(
    "space, change, message",
    [
        (FLOATING, {"s": np.zeros(4)}, r"State\.s must have shape \(5,\)"),
        (FLOATING, {"v": np.zeros(10)}, r"State\.v must have shape \(11,\)"),
        (FIXED, {"v": np.zeros(10)}, r"State\.v must have shape \(4,\)"),
        (FLOATING, {"H": np.eye(3)}, r"State\.H must have shape \(4, 4\)"),
        (FLOATING, {"H": None}, "floating base"),
        (FIXED, {"H": np.eye(4)}, "must be None"),
        (FLOATING, {"s": np.array([0.0, np.nan, 0.0, 0.0, 0.0])}, r"State\.s contains NaN"),
        (FIXED, {"v": np.array([0.0, np.inf, 0.0, 0.0])}, r"State\.v contains NaN or inf"),
        (FLOATING, {"H": np.diag([1.0, 1.0, 1.001, 1.0])}, "not orthonormal"),
        (FLOATING, {"H": np.diag([1.0, -1.0, 1.0, 1.0])}, "reflection"),
        (FLOATING, {"H": np.vstack((np.eye(4)[:3], [0.1, 0.0, 0.0, 1.0]))}, "last row"),
    ],
)
def test_check_rejects_malformed_states_naming_the_field(space, change, message):
    x = _with(space.neutral(), **change)
    with pytest.raises(ValueError, match=message):
        space.check(x)
    with pytest.raises(ValueError, match=message):
        space.integrate(x, np.zeros(space.ndx))


@SPACES
def test_tangent_vectors_of_the_wrong_size_are_rejected(space):
    x = space.neutral()
    with pytest.raises(ValueError, match=rf"z must have shape \({space.ndx},\)"):
        space.integrate(x, np.zeros(space.ndx + 1))
    with pytest.raises(ValueError, match="NaN"):
        space.exp(np.full(space.ndx, np.nan))
    with pytest.raises(ValueError, match="expected a State"):
        space.log(np.zeros(space.ndx))


# ---------------------------------------------------------------- trajectories


@SPACES
def test_trajectory_indexing_returns_views(space):
    X = space.random_trajectory(4, 6)
    x = X[2]
    x.s[:] = 7.0
    x.v[0] = 8.0
    assert np.all(X.s[2] == 7.0) and X.v[2, 0] == 8.0
    if space.floating_base:
        x.H[0, 3] = 9.0
        assert X.H[2, 0, 3] == 9.0
    assert_same_state(X[-1], X[3], atol=0.0)
    with pytest.raises(TypeError):
        X[1.5]


@SPACES
def test_trajectory_setitem_from_states_and_iteration(space):
    rng = np.random.default_rng(7)
    states = [space.random(rng) for _ in range(5)]
    X = Trajectory.from_states(states)
    assert len(X) == 5
    for x, y in zip(X, states):
        assert_same_state(x, y, atol=0.0)
    Y = space.trajectory(5)
    for k, x in enumerate(states):
        Y[k] = x
    np.testing.assert_array_equal(Y.s, X.s)
    np.testing.assert_array_equal(Y.v, X.v)
    states[0].s[:] += 1.0  # from_states copies
    assert not np.any(X.s[0] == states[0].s)


def test_trajectory_of_neutral_states():
    X = FLOATING.trajectory(3)
    assert X.H.shape == (3, 4, 4) and X.s.shape == (3, 5) and X.v.shape == (3, 11)
    for x in X:
        assert_same_state(x, FLOATING.neutral(), atol=0.0)
    assert FIXED.trajectory(3).H is None


def test_trajectory_rejects_mixed_or_empty_states():
    with pytest.raises(ValueError, match="at least one"):
        Trajectory.from_states([])
    with pytest.raises(ValueError, match="both floating-base and fixed-base"):
        Trajectory.from_states([FLOATING.neutral(), FIXED.neutral()])
    X = FLOATING.trajectory(2)
    with pytest.raises(ValueError, match="floating-base trajectory"):
        X[0] = FIXED.neutral()


@SPACES
def test_trajectory_slices_are_trajectories_of_views(space):
    X = space.random_trajectory(6, 12)
    Y = X[1:4]
    assert isinstance(Y, Trajectory) and len(Y) == 3
    Y.s[0, 0] = 5.0
    Y.v[2, 1] = 6.0
    assert X.s[1, 0] == 5.0 and X.v[3, 1] == 6.0
    if space.floating_base:
        Y.H[1, 2, 3] = 7.0
        assert X.H[2, 2, 3] == 7.0
    assert_same_state(X[::2][1], X[2], atol=0.0)
    assert len(X[4:]) == 2 and len(X[6:]) == 0
    X[4:6] = X[0:2]
    assert_same_state(X[5], X[1], atol=0.0)
    with pytest.raises(ValueError, match="expected a Trajectory"):
        X[0:1] = X[0]


@SPACES
def test_trajectory_indexed_by_knots_is_a_copy(space):
    X = space.random_trajectory(5, 13)
    Y = X[np.array([4, 0, 4])]
    assert len(Y) == 3
    assert_same_state(Y[0], X[4], atol=0.0)
    assert_same_state(Y[1], X[0], atol=0.0)
    Y.s[:] = 0.0
    assert not np.any(X.s[4] == 0.0)
    for key in (np.zeros((2, 2), dtype=int), np.array([0.5]), (1, 2)):
        with pytest.raises(TypeError, match="indexed by a knot"):
            X[key]


@SPACES
def test_trajectory_copy_shares_no_memory(space):
    X = space.random_trajectory(3, 14)
    Y = X.copy()
    assert_same_state(Y[2], X[2], atol=0.0)
    Y.s[:] += 1.0
    Y.v[:] += 1.0
    assert not np.any(X.s == Y.s) and not np.any(X.v == Y.v)
    if space.floating_base:
        Y.H[:, 0, 3] += 1.0
        assert not np.any(X.H[:, 0, 3] == Y.H[:, 0, 3])


@SPACES
def test_repeat_makes_independent_copies_of_a_state(space):
    x = space.random(15)
    X = Trajectory.repeat(x, 4)
    assert len(X) == 4 and X.s.dtype == np.float64 and X.s.flags.c_contiguous
    for y in X:
        assert_same_state(y, x, atol=0.0)
    X.s[0] += 1.0
    assert np.array_equal(X.s[1], x.s) and not np.any(X.s[0] == x.s)
    assert len(Trajectory.repeat(x, 0)) == 0
    with pytest.raises(ValueError, match="N must be >= 0"):
        Trajectory.repeat(x, -1)


@SPACES
def test_finiteness_names_the_first_bad_knot(space):
    X = space.random_trajectory(5, 16)
    assert X.is_finite() and X.first_non_finite() is None
    X.v[3, -1] = np.inf
    assert not X.is_finite() and X.first_non_finite() == 3
    X.s[1, 0] = np.nan
    assert X.first_non_finite() == 1
    if space.floating_base:
        Y = space.random_trajectory(3, 17)
        Y.H[2, 0, 3] = np.nan
        assert not Y.is_finite() and Y.first_non_finite() == 2
    assert space.trajectory(0).is_finite() and space.trajectory(0).first_non_finite() is None


@SPACES
def test_batched_integrate_and_difference_match_knotwise(space):
    rng = np.random.default_rng(8)
    X0, X1 = space.random_trajectory(6, rng), space.random_trajectory(6, rng)
    Z = space.difference_trajectory(X0, X1)
    assert Z.shape == (6, space.ndx)
    for k in range(6):
        np.testing.assert_array_equal(Z[k], space.difference(X0[k], X1[k]))
    X = space.integrate_trajectory(X0, Z)
    for k in range(6):
        assert_same_state(X[k], X1[k])
    with pytest.raises(ValueError, match=r"Z must have shape \(6,"):
        space.integrate_trajectory(X0, Z[:5])
    with pytest.raises(ValueError, match="different lengths"):
        space.difference_trajectory(X0, space.trajectory(5))


# ---------------------------------------------------------------- Pinocchio as oracle


def pinocchio_free_flyer_model(pin, n_joints: int):
    """Free flyer followed by a chain of revolute-z joints: nq = 7 + n, nv = 6 + n."""
    model = pin.Model()
    parent = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "ff")
    for i in range(n_joints):
        placement = pin.SE3(np.eye(3), np.array([0.1, 0.0, 0.2]))
        parent = model.addJoint(parent, pin.JointModelRZ(), placement, f"j{i}")
    return model


def to_pinocchio_q(pin, x: State) -> np.ndarray:
    """Pinocchio configuration [p, quaternion (x, y, z, w), s] of a floating-base state."""
    return np.concatenate((x.H[:3, 3], pin.Quaternion(x.H[:3, :3]).coeffs(), x.s))


@pytest.fixture(scope="module")
def pin_setup():
    pin = pytest.importorskip("pinocchio")
    return pin, pinocchio_free_flyer_model(pin, FLOATING.n)


def configuration_tangent(z: np.ndarray) -> np.ndarray:
    return z[: FLOATING.nv]


def test_difference_matches_pinocchio(pin_setup):
    pin, model = pin_setup
    rng = np.random.default_rng(9)
    for _ in range(10):
        x0, x1 = FLOATING.random(rng), FLOATING.random(rng)
        expected = pin.difference(model, to_pinocchio_q(pin, x0), to_pinocchio_q(pin, x1))
        np.testing.assert_allclose(configuration_tangent(FLOATING.difference(x0, x1)), expected, atol=1e-12)


def test_integrate_matches_pinocchio(pin_setup):
    pin, model = pin_setup
    rng = np.random.default_rng(10)
    for _ in range(10):
        x, dq = FLOATING.random(rng), rng.standard_normal(FLOATING.nv)
        y = FLOATING.integrate(x, np.concatenate((dq, np.zeros(FLOATING.nv))))
        q = pin.integrate(model, to_pinocchio_q(pin, x), dq)
        np.testing.assert_allclose(y.H, pin.XYZQUATToSE3(q[:7]).homogeneous, atol=1e-12)
        np.testing.assert_allclose(y.s, q[7:], atol=1e-12)


def test_integrate_and_difference_jacobians_match_pinocchio(pin_setup):
    pin, model = pin_setup
    rng = np.random.default_rng(11)
    nv = FLOATING.nv
    for _ in range(10):
        x0, x1 = FLOATING.random(rng), FLOATING.random(rng)
        dq = rng.standard_normal(nv)
        q0, q1 = to_pinocchio_q(pin, x0), to_pinocchio_q(pin, x1)
        J_x0, J_x1 = FLOATING.difference_jacobians(x0, x1)
        np.testing.assert_allclose(J_x0[:nv, :nv], pin.dDifference(model, q0, q1, pin.ArgumentPosition.ARG0), atol=1e-11)
        np.testing.assert_allclose(J_x1[:nv, :nv], pin.dDifference(model, q0, q1, pin.ArgumentPosition.ARG1), atol=1e-11)
        J_x, J_z = FLOATING.integrate_jacobians(x0, np.concatenate((dq, np.zeros(nv))))
        np.testing.assert_allclose(J_x[:nv, :nv], pin.dIntegrate(model, q0, dq, pin.ArgumentPosition.ARG0), atol=1e-11)
        np.testing.assert_allclose(J_z[:nv, :nv], pin.dIntegrate(model, q0, dq, pin.ArgumentPosition.ARG1), atol=1e-11)
