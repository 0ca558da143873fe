"""The ``lsmkv`` command. Parses arguments, calls the library, prints.

The library never prints; this module owns the terminal. Every LsmkvError
becomes one line on stderr and exit code 1 (2 for usage errors).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":
        from bench.cli import main as bench_main
        return bench_main(argv[1:])
    print("usage: lsmkv bench ...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
