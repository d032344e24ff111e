"""KafkaConfig: properties syntax, Kafka's defaults, validation, overrides and topic defaults."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from broker.config import EndPoint, KafkaConfig, parse_override, parse_properties
from broker.config_defs import CONFIG_KEYS, TOPIC_CONFIG_SYNONYMS, ConfigError, ConfigType, parse_http_listener

ZK = {"zookeeper.connect": "localhost:2181"}
REPO = Path(__file__).resolve().parents[3]


def config(**props: object) -> KafkaConfig:
    return KafkaConfig({**ZK, **{k.replace("_", "."): v for k, v in props.items()}})


# --- properties syntax ----------------------------------------------------------------------------

def test_properties_separators_comments_and_whitespace():
    text = (
        "# a comment\n"
        "   ! another comment\n"
        "\n"
        "a=1\n"
        "b = 2\n"
        "c:3\n"
        "d 4\n"
        "  e\t=\t  five  \n"
        "f=\n"
        "g\n"
        "h==x\n"
        "i=a=b\n"
    )
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "five  ", "f": "", "g": "",
                                      "h": "=x", "i": "a=b"}


def test_properties_line_continuations_and_line_endings():
    text = "listeners=PLAINTEXT://:9092,\\\n    CONTROLLER://:9093\r\nx=1\ry=2\n# comment \\\nz=3\n"
    assert parse_properties(text) == {"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "x": "1", "y": "2", "z": "3"}


def test_properties_even_backslashes_do_not_continue_and_trailing_continuation_ends():
    assert parse_properties("a=x\\\\\nb=y\nc=last\\") == {"a": "x\\", "b": "y", "c": "last"}


def test_properties_escapes():
    text = "key\\ with\\ spaces=v\\tal\\u00e9\\n\\=\\:\\q\nk\\=eq=1\n"
    assert parse_properties(text) == {"key with spaces": "v\talé\n=:q", "k=eq": "1"}


def test_properties_malformed_unicode_escape_names_the_key():
    with pytest.raises(ConfigError, match="broker.rack"):
        parse_properties("broker.rack=\\u12G4\n")


def test_later_keys_win():
    assert parse_properties("a=1\na=2\n") == {"a": "2"}


def test_overrides_win_over_the_file(tmp_path: Path):
    path = tmp_path / "server.properties"
    path.write_text("zookeeper.connect=zk:2181\nbroker.id=1\nnum.io.threads=4\n")
    cfg = KafkaConfig.load(str(path), ["broker.id=7", "log.dirs=/a,/b"])
    assert (cfg.broker_id, cfg.num_io_threads, cfg.log_dirs) == (7, 4, ["/a", "/b"])


def test_parse_override():
    assert parse_override("a.b=c=d") == ("a.b", "c=d")
    assert parse_override("x=") == ("x", "")
    for bad in ("novalue", "=v"):
        with pytest.raises(ConfigError):
            parse_override(bad)


def test_shipped_sample_config_loads():
    cfg = KafkaConfig.load(str(REPO / "config" / "server.properties"))
    assert cfg.broker_id == 0
    assert cfg.listeners == [EndPoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT")]
    assert cfg.zookeeper_connect == "localhost:2181"
    assert all(d.startswith("./data") for d in cfg.log_dirs)
    assert cfg.get("metrics.prometheus.listener") == "http://localhost:7071"


# --- defaults -------------------------------------------------------------------------------------

def test_kafka_defaults():
    cfg = config()
    assert cfg.broker_id == -1
    assert cfg.listeners == [EndPoint("PLAINTEXT", "", 9092, "PLAINTEXT")]
    assert cfg.listener_security_protocol_map == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL",
                                                  "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}
    assert cfg.inter_broker_listener_name == "PLAINTEXT"
    assert cfg.log_dirs == ["/tmp/kafka-logs"]
    assert cfg.zookeeper_session_timeout_ms == 18000
    assert cfg.zookeeper_connection_timeout_ms == 18000
    assert (cfg.num_network_threads, cfg.num_io_threads, cfg.queued_max_requests) == (3, 8, 500)
    assert cfg.socket_request_max_bytes == 104857600
    assert (cfg.socket_send_buffer_bytes, cfg.socket_receive_buffer_bytes) == (102400, 102400)
    assert cfg.connections_max_idle_ms == 600000
    assert cfg.max_connections == cfg.max_connections_per_ip == 2**31 - 1
    assert cfg.max_connections_per_ip_overrides == {}
    assert cfg.message_max_bytes == 1048588
    assert cfg.log_segment_bytes == 1 << 30
    assert cfg.log_retention_ms == 7 * 24 * 3600 * 1000
    assert cfg.log_roll_ms == 7 * 24 * 3600 * 1000
    assert cfg.log_roll_jitter_ms == 0
    assert cfg.log_retention_bytes == -1
    assert cfg.log_retention_check_interval_ms == 300000
    assert cfg.log_index_size_max_bytes == 10 * 1024 * 1024
    assert cfg.log_index_interval_bytes == 4096
    assert cfg.log_flush_interval_messages == 2**63 - 1
    assert cfg.log_flush_interval_ms == 2**63 - 1  # falls back to log.flush.scheduler.interval.ms
    assert cfg.log_segment_delete_delay_ms == 60000
    assert cfg.log_cleanup_policy == ["delete"]
    assert cfg.log_message_timestamp_type == "CreateTime"
    assert cfg.compression_type == "producer"
    assert (cfg.num_partitions, cfg.default_replication_factor, cfg.min_insync_replicas) == (1, 1, 1)
    assert cfg.auto_create_topics_enable and cfg.delete_topic_enable
    assert not cfg.unclean_leader_election_enable
    assert (cfg.offsets_topic_num_partitions, cfg.offsets_topic_replication_factor) == (50, 3)
    assert cfg.offsets_retention_minutes == 10080
    assert (cfg.transaction_state_log_num_partitions, cfg.transaction_state_log_replication_factor,
            cfg.transaction_state_log_min_isr) == (50, 3, 2)
    assert cfg.group_initial_rebalance_delay_ms == 3000
    assert (cfg.group_min_session_timeout_ms, cfg.group_max_session_timeout_ms) == (6000, 1800000)
    assert cfg.group_max_size == 2**31 - 1
    assert (cfg.replica_fetch_max_bytes, cfg.replica_fetch_wait_max_ms, cfg.replica_fetch_min_bytes) == (1048576, 500, 1)
    assert cfg.replica_lag_time_max_ms == 30000
    assert cfg.replica_high_watermark_checkpoint_interval_ms == 5000
    assert cfg.num_replica_fetchers == 1
    assert cfg.controlled_shutdown_enable and cfg.auto_leader_rebalance_enable
    assert (cfg.leader_imbalance_per_broker_percentage, cfg.leader_imbalance_check_interval_seconds) == (10, 300)
    assert cfg.broker_rack is None
    assert (cfg.reserved_broker_max_id, cfg.broker_id_generation_enable) == (1000, True)
    assert not cfg.unstable_api_versions_enable
    assert cfg.request_timeout_ms == 30000


def test_every_key_default_has_its_declared_type():
    python_types = {ConfigType.BOOLEAN: bool, ConfigType.STRING: str, ConfigType.INT: int, ConfigType.SHORT: int,
                    ConfigType.LONG: int, ConfigType.DOUBLE: float, ConfigType.LIST: list, ConfigType.CLASS: str,
                    ConfigType.PASSWORD: str}
    for key in CONFIG_KEYS.values():
        if key.default is not None:
            assert isinstance(key.default, python_types[key.type]), key.name
            assert key.parse(key.default) == key.default, key.name


def test_values_are_typed_and_strings_trimmed():
    cfg = config(num_partitions=" 3 ", auto_create_topics_enable="FALSE", broker_rack="  r1 ",
                 log_cleanup_policy="compact , delete", log_cleaner_min_cleanable_ratio="0.25")
    assert cfg.num_partitions == 3
    assert cfg.auto_create_topics_enable is False
    assert cfg.broker_rack == "r1"
    assert cfg.log_cleanup_policy == ["compact", "delete"]
    assert cfg.get("log.cleaner.min.cleanable.ratio") == 0.25


# --- precedence -----------------------------------------------------------------------------------

def test_log_retention_precedence_ms_minutes_hours():
    assert config(log_retention_hours="1").log_retention_ms == 3600000
    assert config(log_retention_hours="1", log_retention_minutes="2").log_retention_ms == 120000
    assert config(log_retention_hours="1", log_retention_minutes="2", log_retention_ms="5").log_retention_ms == 5
    assert config(log_retention_ms="-1").log_retention_ms == -1
    assert config(log_retention_hours="-5").log_retention_ms == -1


def test_log_roll_and_jitter_precedence():
    cfg = config(log_roll_hours="2", log_roll_jitter_hours="1")
    assert (cfg.log_roll_ms, cfg.log_roll_jitter_ms) == (7200000, 3600000)
    cfg = config(log_roll_hours="2", log_roll_ms="1000", log_roll_jitter_hours="1", log_roll_jitter_ms="10")
    assert (cfg.log_roll_ms, cfg.log_roll_jitter_ms) == (1000, 10)


def test_log_dirs_wins_over_log_dir():
    assert config(log_dir="/one").log_dirs == ["/one"]
    assert config(log_dir="/one", log_dirs="/a, /b").log_dirs == ["/a", "/b"]


def test_zookeeper_connection_timeout_defaults_to_session_timeout():
    assert config(zookeeper_session_timeout_ms="6000").zookeeper_connection_timeout_ms == 6000
    assert config(zookeeper_connection_timeout_ms="100").zookeeper_connection_timeout_ms == 100


def test_topic_defaults_map_broker_keys_to_topic_keys():
    cfg = config(log_segment_bytes="1048576", log_retention_minutes="10", message_max_bytes="2000",
                 log_cleanup_policy="compact", log_preallocate="true", log_flush_interval_ms="77")
    defaults = cfg.topic_defaults()
    assert set(defaults) == set(TOPIC_CONFIG_SYNONYMS)
    assert defaults["segment.bytes"] == 1048576
    assert defaults["retention.ms"] == 600000
    assert defaults["max.message.bytes"] == 2000
    assert defaults["cleanup.policy"] == ["compact"]
    assert defaults["preallocate"] is True
    assert defaults["flush.ms"] == 77
    assert defaults["segment.index.bytes"] == 10 * 1024 * 1024
    assert defaults["file.delete.delay.ms"] == 60000
    assert defaults["message.timestamp.type"] == "CreateTime"
    assert cfg.topic_synonyms("retention.ms") == [("log.retention.minutes", 10), ("log.retention.hours", 168)]


# --- listeners ------------------------------------------------------------------------------------

def test_listeners_and_advertised_listeners():
    cfg = config(listeners="PLAINTEXT://0.0.0.0:9092,internal://[::1]:9093",
                 listener_security_protocol_map="PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                 advertised_listeners="PLAINTEXT://broker1:19092,INTERNAL://broker1:9093",
                 inter_broker_listener_name="INTERNAL")
    assert cfg.listeners == [EndPoint("PLAINTEXT", "0.0.0.0", 9092, "PLAINTEXT"),
                             EndPoint("INTERNAL", "::1", 9093, "PLAINTEXT")]
    assert cfg.advertised_listeners[0] == EndPoint("PLAINTEXT", "broker1", 19092, "PLAINTEXT")
    assert cfg.inter_broker_listener_name == "INTERNAL"
    assert cfg.listeners[1].connection_string() == "INTERNAL://[::1]:9093"


def test_advertised_listeners_default_to_listeners_with_a_host_name(monkeypatch):
    monkeypatch.setattr("broker.config.canonical_hostname", lambda: "myhost.example")
    cfg = config(listeners="PLAINTEXT://:9092")
    assert cfg.advertised_listeners == [EndPoint("PLAINTEXT", "myhost.example", 9092, "PLAINTEXT")]
    assert config(listeners="PLAINTEXT://localhost:9092").advertised_listeners[0].host == "localhost"


def test_metrics_listener_is_off_by_default_and_takes_any_interface():
    assert config().get("metrics.prometheus.listener") == ""
    assert config(**{"metrics.prometheus.listener": "http://:7071"}).get("metrics.prometheus.listener") == "http://:7071"
    assert parse_http_listener("k", "http://[::1]:0") == ("::1", 0)
    assert parse_http_listener("k", "HTTP://0.0.0.0:7071") == ("0.0.0.0", 7071)


@pytest.mark.parametrize("props, key", [
    ({"listeners": "PLAINTEXT//:9092"}, "listeners"),
    ({"listeners": "PLAINTEXT://:99999"}, "listeners"),
    ({"listeners": "FOO://:9092"}, "listeners"),
    ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "listeners"),
    ({"listeners": "PLAINTEXT://:9092,SSL://:9092"}, "listeners"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"),
    ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"),
    ({"advertised.listeners": "SSL://h:9092"}, "advertised.listeners"),
    ({"listener.security.protocol.map": "PLAINTEXT:BOGUS"}, "listener.security.protocol.map"),
    ({"listener.security.protocol.map": "PLAINTEXT"}, "listener.security.protocol.map"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"}, "inter.broker.listener.name"),
    ({"inter.broker.listener.name": "OTHER"}, "inter.broker.listener.name"),
    ({"security.inter.broker.protocol": "SSL"}, "inter.broker.listener.name"),
    ({"security.inter.broker.protocol": "NOPE"}, "security.inter.broker.protocol"),
    ({"metrics.prometheus.listener": "0.0.0.0:7071"}, "metrics.prometheus.listener"),
    ({"metrics.prometheus.listener": "https://0.0.0.0:7071"}, "metrics.prometheus.listener"),
    ({"metrics.prometheus.listener": "http://0.0.0.0:70710"}, "metrics.prometheus.listener"),
    ({"metrics.prometheus.listener": "http://0.0.0.0"}, "metrics.prometheus.listener"),
])
def test_invalid_listener_configs_name_the_key(props, key):
    with pytest.raises(ConfigError) as info:
        KafkaConfig({**ZK, **props})
    assert info.value.key == key


# --- validation -----------------------------------------------------------------------------------

@pytest.mark.parametrize("props, key", [
    ({"num.io.threads": "0"}, "num.io.threads"),
    ({"num.network.threads": "many"}, "num.network.threads"),
    ({"broker.id": "2000"}, "broker.id"),
    ({"broker.id": "-2"}, "broker.id"),
    ({"broker.id": "-1", "broker.id.generation.enable": "false"}, "broker.id"),
    ({"broker.id": "99999999999"}, "broker.id"),
    ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable"),
    ({"log.segment.bytes": "13"}, "log.segment.bytes"),
    ({"log.retention.ms": "0"}, "log.retention.ms"),
    ({"log.retention.minutes": "0"}, "log.retention.minutes"),
    ({"log.roll.ms": "0"}, "log.roll.ms"),
    ({"log.roll.hours": "0"}, "log.roll.hours"),
    ({"log.cleanup.policy": "delete,shred"}, "log.cleanup.policy"),
    ({"log.message.timestamp.type": "createtime"}, "log.message.timestamp.type"),
    ({"compression.type": "brotli"}, "compression.type"),
    ({"compression.gzip.level": "0"}, "compression.gzip.level"),
    ({"min.insync.replicas": "0"}, "min.insync.replicas"),
    ({"offsets.topic.replication.factor": "40000"}, "offsets.topic.replication.factor"),
    ({"queued.max.requests": "0"}, "queued.max.requests"),
    ({"socket.request.max.bytes": "0"}, "socket.request.max.bytes"),
    ({"log.dirs": " , "}, "log.dirs"),
    ({"replica.fetch.wait.max.ms": "40000"}, "replica.socket.timeout.ms"),
    ({"replica.fetch.wait.max.ms": "20000", "replica.lag.time.max.ms": "10000"}, "replica.fetch.wait.max.ms"),
    ({"log.cleaner.min.cleanable.ratio": "1.5"}, "log.cleaner.min.cleanable.ratio"),
    ({"process.roles": "broker"}, "process.roles"),
])
def test_invalid_values_raise_config_error_naming_the_key(props, key):
    with pytest.raises(ConfigError) as info:
        KafkaConfig({**ZK, **props})
    assert info.value.key == key
    assert key in str(info.value)


def test_zookeeper_connect_is_required():
    with pytest.raises(ConfigError, match="zookeeper.connect"):
        KafkaConfig({})


def test_unknown_keys_are_logged_and_kept(caplog):
    with caplog.at_level(logging.WARNING, logger="broker.config"):
        cfg = KafkaConfig({**ZK, "made.up.key": "1"})
    assert "made.up.key" in caplog.text
    assert cfg.originals["made.up.key"] == "1"
    with pytest.raises(ConfigError):
        cfg.get("made.up.key")


def test_max_connections_per_ip_overrides():
    cfg = config(max_connections_per_ip_overrides="127.0.0.1:5, hostA:100,::1:7")
    assert cfg.max_connections_per_ip_overrides == {"127.0.0.1": 5, "hostA": 100, "::1": 7}
    for bad in ("127.0.0.1:x", "127.0.0.1", "h:-1"):
        with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
            config(max_connections_per_ip_overrides=bad)
    with pytest.raises(ConfigError, match="max.connections.per.ip"):
        config(max_connections_per_ip="0")
    assert config(max_connections_per_ip="0", max_connections_per_ip_overrides="h:1").max_connections_per_ip == 0


# --- dynamic updates and sources ----------------------------------------------------------------

def test_update_is_validated_and_all_or_nothing():
    cfg = config(num_io_threads="4")
    assert cfg.is_set("num.io.threads") and not cfg.is_set("num.network.threads")
    assert cfg.update({"num.io.threads": "6", "log.retention.ms": "1000"}) == {"num.io.threads", "log.retention.ms"}
    assert (cfg.num_io_threads, cfg.log_retention_ms) == (6, 1000)
    with pytest.raises(ConfigError):
        cfg.update({"num.io.threads": "2", "num.network.threads": "0"})
    assert cfg.num_io_threads == 6
    assert cfg.update({"log.retention.ms": None}) == {"log.retention.ms"}
    assert cfg.log_retention_ms == 7 * 24 * 3600 * 1000
    with pytest.raises(ConfigError):
        cfg.update({"no.such.key": "1"})
