"""Where a repair keeps what it could not use: ``DB/lost/N/``.

A repair that gives something up copies it into a fresh numbered folder
under ``lost/`` before it changes anything, fsynced, so that nothing a
repair gives up is ever deleted: a person (or a better tool) can still look
at it. What is kept is what was given up, not every file a repair replaces:
lsmkv keeps each damaged table or log whole (:func:`copy_aside`); the btree
keeps the damaged pages of its page file at their offsets, in a sparse copy
(:func:`copy_pieces_aside`), and its log or journal only when it dropped
bytes of them. A repair that gives up nothing creates no folder, so
repeated repairs of a healthy database keep nothing. lsmkv never reads or
removes these folders; both engines ignore ``lost/`` at open.
"""

from __future__ import annotations

import os
from typing import Iterable

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


def copy_pieces_aside(fs: FileSystem, src: str, folder: str, pieces: Iterable[tuple[int, int]]) -> str:
    """Copy the byte ranges ``pieces`` (offset, length) of ``src`` into
    ``folder`` (same name) durably, each at its own offset; the copy has
    ``src``'s size and the rest of it is a hole, which reads as zeros and
    takes no space on file systems with sparse files. Returns the copy's path."""
    dst = os.path.join(folder, os.path.basename(src))
    source = fs.open_readable(src)
    try:
        f = fs.open_paged(dst, create=True)
        try:
            for offset, length in sorted(pieces):
                data = source.read_at(offset, length)
                if data:
                    f.write_at(offset, data)
            f.truncate(source.size)
            f.sync()
        finally:
            f.close()
    finally:
        source.close()
    fs.sync_dir(folder)
    return dst
