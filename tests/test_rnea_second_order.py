"""IDSVA SO (seed 003 Algorithm 1) against finite differences of the analytical first-order derivatives."""

import numpy as np
import pytest

import lietraj
from conftest import relative_error
from lietraj.dynamics.model.builder import random_tree
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.algorithms.rnea_derivatives import rnea_derivatives
from lietraj.dynamics.algorithms.rnea_second_order import rnea_second_order_contraction, rnea_second_order_derivatives

MODELS = {
    "talos": lambda: lietraj.load_robot("talos"),
    "solo12": lambda: lietraj.load_robot("solo12"),
    "panda": lambda: lietraj.load_robot("panda"),
    "tree, floating": lambda: random_tree(9, 3, floating_base=True),
    "tree, fixed": lambda: random_tree(9, 4, floating_base=False),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_matches_finite_differences_of_the_first_order_derivatives(name, rng):
    """T[:, j, k] is the derivative along k of the column j of the first-order derivative (one after the other)."""
    model = MODELS[name]()
    x, a = model.state_space.random(rng), rng.normal(size=model.nv)
    nv = model.nv
    so = rnea_second_order_derivatives(model, x, a)
    J_q = numerical_jacobian(lambda y: rnea_derivatives(model, y, a).dtau_dq, x)
    J_v = numerical_jacobian(lambda y: rnea_derivatives(model, y, a).dtau_dv, x)
    J_M = numerical_jacobian(lambda y: rnea_derivatives(model, y, a).M, x)
    assert relative_error(so.d2tau_dq2, J_q[:, :, :nv]) < 1e-6
    assert relative_error(so.d2tau_dqdv, J_q[:, :, nv:]) < 1e-6
    assert relative_error(so.d2tau_dqdv, J_v[:, :, :nv].transpose(0, 2, 1)) < 1e-6
    assert relative_error(so.d2tau_dv2, J_v[:, :, nv:]) < 1e-6
    assert relative_error(so.dM_dq, J_M[:, :, :nv]) < 1e-6


def test_symmetries_and_the_base_rotation_bracket(rng):
    """d2tau/dv2 and dM/dq are symmetric; d2tau/dq2 is too except in the base-rotation block, where
    T[:, j, k] - T[:, k, j] = dtau/dq_w . (e_k x e_j), the Lie bracket of body rotations (seed 003 digest §1.5)."""
    model = lietraj.load_robot("hyq")
    x, a = model.state_space.random(rng), rng.normal(size=model.nv)
    so = rnea_second_order_derivatives(model, x, a)
    scale = np.abs(so.d2tau_dq2).max()
    assert np.abs(so.d2tau_dv2 - so.d2tau_dv2.transpose(0, 2, 1)).max() < 1e-12 * scale
    assert np.abs(so.dM_dq - so.dM_dq.transpose(1, 0, 2)).max() < 1e-12 * scale
    antisym = so.d2tau_dq2 - so.d2tau_dq2.transpose(0, 2, 1)
    dtau_dw = rnea_derivatives(model, x, a).dtau_dq[:, 3:6]
    expected = np.zeros_like(antisym)
    for j in range(3):
        for k in range(3):
            expected[:, 3 + j, 3 + k] = dtau_dw @ np.cross(np.eye(3)[k], np.eye(3)[j])
    assert np.abs(antisym - expected).max() < 1e-10 * scale
    assert np.abs(expected).max() > 1e-3 * scale  # the block really is not symmetric


@pytest.mark.parametrize("name", list(MODELS))
def test_contraction_equals_the_contracted_tensors(name, rng):
    """The pass that sums mu . T over the output index as it goes gives what contracting the tensors gives, without
    forming them."""
    model = MODELS[name]()
    x, a, mu = model.state_space.random(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    so = rnea_second_order_derivatives(model, x, a)
    h = rnea_second_order_contraction(model, x, a, mu)
    assert relative_error(h.qq, np.tensordot(mu, so.d2tau_dq2, axes=1)) < 1e-12
    assert relative_error(h.vv, np.tensordot(mu, so.d2tau_dv2, axes=1)) < 1e-12
    assert relative_error(h.qv, np.tensordot(mu, so.d2tau_dqdv, axes=1)) < 1e-12
    assert relative_error(h.M_q, np.tensordot(mu, so.dM_dq, axes=1)) < 1e-12


@pytest.mark.parametrize("name", ["solo12", "tree, floating", "tree, fixed"])
def test_contraction_matches_finite_differences_of_the_contracted_first_order_derivatives(name, rng):
    """mu . T[:, j, k] is the derivative along k of mu . (column j of the first-order derivative): the contraction
    checked without the tensors."""
    model = MODELS[name]()
    x, a, mu = model.state_space.random(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    nv = model.nv
    h = rnea_second_order_contraction(model, x, a, mu)
    J_q = numerical_jacobian(lambda y: mu @ rnea_derivatives(model, y, a).dtau_dq, x)
    J_v = numerical_jacobian(lambda y: mu @ rnea_derivatives(model, y, a).dtau_dv, x)
    J_M = numerical_jacobian(lambda y: mu @ rnea_derivatives(model, y, a).M, x)
    assert relative_error(h.qq, J_q[:, :nv]) < 1e-6
    assert relative_error(h.qv, J_q[:, nv:]) < 1e-6
    assert relative_error(h.qv, J_v[:, :nv].T) < 1e-6
    assert relative_error(h.vv, J_v[:, nv:]) < 1e-6
    assert relative_error(h.M_q, J_M[:, :nv]) < 1e-6


def test_trajectory_and_reused_results_equal_single_calls(rng):
    """Batched tensors and contractions equal per-state calls; a reused ``out`` (which the pass does not clear) and
    a foreign ``out`` full of garbage (which it does) give the same tensors as fresh ones."""
    model = lietraj.load_robot("solo12")
    X = model.state_space.random_trajectory(3, rng)
    A, MU = rng.normal(size=(3, model.nv)), rng.normal(size=(3, model.nv))
    T = rnea_second_order_derivatives(model, X, A)
    H = rnea_second_order_contraction(model, X, A, MU)
    for k in range(3):
        single = rnea_second_order_derivatives(model, X[k], A[k])
        h = rnea_second_order_contraction(model, X[k], A[k], MU[k])
        for field in ("d2tau_dq2", "d2tau_dv2", "d2tau_dqdv", "dM_dq"):
            assert np.array_equal(getattr(T, field)[k], getattr(single, field))
        for field in ("qq", "vv", "qv", "M_q"):
            assert np.array_equal(getattr(H, field)[k], getattr(h, field))
    out = rnea_second_order_derivatives(model, X[0], A[0])
    fresh = rnea_second_order_derivatives(model, X[1], A[1])
    assert rnea_second_order_derivatives(model, X[1], A[1], out=out) is out
    assert np.array_equal(out.d2tau_dq2, fresh.d2tau_dq2) and np.array_equal(out.dM_dq, fresh.dM_dq)
    foreign = type(out)(*(np.full_like(fresh.d2tau_dq2, 7.0) for _ in range(4)))
    rnea_second_order_derivatives(model, X[1], A[1], out=foreign)
    assert np.array_equal(foreign.d2tau_dv2, fresh.d2tau_dv2) and np.array_equal(foreign.d2tau_dqdv, fresh.d2tau_dqdv)


def test_bad_input_raises(rng):
    model = lietraj.load_robot("ur5")
    x = model.state_space.random(rng)
    with pytest.raises(ValueError, match="acceleration"):
        rnea_second_order_derivatives(model, x, np.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        rnea_second_order_contraction(model, x, np.zeros(model.nv), np.full(model.nv, np.nan))
    with pytest.raises(ValueError, match="mu"):
        rnea_second_order_contraction(model, x, np.zeros(model.nv), np.zeros(2))
    with pytest.raises(ValueError, match="knot 1"):
        X = model.state_space.random_trajectory(2, rng)
        X.v[1, 0] = np.nan
        rnea_second_order_derivatives(model, X, np.zeros((2, model.nv)))
    with pytest.raises(TypeError, match="State"):
        rnea_second_order_derivatives(model, np.zeros(model.nv), np.zeros(model.nv))
