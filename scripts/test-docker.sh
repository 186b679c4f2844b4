#!/usr/bin/env bash
# The Docker deployment test: builds the image, brings deploy/docker-compose.yml
# up, waits for healthy, then produces and consumes from the host through
# localhost and from a second container on the compose network, restarts the
# broker container and checks that records and committed offsets survived,
# scrapes the metrics endpoint, and tears everything down. Prints the image
# size, the time from `up` to healthy and the idle memory of the container.
# Then runs scripts/test-docker-cluster.sh, the three-node cluster of
# deploy/docker-compose.cluster.yml, with the same image.
#
# Skipped, with a message, when no Docker engine or compose is available.
set -euo pipefail
cd "$(dirname "$0")/.."

skip() {
    echo "==> docker test SKIPPED: $*"
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
{ command -v kcat && command -v curl; } >/dev/null 2>&1 || scripts/install-test-deps.sh

# The host port for Kafka clients: 9092 unless something already holds it.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
host_port=9092
if ! port_free "$host_port"; then
    host_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    echo "==> port 9092 is taken on this host; using $host_port"
fi
metrics_port=9644
if ! port_free "$metrics_port"; then
    metrics_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
fi
export SLUICE_HOST_PORT=$host_port SLUICE_METRICS_HOST_PORT=$metrics_port
# A tag of its own, so that runs from other checkouts on the same engine do not
# swap images under each other; removed at the end (the layers are tiny).
export SLUICE_IMAGE="sluice:test-$$"

project="sluice-test-$$"
compose() {
    "${compose_cmd[@]}" -p "$project" -f deploy/docker-compose.yml -f deploy/docker-compose.example.yml "$@"
}
cleanup() {
    local status=$?
    if [ "$status" -ne 0 ] && [ -z "$single_node_done" ]; then
        echo "==> docker test FAILED; broker logs:"
        compose logs --no-color --tail=50 sluice 2>/dev/null || true
    fi
    compose down -v --remove-orphans >/dev/null 2>&1 || true
    docker image rm "$SLUICE_IMAGE" >/dev/null 2>&1 || true
    [ -z "${certs:-}" ] || rm -rf "$certs"
}
single_node_done=
trap cleanup EXIT
fail() {
    echo "docker test: $*" >&2
    exit 1
}
bootstrap="localhost:$host_port"

echo "==> docker test: images"
# The base images, made locally where no registry answers; then the image is
# built from source by compose itself, as a user's `up --build` builds it.
scripts/docker-rust-base.sh
scripts/docker-debian-base.sh
compose build --quiet >/dev/null 2>&1 || compose build
image_bytes=$(docker image inspect -f '{{.Size}}' "$SLUICE_IMAGE")

container_id() { compose ps -q sluice; }
wait_healthy() {
    local started=$1 id status
    id=$(container_id)
    for _ in $(seq 1 600); do
        status=$(docker inspect -f '{{.State.Health.Status}}' "$id" 2>/dev/null || echo missing)
        if [ "$status" = healthy ]; then
            echo $(( ($(date +%s%N) - started) / 1000000 ))
            return 0
        fi
        sleep 0.05
    done
    fail "the broker did not turn healthy within 30 s (last status: $status)"
}

echo "==> docker test: up"
started=$(date +%s%N)
compose up -d sluice >/dev/null 2>&1 || compose up -d sluice
healthy_ms=$(wait_healthy "$started")
echo "    healthy ${healthy_ms} ms after 'up'"
docker inspect -f '{{.Config.User}}' "$(container_id)" | grep -qx '65532:65532' \
    || fail "the broker does not run as the non-root user"

echo "==> docker test: host client through $bootstrap"
kcat -b "$bootstrap" -L | grep -q "broker 1 at localhost:$host_port" \
    || fail "host clients are not advertised localhost:$host_port"
seq 1 100 | sed 's/^/host-/' | kcat -b "$bootstrap" -P -t docker-test -X acks=all
got=$(kcat -b "$bootstrap" -C -t docker-test -o beginning -e -q | grep -c '^host-' || true)
[ "$got" -eq 100 ] || fail "host consumer read $got of 100 records"

echo "==> docker test: a second container on the compose network"
app_log=$(compose run --rm app 2>&1) || fail "app container failed: $app_log"
echo "$app_log" | sed 's/^/    /'
echo "$app_log" | grep -q "localhost" && fail "containers were advertised a localhost address"
echo "$app_log" | grep -q "consumed 100 of them back" || fail "app did not read its records back"

echo "==> docker test: committed offsets and data across a restart"
group="docker-test-group"
got=$(kcat -b "$bootstrap" -G "$group" -X auto.offset.reset=earliest -e -q docker-test | grep -c '^host-' || true)
[ "$got" -eq 100 ] || fail "group consumer read $got of 100 records before the restart"
started=$(date +%s%N)
compose restart sluice >/dev/null 2>&1
restart_ms=$(wait_healthy "$started")
echo "    healthy again ${restart_ms} ms after 'restart'"
got=$(kcat -b "$bootstrap" -C -t docker-test -o beginning -e -q | grep -c '^host-' || true)
[ "$got" -eq 100 ] || fail "after the restart the topic holds $got of 100 records"
seq 1 10 | sed 's/^/after-/' | kcat -b "$bootstrap" -P -t docker-test -X acks=all
resumed=$(kcat -b "$bootstrap" -G "$group" -X auto.offset.reset=earliest -e -q docker-test)
[ "$(echo "$resumed" | grep -c '^after-' || true)" -eq 10 ] \
    || fail "the group did not read the 10 new records: $resumed"
[ "$(echo "$resumed" | grep -c '^host-' || true)" -eq 0 ] \
    || fail "the group re-read records it had committed: its offsets were lost"

echo "==> docker test: metrics on localhost:$metrics_port"
metrics=$(curl -fsS --max-time 5 "http://localhost:$metrics_port/metrics") || fail "metrics endpoint did not answer"
for expected in \
    'sluice_requests_total{api="Produce"}' \
    'sluice_request_duration_seconds_bucket{api="Fetch",le="+Inf"}' \
    'sluice_log_end_offset{topic="docker-test",partition="0"} 110' \
    "sluice_group_lag{group=\"$group\",topic=\"docker-test\",partition=\"0\"} 0" \
    'sluice_connections_open'; do
    # Matched in the shell: `echo | grep -q` on a long scrape dies of SIGPIPE
    # once grep has its match, which pipefail takes for a failure.
    case "$metrics" in
    *"$expected"*) ;;
    *) fail "metrics lack: $expected" ;;
    esac
done

echo "==> docker test: idle memory"
sleep 3
memory=$(docker stats --no-stream --format '{{.MemUsage}}' "$(container_id)")
broker_pid=$(docker inspect -f '{{.State.Pid}}' "$(container_id)")
rss=$(awk '/VmRSS/ {print $2 " kB"}' "/proc/$broker_pid/status" 2>/dev/null || echo "unknown")

echo "==> docker single-node test passed"
echo "    image $SLUICE_IMAGE: $(( image_bytes / 1000 )) kB ($image_bytes bytes)"
echo "    up to healthy: ${healthy_ms} ms (restart to healthy: ${restart_ms} ms)"
echo "    idle container memory: ${memory} (broker process RSS: ${rss})"

# The secured example: the apps' listener SASL_SSL with SCRAM, certificates
# from deploy/make-dev-ca.sh in a directory of this run's own.
compose down -v --remove-orphans >/dev/null 2>&1 || true
echo "==> docker test: the secured example (SASL_SSL for apps, PLAINTEXT for the host)"
certs=$(mktemp -d)
export SLUICE_CERTS_DIR=$certs
deploy/make-dev-ca.sh "$certs" >/dev/null
secure() { compose -f deploy/docker-compose.secure.yml "$@"; }
started=$(date +%s%N)
secure up -d sluice >/dev/null 2>&1 || secure up -d sluice
secure_ms=$(wait_healthy "$started")
echo "    healthy ${secure_ms} ms after 'up'"
# A client that cannot log in retries forever; the app gets two minutes.
app_log=$(timeout 120 "${compose_cmd[@]}" -p "$project" -f deploy/docker-compose.yml \
    -f deploy/docker-compose.example.yml -f deploy/docker-compose.secure.yml run --rm app 2>&1) \
    || fail "secured app container failed: $app_log"
echo "$app_log" | sed 's/^/    /'
echo "$app_log" | grep -q "consumed 100 of them back" || fail "the secured app did not read its records back"
seq 1 10 | kcat -b "$bootstrap" -P -t docker-secure -X acks=all \
    || fail "the host's plaintext listener did not take records"
secure down -v --remove-orphans >/dev/null 2>&1 || true
rm -rf "$certs"
unset SLUICE_CERTS_DIR

# The cluster, from the same image; the single node is torn down first so the
# two do not compete for the machine.
single_node_done=1
scripts/test-docker-cluster.sh
