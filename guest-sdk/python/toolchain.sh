#!/usr/bin/env bash
# Installs the pinned Python toolchain for agent-host processors:
# componentize-py, in its own virtual environment under
#   ${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/python/componentize-py-<version>/
# It needs python3 (3.9 or later, with venv) and, the first time, access to
# PyPI (or a pip find-links/index mirror). When the pinned version is already
# there it does nothing, so CI can run it on every build. The last line it
# prints is the path of the componentize-py executable.
#
#   bash guest-sdk/python/toolchain.sh
set -euo pipefail

COMPONENTIZE_PY_VERSION=0.25.1

tools="${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/python"
venv="$tools/componentize-py-$COMPONENTIZE_PY_VERSION"
exe="$venv/bin/componentize-py"

if [[ -x "$exe" ]] && [[ "$("$exe" --version 2>/dev/null)" == "componentize-py $COMPONENTIZE_PY_VERSION" ]]; then
    echo "componentize-py $COMPONENTIZE_PY_VERSION is already installed" >&2
    echo "$exe"
    exit 0
fi

if ! command -v python3 >/dev/null; then
    echo "error: python3 is missing; install Python 3.9 or later (Debian: apt-get install python3 python3-venv)" >&2
    exit 1
fi

mkdir -p "$tools"
echo "installing componentize-py $COMPONENTIZE_PY_VERSION into $venv" >&2
rm -rf "$venv"
# An interrupted install leaves no working executable, so the next run
# starts over (the check above runs it).
trap 'rm -rf "$venv"' ERR
if ! python3 -m venv "$venv" >&2; then
    echo "error: python3 cannot create a virtual environment; install its venv module (Debian: apt-get install python3-venv)" >&2
    exit 1
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "componentize-py==$COMPONENTIZE_PY_VERSION" >&2
trap - ERR
"$exe" --version >&2
echo "$exe"
