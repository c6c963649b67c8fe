"""Second-order forward-dynamics derivatives and their DDP contraction against finite differences."""

import numpy as np
import pytest

import lietraj
from conftest import relative_error
from lietraj.dynamics.algorithms.aba_derivatives import aba_derivatives
from lietraj.dynamics.algorithms.aba_second_order import aba_hessian_contraction, aba_second_order_derivatives
from lietraj.dynamics.lie.finite_differences import numerical_jacobian


@pytest.mark.parametrize("name", ["solo12", "panda", "talos"])
def test_tensors_match_finite_differences_of_the_first_order_derivatives(name, rng):
    model = lietraj.load_robot(name)
    x, tau = model.state_space.random(rng, scale=0.5), rng.normal(size=model.nv)
    nv = model.nv
    so = aba_second_order_derivatives(model, x, tau)
    # accelerations of ~1e4 at random states: a step of 1e-5 balances truncation and rounding
    J_q, Jt_q = numerical_jacobian(lambda y, t: aba_derivatives(model, y, t).da_dq, x, tau, eps=1e-5)
    J_v = numerical_jacobian(lambda y: aba_derivatives(model, y, tau).da_dv, x, eps=1e-5)
    assert relative_error(so.d2a_dq2, J_q[:, :, :nv]) < 1e-6
    assert relative_error(so.d2a_dqdv, J_q[:, :, nv:]) < 1e-6
    assert relative_error(so.d2a_dv2, J_v[:, :, nv:]) < 1e-6
    assert relative_error(so.d2a_dqdtau, Jt_q) < 1e-6


def test_contraction_equals_the_contracted_tensors(rng):
    model = lietraj.load_robot("hyq")
    x, tau, lam = model.state_space.random(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    so = aba_second_order_derivatives(model, x, tau)
    H = aba_hessian_contraction(model, x, tau, lam)
    assert relative_error(H.qq, np.tensordot(lam, so.d2a_dq2, axes=1)) < 1e-10
    assert relative_error(H.qv, np.tensordot(lam, so.d2a_dqdv, axes=1)) < 1e-10
    assert relative_error(H.vv, np.tensordot(lam, so.d2a_dv2, axes=1)) < 1e-10
    assert relative_error(H.qtau, np.tensordot(lam, so.d2a_dqdtau, axes=1)) < 1e-10
    with pytest.raises(ValueError, match="lam"):
        aba_hessian_contraction(model, x, tau, np.full(model.nv, np.nan))


def test_contraction_over_a_trajectory_equals_single_calls(rng):
    model = lietraj.load_robot("solo12")
    X = model.state_space.random_trajectory(3, rng)
    TAU, LAM = rng.normal(size=(3, model.nv)), rng.normal(size=(3, model.nv))
    H = aba_hessian_contraction(model, X, TAU, LAM)
    for k in range(3):
        h = aba_hessian_contraction(model, X[k], TAU[k], LAM[k])
        for field in ("qq", "qv", "vv", "qtau"):
            assert relative_error(getattr(H, field)[k], getattr(h, field)) < 1e-14
    with pytest.raises(ValueError, match=r"\(3, 18\)"):
        aba_hessian_contraction(model, X, TAU, LAM[:2])
