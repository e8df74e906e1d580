#!/usr/bin/env bash
# Installs the pinned tools the Python package is built and tested with
# (maturin, pytest, and langchain-core for the benchmark's baseline) in a
# virtual environment under
#   ${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/python/py-package-<versions>/
# It needs python3 with venv and, the first time, access to PyPI (or a pip
# mirror). When the pinned versions are there it does nothing. Beside it,
# wheelhouse/ holds the wheels of pytest and of the frameworks the adapters are tested
# with, langchain-core, langchain, pydantic-ai-slim and openai-agents (and their
# dependencies), that host/python/test.sh installs into a fresh environment. The last line
# it prints is the path of the environment's python.
#
#   bash host/python/tools.sh
set -euo pipefail

MATURIN_VERSION=1.16.0
PYTEST_VERSION=9.2.0
LANGCHAIN_CORE_VERSION=1.8.1
PYDANTIC_AI_VERSION=2.68.0
LANGCHAIN_VERSION=1.5.2
OPENAI_AGENTS_VERSION=0.24.0

tools="${AGENT_HOST_TOOLS:-$HOME/.cache/agent-host/tools}/python"
venv="$tools/py-package-maturin-$MATURIN_VERSION-pytest-$PYTEST_VERSION-langchain-core-$LANGCHAIN_CORE_VERSION-pydantic-ai-$PYDANTIC_AI_VERSION-langchain-$LANGCHAIN_VERSION-openai-agents-$OPENAI_AGENTS_VERSION"
python="$venv/bin/python"

check="import importlib.metadata as m, sys; sys.exit(0 if (m.version('maturin'), m.version('pytest'), m.version('langchain-core')) == ('$MATURIN_VERSION', '$PYTEST_VERSION', '$LANGCHAIN_CORE_VERSION') else 1)"
if [[ -x "$python" ]] && [[ -f "$venv/wheelhouse/.complete" ]] && "$python" -c "$check" 2>/dev/null; then
    echo "maturin $MATURIN_VERSION, pytest $PYTEST_VERSION and langchain-core $LANGCHAIN_CORE_VERSION are already installed" >&2
    echo "$python"
    exit 0
fi

if ! command -v python3 >/dev/null; then
    echo "error: python3 is missing; install Python 3.9 or later (Debian: apt-get install python3 python3-venv)" >&2
    exit 1
fi

mkdir -p "$tools"
echo "installing maturin $MATURIN_VERSION, pytest $PYTEST_VERSION and langchain-core $LANGCHAIN_CORE_VERSION into $venv" >&2
rm -rf "$venv"
trap 'rm -rf "$venv"' ERR
python3 -m venv "$venv" >&2
"$python" -m pip install --quiet --disable-pip-version-check \
    "maturin==$MATURIN_VERSION" "pytest==$PYTEST_VERSION" "langchain-core==$LANGCHAIN_CORE_VERSION" >&2
# The test environments are made fresh for every run and filled from this
# wheelhouse with --no-index: the tests themselves need no network.
"$python" -m pip download --quiet --disable-pip-version-check --dest "$venv/wheelhouse" \
    "pytest==$PYTEST_VERSION" "langchain-core==$LANGCHAIN_CORE_VERSION" \
    "pydantic-ai-slim==$PYDANTIC_AI_VERSION" "langchain==$LANGCHAIN_VERSION" \
    "openai-agents==$OPENAI_AGENTS_VERSION" >&2
touch "$venv/wheelhouse/.complete"
echo "$python"
