"""Mesh files of URDF visuals (STL, DAE, OBJ) read once and repaired into what meshcat sends to three.js.

Meshes go to the browser as meshcat sends them (STL bytes, DAE and OBJ text) and are parsed there by three.js.
Two DAE repairs keep three.js loading every file of example-robot-data: ``uniform_dae`` (meshcat merges a DAE's
surfaces, and three.js refuses surfaces with and without texture coordinates together) and ``embed_dae_images``
(textures inlined, so that a page never fetches a file). An OBJ drawn with its own materials takes the MTL
library beside it (``mtl_library``).
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

import umsgpack

from lietraj.dynamics.model.model import Visual

MESH_FORMATS = {".stl": "stl", ".dae": "dae", ".obj": "obj"}
_UINT8_EXT = 0x12  # msgpack extension code meshcat's JavaScript decodes as a Uint8Array


class MeshFiles:
    """The contents of the mesh files of a model, read once, with the format their extension says."""

    def __init__(self):
        self._contents: dict[str, bytes] = {}

    def read(self, visual: Visual, model_name: str) -> tuple[bytes, str]:
        """``(contents, format)`` of the mesh file of ``visual``; ValueError when its format is unknown or the
        file does not exist."""
        filename = visual.filename or ""
        ext = os.path.splitext(filename)[1].lower()
        if ext not in MESH_FORMATS:
            raise ValueError(f"{model_name}: visual {visual.name!r} has a mesh {filename!r} of unknown format "
                             f"(known: {', '.join(sorted(MESH_FORMATS))})")
        if filename not in self._contents:
            if not os.path.isfile(filename):
                raise ValueError(f"{model_name}: the mesh file {filename!r} of visual {visual.name!r} does not exist")
            self._contents[filename] = Path(filename).read_bytes()
        return self._contents[filename], MESH_FORMATS[ext]


_DAE_MESH = re.compile(r"<mesh\b.*?</mesh>", re.S)
_DAE_VERTICES = re.compile(r"<vertices\b.*?</vertices>", re.S)
_DAE_SURFACES = re.compile(r"<(?:triangles|polylist|polygons|trifans|tristrips)\b(.*?)<p>", re.S)
_DAE_SEMANTIC = re.compile(r'<input\b[^>]*\bsemantic="(\w+)"')


def uniform_dae(text: str) -> str:
    """A DAE whose surfaces all give three.js the same vertex attributes. meshcat merges the surfaces of a DAE
    into one geometry, which three.js refuses when some have texture coordinates and others not; there the
    TEXCOORD inputs are renamed to a semantic the loader ignores (their offsets stay, so do the index strides)."""
    kinds = set()
    for mesh in _DAE_MESH.findall(text):
        vertices = _DAE_VERTICES.search(mesh)
        shared = set(_DAE_SEMANTIC.findall(vertices.group(0))) - {"POSITION"} if vertices else set()
        for head in _DAE_SURFACES.findall(mesh):
            kinds.add(frozenset(shared | set(_DAE_SEMANTIC.findall(head)) - {"VERTEX"}))
    if len({kind - {"TEXCOORD"} for kind in kinds}) == len(kinds):
        return text
    return text.replace('semantic="TEXCOORD"', 'semantic="LIETRAJ_UNUSED_TEXCOORD"')


# A 1x1 grey PNG: what a DAE's texture images become where they are not drawn or not found.
_BLANK_PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNYsGABAAPEAeGUtBWxAAAAAElFTkSuQmCC"
_IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
_DAE_IMAGE = re.compile(r"<init_from>\s*([^<\s]+?\.(?:png|jpe?g|tga|bmp|gif|tiff?))\s*</init_from>", re.I)


def embed_dae_images(text: str, folder: str | None) -> str:
    """The DAE with its texture images inlined as data URIs: read from ``folder`` (where the DAE is), or
    ``_BLANK_PNG`` when missing or when ``folder`` is None (meshes drawn in one colour). A page then never
    fetches a file: a file:// fetch is refused (and can stall headless Chromium), over http it would hit the
    viewer's server."""
    def inline(match: re.Match) -> str:
        name = match.group(1)
        image = None if folder is None else os.path.join(folder, name)
        kind = _IMAGE_TYPES.get(os.path.splitext(name)[1].lower())
        if image is None or kind is None or not os.path.isfile(image):
            return f"<init_from>{_BLANK_PNG}</init_from>"
        return f"<init_from>data:{kind};base64,{base64.b64encode(Path(image).read_bytes()).decode('ascii')}</init_from>"

    return _DAE_IMAGE.sub(inline, text)


def mesh_payload(contents: bytes, mesh_format: str, filename: str, textured: bool):
    """Mesh file contents as meshcat sends them: STL as a Uint8Array, DAE and OBJ as text (a DAE with uniform
    surfaces and inline images, the real ones when ``textured``)."""
    if mesh_format == "stl":
        return umsgpack.Ext(_UINT8_EXT, contents)
    text = contents.decode("utf-8", errors="replace")
    if mesh_format == "dae":
        text = embed_dae_images(uniform_dae(text), os.path.dirname(filename) if textured else None)
    return text


def mtl_library(filename: str, text: str) -> str | None:
    """The MTL library the OBJ file ``filename`` (contents ``text``) names (``mtllib``), if it exists beside it."""
    folder = os.path.dirname(filename)
    for name in re.findall(r"^mtllib\s+(\S+)", text, re.MULTILINE):
        if os.path.isfile(os.path.join(folder, name)):
            return Path(folder, name).read_text(errors="replace")
    return None
