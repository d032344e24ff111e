"""The SASL server mechanism interface and PLAIN (Kafka's PlainSaslServer).

A ``SaslServer`` evaluates client tokens; ``SaslAuthenticationError`` carries a message meant
for the client, ``SaslError`` a failure whose details stay in the broker's log (the client gets
Kafka's generic "invalid credentials" message).
"""

from __future__ import annotations

from collections.abc import Callable

PLAIN = "PLAIN"


class SaslError(Exception):
    """Failed authentication; the client is told only that its credentials were invalid."""


class SaslAuthenticationError(SaslError):
    """Failed authentication with a message the client may see (Kafka's SaslAuthenticationException)."""


class SaslServer:
    mechanism_name = ""

    def __init__(self) -> None:
        self.complete = False
        self.authorization_id = ""
        # When the credential expires (ms since the epoch; OAUTHBEARER's or a delegation token): it bounds the session.
        self.credential_expiration_ms: int | None = None
        self.token_authenticated = False  # SCRAM with a delegation token (``tokenauth=true``)

    def evaluate(self, token: bytes) -> bytes:
        raise NotImplementedError


class PlainServer(SaslServer):
    """SASL/PLAIN: one token ``authzid NUL username NUL password`` checked against the JAAS users."""

    mechanism_name = PLAIN

    def __init__(self, authenticate: Callable[[str, str], bool]) -> None:
        super().__init__()
        self._authenticate = authenticate

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Unexpected challenge in Sasl server state COMPLETE")
        try:
            tokens = token.decode("utf-8").split("\0")
        except UnicodeDecodeError:
            raise SaslError("Invalid SASL/PLAIN response: not UTF-8") from None
        if len(tokens) != 3:
            raise SaslError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, username, password = tokens
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        if not self._authenticate(username, password):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""
