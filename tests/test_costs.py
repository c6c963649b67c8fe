"""Costs of lietraj.optimal_control: activations, residuals, residual costs, sums, user functions, the checker.

Every residual's Jacobian is checked against geometric finite differences (``numerical_jacobian``) and against
Crocoddyl 3.2.1's residual models (whose tangent chart for a free flyer is Pinocchio's, i.e. ours); every cost's
derivatives go through ``check_derivatives``, the checker users call, on Talos (floating base, random states and
bases pitched to ±90°) and UR5 (fixed base). Gauss–Newton Hessians are checked against ``[R_x R_u]ᵀ a'' [R_x R_u]``
built from finite-difference Jacobians, exact ones against finite differences of the gradient.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from functools import lru_cache

import numpy as np
import pytest

from conftest import relative_error
from lietraj.dynamics import se3
from lietraj.dynamics.lie.finite_differences import numerical_jacobian
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.dynamics.model.robots import load_robot
from lietraj.dynamics.lie.state import State, StateSpace, Trajectory
from lietraj.optimal_control.costs.activations import Quadratic, QuadraticBarrier, SmoothAbs, WeightedQuadratic
from lietraj.optimal_control.costs.costs import (
    CostDerivatives,
    CostModel,
    CostSum,
    FunctionCost,
    ResidualCost,
    control_regularization,
    joint_limit_cost,
    state_regularization,
    torque_limit_cost,
)
from lietraj.optimal_control.costs.derivative_check import check_derivatives
from lietraj.optimal_control.dynamics.discrete_dynamics import DiscreteDerivatives, DiscreteDynamics, RobotDynamics
from lietraj.optimal_control.costs.residuals import (
    CenterOfMassResidual,
    ControlResidual,
    FramePlacementResidual,
    FrameRotationResidual,
    FrameTranslationResidual,
    FrameVelocityResidual,
    JointPositionResidual,
    JointTorqueResidual,
    Residual,
    ResidualDerivatives,
    StateResidual,
)
from test_rnea_derivatives import pitched

FD_TOL, ORACLE_TOL = 1e-6, 1e-9
FRAMES = {"talos": "leg_left_6_link", "ur5": "tool0"}
CASES = ["talos", "talos pitched +90", "talos pitched -90", "ur5"]


@lru_cache(maxsize=None)
def robot(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_robot(name)


def knots(case: str, rng, N: int = 3):
    """A model, N random knots (a pitched base for the pitched cases) and controls."""
    name = case.split()[0]
    model = robot(name)
    xs = [model.state_space.random(rng, scale=0.5) for _ in range(N)]
    if "pitched" in case:
        angle = np.pi / 2 if "+90" in case else -np.pi / 2
        xs = [pitched(model, x, angle) for x in xs]
    return model, Trajectory.from_states(xs), rng.standard_normal((N, model.n))


def one(x: State) -> Trajectory:
    return Trajectory(None if x.H is None else x.H[None], x.s[None], x.v[None])


def residuals(model, rng, nu=None) -> dict:
    """One residual of each kind, with targets taken at another random state so that errors are moderate."""
    frame = FRAMES[model.name]
    other = model.state_space.random(rng, scale=0.5)
    T = frame_placement(model, other, frame)
    nu = model.n if nu is None else nu
    out = {
        "state": StateResidual(model.state_space, model.state_space.random(rng, scale=0.5), nu),
        "joint position": JointPositionResidual(model, nu),
        "frame placement": FramePlacementResidual(model, frame, T, nu),
        "frame translation": FrameTranslationResidual(model, frame, T[:3, 3], nu),
        "frame rotation": FrameRotationResidual(model, frame, T[:3, :3], nu),
        "com": CenterOfMassResidual(model, rng.standard_normal(3), nu),
    }
    for reference in ("local", "local_world_aligned", "world"):
        out[f"frame velocity {reference}"] = FrameVelocityResidual(model, frame, rng.standard_normal(6), reference, nu)
    if nu:
        out["control"] = ControlResidual(nu, rng.standard_normal(nu))
        out["joint torque"] = JointTorqueResidual(model)
    return out


def residual_fd(residual, x: State, u):
    """Geometric finite-difference (R_x, R_u) of one knot."""
    if u is None:
        return numerical_jacobian(lambda x: residual.value(one(x), None)[0], x), None
    return numerical_jacobian(lambda x, u: residual.value(one(x), u[None])[0], x, u)


def central(f, r: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central differences of a vector function of a vector, columns last."""
    cols = []
    for i in range(r.size):
        e = np.zeros(r.size)
        e[i] = h
        cols.append((np.asarray(f(r + e)) - np.asarray(f(r - e))) / (2 * h))
    return np.stack(cols, axis=-1)


# ---------------------------------------------------------------- activations


def activations(nr: int, rng) -> dict:
    A = rng.standard_normal((nr, nr))
    lower = -rng.uniform(0.2, 1.0, nr)
    upper = rng.uniform(0.2, 1.0, nr)
    lower[0], upper[1] = -np.inf, np.inf
    return {
        "quadratic": Quadratic(),
        "weighted diagonal": WeightedQuadratic(rng.uniform(0.0, 3.0, nr)),
        "weighted full": WeightedQuadratic(A @ A.T + np.eye(nr)),
        "barrier": QuadraticBarrier(lower, upper),
        "smooth abs": SmoothAbs(0.3),
    }


@pytest.mark.parametrize("kind", ["quadratic", "weighted diagonal", "weighted full", "barrier", "smooth abs"])
def test_activation_derivatives_match_finite_differences(kind, rng):
    nr = 7
    act = activations(nr, rng)[kind]
    r = 1.5 * rng.standard_normal((6, nr))
    if kind == "barrier":  # away from the kinks of the barrier, where a'' jumps
        for b in (act.lower, act.upper):
            near = np.abs(r - b) < 1e-3
            r[near] += 2e-3
    d = act.derivatives(r)
    assert d.value.shape == (6,) and d.gradient.shape == (6, nr) and d.hessian.shape == (6, nr, nr)
    assert relative_error(d.value, act.value(r)) <= 1e-15
    for k in range(len(r)):
        g = central(lambda s: act.value(s[None])[0], r[k])
        H = central(lambda s: act.derivatives(s[None]).gradient[0], r[k])
        assert relative_error(d.gradient[k], g) <= FD_TOL
        assert relative_error(d.hessian[k], H) <= FD_TOL
        assert np.array_equal(d.hessian[k], d.hessian[k].T)


def test_activation_values_follow_their_formulas(rng):
    r = rng.standard_normal((4, 3))
    W = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 3.0]])
    assert relative_error(Quadratic().value(r), 0.5 * (r ** 2).sum(1)) <= 1e-15
    assert relative_error(WeightedQuadratic(W).value(r), 0.5 * np.einsum("ki,ij,kj->k", r, W, r)) <= 1e-15
    assert relative_error(SmoothAbs(1e-3).value(r), np.abs(r).sum(1)) <= 1e-2
    assert SmoothAbs(0.5).value(np.zeros((1, 3)))[0] == 0.0


def test_barrier_is_zero_inside_its_box(rng):
    lower, upper = np.array([-1.0, -np.inf, 0.0]), np.array([2.0, 0.5, np.inf])
    act = QuadraticBarrier(lower, upper)
    inside = np.array([[-1.0, -1e9, 0.0], [2.0, 0.5, 1e9], [0.3, 0.0, 5.0]])  # bounds included
    d = act.derivatives(inside)
    assert not d.value.any() and not d.gradient.any() and not d.hessian.any()
    outside = np.array([[-1.5, 0.7, -0.25]])
    d = act.derivatives(outside)
    assert np.allclose(d.value, 0.5 * (0.25 + 0.04 + 0.0625), rtol=1e-15)
    assert np.allclose(d.gradient, [[-0.5, 0.2, -0.25]], rtol=1e-15)
    assert np.array_equal(d.diagonal, [[1.0, 1.0, 1.0]])


def test_activations_reject_bad_input():
    with pytest.raises(ValueError, match=">= 0"):
        WeightedQuadratic([1.0, -1.0])
    with pytest.raises(ValueError, match="not symmetric"):
        WeightedQuadratic([[1.0, 0.5], [0.0, 1.0]])
    with pytest.raises(ValueError, match="positive semi-definite"):
        WeightedQuadratic([[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(ValueError, match="NaN"):
        WeightedQuadratic([1.0, np.nan])
    with pytest.raises(ValueError, match="lower\\[1\\]"):
        QuadraticBarrier([0.0, 2.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="NaN"):
        QuadraticBarrier([np.nan], [1.0])
    with pytest.raises(ValueError, match="eps"):
        SmoothAbs(0.0)
    with pytest.raises(ValueError, match="shape \\(N, 2\\)"):
        WeightedQuadratic([1.0, 2.0]).value(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="NaN"):
        Quadratic().derivatives(np.array([[np.nan]]))


# ---------------------------------------------------------------- residuals


@pytest.mark.parametrize("case", CASES)
def test_residual_jacobians_match_finite_differences(case, rng):
    """R_x (geometric FD, x exp(dx)) and R_u of every residual, at every knot; the batched call equals per-knot calls."""
    model, X, U = knots(case, rng)
    for name, res in residuals(model, rng).items():
        d = res.derivatives(X, U)
        assert d.r.shape == (len(X), res.nr) and d.R_x.shape == (len(X), res.nr, model.state_space.ndx)
        assert d.R_u.shape == (len(X), res.nr, model.n)
        assert np.array_equal(d.r, res.value(X, U)), name
        for k in range(len(X)):
            R_x, R_u = residual_fd(res, X[k], U[k])
            assert relative_error(d.R_x[k], R_x) <= FD_TOL, (name, k, relative_error(d.R_x[k], R_x))
            assert relative_error(d.R_u[k], R_u) <= FD_TOL, (name, k)
            single = res.derivatives(one(X[k]), U[k][None])
            for a, b in ((single.r, d.r), (single.R_x, d.R_x), (single.R_u, d.R_u)):
                assert np.array_equal(a[0], b[k]), (name, k)


def test_terminal_residuals_take_no_controls(rng):
    model, X, _ = knots("talos", rng)
    for name, res in residuals(model, rng, nu=0).items():
        d = res.derivatives(X, None)
        assert d.R_u.shape == (len(X), res.nr, 0), name
        R_x, _ = residual_fd(res, X[1], None)
        assert relative_error(d.R_x[1], R_x) <= FD_TOL, name


def test_state_and_control_residuals_track_trajectories(rng):
    model, X, U = knots("talos pitched +90", rng)
    ref = model.state_space.random_trajectory(len(X), rng, scale=0.5)
    res = StateResidual(model.state_space, ref, model.n)
    d = res.derivatives(X, U)
    for k in range(len(X)):
        assert relative_error(d.r[k], model.state_space.difference(ref[k], X[k])) <= 1e-13
        _, J1 = model.state_space.difference_jacobians(ref[k], X[k])
        assert relative_error(d.R_x[k], J1) <= 1e-13
    with pytest.raises(ValueError, match="reference trajectory has 3 knots, X has 2"):
        res.value(Trajectory(X.H[:2], X.s[:2], X.v[:2]), U[:2])
    U_ref = rng.standard_normal(U.shape)
    control = ControlResidual(model.n, U_ref)
    assert np.array_equal(control.value(X, U), U - U_ref)
    with pytest.raises(ValueError, match="reference has 3 knots, X has 2"):
        control.value(Trajectory(X.H[:2], X.s[:2], X.v[:2]), U[:2])


@pytest.mark.parametrize("name", ["talos", "ur5"])
def test_residuals_match_crocoddyl(name, rng):
    """r, R_x, R_u equal Crocoddyl's residual models (Pinocchio's conventions and tangent chart) to 1e-9."""
    crocoddyl = pytest.importorskip("crocoddyl")
    pin = pytest.importorskip("pinocchio")
    from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
    from pin_oracle import pin_model

    model, pm = robot(name), pin_model(name)
    pd, state = pm.createData(), crocoddyl.StateMultibody(pm)
    frame, fid = FRAMES[name], pm.getFrameId(FRAMES[name])
    ours = residuals(model, rng)
    xr = ours["state"].reference
    qr, vr = to_pinocchio(model, xr)
    theirs = {
        "state": crocoddyl.ResidualModelState(state, np.concatenate([qr, vr]), model.n),
        "frame placement": crocoddyl.ResidualModelFramePlacement(state, fid, pin.SE3(ours["frame placement"].target),
                                                                 model.n),
        "frame translation": crocoddyl.ResidualModelFrameTranslation(state, fid, ours["frame translation"].target,
                                                                     model.n),
        "frame rotation": crocoddyl.ResidualModelFrameRotation(state, fid, ours["frame rotation"].target, model.n),
        "com": crocoddyl.ResidualModelCoMPosition(state, ours["com"].target, model.n),
        "control": crocoddyl.ResidualModelControl(state, ours["control"].reference),
    }
    for reference, pin_reference in (("local", pin.LOCAL), ("world", pin.WORLD)):
        key = f"frame velocity {reference}"
        theirs[key] = crocoddyl.ResidualModelFrameVelocity(state, fid, pin.Motion(ours[key].target), pin_reference,
                                                          model.n)
    assert FRAMES[name] == frame
    for _ in range(3):
        x = model.state_space.random(rng, scale=0.5)
        u = rng.standard_normal(model.n)
        q, v = to_pinocchio(model, x)
        pin.computeAllTerms(pm, pd, q, v)
        pin.updateFramePlacements(pm, pd)
        pin.computeForwardKinematicsDerivatives(pm, pd, q, v, np.zeros(pm.nv))
        for key, croc in theirs.items():
            data = croc.createData(crocoddyl.DataCollectorMultibody(pd))
            croc.calc(data, np.concatenate([q, v]), u)
            croc.calcDiff(data, np.concatenate([q, v]), u)
            d = ours[key].derivatives(one(x), u[None])
            assert relative_error(d.r[0], data.r) <= ORACLE_TOL, key
            assert relative_error(d.R_x[0], data.Rx) <= ORACLE_TOL, key
            assert relative_error(d.R_u[0], data.Ru) <= ORACLE_TOL, key


def test_residual_costs_match_crocoddyl(rng):
    """l and its Gauss–Newton derivatives equal Crocoddyl's CostModelResidual with the same activation (Talos)."""
    crocoddyl = pytest.importorskip("crocoddyl")
    pin = pytest.importorskip("pinocchio")
    from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
    from pin_oracle import pin_model

    model, pm = robot("talos"), pin_model("talos")
    pd, state = pm.createData(), crocoddyl.StateMultibody(pm)
    frame = FRAMES["talos"]
    T = frame_placement(model, model.state_space.random(rng, scale=0.5), frame)
    w = rng.uniform(0.5, 2.0, 6)
    lower, upper = -rng.uniform(0.0, 0.3, 3), rng.uniform(0.0, 0.3, 3)
    pairs = [
        (ResidualCost(FramePlacementResidual(model, frame, T), WeightedQuadratic(w)),
         crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelWeightedQuad(w),
                                     crocoddyl.ResidualModelFramePlacement(state, pm.getFrameId(frame), pin.SE3(T),
                                                                           model.n))),
        (ResidualCost(CenterOfMassResidual(model, np.zeros(3)), QuadraticBarrier(lower, upper)),
         crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelQuadraticBarrier(
             crocoddyl.ActivationBounds(lower, upper)), crocoddyl.ResidualModelCoMPosition(state, np.zeros(3), model.n))),
    ]
    for _ in range(3):
        x = model.state_space.random(rng, scale=0.5)
        u = rng.standard_normal(model.n)
        q, v = to_pinocchio(model, x)
        pin.computeAllTerms(pm, pd, q, v)
        pin.updateFramePlacements(pm, pd)
        for ours, theirs in pairs:
            data = theirs.createData(crocoddyl.DataCollectorMultibody(pd))
            theirs.calc(data, np.concatenate([q, v]), u)
            theirs.calcDiff(data, np.concatenate([q, v]), u)
            d = ours.derivatives(one(x), u[None])
            for field, ref in (("l", data.cost), ("l_x", data.Lx), ("l_u", data.Lu), ("l_xx", data.Lxx),
                               ("l_xu", data.Lxu), ("l_uu", data.Luu)):
                assert relative_error(getattr(d, field)[0], ref) <= ORACLE_TOL, (ours, field)


def test_residuals_reject_bad_input(rng):
    model, X, U = knots("talos", rng)
    res = FramePlacementResidual(model, FRAMES["talos"], np.eye(4))
    with pytest.raises(ValueError, match="unknown frame 'leg_left_6_lnk'.*did you mean 'leg_left_6_link'"):
        FramePlacementResidual(model, "leg_left_6_lnk", np.eye(4))
    with pytest.raises(ValueError, match="unknown frame 999"):
        FrameTranslationResidual(model, 999, np.zeros(3))
    with pytest.raises(ValueError, match="target"):
        FramePlacementResidual(model, FRAMES["talos"], 2 * np.eye(4))
    with pytest.raises(ValueError, match="target: reference must have shape \\(3,\\) or \\(N, 3\\)"):
        CenterOfMassResidual(model, np.zeros(2))
    # A CoM or foot path to track: one target per knot, and the knot count must match.
    targets = rng.standard_normal((len(X), 3))
    for point in (lambda t: CenterOfMassResidual(model, t), lambda t: FrameTranslationResidual(model, FRAMES["talos"], t)):
        tracking = point(targets)
        assert np.allclose(tracking.value(X, U), point(np.zeros(3)).value(X, U) - targets, atol=1e-14)
        d, fixed = tracking.derivatives(X, U), point(np.zeros(3)).derivatives(X, U)
        assert np.array_equal(d.R_x, fixed.R_x)
        with pytest.raises(ValueError, match="the target has 2 knots"):
            point(targets[:2]).value(X, U)
    with pytest.raises(ValueError, match="reference must be one of"):
        FrameVelocityResidual(model, FRAMES["talos"], np.zeros(6), "body")
    with pytest.raises(ValueError, match=f"U must have shape \\(3, {model.n}\\)"):
        res.value(X, U[:, :4])
    with pytest.raises(ValueError, match="U is None"):
        res.value(X, None)
    bad = Trajectory(X.H, X.s.copy(), X.v)
    bad.s[2, 3] = np.nan
    with pytest.raises(ValueError, match="knot 2"):
        res.derivatives(bad, U)
    bad = Trajectory(X.H.copy(), X.s, X.v)
    bad.H[1, :3, :3] *= 1.01
    with pytest.raises(ValueError, match="knot 1 has a base rotation that is not a rotation"):
        StateResidual(model.state_space, model.state_space.neutral(), model.n).value(bad, U)
    U_bad = U.copy()
    U_bad[0, 0] = np.inf
    with pytest.raises(ValueError, match="U contains NaN"):
        ControlResidual(model.n).value(X, U_bad)
    with pytest.raises(ValueError, match="fixed-base trajectory"):
        res.value(knots("ur5", rng)[1], U)
    with pytest.raises(ValueError, match="reference must have shape"):
        ControlResidual(3, np.zeros(4))


# ---------------------------------------------------------------- residual costs


def costs(model, rng) -> dict:
    """Every built-in cost: each residual through a few activations, and the conveniences."""
    res = residuals(model, rng)
    out = {}
    for name, r in res.items():
        acts = activations(r.nr, rng)
        for act in ("quadratic", "weighted full", "smooth abs") if name in ("state", "frame placement") else (
                "weighted diagonal",):
            out[f"{name} / {act}"] = ResidualCost(r, acts[act])
    out["barrier on frame translation"] = ResidualCost(res["frame translation"], activations(3, rng)["barrier"])
    out["state regularization"] = state_regularization(model.state_space, model.state_space.random(rng), 2.0, model.n)
    out["control regularization"] = control_regularization(model.n, rng.uniform(0, 1, model.n))
    out["joint limits"] = joint_limit_cost(model, margin=0.05)
    out["torque limits"] = torque_limit_cost(model)
    return out


@pytest.mark.parametrize("case", CASES)
def test_cost_derivatives_pass_the_checker(case, rng):
    """l, l_x, l_u against finite differences of the value (≤ 1e-6); exact Hessians against differences of the
    gradient — the same check_derivatives users call."""
    model, X, U = knots(case, rng, N=2)
    if case.startswith("talos"):
        # some joints outside their limits and some torques above the effort limits, so the barriers are active
        X.s[:, ::3] = np.where(X.s[:, ::3] > 0, model.upper_limit[::3] + 0.2, model.lower_limit[::3] - 0.2)
        U[:, ::4] *= 400.0
    for name, cost in costs(model, rng).items():
        report = check_derivatives(cost, X, U)
        assert report.ok, f"{name}\n{report}"
        second = {"l_xx", "l_xu", "l_uu"}
        assert (second <= {b.name for b in report.blocks}) == cost.exact_hessian, name
        assert (second <= set(report.skipped)) != cost.exact_hessian, name


@pytest.mark.parametrize("case", ["talos pitched -90", "ur5"])
def test_gauss_newton_hessians_follow_the_formula(case, rng):
    """l_xx, l_xu, l_uu = [R_x R_u]ᵀ a'' [R_x R_u] with R_x, R_u and a'' by finite differences."""
    model, X, U = knots(case, rng, N=2)
    res = residuals(model, rng)
    for name in ("state", "frame placement", "frame velocity world", "com"):
        for act in activations(res[name].nr, rng).values():
            cost = ResidualCost(res[name], act)
            d = cost.derivatives(X, U)
            for k in range(len(X)):
                R_x, R_u = residual_fd(res[name], X[k], U[k])
                r = res[name].value(X, U)[k]
                A = central(lambda s: act.derivatives(s[None]).gradient[0], r)
                for block, P, Q in (("l_xx", R_x, R_x), ("l_xu", R_x, R_u), ("l_uu", R_u, R_u)):
                    assert relative_error(getattr(d, block)[k], P.T @ A @ Q) <= FD_TOL, (name, act, block)


def test_exact_hessians_only_for_linear_residuals(rng):
    model = robot("ur5")
    ResidualCost(StateResidual(model.state_space, model.state_space.neutral(), 6), hessian="exact")
    ResidualCost(JointPositionResidual(model), SmoothAbs(0.1), hessian="exact")
    talos = robot("talos")
    with pytest.raises(ValueError, match="hessian='exact'.*StateResidual"):
        ResidualCost(StateResidual(talos.state_space, talos.state_space.neutral(), 6), hessian="exact")
    with pytest.raises(ValueError, match="hessian='exact'.*FramePlacementResidual"):
        ResidualCost(FramePlacementResidual(talos, FRAMES["talos"], np.eye(4)), hessian="exact")
    with pytest.raises(ValueError, match="hessian must be one of"):
        ResidualCost(JointPositionResidual(model), hessian="newton")
    with pytest.raises(ValueError, match="size 6"):
        ResidualCost(FramePlacementResidual(model, FRAMES["ur5"], np.eye(4)), WeightedQuadratic(np.ones(3)))


def test_cost_derivatives_batched_equal_per_knot_and_reuse_out(rng):
    model, X, U = knots("talos", rng, N=4)
    for name, cost in costs(model, rng).items():
        d = cost.derivatives(X, U)
        assert relative_error(d.l, cost.value(X, U)) <= 1e-15
        out = CostDerivatives.zeros(len(X), model.state_space.ndx, model.n)
        out.l_xx[:] = np.nan  # overwritten, not accumulated
        again = cost.derivatives(X, U, out)
        assert again is out
        for k in range(len(X)):
            single = cost.derivatives(one(X[k]), U[k][None])
            for field in ("l", "l_x", "l_u", "l_xx", "l_xu", "l_uu"):
                assert relative_error(getattr(single, field)[0], getattr(d, field)[k]) <= 1e-14, (name, field)
                assert np.array_equal(getattr(out, field), getattr(d, field)), (name, field)
    with pytest.raises(ValueError, match="out.l_x must be"):
        cost.derivatives(X, U, CostDerivatives.zeros(len(X), 3, model.n))


def test_limit_costs_use_the_model_limits(rng):
    model = robot("ur5").replace(continuous=np.array([False, True, False, False, False, False]))
    X = model.state_space.trajectory(2)
    X.s[0] = 0.5 * (model.lower_limit + model.upper_limit)
    X.s[1] = model.upper_limit + np.arange(1, 7)
    cost = joint_limit_cost(model, nu=0)
    value = cost.value(X, None)
    assert value[0] == 0.0
    excess = np.arange(1, 7.0)
    excess[1] = 0.0  # continuous: unbounded
    assert value[1] == pytest.approx(0.5 * excess @ excess, rel=1e-14)
    inside = joint_limit_cost(model, margin=0.5).value(X, np.zeros((2, 6)))
    assert inside[1] > value[1]
    with pytest.raises(ValueError, match="closes the range of joint 'elbow_joint'"):
        joint_limit_cost(model, margin=3.2)
    tau = torque_limit_cost(model)
    U = np.array([0.99 * model.effort_limit, -model.effort_limit - 1.0])
    assert tau.value(X, U)[0] == 0.0
    assert tau.value(X, U)[1] == pytest.approx(3.0, rel=1e-14)


def test_terminal_costs_take_u_none(rng):
    model, X, _ = knots("talos pitched +90", rng)
    terminal = CostSum(model.state_space, 0)
    terminal.add("state", state_regularization(model.state_space, model.state_space.random(rng), None, 0), 10.0)
    terminal.add("foot", ResidualCost(FramePlacementResidual(model, FRAMES["talos"], np.eye(4), nu=0)))
    d = terminal.derivatives(X, None)
    assert d.l_u.shape == (3, 0) and d.l_xu.shape == (3, model.state_space.ndx, 0) and d.l_uu.shape == (3, 0, 0)
    assert check_derivatives(terminal, X).ok
    with pytest.raises(ValueError, match="the cost has nu = 32, the sum nu = 0.*nu=0"):
        terminal.add("control", control_regularization(model.n))


# ---------------------------------------------------------------- sums


def test_cost_sum_adds_weighted_terms(rng):
    model, X, U = knots("talos", rng)
    terms = {name: (c, w) for (name, c), w in zip(costs(model, rng).items(), rng.uniform(0.1, 3.0, 100))}
    user = FunctionCost(model.state_space, model.n, lambda x, u: float(np.sin(x.s).sum() + u @ u),
                        lambda x, u: (np.concatenate([np.zeros(6), np.cos(x.s), np.zeros(model.nv)]), 2 * u),
                        lambda x, u: (np.diag(np.concatenate([np.zeros(6), -np.sin(x.s), np.zeros(model.nv)])),
                                      np.zeros((model.state_space.ndx, model.n)), 2 * np.eye(model.n)))
    terms["user"] = (user, 0.7)  # a cost that is not a ResidualCost: accumulated through its own derivatives
    total = CostSum(model.state_space, model.n)
    for name, (c, w) in terms.items():
        total.add(name, c, w)
    d = total.derivatives(X, U)
    expected = {f: sum(w * getattr(c.derivatives(X, U), f) for c, w in terms.values())
                for f in ("l", "l_x", "l_u", "l_xx", "l_xu", "l_uu")}
    for f, e in expected.items():
        assert relative_error(getattr(d, f), e) <= 1e-13, f
    assert relative_error(total.value(X, U), expected["l"]) <= 1e-13
    values = total.values(X, U)
    assert set(values) == set(terms) and relative_error(sum(values.values()), expected["l"]) <= 1e-13
    assert not total.exact_hessian  # some terms are Gauss–Newton

    name = "state regularization"
    total.costs[name].weight = 0.0  # switched off
    total.remove("user")
    left = sum(w * c.value(X, U) for n_, (c, w) in terms.items() if n_ not in (name, "user"))
    assert relative_error(total.value(X, U), left) <= 1e-13
    assert relative_error(total.derivatives(X, U).l, left) <= 1e-13
    with pytest.raises(ValueError, match="exists already"):
        total.add("com / weighted diagonal", user)
    with pytest.raises(KeyError, match="no term 'user'"):
        total.remove("user")
    with pytest.raises(ValueError, match="weight"):
        total.add("negative", user, -1.0)
    with pytest.raises(ValueError, match="the cost is on"):
        total.add("other robot", control_regularization(model.n, state_space=StateSpace(model.n, False)))
    empty = CostSum(model.state_space, model.n)
    assert not empty.value(X, U).any() and not empty.derivatives(X, U).l_xx.any()


# ---------------------------------------------------------------- user functions


def _vector_cost(space: StateSpace, nu: int):
    """l = Σ sin(s) sdot² + u·s[:nu] + ½|u|², with its exact gradient and Hessian."""
    n, nv = space.n, space.nv
    nh = 6 if space.floating_base else 0

    def fn(x, u):
        return float(np.sin(x.s) @ x.sdot ** 2 + u @ x.s[:nu] + 0.5 * u @ u)

    def gradient(x, u):
        g = np.zeros(space.ndx)
        g[nh:nh + n] = np.cos(x.s) * x.sdot ** 2
        g[nh:nh + nu] += u
        g[nv + nh:] = 2 * np.sin(x.s) * x.sdot
        return g, x.s[:nu] + u

    def hessian(x, u):
        H = np.zeros((space.ndx, space.ndx))
        s, v = np.arange(nh, nh + n), np.arange(nv + nh, 2 * nv)
        H[s, s] = -np.sin(x.s) * x.sdot ** 2
        H[s, v] = H[v, s] = 2 * np.cos(x.s) * x.sdot
        H[v, v] = 2 * np.sin(x.s)
        H_xu = np.zeros((space.ndx, nu))
        H_xu[nh + np.arange(nu), np.arange(nu)] = 1.0
        return H, H_xu, np.eye(nu)

    return fn, gradient, hessian


@pytest.mark.parametrize("given", ["nothing", "gradient", "gradient and hessian"])
def test_function_cost_derivatives(given, rng):
    """A plain Python cost on UR5: its numerical derivatives on the group match the exact ones."""
    model = robot("ur5")
    space = model.state_space
    fn, gradient, hessian = _vector_cost(space, 4)
    cost = FunctionCost(space, 4, fn, gradient if given != "nothing" else None,
                        hessian if given == "gradient and hessian" else None)
    X = space.random_trajectory(3, rng)
    U = rng.standard_normal((3, 4))
    d = cost.derivatives(X, U)
    hessian_tol = {"nothing": 1e-6, "gradient": 1e-8, "gradient and hessian": 0.0}[given]
    for k in range(3):
        x, u = X[k], U[k]
        g_x, g_u = gradient(x, u)
        H_xx, H_xu, H_uu = hessian(x, u)
        assert d.l[k] == fn(x, u)
        assert relative_error(d.l_x[k], g_x) <= (1e-9 if given == "nothing" else 0.0)
        assert relative_error(d.l_u[k], g_u) <= (1e-9 if given == "nothing" else 0.0)
        for block, exact in (("l_xx", H_xx), ("l_xu", H_xu), ("l_uu", H_uu)):
            assert relative_error(getattr(d, block)[k], exact) <= hessian_tol, block
    report = check_derivatives(cost, X, U)
    numerical = {"nothing": {"l_x", "l_u", "l_xx", "l_xu", "l_uu"}, "gradient": {"l_xx", "l_xu", "l_uu"},
                 "gradient and hessian": set()}[given]
    assert report.ok and set(report.skipped) == numerical


def test_function_cost_hessian_on_se3_is_the_symmetric_one(rng):
    """On SE(3) x R^6 (a rigid body's state) the height l = p_z of x exp(z) has gradient R[2, :] on z_H,lin and the
    Hessian ½ [[0, [ρ]x], [[ρ]xᵀ, 0]] in (z_lin, z_ang), ρ = R[2, :] (from p + R Jl3(w) v); the numerical Hessians,
    from values or from the exact gradient, find it (the unsymmetrised difference of the gradient would not)."""
    space = StateSpace(0, floating_base=True)
    x = space.random(rng)
    rho = x.H[2, :3]
    exact = np.zeros((12, 12))
    exact[:3, 3:6] = 0.5 * se3.so3.hat(rho)
    exact[3:6, :3] = exact[:3, 3:6].T

    def height(x, u):
        return x.H[2, 3]

    def height_gradient(x, u):
        return np.concatenate([x.H[2, :3], np.zeros(9)])

    X = one(x)
    for cost, tol in ((FunctionCost(space, 0, height), 1e-7), (FunctionCost(space, 0, height, height_gradient), 1e-9)):
        d = cost.derivatives(X, None)
        assert relative_error(d.l_x[0], height_gradient(x, None)) <= 1e-9
        assert relative_error(d.l_xx[0], exact) <= tol
    raw = numerical_jacobian(lambda x: height_gradient(x, None), x)  # the gradient's change in the moving chart: not symmetric
    assert relative_error(0.5 * (raw + raw.T), exact) <= 1e-9 and relative_error(raw, exact) > 0.1


def test_function_cost_matches_the_state_cost_on_talos(rng):
    """½|x ⊖ x_ref|²_W as a Python function (terminal, nu = 0): its numerical gradient equals the residual cost's
    exact gradient, and at x = x_ref (r = 0, Gauss–Newton exact) its numerical Hessian equals W."""
    model = robot("talos")
    space = model.state_space
    x_ref = pitched(model, space.random(rng, scale=0.5), np.pi / 2)
    w = rng.uniform(0.5, 2.0, space.ndx)

    def tracking(x, u):
        z = space.difference(x_ref, x)
        return 0.5 * z @ (w * z)

    user = FunctionCost(space, 0, tracking)
    builtin = state_regularization(space, x_ref, w, 0)
    X = Trajectory.from_states([space.random(rng, scale=0.5), x_ref])
    assert relative_error(user.value(X, None), builtin.value(X, None)) <= 1e-13
    assert relative_error(user._gradient(X[0], np.zeros(0)), builtin.derivatives(X, None).l_x[0]) <= 1e-8
    d = user.derivatives(one(X[1]), None)
    assert relative_error(d.l_xx[0], np.diag(w)) <= 1e-6


def test_checker_flags_a_wrong_user_gradient(rng):
    """A gradient with one wrong entry (on joint 3's position) fails the check, which names the entry."""
    model = robot("ur5")
    space = model.state_space
    fn, gradient, hessian = _vector_cost(space, 6)

    def wrong_gradient(x, u):
        g_x, g_u = gradient(x, u)
        g_x = g_x.copy()
        g_x[3] += 1e-3
        return g_x, g_u

    X, U = space.random_trajectory(2, rng), rng.standard_normal((2, 6))
    good = check_derivatives(FunctionCost(space, 6, fn, gradient, hessian), X, U)
    assert good.ok and "WRONG" not in str(good)
    report = check_derivatives(FunctionCost(space, 6, fn, wrong_gradient, hessian), X, U)
    assert not report.ok and not report["l_x"].ok and report["l_u"].ok and report["l_uu"].ok
    assert report["l_x"].max_abs_error == pytest.approx(1e-3, rel=1e-4)
    assert report["l_x"].component == "knot 0, z_s[3]" or report["l_x"].component == "knot 1, z_s[3]"
    assert report["l_x"].analytic - report["l_x"].numeric == pytest.approx(1e-3, rel=1e-4)
    assert "WRONG" in str(report) and "z_s[3]" in str(report)

    def wrong_hessian(x, u):
        H_xx, H_xu, H_uu = hessian(x, u)
        return H_xx, H_xu, 2.0 * H_uu

    report = check_derivatives(FunctionCost(space, 6, fn, gradient, wrong_hessian), X[0], U[0])
    assert [b.name for b in report.blocks if not b.ok] == ["l_uu"]
    assert report["l_uu"].component.startswith("u[")


def test_function_cost_rejects_bad_returns(rng):
    space = robot("ur5").state_space
    X, U = space.random_trajectory(1, rng), rng.standard_normal((1, 2))
    with pytest.raises(ValueError, match="fn must return a number"):
        FunctionCost(space, 2, lambda x, u: "cheap").value(X, U)
    with pytest.raises(ValueError, match="fn returned nan"):
        FunctionCost(space, 2, lambda x, u: np.nan).value(X, U)
    with pytest.raises(ValueError, match="gradient must return arrays of shapes"):
        FunctionCost(space, 2, lambda x, u: 0.0, lambda x, u: (np.zeros(3), np.zeros(2))).derivatives(X, U)
    with pytest.raises(ValueError, match="U must have shape \\(1, 2\\)"):
        FunctionCost(space, 2, lambda x, u: 0.0).value(X, U[:, :1])


# ---------------------------------------------------------------- the checker on dynamics


class FreeBody(DiscreteDynamics):
    """A free body driven by its body acceleration u: ν⁺ = ν + dt u, H⁺ = H exp(dt ν⁺) (the Euler step of
    discrete_dynamics with a = u), in numpy: F_x = [[Ad_{exp(-ξ)}, dt Jr(ξ)], [0, I]], F_u = [dt² Jr(ξ); dt I] with
    ξ = dt ν⁺. With ``wrong``, F_u forgets Jr (a plausible mistake)."""

    def __init__(self, dt: float, wrong: bool = False):
        self.state_space, self.nu, self.dt, self.wrong = StateSpace(0, floating_base=True), 6, dt, wrong

    def step_trajectory(self, X, U):
        V = X.v + self.dt * np.asarray(U)
        return Trajectory(np.stack([H @ se3.exp(self.dt * v) for H, v in zip(X.H, V)]), X.s.copy(), V)

    def trajectory_derivatives(self, X, U, out=None):
        N, dt = len(X), self.dt
        F_x, F_u = np.zeros((N, 12, 12)), np.zeros((N, 12, 6))
        for k in range(N):
            xi = dt * (X.v[k] + dt * U[k])
            Jr = np.eye(6) if self.wrong else se3.right_jacobian(xi)
            F_x[k, :6, :6], F_x[k, :6, 6:], F_x[k, 6:, 6:] = se3.Ad(se3.exp(-xi)), dt * se3.right_jacobian(xi), np.eye(6)
            F_u[k, :6], F_u[k, 6:] = dt * dt * Jr, dt * np.eye(6)
        return DiscreteDerivatives(F_x, F_u)


def test_checker_on_dynamics(rng):
    """Robot dynamics and a user's plug-in dynamics pass; the plug-in with a wrong F_u fails, at the SE(3) rows."""
    model = robot("ur5")
    X, U = model.state_space.random_trajectory(2, rng), rng.standard_normal((2, 6))
    report = check_derivatives(RobotDynamics(model, 0.01), X, U)
    assert report.ok and [b.name for b in report.blocks] == ["F_x", "F_u"]
    body = StateSpace(0, floating_base=True)
    X, U = body.random_trajectory(3, rng), rng.standard_normal((3, 6))
    assert check_derivatives(FreeBody(0.1), X, U).ok
    report = check_derivatives(FreeBody(0.1, wrong=True), X, U)
    assert report["F_x"].ok and not report["F_u"].ok and report.worst.name == "F_u"
    assert report["F_u"].component.split(", ")[1].startswith("next z_H[")
    with pytest.raises(TypeError, match="CostModel or a DiscreteDynamics"):
        check_derivatives(lambda x: 0.0, X)
    with pytest.raises(ValueError, match="u is required"):
        check_derivatives(FreeBody(0.1), X)


def test_user_cost_model_subclass_is_checked(rng):
    """A CostModel written from scratch (batched numpy) goes through the same checker."""

    class Speed(CostModel):
        def __init__(self, space):
            self.state_space, self.nu = space, 0

        def value(self, X, U):
            return 0.5 * (X.v ** 2).sum(1)

        def derivatives(self, X, U, out=None):
            N, nv = X.v.shape
            d = CostDerivatives.zeros(N, 2 * nv, 0)
            d.l[:], d.l_x[:, nv:] = self.value(X, U), X.v
            d.l_xx[:, nv:, nv:] = np.eye(nv)
            return d

    space = robot("talos").state_space
    assert check_derivatives(Speed(space), space.random_trajectory(2, rng)).ok


class BaseHeight(Residual):
    """A user residual in batched numpy: r = p_z − h of a free body's position, R_x[:, 0, :3] = R[2, :]
    (p(H exp(z)) = p + R z_lin + O(z²)). With ``bad``, R_x has one column too many."""

    def __init__(self, h: float, bad: bool = False):
        self.state_space, self.nr, self.nu, self.h, self.bad = StateSpace(0, floating_base=True), 1, 6, h, bad

    def value(self, X, U):
        return X.H[:, 2, 3:4] - self.h

    def derivatives(self, X, U):
        N = len(X)
        R_x = np.zeros((N, 1, 13 if self.bad else 12))
        R_x[:, 0, :3] = X.H[:, 2, :3]
        return ResidualDerivatives(self.value(X, U), R_x, np.zeros((N, 1, 6)))


def test_user_residual_plugs_into_residual_cost(rng):
    space = StateSpace(0, floating_base=True)
    X, U = space.random_trajectory(3, rng), rng.standard_normal((3, 6))
    cost = ResidualCost(BaseHeight(0.5), SmoothAbs(0.1))
    report = check_derivatives(cost, X, U)
    assert report.ok and set(report.skipped) == {"l_xx", "l_xu", "l_uu"}
    with pytest.raises(ValueError, match="inconsistent shapes: r \\(3, 1\\), R_x \\(3, 1, 13\\)"):
        ResidualCost(BaseHeight(0.5, bad=True)).derivatives(X, U)


def test_kernels_without_jit(tmp_path):
    """NUMBA_DISABLE_JIT=1 (pure Python kernels) reproduces the compiled state error and Gauss–Newton products."""
    script = textwrap.dedent("""
        import sys, warnings
        import numpy as np
        warnings.simplefilter("ignore")
        from lietraj.dynamics.model.robots import load_robot
        from lietraj.optimal_control.costs.costs import state_regularization
        model = load_robot("solo12")
        rng = np.random.default_rng(3)
        X = model.state_space.random_trajectory(2, rng)
        W = rng.uniform(0.5, 2.0, (model.state_space.ndx, model.state_space.ndx))
        cost = state_regularization(model.state_space, model.state_space.random(rng), W @ W.T, 0)
        d = cost.derivatives(X, None)
        np.savez(sys.argv[1], l=d.l, l_x=d.l_x, l_xx=d.l_xx)
    """)
    out = tmp_path / "nojit.npz"
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    subprocess.run([sys.executable, "-c", script, str(out)], check=True, env=env, timeout=120)
    model = robot("solo12")
    rng = np.random.default_rng(3)
    X = model.state_space.random_trajectory(2, rng)
    W = rng.uniform(0.5, 2.0, (model.state_space.ndx, model.state_space.ndx))
    d = state_regularization(model.state_space, model.state_space.random(rng), W @ W.T, 0).derivatives(X, None)
    ref = np.load(out)
    for f in ("l", "l_x", "l_xx"):
        assert relative_error(ref[f], getattr(d, f)) <= 1e-13, f


class _Searched(Residual):
    """A residual as another, without the pattern of its ``R_x``: the costs then search ``R_x`` for it."""

    def __init__(self, inner):
        self.inner = inner
        self.state_space, self.nr, self.nu = inner.state_space, inner.nr, inner.nu
        self.linear, self.uses_x, self.uses_u = inner.linear, inner.uses_x, inner.uses_u

    def value(self, X, U):
        return self.inner.value(X, U)

    def derivatives(self, X, U):
        d = self.inner.derivatives(X, U)
        return ResidualDerivatives(d.r, d.R_x, d.R_u)


@pytest.mark.parametrize("name", ["talos", "ur5"])
def test_a_residuals_known_pattern_gives_the_searched_products(name, rng):
    """The state residual gives its R_x's pattern (identity and base block); the cost's derivatives with it equal
    those that search R_x, and a pattern out of range is an error, not a read outside the array."""
    model = load_robot(name)
    X = model.state_space.random_trajectory(7, rng, scale=0.5)
    U = rng.normal(size=(7, model.n))
    state = StateResidual(model.state_space, model.state_space.random(rng, scale=0.5), model.n)
    assert state.derivatives(X, U).x_columns is not None
    weights = rng.uniform(0.5, 2.0, size=state.nr)
    known = ResidualCost(state, WeightedQuadratic(weights)).derivatives(X, U)
    searched = ResidualCost(_Searched(state), WeightedQuadratic(weights)).derivatives(X, U)
    for field in ("l", "l_x", "l_u", "l_xx", "l_xu", "l_uu"):
        assert relative_error(getattr(known, field), getattr(searched, field)) < 1e-15, field
    with pytest.raises(ValueError, match="x_columns"):
        ResidualCost(_OutOfRange(state), WeightedQuadratic(weights)).derivatives(X, U)


class _OutOfRange(_Searched):
    """A residual whose pattern names a column past the end of ``R_x``."""

    def derivatives(self, X, U):
        d = self.inner.derivatives(X, U)
        columns, counts = d.x_columns
        return ResidualDerivatives(d.r, d.R_x, d.R_u, (columns + 1, counts))


def test_a_cost_sum_checks_its_knots_once_and_only_while_it_evaluates(monkeypatch):
    """The terms of a cost sum accept the knots it has checked without scanning them again; outside its call they
    check them themselves (a NaN written in afterwards is an error, not passed on)."""
    from lietraj.optimal_control.costs import residuals

    model = load_robot("solo12")
    rng = np.random.default_rng(5)
    sp = model.state_space
    X, U = sp.random_trajectory(6, rng), rng.normal(size=(6, model.n))
    costs = CostSum(sp, model.n)
    costs.add("x", state_regularization(sp, sp.neutral(), 1.0, model.n))
    costs.add("u", control_regularization(model.n, 1.0, state_space=sp))
    costs.add("foot", ResidualCost(FrameTranslationResidual(model, "FL_FOOT", np.zeros(3), nu=model.n)))
    scans = []
    scan = residuals._first_bad_knot
    monkeypatch.setattr(residuals, "_first_bad_knot", lambda *a: scans.append(1) or scan(*a))
    costs.derivatives(X, U)
    costs.value(X, U)
    assert len(scans) == 2
    X.v[4, 2] = np.nan
    with pytest.raises(ValueError, match="knot 4"):
        costs.costs["foot"].cost.value(X, U)
    with pytest.raises(ValueError, match="knot 4"):
        costs.value(X, U)


def test_a_cost_sum_among_the_terms_of_another_leaves_the_outer_check_in_place(monkeypatch):
    """Nested sums: the inner sum's block ends with the outer sum's mark still on the knots, so the outer sum's
    later terms are not scanned again."""
    from lietraj.optimal_control.costs import residuals

    model = load_robot("ur5")
    sp = model.state_space
    rng = np.random.default_rng(6)
    X, U = sp.random_trajectory(4, rng), rng.normal(size=(4, model.n))
    inner = CostSum(sp, model.n)
    inner.add("x", state_regularization(sp, sp.neutral(), 1.0, model.n))
    outer = CostSum(sp, model.n)
    outer.add("inner", inner)
    outer.add("u", control_regularization(model.n, 1.0, state_space=sp))
    outer.add("x", state_regularization(sp, sp.neutral(), 2.0, model.n))
    scans = []
    scan = residuals._first_bad_knot
    monkeypatch.setattr(residuals, "_first_bad_knot", lambda *a: scans.append(1) or scan(*a))
    outer.value(X, U)
    assert len(scans) == 1
    assert getattr(X, "_checked", None) is None
