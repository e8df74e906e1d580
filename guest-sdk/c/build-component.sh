#!/usr/bin/env bash
# Builds a C history processor into a WebAssembly component.
#
#   guest-sdk/c/build-component.sh -o OUT.wasm [-I DIR]... SOURCE.c...
#
# 1. wit-bindgen c: bindings for wit/v0.2.0 (world history-processor), into a
#    temporary folder; they are made at every build, never committed.
# 2. clang --target=wasm32-wasi -mexec-model=reactor: the sources, the SDK
#    (agent_host_guest.c and its glue agent_host_guest_wit.c) and the
#    bindings into a core module. A reactor has no `_start`; the exports are
#    the ones the bindings mark with export_name.
# 3. wasm-tools component new: the core module into a component. No WASI
#    adapter: a processor that does not touch stdio, files or clocks imports
#    nothing from WASI (wasi-libc's malloc, string and regex functions need
#    no host), and the script fails if a WASI import shows up.
#
# The tools come from guest-sdk/c/toolchain.sh (the pinned wit-bindgen and
# wasm-tools in ${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/c/bin).
# Extra compiler flags: CFLAGS in the environment (default -O2).
set -euo pipefail

SDK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WIT="$SDK/../../wit/v0.2.0"
BIN="${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/c/bin"

out=""
includes=()
sources=()
while (($#)); do
    case "$1" in
    -o) out="$2"; shift 2 ;;
    -I) includes+=("-I$2"); shift 2 ;;
    -I*) includes+=("$1"); shift ;;
    *) sources+=("$1"); shift ;;
    esac
done
if [[ -z "$out" || ${#sources[@]} -eq 0 ]]; then
    echo "usage: $0 -o OUT.wasm [-I DIR]... SOURCE.c..." >&2
    exit 2
fi

need() {
    echo "error: $1 is missing; run guest-sdk/c/toolchain.sh (from the agent-host checkout)" >&2
    exit 1
}
[[ -x "$BIN/wit-bindgen" ]] || need "wit-bindgen ($BIN/wit-bindgen)"
[[ -x "$BIN/wasm-tools" ]] || need "wasm-tools ($BIN/wasm-tools)"
command -v clang >/dev/null 2>&1 || need "clang"
command -v wasm-ld >/dev/null 2>&1 || need "wasm-ld (Debian package lld)"
[[ -d "$WIT" ]] || { echo "error: no WIT contract at $WIT" >&2; exit 1; }

build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT

if ! "$BIN/wit-bindgen" c "$WIT" --world history-processor --out-dir "$build" >"$build/wit-bindgen.log" 2>&1; then
    cat "$build/wit-bindgen.log" >&2
    exit 1
fi

# shellcheck disable=SC2086 # CFLAGS is a list of flags
clang --target=wasm32-wasi -mexec-model=reactor -std=c11 ${CFLAGS:--O2} \
    -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
    -I"$SDK" -I"$build" "${includes[@]}" \
    "${sources[@]}" "$SDK/agent_host_guest.c" "$SDK/agent_host_guest_wit.c" \
    "$build/history_processor.c" "$build/history_processor_component_type.o" \
    -Wl,--strip-debug -o "$build/core.wasm"

mkdir -p "$(dirname "$out")"
"$BIN/wasm-tools" component new "$build/core.wasm" -o "$out"

if "$BIN/wasm-tools" component wit "$out" | grep -q 'import wasi:'; then
    echo "error: $out imports WASI:" >&2
    "$BIN/wasm-tools" component wit "$out" | grep 'import wasi:' >&2
    echo "(something calls stdio, files or clocks; the host serves WASI closed, so drop the call)" >&2
    exit 1
fi
