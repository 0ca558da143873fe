"""Bit flips in data read back, from every kind of file of both engines.

A database is built by a seeded workload and left closed (tables, manifest
and CURRENT; btree's page file with meta, internal, leaf, overflow,
page-map and map-directory pages), or crashed with writes only in its log.
A copy is opened through the fault file
system with one bit flipped in the Nth read of one kind of file, and
everything is read back (lsmkv also compacts it all and reads again). Each
flip must be reported as CorruptionError naming a file and an offset or
page -- leaving the files intact -- or change nothing (the data read is
exactly right and the files healthy): the classes of flips that can be
harmless are asserted below and justified in docs/reliability.md.
"""

from __future__ import annotations

import logging
import os
import random

import pytest

from lsmkv.base.fault_fs import BitFlip
from lsmkv.faults import scenarios, workload

SEED = 5
PER_TARGET = 25
SOAK_PER_TARGET = 400

#: The only structures where a flip may be harmless (never interpreted, or redundant).
HARMLESS_STRUCTURES = {
    "log: preallocated space past the end",  # lsmkv: reading stops at the first zero header
    "page: meta (the older copy)",  # btree: the copy not in use
    "page: meta (the bytes read to learn the page size)",  # a guess the meta checksums verify
    "log: header (reserved bytes)",  # btree: bytes 28-31 of the log header, never read
}

TARGETS = [(name, t) for name in ("lsm", "btree") for t in scenarios.FLIP_TARGETS[name]]


@pytest.mark.parametrize("engine_name,target", TARGETS, ids=[f"{n}-{t.label}" for n, t in TARGETS])
def test_every_flip_is_detected_or_harmless(engine_name, target, fresh_dir, request):
    engine = workload.engine(engine_name)
    ops = workload.make_ops(SEED, 120)
    keys = workload.keys_of(ops) + [b"unflushed%02d" % i for i in range(12)]
    pristine = os.path.join(fresh_dir(), "pristine")
    expected = scenarios.make_pristine(engine, pristine, ops, target.pristine)
    work = fresh_dir()
    reads = scenarios.count_reads(engine, pristine, work, target)
    assert reads > 0
    rng = random.Random(f"{engine_name}-{target.label}")
    count = SOAK_PER_TARGET if request.config.getoption("--soak") else PER_TARGET
    logging.disable(logging.CRITICAL)
    try:
        outcomes = [scenarios.bit_flip(engine, pristine, work, target, rng.randrange(1, reads + 1), expected, keys,
                                       seed=rng.randrange(1 << 30)) for _ in range(count)]
    finally:
        logging.disable(logging.NOTSET)
    failures = [o.detail for o in outcomes if o.failed]
    assert not failures, "\n".join(failures[:10])
    harmless = {o.structure for o in outcomes if o.result == scenarios.HARMLESS}
    assert harmless <= HARMLESS_STRUCTURES, harmless - HARMLESS_STRUCTURES
    assert any(o.result == scenarios.DETECTED for o in outcomes) or target.label == "log, whole file"


def test_a_flip_in_the_newest_meta_page_is_reported_not_rolled_back(fresh_dir):
    """A flipped bit in the meta page in use must not make btree fall back
    to the older checkpoint silently."""
    engine = workload.engine("btree")
    pristine = os.path.join(fresh_dir(), "pristine")
    expected = scenarios.make_pristine(engine, pristine, workload.make_ops(SEED, 60), "closed")
    with open(os.path.join(pristine, "btree.pages"), "rb") as f:
        data = f.read()
    from btree.node import HEADER
    page_size = 512
    epochs = [HEADER.unpack_from(data, slot * page_size)[7] for slot in (0, 1)]
    newest = epochs.index(max(epochs))
    work = fresh_dir()
    target = scenarios.FlipTarget("newest meta page", "btree.pages", "closed")
    # Read 2 and 3 are the two meta copies (read 1 learns the page size).
    outcome = scenarios.bit_flip(engine, pristine, work, target, 2 + newest, expected, [], seed=1)
    assert outcome.result == scenarios.DETECTED, outcome
    assert "newest meta page" in outcome.detail
    older = scenarios.bit_flip(engine, pristine, work, target, 3 - newest, expected, [], seed=1)
    assert older.result == scenarios.HARMLESS, older


def test_classification_of_a_table_flip(fresh_dir):
    engine = workload.engine("lsm")
    pristine = os.path.join(fresh_dir(), "pristine")
    scenarios.make_pristine(engine, pristine, workload.make_ops(SEED, 60), "closed")
    table = sorted(n for n in os.listdir(pristine) if n.endswith(".sst"))[0]
    size = os.path.getsize(os.path.join(pristine, table))
    assert scenarios.classify_flip("lsm", [pristine], BitFlip(table, size - 1, 0)) == "table: footer"
    assert scenarios.classify_flip("lsm", [pristine], BitFlip(table, 0, 0)) == "table: data block"
