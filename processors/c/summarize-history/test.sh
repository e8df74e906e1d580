#!/usr/bin/env bash
# Builds and runs the native tests of the C summarize-history (gcc by default;
# CC=clang works too), with AddressSanitizer and UBSan when the compiler has them.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
sdk="$here/../../../guest-sdk/c"
cc="${CC:-gcc}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
sanitize=(-fsanitize=address,undefined -fno-omit-frame-pointer)
echo 'int main(void){return 0;}' >"$out/probe.c"
"$cc" "${sanitize[@]}" "$out/probe.c" -o "$out/probe" 2>/dev/null || sanitize=()
"$cc" -std=c11 -g -O1 -Wall -Wextra -Wno-missing-field-initializers "${sanitize[@]}" \
    -I"$sdk" -I"$here" \
    "$here/test_summarize_history.c" "$here/summarize_history.c" \
    "$sdk/agent_host_guest.c" "$sdk/agent_host_guest_native.c" -lm -o "$out/test"
"$out/test"
