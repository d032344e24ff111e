#!/usr/bin/env python3
"""Microbenchmarks of the protocol message codec (the broker's per-request hot path).

Prints microseconds per operation and the exact command line that produced them.
Run from the repository root: python bench/protocol_bench.py [--repeat N]
"""

from __future__ import annotations

import argparse
import shlex
import sys
import timeit
import uuid
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import bench_json  # noqa: E402
from protocol.api_keys import ApiKey  # noqa: E402
from protocol.headers import encode_request_header, parse_request_header  # noqa: E402
from protocol.messages import FetchResponse, MetadataResponse, ProduceRequest  # noqa: E402

MIB = 1 << 20


class _FileSlice:
    """Stands in for storage's FileRecords: only its length is needed for encode_parts."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length


def produce_request_frame() -> tuple[bytes, int]:
    """Produce v9 body with 4 topics x 4 partitions x 64 KiB of (opaque) batches = 1 MiB."""
    chunk = bytes(range(256)) * 256  # 64 KiB
    request = ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[
        ProduceRequest.TopicProduceData(name=f"topic-{t}", partition_data=[
            ProduceRequest.PartitionProduceData(index=p, records=chunk) for p in range(4)])
        for t in range(4)])
    return bytes(request.encode(9)), 9


def fetch_response(records: Any) -> FetchResponse:
    """Fetch v12 response: 4 topics x 4 partitions, each with the given records."""
    return FetchResponse(session_id=7, responses=[
        FetchResponse.FetchableTopicResponse(topic=f"topic-{t}", partitions=[
            FetchResponse.PartitionData(partition_index=p, high_watermark=1000, last_stable_offset=1000,
                                        log_start_offset=0, records=records) for p in range(4)])
        for t in range(4)])


def metadata_response() -> MetadataResponse:
    """Metadata v12: 3 brokers, 10 topics x 100 partitions = 1,000 partitions, RF 3."""
    brokers = [MetadataResponse.MetadataResponseBroker(node_id=i, host=f"broker-{i}.example.com", port=9092,
                                                       rack=None) for i in range(3)]
    topics = [MetadataResponse.MetadataResponseTopic(
        name=f"topic-{t}", topic_id=uuid.UUID(int=t + 1), partitions=[
            MetadataResponse.MetadataResponsePartition(
                partition_index=p, leader_id=p % 3, leader_epoch=5, replica_nodes=[p % 3, (p + 1) % 3, (p + 2) % 3],
                isr_nodes=[p % 3, (p + 1) % 3, (p + 2) % 3]) for p in range(100)])
        for t in range(10)]
    return MetadataResponse(brokers=brokers, cluster_id="cluster-1", controller_id=0, topics=topics)


ROWS: list[dict[str, Any]] = []


def bench(label: str, fn: Callable[[], Any], repeat: int) -> None:
    fn()  # warm up (generates the codec)
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    best = min(timer.repeat(repeat=repeat, number=number)) / number
    print(f"{label:<62} {best * 1e6:12.2f} us/op")
    ROWS.append({"name": label, "value": best * 1e6})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5, help="timing repeats; the best is reported")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON (for bench/charts.py)")
    args = parser.parse_args()
    print("command:", shlex.join([sys.executable, *sys.argv]))
    print(f"python {sys.version.split()[0]}; best of {args.repeat}")

    produce, produce_version = produce_request_frame()
    bench(f"decode Produce v{produce_version} request, 16 partitions, 1 MiB records",
          lambda: ProduceRequest.decode(produce, produce_version), args.repeat)

    fetch = fetch_response(bytes(MIB // 16))
    bench("encode Fetch v12 response, 16 partitions, 1 MiB records", lambda: fetch.encode(12), args.repeat)
    fetch_zero_copy = fetch_response(_FileSlice(MIB // 16))
    bench("encode_parts Fetch v12 response, 1 MiB as file slices", lambda: fetch_zero_copy.encode_parts(12),
          args.repeat)

    metadata = metadata_response()
    encoded = bytes(metadata.encode(12))
    bench("encode Metadata v12 response, 1,000 partitions", lambda: metadata.encode(12), args.repeat)
    bench("decode Metadata v12 response, 1,000 partitions", lambda: MetadataResponse.decode(encoded, 12),
          args.repeat)
    bench("encode+decode Metadata v12 response, 1,000 partitions",
          lambda: MetadataResponse.decode(metadata.encode(12), 12), args.repeat)

    header = encode_request_header(ApiKey.FETCH, 16, 12345, "consumer-client-1") + b"body"
    bench("parse request header (Fetch v16, header v2)", lambda: parse_request_header(header), args.repeat)
    header_v1 = encode_request_header(ApiKey.PRODUCE, 8, 12345, "producer-1") + b"body"
    bench("parse request header (Produce v8, header v1)", lambda: parse_request_header(header_v1), args.repeat)
    if args.json:
        bench_json.write(args.json, "protocol_bench", "µs per operation", ROWS)


if __name__ == "__main__":
    main()
