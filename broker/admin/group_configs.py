"""Group-level configs (Kafka 4.2's GroupConfig): per-group overrides of the broker's group.* settings.

``kafka-configs --entity-type groups`` (ConfigResource type GROUP) sets them; this ZooKeeper-mode
broker keeps them where Kafka keeps every other entity's dynamic config, in ``/config/groups/<id>``
with a change notification, and every broker's ``GroupConfigManager`` follows them. A value must
lie within the broker's min/max for that setting, as Kafka validates it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.admin.config_describer import ConfigEntry, ConfigSource
from broker.config_defs import ConfigError, ConfigType
from protocol.errors import Errors, KafkaApiError

@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    broker_key: str  # the broker setting that is its default
    bounds: tuple[str, str] | None = None  # broker keys of its minimum and maximum
    choices: tuple[str, ...] = ()
    default: Any = None  # for a config with no broker setting behind it (share.auto.offset.reset)
    # a string config's own parser (the typed value; ValueError saying why it is invalid)
    parser: Callable[[str], Any] | None = None

    @property
    def config_type(self) -> ConfigType:
        return ConfigType.STRING if self.choices or self.parser else ConfigType.INT


GROUP_CONFIG_DEFS: dict[str, GroupConfigDef] = {d.name: d for d in (
    GroupConfigDef("consumer.session.timeout.ms", "group.consumer.session.timeout.ms",
                   ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms")),
    GroupConfigDef("consumer.heartbeat.interval.ms", "group.consumer.heartbeat.interval.ms",
                   ("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms")),
)}


def _default(definition: GroupConfigDef, broker: Any) -> Any:
    return definition.default if definition.default is not None else broker.get(definition.broker_key)


def register(definition: GroupConfigDef) -> None:
    """Another group kind adds its configs (share groups: share.*)."""
    GROUP_CONFIG_DEFS[definition.name] = definition


def validate_group_config(props: Mapping[str, str], broker: Any) -> dict[str, Any]:
    """The typed overrides, or INVALID_CONFIG / INVALID_REQUEST as Kafka's GroupConfig.validate."""
    typed: dict[str, Any] = {}
    for name, raw in props.items():
        definition = GROUP_CONFIG_DEFS.get(name)
        if definition is None:
            raise KafkaApiError(Errors.INVALID_CONFIG, f"Unknown group config name: {name}")
        if definition.choices:
            if raw.lower() not in definition.choices:
                raise KafkaApiError(Errors.INVALID_CONFIG, f"Invalid value {raw} for configuration {name}: "
                                                           f"String must be one of: {', '.join(definition.choices)}")
            typed[name] = raw.lower()
            continue
        if definition.parser is not None:
            try:
                typed[name] = definition.parser(raw)
            except ValueError as exc:
                raise KafkaApiError(Errors.INVALID_CONFIG,
                                    f"Invalid value {raw} for configuration {name}: {exc}") from None
            continue
        try:
            value = int(raw.strip())
        except ValueError:
            raise KafkaApiError(Errors.INVALID_CONFIG, f"Invalid value {raw} for configuration {name}: "
                                                       "Not a number of type INT") from None
        if definition.bounds is not None:
            low, high = (broker.get(k) for k in definition.bounds)
            if not low <= value <= high:
                raise KafkaApiError(Errors.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: "
                                                           f"Value must be between {low} and {high}")
        typed[name] = value
    for kind in ("consumer", "share"):
        if f"{kind}.session.timeout.ms" not in GROUP_CONFIG_DEFS:
            continue
        session, heartbeat = (typed.get(f"{kind}.{k}", broker.get(f"group.{kind}.{k}"))
                              for k in ("session.timeout.ms", "heartbeat.interval.ms"))
        if heartbeat >= session:
            raise KafkaApiError(Errors.INVALID_CONFIG, f"{kind}.heartbeat.interval.ms must be less than "
                                                       f"{kind}.session.timeout.ms")
    return typed


def describe_group(overrides: Mapping[str, str], broker: Any, names: Iterable[str] | None = None) -> list[ConfigEntry]:
    wanted = None if names is None else set(names)
    entries = []
    for name, definition in sorted(GROUP_CONFIG_DEFS.items()):
        if wanted is not None and name not in wanted:
            continue
        if name in overrides:
            value, source = overrides[name], ConfigSource.DYNAMIC_GROUP_CONFIG
        else:
            value, source = str(_default(definition, broker)), ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(name, value, source, False, False, int(definition.config_type)))
    return entries


class GroupConfigManager:
    """Every group's overrides, as /config/groups holds them (loaded at start, then followed)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self._overrides: dict[str, dict[str, Any]] = {}

    def update(self, group_id: str, props: Mapping[str, str]) -> None:
        try:
            typed = validate_group_config(props, self.broker)
        except (KafkaApiError, ConfigError):
            typed = {}
        if typed:
            self._overrides[group_id] = typed
        else:
            self._overrides.pop(group_id, None)

    def get(self, group_id: str, name: str) -> Any:
        found = self._overrides.get(group_id, {}).get(name)
        return _default(GROUP_CONFIG_DEFS[name], self.broker) if found is None else found
