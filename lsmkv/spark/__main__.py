"""``python -m lsmkv.spark ...`` and ``spark-submit .../lsmkv/spark/__main__.py ...``:
the ``lsmkv spark`` command (cli.py). Absolute imports, so spark-submit
can run this file as a script."""

import sys

from lsmkv.spark.cli import main

if __name__ == "__main__":
    sys.exit(main())
