"""Contact-constrained forward dynamics: accelerations and contact forces of a robot with rigid contacts.

Each contact holds a frame fixed in the world: all six components of its motion (``kind="6d"``, a foot sole)
or the motion of its origin only (``kind="3d"``, a point foot). With ``J`` (nc, nv) the stacked contact rows of
the frame Jacobians and ``gamma`` (nc,) the acceleration the contacts would have at ``a = 0``, the accelerations
``a`` and the contact forces ``lambda`` solve the KKT system (seed 000 leaves contacts to future work; this is
Pinocchio's ``forwardDynamics`` with contacts)::

    [[M, J^T], [J, 0]] [a; -lambda] = [tau - b; -gamma],   i.e.  M a + b = tau + J^T lambda,   J a + gamma = 0

solved through the recursive inverse mass matrix (``inverse_mass_matrix``, O(n^2)) and the contact-space
inertia: ``lambda = -(J M^-1 J^T + damping I)^-1 (gamma + J M^-1 (tau - b))``, ``a = M^-1 (tau - b + J^T lambda)``.

The drift ``gamma`` is, per contact, in the contact frame's own axes at its origin (Pinocchio's LOCAL):

- 6d: the frame's spatial acceleration at ``a = 0`` (``J_dot v``; the time derivative of the local twist);
- 3d: the classical acceleration of the frame origin at ``a = 0`` (spatial linear part + ``w x v``);

plus the Baumgarte stabilization ``Kv v_c + Kp e_c``, so that the contact acceleration obeys
``a_c = -Kv v_c - Kp e_c``: ``v_c`` is the frame's local twist (its linear part for 3d) and ``e_c`` the placement
error with respect to the contact's ``target`` pose, ``log6(target^-1 oMf)`` for 6d and ``R^T (p - p_target)`` for
3d (Pinocchio's ``constraintDynamics`` with the world as second joint). With ``reference="local_world_aligned"``
a contact's rows are rotated into world axes: the accelerations are unchanged and its forces are reported in
world axes at the frame origin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lietraj.dynamics import se3
from lietraj.dynamics._checks import check_type
from lietraj.dynamics.inverse_mass_matrix import inverse_mass_matrix
from lietraj.dynamics.kinematics import frame_acceleration, frame_id, frame_jacobian, frame_placement, frame_velocity
from lietraj.dynamics.model import RobotModel
from lietraj.dynamics.rnea import nonlinear_effects
from lietraj.dynamics.state import State, Trajectory

KINDS = {"6d": 6, "3d": 3}
CONTACT_REFERENCES = ("local", "local_world_aligned")
# Smallest eigenvalue of J M^-1 J^T, relative to its largest, below which the contacts count as redundant.
RANK_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Contact:
    """A rigid contact holding the frame ``frame`` (name or index in ``model.frames``) in the world.

    ``kind``: "6d" (the whole frame is fixed: 6 force rows ``[f; torque]``) or "3d" (its origin is fixed: 3 rows
    ``f``). ``reference``: the axes of the rows and of the reported force, "local" (the frame's) or
    "local_world_aligned" (the world's, at the frame origin). ``baumgarte = (Kp, Kv)``: the stabilization gains
    (zero: none). ``target``: the contact's world pose (4, 4) for the position term ``Kp e_c``; None means the
    frame's current pose, i.e. no position correction.
    """

    frame: int | str
    kind: str = "6d"
    reference: str = "local"
    baumgarte: tuple[float, float] = (0.0, 0.0)
    target: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Contact({self.frame!r}): kind must be '6d' or '3d', got {self.kind!r}")
        if self.reference not in CONTACT_REFERENCES:
            raise ValueError(f"Contact({self.frame!r}): reference must be 'local' or 'local_world_aligned', "
                             f"got {self.reference!r}")
        gains = np.asarray(self.baumgarte, dtype=float)
        if gains.shape != (2,) or not np.all(np.isfinite(gains)):
            raise ValueError(f"Contact({self.frame!r}): baumgarte must be two finite gains (Kp, Kv), "
                             f"got {self.baumgarte!r}")
        object.__setattr__(self, "baumgarte", (float(gains[0]), float(gains[1])))
        if self.target is not None:
            object.__setattr__(self, "target", se3.check_transform(self.target, "target"))

    @property
    def dim(self) -> int:
        """Number of constraint rows: 6 or 3."""
        return KINDS[self.kind]


@dataclass(frozen=True)
class ContactDynamicsResult:
    """Solution of the contact-constrained dynamics (leading knot axis N for a trajectory).

    ``a`` (nv,): the acceleration ``[nu_dot; s_ddot]``. ``forces``: one array per contact, (6,) ``[f; torque]``
    or (3,) ``f``, the force the ground exerts on the robot at the frame origin, in the contact's reference.
    ``lagrangian`` (nc,): the forces stacked in contact order (the KKT multipliers). ``jacobian`` (nc, nv) and
    ``drift`` (nc,): the stacked contact rows ``J`` and ``gamma`` (with the Baumgarte terms) such that
    ``J a + drift = 0``.
    """

    a: np.ndarray
    forces: tuple[np.ndarray, ...]
    lagrangian: np.ndarray
    jacobian: np.ndarray
    drift: np.ndarray


def _frame_ids(model: RobotModel, contacts: Sequence[Contact]) -> list[int]:
    ids = []
    for c in contacts:
        if not isinstance(c, Contact):
            raise TypeError(f"contact_dynamics({model.name}): contacts must be Contact objects, got {type(c).__name__}")
        try:
            ids.append(frame_id(model, c.frame))
        except (KeyError, IndexError, TypeError) as e:
            raise ValueError(f"contact_dynamics({model.name}): unknown contact frame {c.frame!r} ({e})") from None
    return ids


def _placement_error(contact: Contact, pose: np.ndarray) -> np.ndarray:
    """e_c for the frame at world pose(s) ``pose`` (..., 4, 4), in the frame's axes."""
    T = contact.target
    if contact.kind == "3d":
        return np.einsum("...ji,...j->...i", pose[..., :3, :3], pose[..., :3, 3] - T[:3, 3])
    Tinv = se3.inverse(T)
    if pose.ndim == 2:
        return se3.log(Tinv @ pose)
    return np.array([se3.log(Tinv @ P) for P in pose])


def _rotate_rows(R: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Rows of X (..., d, k) given in a frame's axes, in world axes (each block of 3 rows rotated by R)."""
    return np.concatenate([R @ X[..., r:r + 3, :] for r in range(0, X.shape[-2], 3)], axis=-2)


def _contact_rows(model: RobotModel, x: State | Trajectory, k: int, contact: Contact, zero_a: np.ndarray):
    """J (..., d, nv) and gamma (..., d) of one contact."""
    d, (Kp, Kv) = contact.dim, contact.baumgarte
    J = frame_jacobian(model, x, k, "local")[..., :d, :]
    gamma = frame_acceleration(model, x, zero_a, k, "local", classical=contact.kind == "3d")[..., :d]
    if Kv != 0.0:
        gamma = gamma + Kv * frame_velocity(model, x, k, "local")[..., :d]
    pose = None
    if Kp != 0.0 and contact.target is not None:
        pose = frame_placement(model, x, k)
        gamma = gamma + Kp * _placement_error(contact, pose)
    if contact.reference == "local_world_aligned":
        R = (frame_placement(model, x, k) if pose is None else pose)[..., :3, :3]
        J = _rotate_rows(R, J)
        gamma = _rotate_rows(R, gamma[..., None])[..., 0]
    return J, gamma


def contact_dynamics(model: RobotModel, x: State | Trajectory, tau, contacts: Sequence[Contact],
                     damping: float = 0.0) -> ContactDynamicsResult:
    """Forward dynamics under the rigid ``contacts``: accelerations and contact forces (see the module docstring).

    ``tau`` is the generalized force (nv,), as for ``aba``: for a floating base its first six entries are a wrench
    on the base (zero for an unactuated base). ``x`` is a State, or a Trajectory with ``tau`` (N, nv) (all
    results then get a leading axis N). ``damping`` >= 0 is added to the diagonal of ``J M^-1 J^T`` (Pinocchio's
    ``forwardDynamics`` damping): with 0, redundant contacts (a rank-deficient ``J``) raise a ValueError; with a
    small positive value they are solved in the least-squares sense, the constraints then holding approximately.
    """
    single = type(x) is State
    if not single:
        check_type(x, "contact_dynamics")
    name = f"contact_dynamics({model.name})"
    nv = model.nv
    T = np.asarray(tau, dtype=np.float64)
    expected = (nv,) if single else (len(x), nv)
    if T.shape != expected:
        raise ValueError(f"{name}: tau must have shape {expected}, got {T.shape}")
    if not np.all(np.isfinite(T)):
        raise ValueError(f"{name}: tau contains NaN or inf")
    if not (np.isfinite(damping) and damping >= 0.0):
        raise ValueError(f"{name}: damping must be finite and >= 0, got {damping!r}")
    contacts = tuple(contacts)
    ids = _frame_ids(model, contacts)

    Minv = inverse_mass_matrix(model, x)
    a0 = (Minv @ (T - nonlinear_effects(model, x))[..., None])[..., 0]  # the unconstrained acceleration
    if not contacts:
        empty = np.zeros(T.shape[:-1] + (0,))
        return ContactDynamicsResult(a0, (), empty, np.zeros(T.shape[:-1] + (0, nv)), empty)

    zero_a = np.zeros_like(T)
    rows = [_contact_rows(model, x, k, c, zero_a) for k, c in zip(ids, contacts)]
    J = np.concatenate([r[0] for r in rows], axis=-2)
    gamma = np.concatenate([r[1] for r in rows], axis=-1)
    MinvJt = Minv @ np.swapaxes(J, -1, -2)
    Lambda_inv = J @ MinvJt  # the inverse contact-space inertia J M^-1 J^T
    if damping == 0.0:
        w = np.linalg.eigvalsh(Lambda_inv)
        bad = w[..., 0] <= RANK_TOLERANCE * w[..., -1]
        if np.any(bad):
            where = "" if single else f" at knot {int(np.argmax(bad))}"
            raise ValueError(f"{name}{where}: the contact Jacobian is rank deficient (redundant contacts, e.g. "
                             "two 6d contacts on one body, or more point contacts than the limbs can hold); "
                             "remove contacts or pass damping > 0")
    rhs = gamma + (J @ a0[..., None])[..., 0]
    lam = -np.linalg.solve(Lambda_inv + damping * np.eye(J.shape[-2]), rhs[..., None])[..., 0]
    a = a0 + (MinvJt @ lam[..., None])[..., 0]
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(lam))):
        raise ValueError(f"{name}: the solution is not finite (ill-conditioned contacts)")
    offsets = np.cumsum([0] + [c.dim for c in contacts])
    forces = tuple(lam[..., offsets[i]:offsets[i + 1]] for i in range(len(contacts)))
    return ContactDynamicsResult(a, forces, lam, J, gamma)
