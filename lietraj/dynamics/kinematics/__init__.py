"""Frame placements, velocities, accelerations and Jacobians, the centre of mass, and their derivatives."""
