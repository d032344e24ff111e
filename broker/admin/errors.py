"""Mapping typed failures of the layers below to (Kafka error, message) for admin responses."""
from __future__ import annotations

from coordination.errors import CoordinationError
from protocol.errors import Errors, KafkaApiError
from storage.errors import StorageError


def api_error(exc: BaseException) -> tuple[Errors, str | None]:
    """Kafka's ApiError.fromThrowable for the exceptions our layers raise."""
    if isinstance(exc, KafkaApiError):
        return exc.error, exc.message
    if isinstance(exc, CoordinationError):
        return Errors[exc.kafka_error], str(exc) or None
    if isinstance(exc, StorageError):
        return Errors[exc.error_name], str(exc) or None
    return Errors.UNKNOWN_SERVER_ERROR, str(exc) or None
