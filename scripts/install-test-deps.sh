#!/usr/bin/env bash
# Installs what the test suite needs and a fresh machine may lack: kcat (Debian's,
# built on librdkafka 2.0) for the old-client smoke test, and the C toolchain
# pieces rdkafka's bundled librdkafka build uses (cc also compiles the storage
# fault shim of compat/shims/ that the compat tests preload into the broker),
# curl for the docker test's metrics scrape, openssl for the certificates of
# the Python clients' SSL listener test, iproute2 and iptables for the
# network-namespace cluster tests (compat/src/netns.rs), mount and umount
# for the fault runs' data disks (compat/src/faults/nemesis/disk.rs), Go with Debian's packaged sarama
# (1.22, and the Go sources it depends on) for compat/sarama/, and a Python
# virtualenv (target/python-venv) holding the pinned pure-Python clients of
# compat/python/requirements.txt. DejaVu Sans (fonts-dejavu-core) gives the fault
# runs' timeline pictures (compat/src/faults/timeline.rs) their text.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v kcat >/dev/null 2>&1 || need+=(kcat)
command -v make >/dev/null 2>&1 || need+=(make)
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v c++ >/dev/null 2>&1 || need+=(g++)
command -v perl >/dev/null 2>&1 || need+=(perl)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v umount >/dev/null 2>&1 || need+=(mount)
command -v go >/dev/null 2>&1 || need+=(golang-go)
dpkg-query -W -f='${Status}' golang-github-shopify-sarama-dev 2>/dev/null | grep -q 'ok installed' \
    || need+=(golang-github-shopify-sarama-dev)
dpkg-query -W -f='${Status}' fonts-dejavu-core 2>/dev/null | grep -q 'ok installed' \
    || need+=(fonts-dejavu-core)
if ! command -v python3 >/dev/null 2>&1; then
    need+=(python3 python3-venv)
elif ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    need+=(python3-venv)
fi

if [ ${#need[@]} -gt 0 ]; then
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
fi

# The Python clients: (re)made only when the pinned set changed since the last
# install, which a copy of the requirements inside the venv records.
venv=target/python-venv
requirements=compat/python/requirements.txt
if ! [ -x "$venv/bin/python" ] || ! cmp -s "$requirements" "$venv/installed-requirements.txt"; then
    echo "==> python clients into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$requirements"
    cp "$requirements" "$venv/installed-requirements.txt"
fi
