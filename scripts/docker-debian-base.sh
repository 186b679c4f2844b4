#!/usr/bin/env bash
# Makes sure the image debian:bookworm-slim exists locally (the example
# application's base): pulled when a registry answers, otherwise built with
# debootstrap from Debian's package mirror (a minimal bookworm, as that image
# is) and imported under the same name. Installs debootstrap when missing.
set -euo pipefail
image=debian:bookworm-slim

if docker image inspect "$image" >/dev/null 2>&1; then
    exit 0
fi
if docker pull --quiet "$image" >/dev/null 2>&1; then
    exit 0
fi

echo "==> no registry answers: building $image with debootstrap"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo="sudo"
    else
        echo "debootstrap needs root (or sudo) to build $image" >&2
        exit 1
    fi
fi
if ! command -v debootstrap >/dev/null 2>&1 && [ ! -x /usr/sbin/debootstrap ]; then
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y --no-install-recommends debootstrap >/dev/null 2>&1 || {
        $sudo apt-get update -qq
        $sudo apt-get install -y --no-install-recommends debootstrap
    }
fi
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
rootfs=$(mktemp -d)
trap '$sudo rm -rf "$rootfs"' EXIT
$sudo env PATH="$PATH:/usr/sbin:/sbin" debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
# As the official slim image: no package lists, no docs, apt's own sources.
$sudo rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/*
$sudo tar -C "$rootfs" -c . | docker import --change 'CMD ["bash"]' - "$image" >/dev/null
echo "==> $image built locally"
