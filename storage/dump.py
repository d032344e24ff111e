"""``python -m storage.dump FILE...``: print segments and indexes like Kafka's DumpLogSegments.

Handles .log (batch lines; ``--deep-iteration`` adds record lines, ``--print-data-log`` keys
and payloads), .index and .timeindex (entries plus a mismatch report on stderr;
``--verify-index-only`` prints only the report, ``--index-sanity-check`` only the sanity
check), .snapshot and .txnindex files. Files are opened read-only.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO

from protocol.exceptions import CorruptRecordError
from protocol.records.control import ControlRecordType, EndTransactionMarker, parse_control_type
from protocol.records.log_entry import LogEntryHeader, decode_entry_records, validate_log_entry
from storage.errors import CorruptIndexError, CorruptSnapshotError
from storage.file_records import FileRecords
from storage.log_files import INDEX_SUFFIX, LOG_SUFFIX, SNAPSHOT_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX
from storage.offset_index import OffsetIndex
from storage.producer_state import decode_snapshot
from storage.time_index import TimeIndex
from storage.transaction_index import TransactionIndex

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
INT32_MAX = 0x7FFFFFFF


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _timestamp_type(header: LogEntryHeader) -> str:
    if header.magic == 0:
        return "NoTimestampType"
    return "LogAppendTime" if header.timestamp_type == 1 else "CreateTime"


def _optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _decode_text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


class Dumper:
    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.args = args
        self.out = out
        self.err = err
        self.deep = args.deep_iteration or args.print_data_log
        self.index_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_out_of_order: dict[str, list[tuple[int, int]]] = {}
        self.time_not_found: dict[str, list[tuple[int, int]]] = {}
        self.non_consecutive: dict[str, list[tuple[int, int]]] = {}

    def print(self, text: str = "") -> None:
        self.out.write(text + "\n")

    def dump(self, path: str) -> None:
        self.print(f"Dumping {path}")
        suffix = os.path.splitext(path)[1]
        handlers = {
            LOG_SUFFIX: self.dump_log,
            INDEX_SUFFIX: self.dump_index,
            TIME_INDEX_SUFFIX: self.dump_time_index,
            SNAPSHOT_SUFFIX: self.dump_snapshot,
            TXN_INDEX_SUFFIX: self.dump_txn_index,
        }
        handler = handlers.get(suffix)
        if handler is None:
            self.err.write(f"Ignoring unknown file {path}\n")
        else:
            handler(path)

    # --- .log -----------------------------------------------------------------------------
    def dump_log(self, path: str) -> None:
        self.print(f"Log starting offset: {_base_offset(path)}")
        records = FileRecords.open(path, read_only=True)
        try:
            limit = min(len(records), self.args.max_bytes)
            valid_bytes = 0
            last_offset = -1
            try:
                for position, header in records.entries(0, limit):
                    data = records.read(position, header.size)
                    try:
                        validate_log_entry(data, 0)
                        is_valid = True
                    except CorruptRecordError:
                        is_valid = False
                    self.print(self._batch_line(header, position, is_valid))
                    if self.deep and is_valid:
                        last_offset = self._dump_records(path, header, data, last_offset)
                    valid_bytes += header.size
            except CorruptRecordError as exc:
                self.err.write(f"Found a corrupt log entry in {path} at position {valid_bytes}: {exc}\n")
            trailing = len(records) - valid_bytes
            if trailing > 0 and self.args.max_bytes == INT32_MAX:
                self.print(f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}")
        finally:
            records.close()

    def _batch_line(self, h: LogEntryHeader, position: int, is_valid: bool) -> str:
        if h.magic >= 2:
            horizon = h.base_timestamp if h.has_delete_horizon else None
            head = (
                f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.record_count} "
                f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} producerId: {h.producer_id} "
                f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
                f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} "
                f"deleteHorizonMs: {_optional_long(horizon)}"
            )
        else:
            head = f"offset: {h.last_offset}"
        return (
            f"{head} position: {position} {_timestamp_type(h)}: {h.max_timestamp} size: {h.size} "
            f"magic: {h.magic} compresscodec: {CODEC_NAMES.get(h.compression, h.compression)} "
            f"crc: {h.crc} isvalid: {_bool(is_valid)}"
        )

    def _dump_records(self, path: str, header: LogEntryHeader, data: bytes, last_offset: int) -> int:
        for record in decode_entry_records(data, 0):
            if last_offset != -1 and record.offset != last_offset + 1:
                self.non_consecutive.setdefault(path, []).insert(0, (last_offset, record.offset))
            last_offset = record.offset
            parts = ["|"]
            if not self.args.skip_record_metadata:
                key_size = -1 if record.key is None else len(record.key)
                value_size = -1 if record.value is None else len(record.value)
                parts.append(
                    f"offset: {record.offset} {_timestamp_type(header)}: {record.timestamp} "
                    f"keySize: {key_size} valueSize: {value_size}"
                )
                if header.magic >= 2:
                    sequence = -1
                    if header.base_sequence >= 0:
                        sequence = (header.base_sequence + record.offset - header.base_offset) & INT32_MAX
                    keys = ",".join(k for k, _ in record.headers)
                    parts.append(f"sequence: {sequence} headerKeys: [{keys}]")
                else:
                    parts.append(f"isValid: true crc: {header.crc}}}")
                if header.is_control:
                    parts.append(self._control_text(record.key, record.value))
            if self.args.print_data_log and not header.is_control:
                if record.key is not None:
                    parts.append(f"key: {_decode_text(record.key)}")
                if record.value is not None:
                    parts.append(f"payload: {_decode_text(record.value)}")
            self.print(" ".join(parts))
        return last_offset

    @staticmethod
    def _control_text(key: bytes | None, value: bytes | None) -> str:
        try:
            control_type = parse_control_type(key)
            if control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                marker = EndTransactionMarker.decode(key, value)
                return f"endTxnMarker: {marker.control_type.name} coordinatorEpoch: {marker.coordinator_epoch}"
            type_id = int.from_bytes((key or b"\0\0\0\0")[2:4], "big", signed=True)
            name = control_type.name if control_type is not None else "UNKNOWN"
            return f"controlType: {name}({type_id})"
        except CorruptRecordError as exc:
            return f"controlType: CORRUPT ({exc})"

    # --- indexes --------------------------------------------------------------------------
    def dump_index(self, path: str) -> None:
        base = _base_offset(path)
        index = OffsetIndex(path, base, writable=False) if os.path.getsize(path) else None
        if index is None or index.entries == 0:
            self.print(f"{path} is empty.")
            return
        records = FileRecords.open(_sibling(path, LOG_SUFFIX), read_only=True)
        try:
            if self.args.index_sanity_check:
                self._sanity(index, path)
                return
            for i in range(index.entries):
                entry = index.entry(i)
                if entry.offset == base and i > 0:
                    return
                try:
                    found = next(iter(records.slice(entry.position, self.args.max_message_size).entries()), None)
                except CorruptRecordError:
                    found = None
                log_last = found[1].last_offset if found else -1
                if log_last != entry.offset:
                    self.index_mismatches.setdefault(os.path.abspath(path), []).insert(0, (entry.offset, log_last))
                if not self.args.verify_index_only:
                    self.print(f"offset: {entry.offset} position: {entry.position}")
        finally:
            records.close()
            index.close_handler()

    def dump_time_index(self, path: str) -> None:
        base = _base_offset(path)
        if not os.path.getsize(path):
            return
        time_index = TimeIndex(path, base, writable=False)
        index_path = _sibling(path, INDEX_SUFFIX)
        index = OffsetIndex(index_path, base, writable=False) if os.path.exists(index_path) and os.path.getsize(index_path) else None
        records = FileRecords.open(_sibling(path, LOG_SUFFIX), read_only=True)
        key = os.path.abspath(path)
        try:
            if self.args.index_sanity_check:
                self._sanity(time_index, path)
                return
            previous = -1
            for i in range(time_index.entries):
                entry = time_index.entry(i)
                if entry.offset == base and i > 0:
                    return
                position = index.lookup(entry.offset).position if index else 0
                found = None
                try:
                    for pos, header in records.entries(position):
                        if header.last_offset >= entry.offset:
                            found = (pos, header)
                            break
                except CorruptRecordError:
                    pass
                if found is None:
                    self.time_not_found.setdefault(key, []).append((entry.offset, -1))
                elif found[1].last_offset != entry.offset:
                    self.time_not_found.setdefault(key, []).append((entry.offset, found[1].last_offset))
                else:
                    pos, header = found
                    batch_max = max((r.timestamp for r in decode_entry_records(records.read(pos, header.size), 0)), default=-1)
                    if batch_max != entry.timestamp:
                        self.time_mismatches.setdefault(key, []).append((entry.timestamp, batch_max))
                    if previous >= entry.timestamp:
                        self.time_out_of_order.setdefault(key, []).append((entry.timestamp, previous))
                if not self.args.verify_index_only:
                    self.print(f"timestamp: {entry.timestamp} offset: {entry.offset}")
                previous = entry.timestamp
        finally:
            records.close()
            time_index.close_handler()
            if index is not None:
                index.close_handler()

    def _sanity(self, index: OffsetIndex | TimeIndex, path: str) -> None:
        try:
            index.sanity_check()
        except CorruptIndexError as exc:
            self.err.write(f"{exc}\n")
            return
        self.print(f"{path} passed sanity check.")

    # --- producer snapshots and transaction indexes ----------------------------------------
    def dump_snapshot(self, path: str) -> None:
        try:
            with open(path, "rb") as f:
                entries = decode_snapshot(f.read(), path)
        except CorruptSnapshotError as exc:
            self.err.write(f"{exc}\n")
            return
        for e in entries:
            line = (
                f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} coordinatorEpoch: {e.coordinator_epoch} "
                f"currentTxnFirstOffset: {_optional_long(e.current_txn_first_offset)} lastTimestamp: {e.last_timestamp} "
            )
            if e.batch_metadata:
                m = e.batch_metadata[0]
                line += (
                    f"firstSequence: {m.first_seq} lastSequence: {m.last_seq} lastOffset: {m.last_offset} "
                    f"offsetDelta: {m.offset_delta} timestamp: {m.timestamp}"
                )
            self.print(line)

    def dump_txn_index(self, path: str) -> None:
        for t in TransactionIndex(path, _base_offset(path)).all_aborted_txns():
            self.print(
                f"version: {t.version} producerId: {t.producer_id} firstOffset: {t.first_offset} "
                f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}"
            )

    # --- reports --------------------------------------------------------------------------
    def report(self) -> None:
        w = self.err.write
        for name, items in self.index_mismatches.items():
            w(f"Mismatches in :{name}\n")
            for index_offset, log_offset in items:
                w(f"  Index offset: {index_offset}, log offset: {log_offset}\n")
        for name, items in self.time_mismatches.items():
            w(f"Found timestamp mismatch in :{name}\n")
            for index_ts, log_ts in items:
                w(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}\n")
        for name, items in self.time_out_of_order.items():
            w(f"Found out of order timestamp in :{name}\n")
            for index_ts, previous in items:
                w(f"  Index timestamp: {index_ts}, Previously indexed timestamp: {previous}\n")
        for items in self.time_not_found.values():
            w("The following indexed offsets are not found in the log.\n")
            for indexed, found in items:
                w(f"Indexed offset: {indexed}, found log offset: {found}\n")
        for name, items in self.non_consecutive.items():
            w(f"Non-consecutive offsets in {name}\n")
            for first, second in items:
                w(f"  {first} is followed by {second}\n")

    @property
    def found_problems(self) -> bool:
        return any((self.index_mismatches, self.time_mismatches, self.time_out_of_order, self.time_not_found))


def _base_offset(path: str) -> int:
    stem = os.path.basename(path).split(".")[0]
    return int(stem) if stem.isdigit() else 0


def _sibling(path: str, suffix: str) -> str:
    directory, name = os.path.split(os.path.abspath(path))
    return os.path.join(directory, name.split(".")[0] + suffix)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m storage.dump", description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="*", help="files to dump")
    parser.add_argument("--files", default="", help="comma-separated files to dump (Kafka's option)")
    parser.add_argument("--deep-iteration", action="store_true", help="print every record, not just batches")
    parser.add_argument("--print-data-log", action="store_true", help="print keys and payloads (implies --deep-iteration)")
    parser.add_argument("--skip-record-metadata", action="store_true")
    parser.add_argument("--verify-index-only", action="store_true", help="only report index entries that disagree with the log")
    parser.add_argument("--index-sanity-check", action="store_true", help="only run the index sanity check")
    parser.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024)
    parser.add_argument("--max-bytes", type=int, default=INT32_MAX)
    args = parser.parse_args(argv)
    args.paths = list(args.paths) + [f for f in args.files.split(",") if f]
    if not args.paths:
        parser.error("no files given")
    return args


def main(argv: list[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    dumper = Dumper(args, out, err)
    for path in args.paths:
        dumper.dump(path)
    dumper.report()
    return 1 if dumper.found_problems and args.verify_index_only else 0


if __name__ == "__main__":
    sys.exit(main())
