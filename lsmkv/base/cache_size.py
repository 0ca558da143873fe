"""The default size of a database's cache, the same rule for both engines.

The LSM's block cache (lsmkv/lsm/cache.py, ``block_cache_size``) and the
B+tree's buffer pool (btree/bufferpool.py, ``cache_size``) are sized by it
when no size is given: a fraction of the machine's physical memory, within
a floor and a ceiling (``DEFAULT_RULE`` says it in words, for ``stats()``).
``memory_share`` is that rule for any fraction and bounds (a local Spark
session's heap follows it too: lsmkv/spark/sessions.py).
"""

from __future__ import annotations

import os

#: The default capacity: this fraction of the machine's memory ...
DEFAULT_FRACTION = 16
#: ... but at least this much ...
DEFAULT_MIN = 32 * 1024 * 1024
#: ... and at most this much.
DEFAULT_MAX = 1024 * 1024 * 1024
DEFAULT_RULE = "1/16 of physical memory, at least 32 MiB, at most 1 GiB"


def physical_memory() -> int | None:
    """Bytes of physical memory, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return None


def memory_share(fraction: int, least: int, most: int, memory: int | None = None) -> int:
    """``1/fraction`` of ``memory`` bytes (default: this machine's physical
    memory), at least ``least`` (also when the memory is not known) and at
    most ``most``."""
    if memory is None:
        memory = physical_memory()
    return max(least, min(most, (memory or 0) // fraction))


def default_capacity(memory: int | None = None) -> int:
    """The cache size used when none is given (``DEFAULT_RULE``)."""
    return memory_share(DEFAULT_FRACTION, DEFAULT_MIN, DEFAULT_MAX, memory)
