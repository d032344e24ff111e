#!/usr/bin/env bash
# Start a broker on localhost:9092 with its own ZooKeeper, like Kafka's quickstart:
#   scripts/start.sh [--override key=value ...]
# ZooKeeper (Debian's package) keeps its data in ./data/zookeeper and listens on port 2181; it runs
# in the background and is stopped when the broker exits. The broker runs in the foreground with
# config/server.properties (logs in ./data/kafka-logs); Ctrl-C or SIGTERM stops it cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh

ZK_PORT=2181
ZK_DIR="$PWD/data/zookeeper"
PYTHON=python3
[ -x .venv/bin/python ] && PYTHON=.venv/bin/python

zk_ok() {
    { exec 3<>"/dev/tcp/127.0.0.1/$ZK_PORT"; } 2>/dev/null || return 1
    printf 'ruok' >&3
    local reply
    reply=$(timeout 2 cat <&3 || true)
    exec 3<&- 3>&-
    [ "$reply" = "imok" ]
}

zk_pid=""
broker_pid=""
cleanup() {
    if [ -n "$broker_pid" ] && kill -0 "$broker_pid" 2>/dev/null; then
        kill -TERM "$broker_pid" 2>/dev/null || true
        wait "$broker_pid" 2>/dev/null || true
    fi
    if [ -n "$zk_pid" ]; then
        echo "start.sh: stopping ZooKeeper (pid $zk_pid)"
        kill -TERM "$zk_pid" 2>/dev/null || true
        wait "$zk_pid" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if zk_ok; then
    echo "start.sh: using the ZooKeeper already serving on port $ZK_PORT"
else
    mkdir -p "$ZK_DIR/data"
    cat > "$ZK_DIR/zoo.cfg" <<CFG
tickTime=2000
dataDir=$ZK_DIR/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat
CFG
    classpath=/usr/share/java/zookeeper.jar
    [ -f /usr/share/java/slf4j-simple.jar ] && classpath="$classpath:/usr/share/java/slf4j-simple.jar"
    # Its own session: Ctrl-C (or a SIGTERM to this process group) must reach only the broker,
    # which needs ZooKeeper for its controlled shutdown; ZooKeeper is stopped after it.
    setsid java -Xmx256m -cp "$classpath" org.apache.zookeeper.server.quorum.QuorumPeerMain "$ZK_DIR/zoo.cfg" \
        >>"$ZK_DIR/zookeeper.log" 2>&1 < /dev/null &
    zk_pid=$!
    echo "start.sh: starting ZooKeeper on 127.0.0.1:$ZK_PORT (pid $zk_pid, log $ZK_DIR/zookeeper.log)"
    for _ in $(seq 1 150); do
        zk_ok && break
        kill -0 "$zk_pid" 2>/dev/null || { echo "start.sh: ZooKeeper exited; see $ZK_DIR/zookeeper.log" >&2; exit 1; }
        sleep 0.2
    done
    zk_ok || { echo "start.sh: ZooKeeper did not start; see $ZK_DIR/zookeeper.log" >&2; exit 1; }
fi

echo "start.sh: starting the broker on localhost:9092. Connect with:"
echo "    kcat -b localhost:9092 -L"
echo "    echo hello | kcat -b localhost:9092 -P -t test && kcat -b localhost:9092 -C -t test -e"
"$PYTHON" -m broker config/server.properties "$@" &
broker_pid=$!
set +e
wait "$broker_pid"
status=$?
set -e
broker_pid=""
exit "$status"
