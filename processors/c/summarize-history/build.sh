#!/usr/bin/env bash
# Builds the C port of summarize-history into a component.
#
#   processors/c/summarize-history/build.sh [-o OUT.wasm]
#
# Default output: target/lang-processors/c-summarize-history.wasm in the
# repository; the last line printed is the output path. The toolchain comes
# from guest-sdk/c/toolchain.sh.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="$root/target/lang-processors/c-summarize-history.wasm"
while (($#)); do
    case "$1" in
    -o) out="$2"; shift 2 ;;
    *) echo "usage: $0 [-o OUT.wasm]" >&2; exit 2 ;;
    esac
done

"$root/guest-sdk/c/build-component.sh" -o "$out" "$here/summarize_history.c"
echo "$out"
