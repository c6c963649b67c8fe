"""Recursive Newton-Euler inverse dynamics: tau = M(q) a + h(q, v) - J^T f_ext, linear-first, body frames.

For a floating base the acceleration ``a = [nu_dot; s_ddot]`` is taken as given, whether or not it is
consistent with zero base wrench, and the first six entries of the result are the wrench the base would need
(expressed in the base frame): this is the extended inverse dynamics ID-bar of seed 000 eqs. (39)-(41), the
quantity its derivatives (Tables 5-8) differentiate. Pinocchio's ``rnea`` with a free-flyer computes the same.

Recursion (Featherstone's RNEA, seed 002 Table 2 in linear-first form), gravity entering as a fictitious
acceleration ``-g`` of the world:

    forward  v_i = iX_l v_l + S_i sdot_i,   a_i = iX_l a_l + S_i sddot_i + v_i x S_i sdot_i,
             f_i = I_i a_i + v_i x* I_i v_i - f_ext_i
    backward tau_i = S_i^T f_i + armature_i sddot_i,   f_l += lX_i^* f_i

External wrenches ``f_ext`` are given per body as ``[force; torque]``, in the body frame (Pinocchio's ``fext``
in LOCAL), or with ``fext_reference="world"`` in the world frame at the world origin (WORLD), converted to the
body frames first.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from lietraj._jit import kernel
from lietraj.dynamics._checks import (
    check_dynamics_inputs,
    BAD_A,
    BAD_N,
    OK,
    base_pose,
    base_poses,
    checked_state,
    checked_vector,
    checked_wrenches,
    kernel_wrenches,
    raise_for_status,
)
from lietraj.dynamics._spatial import (
    act_force,
    act_inv_motion,
    add,
    base_placement,
    cross_force,
    cross_motion,
    dot,
    inertia_times,
    joint_placement,
    load3,
    motion_subspace,
    mtv,
    scale,
    store3,
    store9,
)
from lietraj.dynamics.algorithms.mimic import expand_velocity, expanded_workspace, reduce_force
from lietraj.dynamics.kinematics.kinematics import body_placements
from lietraj.dynamics.model.model import JOINT_FREE, MF_ARMATURE, ModelArrays, RobotModel
from lietraj.dynamics.model.workspace import Workspace, workspace_for
from lietraj.dynamics.lie.state import State, Trajectory

# Work-array columns: placement R (9), p (3), velocity (6), acceleration (6), force (6).
_R, _P, _V, _A, _F, _COLS = 0, 9, 12, 18, 24, 30
_ZERO3 = (0.0, 0.0, 0.0)


class RneaWork(NamedTuple):
    """RNEA's work array: per body its placement, velocity, acceleration and force (columns above)."""

    bodies: np.ndarray


def rnea_work(model: RobotModel) -> RneaWork:
    return RneaWork(np.zeros((model.nb, _COLS)))


@kernel
def rnea_core(mi, mf, g, H, s, v, a, fext, W, tau):
    """RNEA for one state; writes tau. Assumes checked inputs."""
    nb = mi.shape[0]
    has_fext = fext.shape[0] > 0
    for i in range(nb):
        parent, jt, iv, js = mi[i, 0], mi[i, 1], mi[i, 2], mi[i, 3]
        if jt == JOINT_FREE:
            R, p = base_placement(H)
            vi, wi = (v[0], v[1], v[2]), (v[3], v[4], v[5])
            ai = add((a[0], a[1], a[2]), mtv(R, (-g[0], -g[1], -g[2])))
            bi = (a[3], a[4], a[5])
        else:
            R, p = joint_placement(mf, jt, i, s[js])
            Sv, Sw = motion_subspace(mf, jt, i)
            qd, qdd = v[iv], a[iv]
            if parent >= 0:
                vi, wi = act_inv_motion(R, p, load3(W, parent, _V), load3(W, parent, _V + 3))
                ai, bi = act_inv_motion(R, p, load3(W, parent, _A), load3(W, parent, _A + 3))
            else:
                vi, wi = _ZERO3, _ZERO3
                ai, bi = act_inv_motion(R, p, (-g[0], -g[1], -g[2]), _ZERO3)
            vJ, wJ = scale(Sv, qd), scale(Sw, qd)
            vi, wi = add(vi, vJ), add(wi, wJ)
            cv, cw = cross_motion(vi, wi, vJ, wJ)
            ai = add(add(ai, scale(Sv, qdd)), cv)
            bi = add(add(bi, scale(Sw, qdd)), cw)
        store9(W, i, _R, R)
        store3(W, i, _P, p)
        store3(W, i, _V, vi)
        store3(W, i, _V + 3, wi)
        store3(W, i, _A, ai)
        store3(W, i, _A + 3, bi)
        hv, hw = inertia_times(mf, i, vi, wi)
        fa, na = inertia_times(mf, i, ai, bi)
        fb, nbias = cross_force(vi, wi, hv, hw)
        f, n = add(fa, fb), add(na, nbias)
        if has_fext:
            f = (f[0] - fext[i, 0], f[1] - fext[i, 1], f[2] - fext[i, 2])
            n = (n[0] - fext[i, 3], n[1] - fext[i, 4], n[2] - fext[i, 5])
        store3(W, i, _F, f)
        store3(W, i, _F + 3, n)
    for i in range(nb - 1, -1, -1):
        parent, jt, iv = mi[i, 0], mi[i, 1], mi[i, 2]
        f, n = load3(W, i, _F), load3(W, i, _F + 3)
        if jt == JOINT_FREE:
            tau[0], tau[1], tau[2], tau[3], tau[4], tau[5] = f[0], f[1], f[2], n[0], n[1], n[2]
        else:
            Sv, Sw = motion_subspace(mf, jt, i)
            tau[iv] = dot(Sv, f) + dot(Sw, n) + mf[i, MF_ARMATURE] * a[iv]
        if parent >= 0:
            R = (W[i, 0], W[i, 1], W[i, 2], W[i, 3], W[i, 4], W[i, 5], W[i, 6], W[i, 7], W[i, 8])
            fp, np_ = act_force(R, load3(W, i, _P), f, n)
            for k in range(3):
                W[parent, _F + k] += fp[k]
                W[parent, _F + 3 + k] += np_[k]


@kernel
def rnea_kernel(model, H, s, v, a, fext, work, tau):
    m, w = ModelArrays(*model), RneaWork(*work)
    status = check_dynamics_inputs(m.joints, m.floating, m.n, tau.shape[0], H, s, v, a, BAD_A, fext)
    if status == OK:
        rnea_core(m.joints, m.bodies, m.gravity, H, s, v, a, fext, w.bodies, tau)
    return status


@kernel
def rnea_batch_kernel(model, H, S, V, A, fext, work, TAU):
    """RNEA over N knots in one compiled call; returns (status, failing knot)."""
    m, w = ModelArrays(*model), RneaWork(*work)
    N = S.shape[0]
    has_fext = fext.shape[1] > 0
    if (V.shape[0] != N or A.shape[0] != N or TAU.shape[0] != N or (m.floating and H.shape[0] != N)
            or (has_fext and fext.shape[0] != N)):
        return BAD_N, 0
    nv = TAU.shape[1]
    for k in range(N):
        Hk = H[k] if m.floating else H[0]
        fk = fext[k] if has_fext else fext[0]
        status = check_dynamics_inputs(m.joints, m.floating, m.n, nv, Hk, S[k], V[k], A[k], BAD_A, fk)
        if status != OK:
            return status, k
        rnea_core(m.joints, m.bodies, m.gravity, Hk, S[k], V[k], A[k], fk, w.bodies, TAU[k])
    return OK, 0


def body_frame_wrenches(model: RobotModel, x: State | Trajectory, fext, workspace: Workspace | None = None
                        ) -> np.ndarray:
    """Per-body wrenches ``[f; n]`` given in the world frame at the world origin, expressed in each body's frame:
    ``(R^T f, R^T (n - p x f))`` with ``(R, p)`` the body's world pose. ``(nb, 6)``, or ``(N, nb, 6)``."""
    P = body_placements(model, x, workspace=workspace)
    R, p = P[..., :3, :3], P[..., :3, 3]
    fe = np.asarray(fext, dtype=np.float64)
    if fe.shape != p.shape[:-1] + (6,):
        raise ValueError(f"{model.name}: world-frame fext must have shape {p.shape[:-1] + (6,)}, got {fe.shape}")
    f, n = fe[..., :3], fe[..., 3:]
    RT = np.swapaxes(R, -1, -2)
    return np.concatenate([np.einsum("...ij,...j->...i", RT, f),
                           np.einsum("...ij,...j->...i", RT, n - np.cross(p, f))], axis=-1)


def local_wrenches(model: RobotModel, x: State | Trajectory, fext, fext_reference: str, what: str,
                   workspace: Workspace | None = None):
    """Checked ``fext`` (None or an array) in the body frames: as given for ``fext_reference="local"``, converted for
    ``"world"``."""
    if fext_reference not in ("local", "world"):
        raise ValueError(f"{what}: fext_reference must be 'local' or 'world', got {fext_reference!r}")
    if fext is None or fext_reference == "local":
        return fext
    return body_frame_wrenches(model, x, fext, workspace)


def inverse_dynamics(model: RobotModel, x: State | Trajectory, a, fext, fext_reference: str,
                     workspace: Workspace | None, what: str) -> np.ndarray:
    """``rnea`` for a state checked by ``checked_state``, its errors reported as those of ``what``."""
    if model.mimic:  # tau = G^T ID_full(expanded state, G a)
        a = checked_vector(a, model.nv, None if type(x) is State else len(x), model, what, "a")
        tau = inverse_dynamics(model.expanded, model.expand_state(x), expand_velocity(model, a), fext, fext_reference,
                               expanded_workspace(model, workspace, what), what)
        return reduce_force(model, tau)
    workspace = workspace_for(model, workspace, what)
    work = workspace.work(rnea_work)
    single = type(x) is State
    N = None if single else len(x)
    a = checked_vector(a, model.nv, N, model, what, "a")
    fe = checked_wrenches(fext, N, model, what)
    fe = kernel_wrenches(local_wrenches(model, x, fe, fext_reference, what, workspace), not single)
    if single:
        tau = np.empty(model.nv)
        status = rnea_kernel(model.packed, base_pose(x), x.s, x.v, a, fe, work, tau)
        if status != OK:
            raise_for_status(status, model, what, None, x, a=a, fext=fe)
        return tau
    TAU = np.empty((N, model.nv))
    status, k = rnea_batch_kernel(model.packed, base_poses(x), x.s, x.v, a, fe, work, TAU)
    if status != OK:
        raise_for_status(status, model, what, k, x, a=a, fext=fe)
    return TAU


def rnea(model: RobotModel, x: State | Trajectory, a, fext=None, fext_reference: str = "local",
         workspace: Workspace | None = None) -> np.ndarray:
    """Inverse dynamics tau = M a + h - sum_i J_i^T f_ext_i (for a floating base, ``tau[:6]`` is the base wrench).

    ``x`` is a State (returns ``(nv,)``) or a Trajectory of N knots with ``a`` of shape ``(N, nv)``
    (returns ``(N, nv)``, computed in one compiled call). ``fext`` is optional: ``(nb, 6)`` wrenches
    ``[force; torque]`` per body, or ``(N, nb, 6)`` for a trajectory, in each body's frame
    (``fext_reference="local"``) or in the world frame at the world origin (``"world"``). ``workspace``: a
    ``Workspace(model)`` whose work arrays are reused (without one, each call allocates its own). Raises TypeError
    for an argument of the wrong kind (None, a string) and ValueError for a wrong shape or a NaN, naming it.
    """
    return inverse_dynamics(model, checked_state(model, x, "rnea"), a, fext, fext_reference, workspace, "rnea")


def nonlinear_effects(model: RobotModel, x: State | Trajectory, workspace: Workspace | None = None) -> np.ndarray:
    """h(q, v) = C(q, v) v + g(q): the inverse dynamics at zero acceleration."""
    x = checked_state(model, x, "nonlinear_effects")
    zeros = np.zeros(model.nv) if type(x) is State else np.zeros((len(x), model.nv))
    return inverse_dynamics(model, x, zeros, None, "local", workspace, "nonlinear_effects")


def generalized_gravity(model: RobotModel, x: State | Trajectory, workspace: Workspace | None = None) -> np.ndarray:
    """g(q): the generalized gravity force (the inverse dynamics at zero velocity and acceleration; ``x.v`` is not
    read)."""
    x = checked_state(model, x, "generalized_gravity")
    if type(x) is State:
        zeros = np.zeros(model.nv)
        return inverse_dynamics(model, State(x.H, x.s, zeros), zeros, None, "local", workspace, "generalized_gravity")
    zeros = np.zeros((len(x), model.nv))
    return inverse_dynamics(model, Trajectory(x.H, x.s, zeros), zeros, None, "local", workspace, "generalized_gravity")
