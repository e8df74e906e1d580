#!/usr/bin/env bash
# The Python peer and agent-host on the same histories, in one run (issue 23).
#
#   bash benches/peers/run.sh
#
# Installs the pinned langchain-core into a venv under target/ (once), runs
# benches/peers/trim_messages.py, then the agent-host bench over the same
# inputs (`corpus/tau_*`). Needs the corpus beside the checkout, or
# AGENT_HOST_CORPUS.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${CARGO_TARGET_DIR:-$root/target}/peers-venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet -r "$root/benches/peers/requirements.txt"
fi
"$venv/bin/python" "$root/benches/peers/trim_messages.py"
cd "$root"
cargo bench -p agent-host-core --bench corpus -- 'corpus/tau' 2>&1 \
    | grep -E '^corpus/tau|time:|thrpt:' | grep -v '%\]'
