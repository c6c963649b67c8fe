"""Solution files: bit-exact round trips of fixed- and floating-base solver results (states, controls, gains,
scalars, history, iterates, metadata), and a clear ValueError for every damaged, foreign or mismatched file."""

import io
import json
import zipfile

import numpy as np
import pytest

from lietraj.dynamics import se3
from lietraj.dynamics.lie.state import State, StateSpace, Trajectory
from lietraj.optimal_control.feedback.lqr import FeedbackPolicy
from lietraj.optimal_control.problem import ActionModel, Problem
from lietraj.optimal_control.solution_io import SOLUTION_FORMAT_VERSION, SavedSolution, load_solution, save_solution
from lietraj.optimal_control.solvers.solvers import SolverOptions, SolverResult, solve_fddp, solve_ilqr
from test_problem import FreeBody, StateControlCost, pendulum_problem

HISTORY_FIELDS = ("iteration", "cost", "stop", "expected", "step", "regularization", "gap_norm", "improvement",
                  "expected_step", "time", "solver")


def identical(a, b) -> bool:
    """Same dtype, shape and bytes (so NaN payloads and the sign of zero count)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def identical_states(X: Trajectory, Y: Trajectory) -> bool:
    return (X.H is None) == (Y.H is None) and (X.H is None or identical(X.H, Y.H)) and identical(X.s, Y.s) \
        and identical(X.v, Y.v)


def assert_round_trip(r: SolverResult, loaded: SavedSolution, iterates: bool):
    assert isinstance(loaded, SolverResult)
    assert identical_states(loaded.xs, r.xs)
    for name in ("us", "K", "k"):
        assert identical(getattr(loaded, name), getattr(r, name)), name
    for name in ("cost", "stop", "gap_norm", "total_time", "iterations", "status", "solver"):
        assert identical(getattr(loaded, name), getattr(r, name)), name
    assert len(loaded.history) == len(r.history) > 0
    for a, b in zip(loaded.history, r.history):
        for name in HISTORY_FIELDS:
            assert identical(getattr(a, name), getattr(b, name)), name
        if iterates:
            assert identical_states(a.xs, b.xs) and identical(a.us, b.us)
        else:
            assert a.xs is None and a.us is None


def free_body_result():
    dyn = FreeBody(dt=0.1)
    sp = dyn.state_space
    goal = State(se3.exp(np.array([0.5, -0.3, 0.2, 0.0, 0.0, 2.0])), np.zeros(0), np.zeros(6))
    running = ActionModel(dyn, StateControlCost(sp, 6, 1e-3 * np.eye(12), goal, R=0.1 * np.eye(6)))
    prob = Problem(sp.neutral(), running, StateControlCost(sp, 0, 100.0 * np.eye(12), goal), horizon=20)
    return solve_fddp(prob, prob.constant_trajectory())


@pytest.fixture(scope="module")
def pendulum_result():
    return solve_ilqr(pendulum_problem(T=30), options=SolverOptions(max_iter=4))  # stops early: stop and k non-zero


@pytest.mark.parametrize("iterates", [False, True])
def test_fixed_base_result_round_trips_bit_exactly(tmp_path, pendulum_result, iterates):
    r = pendulum_result
    assert r.status == "max_iterations" and np.abs(r.k).max() > 0
    metadata = {"robot": "pendulum", "dt": 0.05, "weights": [0.1, 0.01], "nested": {"ok": True, "none": None}}
    path = tmp_path / "swing.npz"
    save_solution(path, r, metadata, iterates=iterates)
    loaded = load_solution(path, StateSpace(1, False))
    assert_round_trip(r, loaded, iterates)
    assert loaded.metadata == metadata
    # saving what was loaded keeps everything, including the metadata
    again = tmp_path / "again"
    save_solution(again, loaded, iterates=iterates)
    assert not (tmp_path / "again.npz").exists()  # written at the path given
    assert_round_trip(r, load_solution(again), iterates)
    assert load_solution(again).metadata == metadata


def test_floating_base_result_round_trips_bit_exactly(tmp_path):
    r = free_body_result()
    assert r.converged and r.xs.H is not None
    r.stop = float("nan")  # NaN scalars survive too
    r.K[0, 0, 0] = -0.0
    path = tmp_path / "free_body.npz"
    save_solution(path, r, {"note": "reorientation"}, iterates=True)
    loaded = load_solution(path, StateSpace(0, True))
    assert_round_trip(r, loaded, iterates=True)
    assert np.isnan(loaded.stop) and np.signbit(loaded.K[0, 0, 0])
    # a loaded solution is a solver result for the rest of the package
    policy = FeedbackPolicy.from_result(loaded)
    assert identical(policy(3, r.xs[3]), r.us[3])


def test_states_controls_and_gains_alone(tmp_path, pendulum_result):
    r = pendulum_result
    path = tmp_path / "plain.npz"
    save_solution(path, (r.xs, r.us))
    loaded = load_solution(path)
    assert identical_states(loaded.xs, r.xs) and identical(loaded.us, r.us)
    assert not loaded.K.any() and not loaded.k.any() and loaded.history == [] and loaded.metadata == {}
    assert np.isnan(loaded.cost) and loaded.status == "" and loaded.iterations == 0
    save_solution(path, (r.xs, r.us, r.K, r.k))
    loaded = load_solution(path)
    assert identical(loaded.K, r.K) and identical(loaded.k, r.k)


def archive(path) -> dict:
    with np.load(path) as data:
        return {name: data[name] for name in data.files}


def test_mismatched_and_damaged_files_raise_value_errors(tmp_path, pendulum_result):
    r = pendulum_result
    good = tmp_path / "good.npz"
    save_solution(good, r, {"a": 1})
    content = good.read_bytes()
    with pytest.raises(ValueError, match="fixed-base group with 1 joints, not of StateSpace.n_joints=1, floating"):
        load_solution(good, StateSpace(1, True))
    with pytest.raises(ValueError, match="1 joints"):
        load_solution(good, StateSpace(2, False))

    def rewritten(name, **changes):
        fields = archive(good)
        fields.update(changes)
        for key in [k for k, v in changes.items() if v is None]:
            del fields[key]
        path = tmp_path / name
        with open(path, "wb") as f:
            np.savez(f, **fields)
        return path

    cases = {
        "garbage": (b"not a solution at all" * 10, "not a readable solution file"),
        "truncated": (content[: len(content) // 2], "not a readable solution file"),
        "empty": (b"", "not a readable solution file"),
    }
    flipped = bytearray(content)
    for i in range(len(content) // 3, len(content) // 3 + 8):
        flipped[i] ^= 0xFF
    cases["flipped bytes"] = (bytes(flipped), "not a readable solution file")
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(3))
    cases["a .npy file"] = (buffer.getvalue(), "not an .npz archive")
    for name, (data, match) in cases.items():
        path = tmp_path / f"{name}.npz"
        path.write_bytes(data)
        with pytest.raises(ValueError, match=match):
            load_solution(path)
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, xs=np.zeros(3))
    with pytest.raises(ValueError, match="not a lietraj solution file"):
        load_solution(foreign)
    for path, match in (
        (rewritten("newer.npz", version=np.array(SOLUTION_FORMAT_VERSION + 1)), "version 2 is not supported"),
        (rewritten("no_gains.npz", K=None), "K must be a float64 array"),
        (rewritten("short_gains.npz", K=r.K[1:]), "K must be a float64 array"),
        (rewritten("float32.npz", us=r.us.astype(np.float32)), "us must be a float64 array"),
        (rewritten("pose.npz", H=np.zeros((31, 4, 4))), "'H' is present"),
        (rewritten("n.npz", n=np.array(2)), "n = 2"),
        (rewritten("history.npz", history_cost=np.zeros(1)), "history"),
        (rewritten("metadata.npz", metadata=np.array("{not json")), "not valid JSON"),
        (rewritten("status.npz", status=None), "'status'"),
    ):
        with pytest.raises(ValueError, match=match):
            load_solution(path)
    with zipfile.ZipFile(tmp_path / "pickled.npz", "w") as z:  # an object array needs pickle: refused
        buffer = io.BytesIO()
        np.save(buffer, np.array([{"x": 1}], dtype=object), allow_pickle=True)
        z.writestr("format.npy", buffer.getvalue())
    with pytest.raises(ValueError, match="not a readable solution file"):
        load_solution(tmp_path / "pickled.npz")
    with pytest.raises(FileNotFoundError):
        load_solution(tmp_path / "missing.npz")
    assert identical_states(load_solution(good).xs, r.xs)  # the good file was never touched


def test_save_checks_its_inputs(tmp_path, pendulum_result):
    r = pendulum_result
    path = tmp_path / "x.npz"
    with pytest.raises(ValueError, match="JSON"):
        save_solution(path, r, {"array": np.zeros(2)})
    with pytest.raises(ValueError, match="dict"):
        save_solution(path, r, [1, 2])
    with pytest.raises(ValueError, match="SolverResult or a tuple"):
        save_solution(path, r.xs)
    with pytest.raises(ValueError, match="K must be"):
        save_solution(path, (r.xs, r.us, r.K[:, :, :1]))
    with pytest.raises(ValueError, match="Trajectory"):
        save_solution(path, (r.xs.s, r.us))
    assert not path.exists() and list(tmp_path.iterdir()) == []  # nothing half-written
    save_solution(path, r, {"tuple": (1, 2)})
    assert load_solution(path).metadata == json.loads(json.dumps({"tuple": (1, 2)})) == {"tuple": [1, 2]}
