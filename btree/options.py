"""The options of ``btree.open``: their names, their defaults and checking them.

This module owns what a btree option may be: :data:`OPTIONS` names every
one, the ``DEFAULT_*`` constants give the defaults :class:`btree.db.DB`
declares, and :func:`check_options` raises one OptionError naming the
first bad value before anything is opened or created. It never opens a
file: ``page_size`` is checked against the database's own page size at
open (btree/recovery.py).
"""

from __future__ import annotations

from typing import Callable

from lsmkv.base.errors import OptionError
from lsmkv.base.fs import FileSystem
from lsmkv.base.log_syncer import check_sync_options

from .pager import valid_page_size

DEFAULT_PAGE_SIZE = 4096
#: cache_size=None (the default) sizes the buffer pool by the rule the LSM
#: sizes its block cache by (lsmkv/base/cache_size.py: 1/16 of physical memory,
#: 32 MiB to 1 GiB). Measured at 1,000,000 random keys with 100-byte values
#: (a 175 MiB page file): 32 MiB gave 23K puts/s and 41K gets/s, 1 GiB
#: 140K and 216K, with 222 MiB more peak RSS. The pool charges what decoded
#: pages take in memory, not page images (btree.bufferpool).
DEFAULT_CACHE_SIZE = None
DEFAULT_CHECKPOINT_LOG_BYTES = 256 * 1024 * 1024
DEFAULT_TTL_SWEEP_INTERVAL = 60.0

OPTIONS = ("page_size", "cache_size", "read_only", "fs", "checkpoint_log_bytes", "hash_index", "group_commit",
           "sync_timeout", "commit_delay", "ttl_clock", "ttl_sweep_interval", "merge_operator")


def check_option_names(options: dict) -> None:
    """Raise OptionError for the first name in ``options`` that is no btree option."""
    for name in options:
        if name not in OPTIONS:
            raise OptionError(f"unknown btree option {name!r}; the options are {', '.join(OPTIONS)}")


def check_options(page_size: int | None, cache_size: int | None, read_only: bool, fs: FileSystem | None,
                  checkpoint_log_bytes: int, hash_index: bool, group_commit: bool, sync_timeout: float | None,
                  commit_delay: float, ttl_clock: Callable[[], float], ttl_sweep_interval: float,
                  merge_operator: Callable | None = None) -> None:
    """Raise OptionError for the first option whose value is not one it takes."""
    if page_size is not None and not valid_page_size(page_size):
        raise OptionError(f"page_size must be a power of two from 512 to 32768, not {page_size!r}")
    if cache_size is not None and (type(cache_size) is not int or cache_size < 0):
        raise OptionError(f"cache_size must be a non-negative int (bytes) or None (the default rule), "
                          f"not {cache_size!r}")
    if type(read_only) is not bool:
        raise OptionError(f"read_only must be True or False, not {read_only!r}")
    if fs is not None and not isinstance(fs, FileSystem):
        raise OptionError(f"fs must be an lsmkv.base.fs.FileSystem, not {type(fs).__name__}")
    if type(checkpoint_log_bytes) is not int or checkpoint_log_bytes < 4096:
        raise OptionError(f"checkpoint_log_bytes must be an int of at least 4096, not {checkpoint_log_bytes!r}")
    if type(hash_index) is not bool:
        raise OptionError(f"hash_index must be True or False, not {hash_index!r}")
    if type(group_commit) is not bool:
        raise OptionError(f"group_commit must be True or False, not {group_commit!r}")
    check_sync_options(sync_timeout, commit_delay)
    if not callable(ttl_clock):
        raise OptionError(f"ttl_clock must be a callable returning seconds since the epoch, not "
                          f"{type(ttl_clock).__name__}")
    if (isinstance(ttl_sweep_interval, bool) or not isinstance(ttl_sweep_interval, (int, float))
            or not 0 < ttl_sweep_interval <= 86400):
        raise OptionError(f"ttl_sweep_interval must be a number of seconds from 0 (excluded) to 86400, "
                          f"not {ttl_sweep_interval!r}")
    if merge_operator is not None and not callable(merge_operator):
        raise OptionError(f"merge_operator must be a callable (key, existing value or None, operands) -> bytes "
                          f"or None, not {type(merge_operator).__name__}")
