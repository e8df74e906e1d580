#!/usr/bin/env bash
# Builds the npm package `agent-host-core` and packs it into DIR (default
# target/npm). The last line it prints is the tarball's path.
#
#   bash core/js/build.sh [DIR]
#
# 1. cargo builds this crate for wasm32-unknown-unknown (profile `core-js`):
#    a core module that imports nothing;
# 2. jco (pinned, installed by toolchain.sh) makes a component of it
#    (`jco new`), shrinks it with wasm-opt and transpiles it into JavaScript,
#    a core wasm file and TypeScript types (`jco transpile -O -m`); a second
#    transpile with `--instantiation async` gives the JavaScript of the entry
#    for edge runtimes (`agent-host-core/instantiate`), which is passed the
#    compiled core modules instead of loading them: the same big core module,
#    shipped once (checked byte for byte), and two tiny ones;
# 3. the package (package/: package.json, index.js, instantiate.js, api.js,
#    their .d.ts, README.md) and jco's output in its dist/ are packed by
#    `npm pack`.
# Everything is staged in a temporary folder: the source tree is not written.
#
# Needs: cargo with the wasm32-unknown-unknown target
# (`rustup target add wasm32-unknown-unknown`), Node.js 20+ and npm.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/npm}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

jco="$(bash "$here/toolchain.sh" | tail -n 1)"

if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    echo "error: the Rust target wasm32-unknown-unknown is missing: rustup target add wasm32-unknown-unknown" >&2
    exit 1
fi

# The package's version is the workspace's.
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)"
package_version="$(node -p 'require(process.argv[1]).version' "$here/package/package.json")"
if [[ "$version" != "$package_version" ]]; then
    echo "error: core/js/package/package.json says version $package_version, the workspace $version" >&2
    exit 1
fi

echo "== building the core module (cargo, wasm32-unknown-unknown, profile core-js)" >&2
cargo build --quiet --manifest-path "$root/Cargo.toml" -p agent-host-core-js \
    --target wasm32-unknown-unknown --profile core-js >&2
target_dir="$(cargo metadata --manifest-path "$root/Cargo.toml" --format-version 1 --no-deps |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).target_directory))')"
module="$target_dir/wasm32-unknown-unknown/core-js/agent_host_core_js.wasm"
[[ -f "$module" ]] || { echo "error: cargo made no $module" >&2; exit 1; }

stage="$(mktemp -d "${TMPDIR:-/tmp}/agent-host-core-js.XXXXXX")"
trap 'rm -rf "$stage"' EXIT

echo "== making the component and transpiling it (jco)" >&2
"$jco" new "$module" -o "$stage/core.wasm" >&2
imports="$("$jco" wit "$stage/core.wasm" | grep -c '^ *import ' || true)"
if [[ "$imports" != 0 ]]; then
    echo "error: the core component imports something; it must import nothing to run without shims:" >&2
    "$jco" wit "$stage/core.wasm" >&2
    exit 1
fi
mkdir -p "$stage/package"
cp "$here/package/package.json" "$here/package/index.js" "$here/package/index.d.ts" \
    "$here/package/instantiate.js" "$here/package/instantiate.d.ts" "$here/package/api.js" \
    "$here/package/README.md" "$stage/package/"
"$jco" transpile "$stage/core.wasm" --name agent-host-core -o "$stage/package/dist" \
    --optimize --minify --quiet >&2

echo "== the entry for edge runtimes (jco transpile --instantiation async)" >&2
"$jco" transpile "$stage/core.wasm" --name agent-host-core -o "$stage/async" \
    --instantiation async --optimize --minify --quiet >&2
# Its JavaScript and its core modules join the package (instantiate.d.ts types
# the entry, with the interfaces' types of the default entry: jco's differ only
# in leaving out `Disposable`, which both JavaScripts implement). The big core
# module must be the default entry's, shipped once; the two tiny ones (the
# shim and fixup of the History resource's destructor, which the default
# entry inlines and compiles from base64) are files here, as an edge runtime
# must be given them compiled too. instantiate.js names exactly these three.
modules="$(cd "$stage/async" && ls -- *.wasm | sort | tr '\n' ' ')"
if [[ "$modules" != "agent-host-core.core.wasm agent-host-core.core2.wasm agent-host-core.core3.wasm " ]]; then
    echo "error: jco's --instantiation output has the core modules $modules;" >&2
    echo "       core/js/package/instantiate.js expects agent-host-core.core.wasm, core2 and core3" >&2
    exit 1
fi
if ! cmp -s "$stage/async/agent-host-core.core.wasm" "$stage/package/dist/agent-host-core.core.wasm"; then
    echo "error: jco's two transpiles made different core modules: the entries cannot share one" >&2
    exit 1
fi
cp "$stage/async/agent-host-core.js" "$stage/package/dist/agent-host-core.instantiate.js"
cp "$stage/async/agent-host-core.core2.wasm" "$stage/async/agent-host-core.core3.wasm" \
    "$stage/package/dist/"

echo "== packing" >&2
tarball="$(cd "$stage/package" && npm pack --silent --pack-destination "$out" 2>/dev/null | tail -n 1)"
[[ -f "$out/$tarball" ]] || { echo "error: npm pack made no tarball in $out" >&2; exit 1; }
echo "$out/$tarball"
