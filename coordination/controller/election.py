"""Partition leader election algorithms (Kafka's PartitionLeaderElectionAlgorithms) and the
strategies that pick one, with the ISR each produces."""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import Enum

from coordination.model import LeaderAndIsr, LeaderRecoveryState


class ElectionStrategy(Enum):
    OFFLINE = "offline"
    OFFLINE_ALLOW_UNCLEAN = "offline_allow_unclean"  # ElectLeaders with ElectionType.UNCLEAN
    REASSIGNMENT = "reassignment"
    PREFERRED = "preferred"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"


def offline_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], unclean_allowed: bool
) -> tuple[int | None, bool]:
    """(leader, was unclean): the first live ISR member in assignment order, else (if allowed) the
    first live replica."""
    leader = next((r for r in assignment if r in live and r in isr), None)
    if leader is not None or not unclean_allowed:
        return leader, False
    leader = next((r for r in assignment if r in live), None)
    return leader, leader is not None


def reassignment_partition_leader(
    reassignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    return next((r for r in reassignment if r in live and r in isr), None)


def preferred_replica_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    preferred = assignment[0] if assignment else None
    return preferred if preferred is not None and preferred in live and preferred in isr else None


def controlled_shutdown_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], shutting_down: Collection[int]
) -> int | None:
    return next((r for r in assignment if r in live and r in isr and r not in shutting_down), None)


@dataclass(frozen=True)
class ElectionResult:
    leader_and_isr: LeaderAndIsr | None  # None: no eligible leader
    replicas_to_notify: tuple[int, ...]  # live replicas that get the LeaderAndIsr request


def elect_leader(
    strategy: ElectionStrategy,
    current: LeaderAndIsr,
    assignment: Sequence[int],
    live: Collection[int],
    *,
    unclean_enabled: bool = False,
    target_replicas: Sequence[int] = (),
    shutting_down: Collection[int] = (),
) -> ElectionResult:
    """New leader and ISR for one partition under `strategy`."""
    live_replicas = tuple(r for r in assignment if r in live)
    isr = current.isr
    if strategy in (ElectionStrategy.OFFLINE, ElectionStrategy.OFFLINE_ALLOW_UNCLEAN):
        allow = unclean_enabled or strategy is ElectionStrategy.OFFLINE_ALLOW_UNCLEAN
        leader, unclean = offline_partition_leader(assignment, isr, live, allow)
        if leader is None:
            return ElectionResult(None, live_replicas)
        if unclean:
            new = current.new_leader_and_isr(leader, (leader,), LeaderRecoveryState.RECOVERING)
        else:
            new = current.new_leader_and_isr(leader, tuple(r for r in isr if r in live))
        return ElectionResult(new, live_replicas)
    if strategy is ElectionStrategy.REASSIGNMENT:
        leader = reassignment_partition_leader(target_replicas, isr, live)
        new = None if leader is None else current.new_leader(leader)
        return ElectionResult(new, live_replicas)
    if strategy is ElectionStrategy.PREFERRED:
        leader = preferred_replica_partition_leader(assignment, isr, live)
        new = None if leader is None else current.new_leader(leader)
        return ElectionResult(new, live_replicas)
    leader = controlled_shutdown_partition_leader(assignment, isr, live, shutting_down)
    if leader is None:
        return ElectionResult(None, live_replicas)
    new_isr = tuple(r for r in isr if r not in shutting_down)
    return ElectionResult(
        current.new_leader_and_isr(leader, new_isr),
        tuple(r for r in live_replicas if r not in shutting_down),
    )
