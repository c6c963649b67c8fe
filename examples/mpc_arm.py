"""Model-predictive control of your own problem against MuJoCo: a UR5's tool follows a target moving on a circle.

Everything a user of the MPC layer writes is here, with nothing from ``lietraj.scenarios``: the running and
terminal costs of one window (the tool on the target's future positions, a posture, small torques), a ``Schedule``
with that one model at every knot, an ``update`` hook that moves the target along with the controller's clock
every tick, the controller (one FDDP iteration a tick, a deadline of one knot), and ``closed_loop`` on the MuJoCo
plant built from the UR5's own URDF, the feedback policy ``u + K (x ⊖ x̄)`` applied at 1 kHz between ticks, and a
push on the wrist half-way.

    python examples/mpc_arm.py                 # 4 s
    python examples/mpc_arm.py --duration 1    # what the tests run
    python examples/mpc_arm.py --prepare       # a real-time iteration: each window linearized before its state
"""

from __future__ import annotations

import argparse

import numpy as np

import lietraj
from lietraj.dynamics.kinematics.kinematics import frame_placement
from lietraj.mpc import MPCOptions, ModelPredictiveController, Push, Schedule, closed_loop
from lietraj.optimal_control import (
    ActionModel,
    CostSum,
    FrameTranslationResidual,
    ResidualCost,
    RobotDynamics,
    control_regularization,
    state_regularization,
)
from lietraj.sim import MujocoPlant

DT, HORIZON = 0.01, 30  # a 0.3 s window of 10 ms knots


def main(duration: float, prepare: bool = False) -> dict[str, float]:
    ur5 = lietraj.load_robot("ur5")
    space, n = ur5.state_space, ur5.n
    x0 = space.neutral()
    x0.s[:] = [0.0, -1.0, 1.0, -1.5, -1.5, 0.0]
    centre = frame_placement(ur5, x0, "tool0")[:3, 3] - [0.0, 0.1, 0.0]

    def target(t):  # a 10 cm circle in the y-z plane, once every 2 s
        phase = np.pi * np.asarray(t, dtype=float)
        return centre + 0.1 * np.stack([np.zeros_like(phase), np.cos(phase), np.sin(phase)], axis=-1)

    tool = FrameTranslationResidual(ur5, "tool0", np.tile(target(0.0), (HORIZON, 1)), nu=n)
    running = CostSum(space, n)
    running.add("tool", ResidualCost(tool), 1e4 * DT)
    running.add("posture", state_regularization(space, x0, 1.0, n), DT)
    running.add("control", control_regularization(n), 1e-3 * DT)
    end = FrameTranslationResidual(ur5, "tool0", target(HORIZON * DT), nu=0)
    terminal = CostSum(space, 0)
    terminal.add("tool", ResidualCost(end), 1e4 * DT)
    terminal.add("posture", state_regularization(space, x0, 1.0, 0), 1.0)
    model = ActionModel(RobotDynamics(ur5, DT), running, -ur5.effort_limit, ur5.effort_limit)

    def update(controller):  # every tick: the target's positions at the window's knots
        t = controller.time + DT * np.arange(HORIZON + 1)
        tool.target, end.target = target(t[:-1]), target(t[-1])

    controller = ModelPredictiveController(Schedule.constant(model, terminal), x0,
                                           MPCOptions(HORIZON, iterations=1, deadline=DT, preparation=prepare),
                                           update=update)
    plant = MujocoPlant(ur5)
    plant.reset(x0)
    log = closed_loop(controller, plant, duration, pushes=[Push(duration / 2, "wrist_3_link", [0.0, 0.0, -20.0])])
    errors = [np.linalg.norm(frame_placement(ur5, x, "tool0")[:3, 3] - target(t)) for t, x in zip(log.times, log.states)]
    stats = log.statistics()
    print(f"{stats['ticks']} ticks: median {stats['tick_median_ms']:.2f} ms, 99th percentile "
          f"{stats['tick_p99_ms']:.2f} ms, real-time factor {stats['real_time_factor']:.2f}"
          + (f"; each after a preparation of {stats['prepare_median_ms']:.2f} ms (median)" if prepare else ""))
    print(f"tool from the target after the first 0.5 s: median {1e3 * np.median(errors[50:]):.2f} mm, "
          f"largest {1e3 * np.max(errors[50:]):.2f} mm (the push at {duration / 2:g} s)")
    if log.error:
        print(f"the simulation stopped: {log.error}")
    return {"median_mm": 1e3 * float(np.median(errors[50:])), "max_mm": 1e3 * float(np.max(errors[50:])), **stats}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=4.0, help="simulated seconds")
    parser.add_argument("--prepare", action="store_true", help="prepare each tick's window while the plant runs")
    args = parser.parse_args()
    main(args.duration, args.prepare)
