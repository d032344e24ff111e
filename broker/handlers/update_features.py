"""UpdateFeatures (v0-1), answered by the controller: changes to the finalized features in /feature
(``kafka-features.sh upgrade|downgrade|disable``). ALTER on the cluster is checked before the
handler runs; another broker than the controller answers NOT_CONTROLLER.

A ZooKeeper-mode broker supports no feature, so every update but the deletion of a finalized one
fails, each with Kafka's reason (``coordination.controller.feature_updates``).
"""
from __future__ import annotations

import asyncio

from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from coordination.controller.feature_updates import FeatureUpdate, UpgradeType
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import UpdateFeaturesResponse

# Kafka's ApiError(error) carries the error's own description, which clients print.
_TOP_LEVEL_MESSAGES = {
    Errors.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    Errors.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
}

Result = UpdateFeaturesResponse.UpdatableFeatureResult


def error_response(request: Request, error: Errors) -> UpdateFeaturesResponse:
    """Kafka's answer to a request refused as a whole: the error at the top, no feature results."""
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=int(error),
                                  error_message=_TOP_LEVEL_MESSAGES.get(error), results=[])


def _updates(request: Request) -> list[FeatureUpdate]:
    """v0 says allow_downgrade where v1 says the upgrade type (a downgrade is a safe one)."""
    body = request.body()
    if request.api_version == 0:
        return [FeatureUpdate(u.feature, u.max_version_level,
                              UpgradeType.SAFE_DOWNGRADE if u.allow_downgrade else UpgradeType.UPGRADE)
                for u in body.feature_updates]
    return [FeatureUpdate(u.feature, u.max_version_level, UpgradeType.of(u.upgrade_type))
            for u in body.feature_updates]


@handles(ApiKey.UPDATE_FEATURES, error_response=error_response)
async def handle_update_features(services: BrokerServices, request: Request) -> Response:
    controller = services.controller
    if not controller.is_active:
        return Response.send(request, error_response(request, Errors.NOT_CONTROLLER))
    results = await asyncio.wrap_future(controller.update_features(_updates(request)))
    return Response.send(request, UpdateFeaturesResponse(
        throttle_time_ms=0, error_code=0, error_message=None, results=[
            Result(feature=name, error_code=int(Errors[result.error]) if result.error else 0,
                   error_message=result.message) for name, result in results.items()]))
