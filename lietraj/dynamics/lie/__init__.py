"""Lie groups: SO(3), SE(3) and the robot's state group, with exp/log, ⊕/⊖ and their Jacobians, in plain
and compiled forms; trajectories of states; geometric finite differences on the group."""
