"""A group's __consumer_offsets partition must be the one Kafka computes."""
from __future__ import annotations

import pytest

from broker.coordinator.internal_topic import java_string_hash, kafka_abs, partition_for


@pytest.mark.parametrize("value, expected", [
    ("", 0),
    ("a", 97),
    ("abc", 96354),
    ("hello", 99162322),
    ("Hello World", -862545276),  # overflows to negative
    ("Aa", 2112), ("BB", 2112),  # Java's classic collision
    ("polygenelubricants", -(1 << 31)),  # hashes to Integer.MIN_VALUE
    ("\u00e9", 0xE9),  # one UTF-16 unit, not two UTF-8 bytes
    ("\U0001F600", 31 * 0xD83D + 0xDE00),  # a surrogate pair counts as two units
])
def test_java_string_hash_code(value: str, expected: int) -> None:
    assert java_string_hash(value) == expected


def test_kafka_abs_maps_min_value_to_zero() -> None:
    assert kafka_abs(-(1 << 31)) == 0
    assert kafka_abs(-5) == 5 and kafka_abs(7) == 7


@pytest.mark.parametrize("group, partitions, expected", [
    ("Hello World", 50, 862545276 % 50),
    ("polygenelubricants", 50, 0),
    ("hello", 50, 99162322 % 50),
    ("abc", 7, 96354 % 7),
])
def test_partition_for(group: str, partitions: int, expected: int) -> None:
    assert partition_for(group, partitions) == expected
