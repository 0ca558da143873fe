"""ClientLog on its own (no broker): the first report of a kind is logged,
the ones after it counted, and the count logged when the kind goes quiet,
when the owner settles it, and in reminders while it goes on; lines below
WARNING pass through; librdkafka's calling convention (facility, client
name, text) keys a kind by facility."""

from __future__ import annotations

import logging
import time

import pytest

from lsmkv.kafka.client_log import ClientLog


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.levelno, record.getMessage()))


def _logger(name: str) -> tuple[logging.Logger, _Lines]:
    logger = logging.getLogger(f"lsmkv.tests.client_log.{name}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    lines = _Lines()
    logger.addHandler(lines)
    return logger, lines


def _fail(n: int) -> tuple:
    # What confluent-kafka passes to a `logger` for one librdkafka log line.
    return (logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#consumer-1",
            f"[thrd:127.0.0.1:1/bootstrap]: Connect to ipv4#127.0.0.1:1 failed (after {n}ms in state CONNECT)")


def test_the_first_line_of_a_kind_is_logged_and_the_rest_counted_until_settled():
    logger, lines = _logger("settle")
    client_log = ClientLog(logger, "loader: ")
    for n in range(500):
        client_log.log(*_fail(n))
    client_log.note(-195, logging.WARNING, "kafka client: transport failure")
    client_log.note(-195, logging.WARNING, "kafka client: transport failure")
    client_log.log(logging.DEBUG, "%s [%s] %s", "BROKER", "rdkafka#consumer-1", "a debug line")
    client_log.log(logging.DEBUG, "%s [%s] %s", "BROKER", "rdkafka#consumer-1", "a debug line")
    assert lines.lines == [
        (logging.ERROR, "loader: FAIL [rdkafka#consumer-1] [thrd:127.0.0.1:1/bootstrap]: Connect to "
                        "ipv4#127.0.0.1:1 failed (after 0ms in state CONNECT)"),
        (logging.WARNING, "loader: kafka client: transport failure"),
        (logging.DEBUG, "loader: BROKER [rdkafka#consumer-1] a debug line"),   # below WARNING: every one
        (logging.DEBUG, "loader: BROKER [rdkafka#consumer-1] a debug line"),
    ]
    assert client_log.kinds == 2
    del lines.lines[:]
    client_log.settle()
    assert [level for level, _ in lines.lines] == [logging.ERROR, logging.WARNING]
    assert lines.lines[0][1].startswith("loader: 499 more like this over ")
    assert lines.lines[0][1].endswith("ago: FAIL [rdkafka#consumer-1] [thrd:127.0.0.1:1/bootstrap]: Connect to "
                                      "ipv4#127.0.0.1:1 failed (after 0ms in state CONNECT)")
    assert lines.lines[1][1].startswith("loader: 1 more like this over ")
    assert client_log.kinds == 0
    del lines.lines[:]
    client_log.log(*_fail(7))   # after settling: a first line again
    assert lines.lines == [(logging.ERROR, "loader: FAIL [rdkafka#consumer-1] [thrd:127.0.0.1:1/bootstrap]: "
                                           "Connect to ipv4#127.0.0.1:1 failed (after 7ms in state CONNECT)")]


@pytest.mark.slow
def test_a_kind_that_goes_quiet_is_counted_then_logged_anew():
    logger, lines = _logger("quiet")
    client_log = ClientLog(logger, quiet=1.0)
    client_log.log(*_fail(0))
    client_log.log(*_fail(1))
    client_log.log(*_fail(2))
    client_log.tick()   # not quiet yet
    assert len(lines.lines) == 1
    time.sleep(1.2)
    client_log.tick()
    assert len(lines.lines) == 2 and lines.lines[1][1].startswith("2 more like this over ")
    client_log.tick()
    assert len(lines.lines) == 2   # said once
    client_log.log(*_fail(3))   # comes back: a first line again
    assert len(lines.lines) == 3 and lines.lines[2][1].endswith("(after 3ms in state CONNECT)")
    client_log.log(*_fail(4))
    time.sleep(1.2)
    client_log.log(*_fail(5))   # quiet, then again: the old run's count, then a first line
    assert [text.split(" more like")[0] for _, text in lines.lines[3:]] == ["1", lines.lines[4][1]]
    assert lines.lines[4][1].endswith("(after 5ms in state CONNECT)")
    client_log.tick()
    assert len(lines.lines) == 5   # a single report has no count to say


def test_a_kind_that_goes_on_is_recalled_at_doubling_intervals():
    logger, lines = _logger("reminder")
    client_log = ClientLog(logger, reminder=0.2)
    client_log.log(*_fail(0))
    deadline = time.monotonic() + 0.7
    while time.monotonic() < deadline:
        client_log.log(*_fail(1))
        time.sleep(0.01)
    reminders = [text for _, text in lines.lines[1:]]
    # at about 0.2 s and 0.6 s (the interval doubles), not at every report
    assert 1 <= len(reminders) <= 2, reminders
    assert all(" more like it in " in text and text.startswith("FAIL [rdkafka#consumer-1]") for text in reminders)
