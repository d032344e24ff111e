"""kafka-console-producer.sh and kafka-console-consumer.sh as Kafka's quickstart uses them, against
our broker and real Kafka: keys, headers, every compression codec through the default idempotent
producer, consumer groups that resume where they committed, and what the consumer prints."""
from __future__ import annotations

import pytest

from tests.integration.kafka_tools.tool_support import SideBySide, unique

pytestmark = pytest.mark.integration

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def test_keys_headers_and_what_the_consumer_prints(sides: SideBySide) -> None:
    topic = unique("console-keys")
    sides.create_topic(topic)
    events = "\n".join([
        "source:web,trace:1\tuser-1\tsigned up",
        "source:app\tuser-2\tlogged in",
        "NULL\tuser-1\tNULL",       # no headers, a null value (a tombstone)
        "source:NULL\tNULL\tno key",  # a header with a null value, a null key
    ]) + "\n"
    sides.same("kafka-console-producer", ["--bootstrap-server", "{bootstrap}", "--topic", topic,
                                          "--property", "parse.key=true", "--property", "parse.headers=true",
                                          "--property", "null.marker=NULL"], input=events)
    printed = sides.same("kafka-console-consumer", [
        "--bootstrap-server", "{bootstrap}", "--topic", topic, "--from-beginning", "--max-messages", "4",
        "--timeout-ms", "30000", "--property", "print.key=true", "--property", "print.headers=true",
        "--property", "print.timestamp=true", "--property", "print.partition=true",
        "--property", "print.offset=true", "--property", "null.literal=<null>"])
    assert printed.lines() == [
        "CreateTime:TS\tPartition:0\tOffset:0\tsource:web,trace:1\tuser-1\tsigned up",
        "CreateTime:TS\tPartition:0\tOffset:1\tsource:app\tuser-2\tlogged in",
        "CreateTime:TS\tPartition:0\tOffset:2\tNO_HEADERS\tuser-1\t<null>",
        "CreateTime:TS\tPartition:0\tOffset:3\tsource:<null>\t<null>\tno key",
    ]
    assert "Processed a total of 4 messages" in printed.stderr


def test_every_codec_through_the_idempotent_producer(sides: SideBySide) -> None:
    topic = unique("console-codecs")
    sides.create_topic(topic)
    for codec in CODECS:
        sides.same("kafka-console-producer", ["--bootstrap-server", "{bootstrap}", "--topic", topic,
                                              "--compression-codec", codec],
                   input="".join(f"{codec}-{i}\n" for i in range(3)))
    consumed = sides.same("kafka-console-consumer", ["--bootstrap-server", "{bootstrap}", "--topic", topic,
                                                     "--from-beginning", "--max-messages", "15", "--timeout-ms", "30000"])
    assert consumed.lines() == [f"{codec}-{i}" for codec in CODECS for i in range(3)]

    # The batches the Java producer sent, as each broker stored them: one per run, in its codec,
    # with a producer id and sequence numbers (idempotence is the producer's default).
    dumped = sides.same("kafka-dump-log", ["--deep-iteration", "--files", f"{{log_dir}}/{topic}-0/{0:020d}.log"],
                        normalise=[(r"crc: \d+", "crc: CRC"), (r"producerId: \d+", "producerId: PID"),
                                   # compressed sizes vary with the records' timestamp deltas
                                   (r"position: \d+", "position: P"), (r"size: \d+", "size: S")])
    batches = [line for line in dumped.lines() if line.startswith("baseOffset")]
    assert [b.split(" compresscodec: ")[1].split(" ")[0] for b in batches] == list(CODECS)
    assert all("producerId: PID producerEpoch: 0" in b and "baseSequence: 0 lastSequence: 2" in b for b in batches)


def test_a_group_resumes_where_it_committed(sides: SideBySide) -> None:
    topic, group = unique("console-group"), unique("console-group")
    sides.create_topic(topic, partitions=2)
    sides.same("kafka-console-producer", ["--bootstrap-server", "{bootstrap}", "--topic", topic,
                                          "--property", "parse.key=true", "--property", "key.separator=:"],
               input="".join(f"k{i % 2}:event-{i}\n" for i in range(6)))
    consume = ["--bootstrap-server", "{bootstrap}", "--topic", topic, "--group", group, "--timeout-ms", "30000",
               "--property", "print.partition=true"]
    first = sides.same("kafka-console-consumer", [*consume, "--from-beginning", "--max-messages", "6"], sort=True)
    partition_of = {line.split("\t")[1]: line.split("\t")[0] for line in first.lines()}
    assert sorted(partition_of) == [f"event-{i}" for i in range(6)]
    assert len({partition_of[f"event-{i}"] for i in range(0, 6, 2)}) == 1  # one key, one partition
    # Everything was committed when the consumer closed: a second run of the group sees only new events.
    sides.same("kafka-console-producer", ["--bootstrap-server", "{bootstrap}", "--topic", topic],
               input="later\n")
    second = sides.same("kafka-console-consumer", [*consume, "--max-messages", "1"],
                        normalise=[(r"Partition:\d", "Partition:P")])  # a keyless record's partition is random
    assert second.lines()[0] == "Partition:P\tlater"
