"""The built web client, read into memory at start and served with its gzip twin.

The client is a handful of files (clients/web/dist); holding them in memory makes a page load
one dictionary lookup, and no request path ever reaches the file system.
"""

from __future__ import annotations

import hashlib
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["Asset", "StaticFiles", "load_assets"]

# The client is small; a folder past this is a mistake (a wrong MASA_WEB_ROOT), not a client.
_MAX_TOTAL_BYTES: Final = 16 * 1024 * 1024
_MAX_FILES: Final = 256


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    gzipped: bytes | None
    content_type: str
    etag: str


class StaticFiles:
    def __init__(self, assets: dict[str, Asset]) -> None:
        self._assets = assets

    def find(self, path: str) -> Asset | None:
        """The asset at a request path: ``/`` is ``index.html``; anything else is exact."""
        return self._assets.get("/index.html" if path == "/" else path)


def load_assets(root: Path) -> StaticFiles:
    """Every file under ``root`` but the ``.gz`` twins, each with its twin when there is one."""
    assets: dict[str, Asset] = {}
    total = 0
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.suffix == ".gz":
            continue
        if len(assets) >= _MAX_FILES:
            raise ValueError(f"{root}: more than {_MAX_FILES} files: not a built web client")
        body = path.read_bytes()
        twin = path.with_name(path.name + ".gz")
        gzipped = twin.read_bytes() if twin.is_file() else None
        total += len(body) + len(gzipped or b"")
        if total > _MAX_TOTAL_BYTES:
            raise ValueError(f"{root}: more than {_MAX_TOTAL_BYTES} bytes: not a built web client")
        content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if content_type.startswith("text/") or content_type.endswith("javascript"):
            content_type += "; charset=utf-8"
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        assets["/" + path.relative_to(root).as_posix()] = Asset(body, gzipped, content_type, etag)
    if "/index.html" not in assets:
        raise ValueError(f"{root}: no index.html: build the web client first (make setup)")
    return StaticFiles(assets)
