"""The ``lietraj solve`` command as a new user meets it (issue 15, item 5): every mistake is one ``lietraj: error:``
line naming the option as typed, reported before the solve (exit 2); a solve that does not converge says so and why
(exit 1; 130 after Ctrl-C, which keeps the iterate); no Python traceback ever reaches the user."""

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

import lietraj.cli as cli
from lietraj.cli import MIN_HORIZON, main
from lietraj.optimal_control.solution_io import load_solution
from lietraj.optimal_control.solvers.solvers import Solver, SolverOptions
from lietraj.problems import make_problem
from lietraj.problems.example_problem import ExampleProblem
from lietraj.viz.plots import summary_figure

# A small, fast problem: solo12 squats over 8 knots; one iteration stops it short of convergence.
SQUAT = ["solve", "squat", "--robot", "solo12", "--horizon", "8"]
LONG_FAILURE = ("failed: regularization reached reg_max = 1e+09 (Q_uu not positive definite at knot 6); the contact "
                "Jacobian is rank deficient (redundant contacts, e.g. two 6d contacts on one body, or more point contacts "
                "than the limbs can hold); remove contacts or pass damping > 0")


@pytest.fixture
def nothing_built(monkeypatch):
    """Fail the test if the command builds a problem or starts a compiling worker."""

    def refuse(*args, **kwargs):
        raise AssertionError("the command built something before rejecting its options")

    monkeypatch.setattr(cli, "make_problem", refuse)
    monkeypatch.setattr(cli, "ColdStart", refuse)


def escaped_ctrl_c(call, *args):
    """``call(*args)``, with a KeyboardInterrupt escaping it a test failure rather than the end of the test session."""
    try:
        return call(*args)
    except KeyboardInterrupt:
        pytest.fail(f"KeyboardInterrupt escaped {call.__qualname__} (the user sees a traceback)")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """The exit code, stdout and the command's own lines on stderr (not the notice of a first run's compiling)."""
    code = escaped_ctrl_c(main, list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, "".join(line for line in err.splitlines(keepends=True) if line.startswith("lietraj:"))


def user_error(capsys, *argv: str) -> str:
    """The message of a command that must stop on a user error: exit 2, no output, one ``lietraj: error:`` line."""
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("lietraj: error: ") and err.count("\n") == 1
    return err


def with_solve(monkeypatch, change=None, also=None):
    """Make ``ExampleProblem.solve`` (what the command calls) also call ``also`` on each iteration and pass its
    result through ``change``: a failed or interrupted solve on demand."""
    solve = ExampleProblem.solve

    def patched(self, solver=None, options=None, callback=None, verbose=False):
        def both(info):
            if callback is not None:
                callback(info)
            also(info)

        result = solve(self, solver, options, both if also else callback, verbose)
        return result if change is None else change(result)

    monkeypatch.setattr(ExampleProblem, "solve", patched)


# ---- item 1: --save is checked before the solve --------------------------------------------------------------------

def test_save_to_a_missing_folder_fails_before_the_solve(capsys, tmp_path, nothing_built):
    err = user_error(capsys, *SQUAT, "--save", str(tmp_path / "missing" / "squat.npz"))
    assert f"--save {tmp_path / 'missing' / 'squat.npz'}: the folder" in err and "does not exist" in err
    assert "must end in .npz" in user_error(capsys, *SQUAT, "--save", str(tmp_path / "squat.txt"))
    (tmp_path / "folder.npz").mkdir()
    assert "is a folder" in user_error(capsys, *SQUAT, "--save", str(tmp_path / "folder.npz"))


# ---- item 2: --dt and --horizon ------------------------------------------------------------------------------------

@pytest.mark.parametrize("option, value", [("--dt", "0"), ("--dt", "-0.04"), ("--dt", "nan"), ("--dt", "inf"),
                                           ("--dt", "1e999"), ("--dt", "fast")])
def test_time_step_must_be_positive_and_finite(capsys, nothing_built, option, value):
    err = user_error(capsys, *SQUAT, option, value)
    assert err.startswith(f"lietraj: error: --dt {value}: ")
    assert "positive number of seconds" in err or "expected a finite number" in err


@pytest.mark.parametrize("argv", [["--horizon", "1"], ["--horizon", "0"], ["--horizon", "-5"],
                                  ["--horizon", str(MIN_HORIZON - 1)], ["--set", "horizon=2"]])
def test_horizon_below_the_minimum_is_rejected_naming_the_minimum(capsys, nothing_built, argv):
    err = user_error(capsys, "solve", "squat", "--robot", "solo12", *argv)
    assert err.startswith(f"lietraj: error: {argv[0]} {argv[1]}: ") and f"at least {MIN_HORIZON} knots" in err


def test_horizon_must_be_an_integer_and_given_once(capsys, nothing_built):
    assert "--horizon 8.5: expected an integer" in user_error(capsys, "solve", "squat", "--horizon", "8.5")
    assert "give it once" in user_error(capsys, *SQUAT, "--set", "horizon=9")
    err = user_error(capsys, "solve", "trot", "--horizon", "30")  # a gait's length follows from its steps
    assert "--horizon 30: problem 'trot' has no parameter 'horizon'" in err and "step_knots" in err


# ---- items 3 and 4: --set names the parameter and quotes the user's value ------------------------------------------

def test_set_of_the_wrong_type_names_the_parameter(capsys, nothing_built):
    err = user_error(capsys, *SQUAT, "--set", "depth=abc")
    assert "--set depth=abc: expected a finite number" in err and "ufunc" not in err
    assert "--set friction=(1, 2): expected a finite number" in user_error(capsys, *SQUAT, "--set", "friction=(1, 2)")
    assert "--set lift=3: expected a name" in user_error(capsys, "solve", "balance", "--robot", "solo12", "--set", "lift=3")
    err = user_error(capsys, "solve", "balance", "--robot", "solo12", "--set", "push=1,2")
    assert "--set push=1,2: expected 3 finite numbers" in err


def test_unknown_parameter_names_it_and_lists_the_accepted_ones(capsys, nothing_built):
    err = user_error(capsys, *SQUAT, "--set", "dpeth=0.02")
    assert "--set dpeth=0.02: problem 'squat' has no parameter 'dpeth'" in err
    assert "its parameters: depth, horizon, dt, com_weight, control_weight, friction" in err
    assert "--robot nao: problem 'squat' takes the robots" in user_error(capsys, "solve", "squat", "--robot", "nao")
    assert "--set robot=a1: the robot is an option of its own: --robot a1" in user_error(capsys, *SQUAT, "--set", "robot=a1")


def test_builder_rejection_names_the_parameter(capsys):
    err = user_error(capsys, *SQUAT, "--set", "depth=0.9")
    assert err.startswith("lietraj: error: --set depth=0.9: squat: depth must be in")


@pytest.mark.parametrize("value", ["-1", "0", "-0.5"])
def test_friction_error_quotes_the_users_value(capsys, nothing_built, value):
    err = user_error(capsys, *SQUAT, "--set", f"friction={value}")
    assert f"--set friction={value}: the friction coefficient must be a positive number" in err
    assert str(0.8 * float(value)) not in err  # the builder's barrier coefficient, which the user never typed


# ---- items 5 and 7: the outcome of the solve -----------------------------------------------------------------------

def test_converged_solve_prints_its_result_line_once(capsys):
    code, out, err = run(capsys, *SQUAT, "--max-iter", "100")
    assert code == 0 and err.count("lietraj: error") == 0
    assert "iter" in out and "depth_mm" in out  # the solver's log, then the metrics
    assert sum("converged after" in line or "SolverResult(" in line for line in out.splitlines()) == 1


def test_unconverged_solve_says_why_on_stderr_and_prints_its_result_once(capsys):
    code, out, err = run(capsys, *SQUAT, "--max-iter", "1")
    assert code == 1
    assert sum("max_iterations" in line for line in out.splitlines()) == 1  # log on: the solver's line was a second
    assert err.startswith("lietraj: error: the solve did not converge: AL-FDDP reached the iteration limit (max_iter = 1")


def test_failed_solve_says_so_exits_1_and_marks_its_files(capsys, tmp_path, monkeypatch):
    def failed(result):
        result.status = "failed: regularization reached reg_max = 1e+09 (Q_uu not positive definite at knot 6)"
        return result

    with_solve(monkeypatch, failed)
    save, plot = tmp_path / "squat.npz", tmp_path / "squat.png"
    code, out, err = run(capsys, *SQUAT, "--max-iter", "1", "--quiet", "--save", str(save), "--plot", str(plot))
    assert code == 1
    assert err == ("lietraj: error: the solve failed after 1 iteration(s): regularization reached reg_max = 1e+09 "
                   "(Q_uu not positive definite at knot 6)\n")
    assert "note: the files below hold a failed solve (failed: regularization" in out
    assert load_solution(save).status.startswith("failed: ") and plot.read_bytes()[:4] == b"\x89PNG"


def test_failed_solve_with_a_non_finite_trajectory_writes_no_file(capsys, tmp_path, monkeypatch):
    def diverged(result):
        xs = result.xs.copy()
        xs.v[-1] = np.nan
        result.xs, result.status = xs, "failed: the initial rollout or its cost is not finite"
        return result

    with_solve(monkeypatch, diverged)
    save = tmp_path / "squat.npz"
    code, out, err = run(capsys, *SQUAT, "--max-iter", "1", "--quiet", "--save", str(save))
    assert code == 1 and not save.exists()
    assert err.startswith("lietraj: error: the solve failed after 1 iteration(s): the initial rollout")
    assert f"its trajectory is not finite, so --save {save} was not written" in err
    assert "no metrics" in out and "saved to" not in out


# ---- item 9: one line, never a traceback ---------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [["--dt", "0"], ["--horizon", "0"], ["--max-iter", "-1"], ["--threads", "0"],
                                  ["--set", "depth=abc"], ["--set", "nope=1"], ["--set", "friction=-1"],
                                  ["--save", "/no/such/folder/x.npz"], ["--plot", "x.svg"], ["--html", "x.txt"]])
def test_every_user_error_is_one_line_with_exit_code_2(capsys, nothing_built, argv):
    err = user_error(capsys, *SQUAT, *argv)
    assert err.startswith(f"lietraj: error: {argv[0]} ")


# ---- item 6: Ctrl-C ------------------------------------------------------------------------------------------------

def interrupt_at(iteration: int, seen: list):
    def callback(info):
        seen.append(info)
        if info.iteration == iteration:
            raise KeyboardInterrupt

    return callback


def test_solver_interrupted_returns_its_current_iterate():
    example = make_problem("squat", "solo12", horizon=8)
    seen = []
    solver = Solver(example.problem, SolverOptions(max_iter=100), interrupt_at(2, seen))
    result = escaped_ctrl_c(solver.solve, example.xs0, example.us0)
    assert result.status == "interrupted" and not result.converged
    assert result.iterations == 2 and len(result.history) == 2
    assert result.xs is seen[-1].xs and result.us is seen[-1].us and result.cost == seen[-1].cost


def test_ctrl_c_during_the_solve_saves_the_iterate_and_exits_130(capsys, tmp_path, monkeypatch):
    seen = []
    with_solve(monkeypatch, also=interrupt_at(2, seen))
    save = tmp_path / "squat.npz"
    code, out, err = run(capsys, *SQUAT, "--max-iter", "100", "--save", str(save))
    assert code == 130
    assert err.startswith("lietraj: error: interrupted (Ctrl-C) after 2 iteration(s)")
    assert sum("interrupted after 2 iteration(s)" in line for line in out.splitlines()) == 1
    assert "note: the files below hold an interrupted solve" in out
    saved = load_solution(save)
    assert saved.status == "interrupted" and saved.iterations == 2
    np.testing.assert_array_equal(saved.us, seen[-1].us)
    np.testing.assert_array_equal(saved.xs.v, seen[-1].xs.v)


def test_ctrl_c_before_the_solve_exits_130_without_traceback(capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "make_problem", interrupted)
    monkeypatch.setattr(cli, "is_warm", lambda spec: True)  # no compiling worker to wait for
    code, out, err = run(capsys, *SQUAT)
    assert code == 130 and err == "lietraj: error: interrupted (Ctrl-C)\n"


# ---- item 8: the summary figure's title ----------------------------------------------------------------------------

def test_summary_title_of_a_failed_solve_fits_the_figure():
    example = make_problem("squat", "solo12", horizon=8)
    result = example.solve(options=SolverOptions(max_iter=1))
    result.status = LONG_FAILURE
    fig = summary_figure(example, result)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    (title,) = [t for t in fig.texts if t.get_text() == fig.get_suptitle()]
    box = title.get_window_extent(canvas.get_renderer())
    assert 0 <= box.x0 and box.x1 <= fig.bbox.width, "the title is clipped at the figure's edges"
    assert LONG_FAILURE in " ".join(fig.get_suptitle().split())  # wrapped at spaces, nothing lost


# ---- hard constraints ----------------------------------------------------------------------------------------------

def test_hard_constraints_log_their_violation_and_report_it(capsys):
    code, out, err = run(capsys, "solve", "balance", "--robot", "solo12", "--constraints", "hard")
    assert code == 0 and err == ""
    assert out.splitlines()[2].split()[-5:] == ["stat", "viol", "comp", "penalty", "worst"]
    assert "AL-FDDP: converged" in out
    violation = float(next(line for line in out.splitlines() if "constraint_violation:" in line).split()[-1])
    assert 0.0 <= violation <= 1e-6


def test_hard_constraints_on_a_problem_without_them_is_a_user_error(capsys, nothing_built):
    err = user_error(capsys, "solve", "talos_reach", "--constraints", "hard")
    assert "--constraints hard: problem 'talos_reach' has no parameter 'constraints'" in err


# ---- lietraj mpc ----------------------------------------------------------------------------------------------

@pytest.fixture
def no_scenario_built(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the command built a scenario before rejecting its options")

    monkeypatch.setattr(cli, "make_scenario", refuse)


@pytest.mark.parametrize("argv, named", [
    (["mpc", "trot", "--robot", "ur5"], "--robot ur5: scenario 'trot' takes the robots"),
    (["mpc", "trot", "--duration", "-1"], "--duration -1: the duration must be a positive number"),
    (["mpc", "squat", "--set", "depth=abc"], "--set depth=abc: expected a finite number"),
    (["mpc", "arm", "--set", "speed=2"], "--set speed=2: scenario 'arm' has no parameter 'speed'"),
    (["mpc", "arm", "--plot", "tick.txt"], "--plot tick.txt: the file must end in .png or .pdf"),
])
def test_mpc_mistakes_are_one_line_before_anything_is_built(capsys, no_scenario_built, argv, named):
    assert named in user_error(capsys, *argv)


def test_mpc_builder_rejections_name_the_option(capsys):
    assert "--iterations 0: MPCOptions: invalid iterations=0" in user_error(capsys, "mpc", "arm", "--iterations", "0")


def test_mpc_runs_a_scenario_and_reports_it(capsys):
    code, out, err = run(capsys, "mpc", "arm", "--duration", "1.2")
    assert code == 0 and not err
    assert "t =  1.00 s: ticks" in out and "tool error median (mm)" in out and "fell: no" in out
    assert out.count("tracks a circle") == 1


def test_list_shows_the_scenarios(capsys):
    code, out, _ = run(capsys, "list")
    assert code == 0 and "lietraj mpc SCENARIO" in out and "trot: a quadruped trots" in out


def test_mpc_says_when_the_simulation_fails_and_exits_1(capsys):
    code, out, err = run(capsys, "mpc", "arm", "--duration", "1", "--set", "push=1e9")
    assert code == 1 and "the simulation stopped: SimulationDiverged" in out
    assert err.startswith("lietraj: error: SimulationDiverged") and err.count("\n") == 1


def test_mpc_reports_a_failed_tick_as_it_happens(capsys, monkeypatch):
    from lietraj.mpc import controller as mpc_controller

    real = mpc_controller._run
    calls = {"n": 0}

    def failing_once(solver, *args):
        calls["n"] += 1
        result, overran = real(solver, *args)
        if calls["n"] == 30:
            result.status = "failed: a test's failure"
        return result, overran

    monkeypatch.setattr(mpc_controller, "_run", failing_once)
    monkeypatch.setattr(cli, "is_warm", lambda spec: True)  # no priming: the 30th solve is the run's
    code, out, _ = run(capsys, "mpc", "arm", "--duration", "0.5")
    assert code == 0 and "the tick's solve failed: a test's failure (previous plan, knot 1); its feedback policy goes on" in out
    assert "failed ticks 1" in out


def test_mpc_on_two_threads_runs_its_ticks_with_the_split_kernels(capsys, monkeypatch):
    from lietraj.dynamics.algorithms import aba_derivatives as module

    split = []
    real = module.fd_derivatives_split_kernel
    monkeypatch.setattr(module, "fd_derivatives_split_kernel", lambda *a: split.append(1) or real(*a))
    code, out, _ = run(capsys, "mpc", "arm", "--duration", "0.3", "--quiet", "--threads", "2")
    assert code == 0 and "fell: no" in out and split


def test_mpc_prepares_each_window_before_its_state_is_measured_when_asked(capsys):
    code, out, _ = run(capsys, "mpc", "arm", "--duration", "0.3", "--quiet", "--prepare")
    assert code == 0 and "each window prepared before its state is measured" in out
    assert "preparation (before each state is measured): median" in out and "failed ticks 0" in out


def test_mpc_writes_its_plot_and_page(capsys, tmp_path):
    plot, page = tmp_path / "arm.png", tmp_path / "arm.html"
    code, out, _ = run(capsys, "mpc", "arm", "--duration", "0.3", "--quiet", "--plot", str(plot), "--html", str(page))
    assert code == 0 and f"plot written to {plot}" in out and f"animation written to {page}" in out
    assert plot.stat().st_size > 20_000 and page.stat().st_size > 100_000


def test_a_first_mpc_run_compiles_before_its_loop(capsys, monkeypatch):
    primed = []
    monkeypatch.setattr(cli, "is_warm", lambda spec: False)
    monkeypatch.setattr(cli, "mark_warm", lambda spec: primed.append(str(spec)))
    code, out, _ = run(capsys, "mpc", "arm", "--duration", "0.2", "--quiet")
    assert code == 0 and "a first run: its kernels compile before the loop starts" in out
    assert primed == ["mpc arm --robot ur5 --solver fddp"]
