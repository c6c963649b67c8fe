"""Visualization: Meshcat scenes and animations, self-contained HTML export, matplotlib plots.

Planned in issue 7 of the tracker; it imports ``lietraj.dynamics`` (forward kinematics places the meshes).
"""
