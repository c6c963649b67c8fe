"""First-order derivatives of forward dynamics: da/dq, da/dv and da/dtau = M^{-1} (seed 001 eq. 5, FDSVA).

Differentiating ``ID(q, v, FD(q, v, tau)) = tau`` gives, for u in {q, v} (seed 001 eq. 5, seed 000 eq. 50)::

    dFD/du = -M^{-1} dID/du |_(q, v, a),   dFD/dtau = M^{-1},   a = FD(q, v, tau)

with the inverse-dynamics derivatives evaluated at the consistent acceleration ``a`` (seed 001 pitfall 10:
any other acceleration silently gives a wrong dFD/dq). The pipeline, in one compiled call: ABA for ``a``, IDSVA
(``rnea_derivatives``) at ``a``, the recursive ``M^{-1}`` (IMMAmb, seed 000 Table 9; digest pitfall 18: never
an explicit inverse of M), then the products. Those exploit the sparsity of ``dID``: the column of a dof of
body ``b`` is non-zero only on the dofs of ``b``'s ancestors and subtree, so each column costs
``(depth + subtree size)`` rows of ``M^{-1}`` instead of ``nv``.

For a floating base and wrenches that move with their bodies, the base-pose columns need no product at all.
The inverse dynamics depends on ``H`` only through gravity seen in the base frame, ``g_b = R^T (-g)``, which
acts as a base acceleration: ``ID(H exp(z)) = ID_0(nu_dot + [g_b + g_b x z_w; 0])`` to first order, so
``dFD/dz_H = -M^{-1} M[:, :6] G = -[G; 0]`` with ``G = [[0, [g_b]x], [0, 0]]``, the closed form of seed 000
§4.2 (digest: ``D1 ID∘DL_H = M[:, :6] (a_0^r x)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import prange

from lietraj._jit import helper, kernel, split_call, split_kernel
from lietraj.dynamics._checks import (
    BAD_N,
    BAD_TAU,
    check_dynamics_inputs,
    first_failure,
    OK,
    SINGULAR,
    base_pose,
    base_poses,
    checked_state,
    checked_vector,
    checked_wrenches,
    kernel_wrenches,
    raise_for_status,
    result_arrays,
)
from lietraj.dynamics.algorithms.aba import _raise, aba_core, aba_work, mimic_forward_dynamics
from lietraj.dynamics.algorithms.inverse_mass_matrix import minv_core, minv_work
from lietraj.dynamics.algorithms.mimic import solve_many
from lietraj.dynamics.model.model import JOINT_FREE, DofTables, ModelArrays, RobotModel
from lietraj.dynamics.model.workspace import Workspace, workspace_for
from lietraj.dynamics.algorithms.rnea import body_frame_wrenches
from lietraj.dynamics.algorithms.rnea_derivatives import (
    FEXT_REFERENCES,
    LOCAL_WRENCH,
    fext_reference_code,
    idsva_core,
    idsva_work,
    rnea_derivatives,
)
from lietraj.dynamics.lie.state import State, Trajectory


@helper
def minus_minv_times(mi, dof_end, Minv, d, first, T, out):
    """out[:, c] = -Minv d[:, c] for the columns c >= first, reading only the rows where column c can be
    non-zero (the ancestors' and the subtree's dofs of the body owning dof c). T is an (nv, nv) scratch."""
    nb, nv = mi.shape[0], Minv.shape[0]
    for b in range(nb):
        jt, c0 = mi[b, 1], mi[b, 2]
        c1 = c0 + (6 if jt == JOINT_FREE else 1)
        for c in range(max(c0, first), c1):
            for r in range(nv):
                T[c, r] = 0.0
            for k in range(c0, dof_end[b]):
                e = d[k, c]
                for r in range(nv):
                    T[c, r] -= e * Minv[k, r]
            j = mi[b, 0]
            while j >= 0:
                k0 = mi[j, 2]
                for k in range(k0, k0 + (6 if mi[j, 1] == JOINT_FREE else 1)):
                    e = d[k, c]
                    for r in range(nv):
                        T[c, r] -= e * Minv[k, r]
                j = mi[j, 0]
    for r in range(nv):
        for c in range(first, nv):
            out[r, c] = T[c, r]


@helper
def minus_minv_dtau(mi, dof_end, g, H, Minv, dtau_dq, dtau_dv, body_fixed_wrenches, T, da_dq, da_dv):
    """``da/dq = -M^-1 dtau/dq`` and ``da/dv = -M^-1 dtau/dv`` by the sparse products above. With a floating base
    whose external wrenches (if any) are fixed in the body frames, turning the whole robot about its base only turns
    gravity in the base frame, so the base-pose columns of ``da/dq`` are the closed form ``[-[g_b]x; 0]`` (the base
    acceleration follows gravity, the joints do not) instead of a product."""
    first = 0
    if mi[0, 1] == JOINT_FREE and body_fixed_wrenches:
        da_dq[:, :6] = 0.0
        gb = (-(H[0, 0] * g[0] + H[1, 0] * g[1] + H[2, 0] * g[2]), -(H[0, 1] * g[0] + H[1, 1] * g[1] + H[2, 1] * g[2]),
              -(H[0, 2] * g[0] + H[1, 2] * g[1] + H[2, 2] * g[2]))
        da_dq[0, 4], da_dq[0, 5] = gb[2], -gb[1]  # -[g_b]x
        da_dq[1, 3], da_dq[1, 5] = -gb[2], gb[0]
        da_dq[2, 3], da_dq[2, 4] = gb[1], -gb[0]
        first = 6
    minus_minv_times(mi, dof_end, Minv, dtau_dq, first, T, da_dq)
    minus_minv_times(mi, dof_end, Minv, dtau_dv, 0, T, da_dv)


@kernel
def fd_derivatives_core(mi, mf, g, dof_end, H, s, v, tau, fext, fext_local, fext_ref, Wa, Wi, D, Wm, T, tau_id,
                        dtau_dq, dtau_dv, M, a, da_dq, da_dv, Minv):
    """a = FD(x, tau), da/dq, da/dv and M^{-1} for one state. Assumes checked inputs."""
    status = aba_core(mi, mf, g, H, s, v, tau, fext_local, Wa, a)
    if status != OK:
        return status
    idsva_core(mi, mf, g, dof_end, H, s, v, a, fext, fext_ref, Wi, D, tau_id, dtau_dq, dtau_dv, M)
    status = minv_core(mi, mf, s, Wm, Minv)
    if status != OK:
        return status
    minus_minv_dtau(mi, dof_end, g, H, Minv, dtau_dq, dtau_dv, fext.shape[0] == 0 or fext_ref == LOCAL_WRENCH, T,
                    da_dq, da_dv)
    return OK


class FdDerivativesWork(NamedTuple):
    """Work arrays of the forward-dynamics derivatives: those of ABA, IDSVA and M^-1, the product scratch ``T``,
    and IDSVA's outputs at the consistent acceleration."""

    aba: np.ndarray
    idsva_bodies: np.ndarray
    idsva_dofs: np.ndarray
    minv: np.ndarray
    T: np.ndarray
    tau_id: np.ndarray
    dtau_dq: np.ndarray
    dtau_dv: np.ndarray
    M: np.ndarray


def fd_derivatives_work(model: RobotModel) -> FdDerivativesWork:
    nv = model.nv
    return FdDerivativesWork(*aba_work(model), *idsva_work(model), *minv_work(model), np.zeros((nv, nv)),
                             np.zeros(nv), np.zeros((nv, nv)), np.zeros((nv, nv)), np.zeros((nv, nv)))


@kernel
def fd_derivatives_kernel(model, dofs, H, s, v, tau, fext, fext_local, fext_ref, work, a, da_dq, da_dv, Minv):
    m, w = ModelArrays(*model), FdDerivativesWork(*work)
    status = check_dynamics_inputs(m.joints, m.floating, m.n, a.shape[0], H, s, v, tau, BAD_TAU, fext)
    if status == OK:
        status = fd_derivatives_core(m.joints, m.bodies, m.gravity, DofTables(*dofs).subtree_end, H, s, v, tau, fext,
                                     fext_local, fext_ref, w.aba, w.idsva_bodies, w.idsva_dofs, w.minv, w.T, w.tau_id,
                                     w.dtau_dq, w.dtau_dv, w.M, a, da_dq, da_dv, Minv)
    return status


@kernel
def fd_derivatives_batch_kernel(model, dofs, H, S, V, TAU, fext, fext_local, fext_ref, work, A, DA_DQ, DA_DV, MINV):
    """Forward-dynamics derivatives over N knots in one compiled call; returns (status, failing knot)."""
    floating = ModelArrays(*model).floating
    N = S.shape[0]
    has_fext = fext.shape[1] > 0
    if (V.shape[0] != N or TAU.shape[0] != N or A.shape[0] != N or (floating and H.shape[0] != N)
            or (has_fext and fext.shape[0] != N)):
        return BAD_N, 0
    # the grouped arguments unpacked once: each array taken out of a tuple, or passed to a kernel, costs an atomic
    # reference count pair, per knot inside the loop
    m, w, dof_end = ModelArrays(*model), FdDerivativesWork(*work), DofTables(*dofs).subtree_end
    joints, bodies, gravity, n = m.joints, m.bodies, m.gravity, m.n
    for k in range(N):
        fk, fl = (fext[k], fext_local[k]) if has_fext else (fext[0], fext_local[0])
        Hk = H[k] if floating else H[0]
        status = check_dynamics_inputs(joints, floating, n, A.shape[1], Hk, S[k], V[k], TAU[k], BAD_TAU, fk)
        if status == OK:
            status = fd_derivatives_core(joints, bodies, gravity, dof_end, Hk, S[k], V[k], TAU[k], fk, fl, fext_ref,
                                         w.aba, w.idsva_bodies, w.idsva_dofs, w.minv, w.T, w.tau_id, w.dtau_dq,
                                         w.dtau_dv, w.M, A[k], DA_DQ[k], DA_DV[k], MINV[k])
        if status != OK:
            return status, k
    return OK, 0


@split_kernel
def fd_derivatives_split_kernel(model, dofs, H, S, V, TAU, fext, fext_local, fext_ref, work, other_work, result, A,
                                DA_DQ, DA_DV, MINV):
    """``fd_derivatives_batch_kernel`` on two halves of the knots, computed by two threads, the first with ``work``,
    the second with ``other_work``, each writing its (status, failing knot) to its row of ``result`` ((2, 2)
    int64); returns the first failure in knot order."""
    N, floating, per_knot = S.shape[0], ModelArrays(*model).floating, fext.shape[1] > 0
    for i in prange(2):
        a, b = i * N // 2, (i + 1) * N // 2
        status, k = fd_derivatives_batch_kernel(
            model, dofs, H[a:b] if floating else H, S[a:b], V[a:b], TAU[a:b], fext[a:b] if per_knot else fext,
            fext_local[a:b] if per_knot else fext_local, fext_ref, work if i == 0 else other_work, A[a:b],
            DA_DQ[a:b], DA_DV[a:b], MINV[a:b])
        result[i, 0], result[i, 1] = status, a + k
    return first_failure(result)


@dataclass(eq=False)
class ForwardDynamicsDerivatives:
    """``a = aba(x, tau, fext)`` and its derivatives ``da_dq`` (configuration tangent, base columns in the
    body-twist chart), ``da_dv`` and ``da_dtau = M^{-1}``. Shapes ``(nv,)`` and ``(nv, nv)``, with a leading
    ``N`` for a trajectory."""

    a: np.ndarray
    da_dq: np.ndarray
    da_dv: np.ndarray
    da_dtau: np.ndarray


def _raise_fd(status: int, model: RobotModel, knot: int | None, x, **inputs) -> None:
    if status == SINGULAR:  # aba's own message speaks of articulated inertias; these derivatives factor M itself
        raise_for_status(status, model, "aba_derivatives", knot)
    _raise(status, model, knot, "aba_derivatives", x, **inputs)


def aba_derivatives(model: RobotModel, x: State | Trajectory, tau, fext=None, fext_reference: str = "local",
                    out: ForwardDynamicsDerivatives | None = None,
                    workspace: Workspace | None = None) -> ForwardDynamicsDerivatives:
    """Forward dynamics and its analytical first-order derivatives (seed 001 eq. 5 with IDSVA and IMMAmb).

    Same inputs as ``aba``; ``fext`` (optional, ``(nb, 6)``) are wrenches in each body's frame
    (``fext_reference="local"``) or in the world frame at the world origin (``"world"``), their dependence on
    ``q`` included. ``x`` a Trajectory evaluates all knots in one compiled call. Equals Pinocchio's
    ``computeABADerivatives`` (``ddq_dq, ddq_dv, ddq_dtau``). ``out``, a previous result of the same shapes, is
    overwritten and returned instead of allocating new arrays; so are the work arrays of ``workspace``, a
    ``Workspace(model)`` (without one, each call allocates its own).
    """
    what = "aba_derivatives"
    x = checked_state(model, x, what)
    ref = fext_reference_code(fext_reference, what)
    workspace = workspace_for(model, workspace, what)
    N = None if type(x) is State else len(x)
    tau = checked_vector(tau, model.nv, N, model, what, "tau")
    return aba_derivatives_of_checked(model, x, tau, checked_wrenches(fext, N, model, what), ref, out, workspace)


def aba_derivatives_of_checked(model: RobotModel, x: State | Trajectory, tau: np.ndarray, fext: np.ndarray | None,
                               ref: int, out: ForwardDynamicsDerivatives | None,
                               workspace: Workspace, other: Workspace | None = None) -> ForwardDynamicsDerivatives:
    """``aba_derivatives`` from inputs its caller has checked (``checked_state``, ``checked_vector``,
    ``checked_wrenches``, ``fext_reference_code``, ``workspace_for``): for the functions built on it, which check
    their own arguments and should not pay for the checks twice. Non-finite values are still reported, by the
    kernel's status, under the name ``aba_derivatives``. ``other``: the workspace of a second thread, which computes
    half of a trajectory's knots in the same call (``_jit.split_kernel``); None: one thread."""
    what = "aba_derivatives"
    if model.mimic:
        return _mimic_aba_derivatives(model, x, tau, fext, ref, out, workspace)
    nv, work = model.nv, workspace.work(fd_derivatives_work)
    single = type(x) is State
    N = None if single else len(x)
    fe = kernel_wrenches(fext, not single)
    fl = body_frame_wrenches(model, x, fe, workspace) if ref != LOCAL_WRENCH and fe.size else fe
    if single:
        a, da_dq, da_dv, Minv = result_arrays(out, ForwardDynamicsDerivatives, ((nv,), (nv, nv), (nv, nv), (nv, nv)),
                                              what)
        status = fd_derivatives_kernel(model.packed, model.dof_tables, base_pose(x), x.s, x.v, tau, fe, fl, ref, work,
                                       a, da_dq, da_dv, Minv)
        if status != OK:
            _raise_fd(status, model, None, x, tau=tau, fext=fe)
        return ForwardDynamicsDerivatives(a, da_dq, da_dv, Minv) if out is None else out
    A, DQ, DV, MINV = result_arrays(out, ForwardDynamicsDerivatives, ((N, nv), (N, nv, nv), (N, nv, nv), (N, nv, nv)),
                                    what)
    inputs = (model.packed, model.dof_tables, base_poses(x), x.s, x.v, tau, fe, fl, ref, work)
    if other is not None and N >= 2:
        status, k = split_call(fd_derivatives_split_kernel, *inputs, other.work(fd_derivatives_work),
                               np.empty((2, 2), dtype=np.int64), A, DQ, DV, MINV)
    else:
        status, k = fd_derivatives_batch_kernel(*inputs, A, DQ, DV, MINV)
    if status != OK:
        _raise_fd(status, model, k, x, tau=tau, fext=fe)
    return ForwardDynamicsDerivatives(A, DQ, DV, MINV) if out is None else out


def _mimic_aba_derivatives(model: RobotModel, x: State | Trajectory, tau: np.ndarray, fext: np.ndarray | None,
                           ref: int, out: ForwardDynamicsDerivatives | None,
                           workspace: Workspace) -> ForwardDynamicsDerivatives:
    """``aba_derivatives`` of a model with mimic joints (seed 001 eq. 5 on the reduced system): ``a`` solves
    ``M a = tau - h``, then ``da/dq = -M^{-1} dID/dq`` and ``da/dv = -M^{-1} dID/dv`` with the reduced inverse
    dynamics derivatives at ``a`` (``rnea_derivatives``), and ``da/dtau = M^{-1}``."""
    what = "aba_derivatives"
    reference = next(k for k, v in FEXT_REFERENCES.items() if v == ref)
    a = mimic_forward_dynamics(model, x, tau, fext, reference, workspace, what)
    d = rnea_derivatives(model, x, a, fext, reference, workspace=workspace)
    N = None if type(x) is State else len(x)
    lead = () if N is None else (N,)
    nv = model.nv
    # one factorization of M for the three right-hand sides: [dID/dq, dID/dv, I] -> [-da/dq, -da/dv, M^-1]
    eye = np.broadcast_to(np.eye(nv), lead + (nv, nv))
    sol = solve_many(model, d.M, np.concatenate([d.dtau_dq, d.dtau_dv, eye], axis=-1), what)
    Minv = sol[..., 2 * nv:]
    result = result_arrays(out, ForwardDynamicsDerivatives, (lead + (nv,),) + 3 * (lead + (nv, nv),), what)
    for target, value in zip(result, (a, -sol[..., :nv], -sol[..., nv:2 * nv], 0.5 * (Minv + np.swapaxes(Minv, -1, -2)))):
        target[...] = value
    return ForwardDynamicsDerivatives(*result) if out is None else out
