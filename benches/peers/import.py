"""`agent-host sessions import` of one large history against Python's `json.load` of
the same file, in one run (issue 23: "`sessions import` of a 96 MB log is 2.6 times
slower than Python's `json.load` of it with the file store and 5.3 times with SQLite").

    python3 benches/peers/import.py [AGENT_HOST_BINARY] [RUNS]

The input is the corpus' tau-bench runs, their messages concatenated into one OpenAI
message list until it passes 96 MB (written once under the target folder). Each step
runs RUNS times (default 5) as its own process, and the medians are printed: the wall
time, and the CPU time (user + system) of the process, which the disk's syncs do not
inflate. Steps:

- `json.load`: the peer, in a child Python process (same start-up cost as ours);
- `convert --to jsonl`: read, parse and write the store's own lines, no store;
- `sessions import`, file store: the same, appended to a new session with its sync;
- `sessions import`, SQLite store.

Needs the corpus beside the checkout, or AGENT_HOST_CORPUS. Standard library only.
"""

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET_BYTES = 96_000_000


def corpus_dir() -> Path:
    env = os.environ.get("AGENT_HOST_CORPUS")
    return Path(env) if env else ROOT.parent / "shared" / "corpus"


def build_input(target: Path) -> Path:
    path = target / "peers-import" / "big.json"
    if path.is_file() and path.stat().st_size > TARGET_BYTES:
        return path
    runs = json.loads((corpus_dir() / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json").read_text())
    messages, size = [], 0
    while size <= TARGET_BYTES:
        for run in runs:
            messages.extend(run["traj"])
            size += len(json.dumps(run["traj"], ensure_ascii=False))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(messages, ensure_ascii=False))
    return path


def timed(argv: list[str], fresh=None) -> tuple[float, float]:
    """Wall and CPU seconds of one child process."""
    if fresh:
        fresh()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    if not (corpus_dir() / "tau-bench-gpt4o-airline").is_dir():
        print(f"SKIPPED: no corpus at {corpus_dir()} (set AGENT_HOST_CORPUS)", file=sys.stderr)
        return 0
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    binary = sys.argv[1] if len(sys.argv) > 1 else str(target / "release" / "agent-host")
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    source = build_input(target)
    size = source.stat().st_size
    work = Path(tempfile.mkdtemp(prefix="agent-host-import-", dir=target))
    store, db = work / "store", work / "store.db"

    def fresh_store():
        shutil.rmtree(store, ignore_errors=True)

    def fresh_db():
        for p in work.glob("store.db*"):
            p.unlink()

    steps = [
        ("json.load (Python peer)", [sys.executable, "-c", f"import json; json.load(open({str(source)!r}))"], None),
        ("convert --to jsonl", [binary, "convert", str(source), "--to", "jsonl", "--output", str(work / "out.jsonl")], None),
        ("sessions import, file store", [binary, "sessions", "import", str(source), "--session", "big", "--store", str(store)], fresh_store),
        ("sessions import, SQLite", [binary, "sessions", "import", str(source), "--session", "big", "--store", f"sqlite:{db}"], fresh_db),
    ]
    results = {name: [] for name, _, _ in steps}
    try:
        # Rounds, so that a busy moment of the machine falls on every step alike.
        for _ in range(runs):
            for name, argv, fresh in steps:
                results[name].append(timed(argv, fresh))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    peer_wall = statistics.median(w for w, _ in results[steps[0][0]])
    peer_cpu = statistics.median(c for _, c in results[steps[0][0]])
    print(f"input: {source} ({size} bytes), {runs} rounds, medians")
    for name, _, _ in steps:
        wall = statistics.median(w for w, _ in results[name])
        cpu = statistics.median(c for _, c in results[name])
        print(
            f"{name:32} wall {wall * 1e3:7.0f} ms ({wall / peer_wall:4.2f}x the peer)"
            f"  cpu {cpu * 1e3:7.0f} ms ({cpu / peer_cpu:4.2f}x)  {size / wall / 1048576:6.1f} MiB/s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
