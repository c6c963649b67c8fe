"""The second-order term of the commutator-free RK4 step on the group against second differences of the step."""

import pytest

from test_euler_second_order import CASES, check_against_second_differences, check_trajectory_equals_knots


@pytest.mark.parametrize("name", CASES)
def test_matches_second_differences_of_the_step(name, rng):
    check_against_second_differences("rk4", name, rng)


@pytest.mark.parametrize("name", ["talos", "solo12", "panda"])
def test_trajectory_equals_single_states(name, rng):
    check_trajectory_equals_knots("rk4", name, rng)
