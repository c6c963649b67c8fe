"""Every public function of ``lietraj.dynamics`` checks its arguments at its boundary (issue 15 item 6).

A wrong shape (``a`` of shape ``(1, nv)``), ``None``, a string, a NaN or the state of another robot raise a
TypeError (a wrong kind of object) or a ValueError (a wrong shape or value) whose message names the function, the
argument, what was expected and what was given, instead of a numba TypingError from inside a kernel. The batched
forms (Trajectory, ``(N, nv)`` arrays) keep working and their errors name the knot.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest

import lietraj
from lietraj.dynamics import (
    Contact,
    State,
    Trajectory,
    aba,
    aba_derivatives,
    aba_hessian_contraction,
    aba_second_order_derivatives,
    body_placements,
    center_of_mass,
    center_of_mass_derivatives,
    center_of_mass_jacobian,
    center_of_mass_velocity,
    contact_dynamics,
    contact_dynamics_derivatives,
    contact_hessian_contraction,
    contact_linearization,
    extended_inverse_dynamics,
    extended_inverse_dynamics_derivatives,
    forward_dynamics,
    frame_acceleration,
    frame_acceleration_derivatives,
    frame_jacobian,
    frame_placement,
    frame_placement_error,
    frame_placements,
    frame_velocity,
    frame_velocity_derivatives,
    generalized_gravity,
    hybrid_dynamics,
    hybrid_dynamics_derivatives,
    impulse_dynamics,
    impulse_dynamics_derivatives,
    impulse_hessian_contraction,
    inverse_mass_matrix,
    linearize,
    mass_matrix,
    nonlinear_effects,
    quasi_static_torques,
    rnea,
    rnea_derivatives,
    rnea_second_order_contraction,
    rnea_second_order_derivatives,
    static_equilibrium,
)

ROBOTS = ("ur5", "solo12")  # a fixed base and a floating base
N = 3  # knots of the trajectories
_MODELS = {}


def robot(name: str):
    if name not in _MODELS:
        _MODELS[name] = lietraj.load_robot(name)
    return _MODELS[name]


def frame_of(model) -> str:
    return "FL_FOOT" if model.floating_base else "tool0"


def contacts_of(model) -> list[Contact]:
    if model.floating_base:
        return [Contact(f, "3d") for f in ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")]
    return [Contact("tool0", "3d")]


def mask_of(model) -> np.ndarray:
    """Accelerations given on every other joint (and on a floating base)."""
    known = np.arange(model.nv) % 2 == 0
    if model.floating_base:
        known[:6] = True
    return known


# ---------------------------------------------------------------- the public functions and their arguments

# The vector arguments: name -> size attribute of the model.
SIZES = {"a": "nv", "tau": "nv", "a_known": "nv", "tau_known": "nv", "mu": "nv", "lam": "nv", "u": "n"}


@dataclass(frozen=True)
class Spec:
    """A public function: its name in the messages, the vector arguments it takes after ``x`` (keywords), the other
    arguments (built from the model) and what it accepts."""

    name: str
    function: Callable
    vectors: tuple[str, ...] = ()
    others: Callable = field(default=lambda model: {})
    floating_only: bool = False
    state_only: bool = False  # no Trajectory form
    reads_v: bool = True  # a NaN in x.v is reported as such (not by functions that ignore v or need v = 0)
    at_rest: bool = False  # x must have v = 0
    mask: bool = False  # takes the boolean mask known
    fext: bool = False  # takes optional per-body wrenches

    def __repr__(self) -> str:
        return self.function.__name__


def _frame(model):
    return {"frame": frame_of(model)}


def _contacts(model):
    return {"contacts": contacts_of(model)}


def _target(model):
    return {"frame": frame_of(model), "target": np.eye(4)}


SPECS = [
    Spec("rnea", rnea, ("a",), fext=True),
    Spec("nonlinear_effects", nonlinear_effects),
    Spec("generalized_gravity", generalized_gravity, reads_v=False),
    Spec("aba", aba, ("tau",), fext=True),
    Spec("aba", forward_dynamics, ("tau",), fext=True),
    Spec("aba_derivatives", aba_derivatives, ("tau",), fext=True),
    Spec("aba_second_order_derivatives", aba_second_order_derivatives, ("tau",), state_only=True),
    Spec("aba_hessian_contraction", aba_hessian_contraction, ("tau", "lam")),
    Spec("mass_matrix", mass_matrix),
    Spec("inverse_mass_matrix", inverse_mass_matrix),
    Spec("extended_inverse_dynamics", extended_inverse_dynamics, ("a",), floating_only=True),
    Spec("extended_inverse_dynamics_derivatives", extended_inverse_dynamics_derivatives, ("a",), floating_only=True),
    Spec("hybrid_dynamics", hybrid_dynamics, ("a_known", "tau_known"), mask=True, fext=True),
    Spec("hybrid_dynamics_derivatives", hybrid_dynamics_derivatives, ("a_known", "tau_known"), mask=True, fext=True),
    Spec("linearize", linearize, ("u",), fext=True),
    Spec("rnea_derivatives", rnea_derivatives, ("a",), fext=True),
    Spec("rnea_second_order_derivatives", rnea_second_order_derivatives, ("a",)),
    Spec("rnea_second_order_contraction", rnea_second_order_contraction, ("a", "mu")),
    Spec("center_of_mass", center_of_mass),
    Spec("center_of_mass_velocity", center_of_mass_velocity),
    Spec("center_of_mass_jacobian", center_of_mass_jacobian),
    Spec("center_of_mass_derivatives", center_of_mass_derivatives),
    Spec("body_placements", body_placements),
    Spec("frame_placements", frame_placements),
    Spec("frame_placement", frame_placement, others=_frame),
    Spec("frame_velocity", frame_velocity, others=_frame),
    Spec("frame_acceleration", frame_acceleration, ("a",), others=_frame),
    Spec("frame_jacobian", frame_jacobian, others=_frame),
    Spec("frame_velocity_derivatives", frame_velocity_derivatives, others=_frame),
    Spec("frame_acceleration_derivatives", frame_acceleration_derivatives, ("a",), others=_frame),
    Spec("frame_placement_error", frame_placement_error, others=_target),
    Spec("contact_dynamics", contact_dynamics, ("tau",), others=_contacts),
    Spec("contact_dynamics_derivatives", contact_dynamics_derivatives, ("tau",), others=_contacts),
    Spec("contact_linearization", contact_linearization, ("u",), others=_contacts),
    Spec("contact_hessian_contraction", contact_hessian_contraction, ("tau", "mu"), others=_contacts),
    Spec("impulse_dynamics", impulse_dynamics, others=_contacts),
    Spec("impulse_dynamics_derivatives", impulse_dynamics_derivatives, others=_contacts),
    Spec("impulse_hessian_contraction", impulse_hessian_contraction, ("mu",), others=_contacts),
    Spec("static_equilibrium", static_equilibrium, others=_contacts, state_only=True, reads_v=False, at_rest=True),
    Spec("quasi_static_torques", quasi_static_torques, others=_contacts, state_only=True, reads_v=False),
]


def test_every_public_function_is_covered():
    """The table above lists every function of ``lietraj.dynamics.__all__`` that takes a state ``x``."""
    functions = (getattr(lietraj.dynamics, name) for name in lietraj.dynamics.__all__)
    takes_a_state = {f.__name__ for f in functions if inspect.isfunction(f) and "x" in inspect.signature(f).parameters}
    assert takes_a_state - {spec.function.__name__ for spec in SPECS} == {"numerical_jacobian"}  # lie, not dynamics


def cases(filter_spec=lambda spec: True):
    """(spec, robot) pairs the spec applies to."""
    return [pytest.param(spec, name, id=f"{spec!r}-{name}") for spec in SPECS for name in ROBOTS
            if filter_spec(spec) and not (spec.floating_only and name == "ur5")]


def state(model, spec: Spec, seed: int = 0) -> State:
    x = model.state_space.random(seed, scale=0.3)
    return State(x.H, x.s, np.zeros(model.nv)) if spec.at_rest else x


def trajectory(model, seed: int = 0) -> Trajectory:
    return model.state_space.random_trajectory(N, seed, scale=0.3)


def arguments(model, spec: Spec, knots: int | None = None) -> dict:
    """Valid arguments beside ``model`` and ``x``: vectors of small numbers (one row per knot when ``knots``)."""
    rng = np.random.default_rng(1)
    lead = () if knots is None else (knots,)
    kwargs = {name: 0.1 * rng.standard_normal(lead + (getattr(model, SIZES[name]),)) for name in spec.vectors}
    if spec.mask:
        kwargs["known"] = mask_of(model)
    kwargs.update(spec.others(model))
    return kwargs


def call(spec: Spec, model, x, **kwargs):
    return spec.function(model, x, **kwargs)


def prefix(spec: Spec, model) -> str:
    return re.escape(f"{spec.name}({model.name})")


def size_of(model, name: str) -> int:
    return getattr(model, SIZES[name])


def read_index(model, spec: Spec, name: str) -> int:
    """An entry of ``name`` that the function reads (hybrid dynamics reads a_known where known, tau_known elsewhere)."""
    if name in ("a_known", "tau_known"):
        known = mask_of(model)
        return int(np.flatnonzero(known if name == "a_known" else ~known)[-1])
    return 1


# ---------------------------------------------------------------- valid inputs keep working


@pytest.mark.parametrize("spec, name", cases())
def test_valid_inputs_are_accepted(spec, name):
    model = robot(name)
    call(spec, model, state(model, spec), **arguments(model, spec))
    if not spec.state_only:
        call(spec, model, trajectory(model), **arguments(model, spec, N))


@pytest.mark.parametrize("spec, name", cases(lambda spec: not spec.at_rest))
def test_convertible_inputs_are_converted(spec, name):
    """Lists and integer arrays are numbers: converted, as before, not rejected."""
    model = robot(name)
    x = state(model, spec)
    kwargs = {k: (v.tolist() if k in SIZES else v) for k, v in arguments(model, spec).items()}
    converted = State(None if x.H is None else x.H.tolist(), x.s.tolist(), np.round(x.v).astype(int))
    call(spec, model, converted, **kwargs)


# ---------------------------------------------------------------- vector arguments


def vector_cases():
    return [pytest.param(spec, name, arg, id=f"{spec!r}-{name}-{arg}") for spec, name in
            ((p.values[0], p.values[1]) for p in cases()) for arg in spec.vectors]


@pytest.mark.parametrize("spec, name, arg", vector_cases())
def test_a_row_instead_of_a_vector_names_the_argument(spec, name, arg):
    model = robot(name)
    kwargs = arguments(model, spec)
    size = size_of(model, arg)
    kwargs[arg] = kwargs[arg][None]  # shape (1, size): the TypingError of issue 15
    with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: {arg} must have shape \({size},\), got shape "
                                         rf"\(1, {size}\)"):
        call(spec, model, state(model, spec), **kwargs)


@pytest.mark.parametrize("bad, given", [(None, "None"), ("abc", "the str 'abc'"), ({"a": 1}, "a dict")])
@pytest.mark.parametrize("spec, name, arg", vector_cases())
def test_not_an_array_of_numbers_is_a_type_error(spec, name, arg, bad, given):
    model = robot(name)
    kwargs = arguments(model, spec)
    kwargs[arg] = bad
    size = size_of(model, arg)
    with pytest.raises(TypeError, match=rf"^{prefix(spec, model)}: {arg} must be an array of numbers of shape "
                                        rf"\({size},\), got {re.escape(given)}"):
        call(spec, model, state(model, spec), **kwargs)


@pytest.mark.parametrize("spec, name, arg", vector_cases())
def test_a_wrong_size_says_what_was_expected(spec, name, arg):
    model = robot(name)
    kwargs = arguments(model, spec)
    size = size_of(model, arg)
    kwargs[arg] = np.zeros(size + 1)
    with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: {arg} must have shape \({size},\), got shape "
                                         rf"\({size + 1},\) \(.*{size} "):
        call(spec, model, state(model, spec), **kwargs)


@pytest.mark.parametrize("value", [np.nan, np.inf])
@pytest.mark.parametrize("spec, name, arg", vector_cases())
def test_a_non_finite_entry_is_named(spec, name, arg, value):
    model = robot(name)
    kwargs = arguments(model, spec)
    k = read_index(model, spec, arg)
    kwargs[arg][k] = value
    with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: .*NaN or inf: {arg}\[{k}\] = {value}$"):
        call(spec, model, state(model, spec), **kwargs)


@pytest.mark.parametrize("spec, name, arg", [p for p in vector_cases() if not p.values[0].state_only])
def test_trajectory_rows_must_match_the_knots(spec, name, arg):
    model = robot(name)
    X = trajectory(model)
    size = size_of(model, arg)
    for wrong in ((N - 1, size), (size,), (N, size, 1)):
        kwargs = arguments(model, spec, N)
        kwargs[arg] = np.zeros(wrong)
        shape = re.escape(str(wrong))
        with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: {arg} must have shape \({N}, {size}\), got "
                                             rf"shape {shape} .*at each of the N = {N} knots of the trajectory x: the "
                                             "same number of knots"):
            call(spec, model, X, **kwargs)


@pytest.mark.parametrize("spec, name, arg", [p for p in vector_cases() if not p.values[0].state_only])
def test_a_non_finite_entry_of_a_trajectory_names_the_knot(spec, name, arg):
    model = robot(name)
    kwargs = arguments(model, spec, N)
    k = read_index(model, spec, arg)
    kwargs[arg][2, k] = np.nan
    with pytest.raises(ValueError, match=rf"^{prefix(spec, model)} at knot 2: .*NaN or inf: {arg}\[2, {k}\] = nan$"):
        call(spec, model, trajectory(model), **kwargs)


# ---------------------------------------------------------------- the state


@pytest.mark.parametrize("spec, name", cases())
def test_the_state_of_another_robot_is_rejected(spec, name):
    model = robot(name)
    other = robot("solo12" if name == "ur5" else "ur5")
    x = state(other, spec)
    expected = "x.H must be None: ur5 has a fixed base" if name == "ur5" else "x.H is None (a fixed-base state) but "
    with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: {re.escape(expected)}.*another robot"):
        call(spec, model, x, **arguments(model, spec))


@pytest.mark.parametrize("spec, name", cases())
def test_a_state_of_the_wrong_layout_says_what_was_expected(spec, name):
    model = robot(name)
    x = state(model, spec)
    kwargs = arguments(model, spec)
    n, nv = model.n, model.nv
    with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: x.s must have shape \({n},\), got shape "
                                         rf"\({n - 1},\) \(the joint positions s must have shape \({n},\)"):
        call(spec, model, State(x.H, x.s[:-1], x.v), **kwargs)
    with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: x.s must have shape \({n},\), got shape "
                                         rf"\(1, {n}\)"):
        call(spec, model, State(x.H, x.s[None], x.v), **kwargs)
    if not spec.at_rest:  # static_equilibrium speaks of a state at rest
        with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: x.v must have shape \({nv},\), got shape "
                                             rf"\({nv + 1},\) \(the velocity v must have shape"):
            call(spec, model, State(x.H, x.s, np.zeros(nv + 1)), **kwargs)
    if model.floating_base:
        with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: x.H must have shape \(4, 4\), got shape "
                                             r"\(3, 4\)"):
            call(spec, model, State(x.H[:3], x.s, x.v), **kwargs)


@pytest.mark.parametrize("spec, name", cases())
def test_a_state_field_that_is_not_numbers_is_a_type_error(spec, name):
    model = robot(name)
    x = state(model, spec)
    kwargs = arguments(model, spec)
    for field_name, bad in (("s", None), ("v", None), ("s", "abc"), ("v", ["a"] * model.nv)):
        y = State(x.H, x.s, x.v)
        setattr(y, field_name, bad)
        with pytest.raises(TypeError, match=rf"^{prefix(spec, model)}: x.{field_name} must be an array of numbers of "
                                            "shape"):
            call(spec, model, y, **kwargs)


@pytest.mark.parametrize("spec, name", cases())
def test_not_a_state_is_a_type_error(spec, name):
    model = robot(name)
    x = state(model, spec)
    kwargs = arguments(model, spec)
    for bad in (None, (x.H, x.s, x.v), x.s):
        with pytest.raises(TypeError, match=rf"^{prefix(spec, model)}: .*State.*, got {type(bad).__name__}"):
            call(spec, model, bad, **kwargs)


@pytest.mark.parametrize("spec, name", cases())
def test_a_model_that_is_not_a_model_is_a_type_error(spec, name):
    model = robot(name)
    with pytest.raises(TypeError, match=rf"^{spec.name}: model must be a RobotModel"):
        call(spec, state(model, spec), state(model, spec), **arguments(model, spec))


@pytest.mark.parametrize("spec, name, field_name", [pytest.param(*p.values, f, id=f"{p.id}-{f}") for p in cases()
                                                     for f in ("s", "v") if f == "s" or p.values[0].reads_v])
def test_a_non_finite_state_is_named(spec, name, field_name):
    model = robot(name)
    x = state(model, spec)
    getattr(x, field_name)[1] = np.nan
    with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: .*NaN or inf: x.{field_name}\[1\] = nan$"):
        call(spec, model, x, **arguments(model, spec))


@pytest.mark.parametrize("spec, name", cases(lambda spec: not spec.state_only))
def test_a_trajectory_of_the_wrong_layout_names_the_field_and_the_knot(spec, name):
    model = robot(name)
    kwargs = arguments(model, spec, N)
    X = trajectory(model)
    with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: x.v must have shape \({N}, {model.nv}\), got "
                                         rf"shape \({N - 1}, {model.nv}\) .*the same number of knots"):
        call(spec, model, Trajectory(X.H, X.s, X.v[1:]), **kwargs)
    if model.floating_base:
        with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: x.H must have shape \({N}, 4, 4\), got shape "
                                             rf"\({N - 1}, 4, 4\)"):
            call(spec, model, Trajectory(X.H[1:], X.s, X.v), **kwargs)
    X.s[2, 1] = np.inf
    with pytest.raises(ValueError, match=rf"^{prefix(spec, model)} at knot 2: .*NaN or inf: x.s\[2, 1\] = inf$"):
        call(spec, model, X, **kwargs)


def test_a_state_only_function_rejects_a_trajectory():
    for spec in (s for s in SPECS if s.state_only):
        model = robot("solo12")
        with pytest.raises(TypeError, match=rf"^{prefix(spec, model)}: x must be a State .*got (a )?Trajectory"):
            call(spec, model, trajectory(model), **arguments(model, spec))


# ---------------------------------------------------------------- the other arguments


@pytest.mark.parametrize("spec, name", cases(lambda spec: spec.fext))
def test_external_wrenches_must_have_one_row_per_body(spec, name):
    model = robot(name)
    nb = model.nb
    with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: fext must have shape \({nb}, 6\), got shape "
                                         rf"\({nb}, 3\) \(the external wrenches fext"):
        call(spec, model, state(model, spec), fext=np.zeros((nb, 3)), **arguments(model, spec))
    with pytest.raises(TypeError, match=rf"^{prefix(spec, model)}: fext must be an array of numbers"):
        call(spec, model, state(model, spec), fext="abc", **arguments(model, spec))
    with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: fext must have shape \({N}, {nb}, 6\), got shape "
                                         rf"\({nb}, 6\)"):
        call(spec, model, trajectory(model), fext=np.zeros((nb, 6)), **arguments(model, spec, N))
    fext = np.zeros((nb, 6))
    fext[nb - 1, 2] = np.nan
    with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: .*NaN or inf: fext\[{nb - 1}, 2\] = nan$"):
        call(spec, model, state(model, spec), fext=fext, **arguments(model, spec))


@pytest.mark.parametrize("spec, name", cases(lambda spec: spec.mask))
def test_the_mask_known_must_be_booleans_of_shape_nv(spec, name):
    model = robot(name)
    nv = model.nv
    kwargs = arguments(model, spec)
    for bad, error, message in ((mask_of(model)[None], ValueError, rf"known must have shape \({nv},\), got shape "
                                                                   rf"\(1, {nv}\)"),
                                (mask_of(model)[1:], ValueError, rf"known must have shape \({nv},\), got shape "
                                                                 rf"\({nv - 1},\)"),
                                (np.zeros(nv), ValueError, r"known must be a boolean mask of shape"),
                                (None, TypeError, r"known must be a boolean mask of shape .*, got None"),
                                ("abc", TypeError, r"known must be a boolean mask of shape .*, got the str 'abc'")):
        kwargs["known"] = bad
        with pytest.raises(error, match=rf"^{prefix(spec, model)}: {message}"):
            call(spec, model, state(model, spec), **kwargs)


@pytest.mark.parametrize("spec, name", cases(lambda spec: "frame" in spec.others(robot("solo12"))))
def test_an_unknown_frame_names_the_function(spec, name):
    model = robot(name)
    kwargs = arguments(model, spec)
    kwargs["frame"] = "no_such_frame"
    with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: frame: model '{name}' has no frame 'no_such_frame'"):
        call(spec, model, state(model, spec), **kwargs)
    with pytest.raises(KeyError):  # as before: an unknown name is also a KeyError
        call(spec, model, state(model, spec), **kwargs)
    kwargs["frame"] = len(model.frames)
    with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: frame: .* out of range"):
        call(spec, model, state(model, spec), **kwargs)
    kwargs["frame"] = None
    with pytest.raises(TypeError, match=rf"^{prefix(spec, model)}: frame: a frame is a name or an index, got NoneType"):
        call(spec, model, state(model, spec), **kwargs)


@pytest.mark.parametrize("name", ROBOTS)
def test_a_target_that_is_not_a_pose_names_the_function(name):
    model = robot(name)
    x = model.state_space.random(0)
    frame = frame_of(model)
    for bad, error, message in ((None, TypeError, r"target must be an array of numbers of shape \(4, 4\), got None"),
                                (np.eye(3), ValueError, r"target must have shape \(4, 4\), got shape \(3, 3\)"),
                                (2 * np.eye(4), ValueError, "not orthonormal")):
        with pytest.raises(error, match=rf"^frame_placement_error\({name}\): .*{message}"):
            frame_placement_error(model, x, frame, bad)


@pytest.mark.parametrize("spec, name", cases(lambda spec: "contacts" in spec.others(robot("solo12"))))
def test_contacts_must_be_a_sequence_of_contacts(spec, name):
    model = robot(name)
    kwargs = arguments(model, spec)
    for bad in (None, contacts_of(model)[0]):
        kwargs["contacts"] = bad
        with pytest.raises((TypeError, ValueError), match=rf"^{prefix(spec, model)}: contacts must be"):
            call(spec, model, state(model, spec), **kwargs)
    kwargs["contacts"] = [Contact("no_such_frame", "3d")]
    with pytest.raises(ValueError, match=rf"^{prefix(spec, model)}: .*no_such_frame"):
        call(spec, model, state(model, spec), **kwargs)


@pytest.mark.parametrize("function, name", [(contact_dynamics, "contact_dynamics"),
                                            (contact_dynamics_derivatives, "contact_dynamics_derivatives"),
                                            (contact_linearization, "contact_linearization"),
                                            (impulse_dynamics, "impulse_dynamics")])
def test_damping_and_restitution_must_be_finite_real_numbers(function, name):
    model = robot("solo12")
    x = model.state_space.random(0, scale=0.3)
    vector = {"contact_dynamics": {"tau": np.zeros(model.nv)}, "contact_dynamics_derivatives": {"tau": np.zeros(model.nv)},
              "contact_linearization": {"u": np.zeros(model.n)}, "impulse_dynamics": {}}[name]
    kwargs = dict(vector, contacts=contacts_of(model))
    with pytest.raises(TypeError, match=rf"^{name}\(solo12\): damping must be a real number, got None"):
        function(model, x, damping=None, **kwargs)
    for bad in (-1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match=rf"^{name}\(solo12\): damping must be finite and >= 0, got"):
            function(model, x, damping=bad, **kwargs)
    if name == "impulse_dynamics":
        with pytest.raises(ValueError, match=r"^impulse_dynamics\(solo12\): restitution must be finite and in \[0, 1\]"):
            function(model, x, restitution=1.5, **kwargs)
        with pytest.raises(TypeError, match=r"^impulse_dynamics\(solo12\): restitution must be a real number"):
            function(model, x, restitution="0", **kwargs)


def test_the_issue_example_rnea_with_a_row_or_none():
    """The report of issue 15 item 6: ``rnea(model, x, a)`` with ``a`` of shape (1, nv) or None."""
    model = robot("solo12")
    x = model.state_space.random(0)
    with pytest.raises(ValueError) as row:
        rnea(model, x, np.zeros((1, model.nv)))
    assert str(row.value) == ("rnea(solo12): a must have shape (18,), got shape (1, 18) (the acceleration must have "
                              "shape (18,): nv = 18 entries, one per generalized velocity)")
    with pytest.raises(TypeError) as none:
        rnea(model, x, None)
    assert str(none.value) == ("rnea(solo12): a must be an array of numbers of shape (18,), got None (the acceleration: "
                               "nv = 18 entries, one per generalized velocity)")


@pytest.mark.parametrize("vector, finite", [([1.0, -2.0], True), ([1e200, -1e300], True), ([], True),
                                            ([1.0, np.nan], False), ([np.inf, 0.0], False), ([1e300, -np.inf], False)])
@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_the_finiteness_test_of_inputs_is_exact(vector, finite):
    """The fast test on a vector's squared norm overflows on huge finite entries: those must still pass."""
    from lietraj.dynamics._checks import all_finite

    assert all_finite(np.array(vector, dtype=float)) is finite
    assert all_finite(np.array([vector, vector], dtype=float).reshape(2, -1)) is finite
