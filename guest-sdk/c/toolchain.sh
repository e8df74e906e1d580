#!/usr/bin/env bash
# Installs the toolchain that builds agent-host history processors written in C.
#
#   bash guest-sdk/c/toolchain.sh        # install what is missing
#   bash guest-sdk/c/toolchain.sh --env  # print the PATH line build scripts use
#
# Two halves:
#   - Debian packages for the compiler, the linker and the C library:
#     clang, lld (wasm-ld), wasi-libc and libclang-rt-14-dev-wasm32
#     (compiler-rt builtins for wasm32). Installed with apt-get when missing
#     (as root, or through sudo).
#   - Two Rust tools, pinned, built with `cargo install --locked` into
#     ${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/c/bin:
#     wit-bindgen (C bindings from the WIT contract) and wasm-tools (turns the
#     core module into a component). About 3 to 4 minutes each on 2 cores.
#
# Idempotent: a tool whose pinned version is already in the cache is not
# built again, so a second run takes well under a second.
set -euo pipefail

WIT_BINDGEN_VERSION=0.63.0
WASM_TOOLS_VERSION=1.262.0
# Only the subcommands the build uses (component new/wit, validate, print):
# the default feature set also builds fuzzers and shrinkers we never run.
WASM_TOOLS_FEATURES=component,validate,print,parse,metadata

TOOLS_ROOT="${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/c"
BIN="$TOOLS_ROOT/bin"

if [[ "${1:-}" == "--env" ]]; then
    echo "export PATH=\"$BIN:\$PATH\""
    exit 0
fi

say() { printf 'toolchain(c): %s\n' "$*" >&2; }

# --- Debian packages ---------------------------------------------------------

# What each package provides, checked by a file rather than by dpkg so that a
# machine with the same tools from elsewhere is accepted too.
missing=()
command -v clang >/dev/null 2>&1 || missing+=(clang)
command -v wasm-ld >/dev/null 2>&1 || missing+=(lld)
[[ -f /usr/lib/wasm32-wasi/libc.a || -f /usr/share/wasi-sysroot/lib/wasm32-wasi/libc.a ]] ||
    missing+=(wasi-libc)
compgen -G '/usr/lib/llvm-*/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a' >/dev/null ||
    missing+=(libclang-rt-14-dev-wasm32)

if ((${#missing[@]})); then
    say "installing Debian packages: ${missing[*]}"
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 || {
            say "not root and no sudo: run 'apt-get install -y ${missing[*]}' as root"
            exit 1
        }
        sudo=(sudo)
    fi
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}"
else
    say "Debian packages present (clang, lld, wasi-libc, compiler-rt for wasm32)"
fi

# --- Pinned Rust tools -------------------------------------------------------

command -v cargo >/dev/null 2>&1 || {
    say "cargo is missing: install Rust (https://rustup.rs) first"
    exit 1
}

# install CRATE VERSION BINARY [cargo install arguments...]
install() {
    local crate=$1 version=$2 binary=$3
    shift 3
    local have=""
    if [[ -x "$BIN/$binary" ]]; then
        have=$("$BIN/$binary" --version 2>/dev/null | awk '{print $2}')
    fi
    if [[ "$have" == "$version" ]]; then
        say "$binary $version already in $BIN"
        return
    fi
    say "building $crate $version into $TOOLS_ROOT (a few minutes, once)"
    cargo install --quiet --locked --force --root "$TOOLS_ROOT" "$crate@$version" "$@"
}

mkdir -p "$TOOLS_ROOT"
install wit-bindgen-cli "$WIT_BINDGEN_VERSION" wit-bindgen
install wasm-tools "$WASM_TOOLS_VERSION" wasm-tools \
    --no-default-features --features "$WASM_TOOLS_FEATURES"

say "ready: $BIN/wit-bindgen, $BIN/wasm-tools"
