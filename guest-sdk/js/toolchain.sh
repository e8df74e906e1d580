#!/usr/bin/env bash
# Installs the pinned JavaScript toolchain that builds agent-host processors:
# rolldown (bundles a processor and the SDK into one module) and
# componentize-qjs (QuickJS: the default backend), the exact versions of
# toolchain/package-lock.json. With --spidermonkey it also installs the other
# backend, @bytecodealliance/componentize-js (SpiderMonkey), from
# toolchain-spidermonkey/package-lock.json.
#
# Where: ${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/js/ (and js/spidermonkey/).
# A second run with the same lock file does nothing: it compares the lock's
# SHA-256 with the one recorded at the last install, so CI can call it on
# every run. Downloads go through npm's own cache (--prefer-offline), so a
# reinstall on the same machine does not download again.
#
# Why `npm install` and not `npm ci`: the lock files list only the native
# bindings that the registry we resolve against holds for this platform,
# and `npm ci` refuses a lock that lacks other platforms' optional bindings.
# `npm install` over the committed lock installs exactly the versions it
# records (the script checks the lock is left unchanged).
#
# Needs: Node.js 20 or later and npm (Debian: `apt-get install nodejs npm`).
#
# Usage: guest-sdk/js/toolchain.sh [--spidermonkey]   (prints the tools folder last)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tools="${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/js"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "error: node and npm are needed (Node.js 20 or later): apt-get install nodejs npm" >&2
    exit 1
fi
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
    echo "error: Node.js $(node --version) is too old; the toolchain needs Node.js 20 or later" >&2
    exit 1
fi

# install SOURCE DEST TOOL...: the package in folder SOURCE into DEST, unless
# the same lock is installed there already; TOOLs must then be in .bin.
install() {
    local source="$1" dest="$2"
    shift 2
    local want stamp
    want="$(sha256sum "$source/package-lock.json" | cut -d' ' -f1)"
    stamp="$dest/.installed-lock.sha256"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        echo "already installed: $dest (lock ${want:0:12})" >&2
        return
    fi
    echo "installing $(basename "$source") into $dest" >&2
    mkdir -p "$dest"
    rm -f "$stamp"
    cp "$source/package.json" "$source/package-lock.json" "$dest/"
    (cd "$dest" && npm install --prefer-offline --no-audit --no-fund --loglevel=error >&2)
    if ! cmp -s "$source/package-lock.json" "$dest/package-lock.json"; then
        echo "error: npm changed the lock in $dest: $source/package-lock.json is out of date" >&2
        exit 1
    fi
    local tool
    for tool in "$@"; do
        if [ ! -x "$dest/node_modules/.bin/$tool" ]; then
            echo "error: npm finished but $tool is missing from $dest/node_modules/.bin" >&2
            exit 1
        fi
    done
    echo "$want" >"$stamp"
}

install "$here/toolchain" "$tools" rolldown componentize-qjs
if [ "${1:-}" = "--spidermonkey" ]; then
    install "$here/toolchain-spidermonkey" "$tools/spidermonkey" componentize-js
fi
echo "$tools"
