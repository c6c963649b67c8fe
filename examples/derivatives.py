"""Analytical derivatives and the geometric linearization, checked against finite differences on the group.

Solo12 with its base pitched nose-down by 90 degrees, the orientation where roll-pitch-yaw angles break down:
the linearization lives in the Lie algebra of SE(3) x R^n x R^6 x R^n and does not notice.

Run: python examples/derivatives.py
"""

import time

import numpy as np

import lietraj
from lietraj.dynamics import aba, linearize, numerical_jacobian, rnea_derivatives, se3

solo = lietraj.load_robot("solo12")
rng = np.random.default_rng(1)
x = solo.state_space.random(rng, scale=0.5)
x.H[:3, :3] = se3.exp(np.array([0, 0, 0, 0, np.pi / 2, 0]))[:3, :3]
u = rng.normal(size=solo.n)  # joint torques; the base is unactuated

# Inverse-dynamics derivatives (IDSVA): dtau/dq, dtau/dv and M, all in the state's tangent basis.
a = rng.normal(size=solo.nv)
d = rnea_derivatives(solo, x, a)
print(f"dtau/dq {d.dtau_dq.shape}, dtau/dv {d.dtau_dv.shape}, M {d.M.shape}")

# zdot = A z + B u for x = x_bar exp(z): A (2 nv x 2 nv), B (2 nv x n).
lin = linearize(solo, x, u)
print(f"A {lin.A.shape}, B {lin.B.shape}")

# Check them as a user would check their own derivatives: central differences on the group.
J_x, J_u = numerical_jacobian(lambda y, w: aba(solo, y, np.concatenate([np.zeros(6), w])), x, u)
err_x = np.abs(lin.A[solo.nv:] - J_x).max() / np.abs(J_x).max()
err_u = np.abs(lin.B[solo.nv:] - J_u).max() / np.abs(J_u).max()
print(f"relative error of dFD/dx: {err_x:.1e}, of dFD/du: {err_u:.1e}")

# Along a trajectory, all knots are linearized by one compiled call.
X, U = solo.state_space.random_trajectory(100, rng), rng.normal(size=(100, solo.n))
linearize(solo, X, U)  # the first call loads (or compiles) the kernels
t = time.perf_counter()
L = linearize(solo, X, U)
print(f"A, B at 100 knots: {(time.perf_counter() - t) * 1e3:.1f} ms, A {L.A.shape}")
