"""The Riccati backward pass in the Lie algebra: from the local model of a problem to feedback gains.

Shared by iLQR, DDP, FDDP (and TVLQR). The value function ``V_k`` is a quadratic in the tangent deviation
``δx = x ⊖ x̄_k`` at the nominal state, ``V_k(δx) = V_xᵀ δx + ½ δxᵀ V_xx δx``. Along a guess whose dynamics are
linearized as ``δx_{k+1} = F_x δx_k + F_u δu_k + f̄_{k+1}`` (``f̄`` the gaps, zero on a rollout) the action-value
function at knot ``k`` has the blocks (V' the next knot's, ``λ = V'_x + V'_xx f̄_{k+1}`` its gradient at the gap)::

    Q_x  = l_x  + F_xᵀ λ            Q_xx = l_xx + F_xᵀ V'_xx F_x (+ H_xx)
    Q_u  = l_u  + F_uᵀ λ            Q_xu = l_xu + F_xᵀ V'_xx F_u (+ H_xu)
                                    Q_uu = l_uu + F_uᵀ V'_xx F_u (+ H_uu) + ρ I

with ``H`` the second-order dynamics term of DDP (the Hessian of ``λᵀ f``; absent for iLQR, Gauss–Newton) and
``ρ`` the Levenberg–Marquardt regularization. The policy ``δu = k + K δx`` minimises ``Q``: without control
bounds ``k = -Q_uu⁻¹ Q_u``, ``K = -Q_uu⁻¹ Q_ux`` (one Cholesky factorization); with bounds ``ū + δu ∈ [u_lb, u_ub]``
``k`` solves the box QP by projected Newton (Bertsekas 1982, as Crocoddyl's BoxQP; ``box_qp``) and ``K`` is the
Newton gain of the free controls, zero for the clamped ones. For any such policy the value function is exactly::

    V_x  = Q_x + Kᵀ Q_u + c,   c = (Q_xu + Kᵀ Q_uu) k            (c = 0 without clamped controls)
    V_xx = Q_xx + Kᵀ Q_uu K + Q_xu K + Kᵀ Q_ux  (+ ρ I when the state regularization is on, as Crocoddyl)

and, since the free rows of ``K`` solve ``Q_uu K = -Q_ux`` on the free controls (with ``Q_uu`` regularized, as
factorized) and the clamped rows are zero, ``Kᵀ Q_uu K = -Kᵀ Q_ux``: ``V_xx = Q_xx + Q_xu K``, one product.

The expected improvement of a step of length α (Crocoddyl's FDDP model, here with the terms of clamped
controls, so that it is exact on LQ problems for every α; see ``BackwardPass.expected_improvement``)::

    ΔJ(α) = α Σ (Q_uᵀ k + λ_kᵀ f̄_k) + ½ α² Σ (kᵀ Q_uu k - f̄_kᵀ V_xx f̄_k) - (1 - α) Σ δx_kᵀ (c_k + V_xx f̄_k)

where ``δx_k`` are the deviations of the trial rollout from the nominal states and ``λ_T = V_x,T + V_xx,T f̄_T``.

How it is computed (numba, one compiled call per sweep):

- ``riccati_step`` is one knot ``t`` (trajax's ``lqr_step``): from the knot's ``LocalModel`` (``F_x, F_u``, the
  cost derivatives and the optional ``H``, gap and bounds) and the next knot's ``ValueFunction`` (``V'_xx``, ``λ'``)
  to the ``ActionValue`` terms, the ``Gains`` and the knot's own ``ValueFunction``, in three parts: the ``Q`` blocks,
  the gains (Cholesky solve or box QP) and the value function. It reads and writes rows ``t`` of named tuples that
  hold every knot (a leading knot axis), and fails with a code, never raises.
- ``riccati_sweep`` is the loop from knot ``T - 1`` down to 0 calling it; ``backward_pass`` fills the terminal
  knot, allocates the outputs and returns them as a ``BackwardPass``.

The ``ndx``-sized products go to BLAS through ``np.dot`` into the preallocated ``SweepWork``; the ``nu``-sized
Cholesky factorizations, solves and box QPs are loops. At the knots of a semi-implicit Euler step (the
``step_*`` fields of ``LocalModel``; ``euler.EulerStructure``) the configuration rows of ``F_x`` and ``F_u`` are
the velocity rows ``G``, ``B`` mixed by ``E = [dt J; I]`` (ndx, nv) plus ``[Φ, 0]``: ``F_x = [Φ, 0; 0, 0] + E G``,
``F_u = E B``, with ``Φ`` and ``J`` identities but for their 6x6 base blocks. Then, with ``Y = V'_xx F_x``::

    Y = [V'_xx[:, :nv] Φ, 0] + (V'_xx E) G      F_xᵀ V'_xx F_x = [Φᵀ Y[:nv]; 0] + Gᵀ (Eᵀ Y)
    F_xᵀ V'_xx F_u = (Eᵀ Y)ᵀ B                  F_uᵀ V'_xx F_u = Bᵀ (Eᵀ V'_xx E) B

where products with ``E`` and ``Φ`` are sums of two rows or columns (six for the base): two products of
``ndx² nv`` instead of two of ``ndx³``, and ``nv``- instead of ``ndx``-sized ones for ``Q_xu`` and ``Q_uu``, less
than half the work of the dense products on a humanoid. Where extensions hook in: a penalty or augmented-Lagrangian
method adds its terms to the cost derivatives of the ``LocalModel`` before the sweep; other constraints on ``δu``
than a box (a KKT system) replace the gains part of the step; a sweep over part of the horizon calls
``riccati_step`` on its knots.

The sweep runs on one thread when a solver has two (``SolverOptions.threads``). A two-thread sweep was built and
measured (2026-11-28): at each knot one thread computed ``Q_xx``'s products while the other computed ``Q_uu``,
``Q_xu`` and the gains, then the first the value function, the threads meeting three times a knot through atomic
flags (spinning, then yielding). Equal to the bit, it took 0.79-0.93 of the one-thread sweep's time on solo12 and
Talos on a quiet machine, 1.2-1.5 times it in another run of the same benchmark, and 0.93-0.97 of a solve's time:
the ~15 KB a knot hands from a core to the other (``P E``, ``Eᵀ Y``, ``Q_xu``, the gains) cost about what the
split saves, and a spinning thread loses whenever the machine has other work. Not kept.

The kernels take these named tuples as arguments, so numba's on-disk cache records their classes: renaming or
removing one leaves a cache entry it cannot read (numba issue #6018), which an emptied cache directory cures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from numba import njit

from lietraj._jit import blas_kernel, helper, kernel
from lietraj.dynamics._tuples import rows6, vm6
from lietraj.optimal_control.dynamics.euler_second_order import StepHessian
from lietraj.optimal_control.problem import ProblemDerivatives


@helper
def _cholesky(A, idx, m, L):
    """Lower Cholesky factor L (m x m) of A[idx[:m]][:, idx[:m]]; False if not positive definite."""
    for i in range(m):
        for j in range(i + 1):
            acc = A[idx[i], idx[j]]
            for p in range(j):
                acc -= L[i, p] * L[j, p]
            if i == j:
                if not acc > 0.0:  # also catches NaN
                    return False
                L[i, i] = math.sqrt(acc)
            else:
                L[i, j] = acc / L[j, j]
    return True


@helper
def _cholesky_solve_rows(L, m, idx, X):
    """X[idx[:m]] <- (L Lᵀ)⁻¹ X[idx[:m]]: the rows of X solved together, each step a row operation (SIMD over the
    columns, where one column at a time is a chain of dependent scalars). Four rows are subtracted per pass over the
    row being solved, which is then read and written a quarter as often: Talos's 32 rows of 76 columns 17 -> 7 us."""
    n = X.shape[1]
    for i in range(m):
        r = idx[i]
        p = 0
        while p + 4 <= i:
            a0, a1, a2, a3 = L[i, p], L[i, p + 1], L[i, p + 2], L[i, p + 3]
            r0, r1, r2, r3 = idx[p], idx[p + 1], idx[p + 2], idx[p + 3]
            for j in range(n):
                X[r, j] -= a0 * X[r0, j] + a1 * X[r1, j] + a2 * X[r2, j] + a3 * X[r3, j]
            p += 4
        while p < i:
            a, rp = L[i, p], idx[p]
            for j in range(n):
                X[r, j] -= a * X[rp, j]
            p += 1
        d = 1.0 / L[i, i]
        for j in range(n):
            X[r, j] *= d
    for i in range(m - 1, -1, -1):
        r = idx[i]
        p = i + 1
        while p + 4 <= m:
            a0, a1, a2, a3 = L[p, i], L[p + 1, i], L[p + 2, i], L[p + 3, i]
            r0, r1, r2, r3 = idx[p], idx[p + 1], idx[p + 2], idx[p + 3]
            for j in range(n):
                X[r, j] -= a0 * X[r0, j] + a1 * X[r1, j] + a2 * X[r2, j] + a3 * X[r3, j]
            p += 4
        while p < m:
            a, rp = L[p, i], idx[p]
            for j in range(n):
                X[r, j] -= a * X[rp, j]
            p += 1
        d = 1.0 / L[i, i]
        for j in range(n):
            X[r, j] *= d


@helper
def _add_into(A, B):
    """A += B for 2-d arrays of one shape."""
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            A[i, j] += B[i, j]


@helper
def _finite(A):
    """Whether a 2-d array has no NaN or infinity (``x - x`` is 0 only for finite x; an and-reduction, which SIMD
    can do, where a test that returns early is one branch per entry)."""
    ok = True
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            ok &= A[i, j] - A[i, j] == 0.0
    return ok


@helper
def _cholesky_solve(L, m, b):
    """b[:m] <- (L Lᵀ)⁻¹ b[:m]."""
    for i in range(m):
        acc = b[i]
        for p in range(i):
            acc -= L[i, p] * b[p]
        b[i] = acc / L[i, i]
    for i in range(m - 1, -1, -1):
        acc = b[i]
        for p in range(i + 1, m):
            acc -= L[p, i] * b[p]
        b[i] = acc / L[i, i]


@helper
def _quadratic(H, q, x):
    acc = 0.0
    for i in range(x.shape[0]):
        hx = 0.0
        for j in range(x.shape[0]):
            hx += H[i, j] * x[j]
        acc += x[i] * (0.5 * hx + q[i])
    return acc


@kernel
def _box_qp(H, q, lb, ub, x, free, idx, L, g, dx, x_new, b, max_iter, tol, armijo):
    """Projected Newton (``box_qp``) in place: x (warm start in, solution out), free, idx[:m] the free indices and
    L their Cholesky factor. Returns (m, iterations, ok)."""
    n = q.shape[0]
    scale = 1.0
    for i in range(n):
        x[i] = min(max(x[i], lb[i]), ub[i])
        scale = max(scale, 1.0 + abs(q[i]))
    scale *= tol
    m = 0
    for it in range(max_iter + 1):
        m = 0
        for i in range(n):
            acc = q[i]
            for j in range(n):
                acc += H[i, j] * x[j]
            g[i] = acc
            free[i] = not ((x[i] <= lb[i] and acc > 0.0) or (x[i] >= ub[i] and acc < 0.0))
            if free[i]:
                idx[m] = i
                m += 1
        if m == 0:
            return m, it, True
        if not _cholesky(H, idx, m, L):
            return m, it, False
        largest = 0.0
        for i in range(m):
            largest = max(largest, abs(g[idx[i]]))
        if largest <= scale or it == max_iter:
            return m, it, True
        for i in range(m):
            b[i] = g[idx[i]]
        _cholesky_solve(L, m, b)
        for i in range(n):
            dx[i] = 0.0
        for i in range(m):
            dx[idx[i]] = -b[i]
        f_old = _quadratic(H, q, x)
        alpha, accepted = 1.0, False
        for _ in range(30):
            decrease_model = 0.0
            for i in range(n):
                x_new[i] = min(max(x[i] + alpha * dx[i], lb[i]), ub[i])
                decrease_model += g[i] * (x[i] - x_new[i])
            if f_old - _quadratic(H, q, x_new) >= armijo * decrease_model:
                accepted = True
                break
            alpha *= 0.5
        if not accepted:
            return m, it, True  # no decrease left: x is optimal to rounding
        for i in range(n):
            x[i] = x_new[i]
    return m, max_iter, True


@dataclass(eq=False)
class BoxQPResult:
    """Solution of ``min ½ xᵀHx + qᵀx, lb <= x <= ub``: ``x``, the ``free`` mask (False for variables clamped at a
    bound with the gradient pointing out), the number of Newton ``iterations``, and ``ok`` (False: ``H`` restricted
    to the free set is not positive definite)."""

    x: np.ndarray
    free: np.ndarray
    iterations: int
    ok: bool


def box_qp(H, q, lb, ub, x0=None, max_iter: int = 100, tol: float = 1e-12, armijo: float = 0.1) -> BoxQPResult:
    """Projected Newton on a box QP (Bertsekas 1982, as Crocoddyl's BoxQP): clamp the variables at a bound whose
    gradient points out, take a Newton step on the free set, project it on the box with a backtracking (Armijo)
    line search; stop when the free gradient is below ``tol (1 + |q|∞)``."""
    H, q = np.ascontiguousarray(H, dtype=np.float64), np.ascontiguousarray(q, dtype=np.float64)
    n = q.shape[0]
    if H.shape != (n, n) or np.shape(lb) != (n,) or np.shape(ub) != (n,) or (x0 is not None and np.shape(x0) != (n,)):
        raise ValueError(f"box_qp: H must be ({n}, {n}) and lb, ub, x0 of shape ({n},)")
    x = np.zeros(n) if x0 is None else np.array(x0, dtype=np.float64)
    free, idx, L = np.empty(n, dtype=np.bool_), np.empty(n, dtype=np.int64), np.empty((n, n))
    work = np.empty((4, n))
    _, it, ok = _box_qp(H, q, np.asarray(lb, dtype=np.float64), np.asarray(ub, dtype=np.float64), x, free, idx, L,
                        work[0], work[1], work[2], work[3], max_iter, tol, armijo)
    return BoxQPResult(x, free, it, ok)


@dataclass(eq=False)
class BackwardPass:
    """Result of one Riccati sweep over ``T`` knots (module docstring for the symbols).

    ``k`` (T, nu), ``K`` (T, nu, ndx): the policy ``δu = k + K δx``; ``V_x`` (T+1, ndx), ``V_xx`` (T+1, ndx, ndx):
    the value function at the nominal states; ``lam`` (T+1, ndx): its gradient at the gaps, ``V_x + V_xx f̄``;
    ``Q_u`` (T, nu) and ``Q_uu`` (T, nu, nu, regularized); ``c`` (T, ndx); ``free`` (T, nu) bool; ``gaps``
    (T+1, ndx) or None. ``failed_at`` is -1, or the knot where ``Q_uu`` was not positive definite or the value
    function became non-finite (then the arrays are only filled for the knots after it).
    """

    k: np.ndarray
    K: np.ndarray
    V_x: np.ndarray
    V_xx: np.ndarray
    lam: np.ndarray
    Q_u: np.ndarray
    Q_uu: np.ndarray
    c: np.ndarray
    free: np.ndarray
    gaps: np.ndarray | None
    reg: float
    failed_at: int = -1
    reason: str = ""
    _sums: tuple[float, float, float] | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.failed_at < 0

    def stationarity(self) -> float:
        """Crocoddyl's stopping measure ``Σ_k |Q_u|²`` over the free controls (the gradient of the cost in the
        controls along a feasible trajectory; clamped controls at a KKT point do not count)."""
        return self._measures()[0]

    def improvement_terms(self) -> tuple[float, float]:
        """``(g1, g2)``: ``ΔJ(α) = α g1 + ½ α² g2 + ...`` (module docstring)."""
        return self._measures()[1:]

    def _measures(self) -> tuple[float, float, float]:
        """``(Σ|Q_u|², g1, g2)``, computed on the first call (the arrays are not changed after the sweep)."""
        if self._sums is None:
            gaps = _NO_GAPS if self.gaps is None else self.gaps
            self._sums = _sweep_measures(self.Q_u, self.Q_uu, self.k, self.free, self.lam, gaps, self.V_xx)
        return self._sums

    def expected_improvement(self, alpha: float, DX: np.ndarray | None = None,
                             terms: tuple[float, float] | None = None) -> float:
        """The decrease ``-ΔJ(α)`` of the cost predicted by the local model for a step of length ``alpha``; ``DX``
        (T+1, ndx) are the deviations ``x_try ⊖ x̄`` of the trial (needed for ``alpha < 1`` with gaps or clamped
        controls; None drops that term)."""
        g1, g2 = self.improvement_terms() if terms is None else terms
        dJ = alpha * g1 + 0.5 * alpha * alpha * g2
        if DX is not None and alpha != 1.0:
            gaps = _NO_GAPS if self.gaps is None else self.gaps
            dJ -= (1.0 - alpha) * _deviation_term(np.ascontiguousarray(DX, dtype=np.float64), self.c, self.V_xx, gaps)
        return -dJ


_NO_GAPS = np.zeros((0, 0))


@kernel
def _sweep_measures(Q_u, Q_uu, k, free, lam, gaps, V_xx):
    """``(Σ|Q_u|² over the free controls, g1, g2)`` of a sweep (``BackwardPass``; no gap terms when ``gaps`` has no
    row): one compiled pass where five numpy reductions cost 30-60 us in a solve."""
    stationarity, g1, g2 = 0.0, 0.0, 0.0
    for t in range(Q_u.shape[0]):
        for i in range(Q_u.shape[1]):
            q, ki = Q_u[t, i], k[t, i]
            if free[t, i]:
                stationarity += q * q
            g1 += q * ki
            acc = 0.0
            for j in range(Q_u.shape[1]):
                acc += Q_uu[t, i, j] * k[t, j]
            g2 += ki * acc
    for t in range(gaps.shape[0]):
        for i in range(gaps.shape[1]):
            g = gaps[t, i]
            if g == 0.0:  # most rows: a warm start's gaps are at its first knot
                continue
            g1 += lam[t, i] * g
            acc = 0.0
            for j in range(gaps.shape[1]):
                acc += V_xx[t, i, j] * gaps[t, j]
            g2 -= g * acc
    return stationarity, g1, g2


@kernel
def _deviation_term(DX, c, V_xx, gaps):
    """``Σ_k δx_kᵀ (c_k + V_xx,k f̄_k)`` over the trial's deviations ``DX`` (T+1 rows; ``c`` has T, ``gaps`` T+1 or
    none): the part of ``ΔJ(α)`` weighted by ``1 - α``."""
    total = 0.0
    for t in range(DX.shape[0]):
        if t < c.shape[0]:
            for i in range(DX.shape[1]):
                total += DX[t, i] * c[t, i]
        if gaps.shape[0]:
            for j in range(DX.shape[1]):
                g = gaps[t, j]
                if g == 0.0:
                    continue
                acc = 0.0
                for i in range(DX.shape[1]):
                    acc += DX[t, i] * V_xx[t, i, j]
                total += acc * g
    return total


class LocalModel(NamedTuple):
    """The quadratic model of the problem at one knot, or at every running knot with a leading knot axis ``T``:
    the dynamics Jacobians ``F_x`` (ndx, ndx), ``F_u`` (ndx, nu), the running cost derivatives ``l_x``, ``l_u``,
    ``l_xx``, ``l_xu``, ``l_uu``, and three optional terms, each absent when its block is empty (zero width, the knot
    axis kept): DDP's second-order term ``H_xx``, ``H_xu``, ``H_uu`` (Gauss–Newton without it), the gap ``f̄`` into
    the knot (``gaps``: T+1 rows; none on a rollout), and the bounds ``du_lb``, ``du_ub`` on ``δu`` (free controls
    without them). ``step_dt``, ``step_phi``, ``step_jr``: how ``F_x, F_u`` are built at the knots of a semi-implicit
    Euler step (module docstring; ``euler.EulerStructure``), dt NaN at the other knots."""

    F_x: np.ndarray
    F_u: np.ndarray
    l_x: np.ndarray
    l_u: np.ndarray
    l_xx: np.ndarray
    l_xu: np.ndarray
    l_uu: np.ndarray
    H_xx: np.ndarray
    H_xu: np.ndarray
    H_uu: np.ndarray
    gaps: np.ndarray
    du_lb: np.ndarray
    du_ub: np.ndarray
    step_dt: np.ndarray
    step_phi: np.ndarray
    step_jr: np.ndarray

    @classmethod
    def along(cls, d: ProblemDerivatives, hessian: StepHessian | None = None, gaps: np.ndarray | None = None,
              du_lb: np.ndarray | None = None, du_ub: np.ndarray | None = None) -> LocalModel:
        """The model of every running knot from a problem's derivatives and the optional terms (None: absent)."""
        T = d.dynamics.F_u.shape[0]
        r, none = d.running, np.empty((T, 0, 0))
        H_xx, H_xu, H_uu = (none, none, none) if hessian is None else (hessian.xx, hessian.xu, hessian.uu)
        S = d.dynamics.structure
        return cls(d.dynamics.F_x, d.dynamics.F_u, r.l_x, r.l_u, r.l_xx, r.l_xu, r.l_uu, H_xx, H_xu, H_uu,
                   np.empty((T + 1, 0)) if gaps is None else gaps, np.empty((T, 0)) if du_lb is None else du_lb,
                   np.empty((T, 0)) if du_ub is None else du_ub, *((np.full(T, np.nan), none, none) if S is None else S))


class SweepSettings(NamedTuple):
    """The scalars of a sweep: the regularization ``reg`` added to ``Q_uu`` (and to ``V_xx`` with
    ``regularize_vxx``), and the box QPs' tolerance and iteration limit."""

    reg: float
    regularize_vxx: bool
    box_tol: float
    box_max_iter: int


class Gains(NamedTuple):
    """The gains of the policy ``δu = k + K δx`` at one knot (or at all, with a leading knot axis) and the mask
    ``free`` of the controls not clamped at a bound."""

    k: np.ndarray
    K: np.ndarray
    free: np.ndarray


class ValueFunction(NamedTuple):
    """``V_x``, ``V_xx`` at the nominal state and ``lam = V_x + V_xx f̄``, its gradient at the gap, of one knot (or
    of all)."""

    V_x: np.ndarray
    V_xx: np.ndarray
    lam: np.ndarray


class ActionValue(NamedTuple):
    """What the expected improvement and the stopping rule need of ``Q`` at one knot (or at all): ``Q_u``,
    ``Q_uu`` (regularized) and the clamping term ``c``."""

    Q_u: np.ndarray
    Q_uu: np.ndarray
    c: np.ndarray


class SweepWork(NamedTuple):
    """Work arrays of one knot's step, reused by every knot of a sweep; ``PE``, ``EY``, ``EPE``, ``EPEB`` are the
    products with ``E`` of an Euler step's knots (module docstring), ``V'_xx E``, ``Eᵀ Y``, ``Eᵀ V'_xx E`` and
    ``Eᵀ V'_xx E B``."""

    W_xx: np.ndarray
    W_ux: np.ndarray
    Q_xx: np.ndarray
    Q_xu: np.ndarray
    Q_x: np.ndarray
    L: np.ndarray
    idx: np.ndarray
    vec: np.ndarray
    PE: np.ndarray
    EY: np.ndarray
    EPE: np.ndarray
    EPEB: np.ndarray

    @classmethod
    def empty(cls, ndx: int, nu: int) -> SweepWork:
        """Work arrays for a state tangent of size ``ndx`` and ``nu`` controls."""
        nv = ndx // 2
        return cls(np.empty((ndx, ndx)), np.empty((nu, ndx)), np.empty((ndx, ndx)), np.empty((ndx, nu)),
                   np.empty(ndx), np.empty((nu, nu)), np.empty(nu, dtype=np.int64), np.empty((4, nu)),
                   np.empty((ndx, nv)), np.empty((nv, ndx)), np.empty((nv, nv)), np.empty((nv, nu)))


@helper
def _add_times_block(X, W, n, alpha, out):
    """``out[:, :n] += alpha X[:, :n] diag(W, I)``: the first columns mixed by the square block ``W``, the others
    copied."""
    nh = W.shape[0]
    if nh == 6:
        w = rows6(W, alpha)  # in registers (lietraj.dynamics._tuples): 1.0 -> 0.6 us on a solo12 knot
        for i in range(X.shape[0]):
            y = vm6((X[i, 0], X[i, 1], X[i, 2], X[i, 3], X[i, 4], X[i, 5]), w)
            for c in range(6):
                out[i, c] += y[c]
    else:
        for i in range(X.shape[0]):
            for c in range(nh):
                acc = 0.0
                for j in range(nh):
                    acc += X[i, j] * W[j, c]
                out[i, c] += alpha * acc
    for i in range(X.shape[0]):
        for c in range(nh, n):
            out[i, c] += alpha * X[i, c]


@helper
def _add_block_times(W, X, n, alpha, out):
    """``out[:n] += alpha diag(W, I)ᵀ X[:n]``: the first rows mixed by the square block ``W`` (a column of the
    six at a time), the others row operations (contiguous)."""
    nh = W.shape[0]
    if nh == 6:
        w = rows6(W, alpha)  # 0.6 -> 0.4 us on a solo12 knot
        for c in range(X.shape[1]):
            y = vm6((X[0, c], X[1, c], X[2, c], X[3, c], X[4, c], X[5, c]), w)
            for r in range(6):
                out[r, c] += y[r]
    else:
        for r in range(nh):
            for j in range(nh):
                a = alpha * W[j, r]
                for c in range(X.shape[1]):
                    out[r, c] += a * X[j, c]
    for r in range(nh, n):
        for c in range(X.shape[1]):
            out[r, c] += alpha * X[r, c]


# riccati_step has one call site, riccati_sweep's loop, and _euler_products one, the step: numba inlines them at
# its own IR level and they cost no compilation of their own. As a helper (lietraj/_jit.py) the step was one more
# separately optimized LLVM module, which the sweep's module optimizes again with everything it calls: a first sweep
# from an empty cache took 11-15 s instead of 7-9 s. They are the one case of inline="always" a measurement
# justifies (compile time is part of the speed a user sees); the other options are the kernels' (the runtime flag
# they take from the sweep, for np.dot), so that the helpers they call compile once (lietraj/_jit.py).
_inlined = njit(inline="always", cache=True, nogil=True, no_cfunc_wrapper=True)


@_inlined
def _euler_products(model, t, P, work, Q_uu):
    """``work.Q_xx = F_xᵀ P F_x``, ``work.Q_xu = F_xᵀ P F_u`` and ``Q_uu = F_uᵀ P F_u`` at knot ``t`` of a semi-implicit
    Euler step, through ``G`` and ``B`` (module docstring); ``work.W_xx`` holds ``Y = P F_x``."""
    ndx = P.shape[0]
    nv, dt = ndx // 2, model.step_dt[t]
    Phi, Jr, G, B = model.step_phi[t], model.step_jr[t], model.F_x[t, nv:], model.F_u[t, nv:]
    Y, PE, EY, EPE, EPEB = work.W_xx, work.PE, work.EY, work.EPE, work.EPEB
    for i in range(ndx):  # P E = P[:, nv:] + dt P[:, :nv] J
        for c in range(nv):
            PE[i, c] = P[i, nv + c]
    _add_times_block(P, Jr, nv, dt, PE)
    np.dot(PE, G, Y)
    _add_times_block(P, Phi, nv, 1.0, Y)  # Y = P E G + [P[:, :nv] Φ, 0]
    for r in range(nv):  # Eᵀ Y = Y[nv:] + dt Jᵀ Y[:nv], Eᵀ P E = (P E)[nv:] + dt Jᵀ (P E)[:nv]
        for c in range(ndx):
            EY[r, c] = Y[nv + r, c]
        for c in range(nv):
            EPE[r, c] = PE[nv + r, c]
    _add_block_times(Jr, Y, nv, dt, EY)
    _add_block_times(Jr, PE, nv, dt, EPE)
    np.dot(G.T, EY, work.Q_xx)
    _add_block_times(Phi, Y, nv, 1.0, work.Q_xx)  # Q_xx = Gᵀ Eᵀ Y + [Φᵀ Y[:nv]; 0]
    np.dot(EY.T, B, work.Q_xu)
    np.dot(EPE, B, EPEB)
    np.dot(B.T, EPEB, Q_uu)


# why a knot's step failed (``riccati_step``'s return value), and what the solvers' statuses say about it
STEP_OK, NON_FINITE_Q, NOT_POSITIVE_DEFINITE, NON_FINITE_V = 0, 1, 2, 3
_WHY = {NON_FINITE_Q: "non-finite Q-function", NOT_POSITIVE_DEFINITE: "Q_uu not positive definite",
        NON_FINITE_V: "non-finite value function"}


# The step reads and writes rows t (and t + 1) of the sweep's arrays rather than taking one knot's views: in compiled
# code every array view takes a reference on its parent, an atomic increment and decrement, and the ~30 views of a
# knot's named tuples spent a fifth of a sweep's time on them (perf, ur5, T = 100); the step makes the six views
# np.dot needs.
@_inlined
def riccati_step(model, value, t, settings, q, gains, work):
    """One knot of the recursion (module docstring; trajax's ``lqr_step``) at knot ``t`` of arrays with a leading knot
    axis: from the local model ``model[t]`` and the next knot's value function ``value[t + 1]``, the action-value
    terms ``q[t]``, the gains ``gains[t]`` and the knot's own value function ``value[t]`` (``X[t]`` meaning row
    ``t`` of each field of ``X``). Returns ``STEP_OK`` or why it failed (``NON_FINITE_Q``, ``NOT_POSITIVE_DEFINITE``,
    ``NON_FINITE_V``)."""
    ndx, nu = model.F_u.shape[1], model.F_u.shape[2]
    F_x, F_u, P, Q_uu, K, V_xx = model.F_x[t], model.F_u[t], value.V_xx[t + 1], q.Q_uu[t], gains.K[t], value.V_xx[t]
    l_x, l_u, l_xx, l_xu, l_uu, H_xx, H_xu, H_uu, gaps = (model.l_x, model.l_u, model.l_xx, model.l_xu, model.l_uu,
                                                          model.H_xx, model.H_xu, model.H_uu, model.gaps)
    Q_u, c, k, V_x, lam = q.Q_u, q.c, gains.k, value.V_x, value.lam
    Q_xx, Q_xu, Q_x, W_xx = work.Q_xx, work.Q_xu, work.Q_x, work.W_xx
    idx, L, vec = work.idx, work.L, work.vec
    reg, second_order = settings.reg, H_xx.shape[1] != 0
    # the blocks of Q from the next knot's value: Q_xx, Q_xu, Q_x into work, Q_u, Q_uu + ρ I into q
    if not math.isnan(model.step_dt[t]):
        _euler_products(model, t, P, work, Q_uu)
    else:
        np.dot(F_x.T, P, W_xx)
        np.dot(W_xx, F_x, Q_xx)
        np.dot(W_xx, F_u, Q_xu)
        np.dot(F_u.T, P, work.W_ux)
        np.dot(work.W_ux, F_u, Q_uu)
    _add_into(Q_xx, l_xx[t])
    _add_into(Q_xu, l_xu[t])
    _add_into(Q_uu, l_uu[t])
    if second_order:
        _add_into(Q_xx, H_xx[t])
        _add_into(Q_xu, H_xu[t])
        _add_into(Q_uu, H_uu[t])
    for i in range(nu):
        Q_uu[i, i] += reg
    Q_u_t = Q_u[t:t + 1]
    for i in range(ndx):
        Q_x[i] = l_x[t, i]
    for i in range(nu):
        Q_u_t[0, i] = l_u[t, i]
    for j in range(ndx):  # Fᵀ λ' row by row of F (contiguous)
        lam_j = lam[t + 1, j]
        for i in range(ndx):
            Q_x[i] += F_x[j, i] * lam_j
        for i in range(nu):
            Q_u_t[0, i] += F_u[j, i] * lam_j
    if not (_finite(Q_u_t) and _finite(Q_uu) and _finite(Q_xu)):
        return NON_FINITE_Q
    # k on the box (or free), K = -Q_uu⁻¹ Q_ux on the free controls, zero rows for the clamped ones
    if model.du_lb.shape[1] != 0:
        m, _, ok = _box_qp(Q_uu, Q_u[t], model.du_lb[t], model.du_ub[t], k[t], gains.free[t], idx, L, vec[0], vec[1],
                           vec[2], vec[3], settings.box_max_iter, settings.box_tol, 0.1)
        if not ok:
            return NOT_POSITIVE_DEFINITE
    else:
        m = nu
        for i in range(nu):
            idx[i] = i
        if not _cholesky(Q_uu, idx, m, L):
            return NOT_POSITIVE_DEFINITE
        for i in range(nu):
            vec[0, i] = Q_u[t, i]
        _cholesky_solve(L, m, vec[0])
        for i in range(nu):
            k[t, i] = -vec[0, i]
    if m < nu:  # the clamped controls' rows are zero; the free ones' are all written below
        for i in range(nu):
            for j in range(ndx):
                K[i, j] = 0.0
    for i in range(m):
        for j in range(ndx):
            K[idx[i], j] = -Q_xu[j, idx[i]]
    _cholesky_solve_rows(L, m, idx, K)
    # V_x = Q_x + Kᵀ Q_u + c with c = Q_xu k + Kᵀ Q_uu k, V_xx = Q_xx + Q_xu K (module docstring), λ = V_x + V_xx f̄
    for i in range(nu):
        acc = 0.0
        for j in range(nu):
            acc += Q_uu[i, j] * k[t, j]
        vec[1, i] = acc
    for i in range(ndx):
        acc = 0.0
        for j in range(nu):
            acc += Q_xu[i, j] * k[t, j]
        c[t, i] = acc
        V_x[t, i] = Q_x[i]
    for j in range(nu):  # Kᵀ (Q_uu k) and Kᵀ Q_u row by row of K
        a, b = vec[1, j], Q_u[t, j]
        for i in range(ndx):
            c[t, i] += K[j, i] * a
            V_x[t, i] += K[j, i] * b
    for i in range(ndx):
        V_x[t, i] += c[t, i]
    np.dot(Q_xu, K, W_xx)
    finite = True  # V_xx tested as it is written (``_finite``'s test), not read again afterwards
    for i in range(ndx):
        for j in range(i + 1):
            v = 0.5 * (W_xx[i, j] + W_xx[j, i] + Q_xx[i, j] + Q_xx[j, i])
            V_xx[i, j] = v
            V_xx[j, i] = v
            finite &= v - v == 0.0
        if settings.regularize_vxx:
            V_xx[i, i] += reg
    for i in range(ndx):
        lam[t, i] = V_x[t, i]
    for j in range(gaps.shape[1]):  # + V_xx f̄ column by column (V_xx is symmetric: its rows, contiguous)
        g = gaps[t, j]
        for i in range(ndx):
            lam[t, i] += V_xx[j, i] * g
    if not (finite and _finite(lam[t:t + 1])):
        return NON_FINITE_V
    return STEP_OK


@blas_kernel
def riccati_sweep(model, settings, q, gains, value, work):
    """The recursion from knot T-1 down to 0, given ``value`` at knot T: ``riccati_step`` at every knot. Returns
    ``(-1, STEP_OK)``, or the knot that failed and why."""
    for t in range(model.F_u.shape[0] - 1, -1, -1):
        why = riccati_step(model, value, t, settings, q, gains, work)
        if why != STEP_OK:
            return t, why
    return -1, STEP_OK


@kernel
def _costate_sweep(F_x, F_u, l_x, l_u, K, p, q, g):
    """The adjoint recursion from knot T-1 down to 0 (``policy_gradient``): ``p`` holds ``p_T`` on entry, ``q`` is
    a work row; the rows of ``g`` (T, nu) receive the gradient."""
    ndx, nu = F_u.shape[1], F_u.shape[2]
    for t in range(F_u.shape[0] - 1, -1, -1):
        for j in range(nu):
            g[t, j] = l_u[t, j]
        for j in range(ndx):
            q[j] = l_x[t, j]
        for i in range(ndx):  # row by row: the rows of F_x, F_u are contiguous
            pi = p[i]
            for j in range(nu):
                g[t, j] += F_u[t, i, j] * pi
            for j in range(ndx):
                q[j] += F_x[t, i, j] * pi
        for i in range(nu):
            gi = g[t, i]
            for j in range(ndx):
                q[j] += K[t, i, j] * gi
        p, q = q, p


def policy_gradient(d: ProblemDerivatives, K: np.ndarray) -> np.ndarray:
    """The gradient (T, nu) of the total cost along a closed trajectory in the feedforward terms ``δk`` of the
    policy ``u = ū + δk + K (x ⊖ x̄)`` with gains ``K`` (T, nu, ndx), in one compiled call: ``g_k = l_u,k + F_u,kᵀ
    p_{k+1}`` with the costates of the closed loop ``p_k = l_x,k + F_x,kᵀ p_{k+1} + K_kᵀ g_k``, ``p_T = l_x,T``.
    With ``K = 0`` it is the reduced gradient of the controls (the adjoint equations); with a sweep's gains it is
    that sweep's ``Q_u`` (``V_x = Q_x + Kᵀ Q_u`` without clamped controls). ``O(T ndx (ndx + nu))``, a fraction of
    a sweep: with the last sweep's gains, a test of the stationarity ``Q_u`` at a new guess before sweeping there."""
    F_x, F_u = d.dynamics
    g = np.empty(d.running.l_u.shape)
    _costate_sweep(F_x, F_u, d.running.l_x, d.running.l_u, K, d.terminal.l_x[0].copy(), np.empty(F_x.shape[1]), g)
    return g


def backward_pass(d: ProblemDerivatives, reg: float = 0.0, gaps: np.ndarray | None = None,
                  hessian: StepHessian | None = None, du_lb: np.ndarray | None = None, du_ub: np.ndarray | None = None,
                  regularize_vxx: bool = True, k_guess: np.ndarray | None = None, box_tol: float = 1e-12,
                  box_max_iter: int = 100, previous: BackwardPass | None = None,
                  first_unchanged: int | None = None) -> BackwardPass:
    """One Riccati sweep from the terminal knot back to knot 0 (module docstring), in one compiled call.

    ``d``: the local model (``Problem.derivatives``); ``reg``: the regularization added to ``Q_uu`` (and to
    ``V_xx`` with ``regularize_vxx``); ``gaps``: (T+1, ndx) or None (a rollout); ``hessian``: DDP's second-order
    dynamics term per knot or None (iLQR); ``du_lb, du_ub``: (T, nu) bounds on ``δu`` (``u_lb - ū``, ``u_ub - ū``),
    or None for no bounds; ``k_guess``: (T, nu) warm start of the box QPs. ``previous``, a successful sweep of a
    model equal to this one (the same terms and settings) at the knots from ``first_unchanged`` on and at the
    terminal knot: its rows there are taken and only the knots before are swept (a sweep after a change to the
    first knots costs those knots). Never raises on numerical failure: see ``BackwardPass.failed_at``.
    """
    T, ndx, nu = d.dynamics.F_u.shape
    n = T if previous is None or first_unchanged is None else min(max(int(first_unchanged), 0), T)
    boxed = du_lb is not None
    k = np.zeros((T, nu)) if k_guess is None or not boxed else np.array(k_guess, dtype=np.float64)
    # the sweep writes every knot it reaches (K's rows of clamped controls included): no first touch of zeros
    K = np.empty((T, nu, ndx))
    V_x, V_xx, lam = np.empty((T + 1, ndx)), np.empty((T + 1, ndx, ndx)), np.empty((T + 1, ndx))
    Q_u, Q_uu, c = np.empty((T, nu)), np.empty((T, nu, nu)), np.empty((T, ndx))
    free = np.ones((T, nu), dtype=np.bool_)
    out = BackwardPass(k, K, V_x, V_xx, lam, Q_u, Q_uu, c, free, gaps, float(reg))
    if n < T:
        for name in ("k", "K", "V_x", "V_xx", "lam", "Q_u", "Q_uu", "c", "free"):
            getattr(out, name)[n:] = getattr(previous, name)[n:]
    else:
        V_x[T] = d.terminal.l_x[0]
        V_xx[T] = d.terminal.l_xx[0]
        if regularize_vxx and reg:
            V_xx[T].flat[::ndx + 1] += reg
        lam[T] = V_x[T] if gaps is None else V_x[T] + V_xx[T] @ gaps[T]
        if not (np.isfinite(lam[T]).all() and np.isfinite(V_xx[T]).all()):
            out.failed_at, out.reason = T, "non-finite terminal cost derivatives"
            return out
    settings = SweepSettings(float(reg), bool(regularize_vxx), float(box_tol), int(box_max_iter))
    model = LocalModel.along(d, hessian, gaps, du_lb, du_ub)
    if n < T:
        model = LocalModel(*(a[:n + 1] if a.shape[0] == T + 1 else a[:n] for a in model))
    t, why = riccati_sweep(model, settings, ActionValue(Q_u[:n], Q_uu[:n], c[:n]), Gains(k[:n], K[:n], free[:n]),
                           ValueFunction(V_x[:n + 1], V_xx[:n + 1], lam[:n + 1]), SweepWork.empty(ndx, nu))
    if t >= 0:
        out.failed_at, out.reason = t, f"{_WHY[why]} at knot {t}"
    return out
