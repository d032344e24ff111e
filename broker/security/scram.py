"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka implements it (ScramFormatter, ScramMessages,
ScramSaslServer, ScramSaslClient, ScramCredentialUtils). Pure: no I/O.

Credentials are stored, as in Kafka, as ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``
under the mechanism's name in the user's entity config.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from broker.security.sasl_mechanism import SaslAuthenticationError, SaslError, SaslServer


@dataclass(frozen=True)
class ScramMechanism:
    mechanism_name: str
    hash_name: str
    type_code: int  # the ``Mechanism`` byte of Alter/DescribeUserScramCredentials
    min_iterations: int = 4096

    def digest(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
SCRAM_MECHANISMS = {m.mechanism_name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
SCRAM_BY_TYPE = {m.type_code: m for m in SCRAM_MECHANISMS.values()}
MAX_ITERATIONS = 16384  # what AlterUserScramCredentials accepts


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: ScramMechanism, salt: bytes, salted_password: bytes,
                             iterations: int) -> ScramCredential:
        client_key = mechanism.hmac(salted_password, b"Client Key")
        return cls(salt, mechanism.digest(client_key), mechanism.hmac(salted_password, b"Server Key"), iterations)

    @classmethod
    def from_password(cls, mechanism: ScramMechanism, password: str, iterations: int = 4096,
                      salt: bytes | None = None) -> ScramCredential:
        salt = salt if salt is not None else secrets.token_bytes(32)
        return cls.from_salted_password(mechanism, salt, mechanism.salted_password(password, salt, iterations),
                                        iterations)

    def to_config_value(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_config_value(cls, text: str) -> ScramCredential:
        """ScramCredentialUtils.credentialFromString; ValueError when malformed."""
        props: dict[str, str] = {}
        for token in text.split(","):
            key, sep, value = token.partition("=")
            if not sep or not key:
                raise ValueError(f"Credentials not valid: {text}")
            props[key] = value
        if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
            raise ValueError(f"Credentials not valid: {text}")
        try:
            return cls(base64.b64decode(props["salt"], validate=True),
                       base64.b64decode(props["stored_key"], validate=True),
                       base64.b64decode(props["server_key"], validate=True), int(props["iterations"]))
        except (binascii.Error, ValueError):
            raise ValueError(f"Credentials not valid: {text}") from None


# --- messages (ScramMessages) ---------------------------------------------------------------------

_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_B64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
                           rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})")
_SERVER_FIRST = re.compile(rf"(?:m={_VALUE},)?r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_B64}),i=(?P<iterations>[0-9]+)"
                           rf"{_EXTENSIONS}")
_CLIENT_FINAL = re.compile(rf"c=(?P<channel>{_B64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_B64})")
_SERVER_FINAL = re.compile(rf"(?:e=(?P<error>[\x01-\x2b\x2d-\x3c\x3e-\x7f]+))|(?:v=(?P<signature>{_B64})){_EXTENSIONS}")


def _username(sasl_name: str) -> str:
    return sasl_name.replace("=2C", ",").replace("=3D", "=")


def _sasl_name(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def _match(pattern: re.Pattern[str], token: bytes, what: str) -> re.Match[str]:
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError(f"Invalid SCRAM {what} format") from None
    match = pattern.fullmatch(text)
    if match is None:
        raise SaslError(f"Invalid SCRAM {what} format")
    return match


CredentialLookup = Callable[[str], "ScramCredential | None"]
# A delegation token's login: token id -> (owner principal, token expiry ms, SCRAM credential of its HMAC)
TokenLookup = Callable[[str], "tuple[str, int, ScramCredential] | None"]


class ScramServer(SaslServer):
    """The broker's side of one SCRAM exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: ScramMechanism, credentials: CredentialLookup,
                 tokens: TokenLookup | None = None) -> None:
        super().__init__()
        self.mechanism = mechanism
        self.mechanism_name = mechanism.mechanism_name
        self._credentials = credentials
        self._tokens = tokens
        self._state = "RECEIVE_CLIENT_FIRST_MESSAGE"
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._state == "RECEIVE_CLIENT_FIRST_MESSAGE":
                return self._client_first(token)
            if self._state == "RECEIVE_CLIENT_FINAL_MESSAGE":
                return self._client_final(token)
            raise SaslAuthenticationError(f"Unexpected challenge in Sasl server state {self._state}")
        except SaslError:
            self._state, self._credential = "FAILED", None
            raise

    def _client_first(self, token: bytes) -> bytes:
        match = _match(_CLIENT_FIRST, token, "client first message")
        username = _username(match["saslname"])
        extensions = dict(item.partition("=")[::2] for item in match["extensions"].split(",")[1:])
        if extensions.get("tokenauth", "").lower() == "true":  # Kafka's ScramExtensions.tokenAuthenticated
            found = self._tokens(username) if self._tokens is not None else None
            if found is None:
                raise SaslError(f"Token Authentication failed: Invalid tokenId : {username}")
            owner, expiry_ms, credential = found
            authorization_id = owner.partition(":")[2]
            self.token_authenticated, self.credential_expiration_ms = True, expiry_ms
        else:
            credential = self._credentials(username)
            if credential is None:
                raise SaslError("Authentication failed: Invalid user credentials")
            authorization_id = username
        if match["authzid"] and match["authzid"] != authorization_id:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        if credential.iterations < self.mechanism.min_iterations:
            raise SaslError(f"Iterations {credential.iterations} is less than the minimum "
                            f"{self.mechanism.min_iterations} for {self.mechanism_name}")
        self.authorization_id = authorization_id
        self._credential = credential
        self._nonce = match["nonce"] + secrets.token_urlsafe(24)
        self._client_first_bare = f"n={match['saslname']},r={match['nonce']}{match['extensions']}"
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "RECEIVE_CLIENT_FINAL_MESSAGE"
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        match = _match(_CLIENT_FINAL, token, "client final message")
        # Kafka 3.9 checks endsWith, not equality: librdkafka before 2.6.1 sends its own nonce
        # again in front of the server's (CVE-2024-56128 follow-up in Kafka 3.8.1).
        if not match["nonce"].endswith(self._nonce):
            raise SaslError("Invalid client nonce in the final client message.")
        credential = self._credential
        assert credential is not None
        without_proof = f"c={match['channel']},r={match['nonce']}"
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = self.mechanism.hmac(credential.stored_key, auth_message)
        proof = base64.b64decode(match["proof"])
        if len(proof) != len(client_signature):
            raise SaslError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        if not hmac.compare_digest(self.mechanism.digest(client_key), credential.stored_key):
            raise SaslError("Invalid client credentials")
        signature = self.mechanism.hmac(credential.server_key, auth_message)
        self._credential = None
        self._state = "COMPLETE"
        self.complete = True
        return f"v={base64.b64encode(signature).decode()}".encode()


class ScramClient:
    """This broker logging in to another with SCRAM (inter-broker), as Kafka's ScramSaslClient."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._password = password
        self._nonce = secrets.token_urlsafe(24)
        self._first_bare = f"n={_sasl_name(username)},r={self._nonce}"
        self._server_signature = b""

    def first_message(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final_message(self, server_first: bytes) -> bytes:
        match = _match(_SERVER_FIRST, server_first, "server first message")
        if not match["nonce"].startswith(self._nonce):
            raise SaslError("Invalid server nonce: does not start with client nonce")
        iterations = int(match["iterations"])
        if iterations < self.mechanism.min_iterations:
            raise SaslError(f"Requested iterations {iterations} is less than the minimum "
                            f"{self.mechanism.min_iterations} for {self.mechanism.mechanism_name}")
        salted = self.mechanism.salted_password(self._password, base64.b64decode(match["salt"]), iterations)
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={match['nonce']}"
        auth_message = f"{self._first_bare},{server_first.decode()},{without_proof}".encode()
        client_key = self.mechanism.hmac(salted, b"Client Key")
        signature = self.mechanism.hmac(self.mechanism.digest(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = self.mechanism.hmac(self.mechanism.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_final(self, server_final: bytes) -> None:
        match = _match(_SERVER_FINAL, server_final, "server final message")
        if match["error"]:
            raise SaslError(f"Sasl authentication using {self.mechanism.mechanism_name} failed with error: "
                            f"{match['error']}")
        if not hmac.compare_digest(base64.b64decode(match["signature"]), self._server_signature):
            raise SaslError("Invalid server signature in server final message")
