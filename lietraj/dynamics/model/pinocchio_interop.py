"""Conversions between lietraj states and Pinocchio's ``q``/``v`` vectors (quaternion free-flyer).

The only place where quaternions appear. Pinocchio's free-flyer configuration is ``[x, y, z, qx, qy, qz, qw]``
followed by the joint coordinates, where a continuous joint takes two, ``(cos s, sin s)``. Its velocity is
``[nu (body twist, linear first); sdot]``, identical to lietraj's ``v``. Pinocchio itself is not imported here.
"""

from __future__ import annotations

import numpy as np

from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.lie.state import State


def pose_from_xyzquat(xyzquat: np.ndarray) -> np.ndarray:
    """4x4 pose from ``[x, y, z, qx, qy, qz, qw]`` (the quaternion is normalized; it must not be zero)."""
    p, q = np.asarray(xyzquat[:3], dtype=float), np.asarray(xyzquat[3:7], dtype=float)
    norm = np.linalg.norm(q)
    if not np.isfinite(norm) or norm < 1e-12:
        raise ValueError(f"invalid quaternion {q.tolist()}")
    x, y, z, w = q / norm
    H = np.eye(4)
    H[:3, :3] = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ]
    H[:3, 3] = p
    return H


def xyzquat_from_pose(H: np.ndarray) -> np.ndarray:
    """``[x, y, z, qx, qy, qz, qw]`` of a 4x4 pose, with ``qw >= 0``."""
    R = H[:3, :3]
    t = np.trace(R)
    if t > 0:
        w = 0.5 * np.sqrt(1 + t)
        x, y, z = (R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w), (R[1, 0] - R[0, 1]) / (4 * w)
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        r = np.sqrt(max(1 + R[i, i] - R[j, j] - R[k, k], 0.0))
        v = np.empty(3)
        v[i] = 0.5 * r
        v[j] = (R[j, i] + R[i, j]) / (2 * r)
        v[k] = (R[k, i] + R[i, k]) / (2 * r)
        w = (R[k, j] - R[j, k]) / (2 * r)
        x, y, z = v
    q = np.array([x, y, z, w])
    if w < 0:
        q = -q
    return np.concatenate([H[:3, 3], q / np.linalg.norm(q)])


def _base_placement_inverse(model: RobotModel) -> np.ndarray:
    """The inverse of the free joint's placement: identity but for robots whose loader turns the free-flyer
    (example-robot-data's ``human``); lietraj's ``H`` is the base body's world pose ``placement @ pose(q[:7])``."""
    T = model.joint_placement[0]
    Ti = np.eye(4)
    Ti[:3, :3] = T[:3, :3].T
    Ti[:3, 3] = -T[:3, :3].T @ T[:3, 3]
    return Ti


def to_pinocchio(model: RobotModel, x: State) -> tuple[np.ndarray, np.ndarray]:
    """Pinocchio's ``(q, v)`` for the state ``x`` of ``model``."""
    parts = [xyzquat_from_pose(_base_placement_inverse(model) @ x.H)] if model.floating_base else []
    for k, s in enumerate(x.s):
        parts.append([np.cos(s), np.sin(s)] if model.continuous[k] else [s])
    q = np.concatenate(parts) if parts else np.zeros(0)
    return q, np.array(x.v, dtype=float)


def from_pinocchio(model: RobotModel, q: np.ndarray, v: np.ndarray | None = None) -> State:
    """The lietraj state for Pinocchio's ``(q, v)`` (zero velocity when ``v`` is None)."""
    q = np.asarray(q, dtype=float)
    nq = model.n + int(np.sum(model.continuous)) + (7 if model.floating_base else 0)
    if q.shape != (nq,):
        raise ValueError(f"q must have shape ({nq},) for {model.name}, got {q.shape}")
    H, k = (model.joint_placement[0] @ pose_from_xyzquat(q[:7]), 7) if model.floating_base else (None, 0)
    s = np.empty(model.n)
    for j in range(model.n):
        if model.continuous[j]:
            s[j] = np.arctan2(q[k + 1], q[k])
            k += 2
        else:
            s[j] = q[k]
            k += 1
    v = np.zeros(model.nv) if v is None else np.array(v, dtype=float)
    if v.shape != (model.nv,):
        raise ValueError(f"v must have shape ({model.nv},) for {model.name}, got {v.shape}")
    return State(H, s, v)
