"""ApiVersions: the APIs and version ranges this broker serves (only registered handlers)."""

from __future__ import annotations

from broker.handlers import handles
from broker.network.api_version_manager import api_versions_answer
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey


@handles(ApiKey.API_VERSIONS)
async def handle_api_versions(services: BrokerServices, request: Request) -> Response:
    body, version = api_versions_answer(services.api_version_manager, request.api_version, request.body)
    return Response.send(request, body, version=version)
