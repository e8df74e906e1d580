"""The shared conformance cases (guest-sdk/conformance/cases/*.json, the
format in its README), run against the Python SDK: the `conformance`
processor the cases configure, written with the SDK's own API, over each
case's history; its answer, whether it fetched the messages, and the SDK's
native token estimates, compared with what the case expects. The Rust,
JavaScript and C SDKs run the same cases."""

import dataclasses
import json
import pathlib
import sys
import unittest
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from agent_host_guest import (  # noqa: E402
    BadConfig,
    Failed,
    FileRef,
    History,
    Image,
    ImagePart,
    FilePart,
    Item_Insert,
    Item_Keep,
    Item_Replace,
    MediaSource_Path,
    MediaSource_Url,
    MessageFlags,
    Processor,
    Reasoning,
    Role,
    TextPart,
    ToolCall,
    estimate_message_tokens,
    estimate_tokens,
    host,
    message,
    parse_config,
)
from agent_host_guest import testing  # noqa: E402
from agent_host_guest.history import header_of  # noqa: E402

host.echo = False

CASES = pathlib.Path(__file__).resolve().parents[2] / "conformance" / "cases"


@dataclasses.dataclass
class Step:
    op: str
    index: Optional[int] = None
    turns: Optional[int] = None
    tokens: Optional[int] = None
    role: Optional[str] = None
    text: Optional[str] = None
    message: Any = None


@dataclasses.dataclass
class Config:
    steps: List[Step] = dataclasses.field(default_factory=list)


def needs(step: Step, key: str) -> Any:
    value = getattr(step, key)
    if value is None:
        raise BadConfig(f"op `{step.op}` needs `{key}`")
    return value


ROLES = {"system": Role.SYSTEM, "user": Role.USER, "assistant": Role.ASSISTANT, "tool": Role.TOOL}
FLAGS = {"synthetic": MessageFlags.SYNTHETIC, "summary": MessageFlags.SUMMARY, "error": MessageFlags.ERROR}


class Conformance(Processor):
    """The processor the cases configure: a list of steps, each one call of
    the SDK's API."""

    name = "conformance"
    Config = Config

    def process(self, history: History, config: Config) -> None:
        for step in config.steps:
            op = step.op
            if op == "drop":
                history.drop(needs(step, "index"))
            elif op == "restore":
                history.restore(needs(step, "index"))
            elif op == "keep_last_turns":
                history.keep_last_turns(needs(step, "turns"))
            elif op == "settle_tool_exchanges":
                history.settle_tool_exchanges()
            elif op == "drop_role":
                role = ROLES[needs(step, "role")]
                history.retain_headers(lambda h: h.role != role)
            elif op == "drop_over_tokens":
                most = needs(step, "tokens")
                history.retain_headers(lambda h: h.tokens <= most)
            elif op == "drop_containing":
                text = needs(step, "text")
                history.retain(lambda m: text not in m.content)
            elif op == "replace":
                history.replace(needs(step, "index"), to_message(needs(step, "message")))
            elif op == "set_content":
                history.message_mut(needs(step, "index")).content = needs(step, "text")
            elif op == "clear_tool_calls":
                history.message_mut(needs(step, "index")).tool_calls = []
            elif op == "insert_before":
                history.insert_before(needs(step, "index"), to_message(needs(step, "message")))
            elif op == "push":
                history.push(to_message(needs(step, "message")))
            elif op == "fail":
                raise Failed(needs(step, "text"))
            else:
                raise BadConfig(f"unknown op `{op}`")


def read_config(text: str) -> Config:
    """The configuration, with the unsigned fields checked as the Rust SDK's
    `u32` fields are (Python's `int` has no unsigned kind)."""
    config = parse_config(text, Config)
    for i, step in enumerate(config.steps):
        for key in ("index", "turns", "tokens"):
            value = getattr(step, key)
            if value is not None and value < 0:
                raise BadConfig(f"`steps[{i}].{key}`: invalid value: {value}, expected an unsigned integer")
    return config


def keys(obj: Dict[str, Any], known: List[str], what: str) -> Dict[str, Any]:
    """`obj`, refusing keys this harness does not know: a case in a shape it
    cannot read fails rather than being half read."""
    if not isinstance(obj, dict):
        raise AssertionError(f"{what} is not an object: {obj!r}")
    for key in obj:
        if key not in known:
            raise AssertionError(f"{what}: unknown key {key!r}")
    return obj


MESSAGE_KEYS = [
    "id", "role", "content", "parts", "reasoning", "tool_calls", "tool_call_id", "tool_name",
    "model", "agent", "channel", "flags", "metadata", "tokens",
]


def to_message(v: Dict[str, Any]):
    keys(v, MESSAGE_KEYS, "message")
    parts = []
    for p in v.get("parts", []):
        keys(p, ["text", "image", "file"], "part")
        if "text" in p:
            parts.append(TextPart(p["text"]))
        elif "image" in p:
            i = keys(p["image"], ["url", "path", "mime_type"], "image")
            source = MediaSource_Url(i["url"]) if "url" in i else MediaSource_Path(i["path"])
            parts.append(ImagePart(Image(source, i.get("mime_type"))))
        else:
            f = keys(p["file"], ["name", "path", "mime_type"], "file")
            parts.append(FilePart(FileRef(f["name"], f["path"], f.get("mime_type"))))
    reasoning = None
    if v.get("reasoning") is not None:
        r = keys(v["reasoning"], ["text", "signature", "redacted"], "reasoning")
        reasoning = Reasoning(r["text"], r.get("signature"), r.get("redacted", False))
    flags = MessageFlags(0)
    for f in v.get("flags", []):
        flags |= FLAGS[f]
    m = message(
        ROLES[v["role"]],
        v.get("content", ""),
        id=v.get("id", ""),
        parts=parts,
        reasoning=reasoning,
        tool_calls=[ToolCall(**keys(c, ["id", "name", "arguments"], "tool call")) for c in v.get("tool_calls", [])],
        tool_call_id=v.get("tool_call_id"),
        tool_name=v.get("tool_name"),
        flags=flags,
        metadata=v.get("metadata"),
    )
    m.model = v.get("model")
    m.agent = v.get("agent")
    m.channel = v.get("channel")
    m.tokens = v.get("tokens", 0)
    return m


def to_item(v: Dict[str, Any]):
    keys(v, ["keep", "replace", "message", "insert"], "item")
    if "keep" in v:
        return Item_Keep(v["keep"])
    if "replace" in v:
        from agent_host_guest.types import Replacement

        return Item_Replace(Replacement(v["replace"], to_message(v["message"])))
    return Item_Insert(to_message(v["insert"]))


class HostHistory:
    """A stand-in for the host's history resource: the headers worked out as
    the host does (a result answers the nearest earlier call with its id),
    the messages handed out and counted."""

    def __init__(self, messages):
        calls = {}
        self.header_list = []
        for i, m in enumerate(messages):
            answers = calls.get(m.tool_call_id) if m.role == Role.TOOL and m.tool_call_id is not None else None
            for c in m.tool_calls:
                calls[c.id] = i
            self.header_list.append(header_of(m, answers))
        self.message_list = messages
        self.fetched = 0

    def len(self):
        return len(self.message_list)

    def headers(self, start, end):
        return self.header_list[start:end]

    def messages(self, start, end):
        self.fetched += 1
        return self.message_list[start:end]


def all_cases():
    files = sorted(CASES.glob("*.json"))
    if not files:
        raise AssertionError(f"no case files in {CASES}")
    for file in files:
        doc = keys(json.loads(file.read_text(encoding="utf-8")), ["cases"], file.name)
        for case in doc["cases"]:
            yield file.name, case


CASE_KEYS = ["name", "history", "config", "config_text", "expect", "text_tokens", "message_tokens"]


class Cases(unittest.TestCase):
    def test_every_conformance_case_passes(self):
        counts = {"edits": 0, "errors": 0, "tokens": 0}
        names = set()
        for file, case in all_cases():
            keys(case, CASE_KEYS, "a case")
            at = f"{file}: {case['name']}"
            self.assertNotIn(case["name"], names, f"{at}: the name is taken")
            names.add(case["name"])
            with self.subTest(case=at):
                if "text_tokens" in case or "message_tokens" in case:
                    for t in case.get("text_tokens", []):
                        self.assertEqual(estimate_tokens(t["text"]), t["tokens"], f"{at}: {t['text']!r}")
                        counts["tokens"] += 1
                    for t in case.get("message_tokens", []):
                        m = to_message(t["message"])
                        self.assertEqual(estimate_message_tokens(m), t["tokens"], f"{at}: {t['message']}")
                        counts["tokens"] += 1
                    continue
                self.run_edits(case, at, counts)
        self.assertTrue(all(counts.values()), f"every kind of case ran: {counts}")

    def run_edits(self, case, at, counts):
        """Runs an edits case twice: over a history given whole, and over a
        stand-in for the host's history resource (contract 0.2.0)."""
        expect = keys(case["expect"], ["items", "loaded", "tool_callers", "error"], "expect")
        if "config" in case and "config_text" in case:
            raise AssertionError(f"{at}: config or config_text, not both")
        text = case["config_text"] if "config_text" in case else json.dumps(case.get("config", {}))
        for from_host in (False, True):
            where = f"{at} ({'from the host' if from_host else 'given whole'})"
            self.run_once(case, expect, text, from_host, where)
        counts["errors" if "error" in expect else "edits"] += 1

    def run_once(self, case, expect, text, from_host, at):
        messages = [to_message(m) for m in case["history"]]
        source = HostHistory(messages)
        ctx = testing.context(text)
        history = History.from_host(ctx, source) if from_host else History(ctx, messages)
        try:
            config = read_config(text)
            Conformance().process(history, config)
            items = history.into_items()
            error = None
        except (BadConfig, Failed) as e:
            error = e
        if "error" in expect:
            want = keys(expect["error"], ["kind", "contains"], "error")
            self.assertIsNotNone(error, f"{at}: answered, expected an error")
            kind = "bad-config" if isinstance(error, BadConfig) else "failed"
            self.assertEqual(kind, want["kind"], f"{at}: {error.message}")
            self.assertIn(want["contains"], error.message, at)
            return
        if error is not None:
            raise AssertionError(f"{at}: {type(error).__name__}: {error.message}")
        self.assertEqual(items, [to_item(i) for i in expect["items"]], at)
        if "loaded" in expect:
            self.assertEqual(history.is_loaded(), expect["loaded"], f"{at}: loaded")
            if from_host:
                self.assertEqual(source.fetched, 1 if expect["loaded"] else 0, f"{at}: fetches")
        if "tool_callers" in expect:
            self.assertEqual(history.tool_callers(), expect["tool_callers"], f"{at}: tool_callers")


if __name__ == "__main__":
    unittest.main()
