"""SSTables: immutable sorted files of (key, sequence, kind, value) entries.

format.py (footer, block handles, block trailer, compression), block.py (the
columnar block codec), bloom.py (the per-table filter), builder.py (writes a
table), reader.py (point lookups and iteration). docs/formats.md describes
the bytes.
"""
