"""Live viewer on 127.0.0.1: meshcat's page and websocket protocol served by tornado from a background thread.

A browser that connects gets the scene as it stands (the packed commands ``scene_messages()`` returns), then
every change the scene ``broadcast``s: a viewer opened in the middle of a solve shows the latest iterate.
Messages are meshcat's: msgpack of a command's ``lower()``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import tornado.httpserver
import tornado.netutil
import tornado.web
import tornado.websocket

from lietraj.viz.page import VIEWER_DIST, viewer_page


class _Socket(tornado.websocket.WebSocketHandler):
    def initialize(self, server: LiveServer) -> None:
        self.server = server

    def open(self) -> None:
        self.server.join(self)

    def on_close(self) -> None:
        self.server.clients.discard(self)


class _Page(tornado.web.RequestHandler):
    def initialize(self, page: str) -> None:
        self.page = page

    def get(self) -> None:
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.write(self.page)


class LiveServer:
    """Meshcat's page and websocket protocol served by tornado in a background thread, bound to 127.0.0.1:
    ``/static/`` is the viewer page, ``/`` the websocket that carries msgpack commands."""

    def __init__(self, scene_messages: Callable[[], list[bytes]], port: int | None):
        self.scene_messages = scene_messages
        self.clients: set[_Socket] = set()
        self.connected = threading.Event()
        self._loop = asyncio.new_event_loop()
        ports = range(7000, 7100) if port is None else [int(port)]
        sockets = None
        for p in ports:
            try:
                sockets = tornado.netutil.bind_sockets(p, address="127.0.0.1")
                break
            except OSError:
                continue
        if sockets is None:
            raise ValueError(f"serve: no free port on 127.0.0.1 among {ports[0]}..{ports[-1]}")
        self.address = sockets[0].getsockname()[:2]
        self.url = f"http://{self.address[0]}:{self.address[1]}/static/"
        page = viewer_page('<script src="main.min.js"></script>', "lietrajInstall(viewer, null);\nviewer.connect();")
        app = tornado.web.Application([
            (r"/static/", _Page, {"page": page}),
            (r"/static/(main\.min\.js)", tornado.web.StaticFileHandler, {"path": str(VIEWER_DIST)}),
            (r"/", _Socket, {"server": self}),
        ], log_function=lambda handler: None)
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._http = tornado.httpserver.HTTPServer(app)
            self._http.add_sockets(sockets)
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="lietraj-meshcat", daemon=True)
        self._thread.start()
        ready.wait()

    def join(self, client: _Socket) -> None:
        for message in self.scene_messages():
            client.write_message(message, binary=True)
        self.clients.add(client)
        self.connected.set()

    def broadcast(self, message: bytes) -> None:
        def send() -> None:
            for client in list(self.clients):
                client.write_message(message, binary=True)

        self._loop.call_soon_threadsafe(send)

    def close(self) -> None:
        def stop() -> None:
            self._http.stop()
            for client in list(self.clients):
                client.close()
            self._loop.stop()

        self._loop.call_soon_threadsafe(stop)
        self._thread.join(timeout=5.0)
        self._loop.close()
