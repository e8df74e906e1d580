#!/usr/bin/env bash
# The Python peers and agent-host on the same histories, in one run (issue 23).
#
#   bash benches/peers/run.sh            # both
#   bash benches/peers/run.sh trim       # trim_messages against the core pipeline
#   bash benches/peers/run.sh redact     # redact-secrets, sandboxed, against its peer
#
# Installs the pinned langchain-core into a venv under target/ (once).
# `trim`: runs benches/peers/trim_messages.py, then the agent-host bench over
# the same inputs (`corpus/tau_*`). `redact`: runs the agent-host bench
# `redact`, which writes the inputs, runs benches/peers/redact_secrets.py on
# them (stdlib only) before and after its own rounds, and prints both. Needs
# the corpus beside the checkout, or AGENT_HOST_CORPUS.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${CARGO_TARGET_DIR:-$root/target}/peers-venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet -r "$root/benches/peers/requirements.txt"
fi
what="${1:-all}"
cd "$root"
if [ "$what" = all ] || [ "$what" = trim ]; then
    "$venv/bin/python" "$root/benches/peers/trim_messages.py"
    cargo bench -p agent-host-core --bench corpus -- 'corpus/tau' 2>&1 \
        | grep -E '^corpus/tau|time:|thrpt:' | grep -v '%\]'
fi
if [ "$what" = all ] || [ "$what" = redact ]; then
    PEER_PYTHON="$venv/bin/python" cargo bench -p agent-host --bench redact
fi
