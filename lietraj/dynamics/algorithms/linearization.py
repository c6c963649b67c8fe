"""Geometric linearization of the robot dynamics on its state group (seed 000 Props. 1-3), free of singularities.

The state ``x = (H, s, nu, sdot)`` (floating base) or ``(s, sdot)`` (fixed base) moves by ``xdot = x lambda(x, u)``
with the left-trivialized vector field ``lambda = (nu, sdot, nu_dot, sddot)`` and ``(nu_dot, sddot) = FD(x, u)``
(seed 000 eqs. 9-10, 24). Writing a perturbed state as ``x = x_bar exp(z)``, ``z = [z_H; z_s; z_nu; z_sdot]``,
gives ``zdot = A z + B w`` with (eqs. 12-13, 22-23, 31, 42)::

    A = [ -ad(nu)  0   I   0 ]       B = [ 0         ]       ad(nu) = [[w]x  [v]x]    for nu = [v; w]
        [  0       0   0   I ]           [ 0         ]                [ 0    [w]x]
        [  dFD/dq        dFD/dv ]        [ M^{-1} S  ]

``-ad(nu)`` is ``-ad_lambda`` restricted to the SE(3) factor (eq. 27); the other identity blocks are the
kinematics. ``dFD/dq`` is the left-trivialized derivative (its base columns perturb ``H exp(z_H)`` with ``nu``
held fixed, digest P1) and, with ``dFD/dv``, is ``-M^{-1} dID-bar`` evaluated at the consistent acceleration
(eq. 53); ``aba_derivatives`` computes both, and ``M^{-1} S`` (the joint columns of ``M^{-1}``, Prop. 2) by the
recursive IMMAmb. Nothing here uses Euler angles or quaternions, so A and B are as accurate with the base
pitched at +-90 degrees as anywhere else. For a fixed base the first row block is ``[0 I]`` and ``B = [0; M^{-1}]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lietraj._jit import kernel
from lietraj.dynamics._checks import checked_state, checked_vector, checked_wrenches, require_finite, result_arrays
from lietraj.dynamics.algorithms.aba_derivatives import ForwardDynamicsDerivatives, aba_derivatives_of_checked
from lietraj.dynamics.algorithms.rnea_derivatives import fext_reference_code
from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.lie.se3 import ad_into
from lietraj.dynamics.model.workspace import Workspace, workspace_for
from lietraj.dynamics.lie.state import State, Trajectory


@dataclass(eq=False)
class Linearization:
    """``zdot = A z + B w`` about ``(x, u)``: ``A`` (2 nv, 2 nv), ``B`` (2 nv, n_u) in the tangent order
    ``[z_H; z_s; z_nu; z_sdot]``, and the acceleration ``a = FD(x, u)`` at that point. A leading axis N for a
    trajectory."""

    A: np.ndarray
    B: np.ndarray
    a: np.ndarray


def generalized_force(model: RobotModel, u: np.ndarray, what: str) -> np.ndarray:
    """The nv-vector of generalized forces for the joint torques ``u`` (zero wrench on a floating base)."""
    n_u = model.n
    if u.shape[-1] != n_u:
        raise ValueError(f"{what}({model.name}): u must hold the {n_u} joint torques, got shape {u.shape}")
    if not model.floating_base:
        return u
    tau = np.zeros(u.shape[:-1] + (model.nv,))
    tau[..., 6:] = u
    return tau


@kernel
def _assemble(nu, da_dq, da_dv, Minv, A, B):
    """Fill A and B of eq. (42) from the forward-dynamics derivatives; ``nu`` is empty for a fixed base."""
    nv, nu_ = da_dq.shape[0], B.shape[1]
    A[:, :] = 0.0
    B[:, :] = 0.0
    for r in range(nv):
        A[r, nv + r] = 1.0
        for c in range(nv):
            A[nv + r, c] = da_dq[r, c]
            A[nv + r, nv + c] = da_dv[r, c]
        for c in range(nu_):
            B[nv + r, c] = Minv[r, nv - nu_ + c]
    if nu.shape[0] == 6:
        ad_into(A, 0, 0, nu, -1.0)


@kernel
def _assemble_batch(NU, DA_DQ, DA_DV, MINV, A, B):
    for k in range(A.shape[0]):
        _assemble(NU[k] if NU.shape[0] == A.shape[0] else NU[0], DA_DQ[k], DA_DV[k], MINV[k], A[k], B[k])


_NO_NU, _NO_NU_BATCH = np.zeros(0), np.zeros((1, 0))


def _derivatives_scratch(workspace: Workspace, lead: tuple[int, ...]) -> ForwardDynamicsDerivatives:
    """The workspace's arrays for the forward-dynamics derivatives that A and B are assembled from."""
    nv = workspace.model.nv
    shapes = (lead + (nv,), lead + (nv, nv), lead + (nv, nv), lead + (nv, nv))
    return workspace.cached(("linearize", lead),
                            lambda: ForwardDynamicsDerivatives(*(np.zeros(shape) for shape in shapes)))


def linearize(model: RobotModel, x: State | Trajectory, u, fext=None, fext_reference: str = "local",
              out: Linearization | None = None, workspace: Workspace | None = None) -> Linearization:
    """Continuous-time A, B of the dynamics about the state ``x`` and joint torques ``u`` (``(n,)``; the base of a
    floating-base robot is unactuated), in the Lie algebra of the state group (seed 000 eq. 42).

    ``x`` a Trajectory (with ``u`` of shape (N, n)) linearizes every knot, the derivatives coming from one compiled
    call. ``fext`` (optional) are external wrenches held constant, as in ``aba_derivatives``. ``out``, a previous
    result of the same shapes, is overwritten and returned instead of allocating new arrays; so are the work arrays
    of ``workspace``, a ``Workspace(model)`` (without one, each call allocates its own).
    """
    what = "linearize"
    x = checked_state(model, x, what)
    single = type(x) is State
    N = None if single else len(x)
    U = checked_vector(u, model.n, N, model, what, "u")
    fext = checked_wrenches(fext, N, model, what)
    ref = fext_reference_code(fext_reference, what)
    nv, lead = model.nv, U.shape[:-1]
    workspace = workspace_for(model, workspace, "linearize")
    try:
        d = aba_derivatives_of_checked(model, x, generalized_force(model, U, "linearize"), fext, ref,
                                       _derivatives_scratch(workspace, lead), workspace)
    except ValueError:  # the kernel checks its inputs: a NaN or an infinity among ours is named as ours
        require_finite(model, what, x, u=U, fext=fext)
        raise
    A, B, a = result_arrays(out, Linearization, (lead + (2 * nv, 2 * nv), lead + (2 * nv, model.n), lead + (nv,)),
                            "linearize")
    if single:
        _assemble(x.v[:6] if model.floating_base else _NO_NU, d.da_dq, d.da_dv, d.da_dtau, A, B)
    else:
        _assemble_batch(x.v[:, :6] if model.floating_base else _NO_NU_BATCH, d.da_dq, d.da_dv, d.da_dtau, A, B)
    a[...] = d.a
    return Linearization(A, B, a) if out is None else out
