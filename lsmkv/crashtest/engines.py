"""What the crash test needs to know about each engine.

One class per engine: how to open it (the options that make it flush,
compact, checkpoint and split all the time, and the ``UInt64Add`` merge
operator the workload's counters need), which maintenance operations the
child may call, which write kinds beyond puts, deletes, batches and ingest
it supports (``features``: merge, delete_range, txn), what a crashed
directory tells about the moment of the kill, and the engine's own checks
before and after recovery. The driver and the child use nothing
engine-specific beyond this module.
"""

from __future__ import annotations

import os

from lsmkv.base.filenames import CURRENT, manifest_name, parse
from lsmkv.base.fs import DEFAULT_FS
from lsmkv.base.merge_operators import UInt64Add
from lsmkv.lsm.version import VersionSet
from lsmkv.stores import open_store

KiB = 1024


class LsmEngine:
    """lsmkv's LSM-tree."""

    name = "lsm"
    maintenance = ("flush", "compact")
    #: Write kinds the workload may use beyond puts, deletes, batches, ingest.
    features = frozenset({"merge", "delete_range", "txn"})
    #: Small buffers and levels: a flush every few hundred writes, level 1
    #: over its target and compacting into level 2 all the time, tables of a
    #: dozen blocks. Level 0 may grow to 30 tables before writers stop, so
    #: that kills land in writes as often as in stalls.
    default_options = {"write_buffer_size": 128 * KiB, "block_size": 1 * KiB, "level1_max_bytes": 64 * KiB,
                       "target_file_size": 16 * KiB, "level_size_multiplier": 4, "l0_compaction_trigger": 2,
                       "l0_slowdown_trigger": 20, "l0_stop_trigger": 30}

    def open(self, path: str, options: dict):
        return open_store(path, engine="lsm", **{"merge_operator": UInt64Add(), **options})

    def reopen_options(self, options: dict) -> dict:
        """Options for the driver's verifying open: recovery as in the child,
        without starting background compactions."""
        return {**options, "disable_auto_compactions": True}

    def run_maintenance(self, db, kind: str, start: bytes | None, end: bytes | None) -> None:
        if kind == "flush":
            db.flush()
        elif kind == "compact":
            db.compact_range(start, end)
        else:
            raise ValueError(f"lsm has no maintenance operation {kind!r}")

    def crash_evidence(self, path: str) -> list[str]:
        """What the directory left by the kill shows was in progress."""
        names = os.listdir(path)
        evidence = []
        if any(n.endswith(".sst.tmp") and not n.startswith("compaction-") for n in names):
            evidence.append("flush writing a table")
        if any(n.startswith("compaction-") and n.endswith(".tmp") for n in names):
            evidence.append("compaction writing output")
        versions = VersionSet(path, DEFAULT_FS)
        try:
            versions.recover()
        except Exception:  # noqa: BLE001 - the checker reports it; evidence is best effort
            return evidence
        live = versions.current.numbers()
        if any(kind == "table" and number not in live for kind, number in filter(None, map(parse, names))):
            evidence.append("table not (or no longer) in the manifest")
        current = manifest_name(versions.manifest_number)
        if any(n.startswith("MANIFEST-") and n != current for n in names):
            evidence.append("manifest being replaced")
        return evidence

    def check(self, path: str) -> list[str]:
        from lsmkv.lsm.check import check_db
        return check_db(path).problems

    def inspect_open(self, db, scanned: dict) -> tuple[list[str], dict]:
        """Problems visible on the reopened database, and facts to report."""
        stats = db.stats()
        problems = []
        if stats["background_error"] is not None:
            problems.append(f"background error after reopen: {stats['background_error']}")
        levels = [level for level, files in enumerate(stats["files_per_level"]) if files]
        return problems, {"deepest_level": max(levels, default=-1), "tables": sum(stats["files_per_level"]),
                          "files_per_level": stats["files_per_level"]}

    def inspect_closed(self, path: str) -> list[str]:
        """After the verifying open is closed: the directory holds exactly the
        tables the manifest names, no temporary file, and passes the check."""
        problems = self.check(path)
        names = os.listdir(path)
        versions = VersionSet(path, DEFAULT_FS)
        versions.recover()
        on_disk = {number for kind, number in filter(None, map(parse, names)) if kind == "table"}
        live = versions.current.numbers()
        if on_disk != live:
            problems.append(f"table files {sorted(on_disk - live)} are not in the manifest, "
                            f"manifest tables {sorted(live - on_disk)} are missing")
        temps = [n for n in names if n.endswith(".tmp")]
        if temps:
            problems.append(f"temporary files left after a clean close: {temps}")
        if CURRENT not in names:
            problems.append("CURRENT is missing")
        return problems


class BtreeEngine:
    """The B+tree."""

    name = "btree"
    #: "compact" is compact_range(), the vacuum: a rewritten page file
    #: renamed over the old one.
    maintenance = ("checkpoint", "compact")
    #: Write kinds the workload may use beyond puts, deletes, batches, ingest.
    features = frozenset({"merge", "delete_range", "txn"})
    #: 1 KiB pages (a tree three levels deep, values over ~250 bytes in
    #: overflow chains), a pool of 256 pages (a checkpoint whenever 192 are
    #: dirty) and a checkpoint at every 256 KiB of log: about ten
    #: checkpoints a second; and a sweep of expired keys every 50 ms.
    default_options = {"page_size": 1 * KiB, "cache_size": 256 * KiB, "checkpoint_log_bytes": 256 * KiB,
                       "ttl_sweep_interval": 0.05}

    def open(self, path: str, options: dict):
        return open_store(path, engine="btree", **{"merge_operator": UInt64Add(), **options})

    def reopen_options(self, options: dict) -> dict:
        """Options for the driver's verifying open: no sweep of expired keys
        while it reads (a sweep between its scan and its count would look
        like a lost entry)."""
        return {**options, "ttl_sweep_interval": 86400}

    def run_maintenance(self, db, kind: str, start: bytes | None, end: bytes | None) -> None:
        if kind == "checkpoint":
            db.flush()
        elif kind == "compact":
            db.compact_range(start, end)
        else:
            raise ValueError(f"btree has no maintenance operation {kind!r}")

    def crash_evidence(self, path: str) -> list[str]:
        evidence = []
        if os.path.exists(os.path.join(path, "btree.journal")):
            evidence.append("checkpoint journal present (format 3)")
        if self._pages_of_a_newer_checkpoint(path):
            evidence.append("checkpoint writing its pages (pages newer than the meta page in free slots)")
        if os.path.exists(os.path.join(path, "btree.log.tmp")):
            evidence.append("checkpoint starting a new log")
        if os.path.exists(os.path.join(path, "btree.pages.vacuum")):
            evidence.append("compact_range writing a new page file")
        return evidence

    @staticmethod
    def _pages_of_a_newer_checkpoint(path: str) -> bool:
        """Whether the page file holds pages stamped with an epoch above its
        newest meta page's: a checkpoint was writing them (into free slots)."""
        from btree.node import HEADER
        from btree.pager import Pager
        from lsmkv.base.fs import DEFAULT_FS
        try:
            pager = Pager(DEFAULT_FS, path, read_only=True)
        except OSError:
            return False
        try:
            epoch, ps = pager.read_meta().epoch, pager.page_size
            with open(pager.path, "rb") as f:
                data = f.read()
        except Exception:  # a damaged file is the check's to report
            return False
        finally:
            pager.close()
        return any(HEADER.unpack_from(data, slot * ps)[7] > epoch for slot in range(2, len(data) // ps))

    def check(self, path: str) -> list[str]:
        import btree
        return btree.check(path).problems

    def inspect_open(self, db, scanned: dict) -> tuple[list[str], dict]:
        problems = list(db.check_invariants())
        stats = db.stats()
        # Keys with a ttl count as entries until a sweep deletes them, expired or not.
        if not stats["entries"] - stats["ttl_entries"] <= len(scanned) <= stats["entries"]:
            problems.append(f"stats count {stats['entries']} entries ({stats['ttl_entries']} with a ttl), "
                            f"a scan returns {len(scanned)}")
        return problems, {"height": stats["height"], "pages": stats["page_count"]}

    def inspect_closed(self, path: str) -> list[str]:
        problems = self.check(path)
        for name in ("btree.journal", "btree.log.tmp", "btree.pages.vacuum"):
            if os.path.exists(os.path.join(path, name)):
                problems.append(f"{name} left after a clean close")
        return problems


ENGINES = {"lsm": LsmEngine(), "btree": BtreeEngine()}


def engine(name: str):
    """The crash-test adapter of engine ``name`` ("lsm" or "btree")."""
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; choose from {', '.join(ENGINES)}") from None
