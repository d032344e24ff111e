"""CreateDelegationToken (v0-3), RenewDelegationToken, ExpireDelegationToken (v0-2) and
DescribeDelegationToken (v0-3), as Kafka's KafkaApis answers them in ZooKeeper mode.

Only an authenticated connection may ask (SASL, or TLS with a client certificate), and not one
that logged in with a token (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED); a token for another owner
needs CREATE_TOKENS on that user, renewers must be users; tokens are renewed and expired by their
owner or renewers; a description lists the tokens the requester owns or renews, or may DESCRIBE
(the token) or DESCRIBE_TOKENS (its owner). The token work itself is the DelegationTokenManager's.
"""

from __future__ import annotations

from typing import Any

from broker.handlers import handles
from broker.network.request_channel import Request, Response
from broker.security.authorizer.acl import AclOperation, ResourceType
from broker.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from broker.services import BrokerServices
from coordination.zk_delegation_tokens import TokenInformation
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import CreateDelegationTokenResponse, DescribeDelegationTokenResponse, \
    ExpireDelegationTokenResponse, RenewDelegationTokenResponse

ERROR_TIMESTAMP = -1
REQUESTER_MIN_VERSION = 3  # responses name the token's requester from v3 (KIP-373)


def _allow_token_requests(request: Request) -> bool:
    """Kafka's allowTokenRequests: not PLAINTEXT, not one-way TLS, not a token's own session."""
    principal = request.principal
    if principal.token_authenticated:
        return False
    protocol = request.security_protocol
    return protocol != "PLAINTEXT" and not (protocol == "SSL" and principal == ANONYMOUS)


def _principal(text: str) -> tuple[str, str]:
    principal_type, _, name = text.partition(":")
    return principal_type, name


def _create_response(request: Request, error: Errors, owner: KafkaPrincipal, token: TokenInformation | None = None,
                     digest: bytes = b"") -> Any:
    return create_body(request.api_version, error, owner, request.principal, token, digest)


def create_body(version: int, error: Errors, owner: KafkaPrincipal, requester: KafkaPrincipal,
                token: TokenInformation | None = None, digest: bytes = b"") -> Any:
    """The CreateDelegationToken answer at ``version`` (the requester only from v3)."""
    response = CreateDelegationTokenResponse(
        error_code=int(error), principal_type=owner.principal_type, principal_name=owner.name,
        issue_timestamp_ms=token.issue_timestamp if token else ERROR_TIMESTAMP,
        expiry_timestamp_ms=token.expiry_timestamp if token else ERROR_TIMESTAMP,
        max_timestamp_ms=token.max_timestamp if token else ERROR_TIMESTAMP,
        token_id=token.token_id if token else "", hmac=digest, throttle_time_ms=0)
    if version >= REQUESTER_MIN_VERSION:
        response.token_requester_principal_type, response.token_requester_principal_name = \
            requester.principal_type, requester.name
    return response


@handles(ApiKey.CREATE_DELEGATION_TOKEN)
async def handle_create_delegation_token(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    requester = request.principal
    if body.owner_principal_name and body.owner_principal_type is None:  # Kafka's KafkaPrincipal refuses it (NPE)
        return Response.send(request, _create_response(request, Errors.UNKNOWN_SERVER_ERROR, requester))
    owner = KafkaPrincipal(body.owner_principal_type, body.owner_principal_name) if body.owner_principal_name \
        else requester
    renewers = [KafkaPrincipal(r.principal_type, r.principal_name) for r in body.renewers]
    if not _allow_token_requests(request):
        error = Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    elif owner != requester and not services.auth.authorize(request, AclOperation.CREATE_TOKENS, ResourceType.USER,
                                                            str(owner)):
        error = Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    elif any(r.principal_type != USER_TYPE for r in renewers):
        error = Errors.INVALID_PRINCIPAL_TYPE
    else:
        tokens = services.delegation_tokens
        assert tokens is not None
        error, token, digest = await services.pool.run_blocking(
            tokens.create, str(owner), str(requester), [str(r) for r in renewers], body.max_lifetime_ms)
        return Response.send(request, _create_response(request, error, owner, token, digest))
    return Response.send(request, _create_response(request, error, owner))


@handles(ApiKey.RENEW_DELEGATION_TOKEN)
async def handle_renew_delegation_token(services: BrokerServices, request: Request) -> Response:
    return await _change_expiry(services, request, renew=True)


@handles(ApiKey.EXPIRE_DELEGATION_TOKEN)
async def handle_expire_delegation_token(services: BrokerServices, request: Request) -> Response:
    return await _change_expiry(services, request, renew=False)


async def _change_expiry(services: BrokerServices, request: Request, renew: bool) -> Response:
    """Renew or expire the token the request's HMAC names; both answers are (error, expiry timestamp)."""
    body = request.body()
    error, expiry = Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, ERROR_TIMESTAMP
    if _allow_token_requests(request):
        tokens = services.delegation_tokens
        assert tokens is not None
        change, period = (tokens.renew, body.renew_period_ms) if renew else (tokens.expire, body.expiry_time_period_ms)
        error, expiry = await services.pool.run_blocking(change, str(request.principal), bytes(body.hmac), period)
    response = RenewDelegationTokenResponse if renew else ExpireDelegationTokenResponse
    return Response.send(request, response(error_code=int(error), expiry_timestamp_ms=expiry, throttle_time_ms=0))


@handles(ApiKey.DESCRIBE_DELEGATION_TOKEN)
async def handle_describe_delegation_token(services: BrokerServices, request: Request) -> Response:
    body = request.body()
    tokens = services.delegation_tokens
    if not _allow_token_requests(request):
        return _describe_response(request, Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, [])
    if tokens is None or not tokens.enabled:
        return _describe_response(request, Errors.DELEGATION_TOKEN_AUTH_DISABLED, [])
    if body.owners is not None and not body.owners:
        return _describe_response(request, Errors.NONE, [])
    owners = None if body.owners is None else [f"{o.principal_type}:{o.principal_name}" for o in body.owners]
    requester = str(request.principal)

    def eligible(token: TokenInformation) -> bool:  # Kafka's DelegationTokenManager.filterToken
        if owners is not None and not any(token.owner_or_renewer(owner) for owner in owners):
            return False
        return token.owner_or_renewer(requester) \
            or services.auth.authorize(request, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token.token_id) \
            or services.auth.authorize(request, AclOperation.DESCRIBE_TOKENS, ResourceType.USER, token.owner)

    return _describe_response(request, Errors.NONE, [(t, d) for t, d in tokens.tokens() if eligible(t)])


def _describe_response(request: Request, error: Errors, tokens: list[tuple[TokenInformation, bytes]]) -> Response:
    return Response.send(request, describe_body(request.api_version, error, tokens))


def describe_body(version: int, error: Errors, tokens: list[tuple[TokenInformation, bytes]]) -> Any:
    """The DescribeDelegationToken answer at ``version`` (the requester only from v3)."""
    Described = DescribeDelegationTokenResponse.DescribedDelegationToken
    Renewer = DescribeDelegationTokenResponse.DescribedDelegationTokenRenewer
    described = []
    for token, digest in tokens:
        owner_type, owner_name = _principal(token.owner)
        requester_type, requester_name = _principal(token.token_requester)
        entry = Described(
            principal_type=owner_type, principal_name=owner_name, issue_timestamp=token.issue_timestamp,
            expiry_timestamp=token.expiry_timestamp, max_timestamp=token.max_timestamp, token_id=token.token_id,
            hmac=digest, renewers=[Renewer(principal_type=t, principal_name=n)
                                   for t, n in map(_principal, token.renewers)])
        if version >= REQUESTER_MIN_VERSION:
            entry.token_requester_principal_type, entry.token_requester_principal_name = requester_type, requester_name
        described.append(entry)
    return DescribeDelegationTokenResponse(error_code=int(error), tokens=described, throttle_time_ms=0)
