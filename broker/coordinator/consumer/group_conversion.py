"""Online migration between the classic and the consumer protocol (group.consumer.migration.policy).

Upgrade: the first ``group.protocol=consumer`` member to join a stable classic group turns it into a
consumer group whose classic members keep their partitions and speak the classic protocol from then
on (Kafka's ConsumerGroup.fromClassicGroup). Downgrade: when the last consumer-protocol member leaves
and only classic members remain, the group becomes a classic group again and rebalances the
classic way (Kafka's ClassicGroup.fromConsumerGroup). Offsets stay where they are throughout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.coordinator.consumer.consumer_group import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from broker.coordinator.group.group_metadata import CONSUMER_PROTOCOL_TYPE, GroupMetadata, GroupState, MemberMetadata
from protocol.consumer_protocol import decode_assignment, decode_subscription, encode_assignment
from protocol.errors import Errors, KafkaApiError
from protocol.exceptions import ProtocolError

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache

UPGRADE_POLICIES = frozenset({"upgrade", "bidirectional"})
DOWNGRADE_POLICIES = frozenset({"downgrade", "bidirectional"})


def check_upgrade(entry: GroupMetadata, policy: str, max_size: int) -> None:
    """Kafka's validateOnlineUpgrade: why this classic group cannot become a consumer group now."""
    group_id = entry.group_id
    if policy not in UPGRADE_POLICIES:
        raise KafkaApiError(Errors.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {group_id} to consumer group "
                                                       "because the online upgrade is disabled.")
    if entry.protocol_type != CONSUMER_PROTOCOL_TYPE:
        raise KafkaApiError(Errors.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {group_id} to consumer group "
                                                       "because it is not a consumer group.")
    if entry.size >= max_size:
        raise KafkaApiError(Errors.GROUP_MAX_SIZE_REACHED, f"Cannot upgrade classic group {group_id} to consumer "
                                                           f"group because its size exceeds {max_size}.")
    if not entry.is_in(GroupState.STABLE):
        # Its members' partitions are known only once it is stable: the joining member retries.
        raise KafkaApiError(Errors.COORDINATOR_NOT_AVAILABLE, f"Classic group {group_id} is rebalancing; it is "
                                                              "upgraded to a consumer group once it is stable.")


def consumer_group_from_classic(entry: GroupMetadata, metadata_cache: MetadataCache) -> ConsumerGroup:
    """The consumer group a stable classic group becomes: each member keeps its partitions."""
    epoch = entry.generation_id
    group = ConsumerGroup(entry.group_id, group_epoch=epoch, assignment_epoch=epoch)
    protocol = entry.protocol_name or ""
    for classic in entry.members.values():
        try:
            subscription = decode_subscription(classic.metadata(protocol))
            owned = decode_assignment(classic.assignment)
        except (ProtocolError, ValueError) as exc:
            raise KafkaApiError(Errors.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {entry.group_id}: member "
                                                           f"{classic.member_id}'s metadata is unreadable ({exc}).")
        assigned: Assignment = {metadata_cache.topic_id(t): ps for t, ps in owned.items()
                                if metadata_cache.contains_topic(t)}
        group.target_assignment[classic.member_id] = assigned
        group.update_member(ConsumerGroupMember(
            classic.member_id, instance_id=classic.group_instance_id, rack_id=subscription.rack_id,
            client_id=classic.client_id, client_host=classic.client_host,
            subscribed_topic_names=tuple(sorted(subscription.topics)),
            rebalance_timeout_ms=classic.rebalance_timeout_ms, member_epoch=epoch, previous_member_epoch=epoch,
            state=MemberState.STABLE, assigned=assigned,
            classic=ClassicMemberMetadata(classic.session_timeout_ms,
                                          tuple((n, bytes(m)) for n, m in classic.supported_protocols))))
    return group


def classic_members_from_consumer(group: ConsumerGroup, metadata_cache: MetadataCache) -> list[MemberMetadata]:
    """The classic members a consumer group of classic members only becomes, with their partitions."""
    members = []
    for member in group.members.values():
        assert member.classic is not None
        classic = MemberMetadata(member.member_id, member.instance_id, member.client_id, member.client_host,
                                 member.rebalance_timeout_ms, member.classic.session_timeout_ms,
                                 CONSUMER_PROTOCOL_TYPE, list(member.classic.protocols))
        named = {}
        for topic_id, partitions in member.assigned.items():
            name = metadata_cache.topic_name(topic_id)
            if name is not None:
                named[name] = sorted(partitions)
        classic.assignment = encode_assignment(named)
        members.append(classic)
    return members
