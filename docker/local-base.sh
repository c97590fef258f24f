#!/usr/bin/env bash
# Makes the Dockerfile's base image (its first FROM, node:24-bookworm-slim) on this machine,
# for machines that reach Debian's packages and the npm registry but no container registry.
# Where the registry answers, pull the real image instead; this one stands in for it:
#
#   - Debian bookworm, minimal (debootstrap --variant=minbase);
#   - Node 24 and npm 11 from the npm registry (the `node-linux-<arch>` and `npm` packages),
#     in /usr/local as the official image has them;
#   - a `node` user, uid and gid 1000, home /home/node, as the official image has;
#   - this machine's CA bundle, named by NODE_EXTRA_CA_CERTS, so that npm inside a build
#     trusts what the host trusts.
#
# Needs root (debootstrap, chroot) and a container engine: podman, or docker.
#   docker/local-base.sh            makes it unless an image of that name is there already
#   docker/local-base.sh --force    makes it again
set -euo pipefail
cd "$(dirname "$0")/.."

ENGINE=${CONTAINER_ENGINE:-$(command -v podman >/dev/null && echo podman || echo docker)}
BASE=$(awk 'toupper($1) == "FROM" { print $2; exit }' docker/Dockerfile)
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if [ "${1:-}" != "--force" ] && "$ENGINE" image inspect "$BASE" >/dev/null 2>&1; then
  echo "local-base: $BASE is there already" >&2
  exit 0
fi
for tool in debootstrap chroot npm; do
  command -v "$tool" >/dev/null || { echo "local-base: $tool is needed (apt-get install debootstrap)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "local-base: debootstrap needs root" >&2; exit 1; }
case "$(uname -m)" in
  x86_64 | amd64) arch=x64 deb_arch=amd64 ;;
  aarch64 | arm64) arch=arm64 deb_arch=arm64 ;;
  *) echo "local-base: no Node package for $(uname -m)" >&2; exit 1 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/root"

echo "local-base: debootstrap bookworm ($deb_arch) from $MIRROR" >&2
debootstrap --variant=minbase --arch="$deb_arch" bookworm "$root" "$MIRROR" >"$work/debootstrap.log" 2>&1 ||
  { tail -20 "$work/debootstrap.log" >&2; exit 1; }

echo "local-base: Node 24 and npm 11 from the npm registry" >&2
(cd "$work" && npm pack --silent "node-linux-$arch@24" "npm@11" >/dev/null)
tar -xzf "$work"/node-linux-*.tgz -C "$root/usr/local" --strip-components=1 package/bin/node
mkdir -p "$root/usr/local/lib/node_modules/npm"
tar -xzf "$work"/npm-*.tgz -C "$root/usr/local/lib/node_modules/npm" --strip-components=1
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"

chroot "$root" groupadd --gid 1000 node
chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --create-home node

ca_env=()
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp "$NODE_EXTRA_CA_CERTS" "$root/usr/local/share/ca-certificates/host-bundle.crt"
  ca_env=(--change "ENV NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/host-bundle.crt")
fi

# What a slim image leaves out: package lists, documentation, caches.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/tmp/*

echo "local-base: importing as $BASE" >&2
tar -C "$root" -c . | "$ENGINE" import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV NODE_VERSION=24' \
  "${ca_env[@]}" \
  --change 'CMD ["node"]' \
  - "$BASE" >/dev/null
echo "local-base: $BASE made (Node $("$root/usr/local/bin/node" --version), $("$ENGINE" image inspect --format '{{.Size}}' "$BASE") bytes)" >&2
