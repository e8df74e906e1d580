#!/usr/bin/env bash
# Installs the pinned official OpenAI and Anthropic Python SDKs, the clients
# the gateway's tests drive it with, in a virtual environment under
#   ${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/python/gateway-sdks-<versions>/
# It needs python3 with venv and, the first time, access to PyPI (or a pip
# mirror). When the pinned versions are there it does nothing. The last line
# it prints is the path of the environment's python.
#
#   bash tests/gateway/sdks.sh
set -euo pipefail

OPENAI_VERSION=2.8.1
ANTHROPIC_VERSION=0.75.0

tools="${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/python"
venv="$tools/gateway-sdks-openai-$OPENAI_VERSION-anthropic-$ANTHROPIC_VERSION"
python="$venv/bin/python"

if [[ -x "$python" ]] && "$python" -c "import openai, anthropic, sys; sys.exit(0 if (openai.__version__, anthropic.__version__) == ('$OPENAI_VERSION', '$ANTHROPIC_VERSION') else 1)" 2>/dev/null; then
    echo "openai $OPENAI_VERSION and anthropic $ANTHROPIC_VERSION are already installed" >&2
    echo "$python"
    exit 0
fi

if ! command -v python3 >/dev/null; then
    echo "error: python3 is missing; install Python 3.9 or later (Debian: apt-get install python3 python3-venv)" >&2
    exit 1
fi

mkdir -p "$tools"
echo "installing openai $OPENAI_VERSION and anthropic $ANTHROPIC_VERSION into $venv" >&2
rm -rf "$venv"
trap 'rm -rf "$venv"' ERR
python3 -m venv "$venv" >&2
"$python" -m pip install --quiet --disable-pip-version-check \
    "openai==$OPENAI_VERSION" "anthropic==$ANTHROPIC_VERSION" >&2
echo "$python"
