"""DescribeCluster (v0-1): the brokers reachable on the request's listener, cluster id and
controller id, from the metadata cache (Kafka's ZK-mode KafkaApis.handleDescribeCluster)."""
from __future__ import annotations

from broker.auth_helper import CLUSTER_NAME, ResourceType, authorized_operations
from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import DescribeClusterResponse

BROKERS_ENDPOINT, CONTROLLERS_ENDPOINT = 1, 2


@handles(ApiKey.DESCRIBE_CLUSTER)
async def handle_describe_cluster(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    version = request.api_version
    if version >= 1 and body.endpoint_type != BROKERS_ENDPOINT:
        # EndpointType: 1 BROKER, 2 CONTROLLER; anything else is unknown.
        if body.endpoint_type == CONTROLLERS_ENDPOINT:
            error = Errors.MISMATCHED_ENDPOINT_TYPE
            message = "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
        else:
            error, message = Errors.UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {body.endpoint_type}"
        return Response.send(request, DescribeClusterResponse(error_code=int(error), error_message=message))
    response = DescribeClusterResponse(cluster_id=services.cluster_id)
    cache = services.metadata_cache
    response.controller_id = -1 if cache.controller_id is None else cache.controller_id
    response.brokers = [
        DescribeClusterResponse.DescribeClusterBroker(broker_id=node.broker_id, host=host, port=port, rack=node.rack)
        for node, host, port in cache.alive_brokers(request.listener_name)
    ]
    if body.include_cluster_authorized_operations:
        response.cluster_authorized_operations = authorized_operations(request, ResourceType.CLUSTER, CLUSTER_NAME)
    return Response.send(request, response)
