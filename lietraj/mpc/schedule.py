"""What a receding horizon walks along: a ``Schedule`` of phases, each a run of knots of one ``ActionModel``.

A controller solves, at tick ``t`` (the ``t``-th knot of the schedule), the window of knots ``t .. t + T − 1``. A
contact schedule is a sequence of phases (a stance, a swing, a touchdown impact: Crocoddyl's action models one per
knot, here one model per phase, whose knots the problem evaluates in one batched call); a cyclic schedule repeats
its phases (a gait), an acyclic one holds its last phase once it reaches it (a balance, a reach held at its end).
Moving the window by one knot (``Problem.shift``) hands the problem the model of knot ``t + T``: no model is built
while the controller runs.

Per-knot references (a swing foot's path, a CoM path) live on a phase, not on its model: ``Phase.references`` lists
``(residual, attribute, values)``. ``values`` is an array with one row per knot of the phase (when the window covers
the phase's knots ``a .. b − 1`` the residual's attribute is set to ``values[a:b]``, a view, before the solve), or a
function of the schedule's times (seconds) of the covered knots returning their rows: a reference that moves on from
cycle to cycle (footholds that advance with a commanded velocity). The residual's object is shared by every knot of
the phase, so a phase with references may appear only once in a window: a cycle must then be at least
``T + knots − 1`` knots long (``Schedule.window`` says so when it is not; build two strides of distinct models for a
short gait).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lietraj.optimal_control.constraints import ConstraintSet
from lietraj.optimal_control.costs.costs import CostModel
from lietraj.optimal_control.problem import ActionModel


@dataclass(eq=False)
class Phase:
    """``knots`` knots of ``model``; ``references``: ``(residual, attribute, values)`` whose ``values`` have one row
    per knot (a ``Trajectory`` of ``knots`` states for a ``StateResidual``'s ``reference``) or are a function of the
    covered knots' times, set to the knots a window covers (module docstring); ``name`` labels logs and errors."""

    model: ActionModel
    knots: int
    references: Sequence[tuple[object, str, object]] = ()
    name: str = ""

    def __post_init__(self):
        if not isinstance(self.model, ActionModel):
            raise ValueError(f"Phase {self.name!r}: model must be an ActionModel, got {type(self.model).__name__}")
        if isinstance(self.knots, bool) or not isinstance(self.knots, (int, np.integer)) or self.knots < 1:
            raise ValueError(f"Phase {self.name!r}: knots must be a positive integer, got {self.knots!r}")
        self.references = tuple(self.references)
        for item in self.references:
            if len(item) != 3 or not isinstance(item[1], str) or not hasattr(item[0], item[1]):
                raise ValueError(f"Phase {self.name!r}: a reference is (residual, attribute name, values) with an "
                                 f"attribute the residual has, got {item!r}")
            if not callable(item[2]) and len(item[2]) != self.knots:
                raise ValueError(f"Phase {self.name!r}: the values of {type(item[0]).__name__}.{item[1]} have "
                                 f"{len(item[2])} rows for {self.knots} knots")


@dataclass(eq=False, frozen=True)
class Segment:
    """The knots ``offset .. offset + count − 1`` of ``phase`` at the window's knots ``start .. start + count − 1``
    (frozen: a cyclic schedule hands the same segments to every pass through a window)."""

    phase: Phase
    offset: int
    start: int
    count: int


class Schedule:
    """Phases in order (module docstring), their terminal cost and terminal constraints (of the problem every window
    solves), ``cyclic``: repeat them forever, else hold the last phase's model after the end. The phases' models
    share one state space and control size (``Problem`` checks them)."""

    def __init__(self, phases: Sequence[Phase], terminal: CostModel, cyclic: bool = False,
                 terminal_constraints: ConstraintSet | None = None):
        phases = list(phases)
        if not phases or not all(isinstance(p, Phase) for p in phases):
            raise ValueError("Schedule: phases must be a non-empty sequence of Phase")
        if not isinstance(terminal, CostModel):
            raise ValueError(f"Schedule: terminal must be a CostModel, got {type(terminal).__name__}")
        self.phases, self.terminal, self.cyclic = phases, terminal, bool(cyclic)
        self.terminal_constraints = terminal_constraints
        self.starts = np.cumsum([0] + [p.knots for p in phases])
        self.length = int(self.starts[-1])  # the knots of one pass (one cycle)
        steps = np.concatenate([np.full(p.knots, float(p.model.dynamics.dt)) for p in phases])
        self._clock = np.concatenate([[0.0], np.cumsum(steps)])  # the time at each knot of one pass, and at its end
        self._rows: dict[tuple[int, int], tuple[int, np.ndarray]] = {}  # (phase, reference) -> (pass, rows)
        # a cyclic schedule's windows repeat with its passes: (first knot within the pass, T) -> segments
        self._windows: dict[tuple[int, int], tuple[Segment, ...]] = {}
        # (id(residual), attribute) -> (the pass rows it was set from, first row, stop, the residual (kept alive: its id
        # names no other object), the array it then held)
        self._set_from: dict[tuple[int, str], tuple] = {}

    @classmethod
    def constant(cls, model: ActionModel, terminal: CostModel, terminal_constraints: ConstraintSet | None = None,
                 name: str = "") -> Schedule:
        """One model at every knot (a reach, a balance): the window is the same problem at every tick."""
        return cls([Phase(model, 1, name=name)], terminal, cyclic=False, terminal_constraints=terminal_constraints)

    def __repr__(self) -> str:
        return (f"Schedule({len(self.phases)} phases, {self.length} knots{', cyclic' if self.cyclic else ''}: "
                + ", ".join(f"{p.name or 'phase'}×{p.knots}" for p in self.phases) + ")")

    def locate(self, knot: int) -> tuple[int, int]:
        """``(phase index, offset in it)`` of the schedule's knot ``knot`` (≥ 0); past the end of an acyclic schedule
        the last phase with an offset past its knots (its model holds, its references repeat their last row)."""
        if knot < 0:
            raise ValueError(f"Schedule: knot must be >= 0, got {knot}")
        if self.cyclic:
            knot %= self.length
        i = min(int(np.searchsorted(self.starts, knot, side="right")) - 1, len(self.phases) - 1)
        return i, knot - int(self.starts[i])

    def times(self, knots) -> np.ndarray:
        """The schedule's time (s) at each of the ``knots`` (the sum of the ``dt`` of the knots before it; an acyclic
        schedule's last knot repeats after its end)."""
        knots = np.asarray(knots, dtype=np.int64)
        if self.cyclic:
            cycles, within = np.divmod(knots, self.length)
            return cycles * self._clock[-1] + self._clock[within]
        past = np.maximum(knots - (self.length - 1), 0)
        return self._clock[np.minimum(knots, self.length - 1)] + past * float(self.phases[-1].model.dynamics.dt)

    def model(self, knot: int) -> ActionModel:
        """The running model of the schedule's knot ``knot``."""
        return self.phases[self.locate(knot)[0]].model

    def window(self, first: int, T: int) -> tuple[Segment, ...]:
        """The segments of the window of ``T`` knots from the schedule's knot ``first``, in order; ValueError when a
        phase with references would cover two parts of it (module docstring). A cyclic schedule's windows are kept by
        their place in the pass: a controller's tick finds its window without building it again."""
        key = (first % self.length, T) if self.cyclic and first >= 0 else None  # a knot < 0: locate's error
        segments = self._windows.get(key) if key is not None else None
        if segments is None:
            segments = self._build_window(first, T)
            if key is not None:
                self._windows[key] = segments
        return segments

    def _build_window(self, first: int, T: int) -> tuple[Segment, ...]:
        segments: list[Segment] = []
        k = 0
        while k < T:
            i, offset = self.locate(first + k)
            phase = self.phases[i]
            # a phase's knots up to its end, or to the window's when an acyclic schedule holds its last phase
            held = not self.cyclic and i == len(self.phases) - 1
            count = T - k if held else min(phase.knots - offset, T - k)
            last = segments[-1] if segments else None
            if last is not None and last.phase is phase and last.offset + last.count == offset:
                segments[-1] = Segment(phase, last.offset, last.start, last.count + count)
            else:
                segments.append(Segment(phase, offset, k, count))
            k += count
        seen: set[int] = set()
        for seg in segments:
            if seg.phase.references and id(seg.phase) in seen:
                raise ValueError(f"Schedule: phase {seg.phase.name!r} (with per-knot references) appears twice in a "
                                 f"window of {T} knots: make the cycle at least {T + seg.phase.knots - 1} knots long "
                                 "(e.g. two strides of distinct models)")
            seen.add(id(seg.phase))
        return tuple(segments)

    def apply_references(self, segments: Sequence[Segment], first: int) -> None:
        """Set every reference of the window's phases (the window starting at the schedule's knot ``first``) to the
        rows its knots cover (past the end of an acyclic schedule the last row holds). A function of time is called
        once per pass through its phase, at all the phase's knots, and the window takes its rows from that: a knot's
        time, and so its row, does not change while the window moves over it; a residual that still holds the rows
        of the same pass it was given at the last call keeps them (the phases inside the window, all but its first
        and last)."""
        for seg in segments:
            stop = seg.offset + seg.count
            for j, (residual, attribute, values) in enumerate(seg.phase.references):
                if callable(values) and stop <= seg.phase.knots:
                    self._set_pass_rows(residual, attribute, self._pass_rows(seg, j, first), seg.offset, stop)
                elif callable(values):
                    setattr(residual, attribute, values(self.times(first + seg.start + np.arange(seg.count))))
                elif stop <= seg.phase.knots:
                    setattr(residual, attribute, values[seg.offset:stop])
                else:  # past the end of an acyclic schedule: the last row holds
                    rows = np.minimum(np.arange(seg.offset, stop), seg.phase.knots - 1)
                    setattr(residual, attribute, values[rows])

    def _set_pass_rows(self, residual, attribute: str, rows: np.ndarray, a: int, b: int) -> None:
        """``residual.attribute = rows[a:b]``, unless the residual holds what that set it to last time (a pass's rows
        are the schedule's own, never changed: the setter's copy and check are not repeated)."""
        key = (id(residual), attribute)
        last = self._set_from.get(key)
        if last is not None and last[0] is rows and last[1] == a and last[2] == b \
                and getattr(residual, attribute) is last[4]:
            return
        setattr(residual, attribute, rows[a:b])
        self._set_from[key] = (rows, a, b, residual, getattr(residual, attribute))

    def _pass_rows(self, seg: Segment, j: int, first: int) -> np.ndarray:
        """The rows of ``seg.phase``'s ``j``-th reference (a function of time) at every knot of the pass through the
        phase that ``seg`` covers part of, computed on the first call for that pass."""
        begin = first + seg.start - seg.offset  # the schedule's knot where this pass through the phase begins
        key = (id(seg.phase), j)
        kept = self._rows.get(key)
        if kept is None or kept[0] != begin:
            values = seg.phase.references[j][2]
            kept = self._rows[key] = (begin, np.asarray(values(self.times(begin + np.arange(seg.phase.knots)))))
        return kept[1]
