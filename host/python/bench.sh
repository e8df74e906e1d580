#!/usr/bin/env bash
# The Python package's benchmark (host/python/bench.py): the release wheel
# and the release CLI, the corpus of ../shared/corpus (or AGENT_HOST_CORPUS).
#
#   bash host/python/bench.sh [ROUNDS]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
corpus="${AGENT_HOST_CORPUS:-$root/../shared/corpus}"
tools_python="$(bash "$here/tools.sh" | tail -n 1)"
wheelhouse="$(dirname "$(dirname "$tools_python")")/wheelhouse"
wheel="$(bash "$here/build.sh" "$target/wheels-release" | tail -n 1)"
(cd "$root" && cargo build -q --release -p agent-host)
venv="$(mktemp -d "${TMPDIR:-/tmp}/agent-host-bench.XXXXXX")"
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index \
    --find-links "$wheelhouse" "$wheel" langchain-core >&2
# What was measured: the commit the wheel and the CLI were built from.
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    commit="$commit (with uncommitted changes)"
fi
echo "commit: $commit"
"$venv/bin/python" "$here/bench.py" "$corpus" "$target/release/agent-host" "${1:-5}"
