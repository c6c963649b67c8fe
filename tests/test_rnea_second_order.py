"""IDSVA SO (seed 003 Algorithm 1) against finite differences of the analytical first-order derivatives."""

import numpy as np
import pytest

import lietraj
from conftest import relative_error
from lietraj.dynamics.builder import random_tree
from lietraj.dynamics.finite_differences import numerical_jacobian
from lietraj.dynamics.rnea_derivatives import rnea_derivatives
from lietraj.dynamics.rnea_second_order import rnea_second_order_derivatives

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


def test_bad_input_raises(rng):
    model = lietraj.load_robot("ur5")
    x = model.state_space.random(rng)
    with pytest.raises(ValueError, match="acceleration"):
        rnea_second_order_derivatives(model, x, np.zeros(3))
    with pytest.raises(TypeError, match="State"):
        rnea_second_order_derivatives(model, model.state_space.random_trajectory(2, rng), np.zeros(model.nv))
