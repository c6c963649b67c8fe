"""Two threads solving two problems built on the same cached robot: bit-identical to solving them one after the
other (the model is read-only, every work array belongs to a workspace of one problem), and faster, the kernels
releasing the GIL. The speed-up is printed (``pytest -s``), not asserted: it depends on the machine's load; so is
the CPU time of the threaded solves over their wall time, above 1 when they overlapped. One solve in two threads
(``SolverOptions.threads``) is bit-identical to the solve in one."""

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import lietraj
from lietraj.dynamics import Workspace, aba, rnea
from lietraj.optimal_control import SolverOptions
from lietraj.problems import make_problem, talos_reach


def _problems():
    """Talos reaching for two different targets: the one cached model, and solves whose time is mostly in compiled
    kernels (a quadruped's few-iteration squat is mostly Python and numpy between kernels, which holds the GIL)."""
    return [talos_reach(horizon=30), talos_reach(target=(0.4, 0.1, 1.1), horizon=30)]


def _solve(example):
    return example.solve()


def _same(a, b) -> bool:
    xa, xb = a.xs, b.xs
    return (np.array_equal(xa.H, xb.H) and np.array_equal(xa.s, xb.s) and np.array_equal(xa.v, xb.v)
            and np.array_equal(a.us, b.us) and a.cost == b.cost and a.iterations == b.iterations
            and a.status == b.status)


def test_two_threads_on_one_cached_robot_give_the_sequential_results_and_run_in_parallel():
    examples = _problems()
    assert examples[0].model is examples[1].model is lietraj.load_robot("talos")
    for example in examples:  # compile first, so that neither timing includes it
        example.solve()
    start = time.perf_counter()
    sequential = [_solve(e) for e in _problems()]
    t_sequential = time.perf_counter() - start
    examples = _problems()
    start, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(max_workers=2) as pool:
        threaded = list(pool.map(_solve, examples))
    t_threaded = time.perf_counter() - start
    overlap = (time.process_time() - cpu) / t_threaded
    assert sequential[0].iterations > 1 and sequential[0].cost != sequential[1].cost
    for a, b in zip(sequential, threaded):
        assert _same(a, b)
    print(f"\ntwo talos_reach: one after the other {t_sequential:.3f} s, in two threads {t_threaded:.3f} s, "
          f"speed-up {t_sequential / t_threaded:.2f}, CPU time / wall time of the threads {overlap:.2f}")


def test_threads_sharing_a_model_each_with_a_workspace_agree_with_one_thread():
    model = lietraj.load_robot("solo12")
    rng = np.random.default_rng(3)
    X = model.state_space.random_trajectory(200, rng)
    A = rng.normal(size=(200, model.nv))
    expected = [(rnea(model, X[k], A[k]), aba(model, X[k], A[k])) for k in range(len(X))]

    def run(ks):
        workspace = Workspace(model)
        return [(rnea(model, X[k], A[k], workspace=workspace), aba(model, X[k], A[k], workspace=workspace))
                for k in ks for _ in range(20)][::20]

    with ThreadPoolExecutor(max_workers=2) as pool:
        halves = list(pool.map(run, (range(0, 200, 2), range(1, 200, 2))))
    for k, (tau, a) in enumerate(halves[0]):
        assert np.array_equal(tau, expected[2 * k][0]) and np.array_equal(a, expected[2 * k][1])
    for k, (tau, a) in enumerate(halves[1]):
        assert np.array_equal(tau, expected[2 * k + 1][0]) and np.array_equal(a, expected[2 * k + 1][1])


def test_a_workspace_serves_only_its_model():
    solo, ur5 = lietraj.load_robot("solo12"), lietraj.load_robot("ur5")
    x = solo.reference_state()
    try:
        rnea(solo, x, np.zeros(solo.nv), workspace=Workspace(ur5))
    except ValueError as e:
        assert "another model" in str(e) and "'ur5'" in str(e)
    else:
        raise AssertionError("a workspace of another model was accepted")
    try:
        rnea(solo, x, np.zeros(solo.nv), workspace=object())
    except TypeError as e:
        assert "Workspace" in str(e)
    else:
        raise AssertionError("a workspace that is not a Workspace was accepted")


def test_the_model_is_read_only():
    model = lietraj.load_robot("solo12")
    for a in model.packed + model.dof_tables:
        if isinstance(a, np.ndarray):
            assert not a.flags.writeable
    assert not hasattr(model, "scratch")


@pytest.mark.parametrize("name, robot, solver", [("talos_reach", None, "fddp"), ("talos_reach", None, "ddp"),
                                                 ("trot", "solo12", "fddp"), ("jump", "anymal", "ddp")])
def test_one_solve_in_two_threads_equals_the_solve_in_one(name, robot, solver):
    """With ``threads=2`` every compiled call over the dynamics' knots (the free and contact dynamics' derivatives,
    DDP's term) computes half of them in a second thread: the same operations on each knot, so the same solve to
    the bit (the trot's and the jump's friction-cone costs read the contact derivatives the dynamics kept)."""
    example = make_problem(name, robot, **({"horizon": 30} if name == "talos_reach" else {}))
    one = example.solve(solver, options=dataclasses.replace(example.options, threads=1, max_iter=20))
    example.problem.forget_evaluations()
    two = example.solve(solver, options=dataclasses.replace(example.options, threads=2, max_iter=20))
    assert one.iterations > 1 and _same(one, two)


def test_threads_must_be_a_positive_integer():
    with pytest.raises(ValueError, match="threads=0"):
        SolverOptions(threads=0)
