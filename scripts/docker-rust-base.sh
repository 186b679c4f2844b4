#!/usr/bin/env bash
# Makes sure the image the Dockerfile compiles in (rust:1-slim-bookworm, its
# RUST_IMAGE default) exists locally, so that `docker compose -f
# deploy/docker-compose.yml up --build` builds from source on this machine:
# pulled when a registry answers, otherwise a stand-in is built under the same
# name from the local debian:bookworm-slim (scripts/docker-debian-base.sh makes
# it with debootstrap when it cannot be pulled), Debian's gcc and this host's own
# Rust toolchain and CA certificates (so cargo reaches crates.io from inside a
# build exactly as it does from the host).
set -euo pipefail
cd "$(dirname "$0")/.."
image=rust:1-slim-bookworm

if docker image inspect "$image" >/dev/null 2>&1; then
    exit 0
fi
if docker pull --quiet "$image" >/dev/null 2>&1; then
    exit 0
fi

scripts/docker-debian-base.sh
echo "==> no registry answers: building a stand-in $image from this host's Rust toolchain"
sysroot=$(rustc --print sysroot)
context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
# The toolchain without its offline documentation (half its size).
mkdir "$context/rust"
tar -C "$sysroot" --exclude=./share/doc -c . | tar -C "$context/rust" -x
cp /etc/ssl/certs/ca-certificates.crt "$context/ca-certificates.crt"
cat >"$context/Dockerfile" <<'EOF'
FROM debian:bookworm-slim
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null \
    && rm -rf /var/lib/apt/lists/*
COPY rust /usr/local/rust
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV PATH=/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    CARGO_HOME=/usr/local/cargo \
    CARGO_HTTP_CAINFO=/etc/ssl/certs/ca-certificates.crt
LABEL org.opencontainers.image.description="Local stand-in for rust:1-slim-bookworm, built where no registry answers"
EOF
docker build --quiet -t "$image" "$context" >/dev/null
echo "==> $image built locally ($(rustc --version))"
