"""The Kafka error a typed failure of the layers below stands for (Kafka's Errors.forException).

Each layer raises its own typed failures: ``KafkaApiError`` carries its error code, storage
errors name theirs in ``error_name``, coordination errors in ``kafka_error``. Handlers, the
replica manager and ``KafkaApis`` all turn them into response codes here.
"""
from __future__ import annotations

from coordination.errors import CoordinationError
from protocol.errors import Errors, KafkaApiError
from storage.errors import StorageError

TYPED_FAILURES = (KafkaApiError, StorageError, CoordinationError)


def error_of(exc: BaseException) -> Errors | None:
    """The Kafka error code a typed failure stands for, None if it is not a typed failure."""
    if isinstance(exc, KafkaApiError):
        return exc.error
    if isinstance(exc, StorageError):
        return Errors[exc.error_name]
    if isinstance(exc, CoordinationError):
        return Errors[exc.kafka_error]
    return None


def api_error(exc: BaseException) -> tuple[Errors, str | None]:
    """Kafka's ApiError.fromThrowable: the error and its message, UNKNOWN_SERVER_ERROR if untyped."""
    if isinstance(exc, KafkaApiError):
        return exc.error, exc.message
    error = error_of(exc)
    return (Errors.UNKNOWN_SERVER_ERROR if error is None else error), str(exc) or None
