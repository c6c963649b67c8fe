"""The ready problems: each converges from its default guess and its solution does what the problem is about.

- ``talos_reach`` is Crocoddyl's humanoid_manipulation example term for term: the same cost at the same guess and
  the same optimum (the oracle is Crocoddyl itself, ``croc_oracle``).
- ``squat`` reaches its depth (within 10 %) with the feet fixed (drift < 1 mm) and forces inside the friction cones
  and the soles' CoP rectangles.
- ``balance`` recovers from a push, and lifts a foot (humanoid on one sole, quadruped on three feet) with the CoM
  over the support.
- the ``lietraj`` command lists, solves, saves, and reports bad input as an error message.
"""

from __future__ import annotations

import numpy as np
import pytest

from croc_oracle import perturbed_states, talos_reach_problem
from lietraj.cli import main
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.optimal_control.solution_io import load_solution
from lietraj.problems import PROBLEMS, make_problem, squat, talos_reach
from lietraj.problems.support import HUMANOIDS, robot_with_feet
from lietraj.dynamics.kinematics.center_of_mass import center_of_mass


def contact_checks(metrics: dict[str, float], drift_mm: float = 1.0) -> None:
    """Converged, feet still, forces in the cones and pushing, CoPs in the soles: strictly inside for barriers, to the
    tolerance of hard constraints (1e-6 of the weight; a CoP row's 1e-6 of weight x metre is a few micrometres)."""
    assert metrics["converged"] == 1.0
    assert metrics["foot_drift_mm"] < drift_mm
    assert metrics["friction_margin"] > -1e-6
    assert metrics["min_normal_force"] > -1e-6
    if "cop_margin_mm" in metrics:
        assert metrics["cop_margin_mm"] > -0.01


def test_talos_reach_is_crocoddyls_problem_and_reaches_its_optimum():
    ex = talos_reach()
    croc, xs, us = talos_reach_problem()
    # The same guess: quasi-static torques (Crocoddyl's quasiStatic) and constant states.
    assert np.abs(ex.us0 - np.array(us)).max() < 1e-9
    assert np.abs(np.concatenate(to_pinocchio(ex.model, ex.xs0[0])) - xs[0]).max() < 1e-12
    # The same cost function, compared at random states and controls (costs are defined off the dynamics too).
    rng = np.random.default_rng(0)
    X = perturbed_states(ex.problem, rng)
    U = ex.us0 + rng.normal(scale=5.0, size=ex.us0.shape)
    croc_cost = croc.calc([np.concatenate(to_pinocchio(ex.model, X[k])) for k in range(len(X))], list(U))
    assert abs(ex.problem.cost(X, U) - croc_cost) <= 1e-9 * croc_cost

    result = ex.solve()
    assert result.converged
    import crocoddyl

    solver = crocoddyl.SolverFDDP(croc)
    solver.solve(xs, us, 500, False, 0.1)
    assert abs(result.cost - solver.cost) <= 1e-6 * solver.cost  # the acceptance asks 0.1 %
    m = ex.metrics(result)
    assert m["target_distance_mm"] < 0.1
    contact_checks(m)


def test_talos_reach_within_talos_limits():
    """With ``limits=True`` the reach keeps Talos's torques within their URDF limits (the box) and its soles' forces
    in the cones and centres of pressure in the soles (constraints): the hand still gets to the target, the arm
    torques use their whole range, the cost rises; Crocoddyl's problem asks 6.7 times a limit."""
    ex, free = talos_reach(limits=True), talos_reach()
    result = ex.solve()
    assert result.converged and result.solver == "AL-FDDP", result
    m = ex.metrics(result)
    assert m["target_distance_mm"] < 0.1 and m["constraint_violation"] <= 1e-6
    assert 1.0 - 1e-6 <= m["torque_ratio"] <= 1.0 + 1e-9  # the box is met exactly, and binds
    # the CoP rows are met to 1e-6 of (weight x metre): a few micrometres on the sole edge
    assert m["cop_margin_mm"] >= -0.01 and m["friction_margin"] > 0
    unlimited = free.solve()
    assert free.metrics(unlimited)["torque_ratio"] > 6.0 and result.cost > 1.4 * unlimited.cost  # 5.03 and 3.48
    with pytest.raises(ValueError, match="limits must be True or False"):
        talos_reach(limits="yes")


@pytest.mark.parametrize("robot", ["talos_legs", "g1", "solo12", "anymal"])
def test_squat_reaches_its_depth_with_fixed_feet_and_forces_in_the_cones(robot):
    ex = squat(robot)
    m = ex.metrics(ex.solve())
    # The feet drift as dt squared (the contact holds the acceleration; Baumgarte only pulls back): G1's soles move
    # 1.1 mm in its 8 cm squat at dt 0.04 s, 0.3 mm at 0.02 s.
    contact_checks(m, drift_mm=1.5 if robot == "g1" else 1.0)
    assert m["depth_error_mm"] < 0.1 * m["depth_mm"]


@pytest.mark.parametrize("robot, lift", [("talos_legs", None), ("talos_legs", "right_sole_link"), ("g1", "left_sole"),
                                         ("solo12", "FL_FOOT")])
def test_balance_recovers_and_stands_with_a_foot_lifted(robot, lift):
    ex = make_problem("balance", robot, lift=lift)
    m = ex.metrics(ex.solve())
    contact_checks(m)
    assert m["com_offset_mm"] < 2.0
    assert m["final_speed"] < 1e-2
    if lift is not None:
        assert m["foot_height_error_mm"] < 1.0
        # The second phase really lacks the lifted foot's contact: a contact switch.
        phases = ex.contact_phases()
        assert len(phases) == 2 and lift not in [c.frame for c in phases[1][2].contacts]


def test_g1_stands_on_the_soles_its_feet_declare():
    """G1's URDF has neither sole frames nor a standing posture: ``FEET["g1"]`` adds both, the soles flat on the
    ground under the ankles' contact spheres and the CoM above the support polygon."""
    model, feet = robot_with_feet("g1", HUMANOIDS, "test")
    x0 = model.reference_state()
    assert next(iter(model.reference_postures)) == "standing"
    for frame in feet.frames:
        T = frame_placement(model, x0, frame)
        np.testing.assert_allclose(T[:3, :3], np.eye(3), atol=1e-12)
        assert T[2, 3] == pytest.approx(0.0, abs=1e-12)
    x = [frame_placement(model, x0, f)[0, 3] for f in feet.frames]
    assert min(x) - feet.sole[0] < center_of_mass(model, x0)[0] < max(x) + feet.sole[0]
    assert robot_with_feet("g1", HUMANOIDS, "test")[0] is model


def test_problem_registry_and_errors():
    for name, entry in PROBLEMS.items():
        assert entry.robots and entry.summary
    with pytest.raises(ValueError, match="takes the robots"):
        make_problem("talos_reach", "solo12")
    with pytest.raises(ValueError, match="unknown problem"):
        make_problem("backflip")
    with pytest.raises(ValueError, match="depth"):
        squat("solo12", depth=1.0)
    with pytest.raises(ValueError, match="lift"):
        make_problem("balance", "solo12", lift="left_sole_link")
    with pytest.raises(ValueError, match="solver"):
        squat("solo12").solve("newton")


def test_command_line_lists_solves_and_saves(tmp_path, capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in PROBLEMS) and "solo12" in out
    path = tmp_path / "squat.npz"
    assert main(["solve", "squat", "--robot", "solo12", "--horizon", "30", "--dt", "0.05", "--save", str(path)]) == 0
    out = capsys.readouterr().out
    assert "converged" in out and "foot_drift_mm" in out and "iter" in out  # the solver's log, then the metrics
    saved = load_solution(path)
    assert saved.us.shape == (30, 12) and saved.metadata["problem"] == "squat"
    plot = tmp_path / "squat.png"
    assert main(["solve", "squat", "--robot", "solo12", "--quiet", "--plot", str(plot)]) == 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()
    assert main(["solve", "squat", "--robot", "solo12", "--plot", str(tmp_path / "squat.svg")]) == 2
    assert "must end in .png or .pdf" in capsys.readouterr().err
    page = tmp_path / "squat.html"
    assert main(["solve", "squat", "--robot", "solo12", "--quiet", "--html", str(page)]) == 0
    text = page.read_text()
    assert text.lstrip().lower().startswith("<!doctype html") and 'src="http' not in text  # nothing fetched
    assert main(["solve", "squat", "--robot", "solo12", "--html", str(tmp_path / "squat.txt")]) == 2
    assert main(["solve", "squat", "--robot", "ur5"]) == 2
    assert "takes the robots" in capsys.readouterr().err
    assert main(["solve", "squat", "--robot", "solo12", "--set", "bogus=1", "--quiet"]) == 2


def test_contact_arrays_are_the_world_points_and_forces_of_the_feet():
    """The viewer's arrows: one per foot in contact at some knot, at the foot, world-axes forces (soles' rotated from
    their own axes) that carry the robot's weight, zero once the foot is lifted."""
    ex = make_problem("balance", "talos_legs", lift="right_sole_link")
    result = ex.solve()
    P, F = ex.contact_arrays(result)
    forces = ex.contact_forces(result.xs, result.us)
    assert list(forces) == ["left_sole_link", "right_sole_link"] and P.shape == F.shape == (len(result.us), 2, 3)
    lifted = np.isnan(forces["right_sole_link"][:, 0])
    assert lifted.any() and not lifted[0] and np.all(F[lifted, 1] == 0.0)
    weight = ex.model.total_mass * 9.81
    assert np.allclose(F[:5, :, 2].sum(axis=1), weight, rtol=0.15)
    for j, frame in enumerate(forces):
        pose = frame_placement(ex.model, result.xs, frame)[:-1]
        assert np.array_equal(P[:, j], pose[:, :3, 3])
        on = ~np.isnan(forces[frame][:, 0])
        assert np.allclose(F[on, j], np.einsum("kij,kj->ki", pose[on, :3, :3], forces[frame][on, :3]), atol=1e-9)


def _arrays(obj, path="", seen=None):
    """Every numpy array reachable from ``obj`` through attributes, tuples, lists and dicts, by path."""
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, (str, bytes, int, float, type)):
        return {}
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return {path: obj}
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        items = dict(getattr(obj, "__dict__", {}), **{s: getattr(obj, s) for s in getattr(type(obj), "__slots__", ())
                                                      if hasattr(obj, s)}).items()
    found = {}
    for key, value in items:
        found.update(_arrays(value, f"{path}/{key}", seen))
    return found


def test_a_built_problem_pickles_with_its_read_only_arrays():
    """Worker processes (the warm-up's, a cluster's) receive problems by pickle: the copy computes the same and its
    model arrays are read-only again, so that its kernels have the types the original's have (numba compiles
    read-only and writeable arrays apart, and numpy does not pickle the flag)."""
    import pickle

    example = make_problem("squat", "solo12", horizon=8)
    problem = example.problem
    xs, us = problem.initial_guess(example.us0, example.xs0)
    problem.derivatives(xs, us)  # fills the models' memos (locks among them), which must not travel
    copy = pickle.loads(pickle.dumps(problem))
    before, after = _arrays(problem), _arrays(copy)
    read_only = [p for p, a in before.items() if not a.flags.writeable]
    assert read_only, "the model's packed arrays are read-only"
    assert [p for p in read_only if p in after and after[p].flags.writeable] == []
    assert copy.cost(xs, us) == problem.cost(xs, us)
    d0, d1 = problem.derivatives(xs, us), copy.derivatives(xs, us)
    np.testing.assert_array_equal(d0.dynamics.F_x, d1.dynamics.F_x)
    np.testing.assert_array_equal(d0.running.l_xx, d1.running.l_xx)


@pytest.mark.parametrize("name", ["squat", "balance", "trot", "jump"])
def test_a_bad_friction_coefficient_is_quoted_as_given(name):
    with pytest.raises(ValueError, match=r"friction.* -1\.0") as error:
        make_problem(name, friction=-1.0)
    assert "-0.8" not in str(error.value)  # not the barrier's margin applied to it
