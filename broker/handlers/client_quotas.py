"""DescribeClientQuotas and AlterClientQuotas (v0-1); the logic is ``broker.admin.client_quotas``."""

from __future__ import annotations

from typing import Any

from broker.admin.client_quotas import FilterComponent, alter_client_quotas, describe_client_quotas
from broker.errors import api_error
from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError, error_message
from protocol.messages import AlterClientQuotasResponse, DescribeClientQuotasResponse

D, A = DescribeClientQuotasResponse, AlterClientQuotasResponse


def describe_error_response(request: Request, error: Errors) -> Any:
    return D(error_code=int(error), error_message=error_message(error), entries=None)


@handles(ApiKey.DESCRIBE_CLIENT_QUOTAS, error_response=describe_error_response)
async def handle_describe_client_quotas(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    components = [FilterComponent(c.entity_type, c.match_type, c.match) for c in body.components]
    try:
        found = await services.pool.run_blocking(describe_client_quotas, services.zk, components, body.strict)
    except KafkaApiError as exc:
        return Response.send(request, D(error_code=int(exc.error), error_message=exc.message, entries=None))
    return Response.send(request, D(error_code=0, error_message=None, entries=[
        D.EntryData(entity=[D.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                    values=[D.ValueData(key=k, value=v) for k, v in values.items()])
        for entity, values in found]))


def _entity(entry: Any) -> list[Any]:
    return [A.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity]


def alter_error_response(request: Request, error: Errors) -> Any:
    return A(entries=[A.EntryData(error_code=int(error), error_message=error_message(error), entity=_entity(entry))
                      for entry in request.body().entries])


@handles(ApiKey.ALTER_CLIENT_QUOTAS, error_response=alter_error_response)
async def handle_alter_client_quotas(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    results = []
    for entry in body.entries:
        entity = [(e.entity_type, e.entity_name) for e in entry.entity]
        ops = [(op.key, op.value, op.remove) for op in entry.ops]
        try:
            await services.pool.run_blocking(alter_client_quotas, services.admin_zk, entity, ops, body.validate_only)
            error, message = Errors.NONE, None
        except Exception as exc:  # every entry has its own outcome (Kafka's ApiError.fromThrowable)
            error, message = api_error(exc)
        results.append(A.EntryData(error_code=int(error), error_message=message, entity=_entity(entry)))
    return Response.send(request, A(entries=results))
