#!/usr/bin/env bash
# Builds the JavaScript redact-secrets processor into a component.
#
# Usage: processors/js/redact-secrets/build.sh [-o OUT.wasm] [--backend quickjs|spidermonkey]
# Default output: target/lang-processors/js-redact-secrets.wasm under the
# repository root. Prints the output path last.
#
# Needs the toolchain: guest-sdk/js/toolchain.sh (once per machine).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="$root/target/lang-processors/js-redact-secrets.wasm"
backend=()
while [ $# -gt 0 ]; do
    case "$1" in
    -o) out="${2:?-o needs a path}"; shift 2 ;;
    --backend) backend=(--backend "${2:?--backend needs quickjs or spidermonkey}"); shift 2 ;;
    *) echo "usage: $0 [-o OUT.wasm] [--backend quickjs|spidermonkey]" >&2; exit 2 ;;
    esac
done

if ! command -v npm >/dev/null; then
    echo "error: npm is missing (Node.js 20 or later): apt-get install nodejs npm, then run $root/guest-sdk/js/toolchain.sh" >&2
    exit 1
fi
# Links the SDK (a `file:` dependency) into node_modules, as the lock says.
(cd "$here" && npm ci --offline --no-audit --no-fund --loglevel=error >&2)
exec "$root/guest-sdk/js/componentize.sh" "$here/src/component.js" "$out" "${backend[@]}"
