"""KafkaApis: routes each request to its registered handler (Kafka's KafkaApis.handle).

Handlers live in ``broker.handlers`` and register by API key. This module only dispatches
and turns a handler's typed failure (``broker.errors``) into the API's error response. A
registered ``error_response`` builder answers with the error on every topic/partition; without one, a
response with a top-level ``error_code`` is sent; anything else closes the connection.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from broker.errors import TYPED_FAILURES, error_of
from broker.handlers import ERROR_RESPONSES, HANDLERS
from broker.network.api_version_manager import ApiVersionManager
from broker.network.request_channel import Request, Response
from protocol.api_keys import ApiKey, response_class
from protocol.errors import Errors

if TYPE_CHECKING:
    from broker.services import BrokerServices

log = logging.getLogger(__name__)


class HasServices(Protocol):
    services: BrokerServices | None  # set once the server has built its components


class KafkaApis:
    """The handler function of the KafkaRequestHandlerPool."""

    def __init__(self, server: HasServices) -> None:
        self.server = server

    async def __call__(self, request: Request) -> Response | None:
        try:
            api_key = ApiKey(request.api_key)
            handler = HANDLERS[api_key]
        except (ValueError, KeyError):
            log.warning("Closing connection %s: no handler for api key %d", request.connection_id, request.api_key)
            return Response.close(request)
        services = self.server.services
        assert services is not None, "requests are served only after startup built the services"
        try:
            denied = services.auth.check_request(request)
            if denied is not None:
                return self._error_response(api_key, request, denied)
            return await handler(services, request)
        except TYPED_FAILURES as exc:
            error = error_of(exc)
            assert error is not None
            log.debug("Request %r failed: %s", request.header, exc)
            return self._error_response(api_key, request, error)

    @staticmethod
    def _error_response(api_key: ApiKey, request: Request, error: Errors) -> Response:
        builder = ERROR_RESPONSES.get(api_key)
        if builder is not None:
            return Response.send(request, builder(request, error))
        cls = response_class(api_key)
        if "error_code" in cls._fields:
            return Response.send(request, cls(error_code=int(error)))
        log.warning("Closing connection %s: %s failed with %s and has no error response",
                    request.connection_id, api_key.name, error.name)
        return Response.close(request)


class RegisteredApiVersionManager(ApiVersionManager):
    """Serves only the APIs that have a registered handler, so ApiVersions never advertises more."""

    def __init__(self, enable_unstable_last_version: bool = False) -> None:
        super().__init__(enable_unstable_last_version)

    def version_range(self, api_key: int) -> tuple[int, int] | None:
        return super().version_range(api_key) if api_key in HANDLERS else None

    def is_api_enabled(self, api_key: int, api_version: int) -> bool:
        return api_key in HANDLERS and super().is_api_enabled(api_key, api_version)

    def enabled_apis(self) -> list[tuple[ApiKey, int, int]]:
        return [entry for entry in super().enabled_apis() if entry[0] in HANDLERS]
