#!/usr/bin/env bash
# Fuzzes agent-host-core: every importer, format detection, the write/read
# round trip, and the validator with repair. Runs each target for SECONDS
# (default 60) from its corpus in tests/fuzz/corpus/<target>, and fails on the
# first crash (the crashing input is left in tests/fuzz/artifacts/<target>).
#
#   bash tests/fuzz/run.sh 60
#
# The corpora: `seed-*` and `<format>-*` files are the repository's own fixtures
# (host/engine/src/sample.jsonl and the documents of the tests in
# core/src/format/); hash-named files are small inputs kept from longer runs
# (merged with libFuzzer's -merge=1, smallest first).
#
# Installs what is missing: the nightly toolchain (minimal profile) and
# cargo-fuzz. Builds go to target/fuzz.
set -euo pipefail
seconds="${1:-60}"
cd "$(dirname "$0")/../.."
root="$PWD"
fuzz_dir=tests/fuzz
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR_FUZZ:-$root/target/fuzz}"
# Incremental state only costs disk here.
export CARGO_INCREMENTAL=0

rustup toolchain list | grep -q '^nightly' \
    || rustup toolchain install nightly --profile minimal
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

targets=$(cargo +nightly fuzz list --fuzz-dir "$fuzz_dir")
echo "== building the fuzz targets: $(echo $targets)"
cargo +nightly fuzz build --fuzz-dir "$fuzz_dir" -O

# Work on a scratch copy of each corpus: new inputs found in a short CI run are
# not worth keeping (minimise by hand with `cargo fuzz cmin` to grow a corpus).
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
for target in $targets; do
    mkdir -p "$scratch/$target" "$fuzz_dir/artifacts/$target"
    seeds="$fuzz_dir/corpus/$target"
    echo "== fuzzing $target for ${seconds}s"
    if ! cargo +nightly fuzz run --fuzz-dir "$fuzz_dir" -O "$target" \
        "$scratch/$target" "$seeds" -- \
        -max_total_time="$seconds" -max_len=16384 -rss_limit_mb=2048 \
        -timeout=10 -print_final_stats=1 2>"$scratch/$target.log"; then
        # The panic message, then libFuzzer's summary (not the input's bytes).
        grep -A 12 'panicked at' "$scratch/$target.log" | cut -c 1-2000 || true
        grep -E '^(SUMMARY|artifact_prefix)|^==[0-9]+==ERROR' "$scratch/$target.log" || true
        echo "!! $target crashed: see $fuzz_dir/artifacts/$target" >&2
        status=1
        continue
    fi
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' \
        "$scratch/$target.log" | tr '\n' ' '
    echo
done
exit "$status"
