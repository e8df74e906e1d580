#!/usr/bin/env bash
# Builds this processor into a component: bundles src/component.js with the
# processor and the agent-host SDK, then makes the component with QuickJS
# (componentize-qjs). Set AGENT_HOST_JS_BACKEND=spidermonkey, or pass
# --backend spidermonkey, for the SpiderMonkey backend (componentize-js).
#
# Usage: ./build.sh [-o OUT.wasm] [--backend quickjs|spidermonkey]
# Default output: target/{{name}}.wasm. Prints the output path last.
# Needs the toolchain once per machine: {{sdk_dir}}/toolchain.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
sdk={{sdk_dir_shell}}
out="$here/target/{{name}}.wasm"
backend=()
while [ $# -gt 0 ]; do
    case "$1" in
    -o) out="${2:?-o needs a path}"; shift 2 ;;
    --backend) backend=(--backend "${2:?--backend needs quickjs or spidermonkey}"); shift 2 ;;
    *) echo "usage: $0 [-o OUT.wasm] [--backend quickjs|spidermonkey]" >&2; exit 2 ;;
    esac
done

if [ ! -d "$here/node_modules/agent-host-guest" ]; then
    echo "error: the SDK is not linked yet: run \`npm install\` in $here first" >&2
    exit 1
fi
exec "$sdk/componentize.sh" "$here/src/component.js" "$out" "${backend[@]}"
