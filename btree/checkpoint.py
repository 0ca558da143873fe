"""Checkpoints and split keys: a consistent copy of a btree database in a
new directory (``db.checkpoint(dest)``, ``btree.checkpoint``), and where to
cut the tree for parallel reads (``db.split_keys``).

Not to be confused with the *log checkpoint* (``DB._checkpoint``, in
btree/db.py: dirty pages written to the page file and a new log started),
which this module never makes.

* :func:`write_checkpoint` makes the new directory, has the caller write
  the page file into it (:func:`copy_tree`: the live entries and metadata
  of a tree built bottom up, dense as a vacuum's, by btree/bulk.py) while
  the caller holds the tree still, adds an empty log and fsyncs the
  directory. A page file is updated in place, so unlike lsmkv's
  hard-linked checkpoint this copies every live byte: O(size). On failure
  the directory is removed again.
* :func:`split_keys` picks separators of the tree's internal levels.
"""

from __future__ import annotations

import os
from typing import Callable

from lsmkv.base.fs import FileSystem

from .bulk import build_page_file
from .pager import LOG_FILE, PAGES_FILE
from .tree import Tree
from .wal import LogWriter


def write_checkpoint(fs: FileSystem, dest: str | bytes | os.PathLike, write_pages: Callable[[str], None]) -> None:
    """Make the new directory ``dest`` (FileExistsError if it exists) and a
    database in it: ``write_pages(path)`` writes its page file at ``path``,
    then an empty log is added and the directory fsynced."""
    dest = os.path.abspath(os.fsdecode(dest))
    if fs.exists(dest):
        raise FileExistsError(f"{dest} already exists; a checkpoint goes to a new directory")
    fs.makedirs(dest)
    try:
        write_pages(os.path.join(dest, PAGES_FILE))
        LogWriter.create(fs, os.path.join(dest, LOG_FILE), 0, dest).close()
        fs.sync_dir(dest)
    except BaseException:
        fs.discard_directory(dest)
        raise


def copy_tree(fs: FileSystem, path: str, tree: Tree, page_size: int, metadata: dict[bytes, bytes]) -> None:
    """Write the live entries of ``tree`` and the metadata entries as a new
    page file at ``path`` (epoch 1, checkpoint LSN 0: a fresh database)."""
    build_page_file(fs, path, page_size, tree.live_entries(), epoch=1, ckpt_lsn=0, metadata=metadata)


def split_keys(tree: Tree, parts: int) -> list[bytes]:
    """At most ``parts - 1`` ascending keys that cut ``tree`` into ranges of
    about equal size: separators of the highest internal level that has at
    least ``parts - 1`` of them (or of the lowest one), evenly spaced.
    ``[]`` for a tree of one leaf or parts <= 1."""
    if parts == 1 or tree.height <= 1:
        return []
    nodes = [tree.root]
    for depth in range(tree.height - 1):
        separators = [key for pg in nodes for key in tree.node(pg, False).keys]
        if len(separators) >= parts - 1 or depth == tree.height - 2:
            break
        nodes = [kid for pg in nodes for kid in tree.node(pg, False).kids]
    n = len(separators)
    picked = [separators[min(n - 1, (i * (n + 1)) // parts)] for i in range(1, parts)] if n else []
    return sorted(set(picked))
