"""Forward dynamics (ABA) against Pinocchio and as the inverse of RNEA."""

import os
import subprocess
import sys

import numpy as np
import pinocchio as pin
import pytest

import lietraj
from conftest import ORACLE_ROBOTS, relative_error
from lietraj.dynamics.algorithms.aba import aba
from lietraj.dynamics.model.builder import random_tree
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.algorithms.rnea import rnea
from pin_oracle import pin_model, pin_model_from
from test_rnea import pin_fext


def forward_tolerance(pm, q) -> float:
    """1e-10, widened in proportion to cond(M) beyond 1e6: icub's tiny links give cond(M) up to 1e10 at random
    states, and there Pinocchio's own ABA(RNEA(a)) round trip already misses a by ~1e-10."""
    M = pin.crba(pm, pm.createData(), q)
    return 1e-10 * max(1.0, np.linalg.cond(np.triu(M) + np.triu(M, 1).T) / 1e6)


@pytest.mark.parametrize("name", ORACLE_ROBOTS)
def test_aba_matches_pinocchio(name, rng):
    model, pm = lietraj.load_robot(name), pin_model(name)
    pd = pm.createData()
    for _ in range(5):
        x = model.state_space.random(rng)
        tau, fext = rng.normal(size=model.nv), rng.normal(size=(model.nb, 6))
        q, v = to_pinocchio(model, x)
        tol = forward_tolerance(pm, q)
        assert relative_error(aba(model, x, tau), pin.aba(pm, pd, q, v, tau)) < tol
        assert relative_error(aba(model, x, tau, fext), pin.aba(pm, pd, q, v, tau, pin_fext(pm, fext))) < tol


@pytest.mark.parametrize("name", ORACLE_ROBOTS + ["talos_legs", "anymal"])
def test_rnea_inverts_aba(name, rng):
    """ID(FD(tau)) = tau: the backward error of forward dynamics, relative to the size of the terms M a that
    ID sums (on icub, |a| reaches 1e8 at random states while tau ~ 1)."""
    model, pm = lietraj.load_robot(name), pin_model(name)
    for _ in range(3):
        x, tau = model.state_space.random(rng), rng.normal(size=model.nv)
        fext = rng.normal(size=(model.nb, 6))
        M = pin.crba(pm, pm.createData(), to_pinocchio(model, x)[0])
        for f in (None, fext):
            a = aba(model, x, tau, f)
            scale = max(np.abs(tau).max(), np.abs(M).max() * np.abs(a).max())
            assert np.abs(rnea(model, x, a, f) - tau).max() / scale < 1e-13


@pytest.mark.parametrize("name", ["talos", "solo12", "ur5", "panda", "hyq"])
def test_aba_inverts_rnea(name, rng):
    """FD(ID(a)) = a on the well-conditioned robots."""
    model = lietraj.load_robot(name)
    for _ in range(3):
        x, a = model.state_space.random(rng), rng.normal(size=model.nv)
        fext = rng.normal(size=(model.nb, 6))
        assert relative_error(aba(model, x, rnea(model, x, a)), a) < 1e-10
        assert relative_error(aba(model, x, rnea(model, x, a, fext), fext), a) < 1e-10


@pytest.mark.parametrize("floating", [False, True])
def test_aba_on_random_trees_matches_pinocchio(floating, rng):
    for seed in range(3):
        model = random_tree(10, seed, floating_base=floating)
        pm = pin_model_from(model)
        x, tau = model.state_space.random(rng), rng.normal(size=model.nv)
        q, v = to_pinocchio(model, x)
        assert relative_error(aba(model, x, tau), pin.aba(pm, pm.createData(), q, v, tau)) < 1e-10


def test_free_falling_body_accelerates_with_gravity():
    """A free-floating robot at rest with no torque falls at g, whatever its base orientation."""
    model = lietraj.load_robot("solo12")
    x = model.state_space.random(np.random.default_rng(1), scale=0.0)
    x.H[:3, :3] = lietraj.dynamics.so3.exp(np.array([0.3, -1.2, 0.5]))
    a = aba(model, x, np.zeros(model.nv))
    np.testing.assert_allclose(a[:3], x.H[:3, :3].T @ model.gravity, atol=1e-12)
    np.testing.assert_allclose(a[3:], 0.0, atol=1e-12)


def test_batched_aba_equals_per_state(rng):
    model = lietraj.load_robot("talos")
    X = model.state_space.random_trajectory(6, rng)
    T = rng.normal(size=(6, model.nv))
    A = aba(model, X, T)
    for k in range(6):
        np.testing.assert_array_equal(A[k], aba(model, X[k], T[k]))


def test_bad_torque_shape_is_a_clear_error():
    model = lietraj.load_robot("ur5")
    with pytest.raises(ValueError, match=r"joint torques must have shape \(6,\)"):
        aba(model, model.state_space.neutral(), np.zeros(5))


def test_kernels_run_without_jit():
    """NUMBA_DISABLE_JIT=1 (for debugging in pure Python) gives the same results."""
    code = ("import numpy as np, lietraj; from lietraj.dynamics.algorithms.aba import aba;"
            "from lietraj.dynamics.algorithms.rnea import rnea;"
            "m = lietraj.load_robot('solo12'); x = m.state_space.random(np.random.default_rng(0));"
            "a = np.arange(m.nv) / 10.0; print(repr(aba(m, x, rnea(m, x, a)).tolist()))")
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    np.testing.assert_allclose(eval(out), np.arange(18) / 10.0, atol=1e-10)
