"""Centre of mass of the whole robot in the world frame: position, velocity and Jacobian.

Standard (Pinocchio's ``centerOfMass`` and ``jacobianCenterOfMass``), on top of the forward kinematics of
``kinematics.py``. With ``m_i``, ``h_i = m_i c_i`` and ``(oR_i, op_i)`` the mass, first moment and world pose
of body ``i``, and ``M`` the total mass::

    c = sum_i (m_i op_i + oR_i h_i) / M,        cdot = sum_i oR_i (m_i v_i + w_i x h_i) / M

Jacobian: a unit rate of dof ``e`` of joint ``j`` moves the subtree of ``j`` (mass ``m_j*``, first moment
``mc_j*`` in world coordinates) with the world-origin twist ``(v_e, w_e) = oX_j S_j e``, so its column is
``(m_j* v_e + w_e x mc_j*) / M``; the subtree sums accumulate in one backward pass.
"""

from __future__ import annotations

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics._checks import BAD_N, OK, checked_state
from lietraj.dynamics._spatial import add, cross, load3, load9, mv, scale, store3
from lietraj.dynamics.kinematics.kinematics import (
    PLACEMENT,
    VELOCITY,
    W_MASS,
    W_MC,
    W_P,
    W_R,
    W_V,
    batch_size,
    check_inputs,
    forward_kinematics_core,
    kinematics_arrays,
    model_tables,
    run,
    world_motion_subspace,
)
from lietraj.dynamics.algorithms.mimic import expanded_workspace, reduce_jacobian
from lietraj.dynamics.model.model import JOINT_FREE, MF_H, MF_MASS, ModelArrays, RobotModel
from lietraj.dynamics.model.workspace import Workspace
from lietraj.dynamics.lie.state import State, Trajectory


@kernel
def center_of_mass_kernel(model, H, s, v, level, work, out):
    """World CoM position (level PLACEMENT) or velocity (level VELOCITY) into out (3,)."""
    mi, mf, floating, n, W = kinematics_arrays(model, work)
    status = check_inputs(floating, n, H, s, v, v, PLACEMENT)
    if status != OK:
        return status
    forward_kinematics_core(mi, mf, H, s, v, v, level, mi.shape[0] - 1, W)
    c = center_of_mass_core(mi, mf, level, W)
    out[0], out[1], out[2] = c[0], c[1], c[2]
    return OK


@helper
def center_of_mass_core(mi, mf, level, W):
    """World CoM position (level PLACEMENT) or velocity (level VELOCITY) from the forward kinematics in W."""
    total, c = 0.0, (0.0, 0.0, 0.0)
    for i in range(mi.shape[0]):
        m, h, oR = mf[i, MF_MASS], load3(mf, i, MF_H), load9(W, i, W_R)
        total += m
        if level == PLACEMENT:
            c = add(c, add(scale(load3(W, i, W_P), m), mv(oR, h)))
        else:
            c = add(c, mv(oR, add(scale(load3(W, i, W_V), m), cross(load3(W, i, W_V + 3), h))))
    return scale(c, 1.0 / total)


@kernel
def center_of_mass_batch_kernel(model, H, S, V, level, work, OUT):
    floating = ModelArrays(*model).floating
    N = batch_size(floating, H, S, V, V, PLACEMENT, OUT)
    if N < 0:
        return BAD_N, 0
    for t in range(N):
        status = center_of_mass_kernel(model, H[t] if floating else H[0], S[t], V[t], level, work, OUT[t])
        if status != OK:
            return status, t
    return OK, 0


@helper
def subtree_mass_moments(mi, mf, W):
    """Mass (W_MASS) and world first moment (W_MC) of every body's subtree, from the world poses in W; returns the
    total mass."""
    nb, total = mi.shape[0], 0.0
    for i in range(nb):
        m = mf[i, MF_MASS]
        total += m
        W[i, W_MASS] = m
        store3(W, i, W_MC, add(scale(load3(W, i, W_P), m), mv(load9(W, i, W_R), load3(mf, i, MF_H))))
    for i in range(nb - 1, 0, -1):
        parent = mi[i, 0]
        if parent >= 0:
            W[parent, W_MASS] += W[i, W_MASS]
            store3(W, parent, W_MC, add(load3(W, parent, W_MC), load3(W, i, W_MC)))
    return total


@kernel
def center_of_mass_jacobian_kernel(model, H, s, v, work, J):
    """Jacobian (3, nv) of the world CoM with respect to v."""
    mi, mf, floating, n, W = kinematics_arrays(model, work)
    status = check_inputs(floating, n, H, s, v, v, PLACEMENT)
    if status != OK:
        return status
    forward_kinematics_core(mi, mf, H, s, v, v, PLACEMENT, mi.shape[0] - 1, W)
    center_of_mass_jacobian_core(mi, mf, W, J)
    return OK


@helper
def center_of_mass_jacobian_core(mi, mf, W, J):
    """The CoM Jacobian into the first three rows of J (its first nv columns) from the world poses in W (the
    subtree columns of W are overwritten)."""
    total = subtree_mass_moments(mi, mf, W)
    for j in range(mi.shape[0]):
        m, mc, iv = W[j, W_MASS], load3(W, j, W_MC), mi[j, 2]
        for c in range(6 if mi[j, 1] == JOINT_FREE else 1):
            ve, we = world_motion_subspace(mi, mf, W, j, c)
            col = add(scale(ve, m), cross(we, mc))
            J[0, iv + c], J[1, iv + c], J[2, iv + c] = col[0] / total, col[1] / total, col[2] / total


@kernel
def center_of_mass_jacobian_batch_kernel(model, H, S, V, work, OUT):
    floating = ModelArrays(*model).floating
    N = batch_size(floating, H, S, V, V, PLACEMENT, OUT)
    if N < 0:
        return BAD_N, 0
    for t in range(N):
        status = center_of_mass_jacobian_kernel(model, H[t] if floating else H[0], S[t], V[t], work, OUT[t])
        if status != OK:
            return status, t
    return OK, 0


_COM = (center_of_mass_kernel, center_of_mass_batch_kernel)
_COM_JACOBIAN = (center_of_mass_jacobian_kernel, center_of_mass_jacobian_batch_kernel)


def check_mass(model: RobotModel, what: str) -> None:
    if not model_tables(model).total_mass > 0.0:
        raise ValueError(f"{what}({model.name}): the robot has no mass, its centre of mass is undefined")


def center_of_mass(model: RobotModel, x: State | Trajectory, workspace: Workspace | None = None) -> np.ndarray:
    """World position (3,) of the centre of mass (Pinocchio's ``centerOfMass``); (N, 3) for a trajectory.
    ``workspace``: a ``Workspace(model)`` whose work arrays are reused (without one, each call allocates its own);
    the same for every function of this module."""
    x = checked_state(model, x, "center_of_mass")
    check_mass(model, "center_of_mass")
    if model.mimic:  # on the full tree (``kinematics``)
        return center_of_mass(model.expanded, model.expand_state(x), expanded_workspace(model, workspace, "center_of_mass"))
    return run(model, x, "center_of_mass", _COM, (3,), PLACEMENT, workspace=workspace)


def center_of_mass_velocity(model: RobotModel, x: State | Trajectory, workspace: Workspace | None = None) -> np.ndarray:
    """World velocity (3,) of the centre of mass (Pinocchio's ``data.vcom[0]``); (N, 3) for a trajectory."""
    x = checked_state(model, x, "center_of_mass_velocity")
    check_mass(model, "center_of_mass_velocity")
    if model.mimic:
        return center_of_mass_velocity(model.expanded, model.expand_state(x),
                                       expanded_workspace(model, workspace, "center_of_mass_velocity"))
    return run(model, x, "center_of_mass_velocity", _COM, (3,), VELOCITY, workspace=workspace)


def center_of_mass_jacobian(model: RobotModel, x: State | Trajectory, workspace: Workspace | None = None) -> np.ndarray:
    """Jacobian (3, nv) with ``cdot = J v`` (Pinocchio's ``jacobianCenterOfMass``); (N, 3, nv) for a trajectory."""
    x = checked_state(model, x, "center_of_mass_jacobian")
    check_mass(model, "center_of_mass_jacobian")
    if model.mimic:
        return reduce_jacobian(model, center_of_mass_jacobian(model.expanded, model.expand_state(x),
                                                              expanded_workspace(model, workspace,
                                                                                 "center_of_mass_jacobian")))
    return run(model, x, "center_of_mass_jacobian", _COM_JACOBIAN, (3, model.nv), workspace=workspace)
