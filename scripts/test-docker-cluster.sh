#!/usr/bin/env bash
# The Docker cluster test: brings deploy/docker-compose.cluster.yml up (three
# nodes, one metadata quorum), waits until all three are healthy, checks that
# Metadata names the three brokers at their host ports, produces and consumes
# through one node and sees the topic from another, kills the first node (the
# one that formed the quorum) and checks that a new topic is still auto-created
# and seen through the other two, then starts it again and checks that it
# rejoins and sees both topics; then creates a topic with three replicas
# (min.insync.replicas 2), kills the container that leads it, produces on with
# acks=all and reads every record back through the survivors, and sees the ISR
# heal once the container is back. Prints the time from `up` to all healthy and
# from the restart to healthy.
#
# Run by scripts/test-docker.sh, which passes the image it built in
# SLUICE_IMAGE; run alone, it builds the image with the cluster compose file.
# Skipped, with a message, when no Docker engine or compose is available.
set -euo pipefail
cd "$(dirname "$0")/.."

skip() {
    echo "==> docker cluster test SKIPPED: $*"
    exit 0
}
command -v docker >/dev/null 2>&1 || skip "no docker command"
docker info >/dev/null 2>&1 || skip "no Docker engine answers"
if docker compose version >/dev/null 2>&1; then
    compose_cmd=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
    compose_cmd=(docker-compose)
else
    skip "neither 'docker compose' nor docker-compose is installed"
fi
command -v kcat >/dev/null 2>&1 || scripts/install-test-deps.sh

# The host ports of the three HOST listeners: the compose file's defaults
# unless something already holds them.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ports=()
for default in 19092 19192 19292; do
    port=$default
    if ! port_free "$port"; then
        port=$(free_port)
        while [[ " ${ports[*]} " == *" $port "* ]]; do port=$(free_port); done
        echo "==> port $default is taken on this host; using $port"
    fi
    ports+=("$port")
done
export SLUICE_CLUSTER_HOST_PORT_1=${ports[0]} SLUICE_CLUSTER_HOST_PORT_2=${ports[1]} \
    SLUICE_CLUSTER_HOST_PORT_3=${ports[2]}

own_image=
if [ -z "${SLUICE_IMAGE:-}" ]; then
    export SLUICE_IMAGE="sluice:test-cluster-$$"
    own_image=1
fi

project="sluice-cluster-test-$$"
compose() {
    "${compose_cmd[@]}" -p "$project" -f deploy/docker-compose.cluster.yml "$@"
}
cleanup() {
    local status=$?
    if [ "$status" -ne 0 ]; then
        echo "==> docker cluster test FAILED; broker logs:"
        compose logs --no-color --tail=40 2>/dev/null || true
    fi
    compose down -v --remove-orphans >/dev/null 2>&1 || true
    if [ -n "$own_image" ]; then
        docker image rm "$SLUICE_IMAGE" >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT
fail() {
    echo "docker cluster test: $*" >&2
    exit 1
}
node() { echo "localhost:${ports[$(($1 - 1))]}"; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

if ! docker image inspect "$SLUICE_IMAGE" >/dev/null 2>&1; then
    echo "==> docker cluster test: image"
    scripts/docker-rust-base.sh
    compose build --quiet >/dev/null 2>&1 || compose build
fi

# Waits (bounded) until every named service is healthy.
wait_healthy() {
    local deadline=$(( $(now_ms) + 120000 )) service id status all
    while :; do
        all=1
        for service in "$@"; do
            id=$(compose ps -q "$service" 2>/dev/null || true)
            status=$(docker inspect -f '{{.State.Health.Status}}' "$id" 2>/dev/null || echo missing)
            [ "$status" = healthy ] || { all=; break; }
        done
        [ -n "$all" ] && return 0
        [ "$(now_ms)" -lt "$deadline" ] || fail "$service did not turn healthy within 120 s (last status: $status)"
        sleep 0.1
    done
}
# Metadata through a node, with a bound so that a hung request fails the test.
metadata() { timeout 20 kcat -b "$(node "$1")" -m 10 -L 2>&1 || true; }
# Waits (bounded) until `metadata N` matches every given pattern.
wait_metadata() {
    local through=$1 what=$2 listing pattern ok
    shift 2
    for _ in $(seq 1 60); do
        listing=$(metadata "$through")
        ok=1
        for pattern in "$@"; do
            # A here-string, not `echo |`: grep -q leaving early would kill
            # the echo with SIGPIPE, which pipefail counts as a failure.
            grep -qE "$pattern" <<<"$listing" || { ok=; break; }
        done
        [ -n "$ok" ] && return 0
        sleep 0.5
    done
    echo "$listing" | sed 's/^/    /' >&2
    fail "metadata through node $through never showed $what"
}
# Produces 100 records to a new topic through a node and reads them back.
produce_consume() {
    local through=$1 topic=$2 got
    seq 1 100 | sed "s/^/$topic-/" \
        | timeout 60 kcat -b "$(node "$through")" -P -t "$topic" -X acks=all -X message.timeout.ms=30000 \
        || fail "producing to $topic through node $through failed"
    got=$(timeout 60 kcat -b "$(node "$through")" -C -t "$topic" -o beginning -e -q | grep -c "^$topic-" || true)
    [ "$got" -eq 100 ] || fail "consumer through node $through read $got of 100 records of $topic"
}

echo "==> docker cluster test: up"
started=$(now_ms)
compose up -d >/dev/null 2>&1 || compose up -d
wait_healthy sluice-1 sluice-2 sluice-3
healthy_ms=$(( $(now_ms) - started ))
echo "    all three healthy ${healthy_ms} ms after 'up'"

echo "==> docker cluster test: metadata names the three brokers at their host ports"
wait_metadata 1 "brokers 1, 2 and 3" \
    "^ *3 brokers:" \
    "broker 1 at $(node 1)" "broker 2 at $(node 2)" "broker 3 at $(node 3)"

echo "==> docker cluster test: produce and consume through node 2, list through node 3"
produce_consume 2 cluster-test-a
wait_metadata 3 "topic cluster-test-a" 'topic "cluster-test-a" with 1 partitions'

echo "==> docker cluster test: kill sluice-1 (it formed the quorum)"
compose kill sluice-1 >/dev/null 2>&1
killed=$(now_ms)
# A new topic goes on live brokers only, so wait until node 1's session expired.
wait_metadata 2 "node 1 fenced" "^ *2 brokers:"
echo "    node 1 dropped from Metadata $(( $(now_ms) - killed )) ms after the kill"
produce_consume 2 cluster-test-b
wait_metadata 3 "topic cluster-test-b" 'topic "cluster-test-b" with 1 partitions'

echo "==> docker cluster test: start sluice-1 again"
started=$(now_ms)
compose start sluice-1 >/dev/null 2>&1
wait_healthy sluice-1
restart_ms=$(( $(now_ms) - started ))
echo "    healthy again ${restart_ms} ms after 'start'"
wait_metadata 1 "both topics and three brokers" \
    "^ *3 brokers:" \
    'topic "cluster-test-a" with 1 partitions' 'topic "cluster-test-b" with 1 partitions'
# Every topic's records are still there, whichever node leads it.
for topic in cluster-test-a cluster-test-b; do
    for _ in $(seq 1 10); do
        got=$(timeout 20 kcat -b "$(node 1)" -C -t "$topic" -o beginning -e -q 2>/dev/null | grep -c "^$topic-" || true)
        [ "$got" -eq 100 ] && break
        sleep 1
    done
    [ "$got" -eq 100 ] || fail "after the restart, $topic read through node 1 gives $got of 100 records"
done

echo "==> docker cluster test: a topic with three replicas survives the kill of its leader"
timeout 60 target/python-venv/bin/python - "$(node 2)" <<'PY' || fail "creating the replicated topic failed"
import sys
from kafka.admin import KafkaAdminClient, NewTopic
admin = KafkaAdminClient(bootstrap_servers=sys.argv[1], request_timeout_ms=30000)
admin.create_topics([NewTopic("cluster-test-r", 1, 3, topic_configs={"min.insync.replicas": "2"})])
PY
isr_full='partition 0, leader [0-9]+, replicas: [0-9],[0-9],[0-9], isrs: [0-9],[0-9],[0-9]'
wait_metadata 2 "cluster-test-r with three in-sync replicas" "$isr_full"
produce_consume 2 cluster-test-r
leader=$(metadata 2 | sed -n '/topic "cluster-test-r"/,/topic/ s/.*partition 0, leader \([0-9]*\),.*/\1/p' | head -1)
[ -n "$leader" ] || fail "no leader of cluster-test-r in metadata"
survivor=$(( leader % 3 + 1 ))
echo "    killing sluice-$leader, the leader of cluster-test-r"
compose kill "sluice-$leader" >/dev/null 2>&1
seq 101 200 | sed "s/^/cluster-test-r-/" \
    | timeout 90 kcat -b "$(node "$survivor")" -P -t cluster-test-r -X acks=all -X message.timeout.ms=60000 \
    || fail "producing to cluster-test-r after its leader died failed"
got=$(timeout 60 kcat -b "$(node "$survivor")" -C -t cluster-test-r -o beginning -e -q | grep -c "^cluster-test-r-" || true)
[ "$got" -eq 200 ] || fail "after the leader's kill, cluster-test-r gives $got of 200 records"
compose start "sluice-$leader" >/dev/null 2>&1
wait_healthy "sluice-$leader"
wait_metadata "$survivor" "the ISR of cluster-test-r healed" "$isr_full"

echo "==> docker cluster test passed"
echo "    up to all three healthy: ${healthy_ms} ms (restart of sluice-1 to healthy: ${restart_ms} ms)"
