"""Where a follower cuts its log, from where the leader says an epoch ends (a Fetch response's
diverging epoch or an OffsetsForLeaderEpoch answer), and what it sends the leader.

The ReplicaFetcher's decision is exercised on a real Log; only the network is left out.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from broker.partition import Partition
from broker.replication.replica_fetcher import FetcherConfig, PartitionFetchState, ReplicaFetcher, ReplicaState
from protocol.errors import Errors
from protocol.messages import FetchResponse
from storage.log import Log
from tests.unit.storage.storage_test_helpers import batch, open_log


async def _inline(fn: Any, *args: Any) -> Any:
    return fn(*args)


def _partition(log: Log) -> Partition:
    partition = Partition("t", 0, broker_id=1)
    partition.make_follower(SimpleNamespace(leader=0, leader_epoch=5, isr=[0, 1], replicas=[0, 1],
                                            partition_epoch=0, controller_epoch=1), log)
    return partition


def _follower(log: Log) -> PartitionFetchState:
    return PartitionFetchState(_partition(log), 5, log.log_end_offset, ReplicaState.FETCHING)


def _fetcher() -> ReplicaFetcher:
    config = FetcherConfig(broker_id=1, max_wait_ms=500, min_bytes=1, response_max_bytes=1 << 20,
                           partition_max_bytes=1 << 20, backoff_ms=1000, socket_timeout_ms=30000,
                           broker_epoch=lambda: 42)
    return ReplicaFetcher("test-fetcher", 0, ("127.0.0.1", 1), config, _inline)


def _log_with_epochs(path: Path, epochs: list[tuple[int, int]]) -> Log:
    """A follower log: ``count`` records written at each leader epoch, in order."""
    log = open_log(path / "t-0")
    for epoch, count in epochs:
        log.append_as_leader(batch(count), epoch)
    return log


def _answer(epoch: int, end_offset: int) -> tuple[int, int]:
    return epoch, end_offset


def _decide(state: PartitionFetchState, answer: tuple[int, int]) -> None:
    asyncio.run(_fetcher()._on_epoch_end_offset(("t", 0), state, *answer))


def test_same_epoch_cuts_at_the_leaders_end_of_it(tmp_path: Path) -> None:
    log = _log_with_epochs(tmp_path, [(0, 4), (1, 6)])  # epoch 1 spans 4..9
    state = _follower(log)
    _decide(state, _answer(1, 7))
    assert log.log_end_offset == 7
    assert (state.state, state.fetch_offset) == (ReplicaState.FETCHING, 7)


def test_nothing_to_cut_when_the_leader_has_more(tmp_path: Path) -> None:
    log = _log_with_epochs(tmp_path, [(0, 4), (1, 6)])
    state = _follower(log)
    _decide(state, _answer(1, 25))
    assert log.log_end_offset == 10
    assert (state.state, state.fetch_offset) == (ReplicaState.FETCHING, 10)


def test_an_epoch_the_follower_never_had_takes_another_round(tmp_path: Path) -> None:
    # Follower: epoch 0 at 0..3, epoch 2 at 4..9 (it led at epoch 2 and wrote a tail nobody got).
    log = _log_with_epochs(tmp_path, [(0, 4), (2, 6)])
    state = _follower(log)
    # The leader's latest epoch below ours is 1, ending at 8: the follower has no epoch 1,
    # so it cuts to the end of its epoch before 1 (0, ending at 4) and asks again.
    _decide(state, _answer(1, 8))
    assert log.log_end_offset == 4
    assert state.state is ReplicaState.TRUNCATING
    assert log.leader_epoch_cache.latest_epoch() == 0
    _decide(state, _answer(0, 4))
    assert (state.state, state.fetch_offset) == (ReplicaState.FETCHING, 4)


def test_leader_ended_our_epoch_earlier(tmp_path: Path) -> None:
    log = _log_with_epochs(tmp_path, [(0, 4), (2, 6)])
    state = _follower(log)
    _decide(state, _answer(0, 3))  # the leader's epoch 0 ends at 3
    assert log.log_end_offset == 3
    assert state.state is ReplicaState.FETCHING


def test_undefined_end_offset_keeps_only_the_high_watermark(tmp_path: Path) -> None:
    log = _log_with_epochs(tmp_path, [(0, 8)])
    log.update_high_watermark(5)
    state = _follower(log)
    _decide(state, _answer(-1, -1))
    assert log.log_end_offset == 5
    assert state.state is ReplicaState.FETCHING


def test_a_diverging_epoch_in_a_fetch_response_cuts_the_log(tmp_path: Path) -> None:
    log = _log_with_epochs(tmp_path, [(0, 4), (2, 6)])  # epoch 2 at 4..9 never reached the leader
    state = _follower(log)
    data = FetchResponse.PartitionData(partition_index=0, high_watermark=4, log_start_offset=0, records=b"",
                                       diverging_epoch=FetchResponse.EpochEndOffset(epoch=0, end_offset=4))
    asyncio.run(_fetcher()._on_partition_data(("t", 0), state, data))
    assert log.log_end_offset == 4
    assert (state.state, state.fetch_offset) == (ReplicaState.FETCHING, 4)


def test_an_epoch_led_without_appends_is_dropped_at_the_log_end(tmp_path: Path) -> None:
    # It led at epoch 3 from offset 4 but wrote nothing before losing leadership; the new leader
    # never had epoch 3 and answers that epoch 2 ends at 4: nothing to cut from the log, but the
    # epoch must go, or every fetch would claim epoch 3 again and diverge forever.
    log = _log_with_epochs(tmp_path, [(2, 4)])
    assert log.assign_epoch_at_log_end(3) == 4
    state = _follower(log)
    _decide(state, _answer(2, 4))
    assert log.log_end_offset == 4
    assert log.leader_epoch_cache.latest_epoch() == 2
    assert (state.state, state.fetch_offset) == (ReplicaState.FETCHING, 4)


def test_a_fenced_fetch_backs_off_without_cutting(tmp_path: Path) -> None:
    log = _log_with_epochs(tmp_path, [(0, 8)])
    state = _follower(log)
    data = FetchResponse.PartitionData(partition_index=0, error_code=int(Errors.FENCED_LEADER_EPOCH),
                                       high_watermark=-1, records=b"")

    async def fetch() -> float:
        await _fetcher()._on_partition_data(("t", 0), state, data)
        return asyncio.get_running_loop().time()

    now = asyncio.run(fetch())
    assert log.log_end_offset == 8
    assert state.state is ReplicaState.FETCHING
    assert state.delayed_until == pytest.approx(now + 1.0, abs=0.5)


def test_a_log_with_epochs_fetches_at_once_and_an_empty_one_truncates_first(tmp_path: Path) -> None:
    fetcher = _fetcher()
    with_epochs, empty = _partition(_log_with_epochs(tmp_path / "a", [(3, 2)])), _partition(open_log(tmp_path / "b"))
    fetcher.add_partitions({("t", 0): with_epochs, ("u", 0): empty})
    assert fetcher.states[("t", 0)].state is ReplicaState.FETCHING
    assert fetcher.states[("u", 0)].state is ReplicaState.TRUNCATING


def test_fetches_are_what_a_kafka_39_follower_sends(tmp_path: Path) -> None:
    state = _follower(_log_with_epochs(tmp_path, [(0, 2), (3, 2)]))
    fetcher = _fetcher()
    request, version, _ = fetcher._fetch_request({("t", 0): state})
    assert version == 12  # the topic id is not known yet: by name, as Kafka falls back
    assert request.topics[0].topic == "t"
    state.partition.topic_id = uuid.uuid4()
    request, version, _ = fetcher._fetch_request({("t", 0): state})
    assert version == 17
    assert request.topics[0].topic_id == state.partition.topic_id
    assert (request.replica_state.replica_id, request.replica_state.replica_epoch) == (1, 42)
    (partition,) = request.topics[0].partitions
    assert (partition.fetch_offset, partition.last_fetched_epoch, partition.current_leader_epoch) == (4, 3, 5)


def test_follower_appends_keep_the_leaders_offsets_and_epochs(tmp_path: Path) -> None:
    leader = _log_with_epochs(tmp_path / "leader", [(0, 3), (4, 2)])
    follower = open_log(tmp_path / "follower" / "t-0")
    follower.append_as_follower(leader.read(0, 1 << 20).records.read_bytes())
    assert follower.log_end_offset == 5
    assert follower.end_offset_for_epoch(0) == (0, 3)
    assert follower.leader_epoch_cache.latest_epoch() == 4
    segment = "00000000000000000000.log"
    assert (Path(leader.dir) / segment).read_bytes() == (Path(follower.dir) / segment).read_bytes()


def test_fetch_requests_encode_at_their_versions(tmp_path: Path) -> None:
    from protocol.api_keys import ApiKey
    from protocol.framing import encode_request

    state = _follower(_log_with_epochs(tmp_path, [(0, 2)]))
    for topic_id in (None, uuid.uuid4()):
        state.partition.topic_id = topic_id
        request, version, _ = _fetcher()._fetch_request({("t", 0): state})
        assert encode_request(request, ApiKey.FETCH, version, 1, "test")


def test_an_unexpected_error_on_one_partition_backs_it_off_and_spares_the_others(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """As Kafka's fetcher: the partition whose data raised is logged and retried later; the other
    partitions of the same response are still processed, and the fetcher keeps running."""
    fetcher = _fetcher()
    first, second = (_follower(open_log(tmp_path / f"t-{i}")) for i in range(2))
    second.partition.partition = 1
    fetcher.states = {("t", 0): first, ("t", 1): second}
    response = FetchResponse(error_code=0, session_id=0, responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[FetchResponse.PartitionData(partition_index=i, high_watermark=0, log_start_offset=0,
                                                           records=b"") for i in range(2)])])

    async def send(*_: Any) -> Any:
        return response
    seen: list[tuple[str, int]] = []

    async def on_data(tp: tuple[str, int], state: PartitionFetchState, data: Any) -> None:
        seen.append(tp)
        if tp == ("t", 0):
            raise RuntimeError("a bug")
    fetcher._send = send  # type: ignore[method-assign]
    fetcher._on_partition_data = on_data  # type: ignore[method-assign]

    async def one_round() -> None:
        await fetcher._fetch(dict(fetcher.states))
    asyncio.run(one_round())
    assert seen == [("t", 0), ("t", 1)]
    assert first.delayed_until > 0 and second.delayed_until == 0
    assert (first.failed, second.failed) == (True, False)  # FailedPartitionsCount
    assert "Unexpected error occurred while processing data for partition t-0 at offset 0" in caplog.text
    assert "RuntimeError: a bug" in caplog.text
    fetcher._on_partition_data = ReplicaFetcher._on_partition_data.__get__(fetcher)  # type: ignore[method-assign]
    first.delayed_until = 0.0
    asyncio.run(one_round())
    assert not first.failed  # its next round went through
    assert fetcher.request_rate.rate(time.monotonic()) > 0  # MinFetchRate


def test_an_unexpected_error_in_a_round_does_not_end_the_fetcher(tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    fetcher = _fetcher()
    state = _follower(open_log(tmp_path / "t-0"))
    fetcher.states = {("t", 0): state}
    rounds: list[int] = []

    async def run() -> None:
        second = asyncio.Event()

        async def fetch(ready: dict[tuple[str, int], PartitionFetchState]) -> None:
            rounds.append(len(ready))
            if len(rounds) == 1:
                raise RuntimeError("a bug")
            second.set()
            await asyncio.sleep(3600)  # until the shutdown cancels it
        fetcher._fetch = fetch  # type: ignore[method-assign]
        fetcher.start()
        await asyncio.wait_for(second.wait(), 10)  # the first round raised and backed off; the second came
        await fetcher.shutdown()
    fetcher.config.backoff_ms = 50
    asyncio.run(run())
    assert rounds == [1, 1]
    assert "Unexpected error in a fetch round" in caplog.text
