"""Share-group membership is durable in ``__consumer_offsets``: after the group coordinator restarts,
ShareGroupDescribe answers the same members, epochs and assignments, the members keep heartbeating
at their epochs, and a deleted group stays deleted (raw requests with the project's codec)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import (
    DeleteGroupsRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for
from tests.integration.groups.group_helpers import request, unique, wait_for_coordinator
from tests.integration.share.share_helpers import STATE_TOPIC

OVERRIDES = {"offsets.topic.num.partitions": "1", **STATE_TOPIC}


def _heartbeat(broker: BrokerProcess, group: str, member: str, epoch: int, topics: list[str] | None = None) -> Any:
    answer = request(broker, ApiKey.SHARE_GROUP_HEARTBEAT, 1, ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=topics))
    assert answer.error_code == Errors.NONE, answer
    return answer


def _describe(broker: BrokerProcess, group: str) -> Any:
    return request(broker, ApiKey.SHARE_GROUP_DESCRIBE, 1, ShareGroupDescribeRequest(group_ids=[group])).groups[0]


def _snapshot(described: Any) -> tuple[Any, ...]:
    members = sorted((m.member_id, m.member_epoch, m.client_id, sorted(m.subscribed_topic_names),
                      sorted((t.topic_name, sorted(t.partitions)) for t in m.assignment.topic_partitions))
                     for m in described.members)
    return described.error_code, described.group_state, described.group_epoch, described.assignment_epoch, members


def _restart(broker: BrokerProcess, group: str) -> Any:
    broker.stop()
    broker.start()
    not_yet = {Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE}

    def loaded() -> list[Any]:
        described = _describe(broker, group)
        return [] if described.error_code in not_yet else [described]

    return wait_for(loaded, "the share group's partition loaded", 60)[0]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("broker", [OVERRIDES], indirect=True, ids=["share"])
def test_share_group_members_and_epochs_survive_a_coordinator_restart(broker: BrokerProcess) -> None:
    topic, other, group = unique("t"), unique("u"), unique("g")
    broker.create_topic(topic, 2)
    broker.create_topic(other, 1)
    wait_for_coordinator(broker, group)
    a, b, c = (uuid.uuid4().hex for _ in range(3))
    epoch_a = _heartbeat(broker, group, a, 0, [topic]).member_epoch
    _heartbeat(broker, group, b, 0, [topic, other])
    _heartbeat(broker, group, c, 0, [other])
    _heartbeat(broker, group, c, -1)  # its records are tombstoned
    epoch_a = _heartbeat(broker, group, a, epoch_a).member_epoch  # a takes the new assignment
    before = _describe(broker, group)
    assert before.error_code == Errors.NONE and {m.member_id for m in before.members} == {a, b}

    after = _restart(broker, group)
    assert _snapshot(after) == _snapshot(before)
    again = _heartbeat(broker, group, a, epoch_a)  # the reloaded member goes on at its epoch
    assert again.member_epoch == epoch_a and _describe(broker, group).group_epoch == before.group_epoch

    _heartbeat(broker, group, a, -1)
    _heartbeat(broker, group, b, -1)
    deleted = request(broker, ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=[group]))
    assert deleted.results[0].error_code == Errors.NONE
    assert _restart(broker, group).error_code == Errors.GROUP_ID_NOT_FOUND
