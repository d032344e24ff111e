"""Which JAAS login modules a listener's mechanism uses (Kafka's JaasContext.loadServerContext)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import KafkaConfig
from broker.config_defs import ConfigError
from broker.security.jaas_context import server_login_modules

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def _config(**extra: str) -> KafkaConfig:
    return KafkaConfig.from_properties({"zookeeper.connect": "localhost:2181", "log.dirs": "/tmp/x",
                                        "listeners": "SASL_PLAINTEXT://:9092,INTERNAL://:9093",
                                        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                                                          "INTERNAL:SASL_PLAINTEXT",
                                        "inter.broker.listener.name": "INTERNAL", **extra})


def test_the_config_then_the_listener_context_then_kafka_server(tmp_path: Path) -> None:
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(f'internal.KafkaServer {{ {PLAIN} required user_internal="i"; }};\n'
                    f'KafkaServer {{ {SCRAM} required username="s" password="p";\n'
                    f'  {PLAIN} required user_alice="a"; }};')
    environ = {"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"}
    modules, source = server_login_modules(_config(), "INTERNAL", "PLAIN", environ)
    assert (modules[0].users(), source) == ({"internal": "i"}, f"the internal.KafkaServer context of {jaas}")
    modules, _ = server_login_modules(_config(), "SASL_PLAINTEXT", "PLAIN", environ)
    assert [m.users() for m in modules] == [{"alice": "a"}]  # the mechanism's own module
    modules, _ = server_login_modules(_config(), "SASL_PLAINTEXT", "SCRAM-SHA-256", environ)
    assert modules[0].options == {"username": "s", "password": "p"}
    configured = _config(**{"listener.name.sasl_plaintext.plain.sasl.jaas.config": f'{PLAIN} required user_bob="b";'})
    modules, source = server_login_modules(configured, "SASL_PLAINTEXT", "PLAIN", environ)
    assert (modules[0].users(), source) == ({"bob": "b"}, "listener.name.sasl_plaintext.plain.sasl.jaas.config")
    assert server_login_modules(_config(), "SASL_PLAINTEXT", "PLAIN", {}) is None


def test_a_jaas_file_that_cannot_be_read_stops_the_broker(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="java.security.auth.login.config: the JAAS file .* cannot be read"):
        server_login_modules(_config(), "SASL_PLAINTEXT", "PLAIN",
                             {"KAFKA_OPTS": f"-Djava.security.auth.login.config={tmp_path / 'missing.conf'}"})
