"""Shared test settings: the robots every algorithm is checked on against Pinocchio."""

import numpy as np
import pytest

# A humanoid, a quadruped with prismatic-free legs, a hydraulic quadruped, an arm, an arm with prismatic
# fingers, and a second humanoid with unaligned revolute axes.
ORACLE_ROBOTS = ["talos", "solo12", "hyq", "ur5", "panda", "icub"]


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


def relative_error(a, b) -> float:
    """max |a - b| / max(|b|, 1): the relative error measure of the acceptance criteria."""
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1.0))
