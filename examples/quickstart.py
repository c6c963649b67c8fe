"""A first tour of lietraj: load Talos, evaluate its dynamics at its half-sitting posture, check them.

Run: python examples/quickstart.py
"""

import time

import numpy as np

import lietraj
from lietraj.dynamics import aba, center_of_mass, frame_placement, mass_matrix, rnea

talos = lietraj.load_robot("talos")
print(talos)

# The state x = (H, s, nu, sdot): base pose in SE(3), joint positions, base body twist, joint velocities.
x = talos.reference_state("half_sitting")
print(f"base height {x.H[2, 3]:.3f} m, CoM {np.round(center_of_mass(talos, x), 3)} m")
print("left sole at", np.round(frame_placement(talos, x, "left_sole_link")[:3, 3], 3))

# Torques that hold the posture if the base were held (the base wrench is tau[:6]).
tau = rnea(talos, x, np.zeros(talos.nv))
print(f"gravity wrench on the base {np.round(tau[:3], 1)} N, knee torques {np.round(tau[[9, 15]], 1)} N m")

# Forward dynamics inverts inverse dynamics; M is symmetric positive definite.
rng = np.random.default_rng(0)
x = talos.state_space.random(rng)
a = rng.normal(size=talos.nv)
print(f"|aba(rnea(a)) - a| = {np.abs(aba(talos, x, rnea(talos, x, a)) - a).max():.1e}")
M = mass_matrix(talos, x)
print(f"mass matrix {M.shape}, smallest eigenvalue {np.linalg.eigvalsh(M).min():.2e}")

# A 100-knot trajectory is evaluated in one compiled call.
X = talos.state_space.random_trajectory(100, rng)
A = rng.normal(size=(100, talos.nv))
TAU = rnea(talos, X, A)  # the first call loads (or compiles) the kernel
t = time.perf_counter()
TAU = rnea(talos, X, A)
print(f"inverse dynamics of 100 knots: {(time.perf_counter() - t) * 1e6:.0f} us, result {TAU.shape}")
