"""DescribeConfigs (v0-4), AlterConfigs (v0-2) and IncrementalAlterConfigs (v0-1) for topics,
brokers and broker loggers, as Kafka's ZK-mode ConfigHelper / ZkAdminManager do.

Topic overrides and dynamic broker configs live in ZooKeeper (/config/topics/<t>,
/config/brokers/<id> and /config/brokers/<default>); a write also adds a change notification
that every broker's config change listener applies.
"""
from __future__ import annotations

import logging
from typing import Any

from broker.admin import broker_loggers
from broker.admin.config_describer import ConfigEntry, ConfigSource, describe_broker, describe_topic
from broker.admin.config_ops import (
    AlterOp,
    OpType,
    ResourceType,
    apply_ops,
    check_ops,
    describe_resource,
    resource_type,
)
from broker.admin.dynamic_broker_config import DynamicConfigError, current_dynamic_config, loggable
from broker.errors import api_error
from broker.security.password_encoder import PasswordEncoderError
from broker.admin.group_configs import GROUP_CONFIG_DEFS, describe_group, validate_group_config
from broker.admin.topic_configs import TOPIC_CONFIG_DEFS, TopicConfigError, to_config_string, validate_topic_config
from broker.config_defs import CONFIG_KEYS, ConfigType
from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation
from broker.security.authorizer.acl import ResourceType as AclResourceType
from broker.services import BrokerServices
from coordination.admin_zk_client import validate_topic_name
from coordination.errors import CoordinationError
from coordination.zk_admin_data import DEFAULT_ENTITY
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError
from protocol.messages import AlterConfigsResponse, DescribeConfigsResponse, IncrementalAlterConfigsResponse

log = logging.getLogger(__name__)

DescribeResult = DescribeConfigsResponse.DescribeConfigsResult
DescribeEntry = DescribeConfigsResponse.DescribeConfigsResourceResult
DescribeSynonym = DescribeConfigsResponse.DescribeConfigsSynonym


def _broker_id_of(services: BrokerServices, name: str, allow_empty: bool = True) -> int | None:
    """DescribeConfigs' broker name: None for the cluster default (empty name); INVALID_REQUEST
    for another broker's id."""
    if not name:
        if not allow_empty:
            raise KafkaApiError(Errors.INVALID_REQUEST, "Broker id must not be empty")
        return None
    try:
        broker_id = int(name)
    except ValueError:
        raise KafkaApiError(Errors.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
    if broker_id != services.broker_id:
        expected = f"{services.broker_id} or empty string," if allow_empty else str(services.broker_id)
        raise KafkaApiError(
            Errors.INVALID_REQUEST, f"Unexpected broker id, expected {expected} but received {name}"
        )
    return broker_id


def _node_id_of(services: BrokerServices, name: str, logger: bool = False) -> int:
    """An alter request's broker or logger name must be this broker's id (Kafka's
    ConfigAdminManager.validateResourceNameIsCurrentNodeId, with its messages)."""
    try:
        node_id = int(name)
    except ValueError:
        raise KafkaApiError(Errors.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}") from None
    if node_id != services.broker_id:
        message = (f"Unexpected node id. Expected {services.broker_id}, but received {services.broker_id}"
                   if logger  # sic: Kafka 3.9 prints its own id twice for loggers
                   else f"Unexpected broker id, expected {services.broker_id}, but received {name}")
        raise KafkaApiError(Errors.INVALID_REQUEST, message)
    return node_id


def _alter_broker_id(services: BrokerServices, name: str) -> int | None:
    """None for the cluster default (empty name), else this broker's id."""
    return _node_id_of(services, name) if name else None


# --- DescribeConfigs -------------------------------------------------------------------------------


def describe_error_response(request: Request, error: Errors) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(results=[
        DescribeResult(error_code=int(error), resource_type=r.resource_type, resource_name=r.resource_name, configs=[])
        for r in request.body().resources
    ])


def _to_wire(entry: ConfigEntry, version: int, include_synonyms: bool, include_documentation: bool) -> DescribeEntry:
    out = DescribeEntry(name=entry.name, value=entry.value, read_only=entry.read_only, is_sensitive=entry.is_sensitive)
    if version == 0:
        out.is_default = entry.source == ConfigSource.DEFAULT_CONFIG
        return out
    out.config_source = int(entry.source)
    if include_synonyms:
        out.synonyms = [DescribeSynonym(name=s.name, value=s.value, source=int(s.source)) for s in entry.synonyms]
    if version >= 3:
        out.config_type = entry.config_type
        if not include_documentation:
            out.documentation = None  # Kafka's null when not asked for
    return out


async def _describe_entries(services: BrokerServices, resource: Any) -> list[ConfigEntry]:
    kind = resource_type(resource.resource_type)
    name = resource.resource_name
    keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
    if kind == ResourceType.TOPIC:
        validate_topic_name(name)
        if not services.metadata_cache.contains_topic(name):
            raise KafkaApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, "")  # Kafka sets no message
        overrides = await services.pool.run_blocking(services.config_repository.topic_config, name)
        return describe_topic(overrides, await current_dynamic_config(services), keys)
    if kind == ResourceType.BROKER:
        per_broker = _broker_id_of(services, name) is not None
        return describe_broker(await current_dynamic_config(services), per_broker, keys)
    if kind == ResourceType.BROKER_LOGGER:
        _broker_id_of(services, name, allow_empty=False)
        return [
            ConfigEntry(logger, level, ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, False, False, int(ConfigType.STRING))
            for logger, level in broker_loggers.loggers().items()
            if keys is None or logger in keys
        ]
    if kind == ResourceType.CLIENT_METRICS:
        raise KafkaApiError(Errors.INVALID_REQUEST, "Config type client-metrics is only supported on KRaft clusters")
    if kind == ResourceType.GROUP:
        overrides = await services.pool.run_blocking(services.zk.get_entity_config, "groups", name)
        return describe_group(overrides, services.config, keys)
    raise KafkaApiError(Errors.INVALID_REQUEST)


def check_config_access(services: BrokerServices, request: Request, resource: Any, operation: AclOperation) -> None:
    """DESCRIBE_CONFIGS/ALTER_CONFIGS on the topic, or on the cluster for broker and broker-logger
    resources; a denial fails only that resource (Kafka's configsAuthorizationApiError)."""
    kind = resource_type(resource.resource_type)
    if kind == ResourceType.TOPIC:
        if not services.auth.authorize(request, operation, AclResourceType.TOPIC, resource.resource_name):
            raise KafkaApiError(Errors.TOPIC_AUTHORIZATION_FAILED)
    elif kind in (ResourceType.BROKER, ResourceType.BROKER_LOGGER):
        if not services.auth.authorize_cluster(request, operation):
            raise KafkaApiError(Errors.CLUSTER_AUTHORIZATION_FAILED)
    elif kind == ResourceType.GROUP:
        if not services.auth.authorize(request, operation, AclResourceType.GROUP, resource.resource_name):
            raise KafkaApiError(Errors.GROUP_AUTHORIZATION_FAILED)


@handles(ApiKey.DESCRIBE_CONFIGS, describe_error_response)
async def handle_describe_configs(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    version = request.api_version
    include_synonyms = version >= 1 and body.include_synonyms
    results = []
    for resource in body.resources:
        result = DescribeResult(resource_type=resource.resource_type, resource_name=resource.resource_name, configs=[])
        try:
            check_config_access(services, request, resource, AclOperation.DESCRIBE_CONFIGS)
            entries = await _describe_entries(services, resource)
            result.configs = [_to_wire(e, version, include_synonyms, version >= 3 and body.include_documentation)
                              for e in entries]
        except (KafkaApiError, CoordinationError) as exc:
            error, message = api_error(exc)
            result.error_code, result.error_message = int(error), message
        results.append(result)
    return Response.send(request, DescribeConfigsResponse(results=results))


# --- AlterConfigs and IncrementalAlterConfigs ------------------------------------------------------


def _invalid_topic_value(resource: Any, message: str) -> KafkaApiError:
    """A topic value Kafka's alterConfigs rejects: INVALID_CONFIG naming the resource."""
    where = describe_resource(resource.resource_type, resource.resource_name)
    return KafkaApiError(Errors.INVALID_CONFIG, f"Invalid config value for resource {where}: {message}")


async def _alter_topic(services: BrokerServices, resource: Any, props: dict[str, str], validate_only: bool) -> None:
    topic = resource.resource_name
    if not topic:
        raise KafkaApiError(Errors.INVALID_REQUEST, "Default topic resources are not allowed.")
    if not services.metadata_cache.contains_topic(topic):
        raise KafkaApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
    try:
        validate_topic_config(props)
    except TopicConfigError as exc:
        if exc.unknown_name:
            raise KafkaApiError(Errors.INVALID_CONFIG, str(exc)) from None
        raise _invalid_topic_value(resource, str(exc)) from None
    if not validate_only:
        log.info("Updating topic %s with new configuration : %s", topic, props)
        await services.pool.run_blocking(services.admin_zk.change_configs, "topics", topic, props)


async def _alter_broker(
    services: BrokerServices, resource: Any, broker_id: int | None, props: dict[str, str], validate_only: bool
) -> None:
    dyn = await current_dynamic_config(services)
    try:
        dyn.validate(props, per_broker=broker_id is not None)
    except DynamicConfigError as exc:  # Kafka: INVALID_REQUEST with the ConfigException's own message
        raise KafkaApiError(Errors.INVALID_REQUEST, str(exc)) from None
    if not validate_only:
        entity = DEFAULT_ENTITY if broker_id is None else str(broker_id)
        try:
            stored = dyn.to_persistent(props, per_broker=broker_id is not None)
        except PasswordEncoderError as exc:  # Kafka: InvalidConfigurationException naming the resource
            raise KafkaApiError(Errors.INVALID_CONFIG, f"Invalid config value for resource ConfigResource("
                                f"type=BROKER, name='{resource.resource_name}'): {exc}") from None
        log.info("Updating broker config %s with new configuration : %s", entity, loggable(props))
        await services.pool.run_blocking(services.admin_zk.change_configs, "brokers", entity, stored)
        if broker_id is not None:  # a keystore named again whose file changed is reloaded now
            try:
                await services.pool.run_blocking(dyn.reload_updated_files, props)
            except DynamicConfigError as exc:
                raise KafkaApiError(Errors.INVALID_REQUEST, str(exc)) from None


def _unsupported(resource: Any) -> KafkaApiError:
    kind = resource_type(resource.resource_type).name
    return KafkaApiError(
        Errors.INVALID_REQUEST, f"AlterConfigs is only supported for topics and brokers, but resource type is {kind}"
    )


async def _alter(services: BrokerServices, resource: Any, validate_only: bool) -> None:
    nulls = [c.name for c in resource.configs if c.value is None]
    if nulls:
        raise KafkaApiError(Errors.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}")
    props = {c.name: c.value for c in resource.configs}
    kind = resource_type(resource.resource_type)
    if kind == ResourceType.TOPIC:
        await _alter_topic(services, resource, props, validate_only)
    elif kind == ResourceType.BROKER:
        broker_id = _alter_broker_id(services, resource.resource_name)
        await _alter_broker(services, resource, broker_id, props, validate_only)
    else:
        raise _unsupported(resource)


def _topic_is_list(name: str) -> bool | None:
    definition = TOPIC_CONFIG_DEFS.get(name)
    return None if definition is None else definition.type == ConfigType.LIST


def _topic_list_default(name: str) -> str:
    return to_config_string(TOPIC_CONFIG_DEFS[name].default, ConfigType.LIST) or ""


def _broker_is_list(name: str) -> bool | None:
    key = CONFIG_KEYS.get(name)
    return None if key is None else key.type == ConfigType.LIST


def _broker_list_default(name: str) -> str:
    return to_config_string(CONFIG_KEYS[name].default, ConfigType.LIST) or ""


def _alter_loggers(ops: list[AlterOp], validate_only: bool) -> None:
    for name, op, value in ops:
        if op in (OpType.SET, OpType.DELETE) and not broker_loggers.logger_exists(name):
            raise KafkaApiError(Errors.INVALID_CONFIG, f"Logger {name} does not exist!")
        if op == OpType.SET and value not in broker_loggers.VALID_LOG_LEVELS:
            raise KafkaApiError(
                Errors.INVALID_CONFIG,
                f"Cannot set the log level of {name} to {value} as it is not a supported log level. "
                f"Valid log levels are {', '.join(broker_loggers.VALID_LOG_LEVELS)}",
            )
        if op == OpType.DELETE and name == broker_loggers.ROOT_LOGGER:
            raise KafkaApiError(Errors.INVALID_REQUEST, f"Removing the log level of the {name} logger is not allowed")
        if op in (OpType.APPEND, OpType.SUBTRACT):
            raise KafkaApiError(
                Errors.INVALID_REQUEST, f"{OpType(op).name} operation is not allowed for the BROKER_LOGGER resource"
            )
    if validate_only:
        return
    for name, op, value in ops:
        if op == OpType.SET:
            broker_loggers.set_level(name, value or "")
        else:
            broker_loggers.unset_level(name)


async def _incremental_alter(services: BrokerServices, resource: Any, validate_only: bool) -> None:
    ops: list[AlterOp] = [(c.name, c.config_operation, c.value) for c in resource.configs]
    check_ops(ops)
    kind = resource_type(resource.resource_type)
    if kind == ResourceType.TOPIC:
        current = await services.pool.run_blocking(services.config_repository.topic_config, resource.resource_name)
        props = apply_ops(current, ops, _topic_is_list, _topic_list_default)
        await _alter_topic(services, resource, props, validate_only)
    elif kind == ResourceType.BROKER:
        broker_id = _alter_broker_id(services, resource.resource_name)
        entity = DEFAULT_ENTITY if broker_id is None else str(broker_id)
        stored = await services.pool.run_blocking(services.zk.get_entity_config, "brokers", entity)
        current = (await current_dynamic_config(services)).from_persistent(stored)
        props = apply_ops(current, ops, _broker_is_list, _broker_list_default)
        await _alter_broker(services, resource, broker_id, props, validate_only)
    elif kind == ResourceType.BROKER_LOGGER:
        _node_id_of(services, resource.resource_name, logger=True)
        _alter_loggers(ops, validate_only)
    elif kind == ResourceType.GROUP:
        await _alter_group(services, resource.resource_name, ops, validate_only)
    else:
        raise _unsupported(resource)


async def _alter_group(services: BrokerServices, group_id: str, ops: list[AlterOp], validate_only: bool) -> None:
    """A group's overrides (Kafka 4's GROUP resource), stored as /config/groups/<id>."""
    if not group_id:
        raise KafkaApiError(Errors.INVALID_REQUEST, "Group name must not be empty")
    current = await services.pool.run_blocking(services.zk.get_entity_config, "groups", group_id)
    props = apply_ops(current, ops, lambda name: False if name in GROUP_CONFIG_DEFS else None, lambda _: "")
    validate_group_config(props, services.config)
    if not validate_only:
        await services.pool.run_blocking(services.admin_zk.change_configs, "groups", group_id, props)
        if services.group_configs is not None:
            # This broker applies it now, as its change listener will again: a client that
            # altered a group's config and then joins through this broker sees the new value,
            # not the one before the notification arrives (the others follow their listeners).
            services.group_configs.update(group_id, props)


def alter_error_response(request: Request, error: Errors) -> AlterConfigsResponse:
    return AlterConfigsResponse(responses=[
        AlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=int(error), resource_type=r.resource_type, resource_name=r.resource_name)
        for r in request.body().resources
    ])


def incremental_error_response(request: Request, error: Errors) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(responses=[
        IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=int(error), resource_type=r.resource_type, resource_name=r.resource_name)
        for r in request.body().resources
    ])


async def _run_alters(
    services: BrokerServices, request: Request, incremental: bool
) -> list[tuple[Any, Errors, str | None]]:
    body = request.body()
    outcomes = []
    for resource in body.resources:
        try:
            check_config_access(services, request, resource, AclOperation.ALTER_CONFIGS)
            if incremental:
                await _incremental_alter(services, resource, body.validate_only)
            else:
                await _alter(services, resource, body.validate_only)
            outcomes.append((resource, Errors.NONE, None))
        except (KafkaApiError, CoordinationError) as exc:
            outcomes.append((resource, *api_error(exc)))
    return outcomes


@handles(ApiKey.ALTER_CONFIGS, alter_error_response)
async def handle_alter_configs(services: BrokerServices, request: Request) -> Response:
    outcomes = await _run_alters(services, request, incremental=False)
    return Response.send(request, AlterConfigsResponse(responses=[
        AlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=int(error), error_message=message, resource_type=r.resource_type, resource_name=r.resource_name)
        for r, error, message in outcomes
    ]))


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS, incremental_error_response)
async def handle_incremental_alter_configs(services: BrokerServices, request: Request) -> Response:
    outcomes = await _run_alters(services, request, incremental=True)
    return Response.send(request, IncrementalAlterConfigsResponse(responses=[
        IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=int(error), error_message=message, resource_type=r.resource_type, resource_name=r.resource_name)
        for r, error, message in outcomes
    ]))
