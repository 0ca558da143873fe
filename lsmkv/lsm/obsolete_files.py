"""Which files of an LSM database nothing needs any more, and deleting them.

RocksDB keeps this in db_impl_files.cc. A table is obsolete once no live
Version references it and no flush, compaction or ingest still writes it
(its number is in the pending outputs until it is installed); a log once
the manifest says its writes are in tables; a manifest once CURRENT names
a newer one -- never a newer one than the current: that is one being
written (a compaction rotating the manifest under the manifest lock,
while a flush sweeps without it), or one CURRENT names after a rotation
whose last step failed -- except at open, when none is being written and
a newer one is what a crash left before CURRENT named it; a temporary
file only at open (a crash left it). The DB
(db.py) sweeps after each flush and compaction, after resume(), at open
and at close.

Never remove a file a live Version names, a pending output, the current
log or the current manifest; a failed removal is harmless (the next sweep
or open removes the file).
"""

from __future__ import annotations

import logging
import os
from typing import Callable

from lsmkv.base.filenames import parse
from lsmkv.base.fs import FileSystem

from .version import VersionSet

#: What a sweep logs goes out under the DB's logger name.
log = logging.getLogger("lsmkv.lsm.db")


def delete_obsolete_files(fs: FileSystem, path: str, versions: VersionSet, pending_outputs: set[int],
                          evict: Callable[[int], None], at_open: bool = False) -> None:
    """Remove tables no live Version references, logs already in tables,
    old manifests, and (``at_open``) temporary files left by a crash.
    ``evict(number)`` drops a removed table from the table cache."""
    names = fs.listdir(path)
    # Read in this order: a table listed above is either still pending
    # (its number added before it got its name) or already in a Version
    # (installed before its number left the pending set).
    pending = set(pending_outputs)
    live = versions.live_table_numbers() | pending
    removed = []
    for name in names:
        parsed = parse(name)
        if parsed is None:
            continue
        kind, number = parsed
        if ((kind == "table" and number not in live)
                or (kind == "log" and number < versions.log_number)
                or (kind == "manifest" and (number < versions.manifest_number
                                            or (at_open and number != versions.manifest_number)))
                or (kind == "temp" and at_open)):
            if kind == "table":
                evict(number)
            try:
                fs.remove(os.path.join(path, name))
                removed.append(name)
            except FileNotFoundError:
                pass
            except OSError as exc:  # harmless: the next sweep (or open) removes it
                log.warning("%s: could not remove obsolete file %s: %s", path, name, exc)
    if removed:
        log.debug("%s: removed obsolete files %s", path, removed)
