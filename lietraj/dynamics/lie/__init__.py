"""Lie groups: SO(3) (``so3``), SE(3) (``se3``) and the robot's state group (``state``), with exp/log, ⊕/⊖ and their
Jacobians, in plain (numpy, checked) and compiled (numba helpers on tuples, unchecked) forms side by side, behind
one interface (``group.LieGroup``); trajectories of states (``state.Trajectory``); geometric finite differences on
the group (``finite_differences``)."""
