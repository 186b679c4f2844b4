#!/bin/sh
# Writes COUNT records to TOPIC, then reads the topic back with a consumer group
# and checks that every record of this run came back. Exits non-zero otherwise.
set -eu
bootstrap=${BOOTSTRAP_SERVERS:-sluice:9092}
# KCAT_CONFIG: a file of client settings (security.protocol, sasl.*, ssl.*).
config=${KCAT_CONFIG:-}
kcat() {
    if [ -n "$config" ]; then
        command kcat -F "$config" "$@"
    else
        command kcat "$@"
    fi
}
topic=${TOPIC:-app-demo}
count=${COUNT:-100}
run="run-$(date +%s)-$$"

echo "app: brokers as this container sees them:"
kcat -b "$bootstrap" -L -t "$topic" | sed -n '/brokers:/,/topic/p'

seq 1 "$count" | sed "s/^/$run:/" | kcat -b "$bootstrap" -P -t "$topic" -X acks=all
echo "app: produced $count records to $topic"

received=$(kcat -b "$bootstrap" -G "app-$run" -X auto.offset.reset=earliest -e "$topic" 2>/dev/null \
    | grep -c "^$run:" || true)
echo "app: consumed $received of them back through group app-$run"
[ "$received" -eq "$count" ]
