"""The cleaner's rules, one cleaning round at a time: what Kafka's Cleaner keeps and how."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.records.batch import DELETE_HORIZON_FLAG_MASK
from protocol.records.builder import RecordBatchBuilder
from protocol.records.control import ControlRecordType, parse_control_type
from protocol.records.log_entry import decode_entry_records
from storage.cleaner.cleaner import Cleaner
from storage.cleaner.cleaning_source import LocalCleaningSource
from storage.log_config import LogConfig
from storage.producer_state import AppendOrigin
from cleaner_helpers import (
    batches,
    clean_once,
    compacted,
    finish_writes,
    keyed_batch,
    latest_values,
    open_compacted,
    records,
)
from storage_test_helpers import marker

NOW = 10_000_000


def _key_updates(log, rounds: int = 30, keys: int = 10, codec: int = 0) -> dict[bytes, bytes]:  # type: ignore[no-untyped-def]
    expected = {}
    for i in range(rounds):
        items = []
        for j in range(4):
            key, value = b"k%d" % ((i * 4 + j) % keys), b"v%d-%d" % (i, j)
            items.append((key, value))
            expected[key] = value
        log.append_as_leader(keyed_batch(items, timestamp=1000 + i * 10, codec=codec), leader_epoch=3)
    return expected


def test_latest_value_per_key_with_offsets_and_batch_boundaries_kept(tmp_path: Path) -> None:
    log = open_compacted(tmp_path)
    expected = _key_updates(log)
    finish_writes(log)
    before = {h.base_offset: (h, data) for h, data in batches(log)}
    before_records = {offset: (key, value) for offset, key, value in records(log)}
    end_offset = log.log_end_offset
    result = clean_once(log, NOW)
    assert result is not None and result[0] == end_offset
    assert latest_values(log) == expected
    assert log.log_end_offset == end_offset
    for header, data in batches(log):
        original, original_data = before[header.base_offset]
        assert (header.last_offset_delta, header.partition_leader_epoch, header.producer_id) == \
            (original.last_offset_delta, original.partition_leader_epoch, original.producer_id)
        if header.record_count == original.record_count:
            assert data == original_data  # a batch the cleaner left whole is copied byte for byte
    for offset, key, value in records(log):
        assert before_records[offset] == (key, value)
    assert len(records(log)) == 10
    checkpoint = (tmp_path / "cleaner-offset-checkpoint").read_text()
    assert checkpoint == f"0\n1\nt 0 {end_offset}\n"
    for segment in log.segments:
        segment.sanity_check()
    log.close()


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_every_codec_headers_timestamps_and_producer_fields_survive_a_rebuild(tmp_path: Path, codec: int) -> None:
    log = open_compacted(tmp_path, compacted(segment_bytes=1 << 20))
    headers = [("h1", b"x"), ("h2", None)]
    log.append_as_leader(keyed_batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], timestamp=5000, codec=codec,
                                     producer_id=11, producer_epoch=2, base_sequence=0, headers=headers), 0)
    log.append_as_leader(keyed_batch([(b"a", b"4")], timestamp=7000, producer_id=12, producer_epoch=0,
                                     base_sequence=0), 0)
    log.append_as_leader(keyed_batch([(b"z", b"9")], timestamp=8000, producer_id=12, producer_epoch=0,
                                     base_sequence=1), 0)
    finish_writes(log)
    clean_once(log, NOW)
    first, data = batches(log)[0]
    assert (first.base_offset, first.last_offset_delta, first.record_count, first.compression) == (0, 2, 2, codec)
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (11, 2, 0)
    assert first.base_timestamp == 5001 and first.max_timestamp == 5002  # the first kept record's timestamp
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in decode_entry_records(data, 0)] == [
        (1, b"b", b"2", 5001, headers), (2, b"c", b"3", 5002, headers)]
    log.close()


def test_log_append_time_batches_keep_their_append_time(tmp_path: Path) -> None:
    log = open_compacted(tmp_path, compacted(segment_bytes=1 << 20, message_timestamp_type="LogAppendTime"))
    log.append_as_leader(keyed_batch([(b"a", b"1"), (b"b", b"2")]), 0, now=123_456)
    log.append_as_leader(keyed_batch([(b"a", b"3")]), 0, now=200_000)
    finish_writes(log)
    clean_once(log, NOW)
    header, data = batches(log)[0]
    assert header.timestamp_type == 1 and header.max_timestamp == 123_456
    assert [(r.key, r.timestamp) for r in decode_entry_records(data, 0)] == [(b"b", 123_456)]
    log.close()


def _dirty_and_roll(log, key: bytes) -> None:  # type: ignore[no-untyped-def]
    log.append_as_leader(keyed_batch([(key, b"filler")]), 0)
    finish_writes(log)


def test_tombstones_get_a_delete_horizon_then_go_after_delete_retention_ms(tmp_path: Path) -> None:
    log = open_compacted(tmp_path, compacted(delete_retention_ms=1000, segment_bytes=1 << 20))
    log.append_as_leader(keyed_batch([(b"gone", b"v"), (b"kept", b"v")]), 0)
    log.append_as_leader(keyed_batch([(b"gone", None), (b"other", b"v")]), 0)
    finish_writes(log)
    clean_once(log, NOW)
    tombstone_batch = [h for h, d in batches(log) if any(r.value is None for r in decode_entry_records(d, 0))]
    assert len(tombstone_batch) == 1
    header = tombstone_batch[0]
    assert header.attributes & DELETE_HORIZON_FLAG_MASK and header.base_timestamp == NOW + 1000
    assert [r.timestamp for h, d in batches(log) if h.base_offset == header.base_offset
            for r in decode_entry_records(d, 0)] == [1000, 1001]
    _dirty_and_roll(log, b"x")
    clean_once(log, NOW + 999)
    assert b"gone" in latest_values(log)  # within its horizon
    _dirty_and_roll(log, b"y")
    clean_once(log, NOW + 1000)
    assert b"gone" not in latest_values(log) and latest_values(log)[b"kept"] == b"v"
    log.close()


def test_transactions_aborted_data_goes_markers_go_in_two_passes_producers_keep_their_last_batch(
    tmp_path: Path,
) -> None:
    log = open_compacted(tmp_path, compacted(delete_retention_ms=1000, segment_bytes=1 << 20))

    def txn(pid: int, items: list[tuple[bytes, bytes]], seq: int, commit: bool) -> None:
        # a transactional write is preceded by its (here: successful) verification with the coordinator
        guard = log.maybe_start_transaction_verification(pid, seq, 0)
        log.append_as_leader(keyed_batch(items, producer_id=pid, producer_epoch=0, base_sequence=seq,
                                         transactional=True), 0, verification_guard=guard)
        log.append_as_leader(marker(pid, 0, commit), 0, origin=AppendOrigin.COORDINATOR)

    txn(7, [(b"a", b"aborted"), (b"b", b"aborted")], 0, commit=False)
    txn(8, [(b"c", b"t1"), (b"d", b"t1")], 0, commit=True)
    txn(8, [(b"c", b"t2"), (b"d", b"t2")], 2, commit=True)
    log.append_as_leader(keyed_batch([(b"x", b"1")], producer_id=9, producer_epoch=0, base_sequence=0), 0)
    log.append_as_leader(keyed_batch([(b"x", b"2")]), 0)  # supersedes producer 9's only batch
    finish_writes(log)
    clean_once(log, NOW)
    assert latest_values(log) == {b"c": b"t2", b"d": b"t2", b"x": b"2"}  # the aborted records are gone
    by_pid = {}
    for header, data in batches(log):
        by_pid.setdefault(header.producer_id, []).append((header, data))
    # producer 7's aborted batch and producer 9's batch stay as empty headers: their sequence state
    empty7 = [h for h, _ in by_pid[7] if not h.is_control]
    assert [(h.record_count, h.last_offset_delta, h.base_sequence) for h in empty7] == [(0, 1, 0)]
    assert [(h.record_count, h.base_sequence) for h, _ in by_pid[9]] == [(0, 0)]
    # the abort marker stays while a batch of its transaction does, and keeps its index entry
    assert any(h.is_control for h, _ in by_pid[7])
    assert [(t.producer_id, t.first_offset) for s in log.segments for t in s.txn_index.all_aborted_txns()] == [(7, 0)]
    commits = [h for h, d in by_pid[8] if h.is_control]
    assert len(commits) == 2 and not any(h.attributes & DELETE_HORIZON_FLAG_MASK for h in commits)
    _dirty_and_roll(log, b"y")
    clean_once(log, NOW)  # pass 2: the first commit's transaction is empty now: it gets a horizon
    first_commit = [h for h, _ in batches(log) if h.is_control and h.producer_id == 8][0]
    assert first_commit.attributes & DELETE_HORIZON_FLAG_MASK and first_commit.base_timestamp == NOW + 1000
    _dirty_and_roll(log, b"z")
    clean_once(log, NOW + 1000)  # pass 3: past the horizon the marker goes
    markers = [(h.base_offset, parse_control_type(decode_entry_records(d, 0)[0].key))
               for h, d in batches(log) if h.is_control and h.record_count]
    assert (first_commit.base_offset, ControlRecordType.COMMIT) not in markers
    assert sum(1 for _, kind in markers if kind is ControlRecordType.COMMIT) == 1
    fetched = log.collect_aborted_transactions(0, log.log_end_offset)
    assert [(t.producer_id, t.first_offset) for t in fetched] == [(7, 0)]
    log.close()


def test_a_full_offset_map_cleans_part_of_the_dirty_section_and_the_next_round_goes_on(tmp_path: Path) -> None:
    log = open_compacted(tmp_path)
    for i in range(40):
        log.append_as_leader(keyed_batch([(b"key-%02d" % (i % 20), b"v%d" % i)]), 0)
    finish_writes(log)
    end, stats = clean_once(log, NOW, map_memory=24 * 10) or (0, None)  # 10 slots, 9 usable keys
    assert 0 < end < 40 and stats is not None and stats.buffer_utilization == 0.9
    assert (tmp_path / "cleaner-offset-checkpoint").read_text() == f"0\n1\nt 0 {end}\n"
    while end < 40:
        result = clean_once(log, NOW, map_memory=24 * 10)
        assert result is not None and result[0] > end
        end = result[0]
    assert latest_values(log) == {b"key-%02d" % k: b"v%d" % (20 + k) for k in range(20)}
    log.close()


def test_segments_are_grouped_within_segment_bytes_and_index_sizes(tmp_path: Path) -> None:
    log = open_compacted(tmp_path, compacted(segment_bytes=600, index_interval_bytes=1))
    for i in range(20):
        log.append_as_leader(keyed_batch([(b"k%d" % i, b"x" * 40)]), 0)
    finish_writes(log)
    segments = LocalCleaningSource(log).segments(0, log.active_segment.base_offset)  # every inactive one
    assert len(segments) == len(log.segments) - 1
    groups = Cleaner.group_segments_by_size(segments, 1200, 1 << 20, log.log_end_offset)
    assert [s for g in groups for s in g] == segments
    assert all(sum(s.size for s in g) <= 1200 for g in groups) and len(groups) < len(segments)
    index_limit = 2 * max(s.offset_index_bytes for s in segments)
    index_groups = Cleaner.group_segments_by_size(segments, 1 << 30, index_limit, log.log_end_offset)
    assert all(sum(s.offset_index_bytes for s in g) <= index_limit for g in index_groups)
    assert 1 < len(index_groups) < len(segments)
    log.close()


def test_legacy_message_sets_are_compacted_too(tmp_path: Path) -> None:
    log = open_compacted(tmp_path, LogConfig.from_props({"cleanup.policy": "compact", "segment.bytes": 1 << 20}))
    for codec in (0, 1):
        builder = RecordBatchBuilder(magic=1, compression=codec)
        for i, key in enumerate([b"a", b"b", b"c"]):
            builder.append(1000 + i, key, b"%s-%d" % (key, codec))
        log.append_as_follower(_with_offsets(builder, log.log_end_offset))
    finish_writes(log)
    clean_once(log, NOW)
    assert latest_values(log) == {b"a": b"a-1", b"b": b"b-1", b"c": b"c-1"}
    assert all(h.magic == 1 for h, _ in batches(log))
    log.close()


def _with_offsets(builder: RecordBatchBuilder, start: int) -> bytearray:
    rebased = RecordBatchBuilder(magic=builder.magic, compression=builder.compression, base_offset=start)
    for i, (_, ts, key, value) in enumerate(builder._legacy):
        rebased.append(ts, key, value, offset=start + i)
    return rebased.build()
