"""Offset and admin operations of the group coordinator: OffsetCommit, OffsetFetch, OffsetDelete,
DescribeGroups, ListGroups and DeleteGroups (the non-membership half of Kafka's GroupCoordinator)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.coordinator.group.group_coordinator import (
    DEAD_GROUP,
    EMPTY_SUMMARY,
    GroupCoordinator,
    GroupSummary,
    MemberSummary,
    OffsetFetchEntry,
)
from broker.coordinator.group.group_metadata import (
    CONSUMER_PROTOCOL_TYPE,
    GroupMetadata,
    GroupState,
    OffsetAndMetadata,
    TopicPartition,
    UNKNOWN_MEMBER_ID,
)
from broker.coordinator.group.group_metadata_manager import GROUP_METADATA_TOPIC, offset_store_error
from protocol.errors import Errors, KafkaApiError
from protocol.records.batch import NO_SEQUENCE
from storage.producer_state import SENTINEL_GUARD

if TYPE_CHECKING:
    from broker.add_partitions_to_txn_manager import TransactionSupportedOperation

log = logging.getLogger(__name__)

S = GroupState
NO_OFFSET: OffsetFetchEntry = (-1, -1, "", Errors.NONE)


def _validate_offset_commit(group: GroupMetadata, generation_id: int, member_id: str,
                            group_instance_id: str | None, transactional: bool = False) -> Errors | None:
    """Kafka 3.9's commit checks, in its order (each side compared with a real broker).

    OffsetCommit: an Empty group takes any commit without a generation (a group that only stores
    offsets), whatever member id it names; otherwise only a current member of the current generation
    commits (one that left during a rebalance does not). TxnOffsetCommit: membership is checked only
    when the request carries some (v0-2 carry none), whatever the group's state.
    """
    if group.is_in(S.DEAD):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if transactional:
        if generation_id < 0 and member_id == UNKNOWN_MEMBER_ID and group_instance_id is None:
            return None
    elif generation_id < 0 and group.is_in(S.EMPTY) and not group.is_static_member_fenced(group_instance_id,
                                                                                             member_id):
        return None
    return group.member_error(member_id, group_instance_id, generation_id)


async def commit_offsets(coordinator: GroupCoordinator, group_id: str, member_id: str, group_instance_id: str | None,
                         generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata], api_version: int = 9
                         ) -> dict[TopicPartition, Errors]:
    """Generation-checked commit; a simple consumer (generation -1, no member id) needs no membership.
    A KIP-848 group checks the member epoch instead (``generation_id`` carries it from v9)."""
    def every(error: Errors) -> dict[TopicPartition, Errors]:
        return {tp: error for tp in offsets}

    error = coordinator.validate_group_status(group_id, allow_empty_id=True)
    if error is not None:
        return every(error)
    manager = coordinator.manager
    group = manager.get_group(group_id)
    if group is None:
        if generation_id >= 0:  # a commit from an older generation of a group that is gone
            return every(Errors.ILLEGAL_GENERATION)
        group = manager.add_group(GroupMetadata(group_id))
    if group.consumer_group is not None:
        try:
            group.consumer_group.validate_offset_commit(member_id, generation_id, api_version)
        except KafkaApiError as exc:
            return every(exc.error)
        return await manager.store_offsets(group, offsets)
    error = _validate_offset_commit(group, generation_id, member_id, group_instance_id)
    if error is not None:
        return every(error)
    if group.is_in(S.COMPLETING_REBALANCE):
        return every(Errors.REBALANCE_IN_PROGRESS)
    if group.state in (S.STABLE, S.PREPARING_REBALANCE):
        coordinator.keep_alive(group, member_id)
    return await manager.store_offsets(group, offsets)


async def commit_transactional_offsets(
        coordinator: GroupCoordinator, group_id: str, transactional_id: str, producer_id: int, producer_epoch: int,
        member_id: str, group_instance_id: str | None, generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata], operation: TransactionSupportedOperation,
) -> dict[TopicPartition, Errors]:
    """TxnOffsetCommit (Kafka's handleTxnCommitOffsets): verify the group's offsets partition is in the
    transaction (KIP-890), check membership (v3+), then write the offsets pending until the marker."""
    def every(error: Errors) -> dict[TopicPartition, Errors]:
        return {tp: error for tp in offsets}

    error = coordinator.validate_group_status(group_id)
    if error is not None:
        return every(error)
    manager = coordinator.manager
    group = manager.get_group(group_id) or manager.add_group(GroupMetadata(group_id))
    offsets_partition = (GROUP_METADATA_TOPIC, manager.partition_for(group_id))
    errors, guards = await manager.replica_manager.verify_transaction(
        transactional_id, producer_id, producer_epoch, {offsets_partition: NO_SEQUENCE}, operation)
    if offsets_partition in errors:
        return every(offset_store_error(errors[offsets_partition]))
    if group.consumer_group is not None:
        try:
            group.consumer_group.validate_offset_commit(member_id, generation_id, 9, transactional=True)
        except KafkaApiError as exc:
            return every(exc.error)
    else:
        error = _validate_offset_commit(group, generation_id, member_id, group_instance_id, transactional=True)
        if error is not None:
            return every(error)
    return await manager.store_offsets(group, offsets, producer_id, producer_epoch,
                                       guards.get(offsets_partition, SENTINEL_GUARD))


def fetch_offsets(coordinator: GroupCoordinator, group_id: str, require_stable: bool,
                  partitions: list[TopicPartition] | None, member_id: str | None = None, member_epoch: int = -1
                  ) -> tuple[Errors, dict[TopicPartition, OffsetFetchEntry]]:
    """Committed offsets (all of the group's when ``partitions`` is None); -1 where none is committed.
    A KIP-848 member fetching (v9: with its member id and epoch) must be at its current epoch."""
    error = coordinator.validate_group_status(group_id, allow_empty_id=True)
    if error is not None:
        return error, {}
    group = coordinator.manager.get_group(group_id)
    if group is None or group.is_in(S.DEAD):
        return Errors.NONE, {tp: NO_OFFSET for tp in partitions or []}
    if group.consumer_group is not None:
        try:
            group.consumer_group.validate_offset_fetch(member_id, member_epoch)
        except KafkaApiError as exc:
            return exc.error, {}
    result: dict[TopicPartition, OffsetFetchEntry] = {}
    for tp in (partitions if partitions is not None else list(group.offsets)):
        if require_stable and group.has_pending_offset_commits(tp):
            result[tp] = (-1, -1, "", Errors.UNSTABLE_OFFSET_COMMIT)
            continue
        offset = group.offsets.get(tp)
        result[tp] = NO_OFFSET if offset is None else (offset.offset, offset.leader_epoch, offset.metadata,
                                                       Errors.NONE)
    return Errors.NONE, result


def describe_group(coordinator: GroupCoordinator, group_id: str) -> tuple[Errors, GroupSummary]:
    error = coordinator.validate_group_status(group_id, allow_empty_id=True)
    if error is not None:
        return error, EMPTY_SUMMARY
    group = coordinator.manager.get_group(group_id)
    if group is None:
        return Errors.NONE, DEAD_GROUP
    stable = group.is_in(S.STABLE)
    protocol = group.protocol_name if stable and group.protocol_name is not None else ""
    members = [MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                             m.metadata(protocol) if stable else b"", m.assignment if stable else b"")
               for m in group.members.values()]
    return Errors.NONE, GroupSummary(group.state.value, group.protocol_type or "", protocol, members)


def list_groups(coordinator: GroupCoordinator, states: list[str]) -> tuple[Errors, list[GroupMetadata]]:
    """Every group this broker coordinates (states matched case-insensitively, as Kafka does)."""
    if not coordinator.active:
        return Errors.COORDINATOR_NOT_AVAILABLE, []
    manager = coordinator.manager
    error = Errors.COORDINATOR_LOAD_IN_PROGRESS if manager.is_loading() else Errors.NONE
    wanted = {s.lower() for s in states}
    return error, [g for g in manager.current_groups() if not wanted or g.state_name.lower() in wanted]


def delete_groups(coordinator: GroupCoordinator, group_ids: list[str]) -> dict[str, Errors]:
    manager = coordinator.manager
    errors: dict[str, Errors] = {}
    eligible: list[GroupMetadata] = []
    for group_id in group_ids:
        error = coordinator.validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            errors[group_id] = error
            continue
        group = manager.get_group(group_id)
        if group is None or group.is_in(S.DEAD):
            errors[group_id] = Errors.GROUP_ID_NOT_FOUND if manager.group_not_exists(group_id) \
                else Errors.NOT_COORDINATOR
        elif group.is_in(S.EMPTY) and (group.consumer_group is None or group.consumer_group.is_empty):
            group.transition_to(S.DEAD)
            eligible.append(group)
        else:
            errors[group_id] = Errors.NON_EMPTY_GROUP
    if eligible:
        coordinator.track(manager.cleanup_group_metadata(eligible, lambda g: g.remove_offsets(list(g.offsets))))
        for group in eligible:
            log.info("The following group was deleted: %s", group.group_id)
            errors[group.group_id] = Errors.NONE
    return errors


def delete_offsets(coordinator: GroupCoordinator, group_id: str, partitions: list[TopicPartition]
                   ) -> tuple[Errors, dict[TopicPartition, Errors]]:
    """OffsetDelete: allowed for an Empty group, or for topics a consumer group is not subscribed to."""
    error = coordinator.validate_group_status(group_id)
    if error is not None:
        return error, {}
    manager = coordinator.manager
    group = manager.get_group(group_id)
    if group is None or group.is_in(S.DEAD):
        return (Errors.GROUP_ID_NOT_FOUND if manager.group_not_exists(group_id) else Errors.NOT_COORDINATOR), {}
    results: dict[TopicPartition, Errors] = {}
    if group.is_in(S.EMPTY):
        eligible = list(partitions)
    elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
        eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
        results.update({tp: Errors.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if tp not in eligible})
    else:
        return Errors.NON_EMPTY_GROUP, {}
    if eligible:
        coordinator.track(manager.cleanup_group_metadata([group], lambda g: g.remove_offsets(eligible)))
        results.update({tp: Errors.NONE for tp in eligible})
    return Errors.NONE, results
