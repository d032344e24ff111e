"""How this broker connects to other brokers (Kafka's client-side channel builder for the
inter-broker listener): TCP, then TLS for SSL/SASL_SSL (``ssl.*`` of the inter-broker listener,
hostname checked per ``ssl.endpoint.identification.algorithm``), then SASL with
``sasl.mechanism.inter.broker.protocol`` and the username/password of that listener's JAAS config
(for OAUTHBEARER, an unsecured token made from its ``unsecuredLogin*`` options, or with Kafka's
OAuthBearerLoginCallbackHandler a token from the identity provider, see ``oauthbearer_login``).

The SASL exchange is written once as a generator of (api key, version, request) that receives
each response; ``connect_blocking`` (controller channel, controlled shutdown) and
``open_connection`` (replica fetchers, AlterPartition) drive it over their kind of socket.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import functools
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from broker.config import KafkaConfig
from broker.config_defs import ConfigError
from broker.security.jaas_context import server_login_modules
from broker.security.oauthbearer import OAUTHBEARER, SEPARATOR, client_first_message, unsecured_token
from broker.security.oauthbearer_login import OIDC_LOGIN_CLASSES, LoginError, OidcLogin, OidcLoginSettings
from broker.security.sasl_mechanism import PLAIN, SaslError
from broker.security.scram import SCRAM_MECHANISMS, ScramClient
from broker.security.ssl_factory import SslFactory, SslSettings
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.framing import decode_response, encode_request
from protocol.messages import Message, SaslAuthenticateRequest, SaslHandshakeRequest

SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2
SaslExchange = Generator[tuple[int, int, Message], Message, None]


class AuthenticationFailed(ConnectionError):
    """The peer refused our credentials (an OSError, so callers retry as on any connection failure)."""


def _check(response: Message, what: str) -> Message:
    if response.error_code:
        message = getattr(response, "error_message", None) or Errors(response.error_code).name
        raise AuthenticationFailed(f"{what} failed: {message}")
    return response


def sasl_exchange(mechanism: str, username: str, password: str,
                  oauth_token: Callable[[], str] | None = None) -> SaslExchange:
    """The requests of one SASL login (SaslHandshake v1, then SaslAuthenticate) as a generator."""
    _check((yield ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, SaslHandshakeRequest(mechanism=mechanism)),
           "SaslHandshake")

    def authenticate(token: bytes) -> Any:
        return (yield ApiKey.SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION, SaslAuthenticateRequest(auth_bytes=token))

    if mechanism == PLAIN:
        _check((yield from authenticate(f"\0{username}\0{password}".encode())), "SASL/PLAIN authentication")
        return
    if mechanism == OAUTHBEARER:
        assert oauth_token is not None
        token = oauth_token()
        answer = _check((yield from authenticate(client_first_message(token))), "SASL/OAUTHBEARER authentication")
        if answer.auth_bytes:  # RFC 7628's error challenge: acknowledge it, the server then fails us
            _check((yield from authenticate(SEPARATOR.encode())), "SASL/OAUTHBEARER authentication")
            raise AuthenticationFailed(f"SASL/OAUTHBEARER authentication failed: {bytes(answer.auth_bytes).decode()}")
        return
    client = ScramClient(SCRAM_MECHANISMS[mechanism], username, password)
    first = _check((yield from authenticate(client.first_message())), f"{mechanism} authentication")
    final = _check((yield from authenticate(client.final_message(first.auth_bytes))), f"{mechanism} authentication")
    try:
        client.verify_final(final.auth_bytes)
    except SaslError as exc:
        raise AuthenticationFailed(str(exc)) from None


@dataclass(frozen=True)
class ClientSecurity:
    security_protocol: str = "PLAINTEXT"
    ssl: SslFactory | None = None  # its context changes with dynamic keystore updates
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""
    # OAUTHBEARER's token for a login: a fresh unsecured one, or the identity provider's current one
    oauth_token: Callable[[], str] | None = None

    @classmethod
    def inter_broker(cls, config: KafkaConfig) -> ClientSecurity:
        endpoint = config.inter_broker_endpoint
        protocol, listener = endpoint.security_protocol, endpoint.listener_name
        context = SslFactory.for_client(SslSettings.for_listener(config, listener)) if protocol.endswith("SSL") else None
        if not protocol.startswith("SASL_"):
            return cls(protocol, context)
        mechanism = config.get("sasl.mechanism.inter.broker.protocol")
        if mechanism != PLAIN and mechanism != OAUTHBEARER and mechanism not in SCRAM_MECHANISMS:
            raise ConfigError("sasl.mechanism.inter.broker.protocol", f"SASL mechanism {mechanism} is not supported")
        found = server_login_modules(config, listener, mechanism)
        key = found[1] if found else f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        options = found[0][0].options if found else {}
        if mechanism == OAUTHBEARER:
            login_handler = config.listener_value(listener, "sasl.login.callback.handler.class", mechanism)
            if login_handler in OIDC_LOGIN_CLASSES:  # KIP-768: the identity provider's token, kept fresh
                login = OidcLogin(OidcLoginSettings.for_listener(config, listener, mechanism, options))
                try:
                    login.start()
                except LoginError as exc:
                    raise ConfigError(key, f"the OAUTHBEARER login failed: {exc}") from None
                return cls(protocol, context, mechanism, oauth_token=login.token)
            if login_handler:
                raise ConfigError(f"listener.name.{listener.lower()}.oauthbearer.sasl.login.callback.handler.class",
                                  f"{login_handler} is not supported: brokers log in to each other over "
                                  f"OAUTHBEARER with unsecured tokens (unsecuredLoginStringClaim_sub) or with "
                                  f"{OIDC_LOGIN_CLASSES[0]}")
            try:
                unsecured_token(options)
            except ValueError as exc:
                raise ConfigError(key, str(exc)) from None
            # a fresh token each login, as Kafka's unsecured login handler makes
            return cls(protocol, context, mechanism, oauth_token=functools.partial(unsecured_token, options))
        if "username" not in options or "password" not in options:
            raise ConfigError(key, "the inter-broker JAAS config needs username and password")
        return cls(protocol, context, mechanism, options["username"], options["password"])

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        """What a new connection uses now."""
        return None if self.ssl is None else self.ssl.context

    # --- blocking sockets -------------------------------------------------------------------------
    def connect_blocking(self, host: str, port: int, timeout: float, client_id: str) -> socket.socket:
        """A connected, encrypted and authenticated socket; OSError (or AuthenticationFailed) if not."""
        sock: socket.socket = socket.create_connection((host, port), timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            context = self.ssl_context
            if context is not None:
                sock = context.wrap_socket(sock, server_hostname=host)
            if self.sasl_mechanism is not None:
                self._drive_blocking(sock, client_id)
        except BaseException:
            sock.close()
            raise
        return sock

    def _frames(self, client_id: str) -> Generator[tuple[bytes, int, int], Message, None]:
        """The login's request frames (with api key and version); receives each decoded response."""
        exchange = sasl_exchange(self.sasl_mechanism or "", self.username, self.password, self.oauth_token)
        response: Message | None = None
        correlation_id = 0
        while True:
            try:
                api_key, version, request = exchange.send(response) if response is not None else next(exchange)
            except StopIteration:
                return
            correlation_id += 1
            response = yield encode_request(request, api_key, version, correlation_id, client_id), api_key, version

    def _drive_blocking(self, sock: socket.socket, client_id: str) -> None:
        from coordination.blocking_rpc import read_response

        frames = self._frames(client_id)
        frame, api_key, version = next(frames)
        while True:
            sock.sendall(frame)
            try:
                frame, api_key, version = frames.send(read_response(sock, api_key, version)[1])
            except StopIteration:
                return

    # --- asyncio streams --------------------------------------------------------------------------
    async def open_connection(self, host: str, port: int, client_id: str
                              ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        context = self.ssl_context
        reader, writer = await asyncio.open_connection(
            host, port, ssl=context, server_hostname=host if context is not None else None)
        try:
            if self.sasl_mechanism is not None:
                await self._drive_async(reader, writer, client_id)
        except BaseException:
            writer.close()
            raise
        return reader, writer

    async def _drive_async(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        frames = self._frames(client_id)
        frame, api_key, version = next(frames)
        while True:
            writer.write(frame)
            size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
            if size < 0:
                raise ConnectionError(f"invalid response size {size}")
            try:
                frame, api_key, version = frames.send(decode_response(api_key, version,
                                                                      await reader.readexactly(size))[1])
            except StopIteration:
                return


PLAINTEXT = ClientSecurity()
