#!/usr/bin/env bash
# What `npm run test:image` needs, installed from Debian's packages where missing:
#   podman and runc  a container engine (skipped where a Docker engine already answers)
#   debootstrap      to make the Dockerfile's base image where no registry is reachable
#   docker-compose   to check docker/compose.yaml and run its service
# Needs root, or sudo. Elsewhere it says what to install and fails.
set -euo pipefail

missing=()
if ! docker info >/dev/null 2>&1; then
  command -v podman >/dev/null || missing+=(podman)
  command -v runc >/dev/null || missing+=(runc)
fi
command -v debootstrap >/dev/null || missing+=(debootstrap)
docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null || missing+=(docker-compose)
[ ${#missing[@]} -eq 0 ] && exit 0

as_root=()
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null && as_root=(sudo) || {
    echo "install-container-tools: ${missing[*]} needed, and installing needs root" >&2
    exit 1
  }
fi
if ! command -v apt-get >/dev/null; then
  echo "install-container-tools: install ${missing[*]} (or Docker with its compose plugin); this script knows only apt-get" >&2
  exit 1
fi
echo "install-container-tools: installing ${missing[*]}" >&2
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null ||
  { "${as_root[@]}" apt-get update -q >/dev/null && "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null; }
