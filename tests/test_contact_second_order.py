"""The second-order term of DDP on contact problems: ``μᵀ ∂²a`` of the contact dynamics and ``μᵀ ∂²v⁺`` of the
impulse dynamics (``contact_dynamics_second_order``), and the step Hessians of ``ContactRobotDynamics`` and
``ImpulseRobotDynamics`` built on them.

The reference is geometric finite differences of the analytical first derivatives (``numerical_jacobian`` of
``μᵀ [∂a/∂q, ∂a/∂v, ∂a/∂τ]``): derivatives one direction after the other, whose symmetric part is the Hessian in
exponential coordinates. Cases: Talos on both soles (6d) and solo12 on four point feet (3d), LOCAL and
LOCAL_WORLD_ALIGNED, with and without Baumgarte gains and position targets, and random trees (fixed base with
prismatic joints on the contact chain, floating base). The one dropped term (the ``Jlog6`` curvature of 6d position
targets) vanishes when the feet are at their targets: there the contraction matches to 1e-6; with targets a few
centimetres off it is still far closer than the Gauss–Newton term (zero). DDP then solves the example contact
problems and a flight -> impact -> stance problem to FDDP's cost.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.algorithms.aba_second_order import aba_hessian_contraction
from lietraj.dynamics.model.builder import random_tree
from lietraj.dynamics.contacts.contact_dynamics import Contact
from lietraj.dynamics.contacts.contact_dynamics_derivatives import contact_dynamics_derivatives
from lietraj.dynamics.contacts.contact_dynamics_second_order import contact_hessian_contraction, impulse_hessian_contraction
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.contacts.impulse_dynamics import impulse_dynamics_derivatives
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.dynamics.model.robots import load_robot
from lietraj.dynamics.lie.state import Trajectory
from lietraj.optimal_control import RobotDynamics
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.dynamics.impulse_robot_dynamics import ImpulseRobotDynamics
from lietraj.optimal_control.solvers.solvers import solve_ddp, solve_fddp
from lietraj.problems import make_problem
from lietraj.problems.support import FEET
from test_euler_second_order import numerical_hessian
from test_impulse_robot_dynamics import landing  # noqa: F401  (fixture)

FD_TOL = 1e-6
DT = 0.02
# Baumgarte gains and where the targets are: none, velocity gain only, targets at the current feet, targets off.
SETTINGS = {"plain": ((0.0, 0.0), None), "Kv": ((0.0, 8.0), None), "at target": ((30.0, 8.0), 0.0),
            "off target": ((30.0, 8.0), 0.05)}


def feet_case(name: str, reference: str, setting: str, seed: int = 1):
    """(model, x, tau, contacts, mu): a random state, torques and covector, contacts on the robot's feet."""
    model = load_robot(name)
    rng = np.random.default_rng(seed)
    x = model.state_space.random(rng, scale=0.5)
    tau = rng.standard_normal(model.nv)
    gains, offset = SETTINGS[setting]
    feet = FEET[name]
    targets = None if offset is None else [frame_placement(model, x, f) @ se3.exp(offset * rng.standard_normal(6))
                                           for f in feet.frames]
    contacts = tuple(Contact(f, feet.kind, reference, gains, None if targets is None else targets[k])
                     for k, f in enumerate(feet.frames))
    return model, x, tau, contacts, rng.standard_normal(model.nv)


def tree_case(floating: bool):
    """A random tree with prismatic joints on its deepest branch (2 of 3 joints on the floating one, 3 of 6 on the
    fixed one): a 3d world-aligned contact with a position target off its frame at that branch's end, and for a
    floating base a 6d contact (velocity gain, no target) at the end of the next deepest branch."""
    seed = 4 if floating else 7
    model = random_tree(8, seed, floating_base=floating, prismatic_fraction=0.4)
    rng = np.random.default_rng(seed)
    x = model.state_space.random(rng, scale=0.5)

    def depth(b):
        return 0 if b < 0 else 1 + depth(model.mi[b, 0])

    leaves = sorted((b for b in range(model.nb) if not (model.mi[:, 0] == b).any()), key=depth, reverse=True)
    frames = [next(k for k, f in enumerate(model.frames) if f.body == b and f.kind == "body") for b in leaves]
    target = frame_placement(model, x, frames[0]) @ se3.exp(0.1 * rng.standard_normal(6))
    contacts = [Contact(frames[0], "3d", "local_world_aligned", (20.0, 5.0), target)]
    if floating:
        contacts.append(Contact(frames[1], "6d", "local", (0.0, 5.0)))
    return model, x, rng.standard_normal(model.nv), tuple(contacts), rng.standard_normal(model.nv)


def as_matrix(h, nv: int) -> np.ndarray:
    """The symmetric (q, v, tau) Hessian from the blocks of a contraction."""
    H = np.zeros((3 * nv, 3 * nv))
    H[:nv, :nv], H[:nv, nv:2 * nv], H[nv:2 * nv, nv:2 * nv], H[:nv, 2 * nv:] = h.qq, h.qv, h.vv, h.qtau
    H[nv:2 * nv, :nv], H[2 * nv:, :nv] = h.qv.T, h.qtau.T
    return 0.5 * (H + H.T)


def contact_reference(model, x, tau, contacts, mu) -> np.ndarray:
    """Finite differences of μᵀ [∂a/∂q, ∂a/∂v, ∂a/∂τ], symmetrized."""
    def gradient(y, t):
        d = contact_dynamics_derivatives(model, y, t, contacts)
        return np.concatenate([mu @ d.da_dq, mu @ d.da_dv, mu @ d.da_dtau])

    J_x, J_tau = numerical_jacobian(gradient, x, tau)
    H = np.concatenate([J_x, J_tau], axis=1)
    return 0.5 * (H + H.T)


@pytest.mark.parametrize("setting", ["plain", "Kv", "at target"])
@pytest.mark.parametrize("reference", ["local", "local_world_aligned"])
@pytest.mark.parametrize("name", ["talos", "solo12"])
def test_contact_contraction_matches_finite_differences(name, reference, setting):
    model, x, tau, contacts, mu = feet_case(name, reference, setting)
    h = contact_hessian_contraction(model, x, tau, contacts, mu)
    assert relative_error(as_matrix(h, model.nv), contact_reference(model, x, tau, contacts, mu)) <= FD_TOL


@pytest.mark.parametrize("floating", [False, True])
def test_contact_contraction_on_trees_with_prismatic_joints(floating):
    model, x, tau, contacts, mu = tree_case(floating)
    h = contact_hessian_contraction(model, x, tau, contacts, mu)
    assert relative_error(as_matrix(h, model.nv), contact_reference(model, x, tau, contacts, mu)) <= FD_TOL


@pytest.mark.parametrize("name", ["talos", "solo12"])
def test_targets_off_the_feet_cost_little_and_beat_gauss_newton(name):
    """6d targets off the soles leave out the Jlog6 curvature (about 1 % here); 3d targets are exact. The
    Gauss–Newton term (zero) has relative error 1."""
    model, x, tau, contacts, mu = feet_case(name, "local", "off target")
    ref = contact_reference(model, x, tau, contacts, mu)
    error = relative_error(as_matrix(contact_hessian_contraction(model, x, tau, contacts, mu), model.nv), ref)
    assert relative_error(np.zeros_like(ref), ref) == 1.0
    if name == "talos":
        assert 1e-5 < error < 0.03
    else:
        assert error <= FD_TOL


@pytest.mark.parametrize("name", ["talos", "solo12"])
def test_contraction_is_independent_of_the_force_reference(name):
    """LOCAL and world-aligned contacts give the same accelerations, hence the same second derivatives."""
    model, x, tau, contacts, mu = feet_case(name, "local", "off target", seed=4)
    aligned = tuple(Contact(c.frame, c.kind, "local_world_aligned", c.baumgarte, c.target) for c in contacts)
    h, g = (contact_hessian_contraction(model, x, tau, cs, mu) for cs in (contacts, aligned))
    for block in ("qq", "qv", "vv", "qtau"):
        assert relative_error(getattr(g, block), getattr(h, block)) < 1e-10


def test_trajectory_form_equals_single_states(rng):
    model = load_robot("solo12")
    contacts = FEET["solo12"].contacts(baumgarte=(20.0, 6.0))
    X = model.state_space.random_trajectory(4, rng, scale=0.5)
    TAU, MU = rng.standard_normal((4, model.nv)), rng.standard_normal((4, model.nv))
    H = contact_hessian_contraction(model, X, TAU, contacts, MU)
    G = impulse_hessian_contraction(model, X, contacts, MU, 0.3)
    assert H.qq.shape == (4, model.nv, model.nv) and H.qtau.shape == (4, model.nv, model.nv)
    for k in range(4):
        h, g = contact_hessian_contraction(model, X[k], TAU[k], contacts, MU[k]), impulse_hessian_contraction(
            model, X[k], contacts, MU[k], 0.3)
        for block in ("qq", "qv", "vv", "qtau"):
            assert relative_error(getattr(H, block)[k], getattr(h, block)) < 1e-13
        assert relative_error(G.qq[k], g.qq) < 1e-13 and relative_error(G.qv[k], g.qv) < 1e-13


@pytest.mark.parametrize("restitution", [0.0, 0.4])
@pytest.mark.parametrize("reference", ["local", "local_world_aligned"])
@pytest.mark.parametrize("name", ["talos", "solo12"])
def test_impulse_contraction_matches_finite_differences(name, reference, restitution):
    model, x, _, contacts, mu = feet_case(name, reference, "plain", seed=5)
    h = impulse_hessian_contraction(model, x, contacts, mu, restitution)
    nv = model.nv

    def gradient(y):
        d = impulse_dynamics_derivatives(model, y, contacts, restitution)
        return np.concatenate([mu @ d.dvplus_dq, mu @ d.dvplus_dv])

    ref = numerical_jacobian(gradient, x)
    H = np.block([[0.5 * (h.qq + h.qq.T), h.qv], [h.qv.T, np.zeros((nv, nv))]])
    assert relative_error(H, 0.5 * (ref + ref.T)) <= FD_TOL


@pytest.mark.parametrize("kind", ["stance", "impact"])
@pytest.mark.parametrize("name", ["talos", "solo12"])
def test_step_hessian_matches_second_differences_of_the_step(name, kind, rng):
    """The whole second-order term, group curvature included, against second differences of the step; the base
    turns fast so that the compose node matters."""
    model = load_robot(name)
    x = model.state_space.random(rng, scale=0.5)
    x.v[:6] *= 3.0
    feet = FEET[name]
    contacts = feet.contacts(baumgarte=(30.0, 8.0), targets=[frame_placement(model, x, f) for f in feet.frames])
    dyn = ContactRobotDynamics(model, DT, contacts) if kind == "stance" else ImpulseRobotDynamics(model, contacts, 0.3)
    u, lam = rng.standard_normal(model.n), rng.standard_normal(model.state_space.ndx)
    H = dyn.hessian_contraction(x, u, lam)
    ndx = model.state_space.ndx
    assert H.xx.shape == (ndx, ndx) and H.xu.shape == (ndx, model.n) and H.uu.shape == (model.n, model.n)
    np.testing.assert_array_equal(H.xx, H.xx.T)
    np.testing.assert_array_equal(H.uu, H.uu.T)
    if kind == "impact":
        assert not H.xu.any() and not H.uu.any()
    ref = numerical_hessian(dyn, x, u, lam)
    assert relative_error(np.block([[H.xx, H.xu], [H.xu.T, H.uu]]), ref) < 1e-5


def test_without_contacts_the_step_hessian_is_the_free_one(rng):
    """A flight phase (no contacts) has ABA's contraction and RobotDynamics' exact second-order term."""
    model = load_robot("solo12")
    x, tau, mu = model.state_space.random(rng, scale=0.5), rng.standard_normal(model.nv), rng.standard_normal(model.nv)
    h, ref = contact_hessian_contraction(model, x, tau, [], mu), aba_hessian_contraction(model, x, tau, mu)
    for block in ("qq", "qv", "vv", "qtau"):
        assert relative_error(getattr(h, block), getattr(ref, block)) < 1e-10
    X = model.state_space.random_trajectory(3, rng, scale=0.5)
    U, LAM = rng.standard_normal((3, model.n)), rng.standard_normal((3, model.state_space.ndx))
    H = ContactRobotDynamics(model, DT, []).trajectory_hessian_contraction(X, U, LAM)
    ref = RobotDynamics(model, DT).trajectory_hessian_contraction(X, U, LAM)
    for block in ("xx", "xu", "uu"):
        assert relative_error(getattr(H, block), getattr(ref, block)) < 1e-10
    G = ImpulseRobotDynamics(model, []).trajectory_hessian_contraction(X, U, LAM)
    assert not (G.xx.any() or G.xu.any() or G.uu.any())


@pytest.mark.parametrize("kind", ["stance", "impact"])
def test_bad_inputs_raise(kind, rng):
    model = load_robot("solo12")
    contacts = FEET["solo12"].contacts()
    dyn = ContactRobotDynamics(model, DT, contacts) if kind == "stance" else ImpulseRobotDynamics(model, contacts)
    N, ndx = 3, model.state_space.ndx
    X = model.state_space.random_trajectory(N, rng, scale=0.5)
    U, LAM = rng.standard_normal((N, model.n)), rng.standard_normal((N, ndx))
    with pytest.raises(ValueError, match="lam"):
        dyn.trajectory_hessian_contraction(X, U, LAM[:, 1:])
    with pytest.raises(ValueError, match="lam"):
        dyn.trajectory_hessian_contraction(X, U, LAM[1:])
    with pytest.raises(ValueError, match="lam"):
        dyn.trajectory_hessian_contraction(X, U, np.where(np.arange(ndx) == 7, np.nan, LAM))
    with pytest.raises(ValueError, match="NaN"):
        dyn.trajectory_hessian_contraction(X, np.where(U > 1.0, np.nan, U), LAM)
    X.v[1, 3] = np.nan
    with pytest.raises(ValueError):
        dyn.trajectory_hessian_contraction(X, U, LAM)
    with pytest.raises(TypeError):
        dyn.trajectory_hessian_contraction(X[0], U, LAM)


def test_bad_covectors_raise(rng):
    model = load_robot("solo12")
    contacts = FEET["solo12"].contacts()
    x = model.state_space.random(rng)
    tau = np.zeros(model.nv)
    for mu in (np.zeros(model.nv - 1), np.full(model.nv, np.nan), np.zeros((2, model.nv))):
        with pytest.raises(ValueError, match="mu"):
            contact_hessian_contraction(model, x, tau, contacts, mu)
        with pytest.raises(ValueError, match="mu"):
            impulse_hessian_contraction(model, x, contacts, mu)
    with pytest.raises(ValueError, match="tau"):
        contact_hessian_contraction(model, x, tau[1:], contacts, np.zeros(model.nv))
    with pytest.raises(TypeError):
        contact_hessian_contraction(model, x.v, tau, contacts, np.zeros(model.nv))


@pytest.mark.parametrize("name,robot", [("squat", "solo12"), ("squat", "talos_legs"), ("talos_reach", None)])
def test_ddp_solves_the_example_contact_problems(name, robot):
    example = make_problem(name, robot=robot)
    fddp, ddp = example.solve("fddp"), example.solve("ddp")
    assert fddp.converged and ddp.converged, (fddp, ddp)
    assert abs(ddp.cost - fddp.cost) <= 1e-6 * abs(fddp.cost)


def test_ddp_solves_flight_impact_stance(landing):  # noqa: F811
    problem, _ = landing
    ddp, fddp = solve_ddp(problem), solve_fddp(problem)
    assert ddp.converged and fddp.converged, (ddp, fddp)
    assert abs(ddp.cost - fddp.cost) <= 1e-6 * abs(fddp.cost)
    assert isinstance(problem.running[3].dynamics, ImpulseRobotDynamics)
    assert ddp.gap_norm < 1e-8 and Trajectory is type(ddp.xs)
