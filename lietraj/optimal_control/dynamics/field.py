"""Continuous dynamics on the state group: the acceleration field ``a = field(x, u)`` an integrator steps.

A field is Crocoddyl's differential action model without its cost: at every knot of a trajectory it gives the
acceleration ``a`` (nv) of the left-trivialized continuous dynamics ``ẋ = x [v; a(x, u)]`` (seed 000 eqs. 9-10,
24), its first derivatives ``da/dq, da/dv`` in the tangent chart of ``StateSpace`` (``dq`` in the order
``[z_H; z_s]``, left-trivialized on the base as everywhere) and ``da/du``, and optionally the contraction
``μᵀ ∂²a`` that DDP's second-order term needs. An integrator (``euler.SemiImplicitEuler``, ``rk4.RK4``) turns any
field into discrete dynamics ``x⁺ = f(x, u)`` with its Jacobians and second-order term
(``discrete_dynamics.IntegratedDynamics``).

A user field subclasses ``Field`` in Python (README, "Optimal control"): a state space, ``nu``, and
``acceleration`` and ``derivatives`` at every knot; ``hessian_contraction`` only for DDP. The built-in fields
(``FreeField``: ABA with optional external wrenches; ``ContactField``: the contact-constrained dynamics) also have a
compiled form, ``FieldTables`` (the body wrenches of ABA or the packed contacts, the other one None), which the
solvers' forward pass evaluates in one compiled call per run of knots (``solvers.forward_pass``); a field without it
is rolled out knot by knot in Python.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lietraj.dynamics._checks import all_finite
from lietraj.dynamics.algorithms.aba import aba_work
from lietraj.dynamics.contacts.contact_dynamics import contact_dynamics_work
from lietraj.dynamics.lie.state import StateSpace, Trajectory
from lietraj.dynamics.model.model import RobotModel

@dataclass(eq=False)
class FieldDerivatives:
    """First derivatives of a field at every knot: ``a`` (N, nv), ``da_dq``, ``da_dv`` (N, nv, nv) in the tangent
    chart and ``da_du`` (N, nv, nu)."""

    a: np.ndarray
    da_dq: np.ndarray
    da_dv: np.ndarray
    da_du: np.ndarray


@dataclass(eq=False)
class FieldHessian:
    """The contraction ``μᵀ ∂²a`` at every knot for covectors ``μ`` (N, nv): ``qq``, ``qv``, ``vv`` (N, nv, nv) and
    ``qu`` (N, nv, nu), derivatives taken one direction after the other (README, Conventions); ``uu`` and ``vu`` are zero
    (the built-in fields are affine in ``u``, and a user field must be so to use DDP's term)."""

    qq: np.ndarray
    qv: np.ndarray
    vv: np.ndarray
    qu: np.ndarray


class FieldTables(NamedTuple):
    """A built-in field in the rollout kernel's form: ABA with the body wrenches ``fext`` ((nb, 6), or (0, 6) for
    none) and ``contacts`` None, or the contact dynamics of ``contacts`` = (CI, CF, damping, restitution)
    (``pack_contacts``' tables; restitution -1: the stance's forward dynamics, >= 0: a touchdown's impact) and
    ``fext`` None. The kernel compiles the algorithm of the argument that is not None only."""

    fext: np.ndarray | None
    contacts: tuple | None


class FieldWork(NamedTuple):
    """Work arrays of a built-in field's compiled evaluation for nc contact rows: ABA's, the contact dynamics' (its five fields),
    the contact forces ``lam`` (nc), rows ``J`` (nc, nv) and drift ``gamma`` (nc)."""

    aba: np.ndarray
    bodies: np.ndarray
    crba: np.ndarray
    M: np.ndarray
    Z: np.ndarray
    S: np.ndarray
    lam: np.ndarray
    J: np.ndarray
    gamma: np.ndarray


def field_work(model: RobotModel, nc: int) -> FieldWork:
    return FieldWork(*aba_work(model), *contact_dynamics_work(model, nc), np.empty(nc), np.empty((nc, model.nv)),
                     np.empty(nc))


class Field(ABC):
    """Continuous dynamics ``a = field(x, u)`` on ``state_space`` with ``nu`` controls (module docstring).

    A subclass sets ``state_space`` and ``nu`` and implements ``acceleration`` and ``derivatives``;
    ``hessian_contraction`` is needed only by DDP. Every method works on all knots of a trajectory at once and
    raises ValueError for bad input or a failed evaluation."""

    state_space: StateSpace
    nu: int
    tables: FieldTables | None = None  # the compiled form of a built-in field; None: evaluated in Python

    @abstractmethod
    def acceleration(self, X: Trajectory, U) -> np.ndarray:
        """``a(X[k], U[k])`` at every knot, (N, nv)."""

    @abstractmethod
    def derivatives(self, X: Trajectory, U, stage: int = 0) -> FieldDerivatives:
        """``a`` and its first derivatives at every knot. ``stage`` (0-3) tells an integrator's stages apart: a
        field may return arrays it reuses in its next call with the same stage and knot count."""

    def shared_derivatives(self, X: Trajectory, U, threads: int, stage: int = 0) -> FieldDerivatives:
        """``derivatives``, with the knots shared by ``threads`` threads (1 or 2) where the field can (the built-in
        fields: each compiled call computes half of them in a second thread, ``_jit.split_kernel``); a field that
        cannot computes them all in the calling thread."""
        return self.derivatives(X, U, stage)

    def hessian_contraction(self, X: Trajectory, U, MU: np.ndarray) -> FieldHessian:
        """``MU[k]ᵀ ∂²a`` at every knot for covectors ``MU`` (N, nv) (``FieldHessian``). Optional: DDP needs it, iLQR
        and FDDP do not."""
        raise NotImplementedError(f"{type(self).__name__} does not implement hessian_contraction (the second-order "
                                  "term of DDP); use iLQR or FDDP, which need only the Jacobians")

    def shared_hessian_contraction(self, X: Trajectory, U, MU: np.ndarray, threads: int) -> FieldHessian:
        """``hessian_contraction``, with the knots shared as ``shared_derivatives`` shares them where the field
        can; a field that cannot computes them all in the calling thread."""
        return self.hessian_contraction(X, U, MU)


def knot_rows(result, a: int, b: int):
    """Knots ``a .. b - 1`` of a per-knot result dataclass (each field an array with a leading knot axis), as views:
    the part of a whole result a computation over some of its knots reads or writes."""
    return type(result)(*(x[a:b] for x in vars(result).values()))


def joint_torques(model: RobotModel, X: Trajectory, U, who: str, out: np.ndarray | None = None) -> np.ndarray:
    """Checked (N, n) joint torques as (N, nv) generalized forces (zero wrench on a floating base), written into
    ``out`` (N, nv, zero in its base columns) when given."""
    if type(X) is not Trajectory:
        raise TypeError(f"expected a Trajectory, got {type(X).__name__}")
    U = np.asarray(U, dtype=np.float64)
    N = len(X)
    if U.shape != (N, model.n):
        raise ValueError(f"{who}({model.name}): u must have shape ({model.n},) per knot, got {U.shape} for {N} knot(s)")
    if not all_finite(U):
        raise ValueError(f"{who}({model.name}): u contains NaN or inf")
    if not model.floating_base:
        return U
    tau = np.zeros((N, model.nv)) if out is None else out
    tau[:, 6:] = U
    return tau
