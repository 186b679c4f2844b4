#!/usr/bin/env bash
# Installs what the test suite needs and a fresh machine may lack: kcat (Debian's,
# built on librdkafka 2.0) for the old-client smoke test, and the C toolchain
# pieces rdkafka's bundled librdkafka build uses, and curl for the docker test's
# metrics scrape.
set -euo pipefail

need=()
command -v kcat >/dev/null 2>&1 || need+=(kcat)
command -v make >/dev/null 2>&1 || need+=(make)
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v c++ >/dev/null 2>&1 || need+=(g++)
command -v perl >/dev/null 2>&1 || need+=(perl)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v curl >/dev/null 2>&1 || need+=(curl)

if [ ${#need[@]} -eq 0 ]; then
    exit 0
fi

echo "==> installing: ${need[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo="sudo"
    else
        echo "cannot install ${need[*]}: not root and no sudo" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y --no-install-recommends "${need[@]}" >/dev/null 2>&1; then
    $sudo apt-get update -qq
    $sudo apt-get install -y --no-install-recommends "${need[@]}"
fi
