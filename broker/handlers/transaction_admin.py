"""DescribeTransactions (v0) and ListTransactions (v0-1): the admin view of the transaction coordinator.

Each broker answers for the transactional ids of the ``__transaction_state`` partitions it leads
(admin clients ask every broker to list, the coordinator to describe). While a partition is
loading, listing answers COORDINATOR_LOAD_IN_PROGRESS; describing an id elsewhere, NOT_COORDINATOR.
"""

from __future__ import annotations

from broker.handlers import handles
from broker.handlers._transaction_support import transaction_coordinator
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import DescribeTransactionsResponse, ListTransactionsResponse

D = DescribeTransactionsResponse
L = ListTransactionsResponse
NO_DURATION_FILTER = -1


def describe_error_response(request: Request, error: Errors) -> D:
    return D(throttle_time_ms=0, transaction_states=[
        D.TransactionState(error_code=int(error), transactional_id=txn_id)
        for txn_id in request.body().transactional_ids])


@handles(ApiKey.DESCRIBE_TRANSACTIONS, error_response=describe_error_response)
async def handle_describe_transactions(services: BrokerServices, request: Request) -> Response:
    coordinator = transaction_coordinator(services)
    states = []
    for txn_id in request.body().transactional_ids:
        error, metadata = coordinator.handle_describe_transactions(txn_id)
        if metadata is None:
            states.append(D.TransactionState(error_code=int(error), transactional_id=txn_id))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(metadata.topic_partitions):
            by_topic.setdefault(topic, []).append(partition)
        states.append(D.TransactionState(
            error_code=0, transactional_id=txn_id, transaction_state=metadata.state.state_name,
            transaction_timeout_ms=metadata.txn_timeout_ms, transaction_start_time_ms=metadata.txn_start_timestamp,
            producer_id=metadata.producer_id, producer_epoch=metadata.producer_epoch,
            topics=[D.TopicData(topic=topic, partitions=ids) for topic, ids in by_topic.items()]))
    return Response.send(request, D(throttle_time_ms=0, transaction_states=states))


@handles(ApiKey.LIST_TRANSACTIONS)
async def handle_list_transactions(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    duration = body.duration_filter if request.api_version >= 1 else NO_DURATION_FILTER
    error, unknown, listed = transaction_coordinator(services).handle_list_transactions(
        set(body.producer_id_filters), set(body.state_filters), duration)
    return Response.send(request, L(
        throttle_time_ms=0, error_code=int(error), unknown_state_filters=unknown,
        transaction_states=[L.TransactionState(transactional_id=t.transactional_id, producer_id=t.producer_id,
                                               transaction_state=t.state.state_name) for t in listed]))
