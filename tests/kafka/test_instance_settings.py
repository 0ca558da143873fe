"""InstanceSettings (lsmkv/kafka/scaleout/instance_settings.py): the
defaults, what it derives (the loader's settings, the lag-aware knobs),
and every rule it checks, each error naming the settings it is about (and
worded as `lsmkv kafka load`'s flags by the command line). No broker: the
settings never connect to anything."""

from __future__ import annotations

import dataclasses
import math

import pytest

from lsmkv.kafka import InstanceSettings, LoaderSettings, ServingInstance, SettingError, SettingUsageError
from lsmkv.kafka.scaleout import assignor, coordination
from lsmkv.kafka.scaleout.instance_settings import (DEFAULT_ACCEPTABLE_RECOVERY_LAG, DEFAULT_MAX_WARMUP_REPLICAS,
                                                    DEFAULT_PROBING_INTERVAL)
from lsmkv.kafka.tools.cli import _load_flag, build_parser


def upper(record):
    return record.key, record.value.upper()


def settings(**knobs) -> InstanceSettings:
    return InstanceSettings(**{"topics": "t", "group": "g", "db": "unused-dir", "bootstrap_servers": "h:1", **knobs})


def test_the_defaults_are_the_loaders_and_the_scale_out_ones_are_defined_once():
    s = settings()
    assert s.topics == ("t",) and s.engine == "lsm" and not s.partitioned_state and s.address() is None
    loader = s.loader_settings()
    defaults = LoaderSettings(bootstrap_servers="h:1", topics=["t"], group="g")
    assert loader == defaults   # every loader knob left at its default derives LoaderSettings' defaults
    assert s.lag_aware() == {"standby_replicas": 0, "acceptable_recovery_lag": DEFAULT_ACCEPTABLE_RECOVERY_LAG,
                             "max_warmup_replicas": DEFAULT_MAX_WARMUP_REPLICAS,
                             "probing_interval": DEFAULT_PROBING_INTERVAL}
    # The assignor and the coordination take their defaults from the settings module.
    assert assignor.DEFAULT_ACCEPTABLE_RECOVERY_LAG is DEFAULT_ACCEPTABLE_RECOVERY_LAG
    assert assignor.DEFAULT_MAX_WARMUP_REPLICAS is DEFAULT_MAX_WARMUP_REPLICAS
    assert coordination.DEFAULT_PROBING_INTERVAL is DEFAULT_PROBING_INTERVAL


def test_the_knobs_given_derive_the_loaders_settings_and_the_lag_aware_ones():
    s = settings(topics=["orders"], linger_ms=20, retry_backoff_ms=250, concurrency=8, until_caught_up=True,
                 startup_timeout=3, processor=f"{__name__}:upper", client_config={"client.id": "x"},
                 store_options={"block_size": 8192}, serve="127.0.0.1:0", standby_replicas=0,
                 acceptable_recovery_lag=5, max_warmup_replicas=0, probing_rebalance_interval=0.5,
                 changelog=True, partitioner="murmur2_random")
    loader = s.loader_settings()
    assert (loader.linger, loader.retry_backoff, loader.concurrency) == (0.02, 0.25, 8)
    assert loader.topics == ["orders"] and loader.until_caught_up and loader.startup_wait == 3
    assert loader.processor is upper and s.processor is upper   # the text was imported once, when made
    assert loader.client_config == {"client.id": "x"} and loader.changelog and loader.partitioner == "murmur2_random"
    assert s.address() == ("127.0.0.1", 0) and s.partitioned_state
    assert s.lag_aware() == {"standby_replicas": 0, "acceptable_recovery_lag": 5, "max_warmup_replicas": 0,
                             "probing_interval": 0.5}


def test_the_settings_are_frozen_and_keep_the_client_settings_out_of_their_repr():
    s = settings(client_config={"sasl.password": "hush"}, store_options={"block_size": 4096})
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.group = "other"
    with pytest.raises(TypeError):
        s.store_options["block_size"] = 1
    assert "hush" not in repr(s) and "block_size" in repr(s)
    assert dataclasses.replace(s, group="h").group == "h"


# Each rule: the knobs set, the error's class, the knobs its message names, a piece of it.
USAGE_RULES = [
    ({"changelog": True}, ["changelog", "partitioned", "serve"], "needs partitioned state"),
    ({"partitioner": "murmur2"}, ["partitioner", "partitioned", "serve"], "needs partitioned state"),
    ({"standby_replicas": -1}, ["standby_replicas"], "must be 0 or more, not -1"),
    ({"standby_replicas": "2", "serve": "127.0.0.1:0"}, ["standby_replicas"], "must be 0 or more, not '2'"),
    ({"standby_replicas": 1}, ["standby_replicas", "serve"], "needs serve"),
    ({"standby_replicas": 1, "serve": "127.0.0.1:0", "processor": upper}, ["standby_replicas", "processor"],
     "does not go with processor"),
    ({"acceptable_recovery_lag": 5}, ["acceptable_recovery_lag", "serve"], "needs serve"),
    ({"max_warmup_replicas": 1}, ["max_warmup_replicas", "serve"], "needs serve"),
    ({"probing_rebalance_interval": 1.0}, ["probing_rebalance_interval", "serve"], "needs serve"),
    ({"acceptable_recovery_lag": -1, "serve": "127.0.0.1:0"}, ["acceptable_recovery_lag"], "must be 0 or more"),
    ({"max_warmup_replicas": 1.5, "serve": "127.0.0.1:0"}, ["max_warmup_replicas"], "must be 0 or more, not 1.5"),
    ({"probing_rebalance_interval": 0, "serve": "127.0.0.1:0"}, ["probing_rebalance_interval"],
     "must be a positive number of seconds, not 0"),
    ({"probing_rebalance_interval": math.inf, "serve": "127.0.0.1:0"}, ["probing_rebalance_interval"],
     "positive number of seconds"),
    ({"probing_rebalance_interval": "1", "serve": "127.0.0.1:0"}, ["probing_rebalance_interval"],
     "not '1'"),
    ({"serve": "127.0.0.1:0", "client_config": {"sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "k"}},
     ["serve", "client_config"], "no equivalent of sasl.kerberos.service.name, sasl.mechanism=GSSAPI;"),
]

VALUE_RULES = [
    ({"serve": "localhost"}, ["serve"], "needs HOST:PORT (e.g. 127.0.0.1:8080), not 'localhost'"),
    ({"serve": "127.0.0.1:99999"}, ["serve"], "needs HOST:PORT"),
    ({"serve": 8080}, ["serve"], "must be text or None"),
    ({"advertise": ""}, ["advertise"], "must be text or None"),
    ({"linger_ms": -1}, ["linger_ms"], "number of milliseconds of at least 0, not -1"),
    ({"linger_ms": math.nan}, ["linger_ms"], "number of milliseconds"),
    ({"retry_backoff_ms": 20_000}, ["retry_backoff_ms"], "at most 10000"),
    ({"processor": "nocolon"}, ["processor"], "must be given as module:function"),
    ({"processor": "no_such_module_here_x:f"}, ["processor"], "cannot be imported"),
    ({"processor": f"{__name__}:missing"}, ["processor"], "has no 'missing'"),
    ({"processor": 5}, ["processor"], "must be a callable or module:function text, not int"),
    ({"topics": []}, ["topics"], "non-empty list of topic names"),
    ({"topics": ["a", "a"]}, ["topics"], "listed twice"),
    ({"topics": 7}, ["topics"], "a topic name or a list of them"),
    ({"topics": ["a", "b"], "partitioned": True}, ["topics"], "partitioned state holds one topic"),
    ({"topics": ["a", "b"], "serve": "127.0.0.1:0"}, ["topics"], "partitioned state holds one topic"),
    ({"group": ""}, ["group"], "non-empty consumer group id"),
    ({"db": ""}, ["db"], "must be a directory path"),
    ({"bootstrap_servers": " "}, ["bootstrap_servers"], "HOST:PORT[,...]"),
    ({"engine": "rocks"}, ["engine"], "must be one of lsm, btree, not 'rocks'"),
    ({"store_options": [("a", 1)]}, ["store_options"], "mapping of setting names"),
    ({"client_config": {1: "x"}}, ["client_config"], "mapping of setting names"),
    ({"client_config": {"enable.auto.commit": True}}, ["client_config"], "may not set enable.auto.commit"),
    ({"until_caught_up": "yes"}, ["until_caught_up"], "True or False"),
    ({"partitioned": 1}, ["partitioned"], "True or False"),
    ({"changelog": None}, ["changelog"], "True or False"),
    ({"concurrency": 0}, ["concurrency"], "int of at least 1, not 0"),
    ({"max_pending": 0}, ["max_pending"], "at least 1"),
    ({"batch_records": 0}, ["batch_records"], "at least 1"),
    ({"batch_bytes": 1.5}, ["batch_bytes"], "int of at least 1"),
    ({"max_retries": -1}, ["max_retries"], "at least 0"),
    ({"commit_interval": 0}, ["commit_interval"], "seconds of at least 0.001"),
    ({"revoke_timeout": -1}, ["revoke_timeout"], "seconds"),
    ({"startup_timeout": 0}, ["startup_timeout"], "seconds of at least 0.001"),
    ({"dlq_topic": "t"}, ["dlq_topic"], "other than the source topics"),
    ({"session_timeout_ms": 10}, ["session_timeout_ms"], "at least 1000"),
    ({"heartbeat_interval_ms": 3000}, ["heartbeat_interval_ms", "session_timeout_ms"], "at most a third"),
    ({"partitioner": "crc32", "partitioned": True}, ["partitioner"], "one of librdkafka's"),
]


def _knobs_id(knobs: dict) -> str:
    """A test id that is the same in every process (a function's repr holds its address)."""
    return ",".join(f"{k}={getattr(v, '__qualname__', v)}" for k, v in knobs.items())


@pytest.mark.parametrize("knobs, named, text", USAGE_RULES, ids=[_knobs_id(r[0]) for r in USAGE_RULES])
def test_a_knob_used_where_the_instance_cannot_take_it_is_a_usage_error_naming_it(knobs, named, text):
    with pytest.raises(SettingUsageError) as refused:
        settings(**knobs)
    assert refused.value.knobs == named and text in str(refused.value)


@pytest.mark.parametrize("knobs, named, text", VALUE_RULES, ids=[_knobs_id(r[0]) for r in VALUE_RULES])
def test_a_bad_value_is_a_setting_error_naming_the_knob(knobs, named, text):
    with pytest.raises(SettingError) as refused:
        settings(**knobs)
    assert type(refused.value) is SettingError   # not a usage error: the command line exits 1
    assert refused.value.knobs == named and text in str(refused.value)


def test_the_errors_are_worded_with_the_command_lines_flags():
    with pytest.raises(SettingUsageError) as refused:
        settings(standby_replicas=1, serve="127.0.0.1:0", processor=upper)
    assert refused.value.worded(_load_flag).startswith("--standby-replicas does not go with --processor: ")
    with pytest.raises(SettingError) as refused:   # the loader's knob in seconds, named as the instance's
        settings(linger_ms=-5)
    assert refused.value.worded(_load_flag) == "--linger-ms must be a number of milliseconds of at least 0, not -5"
    with pytest.raises(SettingError) as refused:   # braces in a value stay as they are
        settings(topics=["{x}", "{x}"])
    assert refused.value.worded(_load_flag) == "--topic are listed twice: ['{x}', '{x}']"


def test_every_knob_is_a_flag_of_lsmkv_kafka_load():
    load = build_parser()._subparsers._group_actions[0].choices["load"]
    flags = {flag for action in load._actions for flag in action.option_strings}
    assert [knob for knob in InstanceSettings.knobs() if _load_flag(knob) not in flags] == []


def test_setting_errors_rename_their_knobs_keeping_literal_braces():
    error = SettingUsageError("{a} goes with {b}, not " + SettingError.literal("{'c': 1}"))
    assert str(error) == "a goes with b, not {'c': 1}"
    renamed = error.renamed({"a": "x"})
    assert type(renamed) is SettingUsageError and renamed.knobs == ["x", "b"]
    assert renamed.worded(str.upper) == "X goes with B, not {'c': 1}"


def test_an_instance_takes_only_instance_settings():
    with pytest.raises(TypeError, match="settings must be InstanceSettings, not LoaderSettings"):
        ServingInstance(LoaderSettings(bootstrap_servers="h:1", topics=["t"], group="g"))
