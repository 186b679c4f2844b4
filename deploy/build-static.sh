#!/bin/sh
# Builds the `sluice` binary statically linked (glibc with crt-static, so it runs
# on an empty base image) and puts it, stripped, in OUT_DIR with the empty data
# directory the image ships. Run inside the image build (deploy/Dockerfile); it
# works the same on a Linux host.
set -eu
out_dir=${1:?usage: build-static.sh OUT_DIR}
cd "$(dirname "$0")/.."

# The host's own target, named explicitly: with --target, RUSTFLAGS reach only
# the binary and not build scripts or proc macros, which must stay dynamic.
target=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    cargo build --release --locked --bin sluice --target "$target"

mkdir -p "$out_dir/data"
cp "target/$target/release/sluice" "$out_dir/sluice.tmp"
if command -v strip >/dev/null 2>&1; then
    strip "$out_dir/sluice.tmp"
fi
mv "$out_dir/sluice.tmp" "$out_dir/sluice"
