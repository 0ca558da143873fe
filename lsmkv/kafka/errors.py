"""The Kafka integration's errors: part of lsmkv's one hierarchy (lsmkv/base/errors.py).

Bad settings raise :class:`~lsmkv.base.errors.OptionError` (a ValueError), as the
engines' options do; what goes wrong while running raises the classes here.
The CLI turns any of them into one line and exit code 1.
"""

from __future__ import annotations

from lsmkv.base.errors import LsmkvError


class KafkaIntegrationError(LsmkvError):
    """Base of the Kafka integration's runtime errors."""


class BrokerError(KafkaIntegrationError):
    """The embedded broker could not be started, or stopped unexpectedly."""


class LoaderError(KafkaIntegrationError):
    """The loader cannot go on: the store keeps failing writes, or the
    consumer hit a fatal error. Nothing acknowledged is lost: the store's
    offsets name exactly what it holds, so a restart resumes there."""


class ProducerError(KafkaIntegrationError):
    """Records could not be delivered (the producer reports how many)."""


class StartupError(KafkaIntegrationError):
    """A load cannot start: the servers did not answer, or a topic does not
    exist, within the start-up timeout (checked before any store is opened
    or created). ``servers`` and ``topics`` name what was asked for and is
    missing."""

    def __init__(self, message: str, *, servers: str, topics: list[str] | None = None) -> None:
        super().__init__(message)
        self.servers = servers
        self.topics = list(topics or [])


class ServersUnreachableError(StartupError):
    """No server of ``bootstrap_servers`` answered within the start-up timeout."""


class TopicNotFoundError(StartupError):
    """The servers answered, but a topic to load does not exist on them."""
