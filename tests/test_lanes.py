"""Work shared by the calling thread and a solver's second thread (``lanes``): every task runs once, in one of the
two lanes; the calling thread never waits for work queued behind the other lane; errors come back in task order;
a field's derivatives and DDP's term computed in shared pieces equal those computed at once, and an error in a
piece names the knot of the whole trajectory."""

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import lietraj
from lietraj.optimal_control.dynamics.free_field import FreeField
from lietraj.optimal_control.lanes import PIECES, knot_pieces, share


def test_pieces_cover_the_knots_in_order_and_small_work_is_not_cut():
    pool = ThreadPoolExecutor(1)
    assert knot_pieces(100, 6, pool) == [(0, 100)]  # ur5: 3600 < MIN_PIECE_WORK
    assert knot_pieces(100, 38, None) == [(0, 100)]
    pieces = knot_pieces(61, 38, pool)
    assert len(pieces) == PIECES and pieces[0][0] == 0 and pieces[-1][1] == 61
    assert all(a < b == c for (a, b), (c, _) in zip(pieces, pieces[1:]))
    assert knot_pieces(2, 100, pool) == [(0, 1), (1, 2)]
    pool.shutdown()


def test_every_task_runs_once_in_either_lane():
    lanes = [None] * 40
    with ThreadPoolExecutor(1) as pool:
        share([lambda lane, i=i: lanes.__setitem__(i, lane) for i in range(40)], pool)
    assert set(lanes) <= {0, 1} and None not in lanes
    lanes = []
    share([lambda lane: lanes.append(lane)] * 3, None)
    assert lanes == [0, 0, 0]


def test_the_calling_thread_does_not_wait_for_work_queued_behind_the_other_lane():
    """The second lane is busy until the shared call has returned: the calling thread runs every task."""
    release = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(release.wait, 10)
        lanes = []
        share([lambda lane: lanes.append(lane)] * 5, pool)
        assert lanes == [0] * 5 and not busy.done()
        release.set()


def test_errors_come_back_in_task_order_after_every_task_ran():
    ran = []

    def task(i):
        def run(lane):
            ran.append(i)
            if i in (2, 4):
                raise ValueError(f"task {i}")
        return run

    with ThreadPoolExecutor(1) as pool, pytest.raises(ValueError, match="task 2"):
        share([task(i) for i in range(6)], pool)
    assert sorted(ran) == list(range(6))


@pytest.fixture
def solo():
    return lietraj.load_robot("solo12")


def test_shared_derivatives_and_contraction_equal_those_computed_at_once(solo):
    rng = np.random.default_rng(0)
    N = 60
    X, U, MU = solo.state_space.random_trajectory(N, rng), rng.normal(size=(N, solo.n)), rng.normal(size=(N, solo.nv))
    alone, split = FreeField(solo), FreeField(solo)
    with ThreadPoolExecutor(1) as pool:
        assert len(knot_pieces(N, solo.nv, pool)) > 1
        d2 = split.shared_derivatives(X, U, pool)
        h2 = split.shared_hessian_contraction(X, U, MU, pool)
    d1, h1 = alone.derivatives(X, U), alone.hessian_contraction(X, U, MU)
    for name in ("a", "da_dq", "da_dv", "da_du"):
        assert np.array_equal(getattr(d1, name), getattr(d2, name))
    for name in ("qq", "qv", "vv", "qu"):
        assert np.array_equal(getattr(h1, name), getattr(h2, name))


def test_an_error_in_a_piece_names_the_knot_of_the_whole_trajectory(solo):
    rng = np.random.default_rng(1)
    N = 60
    X, U = solo.state_space.random_trajectory(N, rng), rng.normal(size=(N, solo.n))
    X.v[47, 3] = np.nan
    with ThreadPoolExecutor(1) as pool, pytest.raises(ValueError, match="knot 47"):
        FreeField(solo).shared_derivatives(X, U, pool)
