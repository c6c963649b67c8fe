"""Self-contained HTML replay of a meshcat scene: one file with meshcat's viewer, the scene commands and the
mesh files, that plays the animation offline with no server and no network.

The page embeds meshcat's ``main.min.js`` and a JSON record ``{"meshes": {key: {"text", "data"}}, "commands":
data}`` where every ``data`` is base64 of gzip (the browser inflates it with ``DecompressionStream``). The
commands are the viewer's scene (``RobotViewer.commands()``), each serialised as meshcat serialises it
(msgpack of its ``lower()``), prefixed by its length (uint32, little endian). Mesh file contents are stored
once per distinct file and referenced from the commands as ``{"lietraj_mesh": key}``, which the page script
resolves before meshcat parses the object: a robot's legs share meshes, ghosts repeat the whole robot.

``#t=SECONDS`` in the page's URL shows the animation paused at that time instead of playing it.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import itertools
import json
import os
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import tornado.websocket
import umsgpack

from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.lie.state import Trajectory
from lietraj.viz.page import VIEWER_DIST, viewer_page

if TYPE_CHECKING:
    from lietraj.viz.scene import RobotViewer

REPLAY_SCRIPT = r"""
async function lietrajInflate(b64) {
    const raw = atob(b64);
    const bytes = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
}
async function lietrajReplay(viewer) {
    const record = JSON.parse(document.getElementById("lietraj-data").textContent);
    const meshes = {};
    for (const [key, mesh] of Object.entries(record.meshes)) {
        const bytes = await lietrajInflate(mesh.data);
        meshes[key] = mesh.text ? new TextDecoder().decode(bytes) : bytes;
    }
    lietrajInstall(viewer, meshes);
    const stream = await lietrajInflate(record.commands);
    const view = new DataView(stream.buffer);
    for (let o = 0; o < stream.length;) {
        const n = view.getUint32(o, true);
        try {
            viewer.handle_command_bytearray(stream.slice(o + 4, o + 4 + n));
        } catch (e) {
            // One mesh three.js cannot load must not take the rest of the scene with it.
            console.error("lietraj: a scene command failed:", e);
            document.body.dataset.lietrajFailed = String((+document.body.dataset.lietrajFailed || 0) + 1);
        }
        o += 4 + n;
    }
    const t = lietrajSeekTime();
    if (t !== null) lietrajSeek(t);
    document.body.dataset.lietrajReady = "1";
}
lietrajReplay(viewer).catch((e) => { console.error(e); document.body.dataset.lietrajError = String(e); });
"""


def _gzip64(data: bytes) -> str:
    return base64.b64encode(gzip.compress(data, compresslevel=6, mtime=0)).decode("ascii")


def _share_meshes(obj: dict, meshes: dict[str, dict]) -> None:
    """Replace the mesh file contents in a lowered ``set_object`` record by references into ``meshes``."""
    records = [g for g in obj.get("geometries", []) if g.get("type") == "_meshfile_geometry"]
    if obj.get("object", {}).get("type") == "_meshfile_object":
        records.append(obj["object"])
    for record in records:
        data = record["data"]
        text = isinstance(data, str)
        raw = data.encode("utf-8") if text else data.data
        key = hashlib.sha1(raw).hexdigest()[:20] + ("t" if text else "b")
        if key not in meshes:
            meshes[key] = {"text": text, "data": _gzip64(raw)}
        record["data"] = {"lietraj_mesh": key}


def save_html(viewer: RobotViewer, path: str | os.PathLike, title: str | None = None) -> Path:
    """Write the viewer's current scene (robot, extras, camera, animation) to ``path`` as one self-contained
    HTML page; returns the path."""
    meshes: dict[str, dict] = {}
    stream = bytearray()
    for command in viewer.commands():
        data = command.lower()
        if data["type"] == "set_object":
            _share_meshes(data["object"], meshes)
        packed = umsgpack.packb(data)
        stream += struct.pack("<I", len(packed)) + packed
    record = json.dumps({"meshes": meshes, "commands": _gzip64(bytes(stream))}, separators=(",", ":"))
    meshcat_js = (VIEWER_DIST / "main.min.js").read_text(encoding="utf-8")
    page = viewer_page(f"<script>{meshcat_js}</script>", REPLAY_SCRIPT,
                       data=f'<script id="lietraj-data" type="application/json">{record}</script>',
                       title=title or f"lietraj: {viewer.model.name}")
    out = Path(path)
    out.write_text(page, encoding="utf-8")
    return out


def export_html(model: RobotModel, xs: Trajectory, dt: float, path: str | os.PathLike, *, title: str | None = None,
                ghosts: Sequence[int] = (), com: bool = False, contact_points=None, contact_forces=None,
                force_scale: float | None = None, targets: Mapping[str, np.ndarray] | None = None,
                loop: bool = True) -> Path:
    """Write the animation of ``xs`` (knots ``dt`` seconds apart) to one self-contained HTML page at ``path``;
    the keyword extras are those of ``RobotViewer.animate``. Returns the path."""
    from lietraj.viz.scene import RobotViewer  # meshcat loads only when a scene is built

    viewer = RobotViewer(model)
    viewer.animate(xs, dt, ghosts=ghosts, com=com, contact_points=contact_points, contact_forces=contact_forces,
                   force_scale=force_scale, targets=targets, loop=loop)
    return save_html(viewer, path, title)


def find_chromium() -> str | None:
    """The path of a Chromium or Chrome executable on PATH, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class HeadlessChromium:
    """Headless Chromium (software WebGL, no network) driven over the DevTools protocol on 127.0.0.1, to render
    exported pages to PNG: ``open`` a page and wait until its scene is replayed, ``screenshot`` it at animation
    times. Chromium's own ``--screenshot`` waits on virtual time, which stalls now and then on heavy scenes."""

    FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--enable-unsafe-swiftshader", "--use-angle=swiftshader",
             "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--hide-scrollbars", "--mute-audio", "--remote-debugging-port=0")

    def __init__(self, size: tuple[int, int] = (800, 600), chromium: str | None = None, timeout: float = 60.0):
        browser = chromium or find_chromium()
        if browser is None:
            raise FileNotFoundError("HeadlessChromium: no chromium executable found on PATH")
        self.size, self.timeout = size, timeout
        # Chromium's helper processes may still write into the profile while it is removed: what they leave is
        # left in the temporary directory rather than failing the close
        self._profile = tempfile.TemporaryDirectory(prefix="lietraj-chromium-", ignore_cleanup_errors=True)
        self._proc = subprocess.Popen([browser, *self.FLAGS, f"--user-data-dir={self._profile.name}",
                                       f"--window-size={size[0]},{size[1]}", "about:blank"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._loop = asyncio.new_event_loop()
        self._ids = itertools.count(1)
        try:
            self._loop.run_until_complete(asyncio.wait_for(self._connect(), timeout))
        except BaseException:
            self.close()
            raise

    async def _connect(self) -> None:
        active = Path(self._profile.name) / "DevToolsActivePort"
        while not (active.is_file() and len(active.read_text().split()) >= 2):
            if self._proc.poll() is not None:
                raise RuntimeError(f"HeadlessChromium: chromium exited with status {self._proc.returncode}")
            await asyncio.sleep(0.05)
        port, path = active.read_text().split()[:2]
        self._ws = await tornado.websocket.websocket_connect(f"ws://127.0.0.1:{port}{path}", max_message_size=1 << 30)
        target = await self._call("Target.createTarget", {"url": "about:blank"})
        attached = await self._call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
        self._session = attached["sessionId"]
        await self._call("Emulation.setDeviceMetricsOverride", {"width": self.size[0], "height": self.size[1],
                                                                 "deviceScaleFactor": 1, "mobile": False}, True)

    async def _call(self, method: str, params: dict | None = None, in_page: bool = False) -> dict:
        message = {"id": next(self._ids), "method": method, "params": params or {}}
        if in_page:
            message["sessionId"] = self._session
        await self._ws.write_message(json.dumps(message))
        while True:
            reply = await self._ws.read_message()
            if reply is None:
                raise RuntimeError(f"HeadlessChromium: the browser closed the connection during {method}")
            reply = json.loads(reply)
            if reply.get("id") == message["id"]:
                if "error" in reply:
                    raise RuntimeError(f"HeadlessChromium: {method} failed: {reply['error']}")
                return reply.get("result", {})

    async def _evaluate(self, expression: str):
        result = await self._call("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                       "returnByValue": True}, True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"HeadlessChromium: {expression!r} raised {result['exceptionDetails']}")
        return result["result"].get("value")

    async def _disconnect(self) -> None:
        self._ws.close()  # tornado closes through the loop it runs on
        self._ws = None

    def _run(self, coroutine):
        return self._loop.run_until_complete(asyncio.wait_for(coroutine, self.timeout))

    def open(self, html_path: str | os.PathLike) -> dict:
        """Load an exported page and wait until its scene is replayed; returns ``{"failed": n}``, the number of
        scene commands the page could not apply."""
        async def load():
            await self._call("Page.navigate", {"url": Path(html_path).resolve().as_uri()}, True)
            while True:
                state = await self._evaluate("document.body ? [document.body.dataset.lietrajReady || '', "
                                             "document.body.dataset.lietrajError || '', "
                                             "+(document.body.dataset.lietrajFailed || 0)] : ['', '', 0]")
                if state[1]:
                    raise RuntimeError(f"HeadlessChromium: {html_path}: {state[1]}")
                if state[0]:
                    return {"failed": state[2]}
                await asyncio.sleep(0.05)

        return self._run(load())

    def screenshot(self, png_path: str | os.PathLike, time: float | None = None) -> Path:
        """Write a PNG of the open page, at animation ``time`` (seconds, paused there) if given."""
        async def shoot():
            if time is not None:
                await self._evaluate(f"lietrajSeek({float(time)!r})")
            # Two frames: one in which meshcat renders the change, one that shows it.
            await self._evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            return await self._call("Page.captureScreenshot", {"format": "png"}, True)

        png = Path(png_path)
        png.write_bytes(base64.b64decode(self._run(shoot())["data"]))
        return png

    def close(self) -> None:
        """End the browser and remove its profile."""
        try:
            if getattr(self, "_ws", None) is not None:
                self._loop.run_until_complete(self._disconnect())
        finally:
            if self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            self._loop.close()
            self._profile.cleanup()

    def __enter__(self) -> HeadlessChromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def screenshot(html_path: str | os.PathLike, png_path: str | os.PathLike, time: float | None = None,
               size: tuple[int, int] = (800, 600), chromium: str | None = None) -> Path:
    """Render an exported page to a PNG with headless Chromium, at animation ``time`` (seconds) if given (else
    at the start of the playback). Returns ``png_path``."""
    with HeadlessChromium(size, chromium) as browser:
        browser.open(html_path)
        return browser.screenshot(png_path, time)
