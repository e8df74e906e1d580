#!/usr/bin/env bash
# Builds a JavaScript processor into an agent-host component: bundles the
# entry file with what it imports (the processor, the SDK) into one ES module
# with rolldown, then makes the component with the chosen backend:
#
#   quickjs       componentize-qjs --sync --stub-wasi (the default): QuickJS,
#                 about 2 MB, no WASI imports, fast to load and to call;
#                 contract 0.1.0 (see below).
#   spidermonkey  componentize-js with every WASI feature it can disable
#                 disabled: SpiderMonkey (StarlingMonkey), about 12 MB, no
#                 WASI imports either, slower to compile and to call;
#                 contract 0.2.0.
#
# The backend is --backend, else $AGENT_HOST_JS_BACKEND, else quickjs.
#
# The tools come from guest-sdk/js/toolchain.sh (toolchain.sh --spidermonkey
# for the second backend).
#
# Usage: componentize.sh ENTRY.js OUT.wasm [--backend quickjs|spidermonkey]
#        (prints OUT.wasm last)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tools="${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/js"
wits="$here/../../wit"

if [ $# -lt 2 ]; then
    echo "usage: $0 ENTRY.js OUT.wasm [--backend quickjs|spidermonkey]" >&2
    exit 2
fi
entry="$1"
out="$2"
backend="${AGENT_HOST_JS_BACKEND:-quickjs}"
if [ "${3:-}" = "--backend" ]; then
    backend="${4:?--backend needs quickjs or spidermonkey}"
fi

# The contract each backend builds. SpiderMonkey: 0.2.0 (the history stays in
# the host; the SDK reads headers, and messages on first read). QuickJS:
# 0.1.0, as componentize-qjs (0.4.5, the newest) never drops the borrowed
# `history` handle a 0.2.0 `process` receives, so wasmtime would refuse every
# call ("borrow handles still remain at the end of the call"). The SDK takes
# either shape of `process`, so processors are the same source for both.
case "$backend" in
spidermonkey) contract=0.2.0 ;;
*) contract=0.1.0 ;;
esac
wit="$wits/v$contract"

missing() {
    echo "error: $1 is not installed in $2; run $here/toolchain.sh$3 (needs Node.js 20 and npm)" >&2
    exit 1
}
[ -x "$tools/node_modules/.bin/rolldown" ] || missing rolldown "$tools" ""

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"

# One module: the host's interface stays an import, everything else is in.
# The host interface is the same in 0.1.0 and 0.2.0, so an entry may import
# either version; the import is renamed to the version built. The services
# interface is 0.2.0's only: an entry that imports it needs SpiderMonkey.
"$tools/node_modules/.bin/rolldown" "$entry" --format esm --platform neutral \
    --external 'agent-host:history/host@0.1.0' --external 'agent-host:history/host@0.2.0' \
    --external 'agent-host:history/services@0.2.0' \
    --file "$work/bundle.js" --log-level warn >&2
sed -i "s#agent-host:history/host@0\\.[12]\\.0#agent-host:history/host@$contract#g" "$work/bundle.js"
# The host's services (summarize, countTokens, readMemory) are 0.2.0 only.
# (An import statement, at the start of a line: the SDK's own texts name the
# interface too.)
if [ "$contract" != 0.2.0 ] && grep -qE "^import .*[\"']agent-host:history/services@" "$work/bundle.js"; then
    echo "error: $entry imports agent-host:history/services@0.2.0, which the $backend backend's" >&2
    echo "       contract ($contract) does not have: build it with --backend spidermonkey (contract 0.2.0)" >&2
    exit 1
fi

case "$backend" in
quickjs)
    [ -x "$tools/node_modules/.bin/componentize-qjs" ] || missing componentize-qjs "$tools" ""
    # --sync: the host calls processors synchronously (no component-model
    # async); --stub-wasi: no WASI import is left, so the component needs no
    # grant and the host's audit finds nothing to serve.
    (cd "$work" && "$tools/node_modules/.bin/componentize-qjs" --wit "$wit" --world history-processor \
        --js bundle.js --sync --stub-wasi -o component.wasm >&2)
    ;;
spidermonkey)
    sm="$tools/spidermonkey/node_modules/.bin/componentize-js"
    [ -x "$sm" ] || missing componentize-js "$tools/spidermonkey" " --spidermonkey"
    "$sm" "$work/bundle.js" --wit "$wit" --world-name history-processor \
        -d stdio random clocks http fetch-event -o "$work/component.wasm" >&2
    ;;
*)
    echo "error: unknown backend '$backend': use quickjs or spidermonkey" >&2
    exit 2
    ;;
esac
mv "$work/component.wasm" "$out"
echo "$out"
