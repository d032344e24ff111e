"""SCRAM against RFC 7677's test vector, Kafka's credential format, JAAS parsing and
ssl.principal.mapping.rules."""
from __future__ import annotations

import pytest

from broker.security.jaas import JaasConfigError, parse_jaas_config
from broker.security.principal import NoMatchingRule, SslPrincipalMapper
from broker.security.sasl_mechanism import PlainServer, SaslAuthenticationError, SaslError
from broker.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramClient, ScramCredential, ScramServer


def test_scram_sha_256_matches_rfc_7677() -> None:
    client = ScramClient(SCRAM_SHA_256, "user", "pencil")
    client._nonce = "rOprNGfwEbeRWgbNEkqO"
    client._first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.first_message() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert client.final_message(server_first) == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                                                  b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client.verify_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_scram_exchange_and_stored_format(mechanism) -> None:
    credential = ScramCredential.from_password(mechanism, "secret", 4096)
    stored = credential.to_config_value()
    assert stored.startswith("salt=") and ",stored_key=" in stored and stored.endswith(",iterations=4096")
    assert ScramCredential.from_config_value(stored) == credential

    server = ScramServer(mechanism, {"al,ice": credential}.get)
    client = ScramClient(mechanism, "al,ice", "secret")
    client.verify_final(server.evaluate(client.final_message(server.evaluate(client.first_message()))))
    assert server.complete and server.authorization_id == "al,ice"

    wrong = ScramServer(mechanism, {"bob": credential}.get)
    impostor = ScramClient(mechanism, "bob", "guess")
    with pytest.raises(SaslError):
        wrong.evaluate(impostor.final_message(wrong.evaluate(impostor.first_message())))
    with pytest.raises(SaslError):
        ScramServer(mechanism, {}.get).evaluate(ScramClient(mechanism, "nobody", "x").first_message())
    with pytest.raises(ValueError):
        ScramCredential.from_config_value("salt=AA==,iterations=4096")


def test_plain_checks_username_password_and_authzid() -> None:
    server = PlainServer(lambda user, password: (user, password) == ("bob", "pw"))
    assert server.evaluate(b"\0bob\0pw") == b"" and server.authorization_id == "bob"
    with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
        PlainServer(lambda u, p: False).evaluate(b"\0bob\0nope")
    with pytest.raises(SaslAuthenticationError, match="authorization id"):
        PlainServer(lambda u, p: True).evaluate(b"eve\0bob\0pw")
    with pytest.raises(SaslError, match="expected 3 tokens"):
        PlainServer(lambda u, p: True).evaluate(b"bob")


def test_jaas_config() -> None:
    modules = parse_jaas_config('org.apache.kafka.common.security.plain.PlainLoginModule required '
                                'username="admin" password="a\\"b" user_admin="x" user_bob="y";')
    assert modules[0].options["password"] == 'a"b'
    assert modules[0].users() == {"admin": "x", "bob": "y"}
    with pytest.raises(JaasConfigError):
        parse_jaas_config('org.apache.kafka.common.security.plain.PlainLoginModule required username="a"')


def test_ssl_principal_mapping_rules() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
                                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
                                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,DEFAULT")
    assert mapper.name("CN=kafka1,OU=ServiceUsers,O=Org,C=US") == "kafka1"
    assert mapper.name("CN=Duke,OU=JavaSoft,O=Sun,L=Palo Alto,ST=CA,C=US") == "duke@javasoft"
    assert mapper.name("OU=x,CN=admin") == "ADMIN"
    assert mapper.name("O=none") == "O=none"
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/").name("O=x")
