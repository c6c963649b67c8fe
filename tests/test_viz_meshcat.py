"""Meshcat scenes, animations, the live viewer and the self-contained HTML export (lietraj.viz).

Oracles: Pinocchio's visual geometry model (placements, sizes, scales of the URDF visuals), meshcat's own
quaternion conversion, the files on disk, and for the HTML pages headless Chromium rendering them.
"""

from __future__ import annotations

import asyncio
import base64
import re
import urllib.request
from dataclasses import replace
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import tornado.websocket
import umsgpack
from meshcat.transformations import quaternion_from_matrix
from PIL import Image

from html_pages import read_page
from lietraj import load_robot
from lietraj.dynamics.kinematics.center_of_mass import center_of_mass
from lietraj.dynamics.kinematics.kinematics import body_placements
from lietraj.dynamics.model.model import Visual
from lietraj.dynamics.model.pinocchio_interop import to_pinocchio
from lietraj.dynamics.model.robots import ROBOTS, robot_data_dir
from lietraj.dynamics.lie.so3 import random as random_rotation
from lietraj.dynamics.lie.state import Trajectory
from lietraj.dynamics.model.urdf import load_urdf
from lietraj.problems import make_problem
from lietraj.viz.html import HeadlessChromium, export_html, find_chromium, save_html
from lietraj.viz.meshes import embed_dae_images, uniform_dae
from lietraj.viz.scene import RobotViewer, SetCamera, quaternions_xyzw
from pin_oracle import pin_model
from conftest import relative_error

SCENE_ROBOTS = ["talos", "solo12", "ur5"]


def lowered(viewer: RobotViewer) -> list[dict]:
    return [c.lower() for c in viewer.commands()]


def transforms(viewer: RobotViewer) -> dict[str, np.ndarray]:
    """path -> 4x4 matrix of the scene's set_transform commands (three.js stores them column major)."""
    return {c["path"]: np.array(c["matrix"]).reshape(4, 4).T for c in lowered(viewer) if c["type"] == "set_transform"}


def objects(viewer: RobotViewer) -> dict[str, dict]:
    return {c["path"]: c["object"] for c in lowered(viewer) if c["type"] == "set_object"}


def object_matrix(obj: dict) -> np.ndarray:
    return np.array(obj["object"]["matrix"]).reshape(4, 4).T


def pin_visuals(name: str):
    e = ROBOTS[name]
    root = robot_data_dir()
    urdf = str(root / e.path / e.urdf_subpath / e.urdf)
    return pin.buildGeomFromUrdf(pin_model(name), urdf, pin.GeometryType.VISUAL, package_dirs=[str(root.parent.parent)])


@pytest.mark.parametrize("name", SCENE_ROBOTS)
def test_scene_matches_pinocchio_visuals(name, rng):
    model = load_robot(name)
    viewer = RobotViewer(model)
    x = model.state_space.random(rng)
    viewer.display(x)
    T, objs = transforms(viewer), objects(viewer)

    # One node per body, its transform the body's world pose; one object per visual below it.
    pm, gm = pin_model(name), pin_visuals(name)
    pd, gd = pm.createData(), gm.createData()
    q, _ = to_pinocchio(model, x)
    pin.updateGeometryPlacements(pm, pd, gm, gd, q)
    oMi = np.array([pd.oMi[j].homogeneous for j in range(1, pm.njoints)])
    assert len(viewer.body_paths) == model.nb == len(oMi)
    err_body = max(relative_error(T[p], oMi[b]) for b, p in enumerate(viewer.body_paths))
    robot_objects = {p: o for p, o in objs.items() if p.startswith(viewer.root + "/robot/")}
    assert len(robot_objects) == len(model.visuals) == gm.ngeoms

    err_visual = 0.0
    for g, go in enumerate(gm.geometryObjects):
        v = next(v for v in model.visuals if v.name == go.name)
        path = next(p for p in robot_objects if p.endswith("/" + go.name))
        body_path = path.rsplit("/", 1)[0]
        assert body_path == (viewer.body_paths[v.body] if v.body >= 0 else viewer.root + "/robot/world")
        world = T.get(body_path, np.eye(4)) @ T[path]  # body pose, then the visual's pose in the body frame
        err_visual = max(err_visual, relative_error(world, gd.oMg[g].homogeneous))
        obj = robot_objects[path]
        if v.shape == "mesh":
            np.testing.assert_allclose(np.diag(object_matrix(obj))[:3], go.meshScale, rtol=1e-12)
            data = obj["object"]["data"] if obj["object"]["type"] == "_meshfile_object" else obj["geometries"][0]["data"]
            if v.filename.lower().endswith(".stl"):
                assert data.data == Path(v.filename).read_bytes()  # the file's bytes, untouched
            if v.rgba is not None:
                assert obj["materials"][0]["color"] == int(round(255 * v.rgba[0])) << 16 | int(round(255 * v.rgba[1])) << 8 \
                    | int(round(255 * v.rgba[2]))
        elif v.shape == "cylinder":
            geo = obj["geometries"][0]
            assert geo["radiusTop"] == geo["radiusBottom"] == pytest.approx(go.geometry.radius, rel=1e-12)
            assert geo["height"] == pytest.approx(2 * go.geometry.halfLength, rel=1e-12)
        elif v.shape == "box":
            geo = obj["geometries"][0]
            size = 2 * np.asarray(go.geometry.halfSide)
            np.testing.assert_allclose([geo["width"], geo["height"], geo["depth"]], size, rtol=1e-12)
    assert err_body < 1e-9 and err_visual < 1e-9, (err_body, err_visual)


def test_primitives_and_cylinder_axis(tmp_path):
    """A URDF with a cylinder (along its z), a box and a sphere at tilted poses: the points where the URDF puts
    the cylinder's caps and the box's corner are where the scene puts them."""
    (tmp_path / "prims.urdf").write_text("""<robot name="prims">
      <link name="base">
        <inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial>
        <visual><origin xyz="0.1 0.2 0.3" rpy="0.3 -0.4 0.5"/><geometry><cylinder radius="0.05" length="0.4"/></geometry></visual>
        <visual><origin xyz="0 0 -0.2" rpy="0 0.7 0"/><geometry><box size="0.1 0.2 0.3"/></geometry>
          <material name="red"><color rgba="1 0 0 0.5"/></material></visual>
      </link>
      <link name="arm">
        <inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial>
        <visual><geometry><sphere radius="0.07"/></geometry></visual>
      </link>
      <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><origin xyz="0 0 0.5"/>
        <axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
    </robot>""")
    model = load_urdf(tmp_path / "prims.urdf", floating_base=True)
    viewer = RobotViewer(model)
    x = model.state_space.random(7)
    viewer.display(x)
    T, objs = transforms(viewer), objects(viewer)
    H = body_placements(model, x)
    cyl, box, sphere = model.visuals
    for v in (cyl, box, sphere):
        assert v.shape in ("cylinder", "box", "sphere")

    def world_of(v: Visual, local_point_in_object: np.ndarray) -> np.ndarray:
        path = next(p for p in objs if p.endswith("/" + v.name))
        pose = T[path.rsplit("/", 1)[0]] @ T[path] @ object_matrix(objs[path])
        return (pose @ np.append(local_point_in_object, 1.0))[:3]

    def urdf_world(v: Visual, p: np.ndarray) -> np.ndarray:
        return H[v.body, :3, :3] @ (v.R @ p + v.p) + H[v.body, :3, 3]

    # three.js cylinders: caps at y = +-height/2; URDF cylinders: caps at z = +-length/2.
    geo = objs[next(p for p in objs if p.endswith(cyl.name))]["geometries"][0]
    assert geo["type"] == "CylinderGeometry" and geo["height"] == 0.4 and geo["radiusTop"] == 0.05
    for sign in (1.0, -1.0):
        np.testing.assert_allclose(world_of(cyl, [0, sign * 0.2, 0]), urdf_world(cyl, np.array([0, 0, sign * 0.2])),
                                   atol=1e-12)
    # The rim point along three.js x stays along the cylinder's x.
    np.testing.assert_allclose(world_of(cyl, [0.05, 0, 0]), urdf_world(cyl, np.array([0.05, 0, 0])), atol=1e-12)
    bobj = objs[next(p for p in objs if p.endswith(box.name))]
    bgeo = bobj["geometries"][0]
    assert (bgeo["width"], bgeo["height"], bgeo["depth"]) == (0.1, 0.2, 0.3)
    corner = np.array([0.05, 0.1, 0.15])
    np.testing.assert_allclose(world_of(box, corner), urdf_world(box, corner), atol=1e-12)
    assert bobj["materials"][0]["color"] == 0xFF0000
    assert bobj["materials"][0]["opacity"] == 0.5 and bobj["materials"][0]["transparent"]
    sobj = objs[next(p for p in objs if p.endswith(sphere.name))]
    assert sobj["geometries"][0]["radius"] == 0.07
    assert sobj["materials"][0]["color"] == 0xB2B2B8  # no colour in the URDF: the default grey (0.7, 0.7, 0.72)
    np.testing.assert_allclose(world_of(sphere, np.zeros(3)), H[1, :3, 3], atol=1e-12)


def test_quaternions_match_meshcat(rng):
    R = np.array([random_rotation(rng) for _ in range(200)])
    # Near-half-turns, where the w-based formula breaks down.
    axis = rng.standard_normal((50, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    K = np.cross(np.eye(3)[None], axis[:, None, :])
    angle = np.pi - 1e-9 * rng.random(50)
    R = np.concatenate([R, np.eye(3) + np.sin(angle)[:, None, None] * K + (1 - np.cos(angle))[:, None, None] * K @ K,
                        np.diag([1.0, -1, -1])[None], np.eye(3)[None]])
    q = quaternions_xyzw(R)
    H = np.zeros((len(R), 4, 4))
    H[:, :3, :3], H[:, 3, 3] = R, 1.0
    ref = np.array([quaternion_from_matrix(h) for h in H])[:, [1, 2, 3, 0]]  # meshcat: (w, x, y, z)
    err = np.abs(np.abs(np.sum(q * ref, axis=1)) - 1.0).max()
    assert err < 1e-12, err


def test_animation_time_base_and_tracks(rng):
    model = load_robot("solo12")
    xs = model.state_space.random_trajectory(9, rng)
    dt = 0.03
    viewer = RobotViewer(model)
    viewer.animate(xs, dt, loop=False)
    anim = lowered(viewer)[-1]
    assert anim["type"] == "set_animation" and anim["options"] == {"play": True, "repetitions": 1}
    clips = {a["path"]: a["clip"] for a in anim["animations"]}
    assert set(clips) == set(viewer.body_paths)
    H = body_placements(model, xs)
    for b, path in enumerate(viewer.body_paths):
        clip = clips[path]
        tracks = {t["name"]: t for t in clip["tracks"]}
        assert clip["fps"] == pytest.approx(1 / dt)
        times = [k["time"] / clip["fps"] for k in tracks[".position"]["keys"]]
        np.testing.assert_allclose(times, dt * np.arange(9), atol=1e-15)  # real time: knot k at k dt
        np.testing.assert_allclose([k["value"] for k in tracks[".position"]["keys"]], H[:, b, :3, 3], atol=1e-15)
        quat = np.array([k["value"] for k in tracks[".quaternion"]["keys"]])
        assert np.all(np.sum(quat[1:] * quat[:-1], axis=1) >= 0)  # consecutive keys in one hemisphere
        x, y, z, w = quat.T
        R = np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
                      2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                      2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1).reshape(-1, 3, 3)
        assert np.abs(R - H[:, b, :3, :3]).max() < 1e-12
    viewer.animate(xs, dt)
    assert lowered(viewer)[-1]["options"]["repetitions"] == float("inf")


def test_extras_ghosts_com_forces_targets(rng):
    model = load_robot("solo12")
    xs = model.state_space.random_trajectory(6, rng)
    P = rng.standard_normal((5, 4, 3))  # one per running knot
    F = 10 * rng.standard_normal((5, 4, 3))
    F[2, 1] = 0.0
    viewer = RobotViewer(model)
    viewer.animate(xs, 0.05, ghosts=(0, -1), com=True, contact_points=P, contact_forces=F, force_scale=0.01,
                   targets={"hand": [0.1, 0.2, 0.3]})
    objs, T = objects(viewer), transforms(viewer)
    root = viewer.root
    H = body_placements(model, xs)
    for k in (0, 5):
        ghost = [p for p in objs if p.startswith(f"{root}/ghosts/{k}/")]
        assert len(ghost) == len(model.visuals)
        assert all(objs[p]["materials"][0]["transparent"] for p in ghost)
        for b, name in enumerate(model.body_names):
            np.testing.assert_allclose(T[f"{root}/ghosts/{k}/{name}"], H[k, b], atol=1e-15)
    line = objs[f"{root}/com/line"]
    assert line["object"]["type"] == "Line"
    points = np.frombuffer(line["geometries"][0]["data"]["attributes"]["position"]["array"].data, np.float32)
    np.testing.assert_allclose(points.reshape(-1, 3), center_of_mass(model, xs), atol=1e-6)
    np.testing.assert_allclose(T[f"{root}/targets/hand"][:3, 3], [0.1, 0.2, 0.3])

    clips = {a["path"]: {t["name"]: np.array([k["value"] for k in t["keys"]]) for t in a["clip"]["tracks"]}
             for a in lowered(viewer)[-1]["animations"]}
    Fp, Pp = np.concatenate([F, F[-1:]]), np.concatenate([P, P[-1:]])  # the last force is held
    for c in range(4):
        shaft, head = clips[f"{root}/forces/{c}/shaft"], clips[f"{root}/forces/{c}/head"]
        length = 0.01 * np.linalg.norm(Fp[:, c], axis=1)
        np.testing.assert_allclose(shaft[".position"], Pp[:, c])
        np.testing.assert_allclose(shaft[".scale"][:, 2], np.maximum(length, 1e-6))
        x, y, z, w = shaft[".quaternion"].T
        axis_z = np.stack([2 * (x * z + y * w), 2 * (y * z - x * w), 1 - 2 * (x * x + y * y)], -1)  # R e_z
        on = length > 0
        np.testing.assert_allclose(axis_z[on], Fp[on, c] / np.linalg.norm(Fp[on, c], axis=1, keepdims=True),
                                   atol=1e-12)
        np.testing.assert_allclose(head[".position"][on], Pp[on, c] + 0.01 * Fp[on, c], atol=1e-12)
    assert clips[f"{root}/forces/1/head"][".scale"][2].max() < 1e-3  # a zero force draws no head
    np.testing.assert_allclose(clips[f"{root}/com/marker"][".position"], center_of_mass(model, xs))

    # A later display removes the extras and stops the animation.
    viewer.display(xs[2])
    assert not [p for p in objects(viewer) if not p.startswith(root + "/robot/")]
    assert lowered(viewer)[-1]["animations"] == []


def test_bad_inputs(rng, tmp_path):
    model = load_robot("solo12")
    viewer = RobotViewer(model)
    xs = model.state_space.random_trajectory(5, rng)
    with pytest.raises(ValueError, match="joint positions s must have shape"):
        viewer.animate(Trajectory(xs.H, xs.s[:, :-1], xs.v), 0.1)
    with pytest.raises(ValueError, match="velocity v must have shape"):
        viewer.animate(Trajectory(xs.H, xs.s, xs.v[:, :-1]), 0.1)
    nan = Trajectory(xs.H, xs.s.copy(), xs.v)
    nan.s[3, 2] = np.nan
    with pytest.raises(ValueError, match="at knot 3.*NaN"):
        viewer.animate(nan, 0.1)
    with pytest.raises(ValueError, match="NaN"):
        viewer.display(nan[3])
    for dt in (0.0, -0.1, np.nan, np.inf):
        with pytest.raises(ValueError, match="dt must be a positive"):
            viewer.animate(xs, dt)
    with pytest.raises(TypeError):
        viewer.display(xs)
    with pytest.raises(TypeError):
        viewer.animate(xs[0], 0.1)
    with pytest.raises(ValueError, match="no knot"):
        viewer.animate(Trajectory(xs.H[:0], xs.s[:0], xs.v[:0]), 0.1)
    with pytest.raises(ValueError, match="ghost knot 5"):
        viewer.animate(xs, 0.1, ghosts=(5,))
    with pytest.raises(ValueError, match="both contact_points and contact_forces"):
        viewer.animate(xs, 0.1, contact_points=np.zeros((5, 2, 3)))
    with pytest.raises(ValueError, match="contact_forces has shape"):
        viewer.animate(xs, 0.1, contact_points=np.zeros((5, 2, 3)), contact_forces=np.zeros((5, 3, 3)))
    with pytest.raises(ValueError, match="3 knots, expected 5 or 4"):
        viewer.animate(xs, 0.1, contact_points=np.zeros((3, 2, 3)), contact_forces=np.zeros((3, 2, 3)))
    with pytest.raises(ValueError, match="contact_forces contains NaN"):
        viewer.animate(xs, 0.1, contact_points=np.zeros((5, 2, 3)), contact_forces=np.full((5, 2, 3), np.nan))
    with pytest.raises(ValueError, match="target 'a' has shape"):
        viewer.animate(xs, 0.1, targets={"a": [1.0, 2.0]})
    # A failed call leaves the scene as it was.
    assert not [p for p in objects(viewer) if not p.startswith(viewer.root + "/robot/")]

    mesh = next(v for v in model.visuals if v.shape == "mesh")
    (tmp_path / "part.ply").write_text("ply\n")
    with pytest.raises(ValueError, match="unknown format"):
        RobotViewer(model.replace(visuals=(replace(mesh, filename=str(tmp_path / "part.ply")),)))
    with pytest.raises(ValueError, match="does not exist"):
        RobotViewer(model.replace(visuals=(replace(mesh, filename=str(tmp_path / "missing.stl")),)))
    with pytest.raises(ValueError, match="unknown shape"):
        RobotViewer(model.replace(visuals=(replace(mesh, shape="capsule"),)))


def test_dae_preparation():
    data = robot_data_dir()
    anymal = (data / "anymal_b_simple_description" / "meshes" / "base" / "anymal_base.dae").read_text()
    # Some surfaces have texture coordinates and others not: three.js would refuse to merge them.
    fixed = uniform_dae(anymal)
    assert 'semantic="TEXCOORD"' in anymal and 'semantic="TEXCOORD"' not in fixed
    assert fixed.count('semantic="LIETRAJ_UNUSED_TEXCOORD"') == anymal.count('semantic="TEXCOORD"')
    ur5 = next((data / "ur_description" / "meshes" / "ur5" / "visual").glob("*.dae")).read_text()
    assert uniform_dae(ur5) is ur5
    folder = data / "anymal_c_simple_description" / "meshes"
    base = (folder / "base.dae").read_text()
    inlined = embed_dae_images(base, str(folder))
    uri = re.search(r"<init_from>data:image/jpeg;base64,([^<]+)</init_from>", inlined)
    assert uri and base64.b64decode(uri.group(1)) == (folder / "base.jpg").read_bytes()
    assert "base.jpg</init_from>" not in inlined
    assert "base.jpg</init_from>" not in embed_dae_images(base, None) and "data:image/png" in embed_dae_images(base, None)


def test_html_page_contents(tmp_path, rng):
    model = load_robot("talos")
    xs = model.state_space.random_trajectory(4, rng)
    path = export_html(model, xs, 0.1, tmp_path / "talos.html", ghosts=(1,))
    page = path.read_text()
    assert "MeshCat.Viewer" in page and "connect()" not in page.split("lietrajReplay(viewer)")[-1]
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", page)  # nothing fetched from anywhere
    commands, meshes = read_page(path)
    viewer = RobotViewer(model)
    viewer.animate(xs, 0.1, ghosts=(1,))
    assert [c["type"] for c in commands] == [c.lower()["type"] for c in viewer.commands()]
    # Each mesh file is stored once, though the robot and its ghost both use it, and some files twice.
    files = {v.filename for v in model.visuals if v.shape == "mesh"}
    assert sorted(meshes.values()) == sorted(Path(f).read_bytes() for f in files)
    refs = [g["data"]["lietraj_mesh"] for c in commands if c["type"] == "set_object"
            for g in c["object"]["geometries"] if g["type"] == "_meshfile_geometry"]
    assert len(refs) == 2 * sum(v.shape == "mesh" for v in model.visuals) and set(refs) == set(meshes)
    # The same scene through save_html of a viewer.
    save_html(viewer, tmp_path / "again.html")
    assert [c["type"] for c in read_page(tmp_path / "again.html")[0]] == [c["type"] for c in commands]


@pytest.fixture(scope="module")
def browser():
    if find_chromium() is None:
        pytest.skip("chromium is not installed (the acceptance test renders pages in headless Chromium)")
    with HeadlessChromium(size=(800, 600)) as b:
        yield b


def image(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"), dtype=np.int32)


@pytest.mark.parametrize("robot", ["talos", "solo12"])
def test_exported_html_renders_the_solution(robot, browser, tmp_path):
    """Issue 7's acceptance: the page of a solved problem, opened offline in headless Chromium, draws the robot
    where the camera looks and moves it between two animation times."""
    example = make_problem("squat", robot=robot)
    result = example.solve()
    assert result.converged
    duration = (len(result.xs) - 1) * example.dt
    page = export_html(example.model, result.xs, example.dt, tmp_path / f"{robot}.html", targets=example.targets)
    # The same page without the robot's visuals: same camera, same background, grid and axes.
    empty = export_html(example.model.replace(visuals=()), result.xs, example.dt, tmp_path / "empty.html")

    assert browser.open(page) == {"failed": 0}
    start = image(browser.screenshot(tmp_path / "start.png", time=0.0))
    bottom = image(browser.screenshot(tmp_path / "bottom.png", time=0.5 * duration))  # the squat's lowest point
    browser.open(empty)
    background = image(browser.screenshot(tmp_path / "empty.png", time=0.0))

    assert start.shape == (600, 800, 3)
    assert background.std() > 5  # the page drew its scene (sky gradient), not a blank canvas
    robot_pixels = np.abs(start - background).sum(axis=2) > 60
    centre = robot_pixels[150:450, 200:600]
    assert centre.mean() > 0.08, centre.mean()  # the robot fills a good part of the middle of the view
    rows, cols = np.nonzero(robot_pixels)
    assert abs(rows.mean() - 300) < 100 and abs(cols.mean() - 400) < 130, (rows.mean(), cols.mean())
    # The bodies' origins, projected with the page's camera (meshcat's 75° perspective, z up), land on the robot.
    camera = next(c for c in read_page(page)[0] if c["type"] == "lietraj_camera")
    eye, target = np.array(camera["position"]), np.array(camera["target"])
    forward = (target - eye) / np.linalg.norm(target - eye)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    d = body_placements(example.model, result.xs[0])[:, :3, 3] - eye
    depth, focal = d @ forward, 300 / np.tan(np.radians(37.5))  # 600 pixels high
    col = np.round(400 + focal * (d @ right) / depth).astype(int)
    row = np.round(300 - focal * (d @ np.cross(right, forward)) / depth).astype(int)
    inside = (0 <= col) & (col < 800) & (0 <= row) & (row < 600)
    assert inside.all()
    hits = [robot_pixels[max(r - 4, 0):r + 5, max(c - 4, 0):c + 5].any() for r, c in zip(row, col)]
    assert np.mean(hits) > 0.9, np.mean(hits)
    moved = np.abs(bottom - start).sum(axis=2) > 60
    assert moved.mean() > 0.005, moved.mean()  # it moves
    assert moved[~robot_pixels & ~(np.abs(bottom - background).sum(axis=2) > 60)].mean() < 1e-3  # only the robot


def test_live_viewer_on_loopback(rng):
    model = load_robot("solo12")
    viewer = RobotViewer(model)
    url = viewer.serve(port=0)
    try:
        host, port = viewer.server_address
        assert host == "127.0.0.1" and url == f"http://127.0.0.1:{port}/static/"
        listening = []
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            if Path(table).exists():
                for line in Path(table).read_text().splitlines()[1:]:
                    local, state = line.split()[1], line.split()[3]
                    if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                        listening.append(local.rsplit(":", 1)[0])
        if Path("/proc/net/tcp").exists():
            assert listening == ["0100007F"]  # 127.0.0.1 only: not 0.0.0.0, not IPv6
        page = urllib.request.urlopen(url, timeout=10).read().decode()
        assert "new MeshCat.Viewer" in page and "viewer.connect()" in page
        assert urllib.request.urlopen(url + "main.min.js", timeout=10).status == 200

        x = model.state_space.random(rng)
        viewer.display(x)

        async def session():
            conn = await tornado.websocket.websocket_connect(f"ws://127.0.0.1:{port}/")
            received = []

            async def drain():
                while True:
                    try:
                        message = await asyncio.wait_for(conn.read_message(), 1.0)
                    except asyncio.TimeoutError:
                        return
                    received.append(umsgpack.unpackb(message))

            await drain()  # the scene, replayed to a late browser
            first = len(received)
            x.s[:] += 0.3
            viewer.display(x)  # pushed while connected
            await drain()
            conn.close()
            return received[:first], received[first:]

        scene, update = asyncio.run(session())
        assert sum(c["type"] == "set_object" for c in scene) == len(model.visuals)
        assert sum(c["type"] == "lietraj_camera" for c in scene) == 1
        H = body_placements(model, x)
        pushed = {c["path"]: np.array(c["matrix"]).reshape(4, 4).T for c in update if c["type"] == "set_transform"}
        for b, path in enumerate(viewer.body_paths):
            np.testing.assert_allclose(pushed[path], H[b], atol=1e-15)
    finally:
        viewer.close()
    assert viewer.url is None
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=5)


def test_solver_callback_animates_the_iterates():
    example = make_problem("squat", robot="solo12")

    def animated(viewer):
        clip = next(a["clip"] for a in lowered(viewer)[-1]["animations"] if a["path"] == viewer.body_paths[0])
        return np.array([k["value"] for k in clip["tracks"][0]["keys"]])

    def base_path(xs):
        return body_placements(example.model, xs)[:, 0, :3, 3]

    viewer, iterates = RobotViewer(example.model), []
    redraw = viewer.solver_callback(example.dt, min_interval=0.0)
    result = example.solve(callback=lambda info: (iterates.append(info.xs), redraw(info)))
    assert result.iterations >= 2 and len(iterates) == result.iterations
    np.testing.assert_allclose(animated(viewer), base_path(result.xs))  # the last iterate: the solution
    assert sum(isinstance(c, SetCamera) for c in viewer.commands()) == 1

    throttled = RobotViewer(example.model)  # at most one redraw an hour: the first iterate only
    example.solve(callback=throttled.solver_callback(example.dt, min_interval=3600.0))
    np.testing.assert_allclose(animated(throttled), base_path(iterates[0]))
    assert np.abs(body_placements(example.model, iterates[0]) - body_placements(example.model, result.xs)).max() > 1e-3
