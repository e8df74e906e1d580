#!/usr/bin/env bash
# Builds the Python port of summarize-history into a WebAssembly component.
#
#   ./build.sh [-o OUT.wasm]
#
# The default output is target/lang-processors/python-summarize-history.wasm
# at the root of the agent-host checkout; the last line printed is the output
# path. Needs the pinned componentize-py: bash guest-sdk/python/toolchain.sh
# (then it works offline).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="$root/target/lang-processors/python-summarize-history.wasm"
while [[ $# -gt 0 ]]; do
    case "$1" in
        -o|--output) out="$2"; shift 2 ;;
        *) echo "usage: build.sh [-o OUT.wasm]" >&2; exit 2 ;;
    esac
done
exec "$root/guest-sdk/python/componentize.sh" --app summarize_history --path "$here/src" -o "$out"
