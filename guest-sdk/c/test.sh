#!/usr/bin/env bash
# Builds and runs the C SDK's own native tests (test_sdk.c, and the shared
# conformance cases with test_conformance.c; gcc by default,
# CC=clang works too), with AddressSanitizer and UBSan when the compiler has them.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cc="${CC:-gcc}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
sanitize=(-fsanitize=address,undefined -fno-omit-frame-pointer)
echo 'int main(void){return 0;}' >"$out/probe.c"
"$cc" "${sanitize[@]}" "$out/probe.c" -o "$out/probe" 2>/dev/null || sanitize=()
"$cc" -std=c11 -g -O1 -Wall -Wextra -Wno-missing-field-initializers "${sanitize[@]}" \
    -I"$here" \
    "$here/test_sdk.c" "$here/agent_host_guest.c" "$here/agent_host_guest_native.c" \
    -lm -o "$out/test"
"$out/test"
# The shared conformance cases (guest-sdk/conformance), against this SDK.
"$cc" -std=c11 -g -O1 -Wall -Wextra -Wno-missing-field-initializers "${sanitize[@]}" \
    -I"$here" \
    "$here/test_conformance.c" "$here/agent_host_guest.c" "$here/agent_host_guest_native.c" \
    -lm -o "$out/conformance"
"$out/conformance" "$here/../conformance/cases"
