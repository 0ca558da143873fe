"""The Kafka integration's errors: part of lsmkv's one hierarchy (lsmkv/base/errors.py).

Bad settings raise :class:`SettingError`, an
:class:`~lsmkv.base.errors.OptionError` (a ValueError) as the engines' options
raise, whose message names the settings so that a command line can name its
flags instead (LoaderSettings, settings.py; InstanceSettings,
scaleout/instance_settings.py); what goes wrong while running raises the other
classes here. The CLI turns any of them into one line and exit code 1 (2 for a
:class:`SettingUsageError`, as for its other usage errors).
"""

from __future__ import annotations

import string
from typing import Callable

from lsmkv.base.errors import LsmkvError, OptionError


class SettingError(OptionError):
    """A setting refused (LoaderSettings, InstanceSettings). The message is
    ``template`` with each setting it names written ``{knob}``: ``str()``
    calls the settings by their knob names, :meth:`worded` by other names
    (a command line's flags)."""

    def __init__(self, template: str) -> None:
        self.template = template
        super().__init__(self.worded(lambda knob: knob))

    @property
    def knobs(self) -> list[str]:
        """The settings the message names, in order."""
        return [field for _, field, _, _ in string.Formatter().parse(self.template) if field]

    def worded(self, name: Callable[[str], str]) -> str:
        """The message, each setting it names called ``name(knob)``."""
        return self.template.format_map({knob: name(knob) for knob in self.knobs})

    def renamed(self, names: dict[str, str]) -> SettingError:
        """The same error (same class), the settings of ``names`` called by
        their values: the error of one settings object told in the knobs
        of another that derives it."""
        template = "".join(literal.replace("{", "{{").replace("}", "}}")
                           + ("{" + names.get(knob, knob) + "}" if knob else "")
                           for literal, knob, _, _ in string.Formatter().parse(self.template))
        return type(self)(template)

    @staticmethod
    def literal(value: object) -> str:
        """``value`` as text to put in a template (its braces kept as they are)."""
        return str(value).replace("{", "{{").replace("}", "}}")


class SettingUsageError(SettingError):
    """A setting used where the instance cannot take it: without the setting
    it needs, beside one it does not go with, or (a count, an interval) out
    of its range."""


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
