"""Ready-made problems for real robots: balancing, squats, reaching while balancing.

Planned in issue 6 of the tracker; a problem is data built from ``lietraj.dynamics`` and
``lietraj.optimal_control`` and draws nothing.
"""
