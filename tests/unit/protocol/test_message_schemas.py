"""The bundled schemas, the class model and the api-key tables agree with Kafka's JSON."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from protocol.api_keys import API_SPECS, ApiKey, request_class, response_class
from protocol.errors import Errors, KafkaApiError, error_message, is_retriable
from protocol.messages import MetadataResponse, ProduceRequest, all_message_names, message_class
from protocol.schema import ZERO_UUID, Versions, load_message, load_raw, snake_case
from protocol.schema_sources import NEWER_THAN_3_9

REPO = Path(__file__).resolve().parents[3]
OFFICIAL = REPO.parent / "shared" / "kafka-protocol" / "messages"
needs_shared = pytest.mark.skipif(
    not OFFICIAL.is_dir(), reason=f"Kafka's message definitions not found at {OFFICIAL} (../shared absent)"
)


def _official(name: str) -> dict[str, Any]:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from import_schemas import load_kafka_json
    finally:
        sys.path.pop(0)
    return load_kafka_json(OFFICIAL / f"{name}.json")


def _versions(text: str | None) -> list[int]:
    v = Versions.parse(text)
    return [x for x in range(0, 64) if x in v]


def _effective(fields: list[dict[str, Any]], version: int) -> list[tuple[Any, ...]]:
    """What the wire format depends on, for one version, in declaration order."""
    out = []
    for f in fields:
        if version not in Versions.parse(f["versions"]):
            continue
        out.append((
            f["name"], f["type"], version in Versions.parse(f.get("nullableVersions")),
            version in Versions.parse(f.get("taggedVersions")), None if "tag" not in f else int(f["tag"]),
            str(f.get("default")), f.get("flexibleVersions"),
            _effective(f.get("fields", []), version),
        ))
    return out


@needs_shared
def test_same_set_of_messages_as_kafka() -> None:
    """Kafka 3.9's set, plus the APIs only a newer Kafka defines (the share-group offsets APIs)."""
    assert sorted({p.stem for p in OFFICIAL.glob("*.json")} | set(NEWER_THAN_3_9)) == all_message_names()


@needs_shared
@pytest.mark.parametrize("name", [n for n in all_message_names() if n not in NEWER_THAN_3_9])
def test_bundled_schema_matches_kafka(name: str) -> None:
    """Kafka 3.9's definitions; those taken from a newer Kafka are checked by test_newer_schema_matches_kio."""
    official, ours = _official(name), load_raw(name)
    for key in ("apiKey", "type", "name", "validVersions", "flexibleVersions", "latestVersionUnstable"):
        assert ours.get(key) == official.get(key), key
    assert sorted(ours.get("listeners", [])) == sorted(official.get("listeners", []))
    official_structs = {s["name"]: s for s in official.get("commonStructs", [])}
    our_structs = {s["name"]: s for s in ours.get("commonStructs", [])}
    assert official_structs.keys() == our_structs.keys()
    for version in _versions(official["validVersions"]):
        assert _effective(ours["fields"], version) == _effective(official["fields"], version), version
        for struct_name, struct in official_structs.items():
            assert _effective(our_structs[struct_name]["fields"], version) == _effective(struct["fields"], version)


def test_classes_follow_the_naming_contract() -> None:
    assert ProduceRequest.PartitionProduceData.__qualname__ == "ProduceRequest.PartitionProduceData"
    assert MetadataResponse.MetadataResponseTopic is message_class("MetadataResponse").MetadataResponseTopic
    response = MetadataResponse(throttle_time_ms=5)
    assert response.topics == [] and response.cluster_id is None and response.throttle_time_ms == 5
    assert MetadataResponse.MetadataResponseTopic().topic_id == ZERO_UUID
    assert snake_case("ThrottleTimeMs") == "throttle_time_ms"
    assert snake_case("isKRaftController") == "is_kraft_controller"
    with pytest.raises(TypeError):
        MetadataResponse(no_such_field=1)


def test_defaults_follow_the_json() -> None:
    fetch = message_class("FetchRequest")()
    assert fetch.replica_id == -1 and fetch.max_bytes == 0x7FFFFFFF and fetch.cluster_id is None
    assert fetch.isolation_level == 0 and fetch.session_epoch == -1
    partition = message_class("FetchRequest").FetchPartition()
    assert partition.current_leader_epoch == -1 and partition.log_start_offset == -1
    assert message_class("CreateTopicsRequest").CreatableTopic().replication_factor == 0


def test_api_specs_cover_every_request() -> None:
    requests = [n for n in all_message_names() if load_raw(n)["type"] == "request"]
    # Kafka's streams-group APIs (88, 89) have a key but no definition here.
    assert len(API_SPECS) == len(requests) == len(ApiKey) - 2
    assert ApiKey.STREAMS_GROUP_HEARTBEAT not in API_SPECS and ApiKey.STREAMS_GROUP_DESCRIBE not in API_SPECS
    for key, spec in API_SPECS.items():
        raw = load_raw(spec.name + "Request")
        assert raw["apiKey"] == key
        assert request_class(key).__name__ == spec.name + "Request"
        assert response_class(key).__name__ == spec.name + "Response"
        assert load_message(spec.name + "Response").valid == load_message(spec.name + "Request").valid
    produce = API_SPECS[ApiKey.PRODUCE]
    assert (produce.min_version, produce.max_version, produce.flexible_min) == (0, 11, 9)
    assert "zkBroker" in produce.listeners
    assert API_SPECS[ApiKey.SASL_HANDSHAKE].flexible_min is None
    assert ApiKey.ALTER_PARTITION == 56 and ApiKey.API_VERSIONS == 18 and ApiKey.LEADER_AND_ISR == 4
    assert "zkBroker" in API_SPECS[ApiKey.SHARE_FETCH].listeners  # served at Kafka 4.2's stable versions


@needs_shared
def test_errors_match_errors_md() -> None:
    text = (OFFICIAL.parent / "ERRORS.md").read_text()
    for error in Errors:
        assert f"| {int(error)} | {error.name} |" in text
    assert len(Errors) == text.count("\n| ") - text.count("\n| code") - text.count("\n| ---")
    assert is_retriable(Errors.NOT_CONTROLLER) and is_retriable(Errors.UNKNOWN_TOPIC_OR_PARTITION)
    assert not is_retriable(Errors.TOPIC_ALREADY_EXISTS) and not is_retriable(Errors.NONE)


def test_errors_api() -> None:
    assert Errors.NONE == 0 and Errors.UNKNOWN_SERVER_ERROR == -1 and Errors.NOT_CONTROLLER == 41
    assert "controller" in error_message(41)
    assert error_message(9999).startswith("Unknown error code")
    err = KafkaApiError(Errors.INVALID_REQUEST, "bad")
    assert err.error is Errors.INVALID_REQUEST and err.message == "bad"
    assert KafkaApiError(3).message == error_message(3)


def _kio_fields(cls: type) -> list[tuple[str, Any]]:
    """(name, nested fields or None) of a kio dataclass, names as ours (kio drops the _ms of durations)."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(cls)
    out: list[tuple[str, Any]] = []
    for f in dataclasses.fields(cls):
        nested = None
        for arg in typing.get_args(hints[f.name]) or (hints[f.name],):
            for inner in typing.get_args(arg) or (arg,):
                if dataclasses.is_dataclass(inner):
                    nested = _kio_fields(inner)
        out.append((f.name, nested))
    return out


def _our_fields(spec_fields: list[Any], structs: dict[str, Any], version: int) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for f in spec_fields:
        if version not in f.versions:
            continue
        nested = _our_fields(structs[f.element_type].fields, structs, version) if f.is_struct else None
        name = f.attr[:-3] if f.attr.endswith("_ms") else f.attr
        out.append((name, nested))
    return out


@pytest.mark.parametrize("name", sorted(NEWER_THAN_3_9))
def test_newer_schema_matches_kio(name: str) -> None:
    """Definitions taken from a newer Kafka have, at each version, the fields of the ``kio`` package's
    classes (generated from that Kafka's JSON), in the same order."""
    import importlib

    import kio

    spec = load_message(name)
    kind = "request" if name.endswith("Request") else "response"
    module_name = snake_case(name[: -len(kind)])
    for version in range(spec.valid.lo, spec.valid.hi + 1):
        module = importlib.import_module(f"{kio.__name__}.schema.{module_name}.v{version}.{kind}")
        theirs = _kio_fields(getattr(module, name))
        ours = _our_fields(spec.fields, spec.structs, version)
        normalize = {"throttle_time": "throttle_time", "rebalance_timeout": "rebalance_timeout",
                     "heartbeat_interval": "heartbeat_interval"}
        assert [(normalize.get(n, n), f) for n, f in ours] == theirs, version
