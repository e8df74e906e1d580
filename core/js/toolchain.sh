#!/usr/bin/env bash
# Installs the pinned tools of the npm package `agent-host-core`, the exact
# versions of toolchain/package-lock.json: jco (@bytecodealliance/jco: `jco
# new` makes a component of the core module, `jco opt` shrinks it, `jco
# transpile` makes the JavaScript and TypeScript), and workerd (Cloudflare's
# Workers runtime, npm package `workerd`, its binary for this platform an
# optional dependency), which tests/package.rs runs the package's edge entry
# in. Both sit in node_modules/.bin.
#
# Where: ${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/js-core/.
# A second run with the same package.json and lock does nothing (their SHA-256
# is compared with the one recorded at the last install), so CI calls it on
# every run. Downloads go through npm's own cache (--prefer-offline).
#
# After changing toolchain/package.json, regenerate its lock against the
# public registry (no `resolved` URLs, so a mirror works too):
#
#   cd core/js/toolchain && npm install --package-lock-only \
#       --omit-lockfile-registry-resolved --no-audit --no-fund
#
# Needs: Node.js 20 or later and npm (Debian: `apt-get install nodejs npm`).
#
# Usage: core/js/toolchain.sh   (prints the path of the jco binary last)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/js-core"
source="$here/toolchain"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "error: node and npm are needed (Node.js 20 or later): apt-get install nodejs npm" >&2
    exit 1
fi
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
    echo "error: Node.js $(node --version) is too old; the package needs Node.js 20 or later" >&2
    exit 1
fi

want="$(cat "$source/package.json" "$source/package-lock.json" | sha256sum | cut -d' ' -f1)"
stamp="$dest/.installed-lock.sha256"
jco="$dest/node_modules/.bin/jco"
if [ -x "$jco" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "already installed: $dest (lock ${want:0:12})" >&2
    echo "$jco"
    exit 0
fi
echo "installing jco and workerd into $dest" >&2
mkdir -p "$dest"
rm -f "$stamp"
cp "$source/package.json" "$source/package-lock.json" "$dest/"
# `npm ci` installs exactly what the lock records and never writes it.
if ! (cd "$dest" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error >&2); then
    echo "error: npm ci failed in $dest; if it says the lock and package.json are out of sync," >&2
    echo "       regenerate $source/package-lock.json (see the comment at the top of $0)" >&2
    exit 1
fi
if [ ! -x "$jco" ]; then
    echo "error: npm finished but jco is missing from $dest/node_modules/.bin" >&2
    exit 1
fi
echo "$want" >"$stamp"
echo "$jco"
