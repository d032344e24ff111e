"""Envelope (v0): Kafka 3.9's ZooKeeper-mode broker advertises it, for forwarding during a KRaft
migration, but without forwarding enabled it treats one as unparsable and closes the connection,
before any authorization. Forwarding is not part of this broker, so it always closes."""
from __future__ import annotations

from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey


@handles(ApiKey.ENVELOPE)
async def handle_envelope(services: BrokerServices, request: Request) -> Response:
    return Response.close(request)
