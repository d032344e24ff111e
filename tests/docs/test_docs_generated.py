"""The generated parts of docs/ match the code and the benchmarks' JSON they come from."""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _gen_docs():  # scripts/ is not a package
    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_sections_are_current(capsys) -> None:
    gen_docs = _gen_docs()
    assert gen_docs.main(["--check"]) == 0, capsys.readouterr().err


def test_configuration_page_lists_every_key() -> None:
    from broker.config_defs import CONFIG_KEYS

    page = (REPO / "docs" / "configuration.md").read_text()
    assert [key for key in CONFIG_KEYS if f"`{key}`" not in page] == []


def test_api_matrix_agrees_with_what_api_versions_advertises() -> None:
    gen_docs = _gen_docs()
    served = gen_docs.served_ranges()
    page = (REPO / "docs" / "compatibility.md").read_text()
    for key, (low, high) in served.items():
        text = str(low) if low == high else f"{low}-{high}"
        assert re.search(rf"^\| {key} \| \w+ \| {text} \|", page, re.M), (key, text)


def test_every_benchmark_json_has_its_chart_and_command() -> None:
    data = sorted((REPO / "docs" / "data" / "bench").glob("*.json"))
    assert data
    for path in data:
        document = json.loads(path.read_text())
        assert document["command"].startswith("python bench/"), path
        assert document["machine"]["cores"] and document["rows"], path
        assert (REPO / "docs" / "img" / "bench" / f"{path.stem}.png").is_file(), path


def test_charts_are_drawn_from_the_json(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("charts", REPO / "bench" / "charts.py")
    charts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(charts)
    source = REPO / "docs" / "data" / "bench" / "vs_kafka.json"
    assert charts.main([str(source), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "vs_kafka.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_kafka_42_ranges_are_kios() -> None:
    """The copy of Kafka 4.2's ranges the matrix is built from is what kio's Kafka 4.2 classes say."""
    gen_docs = _gen_docs()
    from_kio = gen_docs.kio_ranges()
    assert from_kio is not None, "kio is a test dependency (pyproject.toml)"
    kept = json.loads((REPO / "docs" / "data" / "kafka-api-versions.json").read_text())
    assert {int(key): row["4.2"] for key, row in kept.items() if row["4.2"] != "none"} == from_kio
    assert from_kio[0] == "3-13" and from_kio[1] == "4-18"  # Produce and Fetch in Kafka 4.2


def test_fault_results_have_their_chart_and_machine() -> None:
    data = sorted((REPO / "docs" / "data" / "faults").glob("*-default.json"))
    assert [path.name for path in data] == ["kafka-default.json", "ours-default.json"]
    for path in data:
        document = json.loads(path.read_text())
        assert document["cells"] and "cores" in document["machine"], path
    assert (REPO / "docs" / "img" / "faults" / "default.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
