#!/usr/bin/env python3
"""The share-group message definitions at Kafka 4.2, in the compact form of ``protocol/schemas/``.

Kafka 3.9's message directory (the source of ``import_schemas.py``) holds these APIs only at
their early-access versions, which Kafka 4.1 removed. Their Kafka 4.2 layouts were read from
apache/kafka ``clients/src/main/resources/common/message/`` (the 4.2 line: ShareFetch and
ShareAcknowledge v1-v2 with KIP-1206/KIP-1222, WriteShareGroupState v1 and
ReadShareGroupStateSummary v1 with DeliveryCompleteCount, DescribeShareGroupOffsets v1 with Lag)
and every version is cross-checked byte for byte against kio 0.6.5, which is generated from
Kafka 4.2 (tests/unit/protocol/test_share_schemas_kio.py).

Listeners: Kafka lists these APIs for ``broker`` (KRaft) only. This broker serves them in
ZooKeeper mode, so every definition here also names ``zkBroker``; the share-group state RPCs
(83-87) travel between brokers (persister to share coordinator) and are served there too.

``protocol/schema_sources.py`` lists them as Kafka 4.2's, so ``import_schemas.py`` leaves them alone.
Usage: python scripts/kafka42_share_schemas.py [DEST_DIR]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

KAFKA_VERSION = "4.2"
LISTENERS = ["zkBroker", "broker"]


def f(name: str, type_: str, versions: str = "0+", **extra: Any) -> dict[str, Any]:
    field = {"name": name, "type": type_, "versions": versions}
    for key, value in extra.items():
        field[{"nullable": "nullableVersions", "map_key": "mapKey"}.get(key, key)] = value
    return field


def s(name: str, type_: str, fields: list[dict[str, Any]], versions: str = "0+") -> dict[str, Any]:
    return {"name": name, "type": type_, "versions": versions, "fields": fields}


def nstr(name: str, versions: str = "0+") -> dict[str, Any]:
    """A nullable string that defaults to null (error messages, racks)."""
    return f(name, "string", versions, nullable=versions, default="null")


def message(api_key: int, kind: str, name: str, valid: str, flexible: str,
            fields: list[dict[str, Any]], common: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"apiKey": api_key, "type": kind, "name": name, "validVersions": valid,
                              "flexibleVersions": flexible}
    if kind == "request":
        schema["listeners"] = LISTENERS
    schema["fields"] = fields
    if common:
        schema["commonStructs"] = common
    return schema


THROTTLE = f("ThrottleTimeMs", "int32")
ERROR = f("ErrorCode", "int16")


def _leader(v: str = "0+") -> dict[str, Any]:
    return s("CurrentLeader", "LeaderIdAndEpoch", [f("LeaderId", "int32", v), f("LeaderEpoch", "int32", v)], v)


def _node_endpoints() -> dict[str, Any]:
    return s("NodeEndpoints", "[]NodeEndpoint", [
        f("NodeId", "int32", map_key=True), f("Host", "string"), f("Port", "int32"), nstr("Rack")])


def _ack_batches() -> dict[str, Any]:
    return s("AcknowledgementBatches", "[]AcknowledgementBatch", [
        f("FirstOffset", "int64"), f("LastOffset", "int64"), f("AcknowledgeTypes", "[]int8")])


def _state_results(name: str, extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s("Results", f"[]{name}", [f("TopicId", "uuid"), s("Partitions", "[]PartitionResult", [
        f("Partition", "int32"), ERROR, nstr("ErrorMessage"), *extra])])]


def _state_request(name: str, partition_fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f("GroupId", "string"), s("Topics", f"[]{name}", [
        f("TopicId", "uuid"), s("Partitions", "[]PartitionData", [f("Partition", "int32"), *partition_fields])])]


def _state_batches(name: str = "StateBatches") -> dict[str, Any]:
    return s(name, "[]StateBatch", [f("FirstOffset", "int64"), f("LastOffset", "int64"),
                                    f("DeliveryState", "int8"), f("DeliveryCount", "int16")])


def schemas() -> list[dict[str, Any]]:
    return [
        message(76, "request", "ShareGroupHeartbeatRequest", "1", "0+", [
            f("GroupId", "string"), f("MemberId", "string"), f("MemberEpoch", "int32"), nstr("RackId"),
            f("SubscribedTopicNames", "[]string", nullable="0+", default="null")]),
        message(76, "response", "ShareGroupHeartbeatResponse", "1", "0+", [
            THROTTLE, ERROR, nstr("ErrorMessage"), nstr("MemberId"), f("MemberEpoch", "int32"),
            f("HeartbeatIntervalMs", "int32"),
            {**s("Assignment", "Assignment", [s("TopicPartitions", "[]TopicPartitions", [
                f("TopicId", "uuid"), f("Partitions", "[]int32")])]), "nullableVersions": "0+", "default": "null"}]),
        message(77, "request", "ShareGroupDescribeRequest", "1", "1+", [
            f("GroupIds", "[]string", "1+"), f("IncludeAuthorizedOperations", "bool", "1+")]),
        message(77, "response", "ShareGroupDescribeResponse", "1", "1+", [
            f("ThrottleTimeMs", "int32", "1+"),
            s("Groups", "[]DescribedGroup", [
                f("ErrorCode", "int16", "1+"), nstr("ErrorMessage", "1+"), f("GroupId", "string", "1+"),
                f("GroupState", "string", "1+"), f("GroupEpoch", "int32", "1+"),
                f("AssignmentEpoch", "int32", "1+"), f("AssignorName", "string", "1+"),
                s("Members", "[]Member", [
                    f("MemberId", "string", "1+"), nstr("RackId", "1+"), f("MemberEpoch", "int32", "1+"),
                    f("ClientId", "string", "1+"), f("ClientHost", "string", "1+"),
                    f("SubscribedTopicNames", "[]string", "1+"), f("Assignment", "Assignment", "1+")], "1+"),
                f("AuthorizedOperations", "int32", "1+", default="-2147483648")], "1+")],
            common=[
                {"name": "TopicPartitions", "versions": "1+", "fields": [
                    f("TopicId", "uuid", "1+"), f("TopicName", "string", "1+"), f("Partitions", "[]int32", "1+")]},
                {"name": "Assignment", "versions": "1+", "fields": [
                    f("TopicPartitions", "[]TopicPartitions", "1+")]}]),
        message(78, "request", "ShareFetchRequest", "1-2", "0+", [
            nstr("GroupId"), f("MemberId", "string", nullable="0+"), f("ShareSessionEpoch", "int32"),
            f("MaxWaitMs", "int32"), f("MinBytes", "int32"), f("MaxBytes", "int32", default="0x7fffffff"),
            f("MaxRecords", "int32", "1+"), f("BatchSize", "int32", "1+"), f("ShareAcquireMode", "int8", "2+"),
            f("IsRenewAck", "bool", "2+", default="false"),
            s("Topics", "[]FetchTopic", [f("TopicId", "uuid", map_key=True), s("Partitions", "[]FetchPartition", [
                f("PartitionIndex", "int32", map_key=True), f("PartitionMaxBytes", "int32", "0"), _ack_batches()])]),
            s("ForgottenTopicsData", "[]ForgottenTopic", [f("TopicId", "uuid"), f("Partitions", "[]int32")])]),
        message(78, "response", "ShareFetchResponse", "1-2", "0+", [
            THROTTLE, ERROR, nstr("ErrorMessage"), f("AcquisitionLockTimeoutMs", "int32", "1+"),
            s("Responses", "[]ShareFetchableTopicResponse", [f("TopicId", "uuid", map_key=True), s(
                "Partitions", "[]PartitionData", [
                    f("PartitionIndex", "int32"), ERROR, nstr("ErrorMessage"), f("AcknowledgeErrorCode", "int16"),
                    nstr("AcknowledgeErrorMessage"), _leader(), f("Records", "records", nullable="0"),
                    s("AcquiredRecords", "[]AcquiredRecords", [
                        f("FirstOffset", "int64"), f("LastOffset", "int64"), f("DeliveryCount", "int16")])])]),
            _node_endpoints()]),
        message(79, "request", "ShareAcknowledgeRequest", "1-2", "0+", [
            nstr("GroupId"), f("MemberId", "string", nullable="0+"), f("ShareSessionEpoch", "int32"),
            f("IsRenewAck", "bool", "2+", default="false"),
            s("Topics", "[]AcknowledgeTopic", [f("TopicId", "uuid", map_key=True), s(
                "Partitions", "[]AcknowledgePartition", [f("PartitionIndex", "int32", map_key=True), _ack_batches()])])]),
        message(79, "response", "ShareAcknowledgeResponse", "1-2", "0+", [
            THROTTLE, ERROR, nstr("ErrorMessage"), f("AcquisitionLockTimeoutMs", "int32", "2+", ignorable=True),
            s("Responses", "[]ShareAcknowledgeTopicResponse", [f("TopicId", "uuid", map_key=True), s(
                "Partitions", "[]PartitionData", [f("PartitionIndex", "int32"), ERROR, nstr("ErrorMessage"), _leader()])]),
            _node_endpoints()]),
        message(83, "request", "InitializeShareGroupStateRequest", "0", "0+", _state_request(
            "InitializeStateData", [f("StateEpoch", "int32"), f("StartOffset", "int64")])),
        message(83, "response", "InitializeShareGroupStateResponse", "0", "0+",
                _state_results("InitializeStateResult", [])),
        message(84, "request", "ReadShareGroupStateRequest", "0", "0+", _state_request(
            "ReadStateData", [f("LeaderEpoch", "int32")])),
        message(84, "response", "ReadShareGroupStateResponse", "0", "0+", _state_results("ReadStateResult", [
            f("StateEpoch", "int32"), f("StartOffset", "int64"), _state_batches()])),
        message(85, "request", "WriteShareGroupStateRequest", "0-1", "0+", _state_request("WriteStateData", [
            f("StateEpoch", "int32"), f("LeaderEpoch", "int32"), f("StartOffset", "int64"),
            f("DeliveryCompleteCount", "int32", "1+", default="-1"), _state_batches()])),
        message(85, "response", "WriteShareGroupStateResponse", "0-1", "0+", _state_results("WriteStateResult", [])),
        message(86, "request", "DeleteShareGroupStateRequest", "0", "0+", _state_request("DeleteStateData", [])),
        message(86, "response", "DeleteShareGroupStateResponse", "0", "0+", _state_results("DeleteStateResult", [])),
        message(87, "request", "ReadShareGroupStateSummaryRequest", "0-1", "0+", _state_request(
            "ReadStateSummaryData", [f("LeaderEpoch", "int32")])),
        message(87, "response", "ReadShareGroupStateSummaryResponse", "0-1", "0+", _state_results(
            "ReadStateSummaryResult", [f("StateEpoch", "int32"), f("LeaderEpoch", "int32"),
                                       f("StartOffset", "int64"),
                                       f("DeliveryCompleteCount", "int32", "1+", default="-1")])),
        message(90, "request", "DescribeShareGroupOffsetsRequest", "0-1", "0+", [
            s("Groups", "[]DescribeShareGroupOffsetsRequestGroup", [
                f("GroupId", "string"),
                {**s("Topics", "[]DescribeShareGroupOffsetsRequestTopic", [
                    f("TopicName", "string"), f("Partitions", "[]int32")]), "nullableVersions": "0+"}])]),
        message(90, "response", "DescribeShareGroupOffsetsResponse", "0-1", "0+", [
            THROTTLE, s("Groups", "[]DescribeShareGroupOffsetsResponseGroup", [
                f("GroupId", "string"), s("Topics", "[]DescribeShareGroupOffsetsResponseTopic", [
                    f("TopicName", "string"), f("TopicId", "uuid"), s(
                        "Partitions", "[]DescribeShareGroupOffsetsResponsePartition", [
                            f("PartitionIndex", "int32"), f("StartOffset", "int64"), f("LeaderEpoch", "int32"),
                            f("Lag", "int64", "1+", default="-1"), ERROR, nstr("ErrorMessage")])]),
                ERROR, nstr("ErrorMessage")])]),
        message(91, "request", "AlterShareGroupOffsetsRequest", "0", "0+", [
            f("GroupId", "string"), s("Topics", "[]AlterShareGroupOffsetsRequestTopic", [
                f("TopicName", "string", map_key=True), s("Partitions", "[]AlterShareGroupOffsetsRequestPartition", [
                    f("PartitionIndex", "int32"), f("StartOffset", "int64")])])]),
        message(91, "response", "AlterShareGroupOffsetsResponse", "0", "0+", [
            THROTTLE, ERROR, nstr("ErrorMessage"), s("Responses", "[]AlterShareGroupOffsetsResponseTopic", [
                f("TopicName", "string", map_key=True), f("TopicId", "uuid"), s(
                    "Partitions", "[]AlterShareGroupOffsetsResponsePartition", [
                        f("PartitionIndex", "int32"), ERROR, nstr("ErrorMessage")])])]),
        message(92, "request", "DeleteShareGroupOffsetsRequest", "0", "0+", [
            f("GroupId", "string"), s("Topics", "[]DeleteShareGroupOffsetsRequestTopic", [f("TopicName", "string")])]),
        message(92, "response", "DeleteShareGroupOffsetsResponse", "0", "0+", [
            THROTTLE, ERROR, nstr("ErrorMessage"), s("Responses", "[]DeleteShareGroupOffsetsResponseTopic", [
                f("TopicName", "string", map_key=True), f("TopicId", "uuid"), ERROR, nstr("ErrorMessage")])]),
    ]


def main(argv: list[str]) -> int:
    dest = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "protocol" / "schemas"
    written = schemas()
    for schema in written:
        text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
        (dest / f"{schema['name']}.json").write_text(text + "\n", encoding="utf-8")
    print(f"wrote {len(written)} Kafka {KAFKA_VERSION} share-group schemas to {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
