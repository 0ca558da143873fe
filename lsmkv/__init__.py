"""lsmkv: an embeddable key-value storage engine built on a log-structured merge-tree.

The public surface is ``open()`` and the error types; everything else is internal.
"""

from .errors import (BackgroundError, ClosedError, CorruptionError, InvalidDatabaseError, LockError,
                     LsmkvError, OptionError, ReadOnlyError, SizeLimitError)

__all__ = [
    "BackgroundError", "ClosedError", "CorruptionError", "InvalidDatabaseError", "LockError",
    "LsmkvError", "OptionError", "ReadOnlyError", "SizeLimitError",
]
