#!/usr/bin/env bash
# Benchmark, in one run on this machine: the machine's yardsticks (loopback TCP
# bandwidth, fsync rate), broker start-up time and idle memory, the controller
# quorum (start, CreateTopics latency on one node and three, failover), produce
# throughput (100 B and 1 KB, acks=1 and acks=all, 1 and 8 partitions) with the
# broker's CPU share, consume throughput (simple and through a group), produce
# latency at a fixed rate, OffsetCommit latency (one node and three), group
# coordinator failover, and the time for 10 consumers to
# get their assignments (Kafka's defaults and the dev profile), idempotent vs plain
# produce, committed transactions per second, and read_committed vs
# read_uncommitted consume of transactional data; the log cleaner's throughput
# and memory on a compacted topic; replication on three nodes
# (acks=all produce throughput with three replicas against one in the same run,
# produce latency at a fixed rate with three replicas, consume from the leaders
# against consume from the replicas in the consumer's rack, and the time from
# killing a partition's leader to the next acknowledged produce on it); TLS
# against plaintext (start-up, connections/s, throughput); the authorizer's
# cost on produce and consume at 10,000 bindings, and its decisions per second
# as bindings grow; with
# SLUICE_BASELINE set, the same load against an earlier build, interleaved, as
# ratios.
# Release build; librdkafka (rdkafka) drives the broker.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release -q -p sluice --bin sluice
cargo build --release -q -p sluice-compat --bin sluice-loadgen
SLUICE=target/release/sluice
LOADGEN=target/release/sluice-loadgen
MESSAGES_100B=${BENCH_MESSAGES_100B:-1000000}
MESSAGES_1KB=${BENCH_MESSAGES_1KB:-300000}
CLK_TCK=$(getconf CLK_TCK)

work=$(mktemp -d)
broker_pid=""
cluster_pids=()
cleanup() {
    [ -n "$broker_pid" ] && kill -9 "$broker_pid" 2>/dev/null || true
    for pid in "${cluster_pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
now_ns() { date +%s%N; }
value() { grep "^$1=" | cut -d= -f2; }

start_broker() {
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    rm -rf "$work/data"
    "$SLUICE" serve --listen "127.0.0.1:$port" --data-dir "$work/data" --log-level warn "$@" &
    broker_pid=$!
    BOOTSTRAP="127.0.0.1:$port"
    for _ in $(seq 1 500); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        sleep 0.01
    done
    echo "broker did not start" >&2
    exit 1
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Three nodes on loopback, each a voter and a broker; CLUSTER_BOOTSTRAP names all.
start_cluster() {
    local ids=(1 2 3) kafka=() controller=() voters="" id
    CLUSTER_METRICS=()
    for id in "${ids[@]}"; do
        kafka+=("$(free_port)")
        controller+=("$(free_port)")
        voters+="${voters:+,}$id@127.0.0.1:${controller[$((id - 1))]}"
    done
    rm -rf "$work/cluster"
    CLUSTER_BOOTSTRAP=""
    for id in "${ids[@]}"; do
        CLUSTER_METRICS+=("127.0.0.1:$(free_port)")
        "$SLUICE" serve --node-id "$id" --listen "127.0.0.1:${kafka[$((id - 1))]}" \
            --data-dir "$work/cluster/$id" --log-level warn --rack "rack-$id" --replica-selector rack-aware \
            --metrics-listen "${CLUSTER_METRICS[$((id - 1))]}" \
            --controller-listen "127.0.0.1:${controller[$((id - 1))]}" --controller-voters "$voters" &
        cluster_pids+=($!)
        CLUSTER_BOOTSTRAP+="${CLUSTER_BOOTSTRAP:+,}127.0.0.1:${kafka[$((id - 1))]}"
    done
    for id in "${ids[@]}"; do
        for _ in $(seq 1 3000); do
            (exec 3<>"/dev/tcp/127.0.0.1/${kafka[$((id - 1))]}") 2>/dev/null && break
            sleep 0.01
        done
    done
}

# create-topic on the cluster, once every broker has registered (until then
# three replicas cannot be placed); the last try shows its error.
create_on_cluster() {
    for _ in $(seq 1 100); do
        "$LOADGEN" create-topic --bootstrap "$CLUSTER_BOOTSTRAP" "$@" 2>/dev/null && return
        sleep 0.2
    done
    "$LOADGEN" create-topic --bootstrap "$CLUSTER_BOOTSTRAP" "$@"
}

# The largest value of a metric over the cluster's nodes.
cluster_metric_max() {
    local address
    for address in "${CLUSTER_METRICS[@]}"; do
        python3 -c 'import sys, urllib.request; print(urllib.request.urlopen("http://" + sys.argv[1] + "/metrics").read().decode())' "$address" |
            awk -v m="$1" '$1 == m { print $2 }'
    done | sort -g | tail -1
}

stop_cluster() {
    for pid in "${cluster_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${cluster_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    cluster_pids=()
}

stop_broker() {
    kill "$broker_pid"
    wait "$broker_pid" || true
    broker_pid=""
}

# BENCH_ONLY_BASELINE=1 (with SLUICE_BASELINE) runs the comparison alone.
if [ -z "${BENCH_ONLY_BASELINE:-}" ]; then
echo "== machine yardsticks"
loopback=$("$LOADGEN" loopback | value loopback_mb_per_s)
mkdir -p "$work/fsync"
fsyncs=$("$LOADGEN" fsync --dir "$work/fsync" | value fsyncs_per_s)
echo "loopback TCP bandwidth: ${loopback} MB/s"
echo "fdatasync rate (4 KiB appends): ${fsyncs} /s"

echo "== start-up (spawn to first answered ApiVersions, empty data dir)"
"$LOADGEN" startup --sluice "$SLUICE" --runs 20

echo "== controller quorum (three voters on loopback)"
# Quorum start: three voters spawned at once until all three serve; a voter's
# restart after kill -9; CreateTopics one after another on one node and on three
# (through the metadata leader and through a follower, which forwards);
# failover: kill -9 of the metadata leader to the next committed CreateTopics,
# through a survivor.
"$LOADGEN" cluster --sluice "$SLUICE" --starts 3 --creates 200 --kills "${BENCH_FAILOVER_KILLS:-10}"

start_broker
sleep 1
echo "idle RSS: $(rss_kb "$broker_pid") KB"

peak_rss=0
echo "== produce throughput"
printf '%-6s %-5s %-10s %12s %9s %10s %12s\n' size acks partitions msgs/s MB/s "%loopback" "broker CPU"
for size in 100 1024; do
    messages=$MESSAGES_100B
    [ "$size" = 1024 ] && messages=$MESSAGES_1KB
    for acks in 1 all; do
        for partitions in 1 8; do
            topic="bench-$size-$acks-$partitions"
            "$LOADGEN" create-topic --bootstrap "$BOOTSTRAP" --topic "$topic" --partitions "$partitions"
            ticks_before=$(cpu_ticks "$broker_pid")
            t0=$(now_ns)
            out=$("$LOADGEN" produce --bootstrap "$BOOTSTRAP" --topic "$topic" --messages "$messages" --size "$size" --acks "$acks")
            t1=$(now_ns)
            ticks_after=$(cpu_ticks "$broker_pid")
            rss=$(rss_kb "$broker_pid")
            [ "$rss" -gt "$peak_rss" ] && peak_rss=$rss
            msgs=$(echo "$out" | value msgs_per_s)
            mbs=$(echo "$out" | value mb_per_s)
            cpu=$(awk -v t=$((ticks_after - ticks_before)) -v hz="$CLK_TCK" -v ns=$((t1 - t0)) 'BEGIN { printf "%.0f%% of a core", 100 * t / hz / (ns / 1e9) }')
            share=$(awk -v m="$mbs" -v l="$loopback" 'BEGIN { printf "%.1f%%", 100 * m / l }')
            printf '%-6s %-5s %-10s %12s %9s %10s %12s\n' "$size" "$acks" "$partitions" "$msgs" "$mbs" "$share" "$cpu"
        done
    done
done
echo "RSS after produce runs: ${peak_rss} KB"

echo "== consume throughput (1 KB messages, 8 partitions, from the start)"
ticks_before=$(cpu_ticks "$broker_pid"); t0=$(now_ns)
out=$("$LOADGEN" consume --bootstrap "$BOOTSTRAP" --topic bench-1024-1-8 --partitions 8 --messages "$MESSAGES_1KB")
t1=$(now_ns); ticks_after=$(cpu_ticks "$broker_pid")
echo "$out" | tr '\n' ' '
awk -v t=$((ticks_after - ticks_before)) -v hz="$CLK_TCK" -v ns=$((t1 - t0)) 'BEGIN { printf "broker CPU %.0f%% of a core\n", 100 * t / hz / (ns / 1e9) }'

echo "== OffsetCommit latency, one node (synchronous commits: appended to __consumer_offsets, then fsynced in the cache)"
"$LOADGEN" create-topic --bootstrap "$BOOTSTRAP" --topic commits --partitions 1
"$LOADGEN" commit-latency --bootstrap "$BOOTSTRAP" --topic commits --commits 2000 | tr '\n' ' '
echo

echo "== 10 consumers joining a 20-partition topic, Kafka's defaults (3 s initial rebalance delay)"
"$LOADGEN" create-topic --bootstrap "$BOOTSTRAP" --topic join20 --partitions 20
"$LOADGEN" group-join --bootstrap "$BOOTSTRAP" --topic join20 --consumers 10

echo "== produce latency (100 B, acks=1, linger.ms=0, 2000 msgs/s for 10 s)"
"$LOADGEN" create-topic --bootstrap "$BOOTSTRAP" --topic latency --partitions 1
"$LOADGEN" latency --bootstrap "$BOOTSTRAP" --topic latency --rate 2000 --seconds 10 | tr '\n' ' '
echo
stop_broker

echo "== 10 consumers joining a 20-partition topic, dev profile"
start_broker --profile dev
"$LOADGEN" create-topic --bootstrap "$BOOTSTRAP" --topic join20 --partitions 20
"$LOADGEN" group-join --bootstrap "$BOOTSTRAP" --topic join20 --consumers 10

echo "== consume 1 KB from 8 partitions: assigned consumer vs consumer group (dev profile)"
"$LOADGEN" create-topic --bootstrap "$BOOTSTRAP" --topic group8 --partitions 8
"$LOADGEN" produce --bootstrap "$BOOTSTRAP" --topic group8 --messages "$((MESSAGES_1KB * 4))" --size 1024 >/dev/null
printf 'assigned: '
"$LOADGEN" consume --bootstrap "$BOOTSTRAP" --topic group8 --partitions 8 --messages "$((MESSAGES_1KB * 4))" | tr '\n' ' '
printf '\ngroup:    '
"$LOADGEN" group-consume --bootstrap "$BOOTSTRAP" --topic group8 --messages "$((MESSAGES_1KB * 4))" | tr '\n' ' '
echo
stop_broker

echo "== fsync before ack (group commit): 1 KB, acks=all, 8 partitions"
start_broker --fsync-before-ack true
"$LOADGEN" create-topic --bootstrap "$BOOTSTRAP" --topic durable --partitions 8
out=$("$LOADGEN" produce --bootstrap "$BOOTSTRAP" --topic durable --messages "$MESSAGES_1KB" --size 1024 --acks all)
echo "$out" | tr '\n' ' '
echo "(fdatasync yardstick: ${fsyncs}/s)"
stop_broker

echo "== idempotent and transactional producers"
start_broker
printf '%-12s %12s %9s\n' producer msgs/s MB/s
for mode in plain idempotent; do
    topic="idem-$mode"
    "$LOADGEN" create-topic --bootstrap "$BOOTSTRAP" --topic "$topic" --partitions 8
    flag=()
    [ "$mode" = idempotent ] && flag=(--idempotent)
    out=$("$LOADGEN" produce --bootstrap "$BOOTSTRAP" --topic "$topic" --messages "$MESSAGES_1KB" --size 1024 --acks all "${flag[@]}")
    printf '%-12s %12s %9s\n' "$mode (1 KB, acks=all, 8 partitions)" "$(echo "$out" | value msgs_per_s)" "$(echo "$out" | value mb_per_s)"
done
echo "transactions of 10 x 100 B messages over 3 partitions, committed one after another:"
"$LOADGEN" create-topic --bootstrap "$BOOTSTRAP" --topic txn3 --partitions 3
"$LOADGEN" transactions --bootstrap "$BOOTSTRAP" --topic txn3 --partitions 3 --transactions 2000 | tr '\n' ' '
echo
echo "consume 1 KB from 8 partitions written by transactions of 1000 messages:"
"$LOADGEN" create-topic --bootstrap "$BOOTSTRAP" --topic txnfill --partitions 8
"$LOADGEN" transactions --bootstrap "$BOOTSTRAP" --topic txnfill --partitions 8 \
    --transactions "$((MESSAGES_1KB / 1000))" --per-transaction 1000 --size 1024 >/dev/null
for isolation in read_uncommitted read_committed; do
    printf '%-17s ' "$isolation:"
    "$LOADGEN" consume --bootstrap "$BOOTSTRAP" --topic txnfill --partitions 8 --messages "$MESSAGES_1KB" --isolation "$isolation" | tr '\n' ' '
    echo
done
stop_broker

echo "== log compaction (1 KB records on 10,000 keys, 8 MiB segments, one partition)"
# The broker logs each cleaning at info ("log cleaned": bytes read and written,
# the key map's entries, the time it took); the figures are their sums, and the
# broker's peak RSS beside its RSS before the cleaner ran.
clean_port=$(free_port)
"$SLUICE" serve --listen "127.0.0.1:$clean_port" --data-dir "$work/clean" --log-level info \
    --log-cleaner-backoff-ms 100 --log-cleaner-enable false >"$work/cleaner.log" 2>&1 &
broker_pid=$!
BOOTSTRAP="127.0.0.1:$clean_port"
for _ in $(seq 1 500); do (exec 3<>"/dev/tcp/127.0.0.1/$clean_port") 2>/dev/null && break; sleep 0.01; done
"$LOADGEN" create-topic --bootstrap "$BOOTSTRAP" --topic compacted --partitions 1 \
    --config cleanup.policy=compact --config segment.bytes=8388608
"$LOADGEN" produce --bootstrap "$BOOTSTRAP" --topic compacted --messages "$MESSAGES_1KB" --size 1024 \
    --keys 10000 --acks 1 >/dev/null
log_bytes=$(du -sb "$work/clean/logs/compacted-0" | cut -f1)
stop_broker
# Restarted with the cleaner on: it finds the whole log dirty at once.
"$SLUICE" serve --listen "127.0.0.1:$clean_port" --data-dir "$work/clean" --log-level info \
    --log-cleaner-backoff-ms 100 >"$work/cleaner.log" 2>&1 &
broker_pid=$!
for _ in $(seq 1 500); do (exec 3<>"/dev/tcp/127.0.0.1/$clean_port") 2>/dev/null && break; sleep 0.01; done
rss_before=$(rss_kb "$broker_pid")
for _ in $(seq 1 600); do grep -q "log cleaned" "$work/cleaner.log" && break; sleep 0.1; done
sleep 1
peak_rss=$(awk '/VmHWM/ {print $2}' "/proc/$broker_pid/status")
stop_broker
cleaned_bytes=$(du -sb "$work/clean/logs/compacted-0" | cut -f1)
sum_field() { grep "log cleaned" "$work/cleaner.log" | grep -o "$1=[0-9]*" | cut -d= -f2 | awk '{s += $1} END {print s + 0}'; }
read_bytes=$(sum_field bytes_read)
elapsed_us=$(sum_field elapsed_us)
map_entries=$(grep "log cleaned" "$work/cleaner.log" | grep -o "map_entries=[0-9]*" | cut -d= -f2 | sort -n | tail -1)
awk -v r="$read_bytes" -v w="$(sum_field bytes_written)" -v e="$elapsed_us" -v b="$log_bytes" -v a="$cleaned_bytes" \
    -v m="${map_entries:-0}" -v before="$rss_before" -v peak="$peak_rss" 'BEGIN {
    printf "log %.1f MB -> %.1f MB on disk; cleaned in %.2f s: %.1f MB/s of dirty log (read %.1f MB over both passes, wrote %.2f MB)\n",
        b / 1e6, a / 1e6, e / 1e6, (e > 0 ? b / e : 0), r / 1e6, w / 1e6
    printf "key map: %d entries (%.2f MB at 24 B each); broker RSS %.1f MB before, %.1f MB peak\n",
        m, m * 24 / 1e6, before / 1024, peak / 1024
}'

echo "== replication: three nodes on loopback, 1 KB, acks=all, 8 partitions"
start_cluster
create_on_cluster --topic rf1 --partitions 8 --replication 1
create_on_cluster --topic rf3 --partitions 8 --replication 3 --config min.insync.replicas=2
sleep 2
term_before=$(cluster_metric_max sluice_controller_term)
printf '%-26s %12s %9s\n' "replication factor" msgs/s MB/s
declare -A rf_msgs
for rf in 1 3; do
    out=$("$LOADGEN" produce --bootstrap "$CLUSTER_BOOTSTRAP" --topic "rf$rf" --messages "$MESSAGES_1KB" --size 1024 --acks all)
    rf_msgs[$rf]=$(echo "$out" | value msgs_per_s)
    printf '%-26s %12s %9s\n' "RF $rf" "${rf_msgs[$rf]}" "$(echo "$out" | value mb_per_s)"
done
awk -v a="${rf_msgs[3]}" -v b="${rf_msgs[1]}" 'BEGIN { printf "RF 3 / RF 1 throughput: %.2f\n", a / b }'
echo "produce latency, RF 3, acks=all (100 B, linger.ms=0, 2000 msgs/s for 10 s):"
"$LOADGEN" create-topic --bootstrap "$CLUSTER_BOOTSTRAP" --topic rf3-latency --partitions 1 --replication 3 \
    --config min.insync.replicas=2
sleep 2
"$LOADGEN" latency --bootstrap "$CLUSTER_BOOTSTRAP" --topic rf3-latency --rate 2000 --seconds 10 --acks all | tr '\n' ' '
echo
echo "consume 1 KB from the 8 partitions of RF 3, from the start: from the leaders vs from the replicas in the consumer's rack (KIP-392):"
for rack in "" rack-1; do
    printf '%-28s ' "${rack:-leaders (no client.rack)}"
    "$LOADGEN" consume --bootstrap "$CLUSTER_BOOTSTRAP" --topic rf3 --partitions 8 --messages "$MESSAGES_1KB" \
        --isolation read_uncommitted ${rack:+--client-rack "$rack"} | tr '\n' ' '
    echo
done
echo "OffsetCommit latency, three nodes (__consumer_offsets with 3 replicas: each commit waits for the in-sync replicas):"
"$LOADGEN" create-topic --bootstrap "$CLUSTER_BOOTSTRAP" --topic commits3 --partitions 1 --replication 3
"$LOADGEN" commit-latency --bootstrap "$CLUSTER_BOOTSTRAP" --topic commits3 --commits 2000 | tr '\n' ' '
echo
# What the broker session (--broker-session-timeout-ms) must stay above: the
# slowest heartbeat round trip under the load above; and whether the load cost
# the metadata raft a leader (a new term).
awk -v rtt="$(cluster_metric_max sluice_controller_heartbeat_rtt_max_seconds)" \
    -v before="$term_before" -v after="$(cluster_metric_max sluice_controller_term)" \
    'BEGIN { printf "broker heartbeat round trip to the metadata leader under the load above: max %.1f ms; metadata raft elections during it: %d\n", rtt * 1000, after - before }'
stop_cluster
echo "leader failover: kill -9 of a partition's leader to the next acks=all produce acknowledged on it"
echo "(the dead node is fenced on evidence, its connections closed and its controller listener"
echo "refusing, not after broker.session.timeout.ms; one kill in three is of the node that also"
echo "leads the metadata raft, whose election comes first); then SIGSTOP of a partition's leader"
echo "to a new leader in every live node's Metadata (a silent node is fenced when its session ends);"
echo "and kill -9 of a follower to the next acks=all produce acknowledged (it leaves the ISR):"
"$LOADGEN" replica-failover --sluice "$SLUICE" --kills "${BENCH_REPLICA_FAILOVER_KILLS:-21}" \
    --pauses "${BENCH_REPLICA_PAUSES:-9}" | tr '\n' ' '
echo
echo "coordinator failover: kill -9 of a Stable group's coordinator to its member's next OffsetCommit"
echo "accepted on the new one (the fence on evidence, then the load of the offsets partition; the"
echo "member keeps its generation); kill -9 of a transactional producer's coordinator to its next"
echo "committed transaction:"
"$LOADGEN" coordinator-failover --sluice "$SLUICE" --kills "${BENCH_COORDINATOR_FAILOVER_KILLS:-21}" | tr '\n' ' '
echo

# TLS: librdkafka through confluent-kafka (the load generator's librdkafka is
# built without OpenSSL), from the test venv scripts/install-test-deps.sh makes.
echo "== TLS against plaintext (start-up, new connections/s, 1 KB produce and consume through librdkafka)"
if [ -x target/python-venv/bin/python ]; then
    target/python-venv/bin/python scripts/bench_tls.py "$SLUICE"
else
    echo "skipped: run scripts/install-test-deps.sh first (it makes target/python-venv)"
fi

# Authorization: the same load without an authorizer and with the standard one
# deciding every request against 10,000 bindings (created through CreateAcls by
# confluent-kafka, from the test venv), in one run; then the authorizer's
# decisions per second as the number of bindings grows.
echo "== authorization: 1 KB acks=1 produce and consume, 8 partitions, no authorizer against the standard one with ${BENCH_ACL_BINDINGS:-10000} bindings"
if [ -x target/python-venv/bin/python ]; then
    declare -A authz_produce authz_consume
    for mode in none standard; do
        if [ "$mode" = none ]; then
            start_broker
        else
            start_broker --authorizer standard --allow-everyone-if-no-acl-found true
            target/python-venv/bin/python scripts/bench_acls.py "$BOOTSTRAP" "${BENCH_ACL_BINDINGS:-10000}" >/dev/null
        fi
        "$LOADGEN" create-topic --bootstrap "$BOOTSTRAP" --topic bench-authz --partitions 8
        authz_produce[$mode]=$("$LOADGEN" produce --bootstrap "$BOOTSTRAP" --topic bench-authz --messages "$MESSAGES_1KB" --size 1024 --acks 1 | value msgs_per_s)
        authz_consume[$mode]=$("$LOADGEN" consume --bootstrap "$BOOTSTRAP" --topic bench-authz --partitions 8 --messages "$MESSAGES_1KB" | value msgs_per_s)
        stop_broker
    done
    printf '%-10s %14s %14s\n' authorizer "produce msg/s" "consume msg/s"
    for mode in none standard; do
        printf '%-10s %14s %14s\n' "$mode" "${authz_produce[$mode]}" "${authz_consume[$mode]}"
    done
    awk -v p0="${authz_produce[none]}" -v p1="${authz_produce[standard]}" -v c0="${authz_consume[none]}" -v c1="${authz_consume[standard]}" \
        'BEGIN { printf "ratio standard/none: produce %.2f, consume %.2f\n", p1 / p0, c1 / c0 }'
else
    echo "skipped: run scripts/install-test-deps.sh first (it makes target/python-venv)"
fi
echo "-- one decision (Write on a topic) against N bindings on other topics"
"$LOADGEN" acl-decisions
fi

# Against the previous version: with SLUICE_BASELINE naming an earlier release build
# of the broker, the same load runs against both, interleaved three times (baseline,
# current, ...) so that drift of the machine hits both alike; the median of each
# three is kept, and the ratio is current / baseline (above 1 is faster; for the
# latencies and failovers, below 1 is faster).
if [ -n "${SLUICE_BASELINE:-}" ]; then
    echo "== against the previous version ($SLUICE_BASELINE), interleaved, median of 3"
    current_binary=$SLUICE
    run_case() {
        case "$1" in
        produce-100b-acks1)
            start_broker
            "$LOADGEN" create-topic --bootstrap "$BOOTSTRAP" --topic cmp --partitions 8
            "$LOADGEN" produce --bootstrap "$BOOTSTRAP" --topic cmp --messages "$MESSAGES_100B" --size 100 --acks 1 | value msgs_per_s ;;
        produce-1kb-all)
            start_broker
            "$LOADGEN" create-topic --bootstrap "$BOOTSTRAP" --topic cmp --partitions 8
            "$LOADGEN" produce --bootstrap "$BOOTSTRAP" --topic cmp --messages "$MESSAGES_1KB" --size 1024 --acks all | value msgs_per_s ;;
        fsync-before-ack)
            start_broker --fsync-before-ack true
            "$LOADGEN" create-topic --bootstrap "$BOOTSTRAP" --topic cmp --partitions 8
            "$LOADGEN" produce --bootstrap "$BOOTSTRAP" --topic cmp --messages "$MESSAGES_1KB" --size 1024 --acks all | value msgs_per_s ;;
        transactions)
            start_broker
            "$LOADGEN" create-topic --bootstrap "$BOOTSTRAP" --topic cmp --partitions 3
            "$LOADGEN" transactions --bootstrap "$BOOTSTRAP" --topic cmp --partitions 3 --transactions 1000 | value transactions_per_s ;;
        commit-p50-us)
            start_broker
            "$LOADGEN" create-topic --bootstrap "$BOOTSTRAP" --topic cmp --partitions 1
            "$LOADGEN" commit-latency --bootstrap "$BOOTSTRAP" --topic cmp --commits 1000 | value p50_us ;;
        produce-1kb-all-rf3)
            start_cluster
            create_on_cluster --topic cmp --partitions 8 --replication 3 --config min.insync.replicas=2
            sleep 2
            "$LOADGEN" produce --bootstrap "$CLUSTER_BOOTSTRAP" --topic cmp --messages "$MESSAGES_1KB" --size 1024 --acks all | value msgs_per_s
            stop_cluster
            return ;;
        group-failover-p50-ms)
            "$LOADGEN" coordinator-failover --sluice "$SLUICE" --kills "$CMP_FAILOVER_KILLS" | value group_coordinator_failover_p50_ms
            return ;;
        txn-failover-p50-ms)
            "$LOADGEN" coordinator-failover --sluice "$SLUICE" --kills "$CMP_FAILOVER_KILLS" | value txn_coordinator_failover_p50_ms
            return ;;
        esac
        stop_broker
    }
    CMP_FAILOVER_KILLS=${BENCH_CMP_FAILOVER_KILLS:-5}
    printf '%-20s %14s %14s %8s\n' case baseline current ratio
    for case in produce-100b-acks1 produce-1kb-all fsync-before-ack transactions commit-p50-us \
        produce-1kb-all-rf3 group-failover-p50-ms txn-failover-p50-ms; do
        base_figures=() current_figures=()
        for _ in 1 2 3; do
            SLUICE=$SLUICE_BASELINE
            base_figures+=("$(run_case "$case")")
            SLUICE=$current_binary
            current_figures+=("$(run_case "$case")")
        done
        median() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
        base=$(median "${base_figures[@]}")
        current=$(median "${current_figures[@]}")
        ratio=$(awk -v c="$current" -v b="$base" 'BEGIN { printf "%.2f", c / b }')
        printf '%-20s %14s %14s %8s\n' "$case" "$base" "$current" "$ratio"
    done
fi
