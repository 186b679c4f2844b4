#!/usr/bin/env bash
# Checks the import direction that ARCHITECTURE.md ("Import direction") writes
# down: server -> protocol -> engines -> store, log -> leaves; which modules
# alone may use sled, openraft and kafka_protocol; and that inside each module
# the submodules import one another without a cycle. Reads every `crate::` path
# (in `use` lines and inline), every `super::` path and every path into those
# three crates, in src/, skipping comments. Prints each forbidden import as
# `file:line: ...` and exits 1 if there is one.
set -euo pipefail
cd "$(dirname "$0")/.."

leaves="limits types config clock internal_topics durability metrics random error_code security"
below_engines="store log topic_config $leaves"
engines="replica coordinator controller"

# What each top-level module may import of the crate, besides itself.
declare -A allowed=(
    [main]="*"
    [lib]="*"
    [server]="protocol net $engines $below_engines"
    [protocol]="$engines $below_engines"
    # An engine imports no other engine; replica follows controller's image.
    [replica]="controller $below_engines"
    # The coordinators run on the internal topics' partitions, which the
    # replica manager holds.
    [coordinator]="replica $below_engines"
    [controller]="net $below_engines"
    [topic_config]="log $leaves"
    # The log knows nothing of requests, raft or the stores, and the stores
    # nothing of the log: both sit just above the leaves.
    [log]="$leaves"
    [store]="$leaves"
    # Leaves import at most the bounds and the shared value types.
    [limits]=""
    [types]="limits"
    # Settings name the SASL mechanisms and the users to create.
    [config]="limits types security"
    # Principals, SCRAM, PLAIN, the SASL state machine: pure, importing
    # nothing of the broker.
    [security]=""
    [clock]="limits types"
    [internal_topics]="limits types"
    [durability]="limits types"
    [random]="limits types"
    # The error codes are plain numbers and import nothing.
    [error_code]=""
    # Beside the layers: the allocator and the healthcheck client are for main
    # alone, and import at most leaves.
    [alloc]="$leaves"
    [healthcheck]="$leaves"
    # The inter-node transport sits just above the leaves: only the controller
    # and the server may import it, and it imports only the bounds, the
    # shared value types and the TLS configurations between nodes.
    [net]="limits types random security"
    # Metrics is handed its figures (a MetricsSource) and imports nothing but
    # its bounds.
    [metrics]="limits"
)

# The only modules that may use each of these crates.
declare -A external=(
    [sled]="store"
    [openraft]="controller"
    # log decodes the records of one batch (log/records.rs: ListOffsets by time,
    # a batch header without its newest timestamp) and builds them in its
    # tests; no engine, store or leaf speaks the wire format.
    [kafka_protocol]="protocol healthcheck log"
    # The codec at Kafka 3.9's schemas, for the versions Kafka 4 removed.
    [kafka_protocol_old]="protocol"
)

status=0

# The table and the tree must agree: a new top-level module needs a row.
modules=$(find src -mindepth 1 -maxdepth 1 \( -name '*.rs' -o -type d \) -printf '%f\n' \
    | sed 's/\.rs$//' | sort -u | tr '\n' ' ')
for module in $modules; do
    if [[ -z ${allowed[$module]+set} ]]; then
        echo "src/$module: no row in the import table of scripts/check-imports.sh; add one (and to ARCHITECTURE.md)"
        status=1
    fi
done
# The submodules of each module (log/segment, protocol/handlers ...).
submodules=$(find src -mindepth 2 -maxdepth 2 \( -name '*.rs' -o -type d \) ! -name mod.rs \
    | sed 's#^src/##; s/\.rs$//' | sort -u | tr '\n' ' ')

table=""
for module in "${!allowed[@]}"; do table+="$module=${allowed[$module]};"; done
crates=""
for name in "${!external[@]}"; do crates+="$name=${external[$name]};"; done

# Imports between sibling submodules, one per line: module, from, to, file:line.
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT

while IFS= read -r file; do
    rel=${file#src/}
    module=${rel%%/*}
    module=${module%.rs}
    # The file's module path below the crate root: src/a.rs and src/a/mod.rs
    # are `a` (depth 1), src/a/b.rs and src/a/b/mod.rs are `a/b` (depth 2); that
    # many `super::` reach the crate root.
    path=${rel%.rs}
    path=${path%/mod}
    depth=$(awk -F/ '{ print NF }' <<<"$path")
    inner=""
    if [[ $depth -ge 2 ]]; then inner=$(cut -d/ -f2 <<<"$path"); fi
    # Test code (a `tests.rs`, `*_tests.rs` or a `tests/` folder) may wire engines
    # together as the server does; the crate rules below still apply to it.
    testfile=0
    if [[ $rel =~ (^|/)([a-z_]*_)?tests(\.rs|/) ]]; then testfile=1; fi
    awk -v file="$file" -v module="$module" -v inner="$inner" -v depth="$depth" \
        -v testfile="$testfile" \
        -v table="$table" -v crates="$crates" -v modules="$modules" \
        -v submodules="$submodules" -v edges="$edges" '
        BEGIN {
            n = split(table, rows, ";")
            for (i = 1; i <= n; i++) {
                if (rows[i] == "") continue
                split(rows[i], kv, "=")
                ok[kv[1]] = " " kv[2] " "
            }
            n = split(crates, rows, ";")
            for (i = 1; i <= n; i++) {
                if (rows[i] == "") continue
                split(rows[i], kv, "=")
                users[kv[1]] = " " kv[2] " "
            }
            n = split(modules, names, " ")
            for (i = 1; i <= n; i++) top[names[i]] = 1
            n = split(submodules, names, " ")
            for (i = 1; i <= n; i++) child[names[i]] = 1
            bad = 0
        }
        # A path to the top-level module `target`.
        function check(target, how) {
            if (testfile || target == module || !(target in top)) return
            if (ok[module] ~ / \* / || index(ok[module], " " target " ")) return
            may = ok[module]
            gsub(/^ +| +$/, "", may)
            printf "%s:%d: %s must not import %s (%s); %s may import: %s\n",
                file, FNR, module, target, how, module,
                (may == "" ? "no other module" : may)
            bad = 1
        }
        # A path to `target` inside this file'\''s own top-level module.
        function sibling(target) {
            if (inner != "" && target != inner && ((module "/" target) in child))
                printf "%s %s %s %s:%d\n", module, inner, target, file, FNR >> edges
        }
        {
            line = $0
            sub(/^[ \t]*\/\/.*/, "", line)   # whole-line and doc comments
            sub(/[ \t]\/\/ .*$/, "", line)   # trailing comments
            rest = line
            while (match(rest, /crate::([{]|[a-z_][a-z0-9_]*)/)) {
                target = substr(rest, RSTART + 7, RLENGTH - 7)
                rest = substr(rest, RSTART + RLENGTH)
                if (target == "{") {
                    printf "%s:%d: grouped crate::{...} import; write one use crate::<module>::... per module so the direction can be checked\n", file, FNR
                    bad = 1
                } else if (target == module) {
                    if (match(rest, /^::[a-z_][a-z0-9_]*/))
                        sibling(substr(rest, 3, RLENGTH - 2))
                } else {
                    check(target, "crate::" target)
                }
            }
            rest = line
            while (match(rest, /(super::)+[a-z_][a-z0-9_]*/)) {
                found = substr(rest, RSTART, RLENGTH)
                rest = substr(rest, RSTART + RLENGTH)
                climbs = gsub(/super::/, "", found)
                if (climbs >= depth) check(found, "through super::")
                else if (depth - climbs == 1) sibling(found)
            }
            for (name in users) {
                pattern = "(^|[^a-z0-9_:])(::)?" name "(::|;| as )"
                if (line ~ pattern && !index(users[name], " " module " ")) {
                    only = users[name]
                    gsub(/^ +| +$/, "", only)
                    printf "%s:%d: %s must not use the %s crate; only %s may\n",
                        file, FNR, module, name, only
                    bad = 1
                }
            }
        }
        END { exit bad }
    ' "$file" || status=1
done < <(find src -name '*.rs' | sort)

# Inside each module, the imports between its submodules must form no cycle.
for module in $(cut -d' ' -f1 "$edges" | sort -u); do
    loop=$(awk -v m="$module" '$1 == m { print $2, $3 }' "$edges" | sort -u \
        | { tsort 2>&1 >/dev/null || true; } \
        | sed -n 's/^tsort: \([a-z_][a-z0-9_]*\)$/\1/p' | sort -u | tr '\n' ' ')
    if [[ -n $loop ]]; then
        echo "src/$module: submodules import one another in a cycle (${loop% }):"
        awk -v m="$module" -v loop=" $loop" '
            $1 == m && index(loop, " " $2 " ") && index(loop, " " $3 " ") {
                printf "  %s: %s::%s imports %s::%s\n", $4, m, $2, m, $3
            }' "$edges" | sort -u
        status=1
    fi
done

if [[ $status -ne 0 ]]; then
    echo "import direction broken: see \"Import direction\" in ARCHITECTURE.md" >&2
fi
exit $status
