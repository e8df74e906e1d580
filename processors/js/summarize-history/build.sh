#!/usr/bin/env bash
# Builds the JavaScript summarize-history processor into a component, with the
# SpiderMonkey backend: it uses the host services, which are contract 0.2.0.
#
# Usage: processors/js/summarize-history/build.sh [-o OUT.wasm]
# Default output: target/lang-processors/js-summarize-history.wasm under the
# repository root. Prints the output path last.
#
# Needs the toolchain: guest-sdk/js/toolchain.sh --spidermonkey (once per machine).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="$root/target/lang-processors/js-summarize-history.wasm"
while [ $# -gt 0 ]; do
    case "$1" in
    -o) out="${2:?-o needs a path}"; shift 2 ;;
    *) echo "usage: $0 [-o OUT.wasm]" >&2; exit 2 ;;
    esac
done

if ! command -v node >/dev/null; then
    echo "error: node is missing (Node.js 20 or later): apt-get install nodejs npm, then run $root/guest-sdk/js/toolchain.sh" >&2
    exit 1
fi
# The only dependency is the SDK, a `file:` dependency on guest-sdk/js (see
# package.json). The build does not link it into node_modules here, as it
# writes nothing into the source tree: it bundles a copy of src/ in a
# temporary folder under target/ whose node_modules/agent-host-guest links to
# the SDK, from inside that folder, so that the paths the bundle records are
# the same on every machine. (For the unit tests under Node, `npm ci` here
# links it: see README.md.)
mkdir -p "$(dirname "$out")" "$root/target"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
work="$(mktemp -d "$root/target/js-summarize-history-build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir "$work/node_modules"
ln -s "$root/guest-sdk/js" "$work/node_modules/agent-host-guest"
cp -R "$here/src" "$work/src"
cd "$work"
"$root/guest-sdk/js/componentize.sh" "$work/src/component.js" "$out" --backend spidermonkey
