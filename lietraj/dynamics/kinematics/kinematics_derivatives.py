"""First-order derivatives of frame kinematics and of the centre of mass, for costs and contact constraints.

Everything is differentiated with respect to the configuration in the tangent basis of the state group
(README, Conventions): the base columns are the body-twist chart ``H exp(z_H)``, then ``s``; this is what Pinocchio's
derivative functions return and what ``numerical_jacobian(...)[:, :nv]`` measures. Spatial vectors are linear
first; references "local", "local_world_aligned" and "world" are Pinocchio's LOCAL, LOCAL_WORLD_ALIGNED, WORLD
(see ``kinematics.py``).

Ground-frame identities (seed 001 §2.1, Appendix C: J1, (52), J6, J7, J8, J9, permuted to linear first). A frame
is rigidly attached to body ``i``; for each dof column of each ancestor joint ``j`` of ``i`` (walking ``parent``),
``s = oX_j S_j e`` is the column's motion subspace in world coordinates at the world origin, ``v_l``, ``a_l`` are
world-coordinate twists and spatial accelerations (``a_l`` without gravity) and ``l = λ(j)`` is j's parent
(zero twist and acceleration for the world)::

    ∂v_i/∂q = (v_l - v_i) x s                          ∂v_i/∂v = s
    ∂a_i/∂q = (a_l - a_i) x s + (v_l - v_i) x (v_l x s)
    ∂a_i/∂v = (v_l - v_i + v_j) x s                    ∂a_i/∂a = s

(for a 1-dof joint ``v_j x s = v_l x s``; for the free joint ``v_j`` is the base twist). A configuration change
along ``s`` also moves the frame by the world twist ``s``. Writing ``δX = ∂X_i/∂q + X_i x s`` (the change seen
in axes moving with the frame: ``δv = v_l x s``, ``δa = a_l x s + (v_l - v_i) x (v_l x s)``) and ``Y`` for the
quantity in the requested reference, the ``q``-columns are::

    local:                fX_o δX
    local_world_aligned:  (δX_lin - p x δX_ang, δX_ang) + (s_ang x Y_lin, s_ang x Y_ang)   (p: frame origin)
    world:                δX + s x Y

and the ``v``/``a``-columns are the world columns changed to the reference as the frame Jacobian's are. LOCAL and
WORLD equal Pinocchio's ``getFrame{Velocity,Acceleration}Derivatives``. For LOCAL_WORLD_ALIGNED these are the
derivatives of ``frame_velocity`` / ``frame_acceleration`` in that reference (the reference point moves with the
frame origin ``p``); Pinocchio 4.0.0 returns the world derivative shifted to ``p`` instead, which lacks
``(Y_ang x ∂p/∂q, 0)`` with ``∂p/∂q`` the linear rows of the LOCAL_WORLD_ALIGNED Jacobian (its issue #2702). The
classical acceleration ``Y_a,lin + Y_w x Y_v,lin`` (``frame_acceleration(..., classical=True)``) adds
``∂Y_a,lin + ∂Y_w x Y_v,lin + Y_w x ∂Y_v,lin`` to the linear rows. Each column costs O(1), a frame O(depth).

Frame placement error (the SE(3) error of frame-placement costs, Pinocchio's ``log6`` / ``Jlog6``)::

    r = log6(T^-1 oM_f(q)),        ∂r/∂q = Jr(r)^-1 J_local

with ``between``, ``log6`` and ``jlog6`` of ``lie.se3``, whose docstring writes ``Jr(r)^-1`` out.

Centre of mass (world): with subtree sums over ``k ⪰ j`` of mass ``m*``, first moment ``mc*`` and linear
momentum ``L* = Σ m_k v_k,lin + w_k x mc_k`` (world coordinates), total mass ``M`` and ``u = v_l x s``::

    ∂c/∂q = ∂cdot/∂v = (m* s_lin + s_ang x mc*) / M,    ∂cdot/∂q = (s_ang x L* + m* u_lin + u_ang x mc*) / M

(the linear rows of seed 001 J5, ``∂(I_k v_k)/∂q = (I_k v_k) x̄* s + I_k (v_l x s)``, summed over the subtree).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics.lie.se3 import between, jlog6, log6
from lietraj.dynamics._checks import BAD_N, OK, checked_pose, checked_state, checked_vector
from lietraj.dynamics._spatial import (
    add,
    base_placement,
    cross,
    cross_motion,
    load3,
    load9,
    mv,
    scale,
    store3,
    sub,
)
from lietraj.dynamics.kinematics.center_of_mass import check_mass, subtree_mass_moments
from lietraj.dynamics.kinematics.kinematics import (
    ACCELERATION,
    LOCAL,
    LOCAL_WORLD_ALIGNED,
    PLACEMENT,
    VELOCITY,
    W_A,
    W_MASS,
    W_MC,
    W_P,
    W_R,
    W_V,
    frame_pose,
    from_world,
    act_motion,
    batch_size,
    check_inputs,
    forward_kinematics_core,
    frame_id,
    kinematics_arrays,
    model_tables,
    reference_code,
    run,
    world_motion_subspace,
)
from lietraj.dynamics.algorithms.mimic import expand_velocity, expanded_workspace, reduce_jacobian
from lietraj.dynamics.model.model import JOINT_FREE, MF_H, MF_MASS, ModelArrays, RobotModel
from lietraj.dynamics.model.workspace import Workspace
from lietraj.dynamics.lie.state import State, Trajectory


_ZERO3 = (0.0, 0.0, 0.0)
# The centre-of-mass kernel runs forward kinematics at VELOCITY level only, so the acceleration columns of the
# work array are free: they hold the subtree linear momentum.
_W_L = W_A


@helper
def _world_motion(W, i, o):
    """Twist (o = W_V) or acceleration (o = W_A) of body i in world coordinates at the world origin; zero for
    the world (i < 0)."""
    if i < 0:
        return _ZERO3, _ZERO3
    return act_motion(load9(W, i, W_R), load3(W, i, W_P), load3(W, i, o), load3(W, i, o + 3))


@helper
def _q_column(reference, R, p, s_lin, s_ang, d_lin, d_ang, y_lin, y_ang):
    """A q-column in the reference of the frame at world pose (R, p), from the change ``d`` seen in axes moving
    with the frame, the column's world twist ``s`` and the frame quantity ``y`` in that reference."""
    if reference == LOCAL:
        return from_world(LOCAL, R, p, d_lin, d_ang)
    if reference == LOCAL_WORLD_ALIGNED:
        c_lin, c_ang = from_world(LOCAL_WORLD_ALIGNED, R, p, d_lin, d_ang)
        return add(c_lin, cross(s_ang, y_lin)), add(c_ang, cross(s_ang, y_ang))
    c_lin, c_ang = cross_motion(s_lin, s_ang, y_lin, y_ang)
    return add(d_lin, c_lin), add(d_ang, c_ang)


@helper
def _store_column(out, m, col, v, w):
    for r in range(3):
        out[m, r, col] = v[r]
        out[m, 3 + r, col] = w[r]


@helper
def motion_derivatives_core(mi, mf, fb, ff, k, level, reference, classical, W, out):
    """Derivatives of frame k's twist (level VELOCITY: out = [dv_dq, dv_dv]) or acceleration (level
    ACCELERATION: out = [dv_dq, da_dq, da_dv, da_da]) from a filled W, each (6, nv)."""
    out[:, :, :] = 0.0
    i = fb[k]
    if i < 0:
        return
    accel = level == ACCELERATION
    oR, op = frame_pose(W, fb, ff, k)
    vi, wi = _world_motion(W, i, W_V)
    ai, bi = _world_motion(W, i, W_A) if accel else (_ZERO3, _ZERO3)
    yv, yw = from_world(reference, oR, op, vi, wi)
    ya, yb = from_world(reference, oR, op, ai, bi)
    vj, wj = vi, wi
    j = i
    while j >= 0:
        parent = mi[j, 0]
        vl, wl = _world_motion(W, parent, W_V)
        al, bl = _world_motion(W, parent, W_A) if accel else (_ZERO3, _ZERO3)
        ev, ew = sub(vl, vi), sub(wl, wi)
        iv = mi[j, 2]
        for c in range(6 if mi[j, 1] == JOINT_FREE else 1):
            sv, sw = world_motion_subspace(mi, mf, W, j, c)
            uv, uw = cross_motion(vl, wl, sv, sw)
            dv, dw = _q_column(reference, oR, op, sv, sw, uv, uw, yv, yw)
            jv, jw = from_world(reference, oR, op, sv, sw)
            if not accel:
                _store_column(out, 0, iv + c, dv, dw)
                _store_column(out, 1, iv + c, jv, jw)
                continue
            tv, tw = cross_motion(al, bl, sv, sw)
            nv_, nw = cross_motion(ev, ew, uv, uw)
            dav, daw = _q_column(reference, oR, op, sv, sw, add(tv, nv_), add(tw, nw), ya, yb)
            gv, gw = cross_motion(add(ev, vj), add(ew, wj), sv, sw)
            gv, gw = from_world(reference, oR, op, gv, gw)
            if classical:
                dav = add(dav, add(cross(dw, yv), cross(yw, dv)))
                gv = add(gv, add(cross(jw, yv), cross(yw, jv)))
            _store_column(out, 0, iv + c, dv, dw)
            _store_column(out, 1, iv + c, dav, daw)
            _store_column(out, 2, iv + c, gv, gw)
            _store_column(out, 3, iv + c, jv, jw)
        vj, wj = vl, wl
        j = parent


@kernel
def motion_derivatives_kernel(model, H, s, v, a, level, fb, ff, k, reference, classical, work, out):
    mi, mf, floating, n, W = kinematics_arrays(model, work)
    status = check_inputs(floating, n, H, s, v, a, level)
    if status == OK:
        forward_kinematics_core(mi, mf, H, s, v, a, level, fb[k], W)
        motion_derivatives_core(mi, mf, fb, ff, k, level, reference, classical, W, out)
    return status


@kernel
def motion_derivatives_batch_kernel(model, H, S, V, A, level, fb, ff, k, reference, classical, work, OUT):
    floating = ModelArrays(*model).floating
    N = batch_size(floating, H, S, V, A, level, OUT)
    if N < 0:
        return BAD_N, 0
    for t in range(N):
        status = motion_derivatives_kernel(model, H[t] if floating else H[0], S[t], V[t],
                                           A[t] if level == ACCELERATION else A[0], level, fb, ff, k, reference,
                                           classical, work, OUT[t])
        if status != OK:
            return status, t
    return OK, 0


# ---------------------------------------------------------------- frame placement error


@helper
def placement_error_core(mi, mf, fb, ff, k, TR, Tp, W, r, J):
    """r = log(T^-1 oM_f) (linear first) and, when J has rows, J = Jr(r)^-1 J_local (6, nv) for frame k, from the
    poses in W; the target T = (TR, Tp) as a pose of tuples."""
    oR, op = frame_pose(W, fb, ff, k)
    R, p = between(TR, Tp, oR, op)
    u, w = log6(R, p)
    r[0], r[1], r[2], r[3], r[4], r[5] = u[0], u[1], u[2], w[0], w[1], w[2]
    if J.shape[0] == 0:
        return
    J[:, :] = 0.0
    A, C = jlog6(w, p)
    j = fb[k]
    while j >= 0:
        iv = mi[j, 2]
        for c in range(6 if mi[j, 1] == JOINT_FREE else 1):
            sv, sw = world_motion_subspace(mi, mf, W, j, c)
            lv, lw = from_world(LOCAL, oR, op, sv, sw)
            y = mv(A, lw)
            x = add(mv(A, lv), mv(C, y))
            for m in range(3):
                J[m, iv + c] = x[m]
                J[3 + m, iv + c] = y[m]
        j = mi[j, 0]


@kernel
def placement_error_kernel(model, H, s, v, fb, ff, k, T, r, work, J):
    mi, mf, floating, n, W = kinematics_arrays(model, work)
    status = check_inputs(floating, n, H, s, v, v, PLACEMENT)
    if status == OK:
        forward_kinematics_core(mi, mf, H, s, v, v, PLACEMENT, fb[k], W)
        TR, Tp = base_placement(T)
        placement_error_core(mi, mf, fb, ff, k, TR, Tp, W, r, J)
    return status


@kernel
def placement_error_batch_kernel(model, H, S, V, fb, ff, k, T, R, work, OUT):
    floating = ModelArrays(*model).floating
    N = batch_size(floating, H, S, V, V, PLACEMENT, OUT)
    if N < 0 or R.shape[0] != N:
        return BAD_N, 0
    for t in range(N):
        status = placement_error_kernel(model, H[t] if floating else H[0], S[t], V[t], fb, ff, k, T, R[t], work,
                                        OUT[t])
        if status != OK:
            return status, t
    return OK, 0


# ---------------------------------------------------------------- centre of mass


@kernel
def com_derivatives_kernel(model, H, s, v, work, out):
    """out = [dc_dq, dcdot_dq, dcdot_dv], each (3, nv)."""
    mi, mf, floating, n, W = kinematics_arrays(model, work)
    status = check_inputs(floating, n, H, s, v, v, PLACEMENT)
    if status != OK:
        return status
    nb = mi.shape[0]
    forward_kinematics_core(mi, mf, H, s, v, v, VELOCITY, nb - 1, W)
    total = subtree_mass_moments(mi, mf, W)
    for i in range(nb):
        m, h, oR = mf[i, MF_MASS], load3(mf, i, MF_H), load9(W, i, W_R)
        store3(W, i, _W_L, mv(oR, add(scale(load3(W, i, W_V), m), cross(load3(W, i, W_V + 3), h))))
    for i in range(nb - 1, 0, -1):
        parent = mi[i, 0]
        if parent >= 0:
            store3(W, parent, _W_L, add(load3(W, parent, _W_L), load3(W, i, _W_L)))
    for j in range(nb):
        m, mc, L, iv = W[j, W_MASS] / total, scale(load3(W, j, W_MC), 1.0 / total), load3(W, j, _W_L), mi[j, 2]
        L = scale(L, 1.0 / total)
        vl, wl = _world_motion(W, mi[j, 0], W_V)
        for c in range(6 if mi[j, 1] == JOINT_FREE else 1):
            sv, sw = world_motion_subspace(mi, mf, W, j, c)
            uv, uw = cross_motion(vl, wl, sv, sw)
            col = add(scale(sv, m), cross(sw, mc))
            dcol = add(add(cross(sw, L), scale(uv, m)), cross(uw, mc))
            for r in range(3):
                out[0, r, iv + c] = col[r]
                out[1, r, iv + c] = dcol[r]
                out[2, r, iv + c] = col[r]
    return OK


@kernel
def com_derivatives_batch_kernel(model, H, S, V, work, OUT):
    floating = ModelArrays(*model).floating
    N = batch_size(floating, H, S, V, V, PLACEMENT, OUT)
    if N < 0:
        return BAD_N, 0
    for t in range(N):
        status = com_derivatives_kernel(model, H[t] if floating else H[0], S[t], V[t], work, OUT[t])
        if status != OK:
            return status, t
    return OK, 0


# ---------------------------------------------------------------- Python API


@dataclass
class FrameAccelerationDerivatives:
    """Derivatives (6, nv) each, or (N, 6, nv) for a trajectory, of a frame's acceleration in one reference:
    its twist w.r.t. q (``dv_dq``), its acceleration w.r.t. q, v and a (Pinocchio's
    ``getFrameAccelerationDerivatives`` order)."""

    dv_dq: np.ndarray
    da_dq: np.ndarray
    da_dv: np.ndarray
    da_da: np.ndarray


@dataclass
class FramePlacementError:
    """``residual = log(target^-1 oM_f)`` (6,) linear first, and its Jacobian (6, nv) w.r.t. q; (N, 6) and
    (N, 6, nv) for a trajectory."""

    residual: np.ndarray
    jacobian: np.ndarray


@dataclass
class CenterOfMassDerivatives:
    """World centre-of-mass derivatives, (3, nv) each or (N, 3, nv): position w.r.t. q (the CoM Jacobian),
    velocity w.r.t. q and w.r.t. v (the CoM Jacobian again)."""

    dc_dq: np.ndarray
    dcdot_dq: np.ndarray
    dcdot_dv: np.ndarray


_MOTION = (motion_derivatives_kernel, motion_derivatives_batch_kernel)
_PLACEMENT_ERROR = (placement_error_kernel, placement_error_batch_kernel)
_COM = (com_derivatives_kernel, com_derivatives_batch_kernel)
_NO_A, _NO_A_BATCH = np.zeros(0), np.zeros((1, 0))


def frame_velocity_derivatives(model: RobotModel, x: State | Trajectory, frame: int | str,
                               reference: str = "local",
                               workspace: Workspace | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(dv_dq, dv_dv)``, (6, nv) each ((N, 6, nv) for a trajectory): derivatives of the frame's twist in
    ``reference`` (``frame_velocity``) w.r.t. q (tangent basis) and v. Pinocchio's ``getFrameVelocityDerivatives``
    (for "local_world_aligned", see the module docstring). ``workspace``: a ``Workspace(model)`` whose work arrays
    are reused (without one, each call allocates its own); the same for every function of this module."""
    what = "frame_velocity_derivatives"
    x = checked_state(model, x, what)
    if model.mimic:  # on the full tree, the columns taken along the model's coordinates (``kinematics``)
        d = frame_velocity_derivatives(model.expanded, model.expand_state(x), frame, reference,
                                       expanded_workspace(model, workspace, what))
        return reduce_jacobian(model, d[0]), reduce_jacobian(model, d[1])
    f, ref = model_tables(model), reference_code(reference, what)
    a = _NO_A if type(x) is State else _NO_A_BATCH
    out = run(model, x, what, _MOTION, (2, 6, model.nv), a, VELOCITY, f.body, f.pose, frame_id(model, frame, what), ref,
              False, workspace=workspace)
    return out[..., 0, :, :], out[..., 1, :, :]


def frame_acceleration_derivatives(model: RobotModel, x: State | Trajectory, a, frame: int | str,
                                   reference: str = "local", classical: bool = False,
                                   workspace: Workspace | None = None) -> FrameAccelerationDerivatives:
    """Derivatives of ``frame_acceleration(model, x, a, frame, reference, classical)`` w.r.t. q (tangent basis),
    v and a, and of the frame twist w.r.t. q (Pinocchio's ``getFrameAccelerationDerivatives`` for the spatial
    acceleration). For a trajectory ``a`` is (N, nv) and every output (N, 6, nv)."""
    what = "frame_acceleration_derivatives"
    x = checked_state(model, x, what)
    f, ref = model_tables(model), reference_code(reference, what)
    A = checked_vector(a, model.nv, None if type(x) is State else len(x), model, what, "a")
    if model.mimic:
        d = frame_acceleration_derivatives(model.expanded, model.expand_state(x), expand_velocity(model, A), frame,
                                           reference, classical, expanded_workspace(model, workspace, what))
        return FrameAccelerationDerivatives(*(reduce_jacobian(model, J) for J in (d.dv_dq, d.da_dq, d.da_dv, d.da_da)))
    out = run(model, x, what, _MOTION, (4, 6, model.nv), A, ACCELERATION, f.body, f.pose, frame_id(model, frame, what),
              ref, bool(classical), workspace=workspace, a=A)
    return FrameAccelerationDerivatives(out[..., 0, :, :], out[..., 1, :, :], out[..., 2, :, :], out[..., 3, :, :])


def frame_placement_error(model: RobotModel, x: State | Trajectory, frame: int | str, target,
                          workspace: Workspace | None = None) -> FramePlacementError:
    """SE(3) error ``r = log(target^-1 oM_f(q))`` (linear first, ``se3.log``) of a frame w.r.t. a 4x4 rigid
    ``target`` (the same for every knot of a trajectory), and ``dr/dq = Jr(r)^-1 J_local`` (Pinocchio's
    ``log6`` and ``Jlog6 @ getFrameJacobian(LOCAL)``)."""
    what = "frame_placement_error"
    x = checked_state(model, x, what)
    if model.mimic:
        e = frame_placement_error(model.expanded, model.expand_state(x), frame, target,
                                  expanded_workspace(model, workspace, what))
        return FramePlacementError(e.residual, reduce_jacobian(model, e.jacobian))
    T = checked_pose(target, model, what)
    f, k = model_tables(model), frame_id(model, frame, what)
    r = np.empty(6) if type(x) is State else np.empty((len(x), 6))
    J = run(model, x, what, _PLACEMENT_ERROR, (6, model.nv), f.body, f.pose, k, T, r, workspace=workspace)
    return FramePlacementError(r, J)


def center_of_mass_derivatives(model: RobotModel, x: State | Trajectory,
                               workspace: Workspace | None = None) -> CenterOfMassDerivatives:
    """Derivatives of the world centre of mass and of its velocity (``center_of_mass``,
    ``center_of_mass_velocity``) w.r.t. q (tangent basis) and v; Pinocchio's ``jacobianCenterOfMass`` and
    ``getCenterOfMassVelocityDerivatives``."""
    what = "center_of_mass_derivatives"
    x = checked_state(model, x, what)
    check_mass(model, what)
    if model.mimic:
        d = center_of_mass_derivatives(model.expanded, model.expand_state(x), expanded_workspace(model, workspace, what))
        return CenterOfMassDerivatives(*(reduce_jacobian(model, J) for J in (d.dc_dq, d.dcdot_dq, d.dcdot_dv)))
    out = run(model, x, what, _COM, (3, 3, model.nv), workspace=workspace)
    return CenterOfMassDerivatives(out[..., 0, :, :], out[..., 1, :, :], out[..., 2, :, :])
