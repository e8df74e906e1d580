#!/usr/bin/env python3
"""Writes hostile histories of about SIZE bytes (default 52 MB) into DIR.

Each is small on disk and large once parsed, or endless in one dimension; see
BENCHMARKS.md ("Reading hostile histories") for what agent-host makes of them:

    python3 tests/hostile/inputs.py /tmp/hostile [SIZE]
    for f in /tmp/hostile/*; do /usr/bin/time -f "$f %e s %M KB" \
        target/release/agent-host inspect "$f" > /dev/null; done
"""

import os
import sys


def main() -> None:
    out = sys.argv[1]
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 52_000_000
    os.makedirs(out, exist_ok=True)
    zeros = ",".join(["0"] * (size // 2))

    def write(name: str, text: str) -> None:
        with open(os.path.join(out, name), "w") as f:
            f.write(text)

    # One message whose unknown field holds a huge array of zeros (kept as
    # metadata: one byte of input per value).
    write("zeros.jsonl", '{"type":"user","id":"m1","content":"hi","x":[%s]}\n' % zeros)
    # One message of many empty parts.
    part = '{"type":"text","text":""}'
    write("parts.jsonl", '{"type":"user","id":"m1","parts":[%s]}\n'
          % ",".join([part] * (size // (len(part) + 1))))
    # Many tiny messages.
    line = '{"type":"user","content":"a"}\n'
    write("lines.jsonl", line * (size // len(line)))
    # Empty arrays and empty objects.
    write("arrays.jsonl", '{"type":"user","id":"m1","content":"hi","x":[%s]}\n'
          % ",".join(["[]"] * (size // 3)))
    write("objects.jsonl", '{"type":"user","id":"m1","content":"hi","x":[%s]}\n'
          % ",".join(["{}"] * (size // 3)))
    # A Claude Code record with a huge tool result.
    write("claude-code.jsonl",
          '{"type":"user","uuid":"u1","sessionId":"s","parentUuid":null,'
          '"message":{"role":"user","content":"hi"},"toolUseResult":[%s]}\n' % zeros)
    # An OpenAI document with a huge extra field.
    write("openai.json", '[{"role":"user","content":"hi","x":[%s]}]' % zeros)


if __name__ == "__main__":
    main()
