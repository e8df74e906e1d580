#!/usr/bin/env bash
# Builds a Python history processor into a WebAssembly component.
#
#   componentize.sh --app MODULE --path DIR -o OUT.wasm
#
# MODULE is the Python module (in DIR) whose Processor subclass is marked
# with @export. The component is built with componentize-py (pinned; installed
# by toolchain.sh beside this script) for the world `history-processor` of
# wit/v0.2.0, with every WASI import replaced by a trapping stub
# (--stub-wasi): it imports nothing but agent-host's `host` interface. Works
# offline once the toolchain is installed. Prints the output path last.
set -euo pipefail

sdk="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
wit="$sdk/../../wit/v0.2.0"
version=0.25.1
exe="${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/python/componentize-py-$version/bin/componentize-py"

app="" src="" out=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --app) app="$2"; shift 2 ;;
        --path) src="$2"; shift 2 ;;
        -o|--output) out="$2"; shift 2 ;;
        *) echo "usage: componentize.sh --app MODULE --path DIR -o OUT.wasm" >&2; exit 2 ;;
    esac
done
if [[ -z "$app" || -z "$src" || -z "$out" ]]; then
    echo "usage: componentize.sh --app MODULE --path DIR -o OUT.wasm" >&2
    exit 2
fi

if [[ ! -x "$exe" ]] || [[ "$("$exe" --version 2>/dev/null)" != "componentize-py $version" ]]; then
    echo "error: componentize-py $version is not installed (looked for $exe);" >&2
    echo "       install it with: bash $sdk/toolchain.sh" >&2
    exit 1
fi
if ! command -v python3 >/dev/null; then
    echo "error: python3 is missing (the build checks the SDK with it); install Python 3.9 or later" >&2
    exit 1
fi
if [[ ! -f "$wit/history.wit" ]]; then
    echo "error: no WIT contract at $wit: this script must stay in guest-sdk/python of an agent-host checkout" >&2
    exit 1
fi

src="$(cd "$src" && pwd)"
mkdir -p "$(dirname "$out")"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
build="$(mktemp -d "${TMPDIR:-/tmp}/agent-host-python.XXXXXX")"
trap 'rm -rf "$build"' EXIT

# The bindings, generated from the WIT at every build (never committed): the
# SDK's native mirror of the contract's types must agree with them.
"$exe" -q -d "$wit" -w history-processor bindings "$build/bindings"
PYTHONPATH="$sdk" python3 -B -m agent_host_guest.selfcheck "$build/bindings"

# The entry module: the author's module registers its processor with @export,
# the SDK's `Processor` class is what componentize-py exports. It turns off
# bytecode caches first: componentize-py imports the author's modules at build
# time, and would otherwise leave __pycache__ folders in the author's folder.
mkdir -p "$build/app"
cat > "$build/app/agent_host_app.py" <<PY
import sys
sys.dont_write_bytecode = True  # nothing written into the author's folder
import $app  # noqa: E402,F401  (registers the processor)
from agent_host_guest.component import Processor  # noqa: F401
PY

# Only the app, the author's folder and the SDK package go in: no
# site-packages, no SDK tests or templates.
mkdir -p "$build/sdk"
cp -R "$sdk/agent_host_guest" "$build/sdk/"
rm -rf "$build/sdk/agent_host_guest/__pycache__"
cd "$build/app"
env -u VIRTUAL_ENV PYTHONNOUSERSITE=1 "$exe" -q -d "$wit" -w history-processor \
    componentize agent_host_app -p "$build/app" -p "$src" -p "$build/sdk" \
    --stub-wasi -o "$out"
echo "$out"
