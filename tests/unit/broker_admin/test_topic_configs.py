from __future__ import annotations

import pytest

from broker.admin.topic_configs import TOPIC_CONFIG_DEFS, TopicConfigError, java_double, to_config_string, validate_topic_config
from broker.config_defs import ConfigType


def test_valid_overrides_are_parsed_to_kafka_types() -> None:
    parsed = validate_topic_config({"retention.ms": " 1000 ", "cleanup.policy": "compact, delete",
                                    "min.cleanable.dirty.ratio": "0.25", "preallocate": "TRUE"})
    assert parsed == {"retention.ms": 1000, "cleanup.policy": ["compact", "delete"],
                      "min.cleanable.dirty.ratio": 0.25, "preallocate": True}


@pytest.mark.parametrize(
    ("props", "message", "unknown"),
    [
        ({"retention.mss": "1"}, "Unknown topic config name: retention.mss", True),
        ({"retention.ms": "abc"}, "Invalid value abc for configuration retention.ms: Not a number of type LONG", False),
        ({"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms: Value must be at least -1", False),
        ({"segment.bytes": "2147483648"}, "Not a number of type INT", False),
        ({"cleanup.policy": "compact,shred"}, "Invalid value shred for configuration cleanup.policy: String must be one of: compact, delete", False),
        ({"compression.type": "brotli"}, "String must be one of: uncompressed", False),
        ({"preallocate": "yes"}, "Expected value to be either true or false", False),
        ({"min.cleanable.dirty.ratio": "2"}, "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1", False),
        ({"compression.gzip.level": "0"}, "Value must be between 1 and 9 or equal to -1", False),
        ({"leader.replication.throttled.replicas": "0:1,x"}, "[partitionId]:[brokerId]", False),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "conflict topic config setting", True),
    ],
)
def test_invalid_overrides(props: dict[str, str], message: str, unknown: bool) -> None:
    with pytest.raises(TopicConfigError) as info:
        validate_topic_config(props)
    assert message in str(info.value)
    assert info.value.unknown_name is unknown


def test_throttled_replicas_accept_star_and_pairs() -> None:
    assert validate_topic_config({"follower.replication.throttled.replicas": "*"})
    assert validate_topic_config({"follower.replication.throttled.replicas": "0:1,1:2"})


def test_config_strings_match_java() -> None:
    assert to_config_string(["delete", "compact"], ConfigType.LIST) == "delete,compact"
    assert to_config_string(False, ConfigType.BOOLEAN) == "false"
    assert to_config_string(0.5, ConfigType.DOUBLE) == "0.5"
    assert java_double(1.7976931348623157e308) == "1.7976931348623157E308"
    assert java_double(1.0) == "1.0"
    assert to_config_string(None, ConfigType.STRING) is None


def test_every_default_round_trips_through_its_own_parser() -> None:
    for name, definition in TOPIC_CONFIG_DEFS.items():
        text = to_config_string(definition.default, definition.type)
        assert definition.parse(text) == definition.default, name
