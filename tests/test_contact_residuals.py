"""Contact-force residuals: Jacobians against geometric finite differences (through ``check_derivatives`` and
directly), values against hand computations from ``contact_dynamics``, and the cone / centre-of-pressure signs.

Cases: Talos on both soles (6d, LOCAL) and Solo12 on its four feet (3d, LOCAL_WORLD_ALIGNED), random states and
torques, Baumgarte gains on (so that every term of the contact dynamics acts).
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np
import pytest

from conftest import relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.contacts.contact_dynamics import Contact, contact_dynamics
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.dynamics.model.robots import load_robot
from lietraj.dynamics.lie.state import State, Trajectory
from lietraj.optimal_control.costs.contact_residuals import (
    CenterOfPressureResidual,
    ContactForceResidual,
    FrictionConeResidual,
    WrenchConeResidual,
    barrier_activation,
)
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.costs.costs import ResidualCost
from lietraj.optimal_control.costs.derivative_check import check_derivatives

FEET = {
    "talos": (("left_sole_link", "right_sole_link"), "6d", "local"),
    "solo12": (("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"), "3d", "local_world_aligned"),
}
MU, HALF_LENGTH, HALF_WIDTH = 0.7, 0.1, 0.05
FD_TOL = 1e-6


@lru_cache(maxsize=None)
def robot(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_robot(name)


def case(name: str, rng, N: int = 2):
    """(model, contacts, X, U): a random state and N - 1 neighbours of it (as consecutive knots are; far-apart
    knots would put the targets metres away and the forces, hence the cost, so high that the finite differences
    lose digits), random torques; contacts with Baumgarte gains and targets off the first knot's foot poses."""
    model = robot(name)
    space = model.state_space
    x0 = space.random(rng, scale=0.5)
    X = Trajectory.from_states([x0] + [space.integrate(x0, 0.05 * rng.standard_normal(space.ndx)) for _ in range(N - 1)])
    frames, kind, reference = FEET[name]
    contacts = [Contact(f, kind, reference, (30.0, 8.0), frame_placement(model, X[0], f) @ se3.exp(0.05 * rng.standard_normal(6)))
                for f in frames]
    return model, contacts, X, rng.standard_normal((N, model.n))


def residuals(name: str, model, contacts, rng) -> dict:
    nc = sum(c.dim for c in contacts)
    out = {
        "force": ContactForceResidual(model, contacts, 10.0 * rng.standard_normal(nc)),
        "cone 4 facets": FrictionConeResidual(model, contacts, 1, MU),
        "cone 6 facets": FrictionConeResidual(model, contacts, 0, MU, facets=6),
        "cone exact": FrictionConeResidual(model, contacts, len(contacts) - 1, MU, facets=None),
    }
    soles = {contacts[0].frame: (HALF_LENGTH, HALF_WIDTH)} if FEET[name][1] == "6d" else None
    out["wrench cone"] = WrenchConeResidual(model, contacts, MU, soles)
    if FEET[name][1] == "6d":
        out["centre of pressure"] = CenterOfPressureResidual(model, contacts, 0, HALF_LENGTH, HALF_WIDTH)
    return out


@pytest.mark.parametrize("name", list(FEET))
def test_wrench_cone_stacks_the_cones_and_soles_of_every_contact(name, rng):
    """Its rows are those of one FrictionConeResidual per contact, each followed by the CoP rows of its sole."""
    model, contacts, X, U = case(name, rng)
    res = residuals(name, model, contacts, rng)["wrench cone"]
    rows = []
    for i, c in enumerate(contacts):
        rows.append(FrictionConeResidual(model, contacts, i, MU).value(X, U))
        if name == "talos" and i == 0:
            rows.append(CenterOfPressureResidual(model, contacts, 0, HALF_LENGTH, HALF_WIDTH).value(X, U))
    assert np.allclose(res.value(X, U), np.hstack(rows), rtol=1e-12, atol=1e-9)
    with pytest.raises(ValueError, match="without a contact"):
        WrenchConeResidual(model, contacts, MU, {"not_a_contact": (0.1, 0.05)})
    if name == "solo12":
        with pytest.raises(ValueError, match="6d contact"):
            WrenchConeResidual(model, contacts, MU, {contacts[0].frame: (0.1, 0.05)})


def one(x: State) -> Trajectory:
    return Trajectory(None if x.H is None else x.H[None], x.s[None], x.v[None])


@pytest.mark.parametrize("name", list(FEET))
def test_costs_pass_the_derivative_checker(name, rng):
    """l_x = R_xᵀ r and l_u = R_uᵀ r of a quadratic cost on every residual, at two knots."""
    model, contacts, X, U = case(name, rng)
    for kind, residual in residuals(name, model, contacts, rng).items():
        report = check_derivatives(ResidualCost(residual), X, U)
        assert report.ok and {b.name for b in report.blocks} == {"l", "l_x", "l_u"}, f"{kind}\n{report}"
        assert report.worst.relative_error <= FD_TOL, kind


@pytest.mark.parametrize("name", list(FEET))
def test_residual_jacobians_match_finite_differences(name, rng):
    """R_x and R_u themselves (every row), by central geometric differences of ``value`` at one knot."""
    model, contacts, X, U = case(name, rng, N=1)
    x, u = X[0].copy(), U[0].copy()
    for kind, residual in residuals(name, model, contacts, rng).items():
        d = residual.derivatives(X, U)
        assert d.R_x.shape == (1, residual.nr, 2 * model.nv) and d.R_u.shape == (1, residual.nr, model.n)
        R_x, R_u = numerical_jacobian(lambda xx, uu: residual.value(one(xx), uu[None])[0], x, u)
        assert relative_error(d.R_x[0], R_x) <= FD_TOL, kind
        assert relative_error(d.R_u[0], R_u) <= FD_TOL, kind
        assert np.array_equal(d.r, residual.value(X, U)), kind


@pytest.mark.parametrize("name", list(FEET))
def test_values_are_the_hand_formulas_of_the_contact_forces(name, rng):
    model, contacts, X, U = case(name, rng)
    tau = np.concatenate([np.zeros((len(X), 6)), U], axis=1)
    lam = contact_dynamics(model, X, tau, contacts).lagrangian
    res = residuals(name, model, contacts, rng)
    c = np.sqrt(0.5)
    assert np.allclose(res["force"].value(X, U), lam - res["force"].reference, rtol=1e-12, atol=1e-9)
    o = 3 if FEET[name][1] == "3d" else 6  # contact 1
    fx, fy, fz = lam[:, o], lam[:, o + 1], lam[:, o + 2]
    expected = np.stack([fx - MU * c * fz, fy - MU * c * fz, -fx - MU * c * fz, -fy - MU * c * fz, -fz], axis=1)
    assert np.allclose(res["cone 4 facets"].value(X, U), expected, rtol=1e-12, atol=1e-9)
    o = lam.shape[1] - 3 if FEET[name][1] == "3d" else lam.shape[1] - 6  # last contact
    fx, fy, fz = lam[:, o], lam[:, o + 1], lam[:, o + 2]
    expected = np.sqrt(fx ** 2 + fy ** 2 + 1e-6) - MU * fz
    assert np.allclose(res["cone exact"].value(X, U)[:, 0], expected, rtol=1e-12, atol=1e-9)
    if "centre of pressure" in res:
        nx, ny, fz = lam[:, 3], lam[:, 4], lam[:, 2]
        expected = np.stack([ny - HALF_LENGTH * fz, -ny - HALF_LENGTH * fz, nx - HALF_WIDTH * fz,
                             -nx - HALF_WIDTH * fz], axis=1)
        assert np.allclose(res["centre of pressure"].value(X, U), expected, rtol=1e-12, atol=1e-9)


def forces_at(residual, contact_force: np.ndarray) -> np.ndarray:
    """Stacked forces (1, nc), zero except the residual's contact."""
    F = np.zeros((1, residual.nc))
    F[0, residual.offset:residual.offset + len(contact_force)] = contact_force
    return F


def test_cone_residuals_are_negative_inside_and_positive_outside():
    model = robot("solo12")
    contacts = [Contact(f, "3d", "local_world_aligned") for f in FEET["solo12"][0]]
    cones = {m: FrictionConeResidual(model, contacts, 2, MU, facets=m) for m in (4, 8, None)}
    fz = 40.0
    for angle in np.linspace(0.0, 2 * np.pi, 13):
        direction = np.array([np.cos(angle), np.sin(angle)])
        inside = np.append(0.6 * MU * fz * direction, fz)  # inside every inscribed pyramid (cos(π/4) > 0.6)
        outside = np.append(1.05 * MU * fz * direction, fz)
        for m, cone in cones.items():
            assert (cone.residual_of_forces(forces_at(cone, inside)) <= 0.0).all(), (m, angle)
            assert (cone.residual_of_forces(forces_at(cone, outside)) > 0.0).any(), (m, angle)
    # between the pyramid (whose 4 facets are closest to the centre along the axes) and the cone: the linearization
    # is conservative, the exact cone accepts it
    between = np.array([0.9 * MU * fz, 0.0, fz])
    assert (cones[4].residual_of_forces(forces_at(cones[4], between)) > 0.0).any()
    assert cones[None].residual_of_forces(forces_at(cones[None], between))[0, 0] < 0.0
    # a pulling foot is outside, even with no tangential force; zero tangential force is differentiable
    for cone in cones.values():
        assert (cone.residual_of_forces(forces_at(cone, np.array([0.0, 0.0, -1.0]))) > 0.0).any()
    r = cones[None].residual_of_forces(forces_at(cones[None], np.array([0.0, 0.0, fz])))
    assert r[0, 0] == pytest.approx(1e-3 - MU * fz)


def test_barrier_cost_is_zero_inside_the_cone_and_penalizes_outside():
    model = robot("solo12")
    contacts = [Contact(f, "3d", "local_world_aligned") for f in FEET["solo12"][0]]
    cone = FrictionConeResidual(model, contacts, 0, MU)
    barrier = barrier_activation(cone.nr)
    inside = cone.residual_of_forces(forces_at(cone, np.array([1.0, -2.0, 30.0])))
    outside = cone.residual_of_forces(forces_at(cone, np.array([30.0, 0.0, 30.0])))
    assert barrier.value(inside)[0] == 0.0
    assert barrier.value(outside)[0] == pytest.approx(0.5 * (30.0 - MU * np.sqrt(0.5) * 30.0) ** 2)


def test_centre_of_pressure_inside_and_outside_the_sole():
    model = robot("talos")
    contacts = [Contact(f, "6d") for f in FEET["talos"][0]]
    cop = CenterOfPressureResidual(model, contacts, 1, HALF_LENGTH, HALF_WIDTH)
    fz = 400.0
    for px, py, inside in [(0.0, 0.0, True), (0.09, -0.04, True), (-0.099, 0.049, True), (0.11, 0.0, False),
                           (0.0, -0.06, False), (-0.2, 0.1, False)]:
        torque = np.cross([px, py, 0.0], [5.0, -3.0, fz])  # the torque at the origin of a force applied at p
        r = cop.residual_of_forces(forces_at(cop, np.concatenate([[5.0, -3.0, fz], torque])))
        assert (r <= 0.0).all() if inside else (r > 0.0).any(), (px, py)


def test_residuals_reject_bad_input(rng):
    model, contacts, X, U = case("talos", rng, N=1)
    solo = robot("solo12")
    point = [Contact("FL_FOOT", "3d", "local_world_aligned")]
    with pytest.raises(ValueError, match="unknown frame"):
        ContactForceResidual(model, [Contact("left_sole_lnk", "6d")])
    with pytest.raises(ValueError, match="at least one contact"):
        ContactForceResidual(model, [])
    with pytest.raises(ValueError, match="reference must have shape"):
        ContactForceResidual(model, contacts, np.zeros(5))
    with pytest.raises(ValueError, match="contact_index 2 is out of range"):
        FrictionConeResidual(model, contacts, 2, MU)
    with pytest.raises(ValueError, match="mu"):
        FrictionConeResidual(model, contacts, 0, -1.0)
    with pytest.raises(ValueError, match="facets"):
        FrictionConeResidual(model, contacts, 0, MU, facets=2)
    with pytest.raises(ValueError, match="6d contact with reference='local'"):
        CenterOfPressureResidual(solo, point, 0, HALF_LENGTH, HALF_WIDTH)
    with pytest.raises(ValueError, match="6d contact with reference='local'"):
        CenterOfPressureResidual(model, [Contact(f, "6d", "local_world_aligned") for f in FEET["talos"][0]], 0,
                                 HALF_LENGTH, HALF_WIDTH)
    force = ContactForceResidual(model, contacts)
    with pytest.raises(ValueError, match="U must have shape"):
        force.value(X, U[:, :3])
    with pytest.raises(ValueError, match="NaN"):
        force.value(X, np.full_like(U, np.nan))
    with pytest.raises(ValueError, match="forces must be"):
        force.residual_of_forces(np.zeros((1, 3)))


@pytest.mark.parametrize("name", list(FEET))
def test_residuals_share_the_contact_derivatives_of_their_dynamics(name, rng):
    """With ``dynamics=``, the residual's derivatives are those it computes alone, taken from the dynamics' last
    contact-derivative evaluation at the same knots (one evaluation for both), and a change of the knots is seen."""
    model, contacts, X, U = case(name, rng, N=3)
    dyn = ContactRobotDynamics(model, 0.01, contacts)
    alone, shared = WrenchConeResidual(model, dyn.contacts, MU), WrenchConeResidual(model, dyn.contacts, MU, dynamics=dyn)
    dyn.trajectory_derivatives(X, U)
    d = dyn.contact_derivatives(X, U)
    assert dyn.contact_derivatives(Trajectory(X.H, X.s.copy(), X.v), U.copy()) is d  # equal inputs: reused
    for a, b in zip(shared.derivatives(X, U).__dict__.values(), alone.derivatives(X, U).__dict__.values()):
        assert np.array_equal(a, b)
    U2 = U.copy()
    U2[1, 0] += 1.0
    assert dyn.contact_derivatives(X, U2) is not d
    for a, b in zip(shared.derivatives(X, U2).__dict__.values(), alone.derivatives(X, U2).__dict__.values()):
        assert np.array_equal(a, b)
    assert np.array_equal(shared.value(X, U2), alone.value(X, U2))
    assert np.array_equal(shared.value(X, U2 + 1.0), alone.value(X, U2 + 1.0))
    other = ContactRobotDynamics(model, 0.01, contacts[:1])
    with pytest.raises(ValueError, match="dynamics must be a ContactRobotDynamics"):
        WrenchConeResidual(model, dyn.contacts, MU, dynamics=other)
    with pytest.raises(ValueError, match="dynamics must be a ContactRobotDynamics"):
        WrenchConeResidual(model, dyn.contacts, MU, damping=1e-6, dynamics=dyn)


def test_a_problem_reads_each_runs_contact_derivatives_from_its_dynamics(rng, monkeypatch):
    """A wrench-cone term held by two runs of one stance (a gait's phases recur) is evaluated per run, each run's
    forces and derivatives read from what the dynamics kept of that run (one contact-derivative evaluation per run,
    none for the costs), equal to the term computing them alone; its values likewise after a rollout."""
    from lietraj.optimal_control import ActionModel, CostSum, Problem, RobotDynamics
    from lietraj.optimal_control.dynamics import contact_field

    model, contacts, X, U = case("solo12", rng, N=9)
    stance, flight = ContactRobotDynamics(model, 0.01, contacts), RobotDynamics(model, 0.01)
    sp = model.state_space

    def costs(dynamics):
        c = CostSum(sp, model.n)
        c.add("cone", ResidualCost(WrenchConeResidual(model, stance.contacts, MU, dynamics=dynamics)))
        return c

    shared, alone = costs(stance), costs(None)
    flying = ActionModel(flight, CostSum(sp, model.n))
    problems = [Problem(X[0], [ActionModel(stance, c)] * 3 + [flying] * 2 + [ActionModel(stance, c)] * 3,
                        CostSum(sp, 0)) for c in (shared, alone)]
    solved = []
    real = contact_field.contact_derivatives
    monkeypatch.setattr(contact_field, "contact_derivatives",
                        lambda *a, **k: solved.append(len(a[1])) or real(*a, **k))
    d_shared = problems[0].derivatives(X, U[:8])
    assert solved == [3, 3]  # the dynamics' two runs; the costs read them
    d_alone = problems[1].derivatives(X, U[:8])
    for name in ("l", "l_x", "l_u", "l_xx", "l_xu", "l_uu"):
        np.testing.assert_allclose(getattr(d_shared.running, name), getattr(d_alone.running, name), rtol=1e-13,
                                   atol=1e-13)
    Xr = problems[0].rollout(U[:8])
    np.testing.assert_allclose(problems[0].running_costs(Xr, U[:8]), problems[1].running_costs(Xr, U[:8]), rtol=1e-13)
