from __future__ import annotations

import pytest

from broker.admin.config_ops import OpType, apply_ops, check_ops, describe_resource
from protocol.errors import Errors, KafkaApiError


def _is_list(name: str) -> bool | None:
    return {"cleanup.policy": True, "retention.ms": False}.get(name)


def _apply(current: dict[str, str], ops: list) -> dict[str, str]:
    return apply_ops(current, ops, _is_list, lambda name: "delete")


def test_set_delete_append_subtract() -> None:
    assert _apply({"retention.ms": "1"}, [("retention.ms", OpType.DELETE, None)]) == {}
    assert _apply({}, [("retention.ms", OpType.SET, "5")]) == {"retention.ms": "5"}
    assert _apply({}, [("cleanup.policy", OpType.APPEND, "compact")]) == {"cleanup.policy": "delete,compact"}
    assert _apply({"cleanup.policy": "delete,compact"}, [("cleanup.policy", OpType.SUBTRACT, "delete")]) == {
        "cleanup.policy": "compact"}
    assert _apply({"cleanup.policy": "compact"}, [("cleanup.policy", OpType.SUBTRACT, "compact")]) == {
        "cleanup.policy": ""}


@pytest.mark.parametrize(
    ("ops", "error"),
    [
        # as a Kafka 3.9 broker answers each
        ([("retention.ms", OpType.APPEND, "1")], Errors.INVALID_CONFIG),
        ([("nope", OpType.SUBTRACT, "1")], Errors.UNKNOWN_SERVER_ERROR),
        ([("retention.ms", 9, "1")], Errors.INVALID_REQUEST),
    ],
)
def test_apply_errors(ops: list, error: Errors) -> None:
    with pytest.raises(KafkaApiError) as info:
        _apply({}, ops)
    assert info.value.error == error


def test_check_ops_rejects_duplicates_and_nulls() -> None:
    check_ops([("a", OpType.DELETE, None), ("b", OpType.SET, "1")])
    with pytest.raises(KafkaApiError, match="^INVALID_REQUEST .*: Error due to duplicate config keys$"):
        check_ops([("a", OpType.SET, "1"), ("a", OpType.DELETE, None)])
    with pytest.raises(KafkaApiError, match="Null value not supported for : a, c$"):
        check_ops([("a", OpType.SET, None), ("b", OpType.DELETE, None), ("c", OpType.APPEND, None)])


def test_describe_resource_like_kafka() -> None:
    assert describe_resource(2, "t") == "ConfigResource(type=TOPIC, name='t')"
    assert describe_resource(99, "x") == "ConfigResource(type=UNKNOWN, name='x')"
