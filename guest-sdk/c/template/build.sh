#!/usr/bin/env bash
# Builds {{name}} into a WebAssembly component: ./build.sh [-o OUT.wasm]
# (default {{name}}.wasm here). Needs the toolchain of the agent-host
# checkout's guest-sdk/c/toolchain.sh. The last line printed is the output path.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
sdk="${AGENT_HOST_C_SDK:-{{sdk}}}"
out="$here/{{name}}.wasm"
while (($#)); do
    case "$1" in
    -o) out="$2"; shift 2 ;;
    *) echo "usage: $0 [-o OUT.wasm]" >&2; exit 2 ;;
    esac
done
"$sdk/build-component.sh" -o "$out" "$here/processor.c"
echo "$out"
