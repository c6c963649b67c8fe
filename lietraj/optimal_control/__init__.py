"""Optimal control on the robot's Lie-group state: problems, costs, iLQR / DDP / FDDP, LQR and TVLQR.

Planned in issue 5 of the tracker; this subpackage imports ``lietraj.dynamics`` and nothing above it.
"""
