"""The checkers catch what they are there for, on small made-up histories (no cluster needed)."""
from __future__ import annotations

import pytest

from tests.faults.checkers import (
    check_client_commits,
    check_consumed_all,
    check_group_log,
    check_producer,
    check_transactional_copy,
)
from tests.faults.history import (
    Assignment,
    Commit,
    ConsumerHistory,
    GroupRecord,
    LogRecord,
    ProducerHistory,
    TxnLogRecord,
)
from tests.faults.results import Cell, Report, table

pytestmark = pytest.mark.faults


def producer(acked: dict[str, tuple[int, int]]) -> ProducerHistory:
    return ProducerHistory("w", "t", "p", sent=len(acked), acked=acked)


def test_checker_producer_clean_history() -> None:
    log = [LogRecord(0, 0, "p.0"), LogRecord(0, 1, "p.1"), LogRecord(1, 0, "p.2"), LogRecord(1, 1, "p.3")]
    result = check_producer(producer({"p.0": (0, 0), "p.1": (0, 1), "p.2": (1, 0)}), log)
    assert (result.acknowledged, result.lost, result.duplicated, result.unacknowledged_present) == (3, 0, 0, 1)
    assert result.violations == [] and result.examples == []


def test_checker_producer_finds_loss_duplicates_moves_and_reordering() -> None:
    log = [LogRecord(0, 0, "p.0"), LogRecord(0, 1, "p.2"), LogRecord(0, 2, "p.1"), LogRecord(0, 3, "p.2"),
           LogRecord(0, 4, "other"), LogRecord(1, 0, "p.4")]
    result = check_producer(producer({"p.0": (0, 0), "p.1": (0, 1), "p.3": (0, 3), "p.4": (1, 0)}), log)
    assert (result.lost, result.duplicated) == (1, 1)
    assert any("p.3" in e and "not in the log" in e for e in result.examples)
    assert any("p.2 is in the log 2 times" in e for e in result.examples)
    assert any("acknowledged p.1 at 0@1" in v for v in result.violations)
    assert any("p.1 at offset 2 after p.2" in v for v in result.violations)


def test_checker_consumed_all() -> None:
    history = ConsumerHistory("w", "t", "g", consumed=[("m", 0, 0, "p.0")])
    assert check_consumed_all(history, producer({"p.0": (0, 0)})) == []
    assert "never consumed 1" in check_consumed_all(history, producer({"p.0": (0, 0), "p.1": (0, 1)}))[0]


def test_checker_client_commits_going_back() -> None:
    history = ConsumerHistory("w", "t", "g", assignments=[Assignment("a", 1.0, frozenset({0})),
                                                           Assignment("b", 5.0, frozenset({0}))],
                              commits=[Commit("a", 2.0, 2.1, {0: 10}), Commit("a", 3.0, 3.1, {0: 20}),
                                       Commit("b", 6.0, 6.1, {0: 20}), Commit("b", 7.0, 7.1, {0: 30})])
    assert check_client_commits(history) == []
    history.commits.append(Commit("b", 8.0, 8.1, {0: 25}))  # its own position went back
    history.commits.append(Commit("c", 9.0, 9.1, {0: 5}))   # never assigned: not judged
    history.assignments.append(Assignment("d", 10.0, frozenset({0})))
    history.commits.append(Commit("d", 11.0, 11.1, {0: 15}))  # started below what was committed before
    violations = check_client_commits(history)
    assert len(violations) == 2, violations
    assert "b committed 25 for partition 0 after 30" in violations[0]
    assert "d committed 15" in violations[1] and "30 was committed before" in violations[1]


def test_checker_group_log() -> None:
    history = ConsumerHistory("w", "t", "g", assignments=[Assignment("m1", 1.0, frozenset({0, 1}))])
    records = [GroupRecord("g", generation=1, assignments={"m1": {"t": [0, 1]}, "m2": {"t": [2]}}),
               GroupRecord("g", topic="t", partition=0, offset=5), GroupRecord("g", topic="t", partition=0, offset=7),
               GroupRecord("other", topic="t", partition=0, offset=1)]
    assert check_group_log(history, records, member_ids_known=True) == []
    records += [GroupRecord("g", topic="t", partition=0, offset=6),
                GroupRecord("g", generation=2, assignments={"m1": {"t": [0]}, "m2": {"t": [0, 2]}})]
    history.assignments.append(Assignment("m2", 2.0, frozenset({1, 2})))
    violations = check_group_log(history, records, member_ids_known=True)
    assert any("committed 6 after 7" in v for v in violations)
    assert any("generation 2: partition 0 assigned to ['m1', 'm2']" in v for v in violations)
    assert any("m2 was assigned [1, 2]" in v for v in violations)
    assert not any("m2 was assigned" in v for v in check_group_log(history, records, member_ids_known=False))


def test_checker_results_table_adds_up_rounds() -> None:
    report = Report("ours", "soak", cells=[
        Cell(1, "kill-9", "java", "x", acknowledged=10, recovery_s=2.0),
        Cell(2, "kill-9", "java", "x", acknowledged=5, lost=1, recovery_s=4.0, examples=["lost p.1"]),
        Cell(3, "clock-jump", "java", "not supported", supported=False)])
    markdown = table([report])
    assert "| kill-9 | java | 2 | 15 | 1 | 0 | 0 | 3.0 (max 4.0) |" in markdown
    assert "| clock-jump | java | 1 | n/a | n/a | n/a | n/a | n/a |" in markdown
    assert report.violations() == ["round 2 kill-9 × java: lost p.1"]


def test_checker_transactional_copy() -> None:
    source = [LogRecord(0, 0, "t.0"), LogRecord(0, 1, "t.1")]
    fates = [TxnLogRecord(0, 0, "t.0", 7, "aborted"), TxnLogRecord(0, 2, "t.0", 7, "committed"),
             TxnLogRecord(0, 3, "t.1", 7, "committed")]
    clean = [LogRecord(0, 2, "t.0"), LogRecord(0, 3, "t.1")]
    assert check_transactional_copy(source, fates, clean) == []
    shows_aborted = check_transactional_copy(source, fates, [LogRecord(0, 0, "t.0"), *clean])
    assert shows_aborted == ["read_committed returned t.0 at 0@0, whose transaction (producer 7) is aborted"]
    assert "never returned committed t.1" in check_transactional_copy(source, fates, clean[:1])[0]
    twice = fates + [TxnLogRecord(0, 5, "t.1", 7, "committed")]
    assert check_transactional_copy(source, twice, clean + [LogRecord(0, 5, "t.1")]) == [
        "t.1 is in the committed copy 2 times"]
    foreign = fates + [TxnLogRecord(0, 5, "x", 7, "committed"), TxnLogRecord(0, 6, "t.1", 8, "open")]
    assert check_transactional_copy(source, foreign, clean + [LogRecord(0, 5, "x")]) == [
        "1 records of transactions never ended, e.g. TxnLogRecord(partition=0, offset=6, value='t.1', "
        "producer_id=8, state='open')", "x is in the committed copy but not in the input"]


def test_an_acknowledgement_without_an_offset_needs_its_value_in_its_partition() -> None:
    history = ProducerHistory("p", "t", prefix="c")
    history.acked = {"c.0": (0, 0), "c.1": (0, None), "c.2": (1, None)}
    log = [LogRecord(0, 0, "c.0"), LogRecord(0, 1, "c.1"), LogRecord(0, 2, "c.2")]
    result = check_producer(history, log)
    assert result.lost == 0
    assert result.violations == ["acknowledged c.2 at 1@None, but that offset holds None"]
