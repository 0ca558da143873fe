"""Recovery: a btree database's files opened and its state rebuilt from them.

This module owns what a handle does before it serves reads and writes, and
again whenever it rebuilds its tree from the disk:

* :func:`open_pager`: the page file, created for a new database (or for
  one whose creation a crash cut short) and checked against the page size
  the caller asked for;
* :func:`load_checkpoint`: the tree as of the last checkpoint. A writer
  first applies a format-3 file's journal, removes the new log or the
  rewritten page file a crash in a checkpoint or a vacuum left, and steps
  past a checkpoint cut short; a read-only handle overlays the journal in
  memory and writes nothing;
* :func:`read_log` and :func:`replay_log`: the log records past the
  checkpoint, applied in order. A torn tail is dropped; a log that starts
  after the checkpoint or a record that spans it is corruption;
* :func:`open_log`: the log a writer appends to next -- the old one if it
  is empty and starts at the checkpoint, else a new one;
* :func:`concurrent_checkpoint` and :func:`retry_while_checkpointing`: a
  read-only handle that meets a bad page or a stale view while a writer
  in another process checkpoints loads its view again.

``DB._load_state`` (btree/db.py) runs these steps in order and keeps what
they return; the DB's own write path applies the replayed records and
writes the checkpoint that follows a replay. This module never writes on a
read-only handle.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Callable, NamedTuple

from lsmkv.base.errors import CorruptionError, InvalidDatabaseError, LsmkvError, OptionError
from lsmkv.base.fs import FileSystem
from lsmkv.base.ttl import now_ms

from .bufferpool import BufferPool
from .node import Node, Overflow, encode_node
from .options import DEFAULT_PAGE_SIZE
from .pager import LOG_FILE, VACUUM_FILE, Pager, StaleView, decode_meta_entries
from .tree import Tree
from .wal import LogContents, LogWriter, parse_log

log = logging.getLogger(__name__)

#: Attempts at a consistent read-only view while a writer keeps checkpointing.
VIEW_ATTEMPTS = 300


def open_pager(fs: FileSystem, path: str, *, read_only: bool, page_size: int | None) -> Pager:
    """The page file of the database in ``path``, created (at ``page_size``,
    or the default) if it is empty or, for a writer, if its creation was cut
    short; OptionError if ``page_size`` is given and differs from the one
    the database was created with."""
    pager = Pager(fs, path, read_only=read_only)
    try:
        if pager.is_empty() or (not read_only and pager.creation_cut_short()):
            if read_only:
                raise InvalidDatabaseError(f"{path} holds a btree database still being created")
            ps = page_size or DEFAULT_PAGE_SIZE
            if not pager.is_empty():
                pager.file.truncate(0)  # what a creation cut short left
            pager.initialize(ps, lambda size: encode_node(Node(2, True), size, 0))
        meta = pager.read_meta()
        if page_size is not None and page_size != meta.page_size:
            raise OptionError(f"page_size={page_size} differs from the database's page size {meta.page_size}, "
                              f"which is fixed at creation; omit page_size or pass {meta.page_size}")
    except BaseException:
        pager.close()
        raise
    return pager


class Checkpointed(NamedTuple):
    """The state as of the last checkpoint: the buffer pool, the tree over
    it, the chain holding the metadata entries (None: no entries) and the
    entries themselves."""
    pool: BufferPool
    tree: Tree
    meta_chain: Overflow | None
    meta: dict[bytes, bytes]


def load_checkpoint(fs: FileSystem, pager: Pager, path: str, *, writer: bool, rebuilding: bool, cache_size: int,
                    hash_index: bool, ttl_clock: Callable[[], float]) -> Checkpointed:
    """The tree as of the last checkpoint (see the module docstring).
    ``rebuilding``: a writer rebuilding its tree after a failure, which
    leaves a checkpoint cut short for resume() to deal with."""
    if writer:
        pager.recover_journal()
        for leftover in (LOG_FILE + ".tmp", VACUUM_FILE):  # what a crash mid-checkpoint or mid-vacuum left
            tmp = os.path.join(path, leftover)
            if fs.exists(tmp):
                fs.remove(tmp)
    else:
        pager.overlay_journal()
    pager.load_pages(pager.meta)
    if writer and not rebuilding:
        pager.step_past_unfinished_checkpoint()  # (may write the meta page again: pager.meta)
    if writer:
        pager.hold_for_readers()
    meta = pager.meta
    pool = BufferPool(pager, cache_size, hash_index)
    tree = Tree(pool, meta.root, meta.height, meta.entries, hash_index, meta.ttl_entries,
                lambda: now_ms(ttl_clock()))
    chain = Overflow(meta.meta_page, meta.meta_length) if meta.meta_page else None
    entries = {} if chain is None else decode_meta_entries(tree.read_overflow(chain), pager.path, meta.meta_page)
    return Checkpointed(pool, tree, chain, entries)


def read_log(fs: FileSystem, path: str) -> bytes | None:
    """The bytes of the log of the database in ``path``; None if it has
    none (a database created before its first log, or a crash then)."""
    try:
        return fs.read_file(os.path.join(path, LOG_FILE))
    except FileNotFoundError:
        return None


class Replayed(NamedTuple):
    """What replay_log did: the log as parsed (None: no log), how many
    records it applied, and the LSN the replayed state reaches."""
    contents: LogContents | None
    records: int
    end_lsn: int


def replay_log(data: bytes | None, path: str, ckpt_lsn: int, apply: Callable[[list], None], *,
               replay_until: int | None = None, stale: Callable[[], bool] | None = None) -> Replayed:
    """Parse the log ``data`` of the database in ``path`` and ``apply`` the
    operations of each record that starts at or after ``ckpt_lsn`` (and
    before ``replay_until``, if given). ``stale()``, for a read-only
    handle: whether a writer checkpointed under it, which makes a log that
    starts after the checkpoint a StaleView instead of corruption."""
    log_path = os.path.join(path, LOG_FILE)
    contents = None if data is None else parse_log(data, log_path)
    end_lsn = ckpt_lsn
    replayed = 0
    if contents is not None:
        if contents.base_lsn > ckpt_lsn:
            if stale is not None and stale():
                raise StaleView(0)
            raise CorruptionError(f"log starts at LSN {contents.base_lsn}, after the checkpoint at LSN "
                                  f"{ckpt_lsn}: log records are missing", path=log_path, offset=0)
        for start, end, ops in contents.records:
            if replay_until is not None and start >= replay_until:
                break
            if start < ckpt_lsn:
                if end > ckpt_lsn:
                    raise CorruptionError(f"checkpoint LSN {ckpt_lsn} is inside a log record",
                                          path=log_path, offset=start - contents.base_lsn)
                continue
            apply(ops)
            replayed += 1
        end_lsn = max(end_lsn, contents.valid_end_lsn)
        if contents.torn_bytes:
            log.info("dropped a torn log tail of %d bytes in %s", contents.torn_bytes, log_path)
    return Replayed(contents, replayed, end_lsn)


def open_log(fs: FileSystem, path: str, replayed: Replayed, ckpt_lsn: int) -> LogWriter:
    """The log a writer appends to after recovery: the old one if nothing
    was replayed and it holds no record, no torn tail, and starts at the
    checkpoint ``ckpt_lsn``; otherwise a new, empty one starting there."""
    contents = replayed.contents
    log_path = os.path.join(path, LOG_FILE)
    if (replayed.records or contents is None or contents.torn_bytes or contents.records
            or contents.base_lsn != ckpt_lsn):
        return LogWriter.create(fs, log_path, ckpt_lsn, path)
    return LogWriter(fs.open_appendable(log_path), contents.base_lsn)


def concurrent_checkpoint(fs: FileSystem, pager: Pager) -> bool:
    """Read-only handles: is a writer in another process checkpointing (or
    did it since this view was loaded, or did it rewrite the page file
    with compact_range())? Then a bad page is no corruption."""
    return (pager.newest_epoch_on_disk() != pager.meta.epoch or fs.exists(pager.journal_path)
            or pager.replaced())


def retry_while_checkpointing(load: Callable[[], None], stale: Callable[[], bool], reread_meta: Callable[[], None],
                              path: str) -> None:
    """Read-only handles: ``load()`` a consistent view, trying again while a
    writer in another process is in the middle of a checkpoint (``stale()``
    says so; ``reread_meta()`` reads the meta page again, from the page
    file now at the path)."""
    for attempt in range(VIEW_ATTEMPTS):
        try:
            load()
            return
        except StaleView:
            pass
        except CorruptionError:
            if not stale():
                raise
        time.sleep(0.01)
        reread_meta()
    raise LsmkvError(f"{path}: could not get a consistent read-only view while another process "
                     f"kept checkpointing; retry")
