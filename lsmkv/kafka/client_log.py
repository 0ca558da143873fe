"""ClientLog: what a Kafka client reports, in Python logging, without floods.

librdkafka reports trouble through two channels, and often: a log line for
every failed connection attempt (confluent-kafka's ``logger`` setting) and
an error event (``error_cb``). With the servers down that is a line every
few tens of milliseconds for as long as the outage lasts (measured: 583
lines in 25 s from a batch load against a closed port). The loader's own
consumer errors (a topic that is missing, an offset the broker lost)
recur the same way.

A ClientLog logs the first line of each kind of report at WARNING or
above, counts the ones like it that follow, and then says how many there
were: when that kind has not recurred for ``QUIET`` seconds (checked on
the next report, or when the owner calls :meth:`tick`), when the owner
knows the client works again (:meth:`settle`, e.g. on a group
assignment), and at growing intervals while it goes on (``REMINDER``,
doubling up to ``MAX_REMINDER``). A kind is a librdkafka log line's
facility and level (``FAIL``: a connection failed), or the key the owner
gives to :meth:`note` (an error code). Lines below WARNING (librdkafka's
``debug`` output, asked for with ``-X debug=...``) pass through as they
are. An object of this class is what confluent-kafka's ``logger``
setting takes (it calls :meth:`log`).

This module only logs; it decides nothing (a fatal error is the owner's
to act on) and never prints.
"""

from __future__ import annotations

import logging
import threading
import time

#: librdkafka's own log lines go here (never to the terminal directly).
CLIENT_LOG = logging.getLogger("lsmkv.kafka.librdkafka")

#: Seconds without a report of a kind before that kind counts as over. It
#: must exceed librdkafka's longest pause between two connection attempts
#: (``reconnect.backoff.max.ms``, 10 s, plus up to 50 % jitter), or an
#: outage that goes on would be logged anew after every pause.
QUIET = 30.0
#: Seconds after the first line of a kind that goes on before the first
#: reminder with the count so far; each reminder doubles the wait, up to
#: MAX_REMINDER.
REMINDER = 60.0
MAX_REMINDER = 3600.0


class _Run:
    """Reports of one kind since its first line was logged."""

    __slots__ = ("level", "text", "first", "last", "repeats", "reminder_at", "reminder_every")

    def __init__(self, level: int, text: str, now: float, reminder: float) -> None:
        self.level = level
        self.text = text
        self.first = self.last = now
        #: Reports after the first one (not logged, counted).
        self.repeats = 0
        self.reminder_every = reminder
        self.reminder_at = now + reminder


class ClientLog:
    """Logs to ``logger`` (with ``prefix`` before each line) the first report
    of each kind and then how many followed it. Safe from any thread."""

    def __init__(self, logger: logging.Logger = CLIENT_LOG, prefix: str = "", *, quiet: float = QUIET,
                 reminder: float = REMINDER) -> None:
        self._logger = logger
        self._prefix = prefix
        self._quiet = quiet
        self._reminder = reminder
        self._runs: dict[object, _Run] = {}
        self._lock = threading.Lock()

    def log(self, level: int, msg: str, *args) -> None:
        """A librdkafka log line (confluent-kafka calls this with
        ``"%s [%s] %s", facility, client name, text``)."""
        text = msg % args if args else msg
        if level < logging.WARNING:
            self._logger.log(level, "%s%s", self._prefix, text)
            return
        facility = args[0] if len(args) == 3 else text
        self.note(("log", facility, level), level, text)

    def note(self, kind: object, level: int, text: str) -> None:
        """Report ``text`` at ``level``: logged if it is the first of
        ``kind`` (or the first after ``kind`` went quiet), else counted."""
        now = time.monotonic()
        lines = []
        with self._lock:
            run = self._runs.get(kind)
            if run is not None and now - run.last > self._quiet:
                del self._runs[kind]
                lines += self._ended(run, now)
                run = None
            if run is None:
                self._runs[kind] = _Run(level, text, now, self._reminder)
                lines.append((level, text))
            else:
                run.repeats += 1
                run.last = now
                if now >= run.reminder_at:
                    lines.append((run.level, f"{run.text} (still: {run.repeats:,} more like it in "
                                             f"{now - run.first:,.0f} s)"))
                    run.reminder_every = min(2 * run.reminder_every, MAX_REMINDER)
                    run.reminder_at = now + run.reminder_every
        self._emit(lines)

    def tick(self) -> None:
        """Say how many followed each kind that has gone quiet (call it now
        and then: without it a kind's count is said only when it recurs)."""
        now = time.monotonic()
        with self._lock:
            over = [kind for kind, run in self._runs.items() if now - run.last > self._quiet]
            lines = [line for kind in over for line in self._ended(self._runs.pop(kind), now)]
        self._emit(lines)

    def settle(self) -> None:
        """The client works again: say how many followed each kind seen so
        far, and log the next report of any kind as a first one."""
        now = time.monotonic()
        with self._lock:
            runs, self._runs = list(self._runs.values()), {}
            lines = [line for run in runs for line in self._ended(run, now)]
        self._emit(lines)

    @property
    def kinds(self) -> int:
        """Kinds of report seen and not yet over."""
        return len(self._runs)

    @staticmethod
    def _ended(run: _Run, now: float) -> list[tuple[int, str]]:
        if not run.repeats:
            return []
        return [(run.level, f"{run.repeats:,} more like this over {run.last - run.first:,.0f} s, the last "
                            f"{now - run.last:,.0f} s ago: {run.text}")]

    def _emit(self, lines: list[tuple[int, str]]) -> None:
        for level, text in lines:
            self._logger.log(level, "%s%s", self._prefix, text)
