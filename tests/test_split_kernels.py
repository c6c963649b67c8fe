"""The split kernels (``_jit.split_kernel``): a solver's ``threads=2`` computes half of the knots of the dynamics'
derivatives and of DDP's term in a second thread inside one compiled call. Each knot's operations are those of the
one-thread kernel, so the results are equal to the bit; a failure in either half names its knot of the whole
trajectory; a single knot is computed on one thread."""

import dataclasses

import numpy as np
import pytest

import lietraj
from lietraj.dynamics import Contact, Workspace
from lietraj.dynamics.algorithms.aba_derivatives import aba_derivatives_of_checked
from lietraj.dynamics.algorithms.rnea_derivatives import LOCAL_WRENCH
from lietraj.dynamics.algorithms.rnea_second_order import rnea_second_order_contraction
from lietraj.dynamics.contacts.contact_dynamics_derivatives import contact_derivatives
from lietraj.dynamics.lie.state import Trajectory


def _knots(model, N, seed=0):
    rng = np.random.default_rng(seed)
    X = Trajectory.repeat(model.state_space.neutral(), N)
    X.s[:] += rng.normal(scale=0.2, size=X.s.shape)
    X.v[:] = rng.normal(size=X.v.shape)
    tau = np.zeros((N, model.nv))
    tau[:, model.nv - model.n:] = rng.normal(size=(N, model.n))
    return X, tau, rng


def _equal(a, b) -> bool:
    return all(np.array_equal(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))


def _feet(model):
    return tuple(Contact(f.name, "3d") for f in model.frames if f.name.endswith("FOOT"))[:3]


@pytest.mark.parametrize("robot, N", [("solo12", 9), ("ur5", 2), ("ur5", 1)])
def test_forward_dynamics_derivatives_on_two_threads_equal_one(robot, N):
    model = lietraj.load_robot(robot)
    X, tau, rng = _knots(model, N)
    fext = rng.normal(size=(N, model.nb, 6))
    for wrenches in (None, fext):
        one = aba_derivatives_of_checked(model, X, tau, wrenches, LOCAL_WRENCH, None, Workspace(model))
        two = aba_derivatives_of_checked(model, X, tau, wrenches, LOCAL_WRENCH, None, Workspace(model),
                                         Workspace(model))
        assert _equal(one, two)


def test_contact_derivatives_on_two_threads_equal_one():
    model = lietraj.load_robot("solo12")
    X, tau, _ = _knots(model, 7)
    contacts = _feet(model)
    one = contact_derivatives(model, X, tau, contacts, 0.0, None, None, Workspace(model), "test")
    two = contact_derivatives(model, X, tau, contacts, 0.0, None, None, Workspace(model), "test", Workspace(model))
    assert _equal(one, two)


def test_the_second_order_contraction_on_two_threads_equals_one():
    model = lietraj.load_robot("solo12")
    X, a, rng = _knots(model, 5)
    mu = rng.normal(size=(5, model.nv))
    one = rnea_second_order_contraction(model, X, a, mu, workspace=Workspace(model))
    two = rnea_second_order_contraction(model, X, a, mu, workspace=Workspace(model), other=Workspace(model))
    assert _equal(one, two)


@pytest.mark.parametrize("knot", [1, 7])
def test_a_failure_in_either_half_names_its_knot_of_the_whole_trajectory(knot):
    model = lietraj.load_robot("solo12")
    X, tau, _ = _knots(model, 9)
    tau[knot, -1] = np.nan
    with pytest.raises(ValueError, match=f"at knot {knot}"):
        aba_derivatives_of_checked(model, X, tau, None, LOCAL_WRENCH, None, Workspace(model), Workspace(model))
    dynamics = lietraj.dynamics.contact_dynamics(model, X, np.nan_to_num(tau), _feet(model))
    dynamics.lagrangian[knot, 0] = np.nan
    with pytest.raises(ValueError, match=f"at knot {knot}"):
        contact_derivatives(model, X, None, _feet(model), 0.0, None, dynamics, Workspace(model), "test",
                            Workspace(model))



def test_a_split_call_runs_on_two_of_numbas_threads_and_restores_the_callers(monkeypatch):
    """On a machine of more cores a split kernel's two halves must not wake every thread of numba's pool: the call
    asks for two, then gives the calling thread its own setting back."""
    import numba

    from lietraj._jit import split_call

    seen = []
    numba.set_num_threads(1)
    try:
        monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 4)
        assert split_call(lambda x: seen.append(numba.get_num_threads()) or x, 7) == 7
        assert seen == [2] and numba.get_num_threads() == 1
    finally:
        monkeypatch.undo()
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)


def test_the_cost_table_on_two_threads_equals_one():
    """The trot's compiled cost table (state, control, friction-cone and foot terms over its runs of knots, the
    contact forces' derivatives among its inputs): values and derivatives, each half of the knots with its own work
    arrays."""
    from lietraj.problems import trot

    problem = trot("solo12", formulation="crocoddyl").problem
    assert problem._cost_plan().compiled.contact_runs
    X, U = problem.constant_trajectory(), np.random.default_rng(0).normal(size=(problem.T, problem.nu))
    one, two = problem.empty_derivatives(), problem.empty_derivatives()
    problem.cost_derivatives(X, U, one)
    problem.cost_derivatives(X, U, two, threads=2)
    assert _equal(one.running, two.running) and _equal(one.terminal, two.terminal)
    assert np.array_equal(problem.running_costs(X, U), problem.running_costs(X, U, threads=2))
