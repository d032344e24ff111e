"""UpdateFeatures on the ZooKeeper controller (KIP-584): the finalized features in /feature.

A ZooKeeper-mode broker supports no feature (its supported feature set is empty), so the only
update a ZK controller can apply is the deletion of a feature finalized in /feature; every other
one fails validation, with Kafka's reason. Each update is validated on its own against the
finalized features; the valid ones are written together in one new /feature value.
"""
from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from coordination.errors import CoordinationError
from coordination.kafka_zk_client import KafkaZkClient
from coordination.zk_admin_data import FEATURE_STATUS_ENABLED, decode_feature_znode, encode_feature_znode
from coordination.zk_data import FEATURE_PATH

log = logging.getLogger(__name__)


class UpgradeType(enum.IntEnum):
    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3

    @classmethod
    def of(cls, code: int) -> UpgradeType:
        return cls(code) if code in cls._value2member_map_ else cls.UNKNOWN


@dataclass(frozen=True)
class FeatureUpdate:
    feature: str
    max_version_level: int
    upgrade_type: UpgradeType

    @property
    def is_delete(self) -> bool:
        return self.max_version_level < 1 and self.upgrade_type is not UpgradeType.UPGRADE


@dataclass(frozen=True)
class FeatureUpdateResult:
    """NONE (error None) or INVALID_REQUEST / FEATURE_UPDATE_FAILED with Kafka's reason."""

    error: str | None = None
    message: str | None = None


UPDATE_FAILED = "Unable to update finalized features due to an unexpected server error."
UNSUPPORTED = "Could not apply finalized feature update because the provided feature is not supported."


def validate(update: FeatureUpdate, existing: int | None) -> str | None:
    """Why ``update`` may not be applied to a feature finalized at ``existing`` (None: not finalized),
    or None when it may: only a deletion of a finalized feature, no feature being supported."""
    level = update.max_version_level
    if not update.feature:
        return "Feature name can not be empty."
    if update.upgrade_type is UpgradeType.UNKNOWN:
        return "Received unknown upgrade type."
    if update.is_delete:
        return "Can not delete non-existing finalized feature." if existing is None else None
    if level < 1:
        return (f"Can not provide versionLevel: {level} less than 1 without setting the SAFE downgradeType in "
                "the request.")
    if existing is not None:
        safe = update.upgrade_type is UpgradeType.SAFE_DOWNGRADE
        if level == existing:
            return (f"Can not {'downgrade' if safe else 'upgrade'} a finalized feature from existing "
                    f"versionLevel:{existing} to the same value.")
        if level < existing and not safe:
            return (f"Can not downgrade finalized feature from existing versionLevel:{existing} to provided "
                    f"versionLevel:{level} without setting the downgradeType to SAFE in the request.")
        if update.upgrade_type is not UpgradeType.UPGRADE and level > existing:
            return (f"When the downgradeType is set to SAFE in the request, the provided versionLevel:{level} "
                    f"can not be greater than existing versionLevel:{existing}.")
    return UNSUPPORTED


def finalized_features(zk: KafkaZkClient) -> dict[str, int]:
    """The finalized features in /feature; none when it is absent or disabled."""
    data, stat = zk.zk.get_data(FEATURE_PATH)
    if stat is None:
        return {}
    status, features = decode_feature_znode(data)
    return features if status == FEATURE_STATUS_ENABLED else {}


def update_features(zk: KafkaZkClient, updates: list[FeatureUpdate]) -> dict[str, FeatureUpdateResult]:
    """Kafka's processFeatureUpdates: each update's result; the valid ones written to /feature at once
    (when that write fails, they are FEATURE_UPDATE_FAILED)."""
    existing = finalized_features(zk)
    target = dict(existing)
    results: dict[str, FeatureUpdateResult] = {}
    for update in updates:
        reason = validate(update, existing.get(update.feature))
        if reason is not None:
            results[update.feature] = FeatureUpdateResult("INVALID_REQUEST", reason)
            continue
        target.pop(update.feature, None)  # a deletion: nothing else is ever valid here
        results[update.feature] = FeatureUpdateResult()
    if target != existing:
        try:
            zk.zk.set_data(FEATURE_PATH, encode_feature_znode(target))
        except CoordinationError as exc:
            log.warning("Processing of feature updates failed: %s", exc)
            failed = FeatureUpdateResult("FEATURE_UPDATE_FAILED", UPDATE_FAILED)
            results = {name: result if result.error else failed for name, result in results.items()}
    return results
