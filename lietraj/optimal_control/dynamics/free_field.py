"""The free field of a robot driven by its joint torques: ``a = FD(x, [0; u])`` by ABA, with optional constant
body-frame external wrenches.

``u`` are the joint torques (``nu = model.n``; the floating base is unactuated, its generalized force is zero);
the first derivatives are ``aba_derivatives``' (seed 000 eq. 50, seed 001 eq. 5: ``∂FD = -M⁻¹ ∂ID``, left-trivialized
on the base), ``da/du`` the actuated columns of ``M⁻¹``; the contraction ``μᵀ ∂²FD`` is ``aba_second_order``'s
(seed 003 digest §3). Every call evaluates all knots of a trajectory in one compiled call. ``RobotField`` is what the
fields of a robot share: the model, a workspace and the generalized forces of the joint torques.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lietraj._jit import helper, kernel
from lietraj.dynamics._checks import IDENTITY4_STACK, NO_FEXT, checked_state
from lietraj.dynamics.algorithms.rnea_derivatives import LOCAL_WRENCH
from lietraj.dynamics.algorithms.aba import aba
from lietraj.dynamics.algorithms.aba_derivatives import ForwardDynamicsDerivatives, aba_derivatives_of_checked
from lietraj.dynamics.algorithms.aba_second_order import ForwardDynamicsHessian, aba_hessian_contraction
from lietraj.dynamics.lie.state import Trajectory
from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.model.workspace import Workspace
from lietraj.optimal_control.dynamics.field import (Field, FieldDerivatives, FieldHessian, FieldTables, joint_torques,
                                                    knot_rows)


@helper
def _same_knot(v, u, s, H, k, v0, u0, s0, H0, j):
    """Whether knot ``k`` of ``(H, s, v)``, ``u`` equals knot ``j`` of the kept ones exactly, the velocity first (of
    the knots of another run or trial, it is the first to differ); ``H`` of a fixed base is one row, compared at
    knot 0 only."""
    for i in range(v.shape[1]):
        if v[k, i] != v0[j, i]:
            return False
    for i in range(u.shape[1]):
        if u[k, i] != u0[j, i]:
            return False
    for i in range(s.shape[1]):
        if s[k, i] != s0[j, i]:
            return False
    if k < H.shape[0] and j < H0.shape[0]:
        for r in range(4):
            for c in range(4):
                if H[k, r, c] != H0[j, r, c]:
                    return False
    return True


@kernel
def _same_knots(v, u, s, H, v0, u0, s0, H0):
    """Whether the knots ``(H, s, v)`` and controls ``u`` equal the kept ``(H0, s0, v0)``, ``u0`` exactly: one
    compiled call instead of four ``np.array_equal`` of 4 us each, for every slot a recall looks in."""
    if v.shape != v0.shape or u.shape != u0.shape or s.shape != s0.shape or H.shape != H0.shape:
        return False
    for k in range(v.shape[0]):
        if not _same_knot(v, u, s, H, k, v0, u0, s0, H0, k):
            return False
    return True


@kernel
def _shifted_run(v, u, s, H, v0, u0, s0, H0):
    """``(stop, shift)``: knots ``1 .. stop - 1`` of ``(H, s, v)``, ``u`` equal the kept knots ``1 + shift ..
    stop - 1 + shift``, for the smallest shift >= 1 at which knot 1 does (a receding window's knots, moved by the
    knots it receded), and as many knots as are equal from there; ``(1, 0)`` when none is. Fixed-base ``H`` has
    one row."""
    N, N0 = v.shape[0], v0.shape[0]
    if N < 2 or v.shape[1] != v0.shape[1] or u.shape[1] != u0.shape[1] or s.shape[1] != s0.shape[1] \
            or (H.shape[0] > 1) != (H0.shape[0] > 1):
        return 1, 0
    for shift in range(1, N0 - 1):
        if _same_knot(v, u, s, H, 1, v0, u0, s0, H0, 1 + shift):
            stop = 2
            while stop < N and stop + shift < N0 and _same_knot(v, u, s, H, stop, v0, u0, s0, H0, stop + shift):
                stop += 1
            return stop, shift
    return 1, 0


class RobotField(Field):
    """A field of a ``RobotModel`` driven by its joint torques: its workspace (the work arrays of the algorithms,
    and output buffers per purpose and knot count, reused call after call) and the generalized forces ``[0; u]``.
    The workspace makes an object serve one thread at a time.

    The last derivatives are kept with a copy of their inputs (``recall``, ``keep``) and returned again for equal
    inputs: a solver's iteration asks for them at the same knots for the Jacobians, for DDP's second-order term
    (whose contraction needs the first-order pass too) and, on a contact field, for the contact costs.

    With a solver's two threads (``threads=2``) each compiled call computes half of the knots in a second thread
    (``_jit.split_kernel``), with a second workspace (``other_workspace``)."""

    nc = 0  # contact rows

    def __init__(self, model: RobotModel):
        if not isinstance(model, RobotModel):
            raise TypeError(f"{type(self).__name__}: expected a RobotModel, got {type(model).__name__}")
        self.model = model
        self.state_space = model.state_space
        self.nu = model.n
        self.workspace = Workspace(model)
        self._second_workspace: Workspace | None = None
        self._kept: dict = {}

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_kept"] = {}  # copies of arrays of this process's last call
        state["_second_workspace"] = None
        return state

    def other_workspace(self, threads: int) -> Workspace | None:
        """The work arrays of the second thread of a split call (``_jit.split_kernel``) for ``threads`` 2, made on
        first use; None for one thread."""
        if threads < 2:
            return None
        if self._second_workspace is None:
            self._second_workspace = Workspace(self.model)
        return self._second_workspace

    def forget_evaluations(self) -> None:
        """Drop what ``keep`` kept: the next calls compute again. For timing repeated solves of one problem from one
        guess, whose iterates repeat bit for bit: a solve would otherwise recall its predecessor's evaluations."""
        self._kept.clear()

    def recall(self, key, X: Trajectory, U):
        """What ``keep`` kept under ``key`` if it was computed at knots and controls equal to ``X`` and ``U``, else
        None. The value's arrays are shared: read them, do not write them. The controls, not the generalized forces
        made of them, are compared: a recall then checks and widens nothing (controls equal to kept ones passed the
        checks when they were kept; others, NaN included, never compare equal)."""
        U = np.ascontiguousarray(U, dtype=np.float64)
        if U.ndim != 2:
            return None
        H = IDENTITY4_STACK if X.H is None else X.H
        shape, last = U.shape, U[-1, -1] if U.size else 0.0
        for (H0, s, v, u), value, _ in self._kept.get(key, ()):
            # most slots hold another run or trial: their shape or last control tells them apart without a call
            if u.shape == shape and (not u.size or u[-1, -1] == last) and _same_knots(
                    X.v, U, X.s, H, v, u, s, IDENTITY4_STACK if H0 is None else H0):
                return value
        return None

    def fill_shifted(self, key, X: Trajectory, U, out, piece: Callable[[int, int], object]) -> bool:
        """Fill ``out`` (a per-knot result for ``X``, ``U``) from a value kept under ``key`` whose knots ``1 + shift ..
        stop - 1 + shift`` equal the knots ``1 .. stop - 1`` of ``X`` and ``U`` (``_shifted_run``; the longest such
        run among the values kept), when it covers most of the knots: the matching rows copied (``out`` may be the kept
        value's own buffer: numpy copies overlapping rows as if through a buffer), ``piece`` computing the others in
        this thread. False, ``out`` untouched, otherwise. A receding window's warm start is the last plan moved by a
        knot, with the measured state first and the last control repeated: its inner knots are those a tick's last
        linearization evaluated."""
        U = np.ascontiguousarray(U, dtype=np.float64)
        N = len(X)
        if U.ndim != 2 or N < 3:
            return False
        H = IDENTITY4_STACK if X.H is None else X.H
        best = None
        probe = U[1, -1] if U.shape[1] else None
        for (H0, s, v, u), value, controls in self._kept.get(key, ()):
            # knot 1 must be one of the kept knots: a kept value that was not a shifted plan's (a tick's linearization
            # at its warm start) has none of its controls, which the set of its last column tells without a call
            if probe is not None:
                if not controls:
                    controls.append(frozenset(u[:, -1].tolist()))
                if probe not in controls[0]:
                    continue
            stop, shift = _shifted_run(X.v, U, X.s, H, v, u, s, IDENTITY4_STACK if H0 is None else H0)
            if shift and (best is None or stop > best[1]):
                best = (value, stop, shift)
        if best is None or 2 * (best[1] - 1) < N:
            return False
        kept, stop, shift = best
        for name, rows in vars(out).items():
            rows[1:stop] = getattr(kept, name)[1 + shift:stop + shift]
        piece(0, 1)
        if stop < N:
            piece(stop, N)
        return True

    def keep(self, key, X: Trajectory, U, value, slots: int = 1):
        """Keep ``value`` under ``key`` with a copy of the knots ``X`` and (checked) controls ``U`` it was computed
        at, beside the ``slots - 1`` last values kept under ``key`` (a value whose arrays are new at every
        evaluation, not a buffer the next one overwrites, may take more than one slot: a problem's runs of knots
        that share this field each keep theirs); returns it."""
        kept = self._kept.setdefault(key, [])
        U = np.array(U, dtype=np.float64, order="C")
        # the inputs, the value and, once a shifted recall asks for it, the set of the last control's values
        kept.insert(0, (tuple(None if a is None else a.copy() for a in (X.H, X.s, X.v)) + (U,), value, []))
        del kept[slots:]
        return value

    def buffer(self, key: str, N: int, build):
        return self.workspace.cached((type(self).__name__, key, N), build)

    def torques(self, X: Trajectory, U) -> np.ndarray:
        """Checked joint torques ``U`` (N, n) as generalized forces (N, nv)."""
        N = len(X) if type(X) is Trajectory else 0
        return joint_torques(self.model, X, U, type(self).__name__,
                             self.buffer("tau", N, lambda: np.zeros((N, self.model.nv))))

    def joint_columns(self, A: np.ndarray) -> np.ndarray:
        """The actuated columns (..., nv, n) of a derivative with respect to the generalized forces."""
        return A[..., self.model.nv - self.model.n:]

    def field_hessian(self, C: ForwardDynamicsHessian) -> FieldHessian:
        """The ``FieldHessian`` of a dynamics algorithm's contraction."""
        return FieldHessian(C.qq, C.qv, C.vv, self.joint_columns(C.qtau))


class FreeField(RobotField):
    """``a = FD(x, [0; u])`` of ``model`` with constant body-frame external wrenches ``fext`` (``(nb, 6)``, optional)
    (module docstring)."""

    def __init__(self, model: RobotModel, fext=None):
        super().__init__(model)
        if fext is not None:
            fext = np.array(fext, dtype=np.float64)
            if fext.shape != (model.nb, 6) or not np.all(np.isfinite(fext)):
                raise ValueError(f"FreeField({model.name}): fext must be a finite ({model.nb}, 6) array")
        self.fext = fext
        # A subclass may change the field, and a model with mimic joints has no packed arrays of its own (its
        # algorithms run on the full tree): both are evaluated in Python.
        if type(self) is FreeField and not model.mimic:
            self.tables = FieldTables(NO_FEXT if fext is None else fext, None)

    def __repr__(self) -> str:
        return f"FreeField({self.model.name!r}{'' if self.fext is None else ', fext=...'})"

    def _fext(self, N: int):
        if self.fext is None:
            return None
        return self.buffer("fext", N, lambda: np.ascontiguousarray(np.broadcast_to(self.fext, (N,) + self.fext.shape)))

    def acceleration(self, X: Trajectory, U) -> np.ndarray:
        """ABA at every knot; at the knots of the derivatives kept, their ``a`` (a solver's gaps step the knots it
        has just linearized)."""
        d = self.recall(("fd", 0), X, U)
        if d is not None:
            return d.a.copy()
        return aba(self.model, X, self.torques(X, U), self._fext(len(X)), workspace=self.workspace)

    def derivatives(self, X: Trajectory, U, stage: int = 0) -> FieldDerivatives:
        return self.shared_derivatives(X, U, 1, stage)

    def shared_derivatives(self, X: Trajectory, U, threads: int, stage: int = 0) -> FieldDerivatives:
        d = self.forward_dynamics_derivatives(X, U, stage, threads)
        return FieldDerivatives(d.a, d.da_dq, d.da_dv, self.joint_columns(d.da_dtau))

    def forward_dynamics_derivatives(self, X: Trajectory, U, stage: int = 0,
                                     threads: int = 1) -> ForwardDynamicsDerivatives:
        """``aba_derivatives`` at every knot (kept: ``RobotField``), the knots shared by ``threads`` threads;
        ``stage`` keeps RK4's stages apart."""
        d = self.recall(("fd", stage), X, U)
        if d is not None:
            return d
        tau = self.torques(X, U)
        N, nv = len(X), self.model.nv
        out = self.buffer(f"fd{stage}", N, lambda: ForwardDynamicsDerivatives(
            np.empty((N, nv)), np.empty((N, nv, nv)), np.empty((N, nv, nv)), np.empty((N, nv, nv))))
        fext = self._fext(N)
        X = checked_state(self.model, X, "FreeField")

        def piece(a: int, b: int, threads: int = 1) -> None:
            whole = a == 0 and b == N  # the common piece: no views to make
            aba_derivatives_of_checked(self.model, X if whole else X[a:b], tau if whole else tau[a:b],
                                       None if fext is None else fext[a:b], LOCAL_WRENCH,
                                       out if whole else knot_rows(out, a, b), self.workspace,
                                       self.other_workspace(threads))

        if not self.fill_shifted(("fd", stage), X, U, out, piece):
            piece(0, N, threads)
        return self.keep(("fd", stage), X, U, out)

    def hessian_contraction(self, X: Trajectory, U, MU: np.ndarray) -> FieldHessian:
        return self.shared_hessian_contraction(X, U, MU, 1)

    def shared_hessian_contraction(self, X: Trajectory, U, MU: np.ndarray, threads: int) -> FieldHessian:
        """``aba_second_order``'s contraction, the knots shared by ``threads`` threads; not available with external
        wrenches."""
        if self.fext is not None:
            # A constant body-frame wrench on any body but a floating base adds -d2(J^T f)/dq2 to the second-order
            # inverse-dynamics tensors, which rnea_second_order does not compute.
            raise NotImplementedError(f"FreeField({self.model.name}).hessian_contraction: not available with external "
                                      "wrenches (fext); use iLQR, which needs only the Jacobians")
        tau = self.torques(X, U)
        return self.field_hessian(aba_hessian_contraction(self.model, X, tau, MU, workspace=self.workspace,
                                                          derivatives=self.recall(("fd", 0), X, U),
                                                          other=self.other_workspace(threads)))
