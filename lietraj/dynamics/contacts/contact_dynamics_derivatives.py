"""First-order derivatives of the contact-constrained forward dynamics (``contact_dynamics``) w.r.t. state and torque.

At the solution ``(a, lambda)`` of ``contact_dynamics`` (module docstring there), with the contact rows taken in
each contact frame's own axes (LOCAL), the two equations

    F(x, a, lambda) = ID(x, a) - J^T lambda - tau = 0,        C(x, a) + damping lambda = 0,   C = J a + gamma

hold identically in ``(x, tau)``. Differentiating them (Carpentier & Mansard 2018, "Analytical derivatives of
rigid body dynamics algorithms", §contact dynamics; Crocoddyl's ``DifferentialActionModelContactFwdDynamics``)::

    [[M, -J^T], [J, damping I]] [da; dlambda] = [dtau - dF/dx; -dC/dx]     (a, lambda held fixed on the right)

- ``dF/dx``: IDSVA (``rnea_derivatives``) at ``a`` with ``fext`` the contact forces as wrenches on the contact
  bodies in the body frames. ``rnea`` subtracts external wrenches, so this is ``ID - J^T lambda``; a LOCAL contact
  force is fixed in the contact frame, hence in its body, which is exactly how IDSVA differentiates a body-frame
  ``fext``.
- ``dC/dx``: ``C(x, a)`` is the contact frame's acceleration at ``a`` in LOCAL (spatial for 6d, classical for 3d:
  ``frame_acceleration_derivatives``) plus the Baumgarte terms ``Kv v_c`` (``frame_velocity_derivatives``) and
  ``Kp e_c``: for 6d ``Jr(e)^-1 J`` (``frame_placement_error``); for 3d, ``e = R^T (p - p_target)`` moves under
  a local frame twist ``(dv, dw)`` by ``dv + e x dw``, so ``de/dq = J_lin + [e]x J_ang``.

The system is solved through the Schur complement ``S = J M^-1 J^T + damping I`` as in ``contact_dynamics``.
With ``M^-1`` from the recursive IMMAmb (``inverse_mass_matrix``), ``Y_x = -M^-1 dF/dx`` (the unconstrained
forward-dynamics derivatives with the contact forces held as body wrenches, computed as in ``aba_derivatives``:
sparse products, and for a floating base the base-pose columns in closed form since body-fixed wrenches see
``H`` only through gravity) and ``G = M^-1 J^T``::

    dlambda/dx = S^-1 (-dC/dx - J Y_x),   dlambda/dtau = -S^-1 G^T,
    da/dx = Y_x + G dlambda/dx,           da/dtau = M^-1 + G dlambda/dtau

with ``S`` factored by Cholesky. For a contact with ``reference="local_world_aligned"`` the accelerations are
the same and its force is the LOCAL one rotated into world axes, ``lambda_w = R lambda`` per block of three;
``R`` turns with the frame's local angular velocity Jacobian ``J_ang``, so
``dlambda_w/dq = R (dlambda/dq - [lambda]x J_ang)``.

Columns are the state tangent ``[z_q (nv); z_v (nv)]`` (base columns: body-twist perturbations ``H exp(z)``),
rows the accelerations ``(nv,)`` and the stacked forces ``(nc,)`` in contact order and in each contact's reference.
Everything after ``contact_dynamics`` runs in one compiled call for a whole trajectory (``x`` a Trajectory). The
steps after the rows and ``Y_x`` (``schur_products``, ``schur_factor``, ``plus_g_times``, ``in_references``) and
the forces' body wrenches (``contact_wrench``) serve the impact's derivatives too (``impulse_dynamics``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np
from numba import njit, prange

from lietraj._jit import helper, kernel, split_call, split_kernel
from lietraj.dynamics._checks import (
    BAD_A,
    BAD_N,
    NOT_FINITE,
    OK,
    base_pose,
    base_poses,
    check_dynamics_inputs,
    checked_real,
    checked_state,
    checked_vector,
    finite,
    first_failure,
    raise_for_status,
    result_arrays,
)
from lietraj.dynamics._spatial import add, base_placement, cross, load3, load9, mtv, mv, sub
from lietraj.dynamics.algorithms.aba_derivatives import minus_minv_dtau
from lietraj.dynamics.contacts.contact_dynamics import Contact, ContactDynamicsResult, contact_tuple, solve_contacts
from lietraj.dynamics.algorithms.inverse_mass_matrix import minv_core, minv_work
from lietraj.dynamics.kinematics.kinematics import (
    ACCELERATION,
    LOCAL,
    W_COLS,
    forward_kinematics_core,
    frame_id,
    frame_pose,
    model_tables,
)
from lietraj.dynamics.kinematics.kinematics_derivatives import motion_derivatives_core, placement_error_core
from lietraj.dynamics.model.model import DofTables, ModelArrays, RobotModel
from lietraj.dynamics.model.workspace import Workspace, workspace_for
from lietraj.dynamics.algorithms.rnea_derivatives import LOCAL_WRENCH, idsva_core, idsva_work
from lietraj.dynamics.lie.state import State, Trajectory

# Status of a Schur complement that is not positive definite (redundant contacts without damping).
SCHUR_SINGULAR = 110
# Contact table columns (shared with the impact derivatives): frame index, rows (3 or 6), first row, flags; the flag
# bits below.
CK, CDIM, COFF, CFLAGS = 0, 1, 2, 3
CF_WORLD_ALIGNED, CF_POSITION = 1, 2


@dataclass(frozen=True)
class ContactDynamicsDerivatives:
    """``a`` (nv,) and ``forces`` (nc,) of ``contact_dynamics`` (its ``lagrangian``) and their derivatives w.r.t.
    q (tangent basis), v and tau: ``da_dq``, ``da_dv``, ``da_dtau`` (nv, nv); ``df_dq``, ``df_dv``, ``df_dtau``
    (nc, nv). A leading axis N for a trajectory."""

    a: np.ndarray
    forces: np.ndarray
    da_dq: np.ndarray
    da_dv: np.ndarray
    da_dtau: np.ndarray
    df_dq: np.ndarray
    df_dv: np.ndarray
    df_dtau: np.ndarray


@helper
def contact_wrench(fb, ff, k, d, o, world_aligned, oR, lambda_c, lambda_local, fext):
    """Rows o .. o + d of ``lambda_c`` (the force, or impulse, of a contact on frame k at orientation ``oR``, in the
    contact's reference) in the frame's axes into ``lambda_local``, and added to ``fext`` as a wrench on the frame's
    body in body axes: a frame at ``(R, p)`` in its body moves ``[f; torque]`` to ``[R f; R torque + p x R f]``."""
    for r in range(o, o + d, 3):
        f = (lambda_c[r], lambda_c[r + 1], lambda_c[r + 2])
        if world_aligned:
            f = mtv(oR, f)
        lambda_local[r], lambda_local[r + 1], lambda_local[r + 2] = f[0], f[1], f[2]
    b = fb[k]
    fR, fp = load9(ff, k, 0), load3(ff, k, 9)
    force = mv(fR, (lambda_local[o], lambda_local[o + 1], lambda_local[o + 2]))
    torque = cross(fp, force)
    if d == 6:
        torque = add(torque, mv(fR, (lambda_local[o + 3], lambda_local[o + 4], lambda_local[o + 5])))
    for r in range(3):
        fext[b, r] += force[r]
        fext[b, 3 + r] += torque[r]


@helper
def _contact_rows(mi, mf, fb, ff, ci, gains, targets, a_last, H, s, v, a, lambda_c, Wk, MD, PE, r6, fext, lambda_local,
                  J, Jang, df_dq, df_dv):
    """Forward kinematics at ``a``; then per contact its LOCAL rows of J (and J_ang), ``-dC/dq`` and ``-dC/dv``
    into df_dq / df_dv, its force in LOCAL axes and as a wrench on its body (fext, body frame)."""
    nv = J.shape[1]
    forward_kinematics_core(mi, mf, H, s, v, a, ACCELERATION, a_last, Wk)
    fext[:, :] = 0.0
    for c in range(ci.shape[0]):
        k, d, o, flags = ci[c, CK], ci[c, CDIM], ci[c, COFF], ci[c, CFLAGS]
        Kp, Kv = gains[c, 0], gains[c, 1]
        oR, op = frame_pose(Wk, fb, ff, k)
        contact_wrench(fb, ff, k, d, o, flags & CF_WORLD_ALIGNED, oR, lambda_c, lambda_local, fext)
        # MD = [dv_dq, da_dq, da_dv, da_da = J] of the frame in LOCAL; dv_dv is J as well.
        motion_derivatives_core(mi, mf, fb, ff, k, ACCELERATION, LOCAL, d == 3, Wk, MD)
        for r in range(d):
            for col in range(nv):
                J[o + r, col] = MD[3, r, col]
                df_dq[o + r, col] = -MD[1, r, col] - Kv * MD[0, r, col]
                df_dv[o + r, col] = -MD[2, r, col] - Kv * MD[3, r, col]
        for r in range(3):
            for col in range(nv):
                Jang[c, r, col] = MD[3, 3 + r, col]
        if flags & CF_POSITION:
            if d == 6:
                TR, Tp = base_placement(targets[c])
                placement_error_core(mi, mf, fb, ff, k, TR, Tp, Wk, r6, PE)
                for r in range(6):
                    for col in range(nv):
                        df_dq[o + r, col] -= Kp * PE[r, col]
            else:
                e = mtv(oR, sub(op, (targets[c, 0, 3], targets[c, 1, 3], targets[c, 2, 3])))
                for col in range(nv):
                    ex = cross(e, (MD[3, 3, col], MD[3, 4, col], MD[3, 5, col]))
                    for r in range(3):
                        df_dq[o + r, col] -= Kp * (MD[3, r, col] + ex[r])


@helper
def cholesky_solve(L, B):
    """B <- L^-T L^-1 B for the lower Cholesky factor L (nc, nc) and B (nc, m)."""
    n, m = L.shape[0], B.shape[1]
    for r in range(n):
        for k in range(r):
            e = L[r, k]
            for col in range(m):
                B[r, col] -= e * B[k, col]
        e = 1.0 / L[r, r]
        for col in range(m):
            B[r, col] *= e
    for r in range(n - 1, -1, -1):
        e = 1.0 / L[r, r]
        for col in range(m):
            B[r, col] *= e
        for k in range(r):
            e = L[r, k]
            for col in range(m):
                B[k, col] -= e * B[r, col]


@helper
def schur_products(J, Minv, Yq, Yv, Gt, rhs_q, rhs_v):
    """``G^T = J M^-1`` into Gt and the right-hand sides ``rhs -= J Y`` for the q and v columns. J is sparse (the
    contact frames' ancestors' columns only): its zeros are skipped."""
    nc, nv = J.shape[0], J.shape[1]
    for c in range(nc):
        for col in range(nv):
            Gt[c, col] = 0.0
        for k in range(nv):
            e = J[c, k]
            if e != 0.0:
                for col in range(nv):
                    Gt[c, col] += e * Minv[k, col]
                    rhs_q[c, col] -= e * Yq[k, col]
                    rhs_v[c, col] -= e * Yv[k, col]


@helper
def schur_factor(Gt, J, damping, S):
    """The Schur complement ``S = G^T J^T + damping I`` factored by Cholesky in place (lower triangle); False when
    it is not positive definite (redundant contacts without damping)."""
    nc, nv = J.shape[0], J.shape[1]
    for r in range(nc):
        for c in range(r + 1):
            acc = damping if r == c else 0.0
            for k in range(nv):
                acc += Gt[r, k] * J[c, k]
            S[r, c] = acc
    for r in range(nc):
        for c in range(r + 1):
            acc = S[r, c]
            for k in range(c):
                acc -= S[r, k] * S[c, k]
            if r == c:
                if not acc > 0.0:
                    return False
                S[r, r] = math.sqrt(acc)
            else:
                S[r, c] = acc / S[c, c]
    return True


@helper
def plus_g_times(Gt, X, Y):
    """Y += G X with ``G = M^-1 J^T`` given as Gt (nc, nv), X (nc, m), Y (nv, m)."""
    for r in range(Y.shape[0]):
        for c in range(Gt.shape[0]):
            e = Gt[c, r]
            for col in range(Y.shape[1]):
                Y[r, col] += e * X[c, col]


@helper
def _rotate_rows(oR, X, r):
    """Rows r, r + 1, r + 2 of X (nc, m), given in a frame's axes, into world axes (``oR`` the frame's
    orientation)."""
    for col in range(X.shape[1]):
        X[r, col], X[r + 1, col], X[r + 2, col] = mv(oR, (X[r, col], X[r + 1, col], X[r + 2, col]))


@helper
def in_references(ci, fb, ff, Wk, lambda_local, Jang, dl_dq, dl_dv, dl_du):
    """The LOCAL derivatives of the contact forces (or impulses) w.r.t. q, v and another input (``dl_du``, possibly
    with no column) into each contact's reference: for a world-aligned one ``dlambda_w = R (dlambda - [lambda]x
    J_ang dq)``, ``R`` turning with the frame's local angular Jacobian ``J_ang``."""
    for c in range(ci.shape[0]):
        if not ci[c, CFLAGS] & CF_WORLD_ALIGNED:
            continue
        k, d, o = ci[c, CK], ci[c, CDIM], ci[c, COFF]
        oR, _ = frame_pose(Wk, fb, ff, k)
        for r in range(o, o + d, 3):
            f = (lambda_local[r], lambda_local[r + 1], lambda_local[r + 2])
            for col in range(dl_dq.shape[1]):
                x = sub((dl_dq[r, col], dl_dq[r + 1, col], dl_dq[r + 2, col]),
                        cross(f, (Jang[c, 0, col], Jang[c, 1, col], Jang[c, 2, col])))
                dl_dq[r, col], dl_dq[r + 1, col], dl_dq[r + 2, col] = mv(oR, x)
            _rotate_rows(oR, dl_dv, r)
            _rotate_rows(oR, dl_du, r)


# Inlined at numba's IR level into its one caller, the batch kernel: as a kernel of its own it was one more level of
# LLVM modules, whose whole call tree the batch kernel optimized and compiled to machine code again (a cold
# talos_reach's derivatives took 19.9 s of CPU instead of 18.0), at the same speed.
@njit(inline="always", cache=True, nogil=True, no_cfunc_wrapper=True)
def contact_derivatives_core(mi, mf, g, dof_end, fb, ff, ci, gains, targets, a_last, damping, H, s, v, a, lambda_c,
                             work, da_dq, da_dv, da_dtau, df_dq, df_dv, df_dtau):
    """The six derivative blocks at one state for the solution (a, lambda_c) of the contact dynamics (module
    docstring). Assumes checked inputs; returns OK, SINGULAR (M) or SCHUR_SINGULAR."""
    Wk, Wi, D, Wm, T, MD, PE, r6, fext, lambda_local, tau_id, dtau_dq, dtau_dv, M, Minv, J, Jang, Gt, S = work
    nv, nc = da_dq.shape[0], J.shape[0]
    _contact_rows(mi, mf, fb, ff, ci, gains, targets, a_last, H, s, v, a, lambda_c, Wk, MD, PE, r6, fext, lambda_local, J,
                  Jang, df_dq, df_dv)
    idsva_core(mi, mf, g, dof_end, H, s, v, a, fext, LOCAL_WRENCH, Wi, D, tau_id, dtau_dq, dtau_dv, M)
    status = minv_core(mi, mf, s, Wm, Minv)
    if status != OK:
        return status
    # Y_x = -M^-1 dF/dx into da_dq, da_dv; the contact wrenches are fixed in the body frames.
    minus_minv_dtau(mi, dof_end, g, H, Minv, dtau_dq, dtau_dv, True, T, da_dq, da_dv)
    # df_dq, df_dv hold -dC/dx: the right-hand sides -dC/dx - J Y_x, and dlambda/dtau = -S^-1 G^T.
    schur_products(J, Minv, da_dq, da_dv, Gt, df_dq, df_dv)
    for c in range(nc):
        for col in range(nv):
            df_dtau[c, col] = -Gt[c, col]
    if not schur_factor(Gt, J, damping, S):
        return SCHUR_SINGULAR
    cholesky_solve(S, df_dq)
    cholesky_solve(S, df_dv)
    cholesky_solve(S, df_dtau)
    # da = Y + G dlambda; da/dtau = M^-1 + G dlambda/dtau.
    plus_g_times(Gt, df_dq, da_dq)
    plus_g_times(Gt, df_dv, da_dv)
    for r in range(nv):
        for col in range(nv):
            da_dtau[r, col] = Minv[r, col]
    plus_g_times(Gt, df_dtau, da_dtau)
    in_references(ci, fb, ff, Wk, lambda_local, Jang, df_dq, df_dv, df_dtau)
    return OK


class ContactTables(NamedTuple):
    """A contact set in the form of this module's kernel: the frame tables of the model (``fb``, ``ff``), the
    contact table ``ci`` (m, 4) int64 (columns ``CK``...), the Baumgarte ``gains`` (m, 2), the position
    ``targets`` (m, 4, 4) and the last body whose acceleration the contacts need (``a_last``)."""

    fb: np.ndarray
    ff: np.ndarray
    ci: np.ndarray
    gains: np.ndarray
    targets: np.ndarray
    a_last: int


class ContactDerivativesWork(NamedTuple):
    """Work arrays for a contact set of m contacts and nc rows: those of forward kinematics, IDSVA and M^-1, the
    product scratch ``T``, the frame motion derivatives (4, 6, nv), the placement-error Jacobian (6, nv) and
    residual (6,), the contact wrenches as body wrenches (nb, 6), the forces in the contact frames (nc), IDSVA's
    outputs, M^-1, the contact rows ``J`` (nc, nv) and their angular parts (m, 3, nv), ``G^T = J M^-1`` (nc, nv)
    and the Schur complement (nc, nc)."""

    kinematics: np.ndarray
    idsva_bodies: np.ndarray
    idsva_dofs: np.ndarray
    minv: np.ndarray
    T: np.ndarray
    motion_derivatives: np.ndarray
    placement_error: np.ndarray
    residual: np.ndarray
    fext: np.ndarray
    lambda_local: np.ndarray
    tau_id: np.ndarray
    dtau_dq: np.ndarray
    dtau_dv: np.ndarray
    M: np.ndarray
    Minv: np.ndarray
    J: np.ndarray
    J_angular: np.ndarray
    Gt: np.ndarray
    S: np.ndarray


def contact_derivatives_work(model: RobotModel, m: int, nc: int) -> ContactDerivativesWork:
    nb, nv = model.nb, model.nv
    return ContactDerivativesWork(
        np.zeros((nb, W_COLS)), *idsva_work(model), *minv_work(model), np.zeros((nv, nv)), np.zeros((4, 6, nv)),
        np.zeros((6, nv)), np.zeros(6), np.zeros((nb, 6)), np.zeros(nc), np.zeros(nv), np.zeros((nv, nv)),
        np.zeros((nv, nv)), np.zeros((nv, nv)), np.zeros((nv, nv)), np.zeros((nc, nv)), np.zeros((m, 3, nv)),
        np.zeros((nc, nv)), np.zeros((nc, nc)))


@helper
def solution_status(m, nv, H, s, v, u, code, lambda_c, no_fext):
    """Status of a knot's state, of the nv-vector ``u`` of its solution (reported as ``code``) and of its contact
    forces (or impulses) ``lambda_c``; ``m``: ``ModelArrays``, ``no_fext`` an empty (0, 6) array."""
    status = check_dynamics_inputs(m.joints, m.floating, m.n, nv, H, s, v, u, code, no_fext)
    if status == OK and not finite(lambda_c):
        status = NOT_FINITE
    return status


@kernel
def contact_derivatives_batch_kernel(model, dofs, contacts, damping, H, S, V, A, LAM, work, DA_DQ, DA_DV, DA_DTAU,
                                     DF_DQ, DF_DV, DF_DTAU):
    """The derivative blocks at N knots in one compiled call (contacts: ``ContactTables``, work:
    ``ContactDerivativesWork``); returns (status, failing knot)."""
    m, c, w = ModelArrays(*model), ContactTables(*contacts), ContactDerivativesWork(*work)
    N, nc = S.shape[0], DF_DQ.shape[1]
    if (V.shape[0] != N or A.shape[0] != N or LAM.shape[0] != N or DA_DQ.shape[0] != N
            or (m.floating and H.shape[0] != N) or LAM.shape[1] != nc):
        return BAD_N, 0
    no_fext = w.fext[:0]  # an empty fext: only the state, a and the forces are checked
    for t in range(N):
        Ht = H[t] if m.floating else H[0]
        status = solution_status(m, DA_DQ.shape[1], Ht, S[t], V[t], A[t], BAD_A, LAM[t], no_fext)
        if status == OK:
            status = contact_derivatives_core(m.joints, m.bodies, m.gravity, DofTables(*dofs).subtree_end, c.fb, c.ff,
                                              c.ci, c.gains, c.targets, c.a_last, damping, Ht, S[t], V[t], A[t], LAM[t],
                                              w, DA_DQ[t], DA_DV[t], DA_DTAU[t], DF_DQ[t], DF_DV[t], DF_DTAU[t])
        if status != OK:
            return status, t
    return OK, 0


@split_kernel
def contact_derivatives_split_kernel(model, dofs, contacts, damping, H, S, V, A, LAM, work, other_work, result, DA_DQ,
                                     DA_DV, DA_DTAU, DF_DQ, DF_DV, DF_DTAU):
    """``contact_derivatives_batch_kernel`` on two halves of the knots, computed by two threads, the first with
    ``work``, the second with ``other_work``, each writing its (status, failing knot) to its row of ``result``
    ((2, 2) int64); returns the first failure in knot order."""
    N, floating = S.shape[0], ModelArrays(*model).floating
    for i in prange(2):
        a, b = i * N // 2, (i + 1) * N // 2
        status, k = contact_derivatives_batch_kernel(
            model, dofs, contacts, damping, H[a:b] if floating else H, S[a:b], V[a:b], A[a:b], LAM[a:b],
            work if i == 0 else other_work, DA_DQ[a:b], DA_DV[a:b], DA_DTAU[a:b], DF_DQ[a:b], DF_DV[a:b],
            DF_DTAU[a:b])
        result[i, 0], result[i, 1] = status, a + k
    return first_failure(result)


def contact_frame_ids(model: RobotModel, contacts: tuple[Contact, ...], what: str) -> list[int]:
    """The frame index of each contact; a TypeError for what is not a ``Contact``, a ValueError for an unknown frame,
    each naming ``what``."""
    ids = []
    for c in contacts:
        if not isinstance(c, Contact):
            raise TypeError(f"{what}({model.name}): contacts must be Contact objects, got {type(c).__name__}")
        try:
            ids.append(frame_id(model, c.frame))
        except (KeyError, IndexError, TypeError) as e:
            raise ValueError(f"{what}({model.name}): unknown contact frame {c.frame!r} ({e})") from None
    return ids


class _Plan(NamedTuple):
    """What the kernel needs about one contact set: its tables and work arrays (plain tuples of
    ``ContactTables`` and ``ContactDerivativesWork``, in ``ImpulseDerivativesWork`` for an impact) and its number
    of rows."""

    tables: tuple
    work: tuple
    nc: int


def build_plan(model: RobotModel, contacts: tuple[Contact, ...], what: str, ids: list[int] | None = None,
               baumgarte: bool = True) -> _Plan:
    """The kernel's form of ``contacts`` (``ids``: their frame indices, if the caller has them). Without
    ``baumgarte`` (an impact) the contacts' gains and targets are left out."""
    if ids is None:
        ids = contact_frame_ids(model, contacts, what)
    m = len(contacts)
    ci, gains, targets = np.zeros((m, 4), dtype=np.int64), np.zeros((m, 2)), np.zeros((m, 4, 4))
    o = 0
    for c, (contact, k) in enumerate(zip(contacts, ids)):
        Kp, Kv = contact.baumgarte if baumgarte else (0.0, 0.0)
        position = Kp != 0.0 and contact.target is not None
        ci[c] = k, contact.dim, o, (CF_WORLD_ALIGNED if contact.reference == "local_world_aligned" else 0) | (
            CF_POSITION if position else 0)
        gains[c] = Kp, Kv
        targets[c] = contact.target if position else np.eye(4)
        o += contact.dim
    nc = o
    frames = model_tables(model)
    a_last = max((int(frames.body[k]) for k in ids), default=-1)
    tables = ContactTables(frames.body, frames.pose, ci, gains, targets, a_last)
    return _Plan(tuple(tables), tuple(contact_derivatives_work(model, m, nc)), nc)


def raise_derivatives_status(status: int, model: RobotModel, knot: int | None, what: str, x, **inputs) -> None:
    """The ValueError of a derivative kernel's status; ``inputs``: the solution it read, by name, searched for a
    NaN as ``raise_for_status`` does."""
    name = f"{what}({model.name})" + ("" if knot is None else f" at knot {knot}")
    if status == SCHUR_SINGULAR:
        raise ValueError(f"{name}: the contact Jacobian is rank deficient (redundant contacts); remove contacts or "
                         "pass damping > 0")
    raise_for_status(status, model, what, knot, x, **inputs)


def contact_derivatives(model: RobotModel, x: State | Trajectory, tau: np.ndarray | None, contacts: tuple,
                        damping: float, out: ContactDynamicsDerivatives | None, dynamics: ContactDynamicsResult | None,
                        workspace: Workspace, what: str, other: Workspace | None = None) -> ContactDynamicsDerivatives:
    """``contact_dynamics_derivatives`` of checked inputs (``tau`` None when ``dynamics`` is given; ``out`` None or
    arrays of the result's shapes), its errors reported as those of ``what``. ``other``: the workspace of a second
    thread, which computes half of the knots in the same call (``_jit.split_kernel``); None: one thread."""
    if dynamics is None:
        dynamics = solve_contacts(model, x, tau, contacts, damping, workspace, what)
    plan = workspace.for_objects("contact derivatives", contacts, lambda: build_plan(model, contacts, what))
    single = type(x) is State
    nv, nc, lead = model.nv, plan.nc, () if single else (len(x),)
    A, LAM = np.asarray(dynamics.a, dtype=np.float64), np.asarray(dynamics.lagrangian, dtype=np.float64)
    if A.shape != lead + (nv,) or LAM.shape != lead + (nc,):
        raise ValueError(f"{what}({model.name}): dynamics must hold a {lead + (nv,)} and lagrangian {lead + (nc,)}, "
                         f"got {A.shape} and {LAM.shape}")
    if out is None:
        arrays = tuple(np.empty(shape) for shape in _shapes(lead, nv, nc))
    else:
        arrays = (out.a, out.forces, out.da_dq, out.da_dv, out.da_dtau, out.df_dq, out.df_dv, out.df_dtau)
    arrays[0][...] = A
    arrays[1][...] = LAM
    if single:
        H, S, V, A1, LAM1 = base_pose(x)[None], x.s[None], x.v[None], A[None], LAM[None]
        blocks = tuple(b[None] for b in arrays[2:])
    else:
        H, S, V, A1, LAM1, blocks = base_poses(x), x.s, x.v, A, LAM, arrays[2:]
    inputs = (model.packed, model.dof_tables, plan.tables, damping, H, S, V, np.ascontiguousarray(A1),
              np.ascontiguousarray(LAM1))
    if other is not None and len(S) >= 2:
        other_work = other.for_objects("contact derivatives", contacts, lambda: build_plan(model, contacts, what)).work
        status, k = split_call(contact_derivatives_split_kernel, *inputs, plan.work, other_work,
                               np.empty((2, 2), dtype=np.int64), *blocks)
    else:
        status, k = contact_derivatives_batch_kernel(*inputs, plan.work, *blocks)
    if status != OK:
        raise_derivatives_status(status, model, None if single else k, what, x,
                                 **{"dynamics.a": A, "dynamics.lagrangian": LAM})
    return ContactDynamicsDerivatives(*arrays) if out is None else out


def _shapes(lead: tuple, nv: int, nc: int) -> tuple[tuple[int, ...], ...]:
    """The shapes of a ``ContactDynamicsDerivatives`` with the leading axes ``lead``."""
    return tuple(lead + s for s in ((nv,), (nc,), (nv, nv), (nv, nv), (nv, nv), (nc, nv), (nc, nv), (nc, nv)))


def contact_dynamics_derivatives(model: RobotModel, x: State | Trajectory, tau, contacts: Sequence[Contact],
                                 damping: float = 0.0, out: ContactDynamicsDerivatives | None = None,
                                 dynamics: ContactDynamicsResult | None = None,
                                 workspace: Workspace | None = None) -> ContactDynamicsDerivatives:
    """``contact_dynamics(model, x, tau, contacts, damping)`` (accelerations and stacked contact forces) and their
    analytical derivatives w.r.t. the state (tangent columns ``[z_q; z_v]``) and ``tau`` (module docstring).

    ``x`` a Trajectory with ``tau`` (N, nv) gives every result a leading axis N (one compiled call for all knots).
    ``out``, a previous result of the same shapes, is overwritten and returned instead of allocating new arrays.
    ``dynamics``, the result of that very ``contact_dynamics`` call if the caller already has it, saves solving it
    again (``tau`` is then not read). Raises ValueError as ``contact_dynamics`` does (shapes, NaN, unknown frames,
    redundant contacts without damping). ``workspace``: a ``Workspace(model)`` whose work arrays (and the tables
    of its last contact sets) are reused (without one, each call allocates its own).
    """
    what = "contact_dynamics_derivatives"
    x = checked_state(model, x, what)
    workspace = workspace_for(model, workspace, what)
    contacts = contact_tuple(model, contacts, what)
    damping = checked_real(damping, model, what, "damping")
    if out is not None:
        nc = sum(c.dim for c in contacts)
        result_arrays(out, ContactDynamicsDerivatives, _shapes(() if type(x) is State else (len(x),), model.nv, nc), what)
    if dynamics is None:
        tau = checked_vector(tau, model.nv, None if type(x) is State else len(x), model, what, "tau")
    elif not isinstance(dynamics, ContactDynamicsResult):
        raise TypeError(f"{what}({model.name}): dynamics must be a ContactDynamicsResult (of contact_dynamics), got "
                        f"{type(dynamics).__name__}")
    return contact_derivatives(model, x, tau, contacts, damping, out, dynamics, workspace, what)
