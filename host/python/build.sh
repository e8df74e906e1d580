#!/usr/bin/env bash
# Builds the `agent-host` wheel (one abi3 wheel for CPython 3.9 and later)
# with the pinned maturin of host/python/tools.sh, into DIR (default
# target/wheels). The last line it prints is the wheel's path.
#
#   bash host/python/build.sh [--debug] [DIR]
#
# --debug builds the dev profile (quicker to build, slower to run: the tests
# use it); the default is the release profile, what a user installs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
profile=(--release)
if [[ "${1:-}" == "--debug" ]]; then
    profile=(--profile dev)
    shift
fi
out="${1:-$root/target/wheels}"
python="$(bash "$here/tools.sh" | tail -n 1)"
mkdir -p "$out"
# Only this build's wheel is reported: older ones may sit in the folder.
before="$(mktemp)"
trap 'rm -f "$before"' EXIT
ls "$out"/agent_host-*.whl 2>/dev/null >"$before" || true
"$python" -m maturin build "${profile[@]}" --quiet --manifest-path "$here/Cargo.toml" \
    --interpreter "$python" --out "$out" >&2
wheel="$(ls -t "$out"/agent_host-*-abi3-*.whl | head -n 1)"
[[ -f "$wheel" ]] || { echo "error: maturin made no wheel in $out" >&2; exit 1; }
echo "$wheel"
