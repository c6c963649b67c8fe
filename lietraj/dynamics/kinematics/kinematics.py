"""Forward kinematics: world poses, twists and accelerations of bodies and frames, and frame Jacobians.

Standard recursive forward kinematics (Featherstone, *Rigid Body Dynamics Algorithms*, 2008, §3-4; the forward
pass of seed 002 Table 2), linear first, with Pinocchio's reference-frame conventions. Per body ``i`` with
parent ``l`` and joint placement ``(lR_i, lp_i)(s_i)``::

    oM_i = oM_l lM_i,    v_i = iX_l v_l + S_i sdot_i,    a_i = iX_l a_l + S_i sddot_i + v_i x S_i sdot_i

``v_i`` and ``a_i`` are the body twist and spatial acceleration in body coordinates (Pinocchio's ``data.v``,
``data.a``, without gravity). A frame ``f`` rigidly attached to body ``i`` at ``iM_f`` has the twist
``fX_i v_i``, reported in one of three references (Pinocchio's ``ReferenceFrame``):

- ``"local"``: in the frame's axes, at its origin (LOCAL);
- ``"local_world_aligned"``: in world axes, at the frame's origin (LOCAL_WORLD_ALIGNED);
- ``"world"``: in world axes, at the world origin (WORLD).

The frame Jacobian's columns are the world-coordinate motion subspaces ``oX_j S_j`` of the frame's ancestor
joints ``j`` (walking ``parent``), changed to the requested reference; other columns are zero.
"""

from __future__ import annotations

import operator
from types import MappingProxyType
from typing import Mapping, NamedTuple

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics._checks import (
    BAD_A,
    BAD_N,
    OK,
    base_pose,
    base_poses,
    check_state,
    check_vector,
    checked_state,
    checked_vector,
    raise_for_status,
)
from lietraj.dynamics._spatial import (
    base_placement,
    act_inv_motion,
    add,
    cross,
    cross_motion,
    joint_placement,
    load3,
    load9,
    mm,
    motion_subspace,
    mv,
    scale,
    store3,
    store9,
    sub,
)
from lietraj.dynamics.algorithms.mimic import expand_velocity, expanded_workspace, reduce_jacobian
from lietraj.dynamics.model.model import JOINT_FREE, ModelArrays, RobotModel
from lietraj.dynamics.model.workspace import Workspace, workspace_for
from lietraj.dynamics.lie.state import State, Trajectory


# Work-array columns: world pose R (9), p (3); body twist (6) and spatial acceleration (6) in body coordinates;
# subtree mass (1) and its first moment in world coordinates (3), for the centre-of-mass Jacobian.
W_R, W_P, W_V, W_A, W_MASS, W_MC, W_COLS = 0, 9, 12, 18, 24, 25, 28
# What forward_kinematics_core computes beyond the poses.
PLACEMENT, VELOCITY, ACCELERATION = 0, 1, 2
LOCAL, LOCAL_WORLD_ALIGNED, WORLD = 0, 1, 2
REFERENCES = {"local": LOCAL, "local_world_aligned": LOCAL_WORLD_ALIGNED, "world": WORLD}
_ZERO3 = (0.0, 0.0, 0.0)


class KinematicsWork(NamedTuple):
    """The work array of the kinematics kernels: per body the columns above."""

    bodies: np.ndarray


def kinematics_work(model: RobotModel) -> KinematicsWork:
    return KinematicsWork(np.zeros((model.nb, W_COLS)))


@helper
def kinematics_arrays(model, work):
    """What the kinematics kernels read of the model (``ModelArrays``) and their work array (``KinematicsWork``):
    ``mi, mf, floating, n, W``."""
    m = ModelArrays(*model)
    return m.joints, m.bodies, m.floating, m.n, KinematicsWork(*work).bodies


@helper
def forward_kinematics_core(mi, mf, H, s, v, a, level, last, W):
    """World poses of bodies 0..last into W (all ancestors of ``last``, bodies being in topological order);
    from ``level`` VELOCITY on their twists, at ACCELERATION their accelerations. Assumes checked inputs
    (``a`` is read only at level ACCELERATION)."""
    for i in range(last + 1):
        parent, jt, iv, js = mi[i, 0], mi[i, 1], mi[i, 2], mi[i, 3]
        if jt == JOINT_FREE:
            R, p = base_placement(H)
        else:
            R, p = joint_placement(mf, jt, i, s[js])
        if parent >= 0:
            oR = load9(W, parent, W_R)
            store9(W, i, W_R, mm(oR, R))
            store3(W, i, W_P, add(load3(W, parent, W_P), mv(oR, p)))
        else:
            store9(W, i, W_R, R)
            store3(W, i, W_P, p)
        if level == PLACEMENT:
            continue
        if jt == JOINT_FREE:
            store3(W, i, W_V, (v[0], v[1], v[2]))
            store3(W, i, W_V + 3, (v[3], v[4], v[5]))
            if level == ACCELERATION:
                store3(W, i, W_A, (a[0], a[1], a[2]))
                store3(W, i, W_A + 3, (a[3], a[4], a[5]))
            continue
        Sv, Sw = motion_subspace(mf, jt, i)
        vJ, wJ = scale(Sv, v[iv]), scale(Sw, v[iv])
        vi, wi = vJ, wJ
        if parent >= 0:
            vl, wl = act_inv_motion(R, p, load3(W, parent, W_V), load3(W, parent, W_V + 3))
            vi, wi = add(vl, vJ), add(wl, wJ)
        store3(W, i, W_V, vi)
        store3(W, i, W_V + 3, wi)
        if level == ACCELERATION:
            cv, cw = cross_motion(vi, wi, vJ, wJ)
            ai, bi = add(scale(Sv, a[iv]), cv), add(scale(Sw, a[iv]), cw)
            if parent >= 0:
                al, bl = act_inv_motion(R, p, load3(W, parent, W_A), load3(W, parent, W_A + 3))
                ai, bi = add(ai, al), add(bi, bl)
            store3(W, i, W_A, ai)
            store3(W, i, W_A + 3, bi)


@helper
def act_motion(R, p, v, w):
    """Motion (v, w) given in a child frame, expressed in the parent frame."""
    Rw = mv(R, w)
    return add(mv(R, v), cross(p, Rw)), Rw


@helper
def world_motion_subspace(mi, mf, W, j, c):
    """Column ``c`` of joint j's motion subspace in world coordinates at the world origin, ``oX_j S_j e_c``."""
    jt = mi[j, 1]
    if jt == JOINT_FREE:
        r = c % 3
        e = (1.0 if r == 0 else 0.0, 1.0 if r == 1 else 0.0, 1.0 if r == 2 else 0.0)
        Sv, Sw = (e, _ZERO3) if c < 3 else (_ZERO3, e)
    else:
        Sv, Sw = motion_subspace(mf, jt, j)
    return act_motion(load9(W, j, W_R), load3(W, j, W_P), Sv, Sw)


@helper
def frame_pose(W, fb, ff, k):
    """World pose of frame k (``fb[k]``: its body, -1 for the world; ``ff[k]``: R (9), p (3) in that body)."""
    R, p, i = load9(ff, k, 0), load3(ff, k, 9), fb[k]
    if i < 0:
        return R, p
    oR = load9(W, i, W_R)
    return mm(oR, R), add(load3(W, i, W_P), mv(oR, p))


@helper
def _from_local(reference, R, p, v, w):
    """A motion given in the axes of the frame at world pose (R, p), in the requested reference."""
    if reference == LOCAL:
        return v, w
    if reference == LOCAL_WORLD_ALIGNED:
        return mv(R, v), mv(R, w)
    return act_motion(R, p, v, w)


@helper
def from_world(reference, R, p, v, w):
    """A motion given in world coordinates at the world origin, in the reference of the frame at pose (R, p)."""
    if reference == WORLD:
        return v, w
    if reference == LOCAL_WORLD_ALIGNED:
        return sub(v, cross(p, w)), w
    return act_inv_motion(R, p, v, w)


@helper
def _store_pose(out, R, p):
    for r in range(3):
        out[r, 0], out[r, 1], out[r, 2], out[r, 3] = R[3 * r], R[3 * r + 1], R[3 * r + 2], p[r]
    out[3, 0], out[3, 1], out[3, 2], out[3, 3] = 0.0, 0.0, 0.0, 1.0


@helper
def _store_motion(out, v, w):
    for r in range(3):
        out[r], out[3 + r] = v[r], w[r]


@helper
def frame_motion_core(fb, ff, k, level, reference, classical, W, out):
    """Twist (level VELOCITY) or acceleration (level ACCELERATION) of frame k from a filled W, into out (6,)."""
    i = fb[k]
    if i < 0:
        out[:] = 0.0
        return
    fR, fp = load9(ff, k, 0), load3(ff, k, 9)
    oR, op = frame_pose(W, fb, ff, k)
    v, w = act_inv_motion(fR, fp, load3(W, i, W_V), load3(W, i, W_V + 3))
    v, w = _from_local(reference, oR, op, v, w)
    if level == ACCELERATION:
        av, aw = act_inv_motion(fR, fp, load3(W, i, W_A), load3(W, i, W_A + 3))
        av, aw = _from_local(reference, oR, op, av, aw)
        if classical:
            # Pinocchio's getFrameClassicalAcceleration: spatial acceleration + w x v, in the same reference.
            av = add(av, cross(w, v))
        v, w = av, aw
    _store_motion(out, v, w)


@helper
def frame_jacobian_core(mi, mf, fb, ff, k, reference, W, J):
    """Jacobian (6, nv) of frame k from the poses in W: one column per dof of each ancestor joint."""
    J[:, :] = 0.0
    oR, op = frame_pose(W, fb, ff, k)
    j = fb[k]
    while j >= 0:
        iv = mi[j, 2]
        for c in range(6 if mi[j, 1] == JOINT_FREE else 1):
            v, w = world_motion_subspace(mi, mf, W, j, c)
            v, w = from_world(reference, oR, op, v, w)
            _store_motion(J[:, iv + c], v, w)
        j = mi[j, 0]


@helper
def check_inputs(floating, n, H, s, v, a, level):
    """Status of a state, and of the acceleration ``a`` when ``level`` is ACCELERATION."""
    nv = n + 6 if floating else n
    status = check_state(floating, n, nv, H, s, v)
    if status == OK and level == ACCELERATION:
        status = check_vector(a, nv, BAD_A)
    return status


@helper
def batch_size(floating, H, S, V, A, level, OUT):
    """Knot count N, or -1 when the trajectory arrays disagree."""
    N = S.shape[0]
    if V.shape[0] != N or OUT.shape[0] != N or (floating and H.shape[0] != N) or (level == ACCELERATION
                                                                               and A.shape[0] != N):
        return -1
    return N


@kernel
def placements_kernel(model, H, s, v, fb, ff, k0, work, out):
    """World poses of frames k0 .. k0 + len(out) - 1 into out (m, 4, 4)."""
    mi, mf, floating, n, W = kinematics_arrays(model, work)
    status = check_inputs(floating, n, H, s, v, v, PLACEMENT)
    if status == OK:
        last = -1
        for m in range(out.shape[0]):
            last = max(last, fb[k0 + m])
        forward_kinematics_core(mi, mf, H, s, v, v, PLACEMENT, last, W)
        for m in range(out.shape[0]):
            R, p = frame_pose(W, fb, ff, k0 + m)
            _store_pose(out[m], R, p)
    return status


@kernel
def placements_batch_kernel(model, H, S, V, fb, ff, k0, work, OUT):
    floating = ModelArrays(*model).floating
    N = batch_size(floating, H, S, V, V, PLACEMENT, OUT)
    if N < 0:
        return BAD_N, 0
    for t in range(N):
        status = placements_kernel(model, H[t] if floating else H[0], S[t], V[t], fb, ff, k0, work, OUT[t])
        if status != OK:
            return status, t
    return OK, 0


@kernel
def frame_motion_kernel(model, H, s, v, a, level, fb, ff, k, reference, classical, work, out):
    mi, mf, floating, n, W = kinematics_arrays(model, work)
    status = check_inputs(floating, n, H, s, v, a, level)
    if status == OK:
        forward_kinematics_core(mi, mf, H, s, v, a, level, fb[k], W)
        frame_motion_core(fb, ff, k, level, reference, classical, W, out)
    return status


@kernel
def frame_motion_batch_kernel(model, H, S, V, A, level, fb, ff, k, reference, classical, work, OUT):
    floating = ModelArrays(*model).floating
    N = batch_size(floating, H, S, V, A, level, OUT)
    if N < 0:
        return BAD_N, 0
    for t in range(N):
        status = frame_motion_kernel(model, H[t] if floating else H[0], S[t], V[t],
                                     A[t] if level == ACCELERATION else A[0], level, fb, ff, k, reference,
                                     classical, work, OUT[t])
        if status != OK:
            return status, t
    return OK, 0


@kernel
def frame_jacobian_kernel(model, H, s, v, fb, ff, k, reference, work, J):
    mi, mf, floating, n, W = kinematics_arrays(model, work)
    status = check_inputs(floating, n, H, s, v, v, PLACEMENT)
    if status == OK:
        forward_kinematics_core(mi, mf, H, s, v, v, PLACEMENT, fb[k], W)
        frame_jacobian_core(mi, mf, fb, ff, k, reference, W, J)
    return status


@kernel
def frame_jacobian_batch_kernel(model, H, S, V, fb, ff, k, reference, work, OUT):
    floating = ModelArrays(*model).floating
    N = batch_size(floating, H, S, V, V, PLACEMENT, OUT)
    if N < 0:
        return BAD_N, 0
    for t in range(N):
        status = frame_jacobian_kernel(model, H[t] if floating else H[0], S[t], V[t], fb, ff, k, reference, work,
                                       OUT[t])
        if status != OK:
            return status, t
    return OK, 0


class ModelTables(NamedTuple):
    """Per-model data computed once, read-only: packed frame tables for the kernels, body (nf,) int64 and pose
    (nf, 12) [R row major, p]; the same for the bodies themselves (identity poses); frame name -> index; total
    mass."""

    body: np.ndarray
    pose: np.ndarray
    bodies: tuple[np.ndarray, np.ndarray]
    index: Mapping[str, int]
    total_mass: float


def _build_tables(model: RobotModel) -> ModelTables:
    body = np.array([f.body for f in model.frames], dtype=np.int64)
    pose = np.array([np.concatenate([np.ravel(f.R), f.p]) for f in model.frames], dtype=float).reshape(-1, 12)
    index = MappingProxyType({f.name: model.frame_index(f.name) for f in model.frames})
    identity = np.tile(np.concatenate([np.eye(3).ravel(), np.zeros(3)]), (model.nb, 1))
    for a in (body, pose, identity):
        a.flags.writeable = False
    bodies = np.arange(model.nb, dtype=np.int64)
    bodies.flags.writeable = False
    return ModelTables(body, pose, (bodies, identity), index, model.total_mass)


def model_tables(model: RobotModel) -> ModelTables:
    return model.derived("kinematics_tables", _build_tables)


class UnknownFrameError(KeyError, ValueError):
    """A frame name the model does not have: a KeyError (a name looked up) and a ValueError (a wrong argument)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class FrameIndexError(IndexError, ValueError):
    """A frame index out of range: an IndexError and a ValueError (a wrong argument)."""


def frame_id(model: RobotModel, frame: int | str, what: str | None = None) -> int:
    """Index in ``model.frames`` of a frame given by name or index: UnknownFrameError (a KeyError) for an unknown
    name, FrameIndexError (an IndexError) for an index out of range, TypeError for anything else; both are also
    ValueErrors. ``what``, the public function asking, prefixes the messages."""
    if isinstance(frame, str):
        k = model_tables(model).index.get(frame)
        if k is None:
            raise UnknownFrameError(f"{_caller(model, what)}model {model.name!r} has no frame {frame!r}")
        return k
    try:
        k = operator.index(frame)
    except TypeError:
        raise TypeError(f"{_caller(model, what)}a frame is a name or an index, got {type(frame).__name__}") from None
    if not 0 <= k < len(model.frames):
        raise FrameIndexError(f"{_caller(model, what)}model {model.name!r} has {len(model.frames)} frames: frame index "
                              f"{k} is out of range")
    return k


def _caller(model: RobotModel, what: str | None) -> str:
    return "" if what is None else f"{what}({model.name}): frame: "


def reference_code(reference: str, what: str) -> int:
    try:
        return REFERENCES[reference]
    except (KeyError, TypeError):
        raise ValueError(f"{what}: reference must be one of {', '.join(map(repr, REFERENCES))}, "
                         f"got {reference!r}") from None


def run(model: RobotModel, x: State | Trajectory, what: str, kernels, shape: tuple[int, ...], *args,
        workspace: Workspace | None = None, a: np.ndarray | None = None) -> np.ndarray:
    """Call ``kernel(model.packed, H, s, v, *args, work, out)`` for a State, or its batch form for a Trajectory
    (output ``(N,) + shape``), with the kinematics work array of ``workspace`` (a fresh one if None), and raise the
    ValueError of a failing status. ``x`` is checked by ``checked_state``; ``a``, the acceleration among ``args``
    if any, is named in the message of a NaN."""
    work = workspace_for(model, workspace, what).work(kinematics_work)
    kernel, batch_kernel = kernels
    if type(x) is State:
        out = np.empty(shape)
        status = kernel(model.packed, base_pose(x), x.s, x.v, *args, work, out)
        if status != OK:
            raise_for_status(status, model, what, None, x, a=a)
        return out
    out = np.empty((len(x),) + shape)
    status, t = batch_kernel(model.packed, base_poses(x), x.s, x.v, *args, work, out)
    if status != OK:
        raise_for_status(status, model, what, t, x, a=a)
    return out


def _full(model: RobotModel, workspace: Workspace | None, what: str) -> Workspace:
    """For a model with mimic joints: the workspace of its full tree, on which each function runs (at
    ``model.expand_state(x)``), its Jacobians' columns then taken along the model's coordinates (``J G``)."""
    return expanded_workspace(model, workspace, what)


_PLACEMENTS = (placements_kernel, placements_batch_kernel)
_MOTION = (frame_motion_kernel, frame_motion_batch_kernel)
_JACOBIAN = (frame_jacobian_kernel, frame_jacobian_batch_kernel)
_NO_A, _NO_A_BATCH = np.zeros(0), np.zeros((1, 0))


def body_placements(model: RobotModel, x: State | Trajectory, workspace: Workspace | None = None) -> np.ndarray:
    """World poses (nb, 4, 4) of all bodies (the joint frames: Pinocchio's ``data.oMi[1:]``); (N, nb, 4, 4)
    for a trajectory. ``workspace``: a ``Workspace(model)`` whose work arrays are reused (without one, each call
    allocates its own); the same for every function of this module. Every function of this module raises TypeError
    for an argument of the wrong kind and ValueError for a wrong shape or value, naming it."""
    x = checked_state(model, x, "body_placements")
    if model.mimic:
        return body_placements(model.expanded, model.expand_state(x), _full(model, workspace, "body_placements"))
    fb, ff = model_tables(model).bodies
    return run(model, x, "body_placements", _PLACEMENTS, (model.nb, 4, 4), fb, ff, 0, workspace=workspace)


def frame_placements(model: RobotModel, x: State | Trajectory, workspace: Workspace | None = None) -> np.ndarray:
    """World poses (nframes, 4, 4) of all frames, in the order of ``model.frames`` (Pinocchio's ``data.oMf``);
    (N, nframes, 4, 4) for a trajectory."""
    x = checked_state(model, x, "frame_placements")
    if model.mimic:
        return frame_placements(model.expanded, model.expand_state(x), _full(model, workspace, "frame_placements"))
    f = model_tables(model)
    return run(model, x, "frame_placements", _PLACEMENTS, (len(model.frames), 4, 4), f.body, f.pose, 0,
               workspace=workspace)


def frame_placement(model: RobotModel, x: State | Trajectory, frame: int | str,
                    workspace: Workspace | None = None) -> np.ndarray:
    """World pose (4, 4) of one frame, given by name or index; (N, 4, 4) for a trajectory."""
    x = checked_state(model, x, "frame_placement")
    if model.mimic:
        return frame_placement(model.expanded, model.expand_state(x), frame, _full(model, workspace, "frame_placement"))
    f = model_tables(model)
    out = run(model, x, "frame_placement", _PLACEMENTS, (1, 4, 4), f.body, f.pose,
              frame_id(model, frame, "frame_placement"), workspace=workspace)
    return out[..., 0, :, :]


def frame_velocity(model: RobotModel, x: State | Trajectory, frame: int | str, reference: str = "local",
                   workspace: Workspace | None = None) -> np.ndarray:
    """Twist ``[v; w]`` (6,) of a frame in ``reference`` ("local", "local_world_aligned" or "world");
    (N, 6) for a trajectory. Pinocchio's ``getFrameVelocity``."""
    x = checked_state(model, x, "frame_velocity")
    if model.mimic:
        return frame_velocity(model.expanded, model.expand_state(x), frame, reference,
                              _full(model, workspace, "frame_velocity"))
    f, ref = model_tables(model), reference_code(reference, "frame_velocity")
    a = _NO_A if type(x) is State else _NO_A_BATCH
    return run(model, x, "frame_velocity", _MOTION, (6,), a, VELOCITY, f.body, f.pose,
               frame_id(model, frame, "frame_velocity"), ref, False, workspace=workspace)


def frame_acceleration(model: RobotModel, x: State | Trajectory, a, frame: int | str, reference: str = "local",
                       classical: bool = False, workspace: Workspace | None = None) -> np.ndarray:
    """Spatial acceleration (6,) of a frame for the generalized acceleration ``a``, in ``reference``
    (Pinocchio's ``getFrameAcceleration``); with ``classical=True``, that plus ``w x v`` in the same reference,
    which for "local" and "local_world_aligned" is the classical acceleration of the frame origin
    (``getFrameClassicalAcceleration``). For a trajectory ``a`` is (N, nv) and the result (N, 6)."""
    x = checked_state(model, x, "frame_acceleration")
    f, ref = model_tables(model), reference_code(reference, "frame_acceleration")
    A = checked_vector(a, model.nv, None if type(x) is State else len(x), model, "frame_acceleration", "a")
    if model.mimic:
        return frame_acceleration(model.expanded, model.expand_state(x), expand_velocity(model, A), frame, reference,
                                  classical, _full(model, workspace, "frame_acceleration"))
    return run(model, x, "frame_acceleration", _MOTION, (6,), A, ACCELERATION, f.body, f.pose,
               frame_id(model, frame, "frame_acceleration"), ref, bool(classical), workspace=workspace, a=A)


def frame_jacobian(model: RobotModel, x: State | Trajectory, frame: int | str, reference: str = "local",
                   workspace: Workspace | None = None) -> np.ndarray:
    """Jacobian (6, nv) mapping ``v`` to the frame's twist in ``reference`` (Pinocchio's ``computeFrameJacobian``);
    (N, 6, nv) for a trajectory. Only the columns of the frame's ancestor joints are non-zero."""
    x = checked_state(model, x, "frame_jacobian")
    if model.mimic:
        return reduce_jacobian(model, frame_jacobian(model.expanded, model.expand_state(x), frame, reference,
                                                     _full(model, workspace, "frame_jacobian")))
    f, ref = model_tables(model), reference_code(reference, "frame_jacobian")
    return run(model, x, "frame_jacobian", _JACOBIAN, (6, model.nv), f.body, f.pose,
               frame_id(model, frame, "frame_jacobian"), ref, workspace=workspace)
