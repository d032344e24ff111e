#!/usr/bin/env bash
# Installs everything the project needs on a fresh Debian machine, idempotently:
# Debian packages (ZooKeeper, kcat, a JRE for ZooKeeper, iptables, Prometheus and promtool) and a virtualenv in .venv
# with the project and its test dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
[ -x /usr/share/zookeeper/bin/zkServer.sh ] || need_apt+=(zookeeper)
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
command -v java >/dev/null 2>&1 || need_apt+=(default-jre-headless)
command -v iptables >/dev/null 2>&1 || need_apt+=(iptables)  # tests/faults: partitions, loss, delays
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)  # tests/integration/metrics: alert rules, a real Prometheus
if [ ${#need_apt[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "bootstrap: apt-get install ${need_apt[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
stamp=.venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)
if [ ! -f "$stamp" ]; then
    echo "bootstrap: pip install -e .[test,spark]"
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -e '.[test,spark]'
    rm -f .venv/.installed-*
    touch "$stamp"
fi

# The project's own bytecode, ahead of time: hundreds of Python processes (brokers, Spark's workers,
# the jobs) start from this checkout, and where PYTHONDONTWRITEBYTECODE is set each would compile
# every module from source again (0.3 CPU-seconds of a broker's 0.75-second start). Only stale
# files are compiled; the caches are in .gitignore.
.venv/bin/python -m compileall -q -j 0 broker protocol storage coordination spark_jobs bench tests scripts >/dev/null
