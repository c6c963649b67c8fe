"""Group axioms, exp/log accuracy and Jacobians of SO(3), SE(3) and the robot state groups.

The groups share one interface (``lie.group.LieGroup``), so the axioms, the round trips, every Jacobian and the
agreement of the compiled forms with the plain ones are tested once, generically, over every group (jaxlie's
habit); every Jacobian is checked against central finite differences on the group (perturb as ``x exp(h e_k)``,
measure with ``log``). Pinocchio is the oracle where it has the function.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest
import scipy.linalg

from lietraj._jit import helper, kernel
from lietraj.dynamics import se3, so3
from lietraj.dynamics.lie.group import LieGroup
from lietraj.dynamics.lie.state import State, StateSpace, Trajectory, tangent_difference, tangent_integrate

FD_STEP = 1e-6
FD_RTOL = 1e-7


@dataclass(frozen=True)
class Group:
    """A group of the common interface (``ops``, whose operations the adapter forwards) and what the generic suite
    needs besides: the tangent size, where ``w`` sits in a tangent vector, a flat view of an element, and the
    compiled forms of its operations with the plain signatures."""

    name: str
    ops: LieGroup
    dim: int
    rotation: slice | None
    flat: Callable[[Any], np.ndarray]
    compiled: dict[str, Callable]

    def __getattr__(self, name: str):
        return getattr(self.ops, name)

    def sample(self, rng: np.random.Generator):
        return self.ops.random(rng)


# ---------------------------------------------------------------- compiled forms, run through kernels


@helper
def _store9(out, t):
    for r in range(3):
        for c in range(3):
            out[r, c] = t[3 * r + c]


@kernel
def _so3_forms(W, R, E, L, JR, JRI):
    """exp3, jexp3, jlog3 of the rows of W and log3 of the rotations R, compiled."""
    for k in range(W.shape[0]):
        w = (W[k, 0], W[k, 1], W[k, 2])
        _store9(E[k], so3.exp3(w))
        _store9(JR[k], so3.jexp3(w))
        _store9(JRI[k], so3.jlog3(w))
        l = so3.log3((R[k, 0, 0], R[k, 0, 1], R[k, 0, 2], R[k, 1, 0], R[k, 1, 1], R[k, 1, 2], R[k, 2, 0], R[k, 2, 1],
                      R[k, 2, 2]))
        L[k, 0], L[k, 1], L[k, 2] = l[0], l[1], l[2]


def so3_compiled(index: int, w=np.zeros(3), R=np.eye(3)) -> np.ndarray:
    out = (np.empty((1, 3, 3)), np.empty((1, 3)), np.empty((1, 3, 3)), np.empty((1, 3, 3)))
    _so3_forms(np.array([w], dtype=float), np.array([R], dtype=float), *out)
    return out[index][0]


@kernel
def _pose_exp_kernel(H, xi, out, work):
    se3.pose_exp(H, xi, out, work)


def se3_integrate_compiled(H, xi) -> np.ndarray:
    out = np.empty((4, 4))
    _pose_exp_kernel(np.asarray(H, dtype=float), np.asarray(xi, dtype=float), out, np.empty((4, 4)))
    return out


def se3_difference_compiled(H0, H1, jacobian: bool = False):
    Z, J = np.empty((1, 6)), np.empty((1, 6, 6))
    se3.difference_batch(np.array([H0], dtype=float), np.array([H1], dtype=float), jacobian, Z, J)
    return J[0] if jacobian else Z[0]


SO3_COMPILED = {
    "exp": lambda w: so3_compiled(0, w=w),
    "log": lambda R: so3_compiled(1, R=R),
    "right_jacobian": lambda w: so3_compiled(2, w=w),
    "right_jacobian_inverse": lambda w: so3_compiled(3, w=w),
}
SE3_COMPILED = {
    "exp": lambda xi: se3.exp_blocks(xi[None], False)[0][0],
    "log": lambda H: se3_difference_compiled(np.eye(4), H),
    "integrate": se3_integrate_compiled,
    "difference": se3_difference_compiled,
    "integrate_jacobians": lambda H, xi: tuple(block[0] for block in se3.exp_blocks(xi[None])[1:]),
    "right_jacobian": lambda xi: se3.exp_blocks(xi[None])[2][0],
    "right_jacobian_inverse": lambda xi: se3_difference_compiled(np.eye(4), se3.exp(xi), jacobian=True),
}


def state_compiled(space: StateSpace) -> dict[str, Callable]:
    def integrate(x, z):
        return tangent_integrate(Trajectory.repeat(x, 1), z[None])[0]

    def difference(x0, x1):
        return tangent_difference(Trajectory.repeat(x0, 1), Trajectory.repeat(x1, 1))[0]

    return {"exp": lambda z: integrate(space.identity(), z), "log": lambda x: difference(space.identity(), x),
            "integrate": integrate, "difference": difference}


def flat_state(x: State) -> np.ndarray:
    return np.concatenate(([] if x.H is None else x.H.ravel(), x.s, x.v))


def state_group(name: str, space: StateSpace) -> Group:
    return Group(name, space, space.ndx, slice(3, 6) if space.floating_base else None, flat_state,
                 state_compiled(space))


SO3 = Group("SO3", so3, 3, slice(0, 3), np.ravel, SO3_COMPILED)
SE3 = Group("SE3", se3, 6, slice(3, 6), np.ravel, SE3_COMPILED)
GROUPS = [SO3, SE3, state_group("floating-n5", StateSpace(5, True)), state_group("fixed-n4", StateSpace(4, False))]
MATRIX_GROUPS = [(SO3, so3), (SE3, se3)]

all_groups = pytest.mark.parametrize("group", GROUPS, ids=lambda g: g.name)
matrix_groups = pytest.mark.parametrize("group, module", MATRIX_GROUPS, ids=["SO3", "SE3"])


def sample_tangent(group: Group, rng: np.random.Generator, max_angle: float = 3.0) -> np.ndarray:
    """Random tangent vector whose rotation part (if any) has norm in (0, max_angle) < pi."""
    z = rng.standard_normal(group.dim)
    if group.rotation is not None:
        w = z[group.rotation]
        w *= rng.uniform(0.0, max_angle) / np.linalg.norm(w)
    return z


def finite_difference(f: Callable[[np.ndarray], np.ndarray], dim: int) -> np.ndarray:
    """Central differences of ``f`` at 0, one tangent direction per column."""
    columns = []
    for e in np.eye(dim):
        columns.append((f(FD_STEP * e) - f(-FD_STEP * e)) / (2.0 * FD_STEP))
    return np.column_stack(columns)


def assert_relative(actual: np.ndarray, expected: np.ndarray, rtol: float = FD_RTOL) -> None:
    error = np.linalg.norm(actual - expected)
    assert error <= rtol * np.linalg.norm(expected), f"relative error {error / np.linalg.norm(expected):.3g} > {rtol:g}"


def assert_same_element(group: Group, a, b, atol: float = 1e-12) -> None:
    np.testing.assert_allclose(group.flat(a), group.flat(b), rtol=0.0, atol=atol)


# ---------------------------------------------------------------- generic group properties


@all_groups
def test_exp_log_roundtrip(group):
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = group.sample(rng)
        assert_same_element(group, group.exp(group.log(x)), x)


@all_groups
def test_log_inverts_exp(group):
    rng = np.random.default_rng(1)
    for _ in range(20):
        z = sample_tangent(group, rng)
        np.testing.assert_allclose(group.log(group.exp(z)), z, rtol=0.0, atol=1e-12)


@all_groups
def test_exp_of_zero_is_identity_and_log_of_identity_is_zero(group):
    assert_same_element(group, group.exp(np.zeros(group.dim)), group.identity(), atol=0.0)
    np.testing.assert_array_equal(group.log(group.identity()), np.zeros(group.dim))


@all_groups
def test_compose_with_inverse_is_identity(group):
    rng = np.random.default_rng(2)
    for _ in range(10):
        x = group.sample(rng)
        assert_same_element(group, group.compose(x, group.inverse(x)), group.identity())
        assert_same_element(group, group.compose(group.inverse(x), x), group.identity())


@all_groups
def test_compose_is_associative(group):
    rng = np.random.default_rng(3)
    for _ in range(10):
        a, b, c = group.sample(rng), group.sample(rng), group.sample(rng)
        assert_same_element(
            group, group.compose(group.compose(a, b), c), group.compose(a, group.compose(b, c)), atol=1e-11
        )


@all_groups
def test_integrate_difference_roundtrip(group):
    rng = np.random.default_rng(4)
    for _ in range(10):
        x0, x1 = group.sample(rng), group.sample(rng)
        assert_same_element(group, group.integrate(x0, group.difference(x0, x1)), x1)
        z = sample_tangent(group, rng)
        np.testing.assert_allclose(group.difference(x0, group.integrate(x0, z)), z, rtol=0.0, atol=1e-12)


@all_groups
def test_integrate_is_compose_with_exp(group):
    rng = np.random.default_rng(5)
    x, z = group.sample(rng), sample_tangent(group, rng)
    assert_same_element(group, group.integrate(x, z), group.compose(x, group.exp(z)))


@all_groups
def test_integrate_jacobians_match_finite_differences(group):
    rng = np.random.default_rng(6)
    for _ in range(5):
        x, z = group.sample(rng), sample_tangent(group, rng)
        J_x, J_z = group.integrate_jacobians(x, z)
        y = group.integrate(x, z)
        assert_relative(J_x, finite_difference(lambda d: group.difference(y, group.integrate(group.integrate(x, d), z)), group.dim))
        assert_relative(J_z, finite_difference(lambda d: group.difference(y, group.integrate(x, z + d)), group.dim))


@all_groups
def test_difference_jacobians_match_finite_differences(group):
    rng = np.random.default_rng(7)
    for _ in range(5):
        # x1 = x0 ⊕ z with |w| < 3 keeps the perturbed logs away from the cut at pi
        x0 = group.sample(rng)
        x1 = group.integrate(x0, sample_tangent(group, rng))
        J_x0, J_x1 = group.difference_jacobians(x0, x1)
        assert_relative(J_x0, finite_difference(lambda d: group.difference(group.integrate(x0, d), x1), group.dim))
        assert_relative(J_x1, finite_difference(lambda d: group.difference(x0, group.integrate(x1, d)), group.dim))


# ---------------------------------------------------------------- Jacobians of exp, adjoint


@all_groups
def test_right_jacobian_matches_finite_differences(group):
    rng = np.random.default_rng(8)
    for _ in range(5):
        z = sample_tangent(group, rng)
        X_inv = group.inverse(group.exp(z))
        assert_relative(group.right_jacobian(z),
                        finite_difference(lambda d: group.log(group.compose(X_inv, group.exp(z + d))), group.dim))


@all_groups
def test_left_jacobian_matches_finite_differences(group):
    rng = np.random.default_rng(9)
    for _ in range(5):
        z = sample_tangent(group, rng)
        X_inv = group.inverse(group.exp(z))
        assert_relative(group.left_jacobian(z),
                        finite_difference(lambda d: group.log(group.compose(group.exp(z + d), X_inv)), group.dim))


@all_groups
def test_right_jacobian_inverse_matches_finite_differences(group):
    rng = np.random.default_rng(10)
    for _ in range(5):
        z = sample_tangent(group, rng)
        X = group.exp(z)
        assert_relative(group.right_jacobian_inverse(z),
                        finite_difference(lambda d: group.log(group.compose(X, group.exp(d))), group.dim))


@all_groups
def test_left_jacobian_inverse_matches_finite_differences(group):
    rng = np.random.default_rng(11)
    for _ in range(5):
        z = sample_tangent(group, rng)
        X = group.exp(z)
        assert_relative(group.left_jacobian_inverse(z),
                        finite_difference(lambda d: group.log(group.compose(group.exp(d), X)), group.dim))


@all_groups
def test_jacobian_inverses_are_inverses_up_to_pi(group):
    rng = np.random.default_rng(12)
    for angle in (0.0, 1e-9, 1e-3, 0.5, 2.0, math.pi - 1e-9, math.pi):
        z = sample_tangent(group, rng)
        if group.rotation is not None:
            z[group.rotation] *= angle / np.linalg.norm(z[group.rotation])
        identity = np.eye(group.dim)
        np.testing.assert_allclose(group.right_jacobian_inverse(z) @ group.right_jacobian(z), identity, atol=1e-13)
        np.testing.assert_allclose(group.left_jacobian_inverse(z) @ group.left_jacobian(z), identity, atol=1e-13)


@all_groups
def test_left_jacobian_is_adjoint_times_right_jacobian(group):
    rng = np.random.default_rng(13)
    for _ in range(5):
        z = sample_tangent(group, rng)
        np.testing.assert_allclose(group.left_jacobian(z), group.Ad(group.exp(z)) @ group.right_jacobian(z), atol=1e-14)
        np.testing.assert_allclose(group.right_jacobian(z), group.left_jacobian(-z), atol=1e-15)


@all_groups
def test_adjoint_matches_finite_differences(group):
    rng = np.random.default_rng(15)
    for _ in range(5):
        x = group.sample(rng)
        x_inv = group.inverse(x)
        assert_relative(group.Ad(x),
                        finite_difference(lambda d: group.log(group.compose(group.compose(x, group.exp(d)), x_inv)),
                                          group.dim))


@all_groups
def test_implements_the_common_interface(group):
    assert isinstance(group.ops, LieGroup)
    assert_same_element(group, group.identity(), group.exp(np.zeros(group.dim)), atol=0.0)


# ---------------------------------------------------------------- compiled forms equal the plain ones


def _arguments(group: Group, operation: str, rng: np.random.Generator) -> tuple:
    """Random arguments of a group operation, by its signature in the interface."""
    if operation == "log":
        return (group.sample(rng),)
    if operation in ("integrate", "integrate_jacobians"):
        return group.sample(rng), sample_tangent(group, rng)
    if operation == "difference":
        x0 = group.sample(rng)
        return x0, group.integrate(x0, sample_tangent(group, rng))
    return (sample_tangent(group, rng),)


def _flat(group: Group, value) -> np.ndarray:
    if isinstance(value, tuple):
        return np.concatenate([np.ravel(v) for v in value])
    return group.flat(value) if isinstance(value, State) else np.ravel(value)


@pytest.mark.parametrize("group, operation", [(g, op) for g in GROUPS for op in g.compiled],
                         ids=[f"{g.name}-{op}" for g in GROUPS for op in g.compiled])
def test_compiled_form_equals_plain_form(group, operation):
    rng = np.random.default_rng(31)
    for _ in range(10):
        args = _arguments(group, operation, rng)
        plain = _flat(group, getattr(group, operation)(*args))
        compiled = _flat(group, group.compiled[operation](*args))
        np.testing.assert_allclose(compiled, plain, rtol=0.0, atol=1e-14 * max(1.0, np.abs(plain).max()))


def test_compiled_exp_of_a_diverged_twist_is_nan_not_an_error():
    assert all(math.isnan(s) for s in so3.exp_coefficients(math.inf))
    E, PHI, K = se3.exp_blocks(np.array([[0.0, 0.0, 0.0, math.inf, 0.0, 0.0]]))
    assert np.isnan(E[0, :3, :3]).all() and np.isnan(K[0, :3, :3]).all()


@pytest.mark.parametrize("angle", [1e-10, 1e-6, 1e-3, 1e-2, 0.1, 0.4999999, 0.5, 0.5000001, 1.0, 2.0])
def test_se3_left_jacobian_equals_its_power_series_across_series_threshold(angle):
    # Jl(xi) = sum_k ad_xi^k / (k+1)!, summed term by term: an independent, cancellation-free
    # reference for the coupling block Q, whose closed form cancels catastrophically at small angles.
    rng = np.random.default_rng(14)
    xi = rng.standard_normal(6)
    xi[3:] *= angle / np.linalg.norm(xi[3:])
    A = se3.ad(xi)
    reference, power = np.zeros((6, 6)), np.eye(6)
    for k in range(40):
        reference += power / math.factorial(k + 1)
        power = power @ A
    assert_relative(se3.left_jacobian(xi), reference, rtol=1e-15)
    assert_relative(se3.exp(xi), scipy.linalg.expm(se3.hat(xi)), rtol=1e-15)


def test_adjoint_of_exp_is_expm_of_ad():
    rng = np.random.default_rng(16)
    for _ in range(10):
        xi = sample_tangent(SE3, rng)
        np.testing.assert_allclose(se3.Ad(se3.exp(xi)), scipy.linalg.expm(se3.ad(xi)), atol=1e-13)


def test_ad_is_the_lie_bracket():
    rng = np.random.default_rng(17)
    for _ in range(10):
        x, y = rng.standard_normal(6), rng.standard_normal(6)
        bracket = se3.hat(x) @ se3.hat(y) - se3.hat(y) @ se3.hat(x)
        np.testing.assert_allclose(se3.ad(x) @ y, se3.vee(bracket), atol=1e-14)


def test_adjoint_is_a_homomorphism():
    rng = np.random.default_rng(18)
    A, B = se3.random(rng), se3.random(rng)
    np.testing.assert_allclose(se3.Ad(A @ B), se3.Ad(A) @ se3.Ad(B), atol=1e-13)
    np.testing.assert_allclose(se3.Ad(se3.inverse(A)), np.linalg.inv(se3.Ad(A)), atol=1e-12)


@matrix_groups
def test_hat_and_vee_are_inverse(group, module):
    rng = np.random.default_rng(19)
    z = rng.standard_normal(group.dim)
    np.testing.assert_array_equal(module.vee(module.hat(z)), z)
    X = module.hat(z)
    np.testing.assert_array_equal(module.hat(module.vee(X)), X)


def test_so3_hat_is_the_cross_product():
    rng = np.random.default_rng(20)
    w, u = rng.standard_normal(3), rng.standard_normal(3)
    np.testing.assert_allclose(so3.hat(w) @ u, np.cross(w, u), atol=1e-15)


def test_se3_act_applies_the_homogeneous_transform():
    rng = np.random.default_rng(21)
    H, points = se3.random(rng), rng.standard_normal((7, 3))
    expected = (H @ np.column_stack((points, np.ones(7))).T).T[:, :3]
    np.testing.assert_allclose(se3.act(H, points), expected, atol=1e-14)
    np.testing.assert_allclose(se3.act(H, points[2]), expected[2], atol=1e-14)


# ---------------------------------------------------------------- exp/log edge cases


def random_unit_vectors(rng: np.random.Generator, count: int) -> np.ndarray:
    u = rng.standard_normal((count, 3))
    return u / np.linalg.norm(u, axis=1, keepdims=True)


@pytest.mark.parametrize("angle", [1e-10, 1e-6, 1e-3, 0.5, math.pi / 2, 3.0, math.pi - 1e-9, math.pi - 1e-12])
def test_so3_log_inverts_exp_near_zero_and_near_pi(angle):
    rng = np.random.default_rng(22)
    for n in random_unit_vectors(rng, 50):
        w = angle * n
        R = so3.exp(w)
        np.testing.assert_allclose(R, scipy.linalg.expm(so3.hat(w)), rtol=0.0, atol=4e-15)
        assert np.linalg.norm(so3.log(R) - w) <= 1e-15 * angle


@pytest.mark.parametrize("angle", [1e-10, 1e-6, 1e-3, 0.5, 3.0, math.pi - 1e-9])
def test_se3_log_inverts_exp_near_zero_and_near_pi(angle):
    rng = np.random.default_rng(23)
    for n in random_unit_vectors(rng, 20):
        xi = np.concatenate((rng.standard_normal(3), angle * n))
        np.testing.assert_allclose(se3.log(se3.exp(xi)), xi, rtol=0.0, atol=4e-15)


def test_so3_log_at_exactly_pi_returns_plus_or_minus_the_rotation_vector():
    rng = np.random.default_rng(24)
    axes = np.vstack((np.eye(3), random_unit_vectors(rng, 50)))
    for n in axes:
        w = math.pi * n
        R = so3.exp(w)
        log_R = so3.log(R)
        assert abs(np.linalg.norm(log_R) - math.pi) < 1e-14
        assert min(np.linalg.norm(log_R - w), np.linalg.norm(log_R + w)) < 1e-14
        np.testing.assert_allclose(so3.exp(log_R), R, atol=1e-15)
    # a half turn given exactly, without going through exp
    log_R = so3.log(np.diag([1.0, -1.0, -1.0]))
    np.testing.assert_allclose(np.abs(log_R), [math.pi, 0.0, 0.0], atol=1e-15)


def test_se3_log_at_exactly_pi_reproduces_the_transform():
    rng = np.random.default_rng(25)
    for n in random_unit_vectors(rng, 20):
        H = se3.exp(np.concatenate((rng.standard_normal(3), math.pi * n)))
        np.testing.assert_allclose(se3.exp(se3.log(H)), H, atol=1e-14)


def test_random_rotations_are_uniform_in_mean():
    rng = np.random.default_rng(26)
    samples = np.array([so3.random(rng) for _ in range(4000)])
    assert all(so3.is_rotation(R, 1e-12) for R in samples[:100])
    np.testing.assert_allclose(samples.mean(axis=0), np.zeros((3, 3)), atol=0.05)  # Haar: E[R] = 0


def test_project_to_rotation_returns_the_nearest_rotation():
    rng = np.random.default_rng(27)
    R = so3.random(rng)
    noisy = R + 1e-3 * rng.standard_normal((3, 3))
    projected = so3.project_to_rotation(noisy)
    assert so3.is_rotation(projected, 1e-13)
    np.testing.assert_allclose(projected, R, atol=5e-3)
    # No other rotation near it is closer to the noisy matrix.
    for _ in range(20):
        other = projected @ so3.exp(1e-4 * rng.standard_normal(3))
        assert np.linalg.norm(noisy - projected) <= np.linalg.norm(noisy - other)
    assert np.linalg.det(so3.project_to_rotation(-R)) > 0.0


def test_is_rotation_rejects_non_orthonormal_and_reflections():
    R = so3.random(np.random.default_rng(28))
    assert so3.is_rotation(R)
    assert not so3.is_rotation(1.01 * R)
    assert not so3.is_rotation(-R)
    assert not so3.is_rotation(np.full((3, 3), np.nan))
    assert not so3.is_rotation(np.eye(4))


# ---------------------------------------------------------------- Pinocchio as oracle


def test_so3_matches_pinocchio_exp3_log3_jexp3_jlog3():
    pin = pytest.importorskip("pinocchio")
    rng = np.random.default_rng(29)
    for _ in range(20):
        w = sample_tangent(SO3, rng)
        R = so3.exp(w)
        np.testing.assert_allclose(R, pin.exp3(w), atol=1e-14)
        np.testing.assert_allclose(so3.log(R), pin.log3(R), atol=1e-13)
        np.testing.assert_allclose(so3.right_jacobian(w), pin.Jexp3(w), atol=1e-13)
        np.testing.assert_allclose(so3.right_jacobian_inverse(w), pin.Jlog3(R), atol=1e-13)


def test_se3_matches_pinocchio_exp6_log6_jexp6_jlog6():
    pin = pytest.importorskip("pinocchio")
    rng = np.random.default_rng(30)
    for _ in range(20):
        # Pinocchio's Jexp6/Jlog6 lose up to 1e-8 for angles around 1e-3 (ours are exact to a
        # few ulp there, see the power-series test), so the oracle is used from 0.3 rad on.
        xi = sample_tangent(SE3, rng)
        xi[3:] *= rng.uniform(0.3, 3.0) / np.linalg.norm(xi[3:])
        H = se3.exp(xi)
        np.testing.assert_allclose(H, pin.exp6(pin.Motion(xi)).homogeneous, atol=1e-14)
        np.testing.assert_allclose(se3.log(H), pin.log6(pin.SE3(H)).vector, atol=1e-13)
        np.testing.assert_allclose(se3.right_jacobian(xi), pin.Jexp6(pin.Motion(xi)), atol=1e-13)
        np.testing.assert_allclose(se3.right_jacobian_inverse(xi), pin.Jlog6(pin.SE3(H)), atol=1e-12)
        np.testing.assert_allclose(se3.Ad(H), pin.SE3(H).action, atol=1e-14)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: so3.exp(np.zeros(4)), r"w must have shape \(3,\)"),
        (lambda: so3.exp([np.nan, 0.0, 0.0]), "NaN"),
        (lambda: so3.hat(np.zeros((3, 1))), "shape"),
        (lambda: so3.vee(np.zeros(3)), "shape"),
        (lambda: so3.log(np.eye(4)), "shape"),
        (lambda: so3.log(1.001 * np.eye(3)), "not orthonormal"),
        (lambda: so3.log(np.diag([1.0, 1.0, -1.0])), "reflection"),
        (lambda: so3.log(np.full((3, 3), np.inf)), "NaN or inf"),
        (lambda: so3.right_jacobian_inverse(np.zeros(6)), "shape"),
        (lambda: so3.project_to_rotation(np.zeros((2, 2))), "shape"),
        (lambda: se3.exp(np.zeros(5)), r"xi must have shape \(6,\)"),
        (lambda: se3.exp(np.array([0, 0, 0, 0, 0, np.nan])), "NaN"),
        (lambda: se3.log(np.eye(3)), "shape"),
        (lambda: se3.log(np.diag([1.0, 2.0, 1.0, 1.0])), "not orthonormal"),
        (lambda: se3.inverse(np.diag([1.0, 1.0, -1.0, 1.0])), "reflection"),
        (lambda: se3.inverse(np.vstack((np.eye(4)[:3], [0.0, 0.0, 1.0, 1.0]))), "last row"),
        (lambda: se3.act(np.eye(4), np.zeros((2, 4))), "points must have shape"),
        (lambda: se3.act(np.eye(4), [np.nan, 0.0, 0.0]), "NaN"),
        (lambda: se3.Ad(np.eye(3)), "shape"),
        (lambda: se3.left_jacobian(np.zeros(3)), "shape"),
        (lambda: se3.left_jacobian_inverse([0, 0, 0, 0, 0, np.nan]), "NaN"),
    ],
)
def test_bad_input_raises_value_error_naming_the_problem(call, message):
    with pytest.raises(ValueError, match=message):
        call()
