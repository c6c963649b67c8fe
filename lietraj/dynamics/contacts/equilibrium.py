"""Quasi-static equilibrium: joint torques and contact wrenches that hold a posture still, as a convex program.

At rest (zero velocity and acceleration) the equations of motion reduce to

    g(q) = S^T u + sum_c J_c^T w_c,

with ``g`` the generalized gravity (``generalized_gravity``), ``S = [0 | I_n]`` the actuation matrix (the first
six rows, those of a floating base, are unactuated), ``u`` the joint torques, and per contact ``c`` its wrench
``w_c`` and Jacobian ``J_c``. Two contact kinds:

- ``"6d"``, a sole: ``w_c = [f; n]`` (linear first) in the sole frame, at its origin, which is taken as the centre
  of a ``2 half_length x 2 half_width`` rectangle (length along the frame's x axis) whose normal is the frame's
  z axis; ``J_c`` is the LOCAL frame Jacobian;
- ``"3d"``, a point foot: ``w_c = f`` in world-aligned axes at the frame origin, on flat ground of normal world z;
  ``J_c`` is the linear part of the LOCAL_WORLD_ALIGNED frame Jacobian.

The floating-base rows ``g_b = sum_c J_{c,b}^T w_c`` are the Newton-Euler balance of the whole robot (on flat
ground: the CoM above the support polygon); the actuated rows give ``u = g_s - sum_c J_{c,s}^T w_c``, so ``u`` is
eliminated and the program is over the wrenches only, which makes the actuated rows hold to rounding.
Constraints: unilateral normal force ``f_z >= 0``; Coulomb friction, either the exact second-order cone
``||(f_x, f_y)|| <= mu f_z`` or the inscribed pyramid ``|f_x|, |f_y| <= mu / sqrt(2) f_z`` (conservative);
centre of pressure inside the sole, ``|n_y| <= half_length f_z``, ``|n_x| <= half_width f_z`` (CoP
``= (-n_y, n_x) / f_z``; the yaw torque is not bounded); ``|u_k| <= effort_limit_k`` for every joint whose
limit is finite and positive. Objective (regularization, the problem being under-determined with several
contacts): ``weights[0] ||u||^2 + weights[1] ||w||^2``, in units of the robot's weight ``m |g|``.

The program is solved by cvxpy (CLARABEL); the base rows are then corrected by the minimum-norm wrench change
(of the order of the solver tolerance) so that the equation holds to rounding.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from lietraj.dynamics._checks import check_model, checked_real, checked_state, require_finite
from lietraj.dynamics.kinematics.center_of_mass import center_of_mass
from lietraj.dynamics.contacts.contact_dynamics import Contact, contact_tuple
from lietraj.dynamics.kinematics.kinematics import frame_id, frame_jacobian, frame_placement
from lietraj.dynamics.model.model import RobotModel, refuse_mimic
from lietraj.dynamics.algorithms.rnea import generalized_gravity
from lietraj.dynamics.lie.state import State

CONTACT_KINDS = ("6d", "3d")
# cvxpy's status strings; cvxpy itself is imported on first use (it takes a second to import).
_SOLVED = ("optimal", "optimal_inaccurate")
_INFEASIBLE = ("infeasible", "infeasible_inaccurate")


@dataclass(frozen=True, eq=False)
class EquilibriumResult:
    """Outcome of ``static_equilibrium``.

    ``tau`` (n,) joint torques and ``wrenches`` (frame name -> (6,) sole wrench ``[f; n]`` or (3,) force, in the
    contact's ``reference`` as ``contact_dynamics`` reports forces) are None when ``feasible`` is False.
    ``residual`` is ``max |g - S^T u - sum J^T w|`` (N, N m), inf when infeasible. ``status`` is the cvxpy
    status; ``message`` says what was found.
    """

    feasible: bool
    status: str
    tau: np.ndarray | None
    wrenches: dict[str, np.ndarray] | None
    residual: float
    message: str


def _contacts(model: RobotModel, contacts, sole) -> list[tuple[str, int, str, tuple[float, float] | None, str]]:
    """(name, frame index, kind, sole half sizes, reference) per contact, checked."""
    sole = {} if sole is None else dict(sole)
    soles = {}
    for key, dims in sole.items():
        try:
            k = frame_id(model, key)
        except (KeyError, IndexError, TypeError) as e:
            raise ValueError(f"static_equilibrium({model.name}): sole: {e}") from None
        hl, hw = (float(d) for d in np.asarray(dims, dtype=float).reshape(2))
        if not (hl > 0 and hw > 0 and np.isfinite(hl) and np.isfinite(hw)):
            raise ValueError(f"static_equilibrium({model.name}): sole {key!r} half sizes must be positive, got {dims}")
        soles[k] = (hl, hw)
    if isinstance(contacts, (str, Contact)) or not isinstance(contacts, Sequence) or len(contacts) == 0:
        raise ValueError(f"static_equilibrium({model.name}): contacts must be a non-empty sequence of frame names "
                         "or Contact")
    out, seen = [], set()
    for c in contacts:
        frame, kind, reference = (c.frame, c.kind, c.reference) if isinstance(c, Contact) else (c, None, None)
        try:
            k = frame_id(model, frame)
        except (KeyError, IndexError, TypeError) as e:
            raise ValueError(f"static_equilibrium({model.name}): contact {frame!r}: {e}") from None
        if kind is None:
            kind = "6d" if k in soles else "3d"
        if kind not in CONTACT_KINDS:
            raise ValueError(f"static_equilibrium({model.name}): contact kind must be '6d' or '3d', got {kind!r}")
        if kind == "6d" and k not in soles:
            raise ValueError(f"static_equilibrium({model.name}): 6D contact {frame!r} needs its sole size in `sole`")
        if k in seen:
            raise ValueError(f"static_equilibrium({model.name}): contact {frame!r} is given twice")
        seen.add(k)
        out.append((model.frames[k].name, k, kind, soles.get(k),
                    reference or ("local" if kind == "6d" else "local_world_aligned")))
    return out


def _one_state(model: RobotModel, x, what: str) -> State:
    """``x`` if it is a State (not checked further), else a TypeError."""
    check_model(model, what)
    if not isinstance(x, State):
        raise TypeError(f"{what}({model.name}): x must be a State (one posture), got {type(x).__name__}")
    return x


def _solve(g, A, nb, contacts, friction, exact_cone, limits, weights):
    """Solve the conic program in normalized units; returns (status, w or None)."""
    import cvxpy as cp

    m = A.shape[1]
    w = cp.Variable(m)
    u = g[nb:] - A[nb:] @ w
    cons = [A[:nb] @ w == g[:nb]] if nb else []
    j = 0
    mu_p = friction / np.sqrt(2.0)
    for _, _, kind, dims, _ in contacts:
        fx, fy, fz = w[j], w[j + 1], w[j + 2]
        cons.append(fz >= 0)
        if exact_cone:
            cons.append(cp.SOC(friction * fz, w[j:j + 2]))
        else:
            cons += [cp.abs(fx) <= mu_p * fz, cp.abs(fy) <= mu_p * fz]
        if kind == "6d":
            hl, hw = dims
            cons += [cp.abs(w[j + 4]) <= hl * fz, cp.abs(w[j + 3]) <= hw * fz]
            j += 6
        else:
            j += 3
    if limits is not None:
        idx, lim = limits
        cons.append(cp.abs(u[idx]) <= lim)
    objective = cp.Minimize(weights[0] * cp.sum_squares(u) + weights[1] * cp.sum_squares(w))
    problem = cp.Problem(objective, cons)
    try:
        with warnings.catch_warnings():  # an inaccurate solution is reported through the status instead
            warnings.filterwarnings("ignore", message="Solution may be inaccurate", category=UserWarning)
            problem.solve(solver=cp.CLARABEL, tol_feas=1e-10, tol_gap_abs=1e-10, tol_gap_rel=1e-10)
    except cp.error.SolverError as e:
        return f"solver_error: {e}", None
    return problem.status, (None if w.value is None else np.array(w.value))


def static_equilibrium(model: RobotModel, x: State, contacts: Sequence[str | int | Contact],
                       friction: float = 0.7, sole: Mapping[str | int, tuple[float, float]] | None = None,
                       torque_limits: bool = True, exact_cone: bool = True,
                       weights: tuple[float, float] = (1.0, 1e-3)) -> EquilibriumResult:
    """Joint torques and contact wrenches holding the posture ``x`` at rest (see the module docstring).

    ``x`` must have zero velocity (quasi-static: a moving robot is not in equilibrium). ``contacts``: frame
    names or indices (kind ``"6d"`` if the frame is in ``sole``, else ``"3d"``; wrenches of 6D contacts in the
    sole frame, forces of 3D ones in world-aligned axes) or ``Contact``s of ``contact_dynamics`` (their kind and
    reference; the Baumgarte terms play no role at rest), so that the wrenches can seed ``contact_dynamics``' forces.
    ``sole``: ``{frame: (half_length, half_width)}`` of each 6D contact. ``friction``: Coulomb coefficient.
    ``torque_limits``: bound ``|u|`` by ``model.effort_limit``. ``exact_cone``: second-order friction cone, else
    the inscribed linear pyramid. ``weights``: (torque, wrench) weights of the regularization.
    An infeasible posture gives ``feasible=False`` and a message, not an exception; malformed input raises
    ValueError (TypeError for an argument of the wrong kind), naming it.
    """
    what = "static_equilibrium"
    x = _one_state(model, x, what)
    refuse_mimic(model, what)
    if (x.H is None) == model.floating_base:
        checked_state(model, x, what)  # the state of another robot: says so before speaking of its velocity
    v = None if x.v is None or isinstance(x.v, (str, bytes)) else np.asarray(x.v)
    if v is not None and v.dtype.kind in "biuf" and (v.shape != (model.nv,) or np.any(v != 0.0)):
        raise ValueError(f"{what}({model.name}): the state must be at rest (v = 0, shape ({model.nv},)), got x.v of "
                         f"shape {v.shape}" + ("" if v.shape != (model.nv,) else " and not zero") + "; pass "
                         "State(x.H, x.s, np.zeros(model.nv)) to ignore its velocity")
    x = checked_state(model, x, what)
    require_finite(model, what, x)
    g = generalized_gravity(model, x)  # checks the base pose (a rigid transform)
    friction = checked_real(friction, model, what, "friction")
    if not friction > 0:
        raise ValueError(f"{what}({model.name}): friction must be positive, got {friction}")
    try:
        wt = np.asarray(weights, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{what}({model.name}): weights must be two numbers (torque >= 0, wrench > 0), got "
                        f"{weights!r}") from None
    if wt.shape != (2,) or not np.all(np.isfinite(wt)) or np.any(wt < 0) or wt[1] <= 0:
        raise ValueError(f"{what}({model.name}): weights must be (torque >= 0, wrench > 0), got {weights}")
    cs = _contacts(model, contacts, sole)

    cols = []
    for _, k, kind, _, _ in cs:
        J = frame_jacobian(model, x, k, "local") if kind == "6d" else frame_jacobian(model, x, k, "local_world_aligned")[:3]
        cols.append(J.T)
    A = np.hstack(cols)
    nb = 6 if model.floating_base else 0
    # Normalize forces by the robot's weight so that the solver sees O(1) numbers.
    scale = max(model.total_mass * float(np.linalg.norm(model.gravity)), 1.0)
    gn = g / scale
    el = np.asarray(model.effort_limit, dtype=float)
    limited = np.flatnonzero(np.isfinite(el) & (el > 0))
    limits = (limited, el[limited] / scale) if torque_limits and limited.size else None

    status, w = _solve(gn, A, nb, cs, friction, exact_cone, limits, wt)
    if status not in _SOLVED or w is None:
        return EquilibriumResult(False, status, None, None, np.inf, _no_equilibrium(model, x, gn, A, nb, cs, friction,
                                                                                   exact_cone, wt, limits, status))
    if nb:
        w = w + np.linalg.lstsq(A[:nb], gn[:nb] - A[:nb] @ w, rcond=None)[0]
    u = gn[nb:] - A[nb:] @ w
    w, u = w * scale, u * scale
    residual = float(np.max(np.abs(g - np.concatenate([np.zeros(nb), u]) - A @ w)))
    wrenches, j = {}, 0
    for name, k, kind, _, reference in cs:
        size = 6 if kind == "6d" else 3
        wrenches[name] = _in_reference(frame_placement(model, x, k)[:3, :3], w[j:j + size], kind, reference)
        j += size
    msg = "equilibrium found" + (" (solver result inaccurate)" if status == "optimal_inaccurate" else "")
    return EquilibriumResult(True, status, u, wrenches, residual, msg)


def _in_reference(R: np.ndarray, w: np.ndarray, kind: str, reference: str) -> np.ndarray:
    """A wrench solved in the program's axes (sole frame for 6D, world-aligned for 3D) in the contact's reference."""
    if kind == "6d":
        return np.concatenate([R @ w[:3], R @ w[3:]]) if reference == "local_world_aligned" else w.copy()
    return R.T @ w if reference == "local" else w.copy()


def _no_equilibrium(model, x, gn, A, nb, cs, friction, exact_cone, wt, limits, status) -> str:
    """Why the program failed: the torque limits alone, or the support (CoM, friction), or the solver."""
    if status not in _INFEASIBLE:
        return f"no equilibrium found: the solver returned {status!r}"
    if limits is not None:
        relaxed, _ = _solve(gn, A, nb, cs, friction, exact_cone, None, wt)
        if relaxed in _SOLVED:
            return ("no equilibrium within the torque limits: holding this posture on these contacts needs joint "
                    "torques beyond model.effort_limit")
    if nb == 0:
        return "no equilibrium: the contacts cannot balance gravity (friction cones or centre-of-pressure limits)"
    com = center_of_mass(model, x)
    names = ", ".join(c[0] for c in cs)
    return (f"no equilibrium: the CoM (x={com[0]:.4g}, y={com[1]:.4g}) is outside the support polygon of the contacts "
            f"({names}), or the friction cones (mu={friction:g}) cannot hold the posture")


def quasi_static_torques(model: RobotModel, x: State, contacts: Sequence[Contact]) -> np.ndarray:
    """The joint torques ``u`` (n,) of the minimum-norm solution ``(u, w)`` of ``g(q) = S^T u + J_c^T w`` (LOCAL
    contact rows, ``contacts`` as for ``contact_dynamics``), ignoring friction, CoP and limits: Crocoddyl's
    ``quasiStatic`` for contact dynamics. Cheap (one least-squares solve) and always defined, it is the usual
    initial guess of the controls; ``static_equilibrium`` is the physically admissible answer. The velocity of
    ``x`` is ignored."""
    what = "quasi_static_torques"
    x = checked_state(model, _one_state(model, x, what), what)
    at_rest = State(x.H, x.s, np.zeros(model.nv))
    require_finite(model, what, at_rest)
    contacts = contact_tuple(model, contacts, what)
    for c in contacts:
        if not isinstance(c, Contact):
            raise TypeError(f"{what}({model.name}): contacts must be Contact objects, got {type(c).__name__}")
    g = generalized_gravity(model, at_rest)
    rows = [frame_jacobian(model, at_rest, frame_id(model, c.frame, what), "local")[:c.dim] for c in contacts]
    S = np.zeros((model.nv, model.n))
    S[model.nv - model.n:] = np.eye(model.n)
    A = np.hstack([S] + [J.T for J in rows])
    return np.linalg.lstsq(A, g, rcond=None)[0][:model.n]
