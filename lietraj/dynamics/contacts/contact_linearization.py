"""Geometric linearization of the contact-constrained dynamics on the state group (seed 000 Props. 1-3 extended
to rigid contacts, which the seed leaves to future work).

Under the rigid ``contacts`` (``contact_dynamics``) the state ``x = (H, s, nu, sdot)`` (or ``(s, sdot)``) still moves
by ``xdot = x lambda(x, u)`` with the left-trivialized field ``lambda = (nu, sdot, a(x, u))``; only the acceleration
changes: ``a`` is the KKT solution of ``M a + b = S u + J^T f``, ``J a + gamma = 0`` instead of ``FD = M^-1 (S u - b)``
(eq. 19). Eqs. (12)-(13) hold for any field on the group, so with ``x = x_bar exp(z)``, ``z = [z_H; z_s; z_nu;
z_sdot]``, ``zdot = A z + B w`` keeps the shape of eq. (22)::

    A = [ -ad(nu)  0   I   0 ]       B = [ 0       ]
        [  0       0   0   I ]           [ 0       ]
        [  da/dq        da/dv ]          [ da/du   ]

The first two block rows are the kinematics and ``-ad_lambda`` (eq. 27), unchanged. What changes is the lower
block row. Seed 000 eq. (42)/(53) writes it as ``-M^-1 D ID-bar`` and ``M^-1 S`` (eq. 31); differentiating the
KKT system instead (``contact_dynamics_derivatives``: ``F = ID - J^T f - tau = 0`` and ``C = J a + gamma = 0``
with ``f`` held at its solution) gives, with the contact-space inverse inertia ``L = J M^-1 J^T (+ damping I)``
and the constraint-projected inverse inertia ``P = M^-1 - M^-1 J^T L^-1 J M^-1``::

    da/dx = -P D_x(ID - J^T f) - M^-1 J^T L^-1 D_x C,        da/du = P S

``D_x(ID - J^T f)`` is eq. (42)'s ``D ID-bar`` with the contact forces added as body wrenches fixed in the contact
frames, evaluated, as eq. (53) requires, at the consistent acceleration ``a``; ``D_x C`` is the derivative of
the contact-frame acceleration (with the Baumgarte terms). Both take the ``H`` columns as left-trivialized
(body-twist) derivatives, as eq. (42) does, so no Euler angles or quaternions enter and the result is as
accurate with the base pitched at +-90 degrees as anywhere else. ``B`` keeps only the joint columns of
``da/dtau`` (the base is unactuated; fixed base: all of them). The contact forces are linearized alongside:
``f(x_bar exp(z), u + w) ~ f + F_z z + F_w w``, each contact's rows in its own reference.

The constraint leaves a mark on ``A``: ``J P = 0`` so ``J B = 0`` (torques cannot move the contacts), and at rest
(``v = 0``, contacts on their targets) the constraint-consistent directions ``{J z_q = 0, J z_v = 0}`` are an
invariant subspace of ``A`` on which ``(A, B)`` is the linearized closed-chain robot; the complementary directions
follow the Baumgarte law ``e'' = -Kv e' - Kp e`` whatever ``u`` (``balance`` builds on this).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lietraj.dynamics._checks import checked_real, checked_state, checked_vector, require_finite
from lietraj.dynamics.contacts.contact_dynamics import Contact, contact_tuple
from lietraj.dynamics.contacts.contact_dynamics_derivatives import contact_derivatives
from lietraj.dynamics.algorithms.linearization import _NO_NU, _NO_NU_BATCH, _assemble, _assemble_batch, generalized_force
from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.model.workspace import Workspace, workspace_for
from lietraj.dynamics.lie.state import State, Trajectory


@dataclass(eq=False)
class ContactLinearization:
    """``zdot = A z + B w`` of the contact-constrained dynamics about ``(x, u)`` (module docstring): ``A`` (2 nv,
    2 nv), ``B`` (2 nv, n) in the tangent order ``[z_H; z_s; z_nu; z_sdot]``, the acceleration ``a`` (nv,), the
    stacked contact forces ``forces`` (nc,) and their linearization ``F_z`` (nc, 2 nv), ``F_w`` (nc, n). A leading
    axis N for a trajectory."""

    A: np.ndarray
    B: np.ndarray
    a: np.ndarray
    forces: np.ndarray
    F_z: np.ndarray
    F_w: np.ndarray


def contact_linearization(model: RobotModel, x: State | Trajectory, u, contacts: Sequence[Contact],
                          damping: float = 0.0, workspace: Workspace | None = None) -> ContactLinearization:
    """Continuous-time A, B of the dynamics under the rigid ``contacts`` about the state ``x`` and joint torques
    ``u`` ((n,); the base of a floating-base robot is unactuated), in the Lie algebra of the state group.

    ``x`` a Trajectory with ``u`` (N, n) linearizes every knot. ``damping`` is ``contact_dynamics``' regularization
    of redundant contacts. With no contacts this is ``linearize``. Raises ValueError as ``contact_dynamics`` does
    (shapes, NaN, unknown frames, redundant contacts without damping). ``workspace``: a ``Workspace(model)`` whose
    work arrays are reused (without one, each call allocates its own).
    """
    what = "contact_linearization"
    x = checked_state(model, x, what)
    workspace = workspace_for(model, workspace, what)
    single = type(x) is State
    U = checked_vector(u, model.n, None if single else len(x), model, what, "u")
    contacts = contact_tuple(model, contacts, what)
    damping = checked_real(damping, model, what, "damping")
    require_finite(model, what, x, u=U)
    d = contact_derivatives(model, x, generalized_force(model, U, what), contacts, damping, None, None, workspace, what)
    nv, n, lead = model.nv, model.n, U.shape[:-1]
    A, B = np.empty(lead + (2 * nv, 2 * nv)), np.empty(lead + (2 * nv, n))
    da_dq, da_dv, da_dtau = (np.ascontiguousarray(m) for m in (d.da_dq, d.da_dv, d.da_dtau))
    if single:
        _assemble(np.ascontiguousarray(x.v[:6]) if model.floating_base else _NO_NU, da_dq, da_dv, da_dtau, A, B)
    else:
        _assemble_batch(np.ascontiguousarray(x.v[:, :6]) if model.floating_base else _NO_NU_BATCH, da_dq, da_dv,
                        da_dtau, A, B)
    F_z = np.concatenate([d.df_dq, d.df_dv], axis=-1)
    return ContactLinearization(A, B, d.a, d.forces, F_z, np.array(d.df_dtau[..., nv - n:]))


__all__ = ["ContactLinearization", "contact_linearization"]
