"""Talos balances, then squats, in MuJoCo under receding-horizon control, pushed forwards, sideways and backwards.

``lietraj.scenarios.humanoid_balance`` builds the controller: both soles in 6d contact, the CoM tracking a reference
that the schedule's clock moves (still for the balance, down and up for the squat), the posture, torques about the
quasi-static ones, wrench cones and limits as barriers, one FDDP iteration a tick on a 0.6 s window of 30 ms knots.

    python examples/mpc_squat.py                    # balance 6 s, then squat 5 cm for 6 s
    python examples/mpc_squat.py --duration 1       # what the tests run
"""

from __future__ import annotations

import argparse

from lietraj.scenarios import humanoid_balance, humanoid_squat, run_scenario


def main(duration: float, depth: float) -> bool:
    ok = True
    for scenario in (humanoid_balance("talos", duration=duration), humanoid_squat("talos", duration=duration, depth=depth)):
        report = run_scenario(scenario)
        print("\n".join(report.lines()) + "\n")
        ok = ok and report.ok
    return ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=6.0, help="simulated seconds of each")
    parser.add_argument("--depth", type=float, default=0.05, help="how far the CoM goes down in the squat (m)")
    args = parser.parse_args()
    raise SystemExit(0 if main(args.duration, args.depth) else 1)
