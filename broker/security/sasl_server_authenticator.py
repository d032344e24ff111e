"""SaslServerAuthenticator: a SASL listener's connection before (and while re-)authenticating.

Kafka's state machine, run by the connection's processor on the network thread:
INITIAL_REQUEST -> HANDSHAKE_OR_VERSIONS_REQUEST (ApiVersions answered here) -> HANDSHAKE_REQUEST ->
AUTHENTICATE (SaslAuthenticate requests from SaslHandshake v1 on, raw size-prefixed tokens after v0)
-> COMPLETE or FAILED. Re-authentication (KIP-368) starts in REAUTH_PROCESS_HANDSHAKE when an
authenticated client sends SaslHandshake again, and must keep the mechanism and the principal.

Each received frame gives a ``Step``: the bytes to send now, and whether authentication is done,
failed (Kafka sends the failure response only after ``connection.failed.authentication.delay.ms``,
then closes) or the connection must close at once (a request that is not Kafka's, or not allowed
before authentication).
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from broker.network.api_version_manager import ApiVersionManager, api_versions_answer
from broker.security.principal import USER_TYPE, KafkaPrincipal
from broker.security.sasl_mechanism import SaslAuthenticationError, SaslError, SaslServer
from protocol.api_keys import ApiKey, request_class
from protocol.errors import Errors
from protocol.exceptions import ProtocolError
from protocol.framing import encode_response_parts
from protocol.headers import RequestHeader, parse_request_header
from protocol.messages import Message, SaslAuthenticateResponse, SaslHandshakeResponse

log = logging.getLogger(__name__)

SaslServerFactory = Callable[[], SaslServer]


class SaslState(enum.Enum):
    INITIAL_REQUEST = "INITIAL_REQUEST"
    HANDSHAKE_OR_VERSIONS_REQUEST = "HANDSHAKE_OR_VERSIONS_REQUEST"
    HANDSHAKE_REQUEST = "HANDSHAKE_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"
    REAUTH_PROCESS_HANDSHAKE = "REAUTH_PROCESS_HANDSHAKE"
    REAUTH_BAD_MECHANISM = "REAUTH_BAD_MECHANISM"


@dataclass(frozen=True)
class SaslListenerConfig:
    """What a SASL listener accepts: mechanism -> server factory, in sasl.enabled.mechanisms order."""

    mechanisms: dict[str, SaslServerFactory]
    max_receive_size: int
    reauth_ms: dict[str, int]  # connections.max.reauth.ms per mechanism (0: sessions never expire)


@dataclass
class Step:
    send: list[Any] = field(default_factory=list)
    complete: bool = False
    failure: str | None = None          # log message; ``failure_response`` goes out after the delay
    failure_response: list[Any] = field(default_factory=list)
    close: str | None = None            # close now, without a response


class _InvalidRequest(Exception):
    pass


class SaslServerAuthenticator:
    def __init__(self, config: SaslListenerConfig, api_versions: ApiVersionManager) -> None:
        self.config = config
        self.api_versions = api_versions
        self.state = SaslState.INITIAL_REQUEST
        self.kafka_headers = False        # SaslHandshake v1+: tokens come in SaslAuthenticate requests
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        self.session_expiration_ns: int | None = None
        self.client_supports_reauth = False
        self._server: SaslServer | None = None
        self._previous: tuple[str, KafkaPrincipal] | None = None  # (mechanism, principal) when re-authenticating

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def reauthenticating(self) -> bool:
        return self._previous is not None

    def _text(self) -> str:
        return "re-authentication" if self.reauthenticating else "authentication"

    def begin_reauthentication(self, frame: bytes) -> Step:
        """An authenticated client sent SaslHandshake again: re-run the exchange on this connection."""
        assert self.mechanism is not None and self.principal is not None
        self._previous = (self.mechanism, self.principal)
        self.state = SaslState.REAUTH_PROCESS_HANDSHAKE
        return self.receive(frame)

    def receive(self, frame: bytes) -> Step:
        state = self.state
        try:
            if state in (SaslState.INITIAL_REQUEST, SaslState.HANDSHAKE_OR_VERSIONS_REQUEST,
                         SaslState.HANDSHAKE_REQUEST, SaslState.REAUTH_PROCESS_HANDSHAKE):
                return self._handle_kafka_request(frame)
            if state is SaslState.REAUTH_BAD_MECHANISM:
                assert self._previous is not None
                return self._fail(f"SASL mechanism '{self.mechanism}' requested by client is not supported for "
                                  f"re-authentication of mechanism '{self._previous[0]}'", [])
            if state is SaslState.AUTHENTICATE:
                return self._handle_token(frame)
            return Step(close=f"unexpected frame in SASL state {state.value}")
        except _InvalidRequest as exc:
            self.state = SaslState.FAILED
            if state is SaslState.INITIAL_REQUEST:
                return Step(close="Invalid request, potential reasons: kafka client configured with the wrong "
                                  f"security protocol, it does not support KIP-43 or it is not a kafka client ({exc})")
            return Step(close=str(exc))

    # --- SaslHandshake and ApiVersions -----------------------------------------------------------
    def _handle_kafka_request(self, frame: bytes) -> Step:
        try:
            header = parse_request_header(frame)
        except ProtocolError as exc:
            raise _InvalidRequest(f"cannot parse the request header: {exc}") from None
        if header.api_key not in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE):
            name = ApiKey(header.api_key).name if header.api_key in ApiKey._value2member_map_ else header.api_key
            raise _InvalidRequest(f"Unexpected Kafka request of type {name} during SASL handshake.")
        if self.state is SaslState.INITIAL_REQUEST:
            self.state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        if header.api_key == ApiKey.API_VERSIONS:
            if self.state is not SaslState.HANDSHAKE_OR_VERSIONS_REQUEST:
                raise _InvalidRequest(f"Unexpected ApiVersions request received during SASL authentication "
                                      f"state {self.state.value}")
            body, version = api_versions_answer(self.api_versions, header.api_version,
                                                lambda: _decode(header, frame))
            self.state = SaslState.HANDSHAKE_REQUEST
            return Step(send=encode_response_parts(body, header.api_key, version, header.correlation_id))
        if not self.api_versions.is_api_enabled(header.api_key, header.api_version):
            raise _InvalidRequest(f"SaslHandshake version {header.api_version} is not supported")
        try:
            mechanism = _decode(header, frame).mechanism
        except ProtocolError as exc:
            raise _InvalidRequest(f"cannot parse SaslHandshake: {exc}") from None
        if header.api_version >= 1:
            self.kafka_headers = True
        enabled = list(self.config.mechanisms)
        if mechanism not in self.config.mechanisms:
            log.debug("SASL mechanism '%s' requested by client is not supported", mechanism)
            self.state = SaslState.FAILED
            response = _encode(SaslHandshakeResponse(error_code=int(Errors.UNSUPPORTED_SASL_MECHANISM),
                                                     mechanisms=enabled), header)
            return Step(failure=f"Unsupported SASL mechanism {mechanism}", failure_response=response)
        send = _encode(SaslHandshakeResponse(error_code=0, mechanisms=enabled), header)
        if self._previous is not None and self._previous[0] != mechanism:
            self.mechanism = mechanism
            self.state = SaslState.REAUTH_BAD_MECHANISM
            return Step(send=send)
        self.mechanism = mechanism
        self._server = self.config.mechanisms[mechanism]()
        self.state = SaslState.AUTHENTICATE
        return Step(send=send)

    # --- tokens ------------------------------------------------------------------------------------
    def _handle_token(self, frame: bytes) -> Step:
        server = self._server
        assert server is not None and self.mechanism is not None
        if not self.kafka_headers:
            try:
                token = server.evaluate(bytes(frame))
            except SaslError as exc:
                return self._fail(self._client_message(exc), [])
            step = Step(send=[len(token).to_bytes(4, "big") + token])
            if server.complete:
                self._completed(server)
                step.complete = True
            return step
        try:
            header = parse_request_header(frame)
            body = _decode(header, frame)
        except ProtocolError as exc:
            raise _InvalidRequest(f"cannot parse a request during SASL authentication: {exc}") from None
        if header.api_key != ApiKey.SASL_AUTHENTICATE:
            message = f"Unexpected Kafka request of type {ApiKey(header.api_key).name} during SASL authentication."
            return self._fail(message, _request_error_response(header, frame, Errors.ILLEGAL_SASL_STATE))
        if not self.api_versions.is_api_enabled(header.api_key, header.api_version):
            return self._fail(f"Version {header.api_version} is not supported for apiKey SASL_AUTHENTICATE", [])
        self.client_supports_reauth = self.client_supports_reauth or header.api_version > 0
        try:
            token = server.evaluate(bytes(body.auth_bytes))
            if server.complete and self._previous is not None:
                self._ensure_principal_unchanged(server)
        except SaslError as exc:
            message = self._client_message(exc)
            return self._fail(message, _error_response(header, Errors.SASL_AUTHENTICATION_FAILED, message))
        lifetime_ms = self._completed(server) if server.complete else 0
        send = _encode(SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=token,
                                                session_lifetime_ms=lifetime_ms), header)
        return Step(send=send, complete=server.complete)

    def _client_message(self, exc: SaslError) -> str:
        if isinstance(exc, SaslAuthenticationError):
            return str(exc)
        log.debug("SASL %s failed: %s", self.mechanism, exc)
        return (f"Authentication failed during {self._text()} due to invalid credentials with SASL mechanism "
                f"{self.mechanism}")

    def _ensure_principal_unchanged(self, server: SaslServer) -> None:
        assert self._previous is not None
        new = KafkaPrincipal(USER_TYPE, server.authorization_id)
        if new != self._previous[1]:
            raise SaslAuthenticationError(f"Cannot change principals during re-authentication from "
                                          f"{self._previous[1].principal_type}.{self._previous[1].name}: "
                                          f"{new.principal_type}.{new.name}")

    def _completed(self, server: SaslServer) -> int:
        """Set the principal and the session expiry; the session lifetime to tell the client (ms)."""
        assert self.mechanism is not None
        self.principal = KafkaPrincipal(USER_TYPE, server.authorization_id, server.token_authenticated)
        self.state = SaslState.COMPLETE
        self._previous = None
        lifetime_ms = max(0, self.config.reauth_ms.get(self.mechanism, 0))
        expiration_ms = server.credential_expiration_ms
        if expiration_ms is not None:  # Kafka: the credential's remaining life, if shorter (or no max set)
            remaining_ms = max(0, expiration_ms - int(time.time() * 1000))
            lifetime_ms = remaining_ms if lifetime_ms <= 0 else min(lifetime_ms, remaining_ms)
        self.session_expiration_ns = time.monotonic_ns() + lifetime_ms * 1_000_000 if lifetime_ms > 0 else None
        return lifetime_ms

    def _fail(self, message: str, response: list[Any]) -> Step:
        self.state = SaslState.FAILED
        return Step(failure=message, failure_response=response)


def _decode(header: RequestHeader, frame: bytes) -> Message:
    return request_class(header.api_key).decode_from(frame, header.header_size, header.api_version)[0]


def _encode(body: Message, header: RequestHeader) -> list[Any]:
    return encode_response_parts(body, header.api_key, header.api_version, header.correlation_id)


def _error_response(header: RequestHeader, error: Errors, message: str) -> list[Any]:
    return _encode(SaslAuthenticateResponse(error_code=int(error), error_message=message, auth_bytes=b"",
                                            session_lifetime_ms=0), header)


def _request_error_response(header: RequestHeader, frame: bytes, error: Errors) -> list[Any]:
    """Another API's request where SaslAuthenticate was due: its own error response (Kafka's
    getErrorResponse), sent before the connection closes; nothing where the API has none."""
    from broker.handlers import error_response  # the handlers' registry sits above the network layer
    from broker.network.request_channel import Request, ResponseAction

    request = Request(None, "", header, bytearray(frame), "", "", ("", 0))  # type: ignore[arg-type]
    response = error_response(request, error)
    return response.parts if response.action is ResponseAction.SEND else []
