"""URDF loading: joint kinds, fixed-joint merging, continuous joints, and clear errors on malformed files."""

import numpy as np
import pinocchio as pin
import pytest

from lietraj import load_urdf
from lietraj.dynamics.algorithms.aba import aba
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.algorithms.rnea import rnea
from lietraj.dynamics.model.urdf import URDFError

INERTIAL = '<inertial><origin xyz="0.1 0 0.05" rpy="0.1 0.2 0.3"/><mass value="{m}"/>' \
           '<inertia ixx="0.02" iyy="0.03" izz="0.04" ixy="0.001" ixz="0" iyz="0.002"/></inertial>'


def urdf(tmp_path, body: str, name="r.urdf") -> str:
    p = tmp_path / name
    p.write_text(f'<?xml version="1.0"?><robot name="test">{body}</robot>')
    return str(p)


def link(name, mass=1.0, inertial=True):
    return f'<link name="{name}">{INERTIAL.format(m=mass) if inertial else ""}</link>'


def joint(name, jtype, parent, child, axis="0 0 1", xyz="0 0 0.3", rpy="0 0 0", limit=True):
    lim = '<limit lower="-2" upper="2" effort="10" velocity="3"/>' if limit else ""
    return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="{axis}"/>{lim}</joint>')


def mixed_robot():
    return (link("base") + link("a") + link("b") + link("tool", 0.5) + link("sensor", inertial=False) + link("c")
            + joint("j1", "revolute", "base", "a", axis="0 1 1") + joint("j2", "prismatic", "a", "b", axis="1 0 0")
            + joint("fix", "fixed", "b", "tool", rpy="0.3 0 1") + joint("fix2", "fixed", "tool", "sensor")
            + joint("j3", "continuous", "tool", "c", limit=False))


@pytest.mark.parametrize("floating", [False, True])
def test_mixed_joint_kinds_match_pinocchio(tmp_path, floating):
    path = urdf(tmp_path, mixed_robot())
    model = load_urdf(path, floating_base=floating)
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromUrdf(path)
    pd = pm.createData()
    assert model.n == 3 and model.continuous.tolist() == [False, False, True]
    assert {"tool", "sensor", "fix", "fix2", "j3"} <= {f.name for f in model.frames}
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = model.state_space.random(rng)
        a = rng.normal(size=model.nv)
        q, v = to_pinocchio(model, x)
        np.testing.assert_allclose(rnea(model, x, a), pin.rnea(pm, pd, q, v, a), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(aba(model, x, a), pin.aba(pm, pd, q, v, a), rtol=1e-10, atol=1e-10)


def test_floating_joint_in_urdf_makes_a_floating_base(tmp_path):
    body = ('<link name="world"/>' + link("base") + link("a")
            + '<joint name="float" type="floating"><parent link="world"/><child link="base"/></joint>'
            + joint("j1", "revolute", "base", "a"))
    model = load_urdf(urdf(tmp_path, body))
    assert model.floating_base and model.n == 1 and model.body_names[0] == "base"


@pytest.mark.parametrize("body, message", [
    (link("base") + link("a") + joint("j", "planar", "base", "a"), "joint 'j': unsupported joint type 'planar'"),
    (link("base") + link("a") + joint("j", "revolute", "base", "nowhere"), "joint 'j': child link 'nowhere' is not defined"),
    (link("base") + link("a") + joint("j", "revolute", "base", "a") + joint("k", "revolute", "base", "a"),
     "link 'a' already has parent joint"),
    (link("a") + link("b") + joint("j", "revolute", "a", "b") + joint("k", "revolute", "b", "a"), "loop"),
    (link("base") + link("a") + link("b"), "several root links"),
    (link("base") + link("a", mass="nan") + joint("j", "revolute", "base", "a"), "link 'a' <inertial>: contains NaN"),
    (link("base") + link("a", mass=-1) + joint("j", "revolute", "base", "a"), "link 'a' <inertial>: negative mass"),
    (link("base") + '<link name="a"><inertial><mass value="1"/></inertial></link>' + joint("j", "revolute", "base", "a"),
     "link 'a' <inertial>: missing <inertia>"),
    (link("base") + link("a") + joint("j", "revolute", "base", "a", axis="0 0 0"), "joint 'j': the axis"),
    (link("base") + link("a") + joint("j", "revolute", "base", "a", limit=False), "joint 'j': a revolute joint needs a <limit>"),
    (link("base") + link("a") + joint("j", "revolute", "base", "a", xyz="0 abc 0"), "bad number"),
    (link("base") + link("a") + joint("j", "fixed", "base", "a"), "no moving joint"),
    ('<link name="base"', "not well-formed XML"),
])
def test_malformed_urdf_names_the_element(tmp_path, body, message):
    with pytest.raises(URDFError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_urdf(urdf(tmp_path, body))


def test_non_psd_inertia_is_rejected(tmp_path):
    bad = ('<link name="a"><inertial><mass value="1"/>'
           '<inertia ixx="1" iyy="1" izz="1" ixy="5" ixz="0" iyz="0"/></inertial></link>')
    with pytest.raises(URDFError, match="link 'a' <inertial>: the inertia matrix is not positive semi-definite"):
        load_urdf(urdf(tmp_path, link("base") + bad + joint("j", "revolute", "base", "a")))


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="URDF file not found"):
        load_urdf(tmp_path / "nope.urdf")


def test_massless_moving_link_warns_and_aba_reports_it(tmp_path):
    body = link("base") + link("a", inertial=False) + joint("j", "revolute", "base", "a")
    with pytest.warns(UserWarning, match=r"joints \['j'\] move no mass"):
        model = load_urdf(urdf(tmp_path, body))
    with pytest.raises(ValueError, match="articulated inertia is not positive"):
        aba(model, model.state_space.neutral(), np.zeros(1))


def test_limit_without_lower_upper_is_zero_as_in_the_specification(tmp_path):
    body = (link("base") + link("a") + '<joint name="j" type="revolute"><parent link="base"/><child link="a"/>'
            '<axis xyz="0 0 1"/><limit effort="10" velocity="3"/></joint>')
    path = urdf(tmp_path, body)
    model, pm = load_urdf(path), pin.buildModelFromUrdf(path)
    assert model.lower_limit.tolist() == [0.0] == pm.lowerPositionLimit.tolist()
    assert model.upper_limit.tolist() == [0.0] == pm.upperPositionLimit.tolist()


@pytest.mark.parametrize("prefix", ["package://", "package:///"])
def test_package_mesh_paths_resolve_with_two_or_three_slashes(tmp_path, prefix):
    from lietraj.dynamics.model.urdf import resolve_mesh_path

    mesh = tmp_path / "share" / "pkg" / "meshes" / "m.stl"
    mesh.parent.mkdir(parents=True)
    mesh.write_text("solid m\nendsolid m\n")
    found = resolve_mesh_path(prefix + "pkg/meshes/m.stl", tmp_path, [tmp_path / "share"])
    assert found == str(mesh)


def test_non_psd_link_inertia_merged_into_a_psd_body_only_warns(tmp_path):
    tiny = ('<link name="antenna"><inertial><mass value="1e-6"/>'
            '<inertia ixx="2e-8" iyy="3e-8" izz="4e-8" ixy="6e-8" ixz="0" iyz="0"/></inertial></link>')
    body = (link("base") + link("a") + tiny + joint("j", "revolute", "base", "a")
            + joint("f", "fixed", "a", "antenna"))
    with pytest.warns(UserWarning, match=r"link\(s\) \['antenna'\] is not positive semi-definite"):
        model = load_urdf(urdf(tmp_path, body))
    assert np.linalg.eigvalsh(model.inertia[0]).min() > 0
