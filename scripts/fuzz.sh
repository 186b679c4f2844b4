#!/usr/bin/env bash
# Fuzzes request decoding and the authentication entry paths (protocol-tests/fuzz)
# with libFuzzer through cargo-fuzz.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET]   (default 300 s, every target:
# decode_request, sasl, tls_accept). Installs cargo-fuzz if missing.
# cargo-fuzz needs nightly compiler flags; RUSTC_BOOTSTRAP lets the stable
# toolchain accept them.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-300}
targets=${2:-decode_request sasl tls_accept}
command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
export RUSTC_BOOTSTRAP=1
for target in $targets; do
    corpus=protocol-tests/fuzz/corpus/$target
    mkdir -p "$corpus" "protocol-tests/fuzz/seeds/$target"
    cargo fuzz run --fuzz-dir protocol-tests/fuzz "$target" "$corpus" "protocol-tests/fuzz/seeds/$target" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536
done
