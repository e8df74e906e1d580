"""The Python peer of `cargo bench -p agent-host-core --bench corpus -- corpus/tau`:
langchain-core's `trim_messages` fitting each tau-bench run of the corpus to an
8,000-token window, end to end (read the JSON text, convert, trim, write JSON).

Run through `benches/peers/run.sh`, which installs the pinned langchain-core into a
venv and runs the agent-host bench right after, so both figures come from one run.
Inputs are the same texts the Rust bench reads: each run's `traj` as its own JSON
document (`json.dumps` of it, as `serde_json` writes it: no spaces). The like-for-like
row is `corpus/tau_trim_end_to_end_8k` (repair and packing only, the view written compact);
`corpus/tau_end_to_end_8k` runs agent-host's whole pipeline and writes indented JSON.
"""

import json
import os
import statistics
import sys
import time
from pathlib import Path

from langchain_core.messages import convert_to_messages, convert_to_openai_messages
from langchain_core.messages.utils import count_tokens_approximately, trim_messages

WINDOW = 8_000
RUNS = 10


def corpus_dir() -> Path:
    env = os.environ.get("AGENT_HOST_CORPUS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "shared" / "corpus"


def main() -> int:
    path = corpus_dir() / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"
    if not path.is_file():
        print(f"SKIPPED: no corpus at {path} (set AGENT_HOST_CORPUS)", file=sys.stderr)
        return 0
    runs = json.loads(path.read_text())
    texts = [json.dumps(run["traj"], separators=(",", ":"), ensure_ascii=False) for run in runs]
    size = sum(len(t.encode()) for t in texts)

    def load_only() -> int:
        return sum(len(json.loads(t)) for t in texts)

    def end_to_end() -> int:
        written = 0
        for text in texts:
            messages = convert_to_messages(json.loads(text))
            kept = trim_messages(
                messages,
                max_tokens=WINDOW,
                token_counter=count_tokens_approximately,
                strategy="last",
                start_on="human",
                include_system=True,
                allow_partial=False,
            )
            written += len(json.dumps(convert_to_openai_messages(kept)))
        return written

    for name, work in [("json.load", load_only), ("trim_messages end to end", end_to_end)]:
        times = []
        for _ in range(RUNS):
            start = time.perf_counter()
            work()
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        print(
            f"peer {name}: {len(texts)} histories, {size} bytes: "
            f"median {median * 1e3:.1f} ms, {size / median / 1048576:.0f} MiB/s (min {min(times) * 1e3:.1f} ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
