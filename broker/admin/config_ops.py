"""ConfigResource types and IncrementalAlterConfigs operations (Kafka's prepareIncrementalConfigs)."""
from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum

from protocol.errors import Errors, KafkaApiError


class ResourceType(IntEnum):
    """ConfigResource.Type ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class OpType(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def resource_type(code: int) -> ResourceType:
    try:
        return ResourceType(code)
    except ValueError:
        return ResourceType.UNKNOWN


def describe_resource(code: int, name: str) -> str:
    """Kafka's ConfigResource.toString, used in error messages."""
    return f"ConfigResource(type={resource_type(code).name}, name='{name}')"


# (name, op, value) of one IncrementalAlterConfigs entry
AlterOp = tuple[str, int, "str | None"]


def check_ops(ops: list[AlterOp]) -> None:
    """Duplicate keys and null values are INVALID_REQUEST in Kafka (ConfigAdminManager.preprocess)."""
    names = [name for name, _, _ in ops]
    if len(set(names)) != len(names):
        raise KafkaApiError(Errors.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [name for name, op, value in ops if value is None and op != OpType.DELETE]
    if nulls:
        raise KafkaApiError(Errors.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")


def apply_ops(
    current: dict[str, str],
    ops: list[AlterOp],
    is_list: Callable[[str], bool | None],
    list_default: Callable[[str], str],
) -> dict[str, str]:
    """The new override set after `ops`; `is_list(name)` is None for unknown names."""
    props = dict(current)
    for name, op, value in ops:
        if op == OpType.SET:
            props[name] = value or ""
        elif op == OpType.DELETE:
            props.pop(name, None)
        elif op in (OpType.APPEND, OpType.SUBTRACT):
            kind = is_list(name)
            if kind is None:  # Kafka's lookup of the unknown key fails inside the broker
                raise KafkaApiError(Errors.UNKNOWN_SERVER_ERROR, None)
            verb = "append" if op == OpType.APPEND else "subtract"
            if not kind:
                raise KafkaApiError(Errors.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {name}")
            old = props[name] if name in props else list_default(name)
            old_items = old.split(",") if old else []
            items = (value or "").split(",")
            if op == OpType.APPEND:
                new_items = old_items + items
            else:
                new_items = list(old_items)
                for item in items:
                    if item in new_items:
                        new_items.remove(item)
            props[name] = ",".join(new_items)
        else:
            raise KafkaApiError(Errors.INVALID_REQUEST, f"Unknown config operation {op} for {name}")
    return props
