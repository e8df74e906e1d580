"""Benchmark: fitting every corpus history into a token budget three ways,
in one run on one machine.

- ``agent_host.run`` in process (``compact=False``: repair, then packing into
  the budget, newest first, the system prompt kept), from message dicts (read
  and format detection timed) and on histories already read;
- the ``agent-host run`` CLI, one process per history (``--no-compact``), the
  way a Python program without the package calls it;
- langchain-core's ``trim_messages`` (``strategy="last"``, system kept,
  ``start_on="human"``, the approximate token counter) on messages already
  converted to LangChain objects (conversion not timed: the baseline's best
  case).

    python host/python/bench.py CORPUS_DIR AGENT_HOST_BINARY [ROUNDS]

(``none`` for the binary leaves the CLI out.)

Run by ``bash host/python/bench.sh`` with the release wheel installed.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import agent_host
from langchain_core.messages import convert_to_messages, trim_messages
from langchain_core.messages.utils import count_tokens_approximately

WINDOW = 4000
"""The model window; agent-host keeps a quarter for the answer (1,000)."""
BUDGET = 3000
"""What the history may take: the window less agent-host's reserve."""


def corpus_histories(corpus: Path) -> List[List[Dict[str, Any]]]:
    """Every tau-bench trajectory and every Claude Code session, as OpenAI
    message dicts (the sessions converted by agent-host, untimed)."""
    runs = json.loads((corpus / "tau-bench-gpt4o-airline/gpt-4o-airline.json").read_text())
    histories = [r["traj"] for r in runs]
    for path in sorted((corpus / "claude-code-sessions-ccv").glob("*.jsonl")):
        histories.append(agent_host.load(path).to_messages("openai"))
    return histories


def timed(f: Callable[[], None], rounds: int) -> List[float]:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    corpus, binary = Path(sys.argv[1]), sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    load_before = os.getloadavg()
    histories = corpus_histories(corpus)
    n = len(histories)
    messages = sum(len(h) for h in histories)

    def python_api() -> None:
        for h in histories:
            agent_host.run(h, context_limit=WINDOW, compact=False)

    read = [agent_host.from_messages(h) for h in histories]

    def python_api_read() -> None:
        for h in read:
            agent_host.run(h, context_limit=WINDOW, compact=False)

    lc = [convert_to_messages(h) for h in histories]

    def langchain() -> None:
        for h in lc:
            trim_messages(
                h,
                max_tokens=BUDGET,
                strategy="last",
                token_counter=count_tokens_approximately,
                include_system=True,
                start_on="human",
            )

    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, h in enumerate(histories):
            p = Path(tmp) / f"{i}.json"
            p.write_text(json.dumps(h))
            files.append(p)

        def cli() -> None:
            for p in files:
                subprocess.run(
                    [binary, "run", "--input", str(p), "--context-limit", str(WINDOW),
                     "--no-compact", "--quiet", "--output", os.devnull],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )

        results = {
            "agent_host.run (in process, from message dicts)": timed(python_api, rounds),
            "agent_host.run (in process, on a History already read)": timed(python_api_read, rounds),
        }
        if binary != "none":
            results["agent-host run (CLI, a process per history)"] = timed(cli, max(1, rounds // 2))
        results["langchain-core trim_messages"] = timed(langchain, rounds)

    # Check the in-process results keep within the budget.
    for h in histories:
        out = agent_host.run(h, context_limit=WINDOW, compact=False).report["output"]
        assert out["violations"] == [], out

    base = statistics.median(results["langchain-core trim_messages"])
    print(f"{n} histories, {messages} messages; window {WINDOW}, budget {BUDGET} tokens")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    load_after = os.getloadavg()
    print(
        "load average (1, 5, 15 min): "
        f"{', '.join(f'{x:.2f}' for x in load_before)} before, "
        f"{', '.join(f'{x:.2f}' for x in load_after)} after"
    )
    print()
    print("| way | rounds | median total | per history | vs trim_messages |")
    print("|---|---|---|---|---|")
    for name, times in results.items():
        m = statistics.median(times)
        print(f"| {name} | {len(times)} | {m * 1000:.1f} ms | {m / n * 1e6:.0f} µs | {m / base:.2f}x |")


if __name__ == "__main__":
    main()
