"""``python -m lsmkv.cli ...``: the ``lsmkv`` command."""

import sys

from lsmkv.cli import main

if __name__ == "__main__":
    sys.exit(main())
