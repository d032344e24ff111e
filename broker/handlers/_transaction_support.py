"""Shared by the transaction handlers: the coordinator, and the error old clients understand."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.errors import Errors, KafkaApiError

if TYPE_CHECKING:
    from broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
    from broker.services import BrokerServices


def transaction_coordinator(services: BrokerServices) -> TransactionCoordinator:
    coordinator = services.transaction_coordinator
    if coordinator is None:
        raise KafkaApiError(Errors.COORDINATOR_NOT_AVAILABLE)
    return coordinator


def for_client_version(error: Errors, version: int, first_fenced_version: int) -> Errors:
    """Clients older than KIP-588 (``first_fenced_version`` of each API) do not know PRODUCER_FENCED: they
    get INVALID_PRODUCER_EPOCH, which they handle the same way."""
    if error is Errors.PRODUCER_FENCED and version < first_fenced_version:
        return Errors.INVALID_PRODUCER_EPOCH
    return error
