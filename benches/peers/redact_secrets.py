"""The Python peer of `cargo bench -p agent-host --bench redact`: redact-secrets'
default kinds as stdlib `re` regexes, end to end over the same history files
(read each file, `json.loads`, redact every text of every message, `json.dumps`,
write the result to a file of its own).

    python3 benches/peers/redact_secrets.py [DIR]

DIR holds OpenAI chat documents (`*.json`, a list of messages), as the agent-host
bench writes them before it runs this script, so both sides read the same bytes.
Without DIR, the corpus' tau-bench trajectories are the inputs, each written to a
temporary folder first (a compact `json.dumps` of its `traj`).

The texts of a message are the ones redact-secrets scans: `content` (a string, or
the `text` of each text part), `reasoning_content`, and each tool call's
`function.arguments`.

Each kind is its own regex, applied with `re.sub` in redact-secrets' order (what a
Python author writes: a list of patterns, one pass each), with redact-secrets'
checks as lookarounds: the boundary, "mixed" and "holds a digit" (lookaheads over
the run), a bearer token's length. Two checks are made on the match, in Python: a
private key's run of 16 base64 characters, and a secret that is already the
placeholder. Where redact-secrets differs from one pass per kind: it scans once,
and at each position the first kind that matches wins, so matches never overlap
(here a URL password holding an OpenAI key is replaced twice, once per kind), and
`Bearer sk-...` is an `openai-key` there by a rule, here because the `openai-key`
pass ran first. Where a check made on the match fails, the pass goes on after
the match, where redact-secrets goes on at the next character. The boundary
looks at the input's character before a match, redact-secrets' at the output's
(the placeholder's last one right after a replacement). The bench compares the
counts per kind on its inputs.

The results go to a temporary folder (in PEER_TMP when set; the bench puts it
beside the inputs), each timed run into a folder of its own.

Prints each kind's count (a line `counts {json}`, which the bench reads), then
the median and minimum of PEER_RUNS (default 10) timed runs, and MiB/s of input.
"""

import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

RUNS = int(os.environ.get("PEER_RUNS", "10"))

# redact-secrets' patterns (processors/redact-secrets/src/kinds.rs) without `\A`,
# with each check the Rust code makes after a match written as a lookaround. Each
# opens with a literal or a character class (the boundary is looked behind after
# the first characters), so that `re` skips to where one can start.
KINDS = [
    (
        "private-key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=:, \t\r\n\\-]*?"
        r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|(?:\r?\n|(?:\\r)?\\n)[A-Za-z0-9+/=:, \t\r\n\\-]*)",
    ),
    (
        "anthropic-key",
        r"sk-ant-(?<![A-Za-z0-9_-]sk-ant-)(?=[A-Za-z0-9_-]*?[0-9])(?=[A-Za-z0-9_-]*?[A-Z])"
        r"(?=[A-Za-z0-9_-]*?[a-z])[A-Za-z0-9_-]{16,}",
    ),
    (
        "openai-key",
        r"sk-(?<![A-Za-z0-9_-]sk-)(?!ant-)(?=[A-Za-z0-9_-]*?[0-9])(?=[A-Za-z0-9_-]*?[A-Z])"
        r"(?=[A-Za-z0-9_-]*?[a-z])[A-Za-z0-9_-]{20,}",
    ),
    ("aws-access-key", r"A[KS]IA(?<![A-Za-z0-9_-]A[KS]IA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    (
        "aws-secret-key",
        r"""[Ss][Ee][Cc][Rr][Ee][Tt]_?[Aa][Cc][Cc][Ee][Ss][Ss]_?[Kk][Ee][Yy](?:\\?["'])?[ \t]*(?:=>|:|=)[ \t]*(?:\\?["'])?"""
        r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
    ),
    (
        "github-token",
        r"g(?<![A-Za-z0-9_-]g)(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{22,})",
    ),
    ("slack-webhook", r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9_/-]{20,})"),
    ("slack-token", r"x(?<![A-Za-z0-9_-]x)(?:ox[a-z]|app)-(?=[A-Za-z0-9-]*?[0-9])[A-Za-z0-9-]{10,}"),
    # The token: at least 16 characters, with a digit.
    (
        "bearer-token",
        r"[Bb](?<![A-Za-z0-9_-][Bb])[Ee][Aa][Rr][Ee][Rr][ \t]+(?=[A-Za-z0-9._~+/-]*?[0-9])"
        r"(?=[A-Za-z0-9._~+/-]{16}|[A-Za-z0-9._~+/-]+=+(?<=[A-Za-z0-9._~+/=-]{16}))"
        r"(?P<secret>[A-Za-z0-9._~+/-]+=*)",
    ),
    (
        "url-password",
        r"""://[^\t\n\x0B\x0C\r :/?#@\[\]"'<>\\`]*:(?![${])(?P<secret>[^\t\n\x0B\x0C\r /?#"'<>\\`]+)@""",
    ),
]
NAMES = [name for name, _ in KINDS]
PATTERNS = [re.compile(pattern, re.ASCII) for _, pattern in KINDS]
PLACEHOLDERS = [f"[REDACTED:{name}]" for name in NAMES]
BASE64_RUN = re.compile(r"[A-Za-z0-9+/=]{16}")


def redactor(counts: list[int]):
    """A function that redacts one text, adding to `counts` per kind."""

    def replacer(k: int):
        placeholder = PLACEHOLDERS[k]
        group = "secret" if "secret" in PATTERNS[k].groupindex else 0

        def replace(m: re.Match) -> str:
            secret = m.group(group)
            if secret == placeholder or (k == 0 and not BASE64_RUN.search(secret)):
                return m.group(0)
            counts[k] += 1
            if group == 0:
                return placeholder
            base = m.start()
            start, end = m.span(group)
            whole = m.group(0)
            return whole[: start - base] + placeholder + whole[end - base :]

        return replace

    passes = [(p.sub, replacer(k)) for k, p in enumerate(PATTERNS)]

    def redact(text: str) -> str:
        for sub, replace in passes:
            text = sub(replace, text)
        return text

    return redact


def redact_message(message: dict, redact) -> None:
    content = message.get("content")
    if isinstance(content, str):
        message["content"] = redact(content)
    elif isinstance(content, list):
        for part in content:
            if part.get("type") == "text" and isinstance(part.get("text"), str):
                part["text"] = redact(part["text"])
    if isinstance(message.get("reasoning_content"), str):
        message["reasoning_content"] = redact(message["reasoning_content"])
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        if isinstance(function.get("arguments"), str):
            function["arguments"] = redact(function["arguments"])


def corpus_dir() -> Path:
    env = os.environ.get("AGENT_HOST_CORPUS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "shared" / "corpus"


def inputs_from_corpus(into: Path) -> list[Path] | None:
    path = corpus_dir() / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"
    if not path.is_file():
        return None
    files = []
    for i, run in enumerate(json.loads(path.read_text())):
        file = into / f"tau{i:04}.json"
        file.write_text(json.dumps(run["traj"], separators=(",", ":"), ensure_ascii=False))
        files.append(file)
    return files


def main() -> int:
    scratch = tempfile.TemporaryDirectory(dir=os.environ.get("PEER_TMP"))
    out = Path(scratch.name) / "out"
    out.mkdir()
    first = out / "first"
    first.mkdir()
    if len(sys.argv) > 1:
        files = sorted(Path(sys.argv[1]).glob("*.json"))
    else:
        inputs = Path(scratch.name) / "in"
        inputs.mkdir()
        files = inputs_from_corpus(inputs)
        if files is None:
            print(f"SKIPPED: no corpus at {corpus_dir()} (set AGENT_HOST_CORPUS)", file=sys.stderr)
            return 0
    size = sum(f.stat().st_size for f in files)

    def end_to_end(counts: list[int], out: Path) -> None:
        redact = redactor(counts)
        for file in files:
            messages = json.loads(file.read_text())
            for message in messages:
                redact_message(message, redact)
            (out / file.name).write_text(json.dumps(messages, separators=(",", ":"), ensure_ascii=False))

    def load_write_only(out: Path) -> None:
        for file in files:
            messages = json.loads(file.read_text())
            (out / file.name).write_text(json.dumps(messages, separators=(",", ":"), ensure_ascii=False))

    counts = [0] * len(NAMES)
    end_to_end(counts, first)
    print("counts " + json.dumps({n: c for n, c in zip(NAMES, counts) if c}))
    for name, work in [
        ("read, json.loads, json.dumps, write", load_write_only),
        ("redact end to end", lambda out: end_to_end([0] * len(NAMES), out)),
    ]:
        times = []
        for run in range(RUNS):
            # A fresh folder each time: rewriting a file ext4 has just written
            # makes its close wait for the disk (`auto_da_alloc`).
            fresh = out / f"{name[:4]}{run}"
            fresh.mkdir()
            start = time.perf_counter()
            work(fresh)
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        print(
            f"peer {name}: {len(files)} histories, {size} bytes: median {median * 1e3:.1f} ms, "
            f"{size / median / 1048576:.0f} MiB/s (min {min(times) * 1e3:.1f} ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
