"""DescribeClientQuotas and AlterClientQuotas over ZooKeeper, as Kafka's ZkAdminManager does them.

Entities are maps of entity type (``user``, ``client-id``, ``ip``) to a name, None being the
default entity. A filter component matches a type exactly (a name), its default, or any name
(Kafka's ClientQuotaFilterComponent); ``strict`` leaves out entities with more types than asked.
Blocking: call through the handler pool's ``run_blocking``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coordination.admin_zk_client import AdminZkClient
from coordination.kafka_zk_client import KafkaZkClient
from coordination.zk_admin_data import DEFAULT_ENTITY, sanitize
from broker.quota.quota_configs import CLIENT_ID, CLIENT_QUOTA_KEYS, IP, IP_QUOTA_KEYS, USER, stored_value
from protocol.errors import Errors, KafkaApiError

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
Entity = tuple[tuple[str, str | None], ...]  # ((entity type, name or None for <default>), ...)


@dataclass(frozen=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None

    def matches(self, name: str | None) -> bool:
        """``name`` is the entity's name of this type (None: the default entity)."""
        if self.match_type == MATCH_EXACT:
            return name == self.match
        if self.match_type == MATCH_DEFAULT:
            return name is None
        return True


def _invalid(message: str) -> KafkaApiError:
    return KafkaApiError(Errors.INVALID_REQUEST, message)


def _zk_name(name: str | None) -> str:
    return DEFAULT_ENTITY if name is None else sanitize(name)


def _quota_values(config: dict[str, str], keys: dict[str, Any]) -> dict[str, float]:
    return {key: float(value) for key, value in config.items() if key in keys}


def describe_client_quotas(zk: KafkaZkClient, components: list[FilterComponent], strict: bool
                           ) -> list[tuple[Entity, dict[str, float]]]:
    by_type: dict[str, FilterComponent] = {}
    for component in components:
        if component.entity_type == "":
            raise _invalid("Unexpected empty filter component entity type")
        if component.entity_type not in (USER, CLIENT_ID, IP):
            raise KafkaApiError(Errors.UNSUPPORTED_VERSION, f"Custom entity type '{component.entity_type}' not supported")
        if component.entity_type in by_type:
            name = "client" if component.entity_type == CLIENT_ID else component.entity_type
            raise _invalid(f"Duplicate {name} filter component entity type")
        by_type[component.entity_type] = component
    if IP in by_type and (USER in by_type or CLIENT_ID in by_type):
        raise _invalid("Invalid entity filter component combination, IP filter component should not be used with "
                       "user or clientId filter component.")
    candidates: list[tuple[Entity, dict[str, float]]] = []
    if IP not in by_type:
        users = zk.get_all_entity_configs("users")
        clients = zk.get_all_entity_configs("clients")
        both = zk.get_all_user_client_configs()
        candidates += [(((USER, _name(u)),), _quota_values(c, CLIENT_QUOTA_KEYS)) for u, c in users.items()]
        candidates += [(((CLIENT_ID, _name(i)),), _quota_values(c, CLIENT_QUOTA_KEYS)) for i, c in clients.items()]
        candidates += [(((USER, _name(u)), (CLIENT_ID, _name(i))), _quota_values(c, CLIENT_QUOTA_KEYS))
                       for (u, i), c in both.items()]
    if USER not in by_type and CLIENT_ID not in by_type:
        candidates += [(((IP, _name(ip)),), _quota_values(c, IP_QUOTA_KEYS))
                       for ip, c in zk.get_all_entity_configs("ips").items()]
    result = []
    for entity, values in candidates:
        types = dict(entity)
        if not values:
            continue
        if any(t not in types or not c.matches(types[t]) for t, c in by_type.items()):
            continue
        if strict and any(t not in by_type for t in types):
            continue
        result.append((entity, values))
    return result


def _name(zk_name: str) -> str | None:
    """Names come desanitized from KafkaZkClient; the default entity is None on the wire."""
    return None if zk_name == DEFAULT_ENTITY else zk_name


def _entity_path(entity: list[tuple[str, str | None]]) -> tuple[str, str, dict[str, Any]]:
    """(config entity type, name or nested path, allowed keys) of an AlterClientQuotas entity."""
    if not entity:
        raise _invalid("Invalid empty client quota entity")
    names: dict[str, str | None] = {}
    for entity_type, name in entity:
        if entity_type not in (USER, CLIENT_ID, IP):
            raise _invalid(f"Unhandled client quota entity type: {entity_type}")
        if entity_type in names:
            raise _invalid(f"Duplicate {entity_type} entity type")
        if name is not None and name == "":
            raise _invalid(f"Empty {entity_type} not supported")
        names[entity_type] = name
    if IP in names:
        if len(names) > 1:
            raise _invalid("Invalid quota entity combination, IP entity should not be used with user/client ID entity.")
        return "ips", _zk_name(names[IP]), IP_QUOTA_KEYS
    if USER in names and CLIENT_ID in names:
        return "users", f"{_zk_name(names[USER])}/clients/{_zk_name(names[CLIENT_ID])}", CLIENT_QUOTA_KEYS
    if USER in names:
        return "users", names[USER] if names[USER] is not None else DEFAULT_ENTITY, CLIENT_QUOTA_KEYS
    return "clients", names[CLIENT_ID] if names[CLIENT_ID] is not None else DEFAULT_ENTITY, CLIENT_QUOTA_KEYS


def alter_client_quotas(admin: AdminZkClient, entity: list[tuple[str, str | None]],
                        ops: list[tuple[str, float, bool]], validate_only: bool) -> None:
    """Apply one entry's (key, value, remove) ops; KafkaApiError(INVALID_REQUEST) if any is wrong."""
    entity_type, name, keys = _entity_path(entity)
    zk = admin.zk
    config = zk.get_entity_config(entity_type, name)
    for key, value, remove in ops:
        if remove:
            config.pop(key, None)
            continue
        if key not in keys:
            raise _invalid(f"Invalid configuration key {key}")
        try:
            config[key] = stored_value(key, value, keys)
        except ValueError as exc:
            raise _invalid(str(exc)) from None
    if not validate_only:
        admin.change_configs(entity_type, name, config)
