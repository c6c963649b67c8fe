"""The browser page of meshcat's viewer with lietraj's script, shared by the live server and the HTML export.

``VIEWER_SCRIPT`` adds to meshcat's viewer our ``lietraj_camera`` command (camera position and target, world
frame; meshcat's stock camera orbits the world origin in a y-up frame, which frames a standing robot badly), mesh
files shared by reference (``{"lietraj_mesh": key}`` in place of a mesh file's contents, resolved from a table the
HTML export embeds) and ``#t=SECONDS`` in the URL to show one time of the animation. ``VIEWER_DIST`` is the folder
of meshcat's ``main.min.js``, which the page loads from the live server or embeds.
"""

from __future__ import annotations

import html
import importlib.util
from pathlib import Path

# Found without importing meshcat, whose package imports IPython and zmq (meshcat.viewer_assets_path()).
VIEWER_DIST = Path(importlib.util.find_spec("meshcat").origin).parent / "viewer" / "dist"

VIEWER_SCRIPT = r"""
"use strict";
// lietraj's additions to meshcat's viewer: the lietraj_camera command, meshes shared by reference
// ({lietraj_mesh: key} in place of a mesh file's contents), and #t=SECONDS to show one time of the animation.
function lietrajSetCamera(viewer, position, target) {
    // meshcat turns its z-up world into three.js's y-up frame, (x, y, z) -> (x, z, -y), in which the camera
    // and its orbit controls live; the controls orbit their target, the world origin by default.
    viewer.camera.position.set(position[0], position[2], -position[1]);
    viewer.controls.target.set(target[0], target[2], -target[1]);
    viewer.controls.update();
    viewer.set_dirty();
}
function lietrajResolveMeshes(object, meshes) {
    const resolve = (record) => {
        if (record && record.data && record.data.lietraj_mesh !== undefined) {
            record.data = meshes[record.data.lietraj_mesh];
        }
    };
    (object.geometries || []).forEach(resolve);
    resolve(object.object);
}
function lietrajInstall(viewer, meshes) {
    const handle = viewer.handle_command.bind(viewer);
    viewer.handle_command = (cmd) => {
        if (cmd.type === "lietraj_camera") {
            lietrajSetCamera(viewer, cmd.position, cmd.target);
            return;
        }
        if (cmd.type === "set_object" && meshes) {
            lietrajResolveMeshes(cmd.object, meshes);
        }
        handle(cmd);
    };
}
function lietrajSeek(t) {
    viewer.animator.pause();
    viewer.animator.seek(t);
}
function lietrajSeekTime() {
    const m = /(?:^#|&)t=([0-9.eE+-]+)/.exec(window.location.hash);
    return m ? parseFloat(m[1]) : null;
}
"""

PAGE_TEMPLATE = """<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<title>@TITLE@</title>
<style>
body { margin: 0; overflow: hidden; }
#meshcat-pane { width: 100vw; height: 100vh; overflow: hidden; }
</style>
</head>
<body>
<div id="meshcat-pane"></div>
@MESHCAT@
<script>@SCRIPT@</script>
@DATA@
<script>
var viewer = new MeshCat.Viewer(document.getElementById("meshcat-pane"));
@BOOT@
</script>
</body>
</html>
"""


def viewer_page(meshcat_tag: str, boot: str, data: str = "", title: str = "lietraj") -> str:
    """The viewer page: meshcat's viewer (``meshcat_tag``: a script element), ``VIEWER_SCRIPT``, optional
    ``data`` elements and the ``boot`` script run after the viewer ``viewer`` is made."""
    return (PAGE_TEMPLATE.replace("@TITLE@", html.escape(title)).replace("@SCRIPT@", VIEWER_SCRIPT)
            .replace("@BOOT@", boot).replace("@DATA@", data).replace("@MESHCAT@", meshcat_tag))
