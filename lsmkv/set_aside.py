"""Where a repair keeps the files it could not use: ``DB/lost/N/``.

Each repair run copies the damaged files it drops (and, for the btree, the
files it replaces) into a fresh numbered folder under ``lost/`` before it
changes anything, fsynced, so that nothing a repair gives up is ever
deleted: a person (or a better tool) can still look at it. lsmkv never
reads or removes these folders; both engines ignore ``lost/`` at open.
"""

from __future__ import annotations

import os

from .fs import FileSystem

LOST_DIR = "lost"


def new_set_aside_dir(fs: FileSystem, dbpath: str) -> str:
    """Create ``dbpath/lost/N`` with the smallest unused N >= 1 and return it."""
    root = os.path.join(dbpath, LOST_DIR)
    fs.makedirs(root)
    used = {int(n) for n in fs.listdir(root) if n.isdigit()}
    n = 1
    while n in used:
        n += 1
    path = os.path.join(root, str(n))
    fs.makedirs(path)
    fs.sync_dir(root)
    fs.sync_dir(dbpath)
    return path


#: Bytes copied per read.
_CHUNK = 1 << 20


def copy_aside(fs: FileSystem, src: str, folder: str) -> str:
    """Copy ``src`` into ``folder`` (same name) durably; returns the copy's path."""
    dst = os.path.join(folder, os.path.basename(src))
    source = fs.open_readable(src)
    try:
        f = fs.create(dst)
        try:
            offset = 0
            while offset < source.size:
                chunk = source.read_at(offset, _CHUNK)
                if not chunk:
                    break
                f.append(chunk)
                offset += len(chunk)
            f.sync()
        finally:
            f.close()
    finally:
        source.close()
    fs.sync_dir(folder)
    return dst
