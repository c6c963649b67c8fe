"""Reading an exported HTML page as its script does: the scene commands and the meshes it carries."""

from __future__ import annotations

import base64
import gzip
import json
import re
import struct
from pathlib import Path

import umsgpack


def read_page(path: Path) -> tuple[list[dict], dict[str, bytes]]:
    """The scene commands and the meshes of an exported page, decoded as the page script decodes them."""
    record = json.loads(re.search(r'<script id="lietraj-data" type="application/json">(.*?)</script>',
                                  Path(path).read_text(), re.S).group(1))
    stream = gzip.decompress(base64.b64decode(record["commands"]))
    commands, o = [], 0
    while o < len(stream):
        (n,) = struct.unpack_from("<I", stream, o)
        commands.append(umsgpack.unpackb(stream[o + 4:o + 4 + n]))
        o += 4 + n
    meshes = {k: gzip.decompress(base64.b64decode(m["data"])) for k, m in record["meshes"].items()}
    return commands, meshes
