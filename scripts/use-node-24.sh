# Source this file (`. scripts/use-node-24.sh`) to run Tributary on Node 24 LTS when the machine's
# Node is older than 22. It fetches the official Node 24 build from the npm registry (the
# `node-<platform>-<arch>` package), keeps it under ~/.cache/tributary, and puts it first on PATH
# for this shell. With Node 22 or newer already installed it does nothing.

tributary_use_node_24() {
  local major=0
  if command -v node >/dev/null 2>&1; then
    major=$(node -p 'process.versions.node.split(".")[0]')
  fi
  if [ "$major" -ge 22 ]; then
    return 0
  fi
  local os arch
  case "$(uname -s)" in
    Linux) os=linux ;;
    Darwin) os=darwin ;;
    *) echo "use-node-24: no Node 24 package for $(uname -s); install Node 22 or 24 yourself" >&2; return 1 ;;
  esac
  case "$(uname -m)" in
    x86_64 | amd64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) echo "use-node-24: no Node 24 package for $(uname -m); install Node 22 or 24 yourself" >&2; return 1 ;;
  esac
  local dir="${XDG_CACHE_HOME:-$HOME/.cache}/tributary/node-24-$os-$arch"
  if [ ! -x "$dir/bin/node" ]; then
    local tmp
    tmp=$(mktemp -d) || return 1
    echo "use-node-24: fetching node-$os-$arch@24 from the npm registry (machine's Node is ${major:-absent})" >&2
    if ! (cd "$tmp" && npm pack --silent "node-$os-$arch@24" >/dev/null); then
      rm -rf "$tmp"
      echo "use-node-24: could not fetch node-$os-$arch@24" >&2
      return 1
    fi
    mkdir -p "$dir.partial" && tar -xzf "$tmp"/node-*.tgz -C "$dir.partial" --strip-components=1
    rm -rf "$tmp" "$dir" && mv "$dir.partial" "$dir"
  fi
  export PATH="$dir/bin:$PATH"
  hash -r
  echo "use-node-24: using $(node --version) from $dir" >&2
}

tributary_use_node_24
