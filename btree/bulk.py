"""Building a whole page file from sorted entries, bottom up (a bulk load).

``build_page_file`` writes a new ``btree.pages`` image holding exactly the
given entries: leaves filled in key order (values too large for half a
page go to overflow chains, as ``Tree.put`` does), linked both ways, then
the internal levels above them with the shortest separators, each level
packed left to right and its last node balanced with its neighbour so that
no internal node is left without a key. Both meta copies describe the new
tree; the free list is empty. The result passes ``btree.check``.

Used by the repair (btree/repair.py), which needs a tree whose pages carry a
chosen checkpoint epoch and LSN, by the vacuum (``compact_range``), by
``ingest`` (the tree's entries merged with ingested table files,
:func:`ingest_tables` and :func:`merge_ingested`) and by checkpoints. It
writes a new file and never touches an existing database's pages.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

from lsmkv.base.errors import SizeLimitError
from lsmkv.base.fs import FileSystem

from .node import DEADLINE_SIZE, HEADER_SIZE, Expiring, Node, Overflow, encode_node, encode_overflow
from .pager import Meta, encode_meta, encode_meta_entries
from .tree import _INT_FIXED, _LEAF_FIXED, inline_limit, shortest_separator

#: Pages written per call to the file.
_WRITE_BATCH = 256


class _PageWriter:
    """Hands out page numbers in order and writes page images in runs."""

    def __init__(self, fs: FileSystem, path: str, page_size: int) -> None:
        self.file = fs.open_paged(path, create=True)
        self.file.truncate(0)
        self.page_size = page_size
        self.next_page = 2
        self._run: dict[int, bytes] = {}

    def allocate(self) -> int:
        pg = self.next_page
        self.next_page += 1
        return pg

    def put(self, pgno: int, image: bytes | bytearray) -> None:
        self._run[pgno] = bytes(image)
        if len(self._run) >= _WRITE_BATCH:
            self.flush()

    def flush(self) -> None:
        ps = self.page_size
        for pg in sorted(self._run):
            self.file.write_at(pg * ps, self._run[pg])
        self._run.clear()


def build_page_file(fs: FileSystem, path: str, page_size: int, entries: Iterable[tuple[bytes, bytes]], *,
                    epoch: int, ckpt_lsn: int, metadata: dict[bytes, bytes] | None = None,
                    fill_factor: float = 1.0) -> Meta:
    """Write a page file at ``path`` holding ``entries`` (key ascending,
    keys within the page size's key limit) and the ``metadata`` entries
    (batch.set_meta's); fsync it. Leaves are filled to ``fill_factor`` of a
    page (room for later inserts without splits). Returns its meta."""
    if epoch < 1:
        raise ValueError("epoch must be at least 1 (both meta copies are written)")
    max_cell = inline_limit(page_size)
    out = _PageWriter(fs, path, page_size)
    try:
        leaves, count, ttl_count = _write_leaves(out, entries, page_size, max_cell, epoch,
                                                 int(page_size * fill_factor))
        root, height = _write_internal_levels(out, leaves, page_size, epoch)
        chain = (_write_overflow(out, encode_meta_entries(metadata), page_size - HEADER_SIZE, page_size, epoch)
                 if metadata else Overflow(0, 0))
        out.flush()
        page_count = out.next_page
        meta = Meta(epoch, page_size, root, page_count, 0, 0, ckpt_lsn, count, height, ttl_count,
                    chain.page, chain.length)
        previous = Meta(epoch - 1, page_size, root, page_count, 0, 0, ckpt_lsn, count, height, ttl_count,
                        chain.page, chain.length)
        for m in (meta, previous):  # epoch e lives in meta page e % 2
            out.file.write_at((m.epoch % 2) * page_size, bytes(encode_meta(m)))
        out.file.sync()
    finally:
        out.file.close()
    return meta


def _write_leaves(out: _PageWriter, entries: Iterable[tuple[bytes, "bytes | Expiring"]], page_size: int,
                  max_cell: int, epoch: int, fill: int) -> tuple[list[tuple[int, bytes, bytes]], int, int]:
    """Write the leaves (and overflow chains); returns ([(page, first key,
    last key)], entries, entries with a ttl). A value may be an Expiring
    (its deadline goes in the cell)."""
    leaves: list[tuple[int, bytes, bytes]] = []
    node = Node(out.allocate(), True)
    count = ttl_count = 0
    ovf_cap = page_size - HEADER_SIZE
    for key, value in entries:
        deadline = None
        if type(value) is Expiring:
            deadline, value = value.deadline, value.value
            ttl_count += 1
        extra = 0 if deadline is None else DEADLINE_SIZE
        if _LEAF_FIXED + extra + len(key) + len(value) > max_cell:
            val: bytes | Overflow | Expiring = _write_overflow(out, value, ovf_cap, page_size, epoch)
            size = _LEAF_FIXED + extra + len(key) + 4
        else:
            val = value
            size = _LEAF_FIXED + extra + len(key) + len(value)
        if deadline is not None:
            val = Expiring(deadline, val)
        if node.keys and node.used + size > fill:
            nxt = out.allocate()
            node.next = nxt
            leaves.append((node.pgno, node.keys[0], node.keys[-1]))
            out.put(node.pgno, encode_node(node, page_size, epoch))
            following = Node(nxt, True)
            following.prev = node.pgno
            node = following
        node.keys.append(key)
        node.vals.append(val)
        node.used += size
        node.ovf = node.ovf or type(val) is not bytes
        count += 1
    leaves.append((node.pgno, node.keys[0] if node.keys else b"", node.keys[-1] if node.keys else b""))
    out.put(node.pgno, encode_node(node, page_size, epoch))
    return leaves, count, ttl_count


def ingest_tables(fs: FileSystem, paths) -> tuple[list, Callable[[str], Iterable[tuple[bytes, bytes | None]]]]:
    """The table files at ``paths`` checked for an ingest (the LSM's
    ``inspect_tables``: sorted, not overlapping; bad input raises before
    anything changes), and the function that reads a table file's entries
    (``lsmkv.read_table``). The one place btree reads the LSM engine's
    files: the LSM's table modules are imported here, at the first ingest,
    so that ``import btree`` loads nothing of the LSM engine."""
    from lsmkv.lsm.ingest import inspect_tables
    from lsmkv.lsm.table_writer import read_table
    return inspect_tables(fs, paths), read_table


def merge_ingested(live: Iterable[tuple[bytes, "bytes | Expiring"]], tables, max_key: int,
                   read_table: Callable[[str], Iterable[tuple[bytes, bytes | None]]]
                   ) -> Iterator[tuple[bytes, "bytes | Expiring"]]:
    """The tree's ``live`` entries merged in key order with the entries of
    the ingested ``tables`` (lsmkv.lsm.ingest.IngestTable, sorted and not
    overlapping; each read with ``read_table``, see :func:`ingest_tables`):
    on the same key the table's value wins, and a table's tombstone removes
    the key. Raises SizeLimitError at a table key longer than ``max_key``."""
    def ingested():
        for table in tables:
            for key, value in read_table(table.path):
                if len(key) > max_key:
                    raise SizeLimitError(f"{table.path} holds a key of {len(key)} bytes; this btree's key limit "
                                         f"is {max_key}")
                yield key, value

    tree_entries, new_entries = iter(live), ingested()
    old, new = next(tree_entries, None), next(new_entries, None)
    while old is not None and new is not None:
        if old[0] < new[0]:
            yield old
            old = next(tree_entries, None)
            continue
        if old[0] == new[0]:
            old = next(tree_entries, None)
        if new[1] is not None:
            yield new
        new = next(new_entries, None)
    while old is not None:
        yield old
        old = next(tree_entries, None)
    while new is not None:
        if new[1] is not None:
            yield new
        new = next(new_entries, None)


def _write_overflow(out: _PageWriter, value: bytes, cap: int, page_size: int, epoch: int) -> Overflow:
    n = -(-len(value) // cap)
    pages = [out.allocate() for _ in range(n)]
    for j, pg in enumerate(pages):
        out.put(pg, encode_overflow(pg, value[j * cap:(j + 1) * cap], pages[j + 1] if j + 1 < n else 0,
                                    page_size, epoch))
    return Overflow(pages[0], len(value))


def _write_internal_levels(out: _PageWriter, leaves: list[tuple[int, bytes, bytes]], page_size: int,
                           epoch: int) -> tuple[int, int]:
    """Write the internal levels over ``leaves``; returns (root, height)."""
    # A level: its nodes' page numbers and the separator left of each (None for the first).
    kids = [pg for pg, _, _ in leaves]
    seps: list[bytes | None] = [None] + [shortest_separator(leaves[i - 1][2], leaves[i][1])
                                         for i in range(1, len(leaves))]
    height = 1
    while len(kids) > 1:
        groups = _pack(seps, page_size)
        next_kids, next_seps = [], []
        for start, end in groups:
            node = Node(out.allocate(), False)
            node.kids = kids[start:end]
            node.keys = seps[start + 1:end]  # type: ignore[assignment]
            node.used = HEADER_SIZE + sum(_INT_FIXED + len(k) for k in node.keys)
            out.put(node.pgno, encode_node(node, page_size, epoch))
            next_kids.append(node.pgno)
            next_seps.append(seps[start])
        kids, seps = next_kids, next_seps
        height += 1
    return kids[0], height


def _pack(seps: list[bytes | None], page_size: int) -> list[tuple[int, int]]:
    """Split children [0, n) into runs [start, end) that fit one internal
    page each (the separators between a run's children are its keys), every
    run with at least two children."""
    n = len(seps)
    groups: list[tuple[int, int]] = []
    start = 0
    used = HEADER_SIZE
    for i in range(1, n):
        cost = _INT_FIXED + len(seps[i])  # type: ignore[arg-type]
        if used + cost > page_size:
            groups.append((start, i))
            start, used = i, HEADER_SIZE
        else:
            used += cost
    groups.append((start, n))
    if len(groups) > 1 and groups[-1][1] - groups[-1][0] < 2:
        # A lone last child: move the previous run's last child over.
        (a, b), (_, d) = groups[-2], groups[-1]
        groups[-2:] = [(a, b - 1), (b - 1, d)]
    return groups
