"""Names of the files in an lsmkv directory, and parsing them back.

``NNNNNN.log`` write-ahead logs, ``NNNNNN.sst`` tables, ``MANIFEST-NNNNNN``
manifests, ``CURRENT`` (names the live manifest), ``LOCK`` (held by the one
writer process). Numbers come from one counter (the manifest's next file
number), so a log and a table never share a number. Names ending in ``.tmp``
are files being written; a crash can leave them behind and open removes them.

These names live in the shared layer, not in the LSM engine's package,
because engine detection (dbdir.py: a damaged directory is recognised by
its files) and destroy (destroy.py), which both engines use, go by them.
"""

from __future__ import annotations

import os

CURRENT = "CURRENT"
LOCK = "LOCK"


def log_name(number: int) -> str:
    return f"{number:06d}.log"


def table_name(number: int) -> str:
    return f"{number:06d}.sst"


def manifest_name(number: int) -> str:
    return f"MANIFEST-{number:06d}"


def parse(name: str) -> tuple[str, int] | None:
    """("log"|"table"|"manifest"|"temp", number) or None for other names."""
    if name.endswith(".tmp"):
        return "temp", 0
    stem, ext = os.path.splitext(name)
    if ext == ".log" and stem.isdigit():
        return "log", int(stem)
    if ext == ".sst" and stem.isdigit():
        return "table", int(stem)
    if name.startswith("MANIFEST-") and name[9:].isdigit():
        return "manifest", int(name[9:])
    return None
