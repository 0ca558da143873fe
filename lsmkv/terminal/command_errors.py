"""How a command line ends when its command raises: one line on stderr and an exit code.

Every ``lsmkv`` command line (``lsmkv``, ``lsmkv kafka``, ``lsmkv spark``) runs
its parsed command through :func:`run_command`, so they all end a failure
the same way:

- what the user can act on (an :class:`~lsmkv.base.errors.LsmkvError`, an
  OSError, and whatever else the command line names) is one line
  ``PROG: error: MESSAGE`` and exit code 1; an OSError's message names its
  file;
- a missing optional package (ImportError) is one line that names the extra
  to install;
- Ctrl-C is exit code 130, without a traceback;
- a closed stdout is re-raised for :mod:`lsmkv.terminal.closed_pipe` to end
  quietly;
- anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

from lsmkv.base.errors import LsmkvError
from lsmkv.terminal.closed_pipe import is_closed_stdout


def describe(exc: BaseException) -> str:
    """One line for a failure (an OSError names its file, which str() may not)."""
    if isinstance(exc, OSError) and exc.strerror:
        names = [os.fsdecode(n) for n in (exc.filename, exc.filename2) if n is not None]
        return ": ".join([*names, exc.strerror]) if names else exc.strerror
    return str(exc)


def run_command(prog: str, command: Callable[[], int], *, extra: str | None = None,
                also: tuple[type[BaseException], ...] = ()) -> int:
    """Run ``command()`` and return its exit code, or the code of what it raised.

    ``prog`` starts the error line (``"lsmkv kafka"``); ``extra`` is the
    package extra that provides the command's optional imports (an
    ImportError then names it; without it an ImportError is a bug);
    ``also`` names more exception classes that are the user's to act on
    (``lsmkv spark`` counts ValueError among them).
    """
    try:
        return command()
    except KeyboardInterrupt:
        return 130
    except ImportError as exc:
        if extra is None:
            raise
        print(f"{prog}: error: {exc}; install the {extra} extra: pip install 'lsmkv[{extra}]'", file=sys.stderr)
        return 1
    except (LsmkvError, OSError, *also) as exc:
        if is_closed_stdout(exc):
            raise
        print(f"{prog}: error: {describe(exc)}", file=sys.stderr)
        return 1
