"""The closed-loop scenarios against MuJoCo, short: an arm tracks its circle through a push, Talos balances through
a push, solo12 trots at its commanded velocity; each report says what it measured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lietraj.scenarios import arm_tracking, quadruped_trot, run_scenario
from lietraj.scenarios.balance import humanoid_balance

ROOT = Path(__file__).resolve().parents[1]


def test_an_arm_tracks_a_moving_target_through_a_push():
    report = run_scenario(arm_tracking("ur5", duration=1.5, push=20.0, settle=0.5))
    assert report.ok and report.statistics["ticks"] == 150 and report.statistics["failed_ticks"] == 0
    assert report.tracking["tool error median (mm)"] < 2.0 and report.tracking["tool error max (mm)"] < 10.0
    assert any("tool error" in line for line in report.lines())


@pytest.mark.parametrize("robot", ["talos", "g1"])
def test_a_humanoid_balances_through_a_push(robot):
    report = run_scenario(humanoid_balance(robot, duration=1.2))
    assert report.ok, report.lines()
    assert report.tracking["CoM error max (mm)"] < 20.0


def test_solo12_trots_at_its_commanded_velocity():
    report = run_scenario(quadruped_trot("solo12", duration=1.5))
    assert report.ok, report.lines()
    assert report.tracking["forward velocity (m/s)"] == pytest.approx(0.2, abs=0.05)
    assert abs(report.tracking["lateral drift at the end (cm)"]) < 3.0


def test_solo12_trots_with_a_real_time_iteration():
    scenario = quadruped_trot("solo12", duration=1.5)
    scenario.controller.options.preparation = True
    report = run_scenario(scenario)
    assert report.ok, report.lines()
    assert report.statistics["prepare_median_ms"] > 0 and report.statistics["failed_ticks"] == 0
    assert report.tracking["forward velocity (m/s)"] == pytest.approx(0.2, abs=0.05)


@pytest.mark.parametrize("script, options, expected", [
    ("mpc_arm.py", [], "tool from the target after the first 0.5 s"),
    ("mpc_arm.py", ["--prepare"], "after a preparation of"),
    ("mpc_squat.py", [], "talos squats 5 cm every 2 s"),
    ("mpc_trot.py", [], "forward velocity (m/s)"),
])
def test_the_examples_run(tmp_path, script, options, expected):
    """Each closed-loop example, 1 s of it, in a fresh process with the source tree on the path."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    run = subprocess.run([sys.executable, str(ROOT / "examples" / script), "--duration", "1", *options], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert expected in run.stdout and "fell: yes" not in run.stdout and "stopped" not in run.stdout


def test_a_diverging_simulation_ends_the_run_with_the_log_so_far(capsys):
    report = run_scenario(arm_tracking("ur5", duration=1.0, push=1e9))
    assert not report.ok and report.log.error.startswith("SimulationDiverged: MuJoCo simulation of ur5 diverged")
    assert 0 < len(report.log.ticks) < 100 and any("the simulation stopped" in line for line in report.lines())


@pytest.mark.parametrize("build, bad, named", [
    (quadruped_trot, {"velocity": float("nan")}, "velocity must be a finite number"),
    (quadruped_trot, {"swing": 0}, "swing must be a positive integer"),
    (quadruped_trot, {"push": -1.0}, "push must be a force of 0 N or more"),
    (humanoid_balance, {"period": 0.0}, "period must be a finite positive number"),
    (humanoid_balance, {"depth": -0.1}, "depth must be 0 or more"),
    (arm_tracking, {"radius": float("inf")}, "radius must be a finite positive number"),
    (arm_tracking, {"horizon": 2.5}, "horizon must be a positive integer"),
])
def test_a_scenario_rejects_bad_parameters_naming_them(build, bad, named):
    with pytest.raises(ValueError, match=named):
        build(**bad)
