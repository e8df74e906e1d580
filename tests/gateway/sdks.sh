#!/usr/bin/env bash
# Installs the pinned clients the gateway's tests drive it with, each set in
# a virtual environment of its own under
#   ${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/python/gateway-<set>-<versions>/
#
#   bash tests/gateway/sdks.sh              the official OpenAI and Anthropic SDKs
#   bash tests/gateway/sdks.sh pydantic-ai  pydantic-ai over the OpenAI SDK it needs
#                                           (a newer one than the first set pins)
#   bash tests/gateway/sdks.sh all          both
#
# It needs python3 with venv and, the first time, access to PyPI (or a pip
# mirror). When the pinned versions are there it does nothing. The last line
# it prints is the path of the environment's python (with `all`, one line
# each, in the order above).
set -euo pipefail

OPENAI_VERSION=2.8.1
ANTHROPIC_VERSION=0.75.0
PYDANTIC_AI_VERSION=2.68.0
PYDANTIC_AI_OPENAI_VERSION=3.57.0

tools="${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/python"

if ! command -v python3 >/dev/null; then
    echo "error: python3 is missing; install Python 3.9 or later (Debian: apt-get install python3 python3-venv)" >&2
    exit 1
fi

# install NAME CHECK REQUIREMENT...: the environment NAME, made unless CHECK
# (Python that exits 0 when the pinned versions are there) passes in it.
install() {
    local name="$1" check="$2"
    shift 2
    local venv="$tools/gateway-$name"
    local python="$venv/bin/python"
    if [[ -x "$python" ]] && "$python" -c "$check" 2>/dev/null; then
        echo "$* already installed" >&2
        echo "$python"
        return
    fi
    mkdir -p "$tools"
    echo "installing $* into $venv" >&2
    rm -rf "$venv"
    trap 'rm -rf "$venv"' ERR
    python3 -m venv "$venv" >&2
    "$python" -m pip install --quiet --disable-pip-version-check "$@" >&2
    trap - ERR
    echo "$python"
}

versions="import importlib.metadata as m, sys; sys.exit(0 if all(m.version(p) == v for p, v in"

sdks() {
    install "sdks-openai-$OPENAI_VERSION-anthropic-$ANTHROPIC_VERSION" \
        "$versions [('openai', '$OPENAI_VERSION'), ('anthropic', '$ANTHROPIC_VERSION')]) else 1)" \
        "openai==$OPENAI_VERSION" "anthropic==$ANTHROPIC_VERSION"
}

pydantic_ai() {
    install "pydantic-ai-$PYDANTIC_AI_VERSION-openai-$PYDANTIC_AI_OPENAI_VERSION" \
        "$versions [('pydantic-ai-slim', '$PYDANTIC_AI_VERSION'), ('openai', '$PYDANTIC_AI_OPENAI_VERSION')]) else 1)" \
        "pydantic-ai-slim[openai]==$PYDANTIC_AI_VERSION" "openai==$PYDANTIC_AI_OPENAI_VERSION"
}

case "${1:-sdks}" in
    sdks) sdks ;;
    pydantic-ai) pydantic_ai ;;
    all) sdks; pydantic_ai ;;
    *) echo "error: unknown set ${1}; use sdks, pydantic-ai or all" >&2; exit 2 ;;
esac
