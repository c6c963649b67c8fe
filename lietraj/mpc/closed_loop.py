"""A controller against a plant: ``closed_loop`` runs ticks of a ``ModelPredictiveController`` on a simulator.

The plant is anything with the ``Plant`` protocol (``lietraj.sim.MujocoPlant`` is the one lietraj ships; the
controller never knows which): ``state()``, ``step(u, duration)`` holding the torques ``u`` for ``duration``
seconds, ``push(body, force, torque, duration)`` and ``time``. Every tick the loop measures the state, ticks the
controller, and applies its feedback policy ``u = ū + K (x ⊖ x̄(τ))`` every ``inner_period`` seconds until the tick's
knot has passed (``Tick.dt``), then, with ``MPCOptions.preparation``, prepares the next tick (``prepare``: a
real-time iteration); ``Push`` events start at their time. It stops at ``duration`` of simulated time, when
``stop(state)`` returns a reason (a robot that fell), or when the plant fails (an exception from ``step`` or
``state``, a non-finite state: a diverging simulation): the log keeps every tick so far and ``error`` says what
happened. The loop itself never raises from inside: bad arguments raise ValueError before it starts.

Python's collector: the objects alive when the loop starts (the robot, the problem, numba's compiled code: some 200,000
in an ANYmal trot) are frozen out of its reach for the loop (``gc.freeze``) and given back at its end, unless the
caller froze objects itself. A full collection that scanned them took 88 ms inside one tick of that trot, whose
deadline is 10 ms. A loop of one's own around ``ModelPredictiveController.tick`` does well to do the same.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from lietraj.dynamics.lie.state import State

from .controller import ModelPredictiveController, Tick


class Plant(Protocol):
    """What ``closed_loop`` drives (module docstring)."""

    @property
    def time(self) -> float: ...

    def state(self) -> State: ...

    def step(self, u: np.ndarray, duration: float | None = None) -> None: ...

    def push(self, body: str, force, torque=(0.0, 0.0, 0.0), duration: float = 0.1) -> None: ...


@dataclass
class Push:
    """An external force ``force`` (N, world frame; and ``torque``, N m) on ``body`` from ``time`` for ``duration``
    seconds of simulated time."""

    time: float
    body: str
    force: Sequence[float]
    duration: float = 0.1
    torque: Sequence[float] = (0.0, 0.0, 0.0)


@dataclass(eq=False)
class ClosedLoopLog:
    """Per tick: the simulated ``times`` (s), measured ``states``, applied first ``controls``, the controller's
    ``ticks`` (status, iterations, wall time, plan); the ``wall_time`` of the whole loop, ``stopped`` (the reason a
    ``stop`` test gave, "" if none) and ``error`` (what made the plant fail, "" if nothing)."""

    times: list[float] = field(default_factory=list)
    states: list[State] = field(default_factory=list)
    controls: list[np.ndarray] = field(default_factory=list)
    ticks: list[Tick] = field(default_factory=list)
    wall_time: float = 0.0
    stopped: str = ""
    error: str = ""

    @property
    def simulated_time(self) -> float:
        return (self.times[-1] + self.ticks[-1].dt - self.times[0]) if self.ticks else 0.0

    def statistics(self, deadline: float | None = None) -> dict[str, float]:
        """Tick times (median and 99th percentile, ms; the start solve excluded) and, for a real-time iteration,
        the median preparation (``Tick.prepare_time``; NaN without one), ticks that failed or overran their
        deadline, the real-time factor (simulated over wall time: above 1 is faster than real time)."""
        solve = np.array([t.solve_time for t in self.ticks[1:]]) * 1e3
        prepare = np.array([t.prepare_time for t in self.ticks[1:] if t.prepare_time > 0]) * 1e3
        return {
            "ticks": len(self.ticks),
            "tick_median_ms": float(np.median(solve)) if solve.size else math.nan,
            "tick_p99_ms": float(np.percentile(solve, 99)) if solve.size else math.nan,
            "tick_max_ms": float(solve.max()) if solve.size else math.nan,
            "prepare_median_ms": float(np.median(prepare)) if prepare.size else math.nan,
            "overruns": sum(t.overran for t in self.ticks[1:]),
            "failed_ticks": sum(t.failed for t in self.ticks),
            "real_time_factor": self.simulated_time / self.wall_time if self.wall_time > 0 else math.nan,
        }


def closed_loop(controller: ModelPredictiveController, plant: Plant, duration: float, *,
                inner_period: float = 0.001, pushes: Sequence[Push] = (),
                stop: Callable[[State], str | None] | None = None,
                on_tick: Callable[[Tick, State], None] | None = None) -> ClosedLoopLog:
    """Run ``controller`` on ``plant`` for ``duration`` seconds of simulated time (module docstring); the first tick is
    the controller's ``start`` solve at the plant's state. ``on_tick(tick, state)`` is called after every tick (a
    progress display, a recorder)."""
    if not (isinstance(duration, (int, float)) and math.isfinite(duration) and duration > 0):
        raise ValueError(f"closed_loop: duration must be a positive number of seconds, got {duration!r}")
    if not (isinstance(inner_period, (int, float)) and math.isfinite(inner_period) and inner_period > 0):
        raise ValueError(f"closed_loop: inner_period must be a positive number of seconds, got {inner_period!r}")
    for p in pushes:
        if not isinstance(p, Push):
            raise ValueError(f"closed_loop: pushes must be Push events, got {type(p).__name__}")
    pending = sorted(pushes, key=lambda p: p.time)
    log = ClosedLoopLog()
    begin, clock = plant.time, time.perf_counter()
    frozen = gc.get_freeze_count() == 0  # else the caller manages the collector (module docstring)
    if frozen:
        gc.freeze()
    try:
        while plant.time - begin < duration - 1e-9:
            x = plant.state()
            if not (np.isfinite(x.s).all() and np.isfinite(x.v).all() and (x.H is None or np.isfinite(x.H).all())):
                log.error = f"the plant's state is not finite at t = {plant.time:.3f} s"
                break
            if stop is not None:
                reason = stop(x)
                if reason:
                    log.stopped = f"{reason} at t = {plant.time - begin:.3f} s"
                    break
            tick = controller.start(x) if not log.ticks else controller.tick(x)
            log.times.append(plant.time - begin)
            log.states.append(x)
            log.controls.append(tick.u.copy())
            log.ticks.append(tick)
            if on_tick is not None:
                on_tick(tick, x)
            _apply(tick, plant, inner_period, pending, begin)
            if controller.options.preparation:  # the next tick's window, made ready before its state is measured
                controller.prepare()
    except Exception as e:  # the plant failed (a diverging simulation): the log so far is the result
        log.error = f"{type(e).__name__}: {e}"
    finally:
        if frozen:
            gc.unfreeze()
    log.wall_time = time.perf_counter() - clock
    return log


def _apply(tick: Tick, plant: Plant, inner_period: float, pending: list[Push], begin: float) -> None:
    """The tick's policy, re-evaluated every ``inner_period``, until its knot has passed; pushes start on time."""
    start, length = plant.time, max(tick.dt, inner_period)
    while True:
        tau = plant.time - start
        if tau >= length - 1e-9:
            return
        while pending and pending[0].time <= plant.time - begin + 1e-9:
            p = pending.pop(0)
            plant.push(p.body, p.force, p.torque, p.duration)
        u = tick.control(plant.state(), tau)
        plant.step(u, min(inner_period, length - tau))
