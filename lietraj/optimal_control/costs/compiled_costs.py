"""Residual costs evaluated together: every built-in term at every knot that carries it, in one compiled call.

A problem's running cost is a sum of terms at each knot, most of them built-in residuals through built-in
activations (``ResidualCost``). Evaluated term by term, each costs a few Python calls (the residual, its kernel, the
activation, the weighted products) of 20-40 us of dispatch, whatever the robot: a quadruped's gait of six phases has
30 terms, evaluated three times a solver iteration (the derivatives, two trial costs), and that dispatch was half of
the iteration. ``CompiledCosts`` writes such terms into tables (a kind, the parameters, the non-zero columns of each
Jacobian row) and evaluates all of them at all their knots in one kernel call, the forward kinematics computed once
per knot for all the terms that read it.

It takes (``compilable``) a ``ResidualCost`` whose activation is exactly ``Quadratic``, ``WeightedQuadratic``,
``QuadraticBarrier`` or ``AugmentedLagrangianActivation`` (a constraint's term) and whose residual is exactly one
of::

    StateResidual, ControlResidual, JointTorqueResidual, JointPositionResidual, JointVelocityResidual,
    FramePlacementResidual, FrameRotationResidual, FrameTranslationResidual, CenterOfMassResidual,
    WrenchConeResidual, FrictionConeResidual (facets), CenterOfPressureResidual, ContactForceResidual

(robot residuals on the model of the table, without mimic joints; the contact residuals with the ``dynamics`` of
their knots, whose kept contact forces and derivatives the table gathers per run of knots: ``r = G λ − b``,
``R_x = G ∂λ/∂x``, ``R_u = G ∂λ/∂u``); subclasses, other residuals and costs keep their own calls. The values,
Jacobians and Gauss-Newton products are the ones ``residuals.py`` and ``ResidualCost`` define, in the same tangent
chart and ordering. The terms, their weights and knots are fixed when the table is
built (``Problem`` builds it again when they change); their parameters (references, targets, activation weights and
bounds) are read again at every call, so that setting them, or changing their arrays in place, is seen.
"""

from __future__ import annotations

import math
from operator import attrgetter, is_
from typing import NamedTuple

import numpy as np
from numba import prange

from lietraj._jit import helper, kernel, split_call, split_kernel
from lietraj.dynamics._checks import IDENTITY4_STACK
from lietraj.dynamics._tuples import sub
from lietraj.dynamics.kinematics.center_of_mass import center_of_mass_core, center_of_mass_jacobian_core
from lietraj.dynamics.kinematics.kinematics import (
    LOCAL_WORLD_ALIGNED,
    PLACEMENT,
    W_COLS,
    forward_kinematics_core,
    frame_jacobian_core,
    frame_pose,
    model_tables,
)
from lietraj.dynamics.kinematics.kinematics_derivatives import placement_error_core
from lietraj.dynamics.lie.se3 import between, jlog6, log6
from lietraj.dynamics.lie.state import StateSpace, Trajectory
from lietraj.dynamics.model.model import JOINT_FREE, ModelArrays, RobotModel
from lietraj.optimal_control.costs.activations import (
    AugmentedLagrangianActivation,
    Quadratic,
    QuadraticBarrier,
    WeightedQuadratic,
)
from lietraj.optimal_control.costs.contact_residuals import (
    CenterOfPressureResidual,
    ContactForceResidual,
    FrictionConeResidual,
    WrenchConeResidual,
)
from lietraj.optimal_control.costs.costs import (
    CostDerivatives,
    ResidualCost,
    add_gradient,
    add_products,
    add_symmetric_products,
)
from lietraj.optimal_control.costs.residuals import (
    CenterOfMassResidual,
    ControlResidual,
    FramePlacementResidual,
    FrameRotationResidual,
    FrameTranslationResidual,
    JointPositionResidual,
    JointTorqueResidual,
    JointVelocityResidual,
    StateResidual,
)

# Residual kinds; the robot kinds (FRAME..., COM, CONTACT) need the table's model, and all but CONTACT (the contact
# forces its dynamics computed) read the knot's forward kinematics.
STATE, CONTROL, JOINT_POSITION, JOINT_VELOCITY, FRAME_PLACEMENT, FRAME_ROTATION, FRAME_TRANSLATION, COM, CONTACT = \
    range(9)
_KINDS = {StateResidual: STATE, ControlResidual: CONTROL, JointTorqueResidual: CONTROL,
          JointPositionResidual: JOINT_POSITION, JointVelocityResidual: JOINT_VELOCITY,
          FramePlacementResidual: FRAME_PLACEMENT, FrameRotationResidual: FRAME_ROTATION,
          FrameTranslationResidual: FRAME_TRANSLATION, CenterOfMassResidual: COM, WrenchConeResidual: CONTACT,
          FrictionConeResidual: CONTACT, CenterOfPressureResidual: CONTACT, ContactForceResidual: CONTACT}
_ROBOT_KINDS = (FRAME_PLACEMENT, FRAME_ROTATION, FRAME_TRANSLATION, COM, CONTACT)
# Activation kinds: ½‖r‖², ½ Σ wᵢ rᵢ², ½ ‖excess of r over [lower, upper]‖², ½ rᵀ W r, an augmented Lagrangian's
# term (its parameters: lower, upper (nr each), scale, penalty, then a row of multipliers per knot).
QUADRATIC, WEIGHTED, BARRIER, MATRIX, AUGMENTED = range(5)
_ACTIVATIONS = (Quadratic, WeightedQuadratic, QuadraticBarrier, AugmentedLagrangianActivation)
# Columns of the term table: kind, activation, residual size, frame (a contact term: the number of stacked forces),
# offset of the reference rows in the parameters, their count (1: the same at every knot) and size (a state
# reference: its poses, then the offsets of its rows of s and of v), offset of a contact term's map of the forces,
# offset of the activation's parameters, first row of the Jacobian pattern.
(T_KIND, T_ACT, T_NR, T_FRAME, T_REF, T_REF_ROWS, T_REF_SIZE, T_REF_S, T_REF_V, T_MAP, T_ACT_PARAMS, T_PATTERN,
 T_COLS) = range(13)
# A pose in the parameters: a 4x4 matrix, row-major.
POSE = 16


class CostTable(NamedTuple):
    """What the kernel evaluates: ``terms`` (nt, T_COLS) int64 and their ``weights`` (nt,); ``entries`` (ne, 2)
    ``[term, index of the knot among the term's knots]`` in the order of the knots, those of knot ``k`` at
    ``starts[k]:starts[k+1]``; R_x's pattern, row ``i`` of a term at ``terms[t, T_PATTERN] + i``: its non-zero
    columns ``columns[row, :counts[row]]``; the parameters ``values``."""

    terms: np.ndarray
    weights: np.ndarray
    entries: np.ndarray
    starts: np.ndarray
    columns: np.ndarray
    counts: np.ndarray
    values: np.ndarray


class CostWork(NamedTuple):
    """Work arrays: the kinematics' per-body columns, one term's residual and gradient (nr_max,), its Hessian's
    diagonal (1, nr_max) or matrix (1, nr_max, nr_max), R_x (nr_max, ndx) and R_u (nr_max, nu) with R_u's pattern
    (every column of every row), a frame Jacobian (6, nv) and an empty one (0, nv) for the values alone, and a row
    (ndx + nu,) of a dense term's scaled Jacobians (``_add_dense_gauss_newton``)."""

    bodies: np.ndarray
    r: np.ndarray
    g: np.ndarray
    D: np.ndarray
    H: np.ndarray
    R_x: np.ndarray
    R_u: np.ndarray
    u_columns: np.ndarray
    u_counts: np.ndarray
    J: np.ndarray
    no_J: np.ndarray
    scaled_row: np.ndarray


@helper
def _pose(values, o):
    """The pose (R, p) stored at ``values[o:o + POSE]``."""
    R = (values[o], values[o + 1], values[o + 2], values[o + 4], values[o + 5], values[o + 6], values[o + 8],
         values[o + 9], values[o + 10])
    return R, (values[o + 3], values[o + 7], values[o + 11])


@helper
def _state_residual(floating, n, h, s, v, values, pose, s_ref, v_ref, jacobian, r, R_x):
    """``x ⊖ x_ref`` with the reference's pose, s and v at ``values[pose:]``, ``values[s_ref:]``, ``values[v_ref:]``;
    R_x's base block ``Jr(z_H)⁻¹`` (its identity rows are written as the pattern reads them)."""
    nh = 6 if floating else 0
    nv = n + nh
    if floating:
        R0, p0 = _pose(values, pose)
        R1, p1 = (h[0, 0], h[0, 1], h[0, 2], h[1, 0], h[1, 1], h[1, 2], h[2, 0], h[2, 1], h[2, 2]), \
            (h[0, 3], h[1, 3], h[2, 3])
        R, p = between(R0, p0, R1, p1)
        u, w = log6(R, p)
        for m in range(3):
            r[m], r[3 + m] = u[m], w[m]
        if jacobian:
            A, C = jlog6(w, p)
            for i in range(3):
                for j in range(3):
                    R_x[i, j] = R_x[i + 3, j + 3] = A[3 * i + j]
                    R_x[i + 3, j] = 0.0
                    acc = 0.0
                    for m in range(3):
                        acc += C[3 * i + m] * A[3 * m + j]
                    R_x[i, j + 3] = acc
    for i in range(n):
        r[nh + i] = s[i] - values[s_ref + i]
    for i in range(nv):
        r[nh + n + i] = v[i] - values[v_ref + i]
    if jacobian:
        for i in range(nh, nh + n + nv):
            R_x[i, i] = 1.0


@helper
def _robot_residual(kind, mi, mf, fb, ff, frame, values, o, jacobian, W, r, R_x, J, no_J):
    """A frame's placement, rotation or translation error, or the CoM error, from the forward kinematics in W; its
    Jacobian's configuration columns into R_x."""
    nv = J.shape[1]
    if kind == FRAME_PLACEMENT or kind == FRAME_ROTATION:
        TR, Tp = _pose(values, o)
        # The rotation error and its Jacobian are the angular half of the placement error from (R_ref, 0).
        if kind == FRAME_ROTATION:
            Tp = (0.0, 0.0, 0.0)
        placement_error_core(mi, mf, fb, ff, frame, TR, Tp, W, r, J if jacobian else no_J)
        first = 0 if kind == FRAME_PLACEMENT else 3
        if kind == FRAME_ROTATION:
            r[0], r[1], r[2] = r[3], r[4], r[5]
        if jacobian:
            for i in range(6 - first):
                for c in range(nv):
                    R_x[i, c] = J[first + i, c]
        return
    if kind == FRAME_TRANSLATION:
        _, p = frame_pose(W, fb, ff, frame)
        if jacobian:
            frame_jacobian_core(mi, mf, fb, ff, frame, LOCAL_WORLD_ALIGNED, W, J)
    else:
        p = center_of_mass_core(mi, mf, PLACEMENT, W)
        if jacobian:
            center_of_mass_jacobian_core(mi, mf, W, J)
    e = sub(p, (values[o], values[o + 1], values[o + 2]))
    r[0], r[1], r[2] = e[0], e[1], e[2]
    if jacobian:
        for i in range(3):
            for c in range(nv):
                R_x[i, c] = J[i, c]


@helper
def _contact_residual(nr, nc, values, ref, G, F, r):
    """``r = G λ − b`` of the knot's stacked contact forces ``λ`` = F (nc,), with the map G (nr, nc) at
    ``values[G:]`` and b at ``values[ref:]``."""
    for m in range(nr):
        acc = -values[ref + m]
        for j in range(nc):
            acc += values[G + m * nc + j] * F[j]
        r[m] = acc


@helper
def _contact_jacobians(nr, nc, values, G, every, g, D, dF_dx, dF_du, R_x, R_u):
    """``R_x = G ∂λ/∂x``, ``R_u = G ∂λ/∂u`` (``_contact_residual``), unless ``every``, only the rows whose gradient
    g or Hessian diagonal D[0] is not zero (the others add nothing: a barrier's rows inside their box). A row of G
    mostly reads the forces of one contact: its zeros are skipped, the rows of the derivatives summed whole."""
    for m in range(nr):
        if not (every or g[m] != 0.0 or D[0, m] != 0.0):
            continue
        R_x[m, :] = 0.0
        R_u[m, :] = 0.0
        for j in range(nc):
            e = values[G + m * nc + j]
            if e == 0.0:
                continue
            for c in range(dF_dx.shape[1]):
                R_x[m, c] += e * dF_dx[j, c]
            for c in range(dF_du.shape[1]):
                R_u[m, c] += e * dF_du[j, c]


@helper
def _add_dense_gauss_newton(nr, w, g, D, R_x, n, R_u, nu, y, l_x, l_u, l_xx, l_xu, l_uu):
    """A term with a diagonal Hessian ``D[0]`` whose Jacobian rows are dense over their first columns (``n`` of
    R_x, ``nu`` of R_u: a contact term's forces move with every coordinate and control, the centre of mass with
    every coordinate) into one knot's derivatives: ``l_x += w R_xᵀ g``, ``l_u += w R_uᵀ g`` and the Gauss–Newton
    blocks ``w Rᵀ D R`` of ``R = [R_x, R_u]``. Each row with ``w D_m ≠ 0`` adds the outer product of ``y =
    sqrt(|w D_m|) R_m`` with itself, whole contiguous rows at a time (``add_symmetric_products`` walks a column
    pattern element by element), exactly symmetric: ``y_a y_b = y_b y_a``."""
    for m in range(nr):
        wg, wd = w * g[m], w * D[0, m]
        if wg != 0.0:
            for a in range(n):
                l_x[a] += wg * R_x[m, a]
            for b in range(nu):
                l_u[b] += wg * R_u[m, b]
        if wd == 0.0:
            continue
        scale, sign = math.sqrt(abs(wd)), 1.0 if wd > 0.0 else -1.0
        for a in range(n):
            y[a] = scale * R_x[m, a]
        for b in range(nu):
            y[n + b] = scale * R_u[m, b]
        for a in range(n):
            ya = sign * y[a]
            for b in range(n):
                l_xx[a, b] += ya * y[b]
            for b in range(nu):
                l_xu[a, b] += ya * y[n + b]
        for a in range(nu):
            ya = sign * y[n + a]
            for b in range(nu):
                l_uu[a, b] += ya * y[n + b]


@helper
def _activation(act, nr, values, o, knot, r, g, D, H):
    """The activation's value at r (the ``knot``-th of its term); its gradient into g and its Hessian's diagonal
    into D[0] (MATRIX: the matrix into H[0]). NaN when r is not finite."""
    value = 0.0
    for i in range(nr):
        x = r[i]
        if not (x - x == 0.0):
            return np.nan
    if act == AUGMENTED:
        scale, rho = values[o + 2 * nr], values[o + 2 * nr + 1]
        lam = o + 2 * nr + 2 + knot * nr
        for i in range(nr):
            lower, upper = values[o + i], values[o + nr + i]
            s = r[i] / scale + values[lam + i] / rho
            e = s - upper if s > upper else (s - lower if s < lower else 0.0)
            g[i] = rho * e / scale
            D[0, i] = rho / (scale * scale) if (s >= upper or s <= lower) else 0.0
            value += 0.5 * rho * e * e - values[lam + i] * values[lam + i] / (2.0 * rho)
        return value
    if act == MATRIX:
        for i in range(nr):
            acc = 0.0
            for j in range(nr):
                H[0, i, j] = values[o + i * nr + j]
                acc += H[0, i, j] * r[j]
            g[i] = acc
            value += 0.5 * acc * r[i]
        return value
    for i in range(nr):
        e, w = r[i], 1.0
        if act == WEIGHTED:
            w = values[o + i]
        elif act == BARRIER:
            lower, upper = values[o + i], values[o + nr + i]
            if lower != lower or upper != upper:  # a NaN bound compares false: it would pass for no bound
                return np.nan
            e = e - upper if e > upper else (e - lower if e < lower else 0.0)
        g[i] = w * e
        D[0, i] = w if (act != BARRIER or e != 0.0) else 0.0
        value += 0.5 * w * e * e
    return value


@kernel
def cost_table_kernel(model, frames, knots, contacts, table, derivatives, clear, work, out):
    """Add every term of ``table`` at its knots into ``out`` = ``(l, l_x, l_u, l_xx, l_xu, l_uu)`` (rows: the knots
    of ``knots`` = ``(H, S, V, U)``, checked), each row of the N knots first set to zero when ``clear``; without
    ``derivatives`` only ``l`` (the others may be empty). ``contacts`` = ``(F, dF_dx, dF_du)``: at the knots of
    contact terms, the stacked contact forces (N, nc_max) of the knot's dynamics and, with ``derivatives``, their
    derivatives (N, nc_max, ndx) and (N, nc_max, nu). Returns -1, or the entry whose residual is not finite."""
    arrays = ModelArrays(*model)
    mi, mf, floating, n = arrays.joints, arrays.bodies, arrays.floating, arrays.n
    fb, ff = frames
    H, S, V, U = knots
    terms, weights, entries, starts, columns, counts, values = table
    bodies, r, g, D, Hw, R_x, R_u, u_columns, u_counts, J, no_J, scaled_row = work
    F, dF_dx, dF_du = contacts
    l, l_x, l_u, l_xx, l_xu, l_uu = out
    nv = V.shape[1]
    for k in range(starts.shape[0] - 1):
        if clear:
            l[k] = 0.0
            if derivatives:
                l_x[k, :] = 0.0
                l_u[k, :] = 0.0
                l_xx[k, :, :] = 0.0
                l_xu[k, :, :] = 0.0
                l_uu[k, :, :] = 0.0
        h = H[k] if floating else H[0]
        kinematics = False
        for e in range(starts[k], starts[k + 1]):
            t, i = entries[e, 0], entries[e, 1]
            kind, nr, w = terms[t, T_KIND], terms[t, T_NR], weights[t]
            row = 0 if terms[t, T_REF_ROWS] == 1 else i
            ref = terms[t, T_REF] + row * terms[t, T_REF_SIZE]
            if kind == STATE:
                _state_residual(floating, n, h, S[k], V[k], values, ref, terms[t, T_REF_S] + row * n,
                                terms[t, T_REF_V] + row * nv, derivatives, r, R_x)
            elif kind == CONTROL:
                for m in range(nr):
                    r[m] = U[k, m] - values[ref + m]
            elif kind == JOINT_POSITION:
                for m in range(nr):
                    r[m] = S[k, m]
                    R_x[m, nv - n + m] = 1.0
            elif kind == JOINT_VELOCITY:
                for m in range(nr):
                    r[m] = V[k, nv - n + m]
                    R_x[m, 2 * nv - n + m] = 1.0
            elif kind == CONTACT:
                _contact_residual(nr, terms[t, T_FRAME], values, ref, terms[t, T_MAP], F[k], r)
            else:
                if not kinematics:
                    forward_kinematics_core(mi, mf, h, S[k], V[k], V[k], PLACEMENT, mi.shape[0] - 1, bodies)
                    kinematics = True
                _robot_residual(kind, mi, mf, fb, ff, terms[t, T_FRAME], values, ref, derivatives, bodies, r, R_x, J,
                                no_J)
            act = terms[t, T_ACT]
            a = _activation(act, nr, values, terms[t, T_ACT_PARAMS], i, r, g, D, Hw)
            if a != a:
                return e
            l[k] += w * a
            if not derivatives:
                continue
            if kind == CONTROL:
                for c in range(nr):
                    l_u[k, c] += w * g[c]
                    if act == MATRIX:
                        for d in range(nr):
                            l_uu[k, c, d] += w * Hw[0, c, d]
                    else:
                        l_uu[k, c, c] += w * D[0, c]
                continue
            if kind == CONTACT:
                # rows of zero gradient and Hessian diagonal (a barrier's inside its box) add nothing: their
                # Jacobian rows are not formed, the products skip them (a finite value times zero)
                _contact_jacobians(nr, terms[t, T_FRAME], values, terms[t, T_MAP], act == MATRIX, g, D, dF_dx[k],
                                   dF_du[k], R_x, R_u)
            if (kind == CONTACT or kind == COM) and act != MATRIX:
                _add_dense_gauss_newton(nr, w, g, D, R_x, 2 * nv if kind == CONTACT else nv, R_u,
                                        R_u.shape[1] if kind == CONTACT else 0, scaled_row, l_x[k], l_u[k], l_xx[k],
                                        l_xu[k], l_uu[k])
                continue
            first = terms[t, T_PATTERN]
            P, IP, CP = R_x[:nr], columns[first:first + nr], counts[first:first + nr]
            add_symmetric_products(P, IP, CP, w, act != MATRIX, D, Hw, 0, l_xx[k])
            add_gradient(P, IP, CP, w, g, l_x[k])
            if kind == CONTACT:
                Q, IQ, CQ = R_u[:nr], u_columns[:nr], u_counts[:nr]
                add_products(P, IP, CP, Q, IQ, CQ, w, act != MATRIX, D, Hw, 0, l_xu[k])
                add_symmetric_products(Q, IQ, CQ, w, act != MATRIX, D, Hw, 0, l_uu[k])
                add_gradient(Q, IQ, CQ, w, g, l_u[k])
    return -1


@split_kernel
def cost_table_split_kernel(model, frames, knots, contacts, table, derivatives, clear, work, other_work, out, failed):
    """``cost_table_kernel`` on two halves of the knots, computed by two threads, the first with ``work``, the
    second with ``other_work``, each writing its result to its entry of ``failed`` ((2,) int64); returns the first
    failing entry in knot order, or -1."""
    H, S, V, U = knots
    terms, weights, entries, starts, columns, counts, values = table
    F, dF_dx, dF_du = contacts
    l, l_x, l_u, l_xx, l_xu, l_uu = out
    N, floating = starts.shape[0] - 1, ModelArrays(*model).floating
    for i in prange(2):
        a, b = i * N // 2, (i + 1) * N // 2
        # the arrays a table leaves empty (no contact term, values only) are never read, nor are their slices
        failed[i] = cost_table_kernel(
            model, frames, (H[a:b] if floating else H, S[a:b], V[a:b], U[a:b]), (F[a:b], dF_dx[a:b], dF_du[a:b]),
            (terms, weights, entries, starts[a:b + 1], columns, counts, values), derivatives, clear,
            work if i == 0 else other_work, (l[a:b], l_x[a:b], l_u[a:b], l_xx[a:b], l_xu[a:b], l_uu[a:b]))
    return failed[0] if failed[0] >= 0 else failed[1]


def _cost_work(nb: int, nr: int, nu: int, nv: int) -> CostWork:
    """The work arrays of ``cost_table_kernel`` for ``nb`` bodies, residuals of ``nr`` rows at most, ``nu`` controls and
    ``nv`` velocities."""
    return CostWork(np.zeros((nb, W_COLS)), np.zeros(nr), np.zeros(nr), np.zeros((1, nr)), np.zeros((1, nr, nr)),
                    np.zeros((nr, 2 * nv)), np.zeros((nr, nu)), np.tile(np.arange(nu, dtype=np.int64), (nr, 1)),
                    np.full(nr, nu, np.int64), np.zeros((6, nv)), np.zeros((0, nv)), np.zeros(2 * nv + nu))


def compilable(cost, model: RobotModel | None) -> bool:
    """Whether ``CompiledCosts`` evaluates ``cost`` (module docstring); a robot residual only on ``model`` (None:
    any model without mimic joints)."""
    if type(cost) is not ResidualCost or type(cost.activation) not in _ACTIVATIONS:
        return False
    residual = cost.residual
    kind = _KINDS.get(type(residual))
    if kind is None:
        return False
    if kind == CONTACT and (residual.dynamics is None or getattr(residual, "facets", 0) is None):
        return False  # forces it solves itself, or the exact cone (not a linear map of the forces)
    if kind in _ROBOT_KINDS or kind in (JOINT_POSITION, JOINT_VELOCITY, CONTACT):
        return not residual.model.mimic and (model is None or residual.model is model)
    return True


def table_model(costs) -> RobotModel | None:
    """The model of the first robot residual among ``costs`` that ``compilable`` takes, or None."""
    for cost in costs:
        if compilable(cost, None) and _KINDS[type(cost.residual)] in _ROBOT_KINDS:
            return cost.residual.model
    return None


class _Record(NamedTuple):
    """One cost's part of a table: its row of the term table (parameter offsets from its own first parameter),
    its parameters' ``sources`` (owner, getter) and their total ``size``, R_x's pattern ``columns`` (nr, 2 nv) and
    ``counts`` (nr,); the number of ``knots`` its reference has a row for (None: one for all) and of its
    augmented Lagrangian's ``multipliers`` (None: none): those of the knots it is evaluated at; the residual and
    activation (``parts``) and parameter ``shapes`` it was made for (another, and it is made again)."""

    row: list
    sources: list
    size: int
    columns: np.ndarray
    counts: np.ndarray
    knots: int | None
    multipliers: int | None
    parts: tuple
    shapes: list


class CompiledCosts:
    """Weighted ``ResidualCost`` terms at knots, evaluated by one ``cost_table_kernel`` call (module docstring).

    ``items``: ``(cost, weight, knots)`` with ``knots`` the rows (int64) of the outputs the term adds into, in the
    order of the term's own knots (a tracking reference's row ``i`` is read at ``knots[i]``); every cost must be
    ``compilable`` on ``model`` (None when no robot residual is among them). ``N`` rows, ``nu`` controls (0 for a
    terminal cost) on ``state_space``. A table serves one evaluation at a time (its work arrays). ``records`` and
    ``buffers``: dicts of the terms' parts and of work arrays that the tables of one owner (a problem) share: a
    receding horizon has a table per window, whose terms stay while their knots move.

    The parameters are the residuals' and activations' own arrays (``sources``: an owner and an attribute path),
    laid end to end in the table's values and copied there by one ``np.concatenate`` per call, from flat views of
    them kept while each attribute holds the same array (58 arrays copied one by one cost a trot's 64 us a call)."""

    def __init__(self, items: list[tuple[ResidualCost, float, np.ndarray]], state_space: StateSpace, nu: int, N: int,
                 model: RobotModel | None, records: dict | None = None, dynamics_runs=(), buffers: dict | None = None):
        self.state_space, self.nu, self.N = state_space, nu, N
        self.records = {} if records is None else records
        self.buffers = {} if buffers is None else buffers
        n, floating = state_space.n, state_space.floating_base
        self.nv = n + 6 if floating else n
        self._values_only = (np.zeros((0, 0)), np.zeros((0, 0)), np.zeros((0, 0, 0)), np.zeros((0, 0, 0)),
                             np.zeros((0, 0, 0)))
        self.items, self.model = items, model
        for cost, _, _ in items:
            if not self.takes(cost):
                raise ValueError(f"CompiledCosts: {cost!r} is not a term it evaluates (compilable, on model "
                                 f"{getattr(model, 'name', None)!r})")
        if model is None:
            # no robot residual: kinematics-free arrays of the packed model's types
            self.packed = (np.zeros((0, 4), np.int64), np.zeros((0, 26)), np.zeros(3), floating, n)
            self.frames = (np.zeros(0, np.int64), np.zeros((0, 12)))
        else:
            tables = model_tables(model)
            self.packed, self.frames = model.packed, (tables.body, tables.pose)
        self._build()
        self._read_in: object | None = None  # the scope of the last copy of the parameters (``add``)
        # placement_error_core writes the six rows of a placement error for a rotation's three
        nr = max([6] + [cost.residual.nr for cost, _, _ in items])
        nb, nv = 1 if model is None else model.nb, self.nv
        self._work_sizes = (nb, nr, nu, nv)
        self.work = self._buffer(("work",) + self._work_sizes, lambda: _cost_work(*self._work_sizes))
        self._contact_runs(dynamics_runs)

    def _buffer(self, key: tuple, make):
        """Work arrays by sizes, from ``buffers``, which the tables of one owner share (they evaluate one at a
        time): a receding horizon keeps a table per window."""
        found = self.buffers.get(key)
        if found is None:
            found = self.buffers[key] = make()
        return found

    def __repr__(self) -> str:
        return f"CompiledCosts({len(self.items)} terms, {self.N} knots)"

    def _contact_runs(self, dynamics_runs) -> None:
        """The runs ``(start, stop, dynamics)`` whose contact forces the contact terms read, and the arrays they are
        gathered in at every call: each term's residual must read the dynamics of its knots."""
        used = {id(cost.residual.dynamics) for cost, _, _ in self.items if _KINDS[type(cost.residual)] == CONTACT}
        self.contact_runs = [(a, b, dyn) for a, b, dyn in dynamics_runs if id(dyn) in used]
        of_knot = {}
        for a, b, dyn in self.contact_runs:
            of_knot.update((k, dyn) for k in range(a, b))
        for cost, _, knots in self.items:
            if _KINDS[type(cost.residual)] == CONTACT and any(of_knot.get(int(k)) is not cost.residual.dynamics
                                                              for k in knots):
                raise ValueError(f"CompiledCosts: {cost!r} reads the contact forces of dynamics its knots do not have")
        nc = max((dyn.nc for _, _, dyn in self.contact_runs), default=1)
        rows = self.N if self.contact_runs else 1
        self.contacts = self._buffer(("contacts", rows, nc), lambda: (
            np.zeros((rows, nc)), np.zeros((rows, nc, 2 * self.nv)), np.zeros((rows, nc, self.nu))))

    def _gather_contacts(self, X: Trajectory, U: np.ndarray, derivatives: bool) -> None:
        """The contact forces (and their derivatives) of each contact run's dynamics at its knots, as the dynamics
        kept them (a solver's iteration computed them at the same knots) or computes them."""
        F, dF_dx, dF_du = self.contacts
        nv, n = self.nv, self.state_space.n
        for a, b, dyn in self.contact_runs:
            nc = dyn.nc
            if not derivatives:
                F[a:b, :nc] = dyn.contact_forces(X[a:b], U[a:b])
                continue
            d = dyn.contact_derivatives(X[a:b], U[a:b])
            F[a:b, :nc] = d.forces
            dF_dx[a:b, :nc, :nv] = d.df_dq
            dF_dx[a:b, :nc, nv:] = d.df_dv
            dF_du[a:b, :nc] = d.df_dtau[:, :, nv - n:]

    def takes(self, cost) -> bool:
        """Whether this table evaluates ``cost``: ``compilable`` on its model (a table without one takes no robot
        residual that reads the kinematics)."""
        return compilable(cost, self.model) and (self.model is not None
                                                  or _KINDS[type(cost.residual)] not in _ROBOT_KINDS)

    def _build(self, fresh: bool = False) -> None:
        """The table from the terms' records (``_record``: taken from ``records`` when a cost's is there, unless
        ``fresh``), laid end to end."""
        records = []
        for cost, _, knots in self.items:
            kept = self.records.get(id(cost))
            if (fresh or kept is None or kept[0] is not cost or kept[1].parts != (cost.residual, cost.activation)
                    or any(getter(owner).shape != shape for (owner, getter), shape in zip(kept[1].sources,
                                                                                        kept[1].shapes))):
                kept = self.records[id(cost)] = (cost, self._record(cost))
            record = kept[1]
            if record.knots is not None and record.knots != len(knots):
                raise ValueError(f"{cost.residual!r}: the reference has {record.knots} knots, the cost is evaluated "
                                 f"at {len(knots)}")
            if record.multipliers is not None and record.multipliers != len(knots):
                raise ValueError(f"{cost.activation!r}: multipliers for {record.multipliers} knots, the cost is "
                                 f"evaluated at {len(knots)}")
            records.append(record)
        if len(self.records) > 4 * len(self.items):  # terms that left a receding horizon for good
            used = {id(cost) for cost, _, _ in self.items}
            for key in [key for key in self.records if key not in used]:
                del self.records[key]
        self.sources = [source for record in records for source in record.sources]
        self._parts = [(cost, cost.residual, cost.activation) for cost, _, _ in self.items]
        # Two threads pay on the robot terms (kinematics, contact forces), not on state and control terms alone: the
        # solo12 reorientation's 100 knots of those cost about 30 us, and split it solved 20 % slower.
        self._splits = any(_KINDS[type(residual)] in _ROBOT_KINDS for _, residual, _ in self._parts)
        self._arrays = [getter(owner) for owner, getter in self.sources]
        self._flat = [a.reshape(-1) if a.flags.c_contiguous else None for a in self._arrays]
        terms = np.array([record.row for record in records], np.int64).reshape(-1, T_COLS)
        sizes = np.array([record.size for record in records], np.int64)
        terms[:, [T_REF, T_REF_S, T_REF_V, T_MAP, T_ACT_PARAMS]] += (np.cumsum(sizes) - sizes)[:, None]
        terms[:, T_PATTERN] = np.cumsum(terms[:, T_NR]) - terms[:, T_NR]
        columns = np.concatenate([record.columns for record in records]) if records else np.zeros((1, 2 * self.nv),
                                                                                                   np.int64)
        counts = np.concatenate([record.counts for record in records]) if records else np.zeros(1, np.int64)
        # entries (knot, term, index among the term's knots), by knot
        lengths = np.array([len(knots) for _, _, knots in self.items], np.int64)
        knots = np.concatenate([knots for _, _, knots in self.items]).astype(np.int64)
        if knots.size and (knots.min() < 0 or knots.max() >= self.N):
            cost = next(cost for cost, _, k in self.items if len(k) and (min(k) < 0 or max(k) >= self.N))
            raise ValueError(f"CompiledCosts: {cost!r} has knots outside [0, {self.N})")
        first = np.repeat(np.cumsum(lengths) - lengths, lengths)
        entries = np.column_stack([knots, np.repeat(np.arange(len(lengths)), lengths), np.arange(len(knots)) - first])
        entries = entries[np.lexsort((entries[:, 1], entries[:, 0]))]
        starts = np.searchsorted(entries[:, 0], np.arange(self.N + 1)).astype(np.int64)
        self.table = CostTable(terms, np.array([weight for _, weight, _ in self.items], np.float64),
                               np.ascontiguousarray(entries[:, 1:]), starts, columns, counts,
                               np.zeros(int(sizes.sum())))

    def _record(self, cost: ResidualCost) -> _Record:
        """One cost's term, its offsets counted from its first parameter."""
        residual, activation = cost.residual, cost.activation
        kind, nr, frame = _KINDS[type(residual)], residual.nr, getattr(residual, "frame", -1)
        sources = []
        offset = 0

        def take(owner, path: str | None) -> int:
            """Append the parameter at ``owner.path`` (None: the array ``owner``, a constant); its offset."""
            nonlocal offset
            getter = _itself if path is None else attrgetter(path)
            sources.append((owner, getter))
            start, offset = offset, offset + np.asarray(getter(owner)).size
            return start

        ref, ref_rows, ref_size, ref_s, ref_v, force_map = 0, None, 0, 0, 0, 0
        if kind == STATE:
            x_ref = residual._ref
            ref_rows, ref_size = len(x_ref), POSE
            if x_ref.H is not None:
                ref = take(residual, "_ref.H")
            ref_s, ref_v = take(residual, "_ref.s"), take(residual, "_ref.v")
        elif kind == CONTROL:
            ref_rows, ref_size = (None, nr) if residual._reference.ndim == 1 else residual._reference.shape
            ref = take(residual, "_reference")
        elif kind in (FRAME_PLACEMENT, FRAME_ROTATION):
            ref_size = POSE
            ref = take(residual, "_target" if kind == FRAME_PLACEMENT else "_T")
        elif kind in (FRAME_TRANSLATION, COM):
            ref_rows, ref_size = (None, 3) if residual._target.ndim == 1 else residual._target.shape
            ref = take(residual, "_target")
        elif kind == CONTACT:
            frame = residual.nc
            if type(residual) is ContactForceResidual:
                ref_rows, ref_size = (None, nr) if residual._reference.ndim == 1 else residual._reference.shape
                ref = take(residual, "_reference")
                force_map = take(np.eye(nr), None)
            else:
                ref_size, ref = nr, take(np.zeros(nr), None)
                force_map = take(residual, "_G")
        # one reference for every knot: a vector, or a state trajectory of one knot; else one row per knot
        knots = None if ref_rows is None or (kind == STATE and ref_rows == 1) else int(ref_rows)
        ref_rows = 1 if knots is None else knots
        multipliers = None
        act_params = offset
        if type(activation) is WeightedQuadratic:
            act = WEIGHTED if activation.weights.ndim == 1 else MATRIX
            take(activation, "weights")
        elif type(activation) is QuadraticBarrier:
            act = BARRIER
            take(activation, "lower")
            take(activation, "upper")
        elif type(activation) is AugmentedLagrangianActivation:
            act = AUGMENTED
            multipliers = activation.multipliers.shape[0]
            if activation.multipliers.shape != (multipliers, nr):
                raise ValueError(f"{activation!r}: multipliers of shape {activation.multipliers.shape} for {nr} rows")
            take(activation, "lower")
            take(activation, "upper")
            take(np.array([activation.scale], dtype=np.float64), None)
            take(activation, "penalty")
            take(activation, "multipliers")
        else:
            act = QUADRATIC
        columns, counts = self._pattern(kind, residual)
        padded = np.zeros((nr, 2 * self.nv), np.int64)
        padded[:, :columns.shape[1]] = columns
        return _Record([kind, act, nr, frame, ref, ref_rows, ref_size, ref_s, ref_v, force_map, act_params, 0], sources,
                       offset, padded, counts, knots, multipliers, (residual, activation),
                       [getter(owner).shape for owner, getter in sources])

    def _pattern(self, kind: int, residual) -> tuple[np.ndarray, np.ndarray]:
        """R_x's non-zero columns per row, ``(columns (nr, width), counts (nr,))``."""
        nr, nv, n = residual.nr, self.nv, self.state_space.n
        nh = nv - n
        if kind == CONTROL:
            return np.zeros((nr, 1), np.int64), np.zeros(nr, np.int64)
        if kind == STATE:
            I, C = np.zeros((nr, max(nh, 1)), np.int64), np.ones(nr, np.int64)
            I[:nh, :nh], C[:nh] = np.arange(nh), nh
            I[nh:, 0] = np.arange(nh, nr)
            return I, C
        if kind in (JOINT_POSITION, JOINT_VELOCITY):
            first = nv - n if kind == JOINT_POSITION else 2 * nv - n
            return (first + np.arange(nr, dtype=np.int64))[:, None], np.ones(nr, np.int64)
        if kind == CONTACT:  # the forces move with every coordinate and velocity
            return np.tile(np.arange(2 * nv, dtype=np.int64), (nr, 1)), np.full(nr, 2 * nv, np.int64)
        dofs = np.arange(nv, dtype=np.int64) if kind == COM else _ancestor_dofs(residual.model, residual.frame)
        return np.tile(dofs, (nr, 1)), np.full(nr, len(dofs), np.int64)

    def _read_parameters(self) -> None:
        """Copy every parameter into the table, built again when an attribute holds another array (a reference set
        with another number of knots changes the layout)."""
        arrays = [getter(owner) for owner, getter in self.sources]
        same = all(cost.residual is residual and cost.activation is activation
                   for cost, residual, activation in self._parts)
        if same and not all(map(is_, arrays, self._arrays)):
            # parameters set anew (a receding horizon's moving targets): the layout stands while the shapes do
            same = all(a.shape == b.shape for a, b in zip(arrays, self._arrays))
            if same:
                self._arrays = arrays
                self._flat = [a.reshape(-1) if a.flags.c_contiguous else None for a in arrays]
        if not same:
            if not all(self.takes(cost) for cost, _, _ in self.items):
                raise TableChanged(f"{self!r}: a term was given a residual or an activation it does not take")
            self._build(fresh=True)
            arrays = self._arrays
        flat = [a.reshape(-1) if f is None else f for a, f in zip(arrays, self._flat)]
        if flat:
            np.concatenate(flat, out=self.table.values)

    def add(self, X: Trajectory, U: np.ndarray | None, out: CostDerivatives | np.ndarray, clear: bool = False,
            threads: int = 1, scope: object | None = None) -> None:
        """Add the terms' values (``out`` an (N,) array) or values and derivatives (``out`` a ``CostDerivatives``
        of N knots) at the first N knots of ``X``, ``U`` (checked by the caller) into ``out``; with ``clear`` into
        zeros (every row of ``out`` is written). With ``threads`` 2 a second thread computes half of the knots
        (``_jit.split_kernel``) of a table with robot terms. The parameters are copied into the table first,
        unless this table has copied them in the same ``scope`` (``Problem.unchanged_parameters``'s token)."""
        if scope is None or scope is not self._read_in:
            self._read_parameters()
            self._read_in = scope
        U = np.zeros((len(X), 0)) if U is None else U
        if len(X) < self.N or U.shape[0] < self.N:
            raise ValueError(f"{self!r}: {len(X)} states and {U.shape[0]} controls for {self.N} knots")
        H = IDENTITY4_STACK if X.H is None else X.H
        derivatives = isinstance(out, CostDerivatives)
        arrays = (out.l, out.l_x, out.l_u, out.l_xx, out.l_xu, out.l_uu) if derivatives else \
            (out,) + self._values_only
        if self.contact_runs:
            self._gather_contacts(X, U, derivatives)
        inputs = (self.packed, self.frames, (H, X.s, X.v, U), self.contacts, self.table, derivatives, clear, self.work)
        if threads > 1 and self._splits and self.N >= 2:
            other = self._buffer(("split work",) + self._work_sizes, lambda: _cost_work(*self._work_sizes))
            failed = split_call(cost_table_split_kernel, *inputs, other, arrays, np.empty(2, dtype=np.int64))
        else:
            failed = cost_table_kernel(*inputs, arrays)
        if failed >= 0:
            t, i = self.table.entries[failed]
            cost, _, knots = self.items[t]
            raise ValueError(f"{cost!r}: NaN or inf at knot {int(knots[i])}, in the residual or in its activation's "
                             "parameters")


class TableChanged(Exception):
    """A term of a table was given a residual or an activation the table does not take: the table's owner must
    build its evaluation again."""


def _itself(array: np.ndarray) -> np.ndarray:
    return array


def _ancestor_dofs(model: RobotModel, frame: int) -> np.ndarray:
    """The velocity columns of the joints that move a frame, increasing."""
    mi = model.packed[0]
    dofs, j = [], model_tables(model).body[frame]
    while j >= 0:
        iv = mi[j, 2]
        dofs.extend(range(iv, iv + (6 if mi[j, 1] == JOINT_FREE else 1)))
        j = mi[j, 0]
    return np.array(sorted(dofs), np.int64)
