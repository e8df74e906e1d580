#!/usr/bin/env bash
# The npm package against the native core, in one run on the same machine:
# builds and packs the package (build.sh), installs the tarball into a
# temporary folder, then times the same operations over the corpus's
# histories with the native Rust core (benches/native.rs, release profile)
# and with the package under Node.js (bench.mjs). Prints a Markdown table.
#
#   bash core/js/bench.sh [CORPUS_DIR]   (default ../shared/corpus beside the checkout)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
corpus="${1:-${AGENT_HOST_CORPUS:-$root/../shared/corpus}}"
[[ -d "$corpus" ]] || { echo "error: no corpus at $corpus" >&2; exit 1; }
corpus="$(cd "$corpus" && pwd)"

work="$(mktemp -d "${TMPDIR:-/tmp}/agent-host-core-js-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
tarball="$(bash "$here/build.sh" "$work/packed" | tail -n 1)"
mkdir -p "$work/user"
(cd "$work/user" && npm install --silent --no-audit --no-fund --prefer-offline "$tarball" >&2)
cp "$here/bench.mjs" "$work/user/"

echo "== native (cargo bench, release)" >&2
native="$(cargo bench --quiet --manifest-path "$root/Cargo.toml" -p agent-host-core-js --bench native -- "$corpus")"
echo "== the npm package (node $(node --version))" >&2
js="$(cd "$work/user" && node bench.mjs "$corpus")"

node - "$native" "$js" "$tarball" <<'JS'
const [native, js, tarball] = process.argv.slice(2).map((a, i) => (i < 2 ? JSON.parse(a) : a));
const { statSync, readFileSync } = require("node:fs");
const { gzipSync } = require("node:zlib");
console.log(`${native.histories} histories, ${(native.bytes / 1e6).toFixed(2)} MB; median of 15 passes over all of them, ms per pass\n`);
console.log("| operation | native Rust core | agent-host-core in Node.js | JS / native |");
console.log("|---|---:|---:|---:|");
const names = { load: "load (detect + parse)", compact: "pipeline at 8,000 tokens", dump: "write the view as OpenAI", all: "load + pipeline + write" };
for (const op of ["load", "compact", "dump", "all"]) {
  console.log(`| ${names[op]} | ${native[op].toFixed(1)} | ${js[op].toFixed(1)} | ${(js[op] / native[op]).toFixed(2)}x |`);
}
const size = statSync(tarball).size;
console.log(`\ntarball ${tarball.split("/").pop()}: ${(size / 1024).toFixed(0)} KiB (npm pack's gzip)`);
JS
