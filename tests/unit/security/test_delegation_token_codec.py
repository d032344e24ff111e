"""Delegation tokens' pure parts: the znode format Kafka writes, and SCRAM's tokenauth login."""

from __future__ import annotations

import base64
import json

import pytest

from broker.handlers.delegation_tokens import create_body, describe_body
from broker.security.principal import KafkaPrincipal
from broker.security.sasl_mechanism import SaslError
from broker.security.scram import SCRAM_SHA_256, ScramClient, ScramCredential, ScramServer
from coordination.zk_delegation_tokens import TokenInformation, decode_token, encode_token
from protocol.errors import Errors
from protocol.messages import DescribeDelegationTokenResponse

KAFKA_ZNODE = (b'{"owner":"User%3Aadmin","renewers":["User%3Abob"],"tokenRequester":"User%3Aadmin",'
               b'"maxTimestamp":1800000000000,"expiryTimestamp":1700086400000,"tokenId":"fMF9sbb_TjqwAEusqQ0usg",'
               b'"version":3,"issueTimestamp":1700000000000}')


def test_the_znode_is_kafkas_json() -> None:
    token = decode_token("/delegation_token/tokens/x", KAFKA_ZNODE)
    assert token == TokenInformation("fMF9sbb_TjqwAEusqQ0usg", "User:admin", "User:admin", ["User:bob"],
                                     1700000000000, 1800000000000, 1700086400000)
    assert json.loads(encode_token(token)) == json.loads(KAFKA_ZNODE)
    version_2 = json.loads(KAFKA_ZNODE)
    version_2.update(version=2, tokenRequester=None)
    assert decode_token("/t", json.dumps(version_2).encode()).token_requester == "User:admin"  # the owner, as Kafka


def _client_first(token_id: str, extensions: str) -> bytes:
    return f"n,,n={token_id},r=clientnonce{extensions}".encode()


def test_scram_with_tokenauth_logs_in_as_the_tokens_owner() -> None:
    digest = base64.b64encode(b"\x01" * 64).decode()
    credential = ScramCredential.from_password(SCRAM_SHA_256, digest)
    tokens = {"token-1": ("User:alice", 1_900_000_000_000, credential)}
    server = ScramServer(SCRAM_SHA_256, lambda user: None, tokens.get)
    client = ScramClient(SCRAM_SHA_256, "token-1", digest)
    first = client.first_message().decode()
    server_first = server.evaluate(f"{first},tokenauth=true".encode())
    # the client's proof covers its first message as sent, extensions included
    client._first_bare += ",tokenauth=true"  # noqa: SLF001 - a test drives the client with an extension
    client.verify_final(server.evaluate(client.final_message(server_first)))
    assert (server.complete, server.authorization_id, server.token_authenticated,
            server.credential_expiration_ms) == (True, "alice", True, 1_900_000_000_000)
    with pytest.raises(SaslError, match="Token Authentication failed: Invalid tokenId : token-2"):
        ScramServer(SCRAM_SHA_256, lambda user: None, tokens.get).evaluate(_client_first("token-2", ",tokenauth=true"))
    with pytest.raises(SaslError, match="Invalid user credentials"):  # without the extension: a user named so
        ScramServer(SCRAM_SHA_256, lambda user: None, tokens.get).evaluate(_client_first("token-1", ""))


def test_answers_encode_at_every_version() -> None:
    """The requester fields exist from v3 only: older answers leave them out (found by the
    request property test, which sends every version)."""
    token = decode_token("/t", KAFKA_ZNODE)
    owner = KafkaPrincipal("User", "admin")
    for version in range(4):
        create_body(version, Errors.NONE, owner, owner, token, b"hmac").encode(version)
        create_body(version, Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, owner, owner).encode(version)
        decoded = DescribeDelegationTokenResponse.decode(
            describe_body(version, Errors.NONE, [(token, b"hmac")]).encode(version), version)
        assert decoded.tokens[0].token_id == token.token_id
        assert decoded.tokens[0].token_requester_principal_name == ("admin" if version >= 3 else "")
