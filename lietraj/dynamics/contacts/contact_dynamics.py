"""Contact-constrained forward dynamics: accelerations and contact forces of a robot with rigid contacts.

Each contact holds a frame fixed in the world: all six components of its motion (``kind="6d"``, a foot sole)
or the motion of its origin only (``kind="3d"``, a point foot). With ``J`` (nc, nv) the stacked contact rows of
the frame Jacobians and ``gamma`` (nc,) the acceleration the contacts would have at ``a = 0``, the accelerations
``a`` and the contact forces ``lambda`` solve the KKT system (seed 000 leaves contacts to future work; this is
Pinocchio's ``forwardDynamics`` with contacts)::

    [[M, J^T], [J, 0]] [a; -lambda] = [tau - b; -gamma],   i.e.  M a + b = tau + J^T lambda,   J a + gamma = 0

The drift ``gamma`` is, per contact, in the contact frame's own axes at its origin (Pinocchio's LOCAL):

- 6d: the frame's spatial acceleration at ``a = 0`` (``J_dot v``; the time derivative of the local twist);
- 3d: the classical acceleration of the frame origin at ``a = 0`` (spatial linear part + ``w x v``);

plus the Baumgarte stabilization ``Kv v_c + Kp e_c``, so that the contact acceleration obeys
``a_c = -Kv v_c - Kp e_c``: ``v_c`` is the frame's local twist (its linear part for 3d) and ``e_c`` the placement
error with respect to the contact's ``target`` pose, ``log6(target^-1 oMf)`` for 6d and ``R^T (p - p_target)`` for
3d (Pinocchio's ``constraintDynamics`` with the world as second joint). With ``reference="local_world_aligned"``
a contact's rows are rotated into world axes: the accelerations are unchanged and its forces are reported in
world axes at the frame origin.

One compiled pass per state (``contact_dynamics_core``), allocation-free:

1. ``b = h(q, v)`` by RNEA at ``a = 0`` (``rnea_core``), whose forward pass leaves the body twists and bias
   accelerations that give ``gamma``; world poses of the bodies from its local placements;
2. ``M`` by CRBA (``crba_core``), factorized in place as ``M = L^T D L`` along the kinematic tree (Featherstone's
   LTDL, *Rigid Body Dynamics Algorithms* §6.5: ``L`` keeps the branch-induced sparsity of ``M``);
3. the contact rows ``J`` by walking each contact body's support chain (world motion subspaces moved to the
   contact frame), ``Z = L^-T J^T`` (a solve along the same chain only), the contact-space inverse inertia
   ``S = J M^-1 J^T = Z^T D^-1 Z`` plus ``damping I``, factorized ``S = L_S D_S L_S^T``;
4. ``u = L^-T (tau - b)``, ``lambda = -S^-1 (gamma + Z^T D^-1 u)`` and ``a = L^-1 D^-1 (u + Z lambda)``.

Contacts are packed once per contact set into two arrays (``pack_contacts``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics.lie import se3
from lietraj.dynamics.lie.se3 import between, log6
from lietraj.dynamics._checks import (
    BAD_N,
    BAD_TAU,
    NO_FEXT,
    OK,
    base_pose,
    base_poses,
    check_state,
    checked_real,
    non_finite_entry,
    checked_state,
    checked_vector,
    finite,
    raise_for_status,
)
from lietraj.dynamics._spatial import (
    act_inv_motion,
    add,
    cross,
    load3,
    load9,
    mm,
    motion_subspace,
    mtv,
    mv,
    scale,
    store3,
    store9,
    sub,
)
from lietraj.dynamics.algorithms.crba import _COLS as CRBA_COLS
from lietraj.dynamics.algorithms.crba import crba_core
from lietraj.dynamics.kinematics.kinematics import LOCAL_WORLD_ALIGNED, act_motion, frame_id
from lietraj.dynamics.model.model import JOINT_FREE, DofTables, ModelArrays, RobotModel, refuse_mimic
from lietraj.dynamics.model.workspace import KeptByIdentity, Workspace, workspace_for
from lietraj.dynamics.algorithms.rnea import _COLS as RNEA_COLS
from lietraj.dynamics.algorithms.rnea import rnea_core
from lietraj.dynamics.lie.state import State, Trajectory

KINDS = {"6d": 6, "3d": 3}
CONTACT_REFERENCES = ("local", "local_world_aligned")
# Smallest pivot of the factorization of J M^-1 J^T, relative to its largest diagonal entry, below which the
# contacts count as redundant.
RANK_TOLERANCE = 1e-12

# Kernel statuses beyond those of _checks: redundant contacts, a non-finite solution, a non-finite tau.
RANK_DEFICIENT, NOT_FINITE_SOLUTION, TAU_NOT_FINITE = 200, 201, 202

# Packed contacts. CI (nc_contacts, 4) int64: body of the frame, rows (6 or 3), reference (kinematics' LOCAL or
# LOCAL_WORLD_ALIGNED), has a position target. CF (nc_contacts, 26): the frame's pose in its body R (9, row
# major), p (3); Kp, Kv; the target pose R (9), p (3).
CI_BODY, CI_DIM, CI_REFERENCE, CI_TARGET, CI_COLS = 0, 1, 2, 3, 4
CF_R, CF_P, CF_KP, CF_KV, CF_TR, CF_TP, CF_COLS = 0, 9, 12, 13, 14, 23, 26

# Work-array columns: rnea_core's (local placements, twists, accelerations with gravity, forces), then the world
# pose of each body, R (9) and p (3).
_WR, _WP, _COLS = RNEA_COLS, RNEA_COLS + 9, RNEA_COLS + 12
_V, _A = 12, 18  # rnea_core's twist and acceleration columns
_ZERO3 = (0.0, 0.0, 0.0)


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


class PackedContacts(NamedTuple):
    """A contact set in the kernels' form: ``CI`` (k, 4) int64 and ``CF`` (k, 26) (layout at ``CI_BODY``,
    ``CF_R``), ``nc`` the number of rows and ``offsets`` (k + 1,) the first row of each contact."""

    CI: np.ndarray
    CF: np.ndarray
    nc: int
    offsets: tuple[int, ...]


class ContactDynamicsWork(NamedTuple):
    """Work arrays of the contact dynamics for nc contact rows: per body rnea_core's columns and the world pose
    (``_COLS``), CRBA's, the mass matrix and its factor ``M`` (nv, nv), ``Z`` (max(nc, 1), nv) and the Schur
    complement ``S`` (nc, nc)."""

    bodies: np.ndarray
    crba: np.ndarray
    M: np.ndarray
    Z: np.ndarray
    S: np.ndarray


def contact_dynamics_work(model: RobotModel, nc: int) -> ContactDynamicsWork:
    nb, nv = model.nb, model.nv
    return ContactDynamicsWork(np.zeros((nb, _COLS)), np.zeros((nb, CRBA_COLS)), np.zeros((nv, nv)),
                               np.zeros((max(nc, 1), nv)), np.zeros((nc, nc)))


# ---- compiled kernels -----------------------------------------------------------------------------------------


@helper
def ltdl_factor(dp, M):
    """M = L^T D L in place (Featherstone's LTDL): D on the diagonal, L's strictly lower entries M[k, i] for i an
    ancestor dof of k. Returns False when a pivot is not positive."""
    for k in range(M.shape[0] - 1, -1, -1):
        d = M[k, k]
        if not d > 0.0:
            return False
        i = dp[k]
        while i >= 0:
            f = M[k, i] / d
            j = i
            while j >= 0:
                M[i, j] -= f * M[k, j]
                j = dp[j]
            M[k, i] = f
            i = dp[i]
    return True


@helper
def ltdl_solve_transposed(dp, M, x):
    """x <- L^-T x (a backward sweep: each dof's value, once final, is carried to its ancestors)."""
    for k in range(M.shape[0] - 1, -1, -1):
        xk = x[k]
        j = dp[k]
        while j >= 0:
            x[j] -= M[k, j] * xk
            j = dp[j]


@helper
def ltdl_solve_transposed_chain(dp, M, x, top):
    """ltdl_solve_transposed for an x that is zero off dof ``top`` and its ancestors (it stays so): the sweep
    walks that chain only."""
    k = top
    while k >= 0:
        xk = x[k]
        j = dp[k]
        while j >= 0:
            x[j] -= M[k, j] * xk
            j = dp[j]
        k = dp[k]


@helper
def ltdl_solve_rest(dp, M, x):
    """x <- L^-1 D^-1 x: with ltdl_solve_transposed, x <- M^-1 x."""
    n = M.shape[0]
    for k in range(n):
        x[k] /= M[k, k]
    for k in range(n):
        acc = x[k]
        j = dp[k]
        while j >= 0:
            acc -= M[k, j] * x[j]
            j = dp[j]
        x[k] = acc


@helper
def _last_dof(mi, i):
    """The last dof of body i's joint, where its support chain of dofs starts (-1 for the world)."""
    return -1 if i < 0 else mi[i, 2] + (5 if mi[i, 1] == JOINT_FREE else 0)


@helper
def _world_poses(mi, W):
    """World pose of each body from rnea_core's local placements in W."""
    for i in range(mi.shape[0]):
        R, p = load9(W, i, 0), load3(W, i, 9)
        parent = mi[i, 0]
        if parent >= 0:
            oR = load9(W, parent, _WR)
            R, p = mm(oR, R), add(load3(W, parent, _WP), mv(oR, p))
        store9(W, i, _WR, R)
        store3(W, i, _WP, p)


@helper
def _store_rows(out, r, reference, oR, v, w, six):
    """Rows r.. of a contact, given in the frame's axes (v, w), in its reference."""
    if reference == LOCAL_WORLD_ALIGNED:
        v = mv(oR, v)
        w = mv(oR, w)
    out[r], out[r + 1], out[r + 2] = v[0], v[1], v[2]
    if six:
        out[r + 3], out[r + 4], out[r + 5] = w[0], w[1], w[2]


@helper
def _contact_rows(mi, mf, g, CI, CF, c, r, W, J, gamma):
    """Rows r .. r + dim of J and gamma for contact c, from the twists, accelerations and poses in W."""
    i, d, reference = CI[c, CI_BODY], CI[c, CI_DIM], CI[c, CI_REFERENCE]
    six = d == 6
    fR, fp = load9(CF, c, CF_R), load3(CF, c, CF_P)
    for k in range(d):
        J[r + k, :] = 0.0
    if i >= 0:
        oR, op = mm(load9(W, i, _WR), fR), add(load3(W, i, _WP), mv(load9(W, i, _WR), fp))
        vf, wf = act_inv_motion(fR, fp, load3(W, i, _V), load3(W, i, _V + 3))
        # rnea_core's accelerations carry gravity as the world's acceleration -g: remove it.
        a0 = add(load3(W, i, _A), mtv(load9(W, i, _WR), (g[0], g[1], g[2])))
        af, bf = act_inv_motion(fR, fp, a0, load3(W, i, _A + 3))
    else:  # a frame fixed in the world
        oR, op = fR, fp
        vf, wf, af, bf = _ZERO3, _ZERO3, _ZERO3, _ZERO3
    if not six:
        af = add(af, cross(wf, vf))
    Kp, Kv = CF[c, CF_KP], CF[c, CF_KV]
    af, bf = add(af, scale(vf, Kv)), add(bf, scale(wf, Kv))
    if CI[c, CI_TARGET] != 0:
        TR, Tp = load9(CF, c, CF_TR), load3(CF, c, CF_TP)
        if six:  # log6(T^-1 oMf)
            R, p = between(TR, Tp, oR, op)
            u, w = log6(R, p)
            af, bf = add(af, scale(u, Kp)), add(bf, scale(w, Kp))
        else:
            af = add(af, scale(mtv(oR, sub(op, Tp)), Kp))
    _store_rows(gamma, r, reference, oR, af, bf, six)
    j = i
    while j >= 0:  # the support chain: world motion subspaces, in the frame's axes at its origin
        iv, free = mi[j, 2], mi[j, 1] == JOINT_FREE
        jR, jp = load9(W, j, _WR), load3(W, j, _WP)
        for col in range(6 if free else 1):
            if free:
                e = (1.0 if col % 3 == 0 else 0.0, 1.0 if col % 3 == 1 else 0.0, 1.0 if col % 3 == 2 else 0.0)
                Sv, Sw = (e, _ZERO3) if col < 3 else (_ZERO3, e)
            else:
                Sv, Sw = motion_subspace(mf, mi[j, 1], j)
            sv, sw = act_motion(jR, jp, Sv, Sw)
            sv, sw = act_inv_motion(oR, op, sv, sw)
            if reference == LOCAL_WORLD_ALIGNED:
                sv, sw = mv(oR, sv), mv(oR, sw)
            J[r, iv + col], J[r + 1, iv + col], J[r + 2, iv + col] = sv[0], sv[1], sv[2]
            if six:
                J[r + 3, iv + col], J[r + 4, iv + col], J[r + 5, iv + col] = sw[0], sw[1], sw[2]
        j = mi[j, 0]


@kernel
def contact_dynamics_core(mi, mf, g, dp, H, s, v, tau, CI, CF, damping, W, WC, M, Z, S, a, lambda_c, J, gamma):
    """Contact-constrained forward dynamics for one checked state (module docstring, steps 1-4): writes a (nv,),
    lambda_c, J (nc, nv) and gamma (nc,); returns OK, RANK_DEFICIENT (damping 0 and J M^-1 J^T singular) or
    NOT_FINITE_SOLUTION. Work arrays: W (nb, _COLS), WC (nb, CRBA_COLS), M (nv, nv), Z (max(nc, 1), nv),
    S (nc, nc)."""
    return _constrained(mi, mf, g, dp, H, s, v, tau, CI, CF, damping, -1.0, W, WC, M, Z, S, a, lambda_c, J, gamma)


@kernel
def impact_core(mi, mf, g, dp, H, s, v, CI, CF, restitution, damping, W, WC, M, Z, S, dv, lambda_c, J, gamma):
    """The velocity jump ``dv = v⁺ - v`` and the impulses ``lambda_c`` of a rigid impact on the contacts, for one
    checked state (``impulse_dynamics``' equations): the same KKT system as ``contact_dynamics_core``'s with a zero
    right-hand side for the dynamics, ``M dv = J^T lambda``, and ``(1 + restitution) J v`` for the contacts' drift,
    so that ``J v⁺ = -restitution J v`` (less ``damping lambda``). The rows ``J`` are in the contacts' references;
    ``gamma`` is scratch. Statuses and work arrays as ``contact_dynamics_core``'s."""
    return _constrained(mi, mf, g, dp, H, s, v, v, CI, CF, damping, restitution, W, WC, M, Z, S, dv, lambda_c, J,
                        gamma)


@helper
def _constrained(mi, mf, g, dp, H, s, v, tau, CI, CF, damping, restitution, W, WC, M, Z, S, a, lambda_c, J, gamma):
    """``contact_dynamics_core`` (``restitution`` < 0) or ``impact_core`` (``restitution`` >= 0, ``a`` the velocity
    jump, ``tau`` unread): the two differ only in the right-hand sides of the KKT system."""
    nv, nc = M.shape[0], J.shape[0]
    impact = restitution >= 0.0
    # 1. b = h(q, v), in a; the zero acceleration it needs is Z's first row, overwritten below. Its forward pass
    # leaves the twists, accelerations and poses the contact rows are built from.
    for k in range(nv):
        Z[0, k] = 0.0
    rnea_core(mi, mf, g, H, s, v, Z[0], NO_FEXT, W, a)
    _world_poses(mi, W)
    # 2. M = L^T D L
    crba_core(mi, mf, s, WC, M)
    if not ltdl_factor(dp, M):
        return NOT_FINITE_SOLUTION
    for k in range(nv):
        a[k] = 0.0 if impact else tau[k] - a[k]
    if not impact:
        ltdl_solve_transposed(dp, M, a)  # u
    # 3. J, gamma; Z = L^-T J^T (rows), S = Z^T D^-1 Z and lambda_c = gamma + J a0 = gamma + Z^T D^-1 u (an impact:
    # (1 + e) J v, u = 0). A contact's rows of Z are zero off the dofs of its body's support chain, so the sums run
    # over that chain only.
    r = 0
    for c in range(CI.shape[0]):
        _contact_rows(mi, mf, g, CI, CF, c, r, W, J, gamma)
        i, d = CI[c, CI_BODY], CI[c, CI_DIM]
        top = _last_dof(mi, i)
        for r1 in range(r, r + d):
            for m in range(nv):
                Z[r1, m] = J[r1, m]
            ltdl_solve_transposed_chain(dp, M, Z[r1], top)
            if impact:
                acc = 0.0
                for m in range(nv):
                    acc += J[r1, m] * v[m]
                lambda_c[r1] = (1.0 + restitution) * acc
            else:
                lambda_c[r1] = gamma[r1]
            for r2 in range(r1 + 1):
                S[r1, r2] = 0.0
        k = top
        while k >= 0:
            dinv = 1.0 / M[k, k]
            for r1 in range(r, r + d):
                t = Z[r1, k] * dinv
                lambda_c[r1] += t * a[k]
                for r2 in range(r1 + 1):
                    S[r1, r2] += t * Z[r2, k]
            k = dp[k]
        for r1 in range(r, r + d):
            S[r1, r1] += damping
        r += d
    # S = L_S D_S L_S^T in place (lower part), with the rank test on its pivots.
    largest = 0.0
    for r1 in range(nc):
        largest = max(largest, S[r1, r1])
    for r1 in range(nc):
        for r2 in range(r1):
            acc = S[r1, r2]
            for m in range(r2):
                acc -= S[r1, m] * S[r2, m] * S[m, m]
            S[r1, r2] = acc / S[r2, r2]
        d = S[r1, r1]
        for m in range(r1):
            d -= S[r1, m] * S[r1, m] * S[m, m]
        if damping == 0.0 and d <= RANK_TOLERANCE * largest:
            return RANK_DEFICIENT
        if not d > 0.0:
            return NOT_FINITE_SOLUTION
        S[r1, r1] = d
    # 4. lambda = -S^-1 (gamma + J a0), a = L^-1 D^-1 (u + Z lambda)
    for r1 in range(nc):
        acc = -lambda_c[r1]
        for m in range(r1):
            acc -= S[r1, m] * lambda_c[m]
        lambda_c[r1] = acc
    for r1 in range(nc):
        lambda_c[r1] /= S[r1, r1]
    for r1 in range(nc - 1, -1, -1):
        for m in range(r1 + 1, nc):
            lambda_c[r1] -= S[m, r1] * lambda_c[m]
    r = 0
    for c in range(CI.shape[0]):
        i, d = CI[c, CI_BODY], CI[c, CI_DIM]
        k = _last_dof(mi, i)
        while k >= 0:
            acc = a[k]
            for r1 in range(r, r + d):
                acc += Z[r1, k] * lambda_c[r1]
            a[k] = acc
            k = dp[k]
        r += d
    ltdl_solve_rest(dp, M, a)
    if not (finite(a) and finite(lambda_c)):
        return NOT_FINITE_SOLUTION
    return OK


@helper
def _check(mi, nv, H, s, v, tau):
    """Status of the state and tau, for a model given by its packed arrays (floating base iff body 0 has the free
    joint)."""
    floating = mi[0, 1] == JOINT_FREE
    status = check_state(floating, mi.shape[0] - 1 if floating else mi.shape[0], nv, H, s, v)
    if status == OK:
        if tau.shape[0] != nv:
            status = BAD_TAU
        elif not finite(tau):
            status = TAU_NOT_FINITE
    return status


@kernel
def contact_dynamics_kernel(model, dofs, H, s, v, tau, CI, CF, damping, work, a, lambda_c, J, gamma):
    """Input checks and contact_dynamics_core (work: ``ContactDynamicsWork``); returns a status."""
    m, w = ModelArrays(*model), ContactDynamicsWork(*work)
    status = _check(m.joints, a.shape[0], H, s, v, tau)
    if status == OK:
        status = contact_dynamics_core(m.joints, m.bodies, m.gravity, DofTables(*dofs).dof_parent, H, s, v, tau, CI, CF,
                                       damping, w.bodies, w.crba, w.M, w.Z, w.S, a, lambda_c, J, gamma)
    return status


@kernel
def impact_batch_kernel(model, dofs, H, SS, V, CI, CF, restitution, damping, work, V_PLUS, LAM, JJ, GAMMA):
    """``impact_core`` at N knots, ``V_PLUS = V + dv``; GAMMA may have a single knot (scratch). Returns (status,
    failing knot)."""
    m, w = ModelArrays(*model), ContactDynamicsWork(*work)
    N, nv = SS.shape[0], V_PLUS.shape[1]
    if (V.shape[0] != N or V_PLUS.shape[0] != N or LAM.shape[0] != N or JJ.shape[0] != N
            or (m.floating and H.shape[0] != N)):
        return BAD_N, 0
    for k in range(N):
        Hk = H[k] if m.floating else H[0]
        status = check_state(m.floating, m.n, nv, Hk, SS[k], V[k])
        if status == OK:
            status = impact_core(m.joints, m.bodies, m.gravity, DofTables(*dofs).dof_parent, Hk, SS[k], V[k], CI, CF,
                                 restitution, damping, w.bodies, w.crba, w.M, w.Z, w.S, V_PLUS[k], LAM[k], JJ[k],
                                 GAMMA[0])
        if status != OK:
            return status, k
        for i in range(nv):
            V_PLUS[k, i] += V[k, i]
    return OK, 0


@kernel
def contact_dynamics_batch_kernel(model, dofs, H, SS, V, TAU, CI, CF, damping, work, A, LAM, JJ, GAMMA):
    """contact_dynamics_kernel at N knots; JJ and GAMMA may have a single knot, then overwritten at every knot
    (when only a and lambda are wanted). Returns (status, failing knot)."""
    m, w = ModelArrays(*model), ContactDynamicsWork(*work)
    N, nv = SS.shape[0], A.shape[1]
    if (V.shape[0] != N or TAU.shape[0] != N or A.shape[0] != N or LAM.shape[0] != N
            or (m.floating and H.shape[0] != N) or JJ.shape[0] not in (1, N) or GAMMA.shape[0] not in (1, N)):
        return BAD_N, 0
    per_knot_J, per_knot_gamma = JJ.shape[0] == N, GAMMA.shape[0] == N
    for k in range(N):
        Hk = H[k] if m.floating else H[0]
        status = _check(m.joints, nv, Hk, SS[k], V[k], TAU[k])
        if status == OK:
            status = contact_dynamics_core(m.joints, m.bodies, m.gravity, DofTables(*dofs).dof_parent, Hk, SS[k], V[k],
                                           TAU[k], CI, CF, damping, w.bodies, w.crba, w.M, w.Z, w.S, A[k], LAM[k],
                                           JJ[k] if per_knot_J else JJ[0], GAMMA[k] if per_knot_gamma else GAMMA[0])
        if status != OK:
            return status, k
    return OK, 0


# ---- Python API -------------------------------------------------------------------------------------------------


def _pack(model: RobotModel, contacts: tuple, what: str) -> PackedContacts:
    CI = np.zeros((len(contacts), CI_COLS), dtype=np.int64)
    CF = np.zeros((len(contacts), CF_COLS))
    offsets = [0]
    for c, contact in enumerate(contacts):
        if not isinstance(contact, Contact):
            raise TypeError(f"{what}({model.name}): contacts must be Contact objects, got {type(contact).__name__}")
        try:
            frame = model.frames[frame_id(model, contact.frame)]
        except (KeyError, IndexError, TypeError) as e:
            raise ValueError(f"{what}({model.name}): unknown contact frame {contact.frame!r} ({e})") from None
        CI[c] = (frame.body, contact.dim, CONTACT_REFERENCES.index(contact.reference), contact.target is not None)
        CF[c, CF_R:CF_R + 9] = np.ravel(frame.R)
        CF[c, CF_P:CF_P + 3] = frame.p
        CF[c, CF_KP], CF[c, CF_KV] = contact.baumgarte
        if contact.target is not None:
            CF[c, CF_TR:CF_TR + 9] = contact.target[:3, :3].ravel()
            CF[c, CF_TP:CF_TP + 3] = contact.target[:3, 3]
        offsets.append(offsets[-1] + contact.dim)
    CI.flags.writeable = CF.flags.writeable = False
    return PackedContacts(CI, CF, offsets[-1], tuple(offsets))


def contact_tuple(model: RobotModel, contacts, what: str) -> tuple:
    """``contacts`` as a tuple (its entries are checked where they are read), or the TypeError of something that is
    not a sequence of contacts (None, a single Contact, a string). The contact dynamics do not support mimic joints
    (their LTDL factorization follows the tree of dofs): every contact function refuses such a model here."""
    if model.mimic:
        refuse_mimic(model, what)
    if type(contacts) is tuple:
        return contacts
    if contacts is None or isinstance(contacts, (Contact, str, bytes)):
        raise TypeError(f"{what}({model.name}): contacts must be a sequence of Contact objects, got "
                        f"{type(contacts).__name__}")
    try:
        return tuple(contacts)
    except TypeError:
        raise TypeError(f"{what}({model.name}): contacts must be a sequence of Contact objects, got "
                        f"{type(contacts).__name__}") from None


def pack_contacts(model: RobotModel, contacts: Sequence[Contact], what: str = "contact_dynamics") -> PackedContacts:
    """The kernels' form of ``contacts`` on ``model`` (TypeError for a non-Contact, ValueError for an unknown frame,
    both prefixed by ``what``): read-only data, kept with the model for its last contact sets by the identity of the
    Contact objects (which are immutable): packing costs microseconds, each contact_dynamics call would pay it."""
    contacts = contact_tuple(model, contacts, what)
    kept = model.derived("contact_packs", lambda _: KeptByIdentity())
    return kept.get(contacts, lambda: _pack(model, contacts, what))


def raise_for_contact_status(status: int, model: RobotModel, knot: int | None = None, what: str = "contact_dynamics",
                             x: State | Trajectory | None = None, tau: np.ndarray | None = None) -> None:
    """The ValueError of a contact-dynamics kernel status (the state ``x`` and ``tau`` are searched for a NaN)."""
    if status == OK:
        return
    name = f"{what}({model.name})"
    where = "" if knot is None else f" at knot {knot}"
    if status == RANK_DEFICIENT:
        raise ValueError(f"{name}{where}: the contact Jacobian is rank deficient (redundant contacts, e.g. two 6d "
                         "contacts on one body, or more point contacts than the limbs can hold); remove contacts or "
                         "pass damping > 0")
    if status == NOT_FINITE_SOLUTION:
        raise ValueError(f"{name}{where}: the solution is not finite (ill-conditioned contacts)")
    if status == TAU_NOT_FINITE:
        raise ValueError(f"{name}{where}: tau contains NaN or inf{non_finite_entry(knot, x, tau=tau)}")
    raise_for_status(status, model, what, knot, x, tau=tau)


def solve_contact_dynamics(model: RobotModel, X: Trajectory, TAU: np.ndarray, packed: PackedContacts, damping: float,
                           A: np.ndarray, LAM: np.ndarray, JJ: np.ndarray, GAMMA: np.ndarray,
                           workspace: Workspace, what: str = "contact_dynamics") -> None:
    """The batched kernel into A (N, nv), LAM (N, nc), JJ (N or 1, nc, nv), GAMMA (N or 1, nc), raising its
    ValueError; inputs as contact_dynamics' (TAU (N, nv) float64, damping checked), work arrays from
    ``workspace``."""
    status, k = contact_dynamics_batch_kernel(model.packed, model.dof_tables, base_poses(X), X.s, X.v, TAU, packed.CI,
                                              packed.CF, damping, workspace.work(contact_dynamics_work, packed.nc), A,
                                              LAM, JJ, GAMMA)
    if status != OK:
        raise_for_contact_status(status, model, k, what, X, TAU)


def solve_contacts(model: RobotModel, x: State | Trajectory, tau: np.ndarray, contacts: tuple, damping: float,
                   workspace: Workspace, what: str) -> ContactDynamicsResult:
    """``contact_dynamics`` of checked inputs (``checked_state``, ``checked_vector``, ``checked_real``), its errors
    reported as those of ``what``."""
    packed = pack_contacts(model, contacts, what)
    nv, nc, lead = model.nv, packed.nc, tau.shape[:-1]
    a, lambda_c, J, gamma = np.empty(lead + (nv,)), np.empty(lead + (nc,)), np.empty(lead + (nc, nv)), np.empty(lead + (nc,))
    if type(x) is State:
        status = contact_dynamics_kernel(model.packed, model.dof_tables, base_pose(x), x.s, x.v, tau, packed.CI,
                                         packed.CF, damping, workspace.work(contact_dynamics_work, nc), a, lambda_c,
                                         J, gamma)
        if status != OK:
            raise_for_contact_status(status, model, None, what, x, tau)
    else:
        solve_contact_dynamics(model, x, tau, packed, damping, a, lambda_c, J, gamma, workspace, what)
    o = packed.offsets
    forces = tuple(lambda_c[..., o[i]:o[i + 1]] for i in range(len(o) - 1))
    return ContactDynamicsResult(a, forces, lambda_c, J, gamma)


def solve_impact(model: RobotModel, x: State | Trajectory, contacts: tuple, restitution: float, damping: float,
                 workspace: Workspace, what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(v_plus, lambda_c, J)`` of a rigid impact on ``contacts`` (``impact_core``, one compiled call over the knots
    of a Trajectory): the velocity after it, the stacked impulses and contact rows in the contacts' references.
    Inputs checked by the caller (``impulse_dynamics``); its errors are reported as ``what``'s."""
    packed = pack_contacts(model, contacts, what)
    single = type(x) is State
    nv, nc, N = model.nv, packed.nc, 1 if single else len(x)
    H = base_pose(x)[None] if single else base_poses(x)
    S, V = (x.s[None], x.v[None]) if single else (x.s, x.v)
    v_plus, lambda_c, J = np.empty((N, nv)), np.empty((N, nc)), np.empty((N, nc, nv))
    status, k = impact_batch_kernel(model.packed, model.dof_tables, np.ascontiguousarray(H), np.ascontiguousarray(S),
                                    np.ascontiguousarray(V), packed.CI, packed.CF, restitution, damping,
                                    workspace.work(contact_dynamics_work, nc), v_plus, lambda_c, J, np.empty((1, nc)))
    if status != OK:
        raise_for_contact_status(status, model, None if single else k, what, x)
    return (v_plus[0], lambda_c[0], J[0]) if single else (v_plus, lambda_c, J)


def contact_dynamics(model: RobotModel, x: State | Trajectory, tau, contacts: Sequence[Contact],
                     damping: float = 0.0, workspace: Workspace | None = None) -> ContactDynamicsResult:
    """Forward dynamics under the rigid ``contacts``: accelerations and contact forces (see the module docstring).

    ``tau`` is the generalized force (nv,), as for ``aba``: for a floating base its first six entries are a wrench
    on the base (zero for an unactuated base). ``x`` is a State, or a Trajectory with ``tau`` (N, nv) (all
    results then get a leading axis N, computed in one compiled call). ``damping`` >= 0 is added to the diagonal of
    ``J M^-1 J^T`` (Pinocchio's ``forwardDynamics`` damping): with 0, redundant contacts (a rank-deficient ``J``)
    raise a ValueError; with a small positive value they are solved in the least-squares sense, the constraints
    then holding approximately. ``workspace``: a ``Workspace(model)`` whose work arrays are reused (without one,
    each call allocates its own). Raises TypeError for an argument of the wrong kind and ValueError for a wrong
    shape or value, naming it.
    """
    what = "contact_dynamics"
    x = checked_state(model, x, what)
    workspace = workspace_for(model, workspace, what)
    tau = checked_vector(tau, model.nv, None if type(x) is State else len(x), model, what, "tau")
    damping = checked_real(damping, model, what, "damping")
    return solve_contacts(model, x, tau, contact_tuple(model, contacts, what), damping, workspace, what)
