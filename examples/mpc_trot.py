"""A quadruped trots forward in MuJoCo under receding-horizon control, pushed sideways three times.

``lietraj.scenarios.quadruped_trot`` builds the controller: a cyclic contact schedule of two strides (support,
a diagonal pair swinging, its touchdown impact), the CoM and the footholds moving with the commanded velocity
through the schedule's clock, friction cones and limits as barriers, one FDDP iteration a tick on a 0.5 s window
of 10 ms knots. ``run_scenario`` builds the MuJoCo plant from the robot's URDF and runs the loop; its report gives
the tick times, the real-time factor, the velocity reached, the lateral drift and whether the robot fell.

    python examples/mpc_trot.py                                  # solo12, 10 s
    python examples/mpc_trot.py --robot anymal --velocity 0.4
    python examples/mpc_trot.py --duration 1                     # what the tests run
"""

from __future__ import annotations

import argparse

from lietraj.scenarios import SCENARIOS, quadruped_trot, run_scenario


def main(robot: str, duration: float, velocity: float | None) -> bool:
    report = run_scenario(quadruped_trot(robot, velocity=velocity, duration=duration))
    print("\n".join(report.lines()))
    return report.ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="solo12", choices=SCENARIOS["trot"].robots)
    parser.add_argument("--duration", type=float, default=10.0, help="simulated seconds")
    parser.add_argument("--velocity", type=float, help="m/s (default: the robot's)")
    args = parser.parse_args()
    raise SystemExit(0 if main(args.robot, args.duration, args.velocity) else 1)
