"""What a command does when the reader of its output goes away.

``lsmkv scan DB | head -1``: ``head`` reads one line and exits, and the next
write to stdout fails with EPIPE (Python ignores SIGPIPE, so it arrives as
BrokenPipeError). Every ``lsmkv`` command then ends quietly with exit code 0,
as Unix tools do for ``head``'s users: :func:`exits_quietly_on_closed_stdout`
wraps each command line's ``main``; it flushes stdout before returning (a
closed pipe found by the last flush is one too) and points stdout at
/dev/null, so the interpreter's own flush at exit has nowhere to fail (the
recipe of the Python documentation, "Note on SIGPIPE").

Only a closed *stdout* is quiet: a BrokenPipeError of a socket (a broker, a
serving instance that went away) is an error like any other, so the commands'
error handlers re-raise only what :func:`is_closed_stdout` recognises.
"""

from __future__ import annotations

import errno
import functools
import os
import select
import sys
from typing import Any, Callable

__all__ = ["exits_quietly_on_closed_stdout", "is_closed_stdout", "pipe_aware_console"]


def is_closed_stdout(exc: BaseException) -> bool:
    """Whether ``exc`` is the failed write of a stdout whose reader has gone."""
    if not isinstance(exc, BrokenPipeError):
        return False
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    if not hasattr(select, "poll"):
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    # A pipe (or socket) without a reader polls as an error or a hang-up.
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _stdout_to_devnull() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


def exits_quietly_on_closed_stdout(main: Callable[..., int]) -> Callable[..., int]:
    """``main``, ending with exit code 0 (and nothing on stderr) if stdout's reader goes away."""

    @functools.wraps(main)
    def run(*args: Any, **kwargs: Any) -> int:
        try:
            code = main(*args, **kwargs)
            sys.stdout.flush()
            return code
        except BrokenPipeError as exc:
            if not is_closed_stdout(exc):
                raise
            _stdout_to_devnull()
            return 0
    return run


@functools.cache
def _pipe_aware_console_class() -> type:
    from rich.console import Console

    class PipeAwareConsole(Console):
        """rich's Console, raising BrokenPipeError on a closed stdout (rich's
        own choice is SystemExit(1)), which the command's main turns into a
        quiet exit 0."""

        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    return PipeAwareConsole


def pipe_aware_console(**options: Any) -> Any:
    """A ``rich.console.Console(**options)`` whose closed stdout ends the command quietly."""
    return _pipe_aware_console_class()(**options)
