"""Cross-check against kafka-python's independent codecs (its schema-driven classes and its
hand-written ``kafka.protocol.old`` classes): identical bytes both ways.

Only (message, version) pairs whose wire layout in kafka-python's schema equals Kafka 3.9's
are compared; kafka-python ships newer (4.x) definitions for some APIs.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from message_strategies import message_strategy, versions_of
from protocol.messages import all_message_names, message_class
from protocol.schema import Versions, load_raw

kafka_protocol = pytest.importorskip("kafka.protocol", reason="kafka-python is not installed")
from kafka.protocol.api_message import ApiMessage  # noqa: E402
from kafka.protocol.old.api import Request, Response  # noqa: E402

OURS = set(all_message_names())

# kafka-python legacy classes whose schema disagrees with Kafka's own definition.
LEGACY_MISMATCHES = {
    ("DescribeLogDirsRequest", 0): "kafka-python declares Partitions as one int32, Kafka as []int32",
    ("DescribeAclsRequest", 2): "kafka-python reuses the non-flexible v1 layout for flexible v2",
    ("DescribeAclsResponse", 2): "kafka-python reuses the non-flexible v1 layout for flexible v2",
}


def _comparable(name: str, obj: Any) -> Any:
    """kafka-python reads an ApiVersions response with an error as a v0 body (KIP-511 fallback)."""
    if name == "ApiVersionsResponse":
        obj.error_code = 0
    return obj


def _layout(fields: list[dict[str, Any]], version: int) -> list[tuple[Any, ...]]:
    out = []
    for f in fields:
        if version in Versions.parse(f["versions"]):
            out.append((f["type"].replace("bitfield", "int32"), version in Versions.parse(f.get("nullableVersions")),
                        version in Versions.parse(f.get("taggedVersions")), f.get("tag"), str(f.get("default")),
                        _layout(f.get("fields", []), version)))
    return out


def _schema_classes() -> list[tuple[str, int, type]]:
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(kafka_protocol.__path__, "kafka.protocol."):
        if ".old" in info.name or info.name.endswith("generate_stubs"):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, ApiMessage) and getattr(obj, "_json", None):
                found[obj._json["name"]] = obj
    pairs = []
    for name, cls in sorted(found.items()):
        if name not in OURS:
            continue
        ours = load_raw(name)
        theirs = cls._json
        common = {s["name"]: s for s in theirs.get("commonStructs", [])}
        for version in versions_of(name):
            if version not in Versions.parse(theirs["validVersions"]) or version in Versions.parse(
                    theirs["flexibleVersions"]) != (version in Versions.parse(ours["flexibleVersions"])):
                continue
            ours_common = {s["name"]: s for s in ours.get("commonStructs", [])}
            if _layout(theirs["fields"], version) == _layout(ours["fields"], version) and all(
                    _layout(common[n]["fields"], version) == _layout(s["fields"], version)
                    for n, s in ours_common.items() if n in common):
                pairs.append((name, version, cls))
    return pairs


def _old_classes() -> list[tuple[str, int, type]]:
    pairs = []
    for info in pkgutil.iter_modules(importlib.import_module("kafka.protocol.old").__path__):
        module = importlib.import_module(f"kafka.protocol.old.{info.name}")
        for cls_name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, (Request, Response)) and "_v" in cls_name
                    and obj.__module__ == module.__name__):
                name, _, version = cls_name.rpartition("_v")
                if (name in OURS and int(version) in versions_of(name)
                        and (name, int(version)) not in LEGACY_MISMATCHES):
                    pairs.append((name, int(version), obj))
    return sorted(pairs, key=lambda p: (p[0], p[1]))


SCHEMA_PAIRS = _schema_classes()
OLD_PAIRS = _old_classes()


def test_enough_apis_are_cross_checked() -> None:
    assert len({name for name, _v, _c in SCHEMA_PAIRS}) >= 70
    assert len({name for name, _v, _c in OLD_PAIRS}) >= 40


@pytest.mark.parametrize("name, version, theirs", SCHEMA_PAIRS, ids=[f"{n}-v{v}" for n, v, _ in SCHEMA_PAIRS])
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_same_bytes_as_kafka_python(name: str, version: int, theirs: type, data: st.DataObject) -> None:
    obj = _comparable(name, data.draw(message_strategy(name, version, unknown_tags=False)))
    ours = bytes(obj.encode(version))
    their_obj = theirs.decode(ours, version=version)
    their_obj._header = None  # decode() leaves it unset; some encode() overrides read it
    their_bytes = bytes(their_obj.encode())
    assert their_bytes == ours
    assert message_class(name).decode(their_bytes, version) == obj


@pytest.mark.parametrize("name, version, theirs", OLD_PAIRS, ids=[f"{n}-v{v}" for n, v, _ in OLD_PAIRS])
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_same_bytes_as_kafka_python_legacy_classes(name: str, version: int, theirs: type,
                                                    data: st.DataObject) -> None:
    obj = _comparable(name, data.draw(message_strategy(name, version, unknown_tags=False)))
    ours = bytes(obj.encode(version))
    their_bytes = bytes(theirs.decode(ours).encode())
    assert their_bytes == ours
    assert message_class(name).decode(their_bytes, version) == obj


def test_independently_built_requests_encode_identically() -> None:
    """The same content built separately with kafka-python's classes and ours."""
    from kafka.protocol.old import fetch, group, list_offsets, commit, metadata, produce
    from kafka.protocol.old import api_versions

    m = message_class
    cases = [
        (metadata.MetadataRequest_v0(["a", "bb"]),
         m("MetadataRequest")(topics=[m("MetadataRequest").MetadataRequestTopic(name=n) for n in ("a", "bb")]), 0),
        (produce.ProduceRequest_v3(None, -1, 1500, [("t", [(0, b"batch-bytes"), (1, None)])]),
         m("ProduceRequest")(acks=-1, timeout_ms=1500, topic_data=[m("ProduceRequest").TopicProduceData(
             name="t", partition_data=[m("ProduceRequest").PartitionProduceData(index=0, records=b"batch-bytes"),
                                       m("ProduceRequest").PartitionProduceData(index=1, records=None)])]), 3),
        (fetch.FetchRequest_v4(-1, 500, 1, 1 << 20, 1, [("t", [(2, 77, 4096)])]),
         m("FetchRequest")(max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, isolation_level=1,
                           topics=[m("FetchRequest").FetchTopic(topic="t", partitions=[m("FetchRequest").FetchPartition(
                               partition=2, fetch_offset=77, partition_max_bytes=4096)])]), 4),
        (api_versions.ApiVersionsRequest_v0(), m("ApiVersionsRequest")(), 0),
        (list_offsets.ListOffsetsRequest_v1(-1, [("t", [(0, -2)])]),
         m("ListOffsetsRequest")(replica_id=-1, topics=[m("ListOffsetsRequest").ListOffsetsTopic(
             name="t",
             partitions=[m("ListOffsetsRequest").ListOffsetsPartition(partition_index=0, timestamp=-2)])]), 1),
        (commit.OffsetCommitRequest_v2("g", 3, "member", -1, [("t", [(0, 42, "meta")])]),
         m("OffsetCommitRequest")(group_id="g", generation_id_or_member_epoch=3, member_id="member",
                                  retention_time_ms=-1, topics=[m("OffsetCommitRequest").OffsetCommitRequestTopic(
                                      name="t", partitions=[m("OffsetCommitRequest").OffsetCommitRequestPartition(
                                          partition_index=0, committed_offset=42, committed_metadata="meta")])]), 2),
        (group.JoinGroupRequest_v1("g", 10000, 30000, "", "consumer", [("range", b"\x00\x01")]),
         m("JoinGroupRequest")(group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=30000, member_id="",
                               protocol_type="consumer", protocols=[m("JoinGroupRequest").JoinGroupRequestProtocol(
                                   name="range", metadata=b"\x00\x01")]), 1),
    ]
    for theirs, ours, version in cases:
        assert bytes(ours.encode(version)) == bytes(theirs.encode()), type(theirs).__name__
        assert type(ours).decode(theirs.encode(), version) == ours
