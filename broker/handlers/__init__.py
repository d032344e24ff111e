"""Registry of request handlers, one module per API family.

Handlers register themselves with ``@handles(ApiKey.X)`` so several people can add APIs
without editing one shared dispatch table; ``load_all`` imports every module of this
package so that registration happens before the broker starts serving.

A handler may also register ``error_response``: ``(request, error) -> Message | None`` building
the answer for a failed request in which every topic/partition/resource carries the error
(Kafka's ``AbstractRequest.getErrorResponse``; None where Kafka closes the connection instead,
as for an acks=0 produce). ``failure_response`` uses it for every request that fails, whether the
handler raised or its response could not be encoded: one bad request costs only its own answer.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from broker.errors import error_of
from broker.network.request_channel import Response
from protocol.api_keys import ApiKey, response_class
from protocol.errors import Errors
from protocol.messages import Message

if TYPE_CHECKING:
    from broker.network.request_channel import Request
    from broker.services import BrokerServices

log = logging.getLogger(__name__)

HandlerFn = Callable[["BrokerServices", "Request"], Awaitable["Response | None"]]
ErrorResponseFn = Callable[["Request", Errors], "Message | None"]

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


def error_response(request: Request, error: Errors) -> Response:
    """The request's API answering ``error`` everywhere; a close where Kafka closes or none exists."""
    api_key = ApiKey(request.api_key)
    try:
        builder = ERROR_RESPONSES.get(api_key)
        if builder is not None:
            body = builder(request, error)
            if body is None:
                log.debug("Closing connection %s: %s failed with %s", request.connection_id, api_key.name,
                          error.name)
                return Response.close(request)
            return Response.send(request, body)
        cls = response_class(api_key)
        if "error_code" in cls._fields:
            return Response.send(request, cls(error_code=int(error)))
    except Exception:
        log.exception("Closing connection %s: cannot answer %r with %s", request.connection_id, request.header,
                      error.name)
        return Response.close(request)
    log.warning("Closing connection %s: %s failed with %s and has no error response",
                request.connection_id, api_key.name, error.name)
    return Response.close(request)


def failure_response(request: Request, exc: BaseException) -> Response:
    """Kafka's handleError: a typed failure answers its error; anything else is a bug, logged with its
    cause and answered UNKNOWN_SERVER_ERROR (a response that fails to encode lands here too)."""
    error = error_of(exc)
    if error is None:
        log.error("Unexpected error handling %r (answering UNKNOWN_SERVER_ERROR)", request, exc_info=exc)
        error = Errors.UNKNOWN_SERVER_ERROR
    else:
        log.debug("Request %r failed: %s", request.header, exc)
    return error_response(request, error)


def answer(request: Request, build: Callable[[], Message]) -> Response:
    """The response ``build()`` makes, or the failure's error response: for answers sent after a wait,
    where no dispatcher is around to catch."""
    try:
        return Response.send(request, build())
    except Exception as exc:
        return failure_response(request, exc)
