"""Saving and loading solutions: states, controls, feedback gains, solver scalars and user metadata, without loss.

A solution file is a NumPy ``.npz`` archive (no pickled objects, so loading runs no code) holding every array bit
for bit (float64 and int64 as written)::

    format = "lietraj.solution", version       the file kind and layout version (``SOLUTION_FORMAT_VERSION``)
    floating_base, n                           the state group: SE(3) × Rⁿ × R⁶ × Rⁿ or Rⁿ × Rⁿ
    H (T+1, 4, 4; floating base only), s (T+1, n), v (T+1, nv)       the states xs
    us (T, nu), K (T, nu, ndx), k (T, nu)      controls and the policy δu = k + K (x ⊖ xs)
    cost, stop, gap_norm, total_time, iterations, status, solver     the SolverResult scalars
    history_<field> (m,)                       the scalar fields of each IterationInfo
    history_H, history_s, history_v, history_us (m, ...)             the iterates, only when saved with ``iterates``
    metadata                                   the user's dict as JSON text

``load_solution`` returns a ``SavedSolution``, a ``SolverResult`` with the ``metadata`` dict; any file that is not
such an archive, is damaged, is missing a field, has inconsistent shapes, or holds another state group than the one
asked for raises ValueError.
"""

from __future__ import annotations

import json
import math
import os
import zipfile
import zlib
from dataclasses import dataclass, field

import numpy as np

from lietraj.dynamics.lie.state import StateSpace, Trajectory
from lietraj.optimal_control.solvers.solvers import IterationInfo, SolverResult

SOLUTION_FORMAT = "lietraj.solution"
SOLUTION_FORMAT_VERSION = 1

_HISTORY_FLOATS = ("cost", "stop", "expected", "step", "regularization", "gap_norm", "improvement", "expected_step",
                   "time")
_RESULT_FLOATS = ("cost", "stop", "gap_norm", "total_time")


@dataclass(eq=False, repr=False)
class SavedSolution(SolverResult):
    """A ``SolverResult`` read from a file, with the user ``metadata`` saved beside it. History entries carry their
    iterates ``xs, us`` only if the file was written with ``iterates=True`` (None otherwise)."""

    metadata: dict = field(default_factory=dict)


def _as_result(solution) -> SolverResult:
    if isinstance(solution, SolverResult):
        return solution
    if not isinstance(solution, (tuple, list)) or not 2 <= len(solution) <= 4:
        raise ValueError("save_solution: expected a SolverResult or a tuple (xs, us), (xs, us, K) or (xs, us, K, k), "
                         f"got {type(solution).__name__}")
    xs, us, *gains = solution
    if not isinstance(xs, Trajectory):
        raise ValueError(f"save_solution: xs must be a Trajectory, got {type(xs).__name__}")
    us = np.asarray(us, dtype=np.float64)
    if us.ndim != 2:
        raise ValueError(f"save_solution: us must be a (T, nu) array, got shape {us.shape}")
    T, nu = us.shape
    ndx = 2 * (xs.v.shape[1] if xs.v.ndim == 2 else 0)
    K = np.asarray(gains[0], dtype=np.float64) if gains else np.zeros((T, nu, ndx))
    k = np.asarray(gains[1], dtype=np.float64) if len(gains) > 1 else np.zeros((T, nu))
    return SolverResult(xs, us, K, k, math.nan, "", 0)


def _state_arrays(prefix: str, X: Trajectory) -> dict[str, np.ndarray]:
    out = {f"{prefix}s": X.s, f"{prefix}v": X.v}
    if X.H is not None:
        out[f"{prefix}H"] = X.H
    return out


def _check_shapes(arrays: dict[str, np.ndarray], floating: bool, what: str) -> tuple[int, int, int]:
    """(T, n, nu) of the arrays of a solution, or ValueError naming the inconsistent one."""
    s, v, us = arrays["s"], arrays["v"], arrays["us"]
    if s.ndim != 2 or s.shape[0] < 1 or v.ndim != 2 or us.ndim != 2:
        raise ValueError(f"{what}: xs must have (T+1, n) joint positions and us be (T, nu), got s {s.shape}, v {v.shape}, "
                         f"us {us.shape}")
    T, n, nu = s.shape[0] - 1, s.shape[1], us.shape[1]
    nv = n + 6 if floating else n
    expected = {"s": (T + 1, n), "v": (T + 1, nv), "us": (T, nu), "K": (T, nu, 2 * nv), "k": (T, nu)}
    if floating:
        expected["H"] = (T + 1, 4, 4)
    for name, shape in expected.items():
        a = arrays.get(name)
        if a is None or a.shape != shape or a.dtype != np.float64:
            got = "missing" if a is None else f"{a.dtype} {a.shape}"
            raise ValueError(f"{what}: {name} must be a float64 array of shape {shape}, got {got}")
    return T, n, nu


def save_solution(path, solution, metadata: dict | None = None, iterates: bool = False) -> None:
    """Write ``solution`` — a ``SolverResult`` or a tuple ``(xs, us[, K[, k]])`` (missing gains are saved as zeros,
    missing scalars as NaN / "" / 0) — to ``path`` exactly (no suffix is added), atomically (a temporary file is
    renamed). ``metadata``: a JSON-serializable dict (default: the ``metadata`` of a ``SavedSolution``, else empty);
    it loads back as ``json.loads(json.dumps(metadata))``. ``iterates`` also stores each history entry's ``xs, us``."""
    r = _as_result(solution)
    if metadata is None:
        metadata = getattr(r, "metadata", {})
    if not isinstance(metadata, dict):
        raise ValueError(f"save_solution: metadata must be a dict, got {type(metadata).__name__}")
    try:
        meta = json.dumps(metadata)
    except (TypeError, ValueError) as e:
        raise ValueError(f"save_solution: metadata must be JSON-serializable ({e})") from e
    floating = r.xs.H is not None
    arrays = {name: np.ascontiguousarray(a) for name, a in {**_state_arrays("", r.xs), "us": np.asarray(r.us),
                                                           "K": np.asarray(r.K), "k": np.asarray(r.k)}.items()}
    _check_shapes(arrays, floating, "save_solution")
    if not isinstance(r.status, str) or not isinstance(r.solver, str):
        raise ValueError("save_solution: status and solver must be strings")
    fields = dict(format=np.array(SOLUTION_FORMAT), version=np.array(SOLUTION_FORMAT_VERSION, dtype=np.int64),
                  floating_base=np.array(floating), n=np.array(r.xs.s.shape[1], dtype=np.int64),
                  iterations=np.array(int(r.iterations), dtype=np.int64), status=np.array(r.status),
                  solver=np.array(r.solver), metadata=np.array(meta), **arrays)
    for name in _RESULT_FLOATS:
        fields[name] = np.array(float(getattr(r, name)), dtype=np.float64)
    history = list(r.history)
    fields["history_iteration"] = np.array([int(h.iteration) for h in history], dtype=np.int64)
    fields["history_solver"] = np.array([str(h.solver) for h in history], dtype=str)
    for name in _HISTORY_FLOATS:
        fields[f"history_{name}"] = np.array([float(getattr(h, name)) for h in history], dtype=np.float64)
    if iterates and history:
        fields["history_s"], fields["history_v"] = (np.stack([getattr(h.xs, c) for h in history]) for c in "sv")
        if floating:
            fields["history_H"] = np.stack([h.xs.H for h in history])
        fields["history_us"] = np.stack([np.asarray(h.us, dtype=np.float64) for h in history])
    path = os.fspath(path)
    temporary = f"{path}.tmp{os.getpid()}"
    try:
        with open(temporary, "wb") as f:
            np.savez_compressed(f, **fields)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


# What a damaged archive raises from inside numpy and zipfile (RuntimeError: flags claiming encryption or an unknown
# compression method).
_READ_ERRORS = (ValueError, OSError, EOFError, KeyError, RuntimeError, zipfile.BadZipFile, zlib.error)


def _read(path) -> dict[str, np.ndarray]:
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError("a single .npy array, not an .npz archive")
        with data:
            return {name: data[name] for name in data.files}
    except FileNotFoundError:
        raise
    except _READ_ERRORS as e:
        raise ValueError(f"load_solution: {os.fspath(path)!r} is not a readable solution file ({e})") from e


def _scalar(data: dict, name: str, kind: str, what: str):
    a = data.get(name)
    if a is None or a.shape != () or a.dtype.kind not in kind:
        raise ValueError(f"{what}: field {name!r} is missing or malformed")
    return a[()]


def load_solution(path, state_space: StateSpace | None = None) -> SavedSolution:
    """Read a file written by ``save_solution`` into a ``SavedSolution`` with arrays identical to the saved ones.
    ``state_space``: the group the states must belong to (ValueError if the file holds another: a different joint
    count or base kind). A missing file raises FileNotFoundError; anything else unreadable raises ValueError."""
    what = f"load_solution({os.fspath(path)!r})"
    data = _read(path)
    if data.get("format") is None or data["format"].shape != () or str(data["format"][()]) != SOLUTION_FORMAT:
        raise ValueError(f"{what}: not a lietraj solution file (no format tag {SOLUTION_FORMAT!r})")
    version = int(_scalar(data, "version", "iu", what))
    if not 1 <= version <= SOLUTION_FORMAT_VERSION:
        raise ValueError(f"{what}: file format version {version} is not supported (this lietraj reads versions 1 to "
                         f"{SOLUTION_FORMAT_VERSION}; a newer file needs a newer lietraj)")
    floating, n = bool(_scalar(data, "floating_base", "b", what)), int(_scalar(data, "n", "iu", what))
    if state_space is not None and (state_space.floating_base != floating or state_space.n != n):
        kind = "floating" if floating else "fixed"
        raise ValueError(f"{what}: the file holds states of a {kind}-base group with {n} joints, not of {state_space}")
    if floating != ("H" in data):
        raise ValueError(f"{what}: field 'H' is {'missing' if floating else 'present'} for a "
                         f"{'floating' if floating else 'fixed'}-base solution")
    T, n_file, _ = _check_shapes(data, floating, what)
    if n_file != n:
        raise ValueError(f"{what}: n = {n} but the joint positions have {n_file} columns")
    scalars = {name: float(_scalar(data, name, "f", what)) for name in _RESULT_FLOATS}
    status, solver = str(_scalar(data, "status", "U", what)), str(_scalar(data, "solver", "U", what))
    iterations = int(_scalar(data, "iterations", "iu", what))
    try:
        metadata = json.loads(str(_scalar(data, "metadata", "U", what)))
    except json.JSONDecodeError as e:
        raise ValueError(f"{what}: the metadata is not valid JSON ({e})") from e
    history = _history(data, T, floating, what)
    xs = Trajectory(data.get("H"), data["s"], data["v"])
    return SavedSolution(xs, data["us"], data["K"], data["k"], scalars["cost"], status, iterations, history,
                         scalars["stop"], scalars["gap_norm"], scalars["total_time"], solver, metadata)


def _history(data: dict, T: int, floating: bool, what: str) -> list[IterationInfo]:
    names = ["history_iteration", "history_solver"] + [f"history_{name}" for name in _HISTORY_FLOATS]
    columns = [data.get(name) for name in names]
    if any(c is None or c.ndim != 1 for c in columns) or len({c.shape[0] for c in columns}) != 1:
        raise ValueError(f"{what}: the history fields are missing or of different lengths")
    m = columns[0].shape[0]
    if columns[0].dtype.kind not in "iu" or (m and columns[1].dtype.kind != "U") \
            or any(c.dtype != np.float64 for c in columns[2:]):
        raise ValueError(f"{what}: the history fields have the wrong types")
    xs = us = None
    if "history_s" in data:
        nu = data["us"].shape[1]
        state = {name: data.get(f"history_{name}") for name in ("H", "s", "v")}
        shapes = {"s": (m, T + 1) + data["s"].shape[1:], "v": (m, T + 1) + data["v"].shape[1:], "us": (m, T, nu)}
        if floating:
            shapes["H"] = (m, T + 1, 4, 4)
        got = {**state, "us": data.get("history_us")}
        if any(got[name] is None or got[name].shape != shape for name, shape in shapes.items()):
            raise ValueError(f"{what}: the history iterates are missing or of inconsistent shapes")
        xs = [Trajectory(None if not floating else state["H"][i], state["s"][i], state["v"][i]) for i in range(m)]
        us = list(got["us"])
    history = []
    for i in range(m):
        floats = {name: float(data[f"history_{name}"][i]) for name in _HISTORY_FLOATS}
        history.append(IterationInfo(int(columns[0][i]), solver=str(columns[1][i]), xs=None if xs is None else xs[i],
                                     us=None if us is None else us[i], **floats))
    return history


__all__ = ["SOLUTION_FORMAT_VERSION", "SavedSolution", "load_solution", "save_solution"]
