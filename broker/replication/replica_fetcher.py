"""ReplicaFetcher: copies the leader's log for the partitions this broker follows from one leader.

Kafka's ReplicaFetcherThread as an asyncio task, sending what a Kafka 3.9 broker sends: Fetch v17
(topic ids, the epoch of our last batch, our replica id and broker epoch) in an incremental fetch
session (``FetchSessionHandler``), OffsetsForLeaderEpoch v4.
Each partition is in one of two states:

* ``FETCHING`` — fetch from our log end with our replica id and the epoch of our last batch;
  append the leader's batches unchanged, take the leader's high watermark and log start offset.
  When the leader answers that our log diverges from its own (KIP-595 truncation on fetch),
  cut our log where our last common epoch ends, exactly where Kafka cuts it. A partition whose
  log has an epoch starts here;
* ``TRUNCATING`` — a partition without any epoch yet cuts its log to the high watermark; one
  whose cut could not be completed from a diverging epoch (we lack the leader's epoch) asks the
  leader where our latest epoch ends (OffsetsForLeaderEpoch) before fetching again.

A partition whose leader answered an error waits ``replica.fetch.backoff.ms`` before it is
tried again, and so does one whose data raised something unexpected (logged with its traceback,
as Kafka's fetcher logs it, rather than ending the fetcher of every partition it copies; counted
in FailedPartitionsCount until a round of it succeeds, where Kafka stops fetching it until its
next LeaderAndIsr). A
throttled partition that is not caught up is left out of fetches while the follower replication
quota is used up. Response processing holds ``processing``, which the ReplicaManager also takes
before it hands the partition to someone else (a new leader epoch, leadership, deletion), so
an append in progress always finishes against the state it was fetched for.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.network.network_client import NETWORK_ERRORS, NetworkClient
from broker.quota.sampled_rate import SampledRate
from broker.replication.fetch_session_handler import FetchSessionHandler, SessionFetch
from broker.security.client_security import PLAINTEXT, ClientSecurity
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.exceptions import ProtocolError
from protocol.messages import FetchRequest, OffsetForLeaderEpochRequest
from storage.errors import StorageError
from storage.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

if TYPE_CHECKING:
    from broker.partition import Partition
    from broker.replication.replication_quota import ReplicationQuotaManager
    from storage.log import Log

log = logging.getLogger(__name__)

FETCH_VERSION = 17  # what IBP 3.9 sends: topic ids, last fetched epoch, replica state
FETCH_VERSION_BY_NAME = 12  # Kafka's fallback while a partition's topic id is unknown
TOPIC_IDS_MIN_VERSION = 13
REPLICA_STATE_MIN_VERSION = 15
SESSION_ERRORS = (Errors.FETCH_SESSION_ID_NOT_FOUND, Errors.INVALID_FETCH_SESSION_EPOCH,
                  Errors.FETCH_SESSION_TOPIC_ID_ERROR)
OFFSET_FOR_LEADER_EPOCH_VERSION = 4  # with the replica id, flexible
REQUEST_RATE_WINDOWS, REQUEST_RATE_WINDOW_S = 12, 5.0  # the fetch request rate over the last minute
TopicPartition = tuple[str, int]
RunBlocking = Callable[..., Awaitable[Any]]


def _uncounted(size: int) -> None:
    pass


def _unknown_broker_epoch() -> int:
    return -1


def offset_truncation_state(tp_log: Log, leader_epoch: int, end_offset: int) -> tuple[int, bool]:
    """Where a replica's log must be cut, given where the leader's copy of the replica's latest epoch
    ends, and whether that cut is final (Kafka's getOffsetTruncationState): False when the replica
    lacks the leader's epoch and must ask again about its own epoch before that one."""
    log_end = tp_log.log_end_offset
    if end_offset == UNDEFINED_EPOCH_OFFSET:
        return tp_log.high_watermark, True
    if leader_epoch == UNDEFINED_EPOCH:
        return min(end_offset, log_end), True
    epoch, end = tp_log.end_offset_for_epoch(leader_epoch)
    if end == UNDEFINED_EPOCH_OFFSET:  # we never had that epoch nor any later one
        return min(end_offset, log_end), True
    if epoch != leader_epoch:  # we lack the leader's epoch: cut to ours before it, ask again
        return min(end, log_end), False
    return min(end, end_offset, log_end), True


class ReplicaState(enum.Enum):
    TRUNCATING = "Truncating"
    FETCHING = "Fetching"


@dataclass(slots=True)
class FetcherConfig:
    broker_id: int
    max_wait_ms: int  # replica.fetch.wait.max.ms
    min_bytes: int  # replica.fetch.min.bytes
    response_max_bytes: int  # replica.fetch.response.max.bytes
    partition_max_bytes: int  # replica.fetch.max.bytes
    backoff_ms: int  # replica.fetch.backoff.ms
    socket_timeout_ms: int  # replica.socket.timeout.ms
    broker_epoch: Callable[[], int] = _unknown_broker_epoch  # sent in Fetch v15+'s replica state
    security: ClientSecurity = PLAINTEXT  # TLS and SASL of the inter-broker listener
    replication_bytes_in: Callable[[int], None] = _uncounted  # BrokerTopicMetrics ReplicationBytesInPerSec


@dataclass(slots=True)
class PartitionFetchState:
    partition: Partition
    leader_epoch: int
    fetch_offset: int
    state: ReplicaState
    delayed_until: float = 0.0  # event-loop time
    in_sync: bool = False  # reached the leader's high watermark at the last fetch
    failed: bool = False  # its last round ended in an unexpected error (FailedPartitionsCount)
    lag: int = 0  # the leader's high watermark minus our next offset, at the last fetch (Kafka's FetcherLagStats)

    @property
    def log(self) -> Log:
        assert self.partition.log is not None
        return self.partition.log


class ReplicaFetcher:
    def __init__(self, name: str, leader_id: int, endpoint: tuple[str, int], config: FetcherConfig,
                 run_blocking: RunBlocking, quota: ReplicationQuotaManager | None = None) -> None:
        self.name = name
        self.leader_id = leader_id
        self.endpoint = endpoint
        self.config = config
        self.run_blocking = run_blocking
        self.quota = quota
        self.states: dict[TopicPartition, PartitionFetchState] = {}
        self.processing = asyncio.Lock()
        self._wakeup = asyncio.Event()
        self._client = NetworkClient(name, (config.socket_timeout_ms + config.max_wait_ms) / 1000, config.security)
        self.session = FetchSessionHandler()
        self.request_rate = SampledRate(REQUEST_RATE_WINDOWS, REQUEST_RATE_WINDOW_S)  # fetches sent (MinFetchRate)
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"ReplicaFetcher({self.name}, leader={self.leader_id}, partitions={len(self.states)})"

    # --- partitions ---------------------------------------------------------------------------
    def add_partitions(self, partitions: dict[TopicPartition, Partition]) -> None:
        """Start following from the log end: fetching with our latest epoch, which the leader checks,
        or, for a log without epochs, truncating to the high watermark first (call with ``processing`` held)."""
        for tp, partition in partitions.items():
            assert partition.log is not None
            has_epoch = partition.log.leader_epoch_cache.latest_epoch() is not None
            self.states[tp] = PartitionFetchState(partition, partition.leader_epoch, partition.log.log_end_offset,
                                                  ReplicaState.FETCHING if has_epoch else ReplicaState.TRUNCATING)
        self._wakeup.set()

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        """Stop following (call with ``processing`` held)."""
        for tp in tps:
            self.states.pop(tp, None)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    @property
    def is_dead(self) -> bool:
        """The task ended other than by shutdown (Kafka's isThreadFailed, DeadThreadCount)."""
        task = self._task
        return task is not None and task.done() and not task.cancelled()

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._client.close()

    # --- the loop -----------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            ready = await self._ready_partitions()
            truncating = {tp: s for tp, s in ready.items() if s.state is ReplicaState.TRUNCATING}
            try:
                if truncating:
                    await self._truncate(truncating)
                else:
                    await self._fetch(ready)
            except Exception:  # noqa: BLE001 - a bug must not end the fetcher for every partition it copies
                log.exception("[%s] Unexpected error in a fetch round for %s; backing off", self.name, sorted(ready))
                self._fail(list(ready.values()))

    async def _ready_partitions(self) -> dict[TopicPartition, PartitionFetchState]:
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            ready = {tp: s for tp, s in self.states.items() if s.delayed_until <= now}
            if ready:
                return ready
            timeout = min((s.delayed_until for s in self.states.values()), default=now + 3600) - now
            self._wakeup.clear()
            try:
                async with asyncio.timeout(timeout):  # not wait_for: see NetworkClient.send
                    await self._wakeup.wait()
            except TimeoutError:
                pass

    def _fail(self, states: list[PartitionFetchState]) -> None:
        """Kafka marks such partitions failed and stops fetching them until their next
        LeaderAndIsr; here they are counted as failed and tried again after the back-off."""
        for state in states:
            state.failed = True
        self._back_off(states)

    def _back_off(self, states: list[PartitionFetchState]) -> None:
        until = asyncio.get_running_loop().time() + self.config.backoff_ms / 1000
        for state in states:
            state.delayed_until = until

    async def _send(self, body: Any, api_key: ApiKey, version: int,
                    states: list[PartitionFetchState]) -> Any | None:
        try:
            return await self._client.send(self.endpoint, body, api_key, version)
        except NETWORK_ERRORS as exc:
            log.warning("[%s] %s to broker %d at %s:%d failed: %s", self.name, api_key.name, self.leader_id,
                        *self.endpoint, exc or type(exc).__name__)
            self._back_off(states)
            return None

    # --- truncation ---------------------------------------------------------------------------
    async def _truncate(self, truncating: dict[TopicPartition, PartitionFetchState]) -> None:
        """One OffsetsForLeaderEpoch round for the partitions that must truncate."""
        asked: dict[TopicPartition, tuple[PartitionFetchState, int]] = {}
        async with self.processing:
            for tp, state in truncating.items():
                epoch = state.log.leader_epoch_cache.latest_epoch()
                if epoch is None:  # nothing to compare epochs with: keep what the leader acknowledged
                    await self._truncate_to(tp, state, state.log.high_watermark, completed=True)
                else:
                    asked[tp] = (state, epoch)
        if not asked:
            return
        topics: dict[str, list[Any]] = {}
        for (topic, index), (state, epoch) in asked.items():
            topics.setdefault(topic, []).append(OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                partition=index, current_leader_epoch=state.leader_epoch, leader_epoch=epoch))
        request = OffsetForLeaderEpochRequest(replica_id=self.config.broker_id, topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=name, partitions=parts)
            for name, parts in topics.items()])
        response = await self._send(request, ApiKey.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION,
                                    [s for s, _ in asked.values()])
        if response is None:
            return
        async with self.processing:
            for topic in response.topics:
                for p in topic.partitions:
                    tp = (topic.topic, p.partition)
                    entry = asked.pop(tp, None)
                    if entry is None or self.states.get(tp) is not entry[0]:
                        continue  # removed or replaced while we waited
                    if p.error_code:
                        log.info("[%s] OffsetsForLeaderEpoch for %s-%d: %s; retrying", self.name, *tp,
                                 Errors(p.error_code).name)
                        self._back_off([entry[0]])
                    else:
                        await self._on_epoch_end_offset(tp, entry[0], p.leader_epoch, p.end_offset)
            self._back_off([s for s, _ in asked.values()])  # partitions the leader did not answer for

    async def _on_epoch_end_offset(self, tp: TopicPartition, state: PartitionFetchState, leader_epoch: int,
                                   end_offset: int) -> None:
        """Cut where the leader's copy of an epoch ends (an OffsetsForLeaderEpoch answer or a Fetch
        response's diverging epoch)."""
        offset, completed = offset_truncation_state(state.log, leader_epoch, end_offset)
        await self._truncate_to(tp, state, offset, completed)

    async def _truncate_to(self, tp: TopicPartition, state: PartitionFetchState, offset: int,
                           completed: bool) -> None:
        tp_log = state.log
        if offset < tp_log.log_end_offset:
            log.info("[%s] Truncating %s-%d to offset %d (log end was %d)", self.name, *tp, offset,
                     tp_log.log_end_offset)
        try:
            await self.run_blocking(tp_log.truncate_to, offset)  # also cuts epochs past the log end
        except StorageError as exc:  # its log dir failed: the replica manager stops this partition
            log.error("[%s] Cannot truncate %s-%d to offset %d: %s", self.name, *tp, offset, exc)
            self._back_off([state])
            return
        state.state = ReplicaState.FETCHING if completed else ReplicaState.TRUNCATING
        state.fetch_offset = tp_log.log_end_offset

    # --- fetching -----------------------------------------------------------------------------
    def _throttled(self, tp: TopicPartition, state: PartitionFetchState) -> bool:
        return self.quota is not None and not state.in_sync and self.quota.is_throttled(tp)

    async def _fetch(self, ready: dict[TopicPartition, PartitionFetchState]) -> None:
        fetching = ready
        if self.quota is not None and self.quota.is_quota_exceeded():
            fetching = {tp: s for tp, s in ready.items() if not self._throttled(tp, s)}
            if not fetching:
                await asyncio.sleep(self.quota.window_s)
                return
        offsets = {tp: s.fetch_offset for tp, s in fetching.items()}
        request, version, fetch = self._fetch_request(fetching)
        self.request_rate.record(1, time.monotonic())
        response = await self._send(request, ApiKey.FETCH, version, list(fetching.values()))
        if response is None:
            self.session.handle_error()
            return
        self.session.handle_response(fetch, response.error_code, response.session_id)
        if response.error_code in SESSION_ERRORS:  # the next fetch is a full one, opening a new session
            log.info("[%s] Fetch session with broker %d lost: %s", self.name, self.leader_id,
                     Errors(response.error_code).name)
            return
        if response.error_code:
            log.warning("[%s] Fetch from broker %d failed: %s", self.name, self.leader_id,
                        Errors(response.error_code).name)
            self._back_off(list(fetching.values()))
            return
        names = {s.partition.topic_id: tp[0] for tp, s in fetching.items()}
        async with self.processing:
            for topic in response.responses:
                name = names.get(topic.topic_id) if version >= TOPIC_IDS_MIN_VERSION else topic.topic
                for data in topic.partitions:
                    tp = (name or "", data.partition_index)
                    state = fetching.get(tp)
                    if state is None or self.states.get(tp) is not state or state.fetch_offset != offsets[tp]:
                        continue  # removed, replaced or truncated while the fetch was in flight
                    try:
                        await self._on_partition_data(tp, state, data)
                    except Exception:  # noqa: BLE001 - as Kafka's fetcher: this partition only, logged
                        log.exception("[%s] Unexpected error occurred while processing data for partition %s-%d at "
                                      "offset %d", self.name, *tp, state.fetch_offset)
                        self._fail([state])

    def _fetch_request(self, fetching: dict[TopicPartition, PartitionFetchState]
                       ) -> tuple[FetchRequest, int, SessionFetch]:
        """Fetch v17 by topic id, or v12 by name while some partition's topic id is unknown (as Kafka),
        carrying what the fetch session needs: every partition in a full fetch, else the changed ones."""
        by_id = all(s.partition.topic_id is not None for s in fetching.values())
        version = FETCH_VERSION if by_id else FETCH_VERSION_BY_NAME
        partitions = {}
        for tp, state in fetching.items():
            latest_epoch = state.log.leader_epoch_cache.latest_epoch()
            partitions[tp] = (state.partition.topic_id, FetchRequest.FetchPartition(
                partition=tp[1], current_leader_epoch=state.leader_epoch, fetch_offset=state.fetch_offset,
                last_fetched_epoch=UNDEFINED_EPOCH if latest_epoch is None else latest_epoch,
                log_start_offset=state.log.log_start_offset, partition_max_bytes=self.config.partition_max_bytes))
        fetch = self.session.build(partitions, by_id)
        topic_ids = {tp[0]: topic_id for tp, (topic_id, _) in partitions.items()} | fetch.forgotten_topic_ids
        topics: dict[str, list[Any]] = {}
        for (topic, _), part in fetch.partitions.items():
            topics.setdefault(topic, []).append(part)
        forgotten: dict[str, list[int]] = {}
        for topic, index in fetch.forgotten:
            forgotten.setdefault(topic, []).append(index)
        request = FetchRequest(
            max_wait_ms=self.config.max_wait_ms, min_bytes=self.config.min_bytes,
            max_bytes=self.config.response_max_bytes, isolation_level=0, session_id=fetch.session_id,
            session_epoch=fetch.epoch,
            topics=[FetchRequest.FetchTopic(topic_id=topic_ids[name], partitions=parts) if by_id
                    else FetchRequest.FetchTopic(topic=name, partitions=parts) for name, parts in topics.items()],
            forgotten_topics_data=[FetchRequest.ForgottenTopic(topic_id=topic_ids[name], partitions=parts) if by_id
                                   else FetchRequest.ForgottenTopic(topic=name, partitions=parts)
                                   for name, parts in forgotten.items()],
            rack_id="")
        if version >= REPLICA_STATE_MIN_VERSION:
            request.replica_state = FetchRequest.ReplicaState(replica_id=self.config.broker_id,
                                                              replica_epoch=self.config.broker_epoch())
        else:
            request.replica_id = self.config.broker_id
        return request, version, fetch

    async def _on_partition_data(self, tp: TopicPartition, state: PartitionFetchState, data: Any) -> None:
        error = Errors(data.error_code)
        tp_log = state.log
        diverging = data.diverging_epoch
        if error is Errors.NONE and diverging.epoch >= 0 and diverging.end_offset >= 0:
            log.info("[%s] %s-%d diverges from the leader's log after epoch %d at offset %d", self.name, *tp,
                     diverging.epoch, diverging.end_offset)
            await self._on_epoch_end_offset(tp, state, diverging.epoch, diverging.end_offset)
        elif error is Errors.NONE:
            records = data.records
            if records is not None and len(records):
                try:
                    # On the loop unless it rolls or fsyncs, as the leader's appends (ReplicaManager).
                    if tp_log.try_append_as_follower(records) is None:
                        await self.run_blocking(tp_log.append_as_follower, records)
                except (StorageError, ProtocolError) as exc:
                    log.error("[%s] Cannot append the leader's data to %s-%d at offset %d: %s", self.name, *tp,
                              state.fetch_offset, exc)
                    self._back_off([state])
                    return
                self.config.replication_bytes_in(len(records))
                if self._throttled(tp, state):
                    assert self.quota is not None
                    self.quota.record(len(records))
            state.failed = False
            state.fetch_offset = tp_log.log_end_offset
            if data.log_start_offset > tp_log.log_start_offset:
                await self.run_blocking(tp_log.maybe_increment_log_start_offset, data.log_start_offset)
            tp_log.update_high_watermark(min(data.high_watermark, tp_log.log_end_offset))
            state.in_sync = tp_log.log_end_offset >= data.high_watermark
            state.lag = max(0, data.high_watermark - state.fetch_offset)
        elif error is Errors.OFFSET_OUT_OF_RANGE:
            await self._on_offset_out_of_range(tp, state, data)
        else:
            if error not in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.UNKNOWN_LEADER_EPOCH,
                             Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_TOPIC_OR_PARTITION):
                log.warning("[%s] Fetch of %s-%d at offset %d: %s", self.name, *tp, state.fetch_offset, error.name)
            self._back_off([state])

    async def _on_offset_out_of_range(self, tp: TopicPartition, state: PartitionFetchState, data: Any) -> None:
        """Behind the leader's log start: restart there. Ahead of its end (an unclean election):
        truncate again by epochs."""
        tp_log = state.log
        if 0 <= state.fetch_offset < data.log_start_offset:
            log.warning("[%s] %s-%d: fetch offset %d is below the leader's log start offset %d; "
                        "restarting the log there", self.name, *tp, state.fetch_offset, data.log_start_offset)
            try:
                await self.run_blocking(tp_log.truncate_fully_and_start_at, data.log_start_offset)
            except StorageError as exc:  # its log dir failed: the replica manager stops this partition
                log.error("[%s] Cannot restart %s-%d at offset %d: %s", self.name, *tp, data.log_start_offset, exc)
                self._back_off([state])
                return
            state.fetch_offset = data.log_start_offset
        else:
            log.warning("[%s] %s-%d: fetch offset %d is beyond the leader's log end; truncating to the leader's "
                        "high watermark %d", self.name, *tp, state.fetch_offset, data.high_watermark)
            await self._truncate_to(tp, state, max(data.high_watermark, 0), completed=True)
