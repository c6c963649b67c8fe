"""The workspace of a robot model: the work arrays its algorithms write (Pinocchio's ``Data`` to its ``Model``).

A ``RobotModel`` is read-only data that threads may share (``load_robot`` returns one cached model per name);
everything an algorithm writes while it runs lives in a ``Workspace`` made for that model and owned by whoever
computes: a dynamics object, a cost, a problem, or one call. Every dynamics function takes an optional
``workspace=``: without one it makes a fresh workspace for the call (safe from any thread, at the price of
allocating its work arrays); passing one, as Pinocchio users pass ``data``, reuses its arrays call after call. A
workspace serves one computation at a time: two threads each need their own.

Each algorithm's work arrays are a NamedTuple declared beside it (e.g. ``RneaWork``), built by a function of the
model (and of sizes, such as a contact count) on the algorithm's first call and kept, as a plain tuple in its
field order, which is how the kernels take it (see ``ModelArrays`` for why a plain tuple).
"""

from __future__ import annotations

import threading
from typing import Callable

from lietraj.dynamics.model.model import RobotModel


class KeptByIdentity:
    """Values built from tuples of immutable objects (e.g. contact sets), kept for the last ``size`` tuples by the
    identities of the objects, so that repeated calls (a solver's iterations) skip building them again. Safe to
    share between threads: a hit is one dict lookup; a miss builds outside the lock (two threads may both build, one
    value is kept) and only the insertion is serialised."""

    def __init__(self, size: int = 64):
        self._size = size
        self._kept: dict = {}
        self._lock = threading.Lock()

    def __reduce__(self):
        # pickled empty: its keys are identities of objects in this process
        return KeptByIdentity, (self._size,)

    def get(self, objects: tuple, build: Callable[[], object]) -> object:
        key = tuple(map(id, objects))
        hit = self._kept.get(key)
        if hit is not None:  # the entry holds the objects, so their ids cannot have been reused
            return hit[1]
        value = build()
        with self._lock:
            if len(self._kept) >= self._size:
                del self._kept[next(iter(self._kept))]
            self._kept[key] = (objects, value)
        return value


class Workspace:
    """Work arrays of the algorithms of one model, created on first use and sized for that model."""

    __slots__ = ("model", "_work")

    def __init__(self, model: RobotModel):
        if not isinstance(model, RobotModel):
            raise TypeError(f"Workspace: expected a RobotModel, got {type(model).__name__}")
        self.model = model
        self._work: dict = {}

    def work(self, build: Callable[..., tuple], *sizes: int) -> tuple:
        """The work arrays ``build(model, *sizes)`` (a NamedTuple of arrays), built on first use for these sizes and
        returned as a plain tuple."""
        key = (build, *sizes) if sizes else build  # on every call's path: no tuple when there are no sizes
        arrays = self._work.get(key)
        if arrays is None:
            arrays = self._work[key] = tuple(build(self.model, *sizes))
        return arrays

    def cached(self, key, build: Callable[[], object]) -> object:
        """Any other per-workspace value (e.g. result arrays of a given size), built on first use."""
        value = self._work.get(key)
        if value is None:
            value = self._work[key] = build()
        return value

    def for_objects(self, kind: str, objects: tuple, build: Callable[[], object]) -> object:
        """A value built from a tuple of immutable objects (e.g. a contact set: its tables for the kernels and its
        work arrays), kept for the last sets of each ``kind`` (``KeptByIdentity``)."""
        return self.cached(("for_objects", kind), KeptByIdentity).get(objects, build)

    def __repr__(self) -> str:
        return f"Workspace({self.model.name!r}, {len(self._work)} work sets)"


def workspace_for(model: RobotModel, workspace: Workspace | None, what: str) -> Workspace:
    """``workspace`` checked against ``model``, or a fresh one when it is None."""
    if workspace is None:
        return Workspace(model)
    if type(workspace) is not Workspace:
        raise TypeError(f"{what}({model.name}): workspace must be a Workspace, got {type(workspace).__name__}")
    if workspace.model is not model:
        raise ValueError(f"{what}({model.name}): the workspace was made for another model "
                         f"({workspace.model.name!r}); make one with Workspace(model)")
    return workspace
