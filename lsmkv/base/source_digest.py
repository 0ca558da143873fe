"""The digest that ties a compiled module to the source it was compiled from.

setup.py records it for every module it compiles (in ``lsmkv/_compiled.json``)
and build.py compares it at import, so an edited source is never shadowed by
an extension compiled from its old text. setup.py runs before the package can
be imported (an isolated build), so it loads this file by its path: it must
import nothing but the standard library.
"""

from __future__ import annotations

import hashlib
import os


def source_digest(path: str) -> str | None:
    """SHA-256 of a compiled module's source: its ``.py``, then the ``.pxd``
    of its C declarations if it has one; None if the source cannot be read."""
    declarations = path[:-3] + ".pxd"
    parts = (path, declarations) if os.path.exists(declarations) else (path,)
    digest = hashlib.sha256()
    try:
        for part in parts:
            with open(part, "rb") as source:
                digest.update(source.read())
    except OSError:
        return None
    return digest.hexdigest()
