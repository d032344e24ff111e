"""SaslHandshake and SaslAuthenticate reaching the request handlers: ILLEGAL_SASL_STATE (as KafkaApis).

On a SASL listener both are consumed by the connection's SaslServerAuthenticator before
authentication and for KIP-368 re-authentication; they get here only on other listeners or
from a client that already authenticated and cannot re-authenticate.
"""

from __future__ import annotations

from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.services import BrokerServices
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import SaslAuthenticateResponse, SaslHandshakeResponse


@handles(ApiKey.SASL_HANDSHAKE)
async def handle_sasl_handshake(services: BrokerServices, request: Request) -> Response:
    return Response.send(request, SaslHandshakeResponse(error_code=int(Errors.ILLEGAL_SASL_STATE), mechanisms=[]))


@handles(ApiKey.SASL_AUTHENTICATE)
async def handle_sasl_authenticate(services: BrokerServices, request: Request) -> Response:
    return Response.send(request, SaslAuthenticateResponse(
        error_code=int(Errors.ILLEGAL_SASL_STATE),
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"", session_lifetime_ms=0))
