#!/usr/bin/env bash
# Installs the `agent-host` wheel into a fresh virtual environment (with
# pytest and the adapters' frameworks, langchain-core, langchain, pydantic-ai-slim
# and openai-agents, from the wheelhouse of host/python/tools.sh, no network)
# and runs the package's tests (host/python/tests) there.
#
#   bash host/python/test.sh [pytest arguments...]
#
# AGENT_HOST_WHEEL names the wheel to test (else one is built by
# `build.sh --debug`). The tests load the standard processors from
# AGENT_HOST_PROCESSORS (a folder, as `agent-host processor build processors
# --out-dir DIR` writes it) and hostile test guests from
# AGENT_HOST_GUEST_PANIC, AGENT_HOST_GUEST_SPIN and AGENT_HOST_GUEST_GROW;
# `cargo test -p agent-host --test integration python` sets them all.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tools_python="$(bash "$here/tools.sh" | tail -n 1)"
wheelhouse="$(dirname "$(dirname "$tools_python")")/wheelhouse"
wheel="${AGENT_HOST_WHEEL:-}"
if [[ -z "$wheel" ]]; then
    wheel="$(bash "$here/build.sh" --debug | tail -n 1)"
fi
venv="$(mktemp -d "${TMPDIR:-/tmp}/agent-host-pytest.XXXXXX")"
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index \
    --find-links "$wheelhouse" "$wheel" pytest langchain-core langchain pydantic-ai-slim openai-agents >&2
cd "$here/tests"
# Not `exec`: the EXIT trap must still remove the venv (about 300 MB) afterwards.
"$venv/bin/python" -m pytest -p no:cacheprovider -q "$@"
