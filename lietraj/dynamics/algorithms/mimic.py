"""Results of a model with mimic joints from those of its full tree, through ``v_full = G v`` (``MimicMap``).

The algorithms that support mimic joints (model module docstring) run their full-tree kernels on
``model.expanded`` at ``model.expand_state(x)`` and reduce what they return: a generalized force by ``G^T f``, a
Jacobian by ``J G``, a matrix of second derivatives ``d^2 / dv dv`` (the mass matrix, dtau/dq, dtau/dv) by
``G^T A G``. The full tree's work arrays live in a workspace of their own, kept in the caller's.
"""

from __future__ import annotations

import numpy as np

from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.model.workspace import Workspace, workspace_for


def _full_workspace(model: RobotModel) -> Workspace:
    return Workspace(model.expanded)


def expanded_workspace(model: RobotModel, workspace: Workspace | None, what: str) -> Workspace:
    """The workspace of ``model.expanded`` kept in ``workspace`` (checked to be ``model``'s), or a fresh one."""
    ws = workspace_for(model, workspace, what)
    return ws.cached("mimic_expanded", lambda: _full_workspace(model))


def expand_velocity(model: RobotModel, a: np.ndarray) -> np.ndarray:
    """``G a``: a velocity or acceleration, ``(nv,)`` or ``(N, nv)``, of the full tree."""
    return a @ model.mimic_map.G.T


def reduce_force(model: RobotModel, f: np.ndarray) -> np.ndarray:
    """``G^T f``: a generalized force, ``(nv_full,)`` or ``(N, nv_full)``, of the model's coordinates."""
    return f @ model.mimic_map.G


def reduce_jacobian(model: RobotModel, J: np.ndarray) -> np.ndarray:
    """``J G``: the columns of a Jacobian ``(..., nv_full)`` taken along the model's coordinates."""
    return J @ model.mimic_map.G


def reduce_matrix(model: RobotModel, A: np.ndarray) -> np.ndarray:
    """``G^T A G`` for a matrix ``(..., nv_full, nv_full)`` of derivatives along two tangent directions."""
    G = model.mimic_map.G
    # numpy's loop over a stack of small products: 15 times faster here than one BLAS product of the stacked rows
    return G.T @ A @ G


def _require_definite(model: RobotModel, M: np.ndarray, what: str) -> None:
    """A ValueError naming the cause if the reduced mass matrix (or one of a stack) is not positive definite."""
    try:
        np.linalg.cholesky(M)  # the cheapest test; numpy's batched triangular solves are general ones, so not reused
    except np.linalg.LinAlgError:
        raise ValueError(f"{what}({model.name}): the mass matrix is singular: some joint moves no mass (give it "
                         "inertia or armature)") from None


def solve(model: RobotModel, M: np.ndarray, b: np.ndarray, what: str) -> np.ndarray:
    """``M^{-1} b`` for the reduced mass matrix ``M`` (``(nv, nv)`` with ``b (nv,)``, or stacked); a singular ``M``
    is the ValueError of a joint that moves no mass."""
    return solve_many(model, M, b[..., None], what)[..., 0]


def solve_many(model: RobotModel, M: np.ndarray, B: np.ndarray, what: str) -> np.ndarray:
    """``M^{-1} B`` for a matrix ``B`` (``(nv, k)``, or stacked with ``M``): one factorization for its columns."""
    _require_definite(model, M, what)
    return np.linalg.solve(M, B)


def inverse(model: RobotModel, M: np.ndarray, what: str) -> np.ndarray:
    """``M^{-1}`` for the reduced mass matrix (or a stack of them), symmetric."""
    _require_definite(model, M, what)
    Minv = np.linalg.inv(M)
    return 0.5 * (Minv + np.swapaxes(Minv, -1, -2))
