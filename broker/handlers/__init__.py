"""Registry of request handlers, one module per API family.

Handlers register themselves with ``@handles(ApiKey.X)`` so several people can add APIs
without editing one shared dispatch table; ``load_all`` imports every module of this
package so that registration happens before the broker starts serving.

A handler may also register ``error_response``: ``(request, error) -> Message`` building
the answer for a failed request in which every topic/partition/resource carries the error
(Kafka's ``AbstractRequest.getErrorResponse``). ``KafkaApis`` uses it when the handler
raises ``KafkaApiError`` or a storage error.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import Message

if TYPE_CHECKING:
    from broker.network.request_channel import Request, Response
    from broker.services import BrokerServices

HandlerFn = Callable[["BrokerServices", "Request"], Awaitable["Response | None"]]
ErrorResponseFn = Callable[["Request", Errors], Message]

HANDLERS: dict[ApiKey, HandlerFn] = {}
ERROR_RESPONSES: dict[ApiKey, ErrorResponseFn] = {}


def handles(api_key: ApiKey, error_response: ErrorResponseFn | None = None) -> Callable[[HandlerFn], HandlerFn]:
    """Register the decorated coroutine as the handler of ``api_key`` (once per key)."""

    def register(fn: HandlerFn) -> HandlerFn:
        existing = HANDLERS.get(api_key)
        if existing is not None and existing is not fn:
            raise ValueError(f"{api_key.name} already handled by {existing.__module__}.{existing.__qualname__}")
        HANDLERS[api_key] = fn
        if error_response is not None:
            ERROR_RESPONSES[api_key] = error_response
        return fn

    return register


def load_all() -> dict[ApiKey, HandlerFn]:
    """Import every handler module of this package; returns the filled registry."""
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")
    return HANDLERS
