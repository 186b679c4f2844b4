#!/usr/bin/env bash
# Builds the sluice:dev image without pulling anything: the static binary is
# compiled on the host (deploy/build-static.sh) and packaged by
# deploy/Dockerfile.prebuilt on an empty base. For machines that reach no image
# registry; elsewhere `docker compose -f deploy/docker-compose.yml up --build`
# builds the same image from source.
#
# Usage: scripts/docker-image.sh [TAG]   (default sluice:dev)
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-sluice:dev}

echo "==> building the static sluice binary"
deploy/build-static.sh target/docker

echo "==> building image $tag"
docker build --quiet -f deploy/Dockerfile.prebuilt -t "$tag" . >/dev/null
docker image inspect -f "$tag: {{.Size}} bytes" "$tag"
