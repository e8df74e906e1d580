"""Tests of the SDK's pure logic: `python3 -m unittest discover -s tests` in
guest-sdk/python."""

import dataclasses
import pathlib
import sys
import types
import unittest
from typing import Dict, List, Optional

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from agent_host_guest import (  # noqa: E402
    BadConfig,
    ServiceDenied,
    ServiceError,
    ServiceFailed,
    ServiceOverBudget,
    SummaryCaps,
    count_tokens,
    read_memory,
    summarize,
    warn,
    Failed,
    History,
    Item_Insert,
    Item_Keep,
    Item_Replace,
    MessageFlags,
    NoConfig,
    Processor,
    Reasoning,
    Role,
    TextPart,
    ToolCall,
    estimate_tokens,
    host,
    info,
    message,
    parse_config,
    set_texts,
    synthetic,
    testing,
    text,
    texts,
    tool_result,
)
from agent_host_guest import _native, selfcheck, services  # noqa: E402

host.echo = False


@dataclasses.dataclass
class Inner:
    name: str
    pattern: str


@dataclasses.dataclass
class Settings:
    turns: int = 4
    ratio: float = 0.5
    on: bool = False
    roles: List[str] = dataclasses.field(default_factory=list)
    limit: Optional[int] = None
    extra: List[Inner] = dataclasses.field(default_factory=list)
    weights: Dict[str, int] = dataclasses.field(default_factory=dict)


class Config(unittest.TestCase):
    def error(self, text: str, cls=Settings) -> str:
        with self.assertRaises(BadConfig) as e:
            parse_config(text, cls)
        return e.exception.message

    def test_no_configuration_is_the_default(self):
        for text in ["", " null ", "{}"]:
            self.assertEqual(parse_config(text, Settings), Settings())
        self.assertEqual(parse_config("{}", NoConfig), NoConfig())

    def test_values_are_read(self):
        got = parse_config(
            '{"turns": 2, "ratio": 1, "on": true, "roles": ["tool"], "limit": null,'
            ' "extra": [{"name": "a", "pattern": "b"}], "weights": {"x": 1}}',
            Settings,
        )
        self.assertEqual(
            got, Settings(2, 1.0, True, ["tool"], None, [Inner("a", "b")], {"x": 1})
        )

    def test_errors_name_the_key(self):
        self.assertEqual(
            self.error('{"turns": "four"}'), '`turns`: invalid type: string "four", expected an integer'
        )
        self.assertEqual(self.error('{"turns": true}'), "`turns`: invalid type: boolean `true`, expected an integer")
        self.assertEqual(self.error('{"roles": ["a", 1]}'), "`roles[1]`: invalid type: integer `1`, expected a string")
        self.assertEqual(self.error('{"extra": [{"name": "a"}]}'), "`extra[0]`: missing field `pattern`")
        self.assertEqual(
            self.error('{"extra": [{"name": "a", "pattern": "b", "x": 1}]}'),
            "`extra[0]`: unknown field `x`, expected one of `name`, `pattern`",
        )
        self.assertIn("unknown field `turn`, expected one of `turns`", self.error('{"turn": 1}'))
        self.assertIn("unknown field `x`", self.error('{"x": 1}', NoConfig))
        self.assertIn("expected an object", self.error("[1, 2]"))
        self.assertIn("not valid JSON", self.error('{"turns": 1} x'))


def exchange() -> List:
    return [
        message(Role.SYSTEM, "sys", id="s"),
        message(Role.USER, "weather?", id="u1"),
        message(Role.ASSISTANT, tool_calls=[ToolCall("c1", "weather", "{}")], id="a1"),
        tool_result("c1", "sunny"),
        message(Role.ASSISTANT, "It is sunny.", id="a2"),
        message(Role.USER, "thanks", id="u2"),
        message(Role.ASSISTANT, "You're welcome.", id="a3"),
    ]


class HistoryEdits(unittest.TestCase):
    def test_every_message_starts_kept(self):
        h = History.for_test(exchange())
        self.assertEqual(h.kept(), 7)
        self.assertEqual(h.into_items(), [Item_Keep(i) for i in range(7)])

    def test_drop_replace_insert(self):
        h = History.for_test(exchange())
        h.drop(0)
        new = message(Role.USER, "what's the weather?")
        h.replace(1, new)
        h.message_mut(6).content = "Anytime."
        h.insert_before(5, synthetic(Role.USER, "(note)"))
        h.push(synthetic(Role.ASSISTANT, "end"))
        items = h.into_items()
        self.assertIsInstance(items[0], Item_Replace)
        self.assertEqual(items[0].value.index, 1)
        self.assertIs(items[0].value.message, new)
        self.assertEqual(items[1:4], [Item_Keep(2), Item_Keep(3), Item_Keep(4)])
        self.assertIsInstance(items[4], Item_Insert)
        self.assertEqual(items[5], Item_Keep(5))
        self.assertEqual(items[6].value.index, 6)
        self.assertEqual(items[7].value.content, "end")
        self.assertTrue(items[7].value.flags & MessageFlags.SYNTHETIC)
        with self.assertRaises(IndexError):
            h.insert_before(99, new)

    def test_a_dropped_call_takes_its_result(self):
        h = History.for_test(exchange())
        h.drop(2)
        h.settle_tool_exchanges()
        self.assertFalse(h.is_kept(3))
        self.assertEqual(h.kept(), 5)

    def test_a_dropped_result_takes_its_call_out(self):
        h = History.for_test(exchange())
        h.drop(3)
        h.settle_tool_exchanges()
        self.assertFalse(h.is_kept(2), "the call message had nothing else")

    def test_keep_last_turns_never_splits_an_exchange(self):
        h = History.for_test(exchange())
        h.keep_last_turns(1)
        self.assertEqual([i for i in range(len(h)) if h.is_kept(i)], [0, 5, 6])
        h = History.for_test(exchange())
        h.keep_last_turns(5)
        self.assertEqual(h.kept(), 7)

    def test_tool_callers_and_names(self):
        h = History.for_test(exchange())
        self.assertEqual(h.tool_callers()[3], 2)
        self.assertEqual(h.tool_names()[3], "weather")
        self.assertEqual(h.turn_starts(), [1, 5])


class Messages(unittest.TestCase):
    def test_texts_leave_opaque_reasoning_alone(self):
        m = message(Role.ASSISTANT, "a", parts=[TextPart("b")], tool_calls=[ToolCall("c", "t", "{}")])
        m.reasoning = Reasoning("opaque", None, True)
        self.assertEqual(texts(m), ["a", "b", "{}"])
        m.reasoning.redacted = False
        self.assertEqual(texts(m), ["a", "b", "opaque", "{}"])
        set_texts(m, ["A", "B", "R", "[]"])
        self.assertEqual((m.content, m.parts[0].value, m.reasoning.text, m.tool_calls[0].arguments), ("A", "B", "R", "[]"))
        self.assertEqual(text(m), "A\n\nB")
        with self.assertRaises(ValueError):
            set_texts(m, ["1", "2", "3", "4", "5"])

    def test_native_estimates(self):
        self.assertEqual(estimate_tokens(""), 0)
        self.assertEqual(estimate_tokens("abcde"), 2)


class Tidy(Processor):
    name = "tidy"
    Config = Settings

    def process(self, history, config):
        history.keep_last_turns(config.turns)
        history.settle_tool_exchanges()
        info(f"kept {history.kept()} of {len(history)} messages")


class Broken(Processor):
    name = "broken"

    def process(self, history, config):
        return {}["missing"]


class Running(unittest.TestCase):
    def test_run_builds_the_output_and_collects_logs(self):
        out = testing.run(Tidy, '{"turns": 1}', exchange())
        self.assertEqual([m.content for m in out], ["sys", "thanks", "You're welcome."])
        self.assertEqual(testing.logs(), ["kept 3 of 7 messages"])

    def test_a_bad_configuration_is_refused(self):
        with self.assertRaises(BadConfig):
            testing.run(Tidy, '{"turns": "x"}', [])

    def test_a_bug_becomes_a_failure_that_says_where(self):
        with self.assertRaises(Failed) as e:
            testing.run(Broken, "{}", exchange())
        self.assertIn("KeyError: 'missing'", e.exception.message)
        self.assertIn("test_sdk.py:", e.exception.message)

    def test_describe(self):
        d = Tidy.describe()
        self.assertEqual((d.name, d.version, d.reorders), ("tidy", "0.1.0", False))


class Summarizes(Processor):
    """Replaces the history by one summary of its contents, or keeps it
    when the host gives none."""

    name = "summarizes"

    def process(self, history, config):
        try:
            summary = summarize("Sum up.", "\n".join(m.content for m in history.messages))
        except ServiceError as e:
            warn(f"no summary ({e})")
            return
        for i in range(len(history)):
            history.drop(i)
        history.push(message(Role.ASSISTANT, summary.text))


class Services(unittest.TestCase):
    def tearDown(self):
        testing.stop_serving_summaries()

    def test_served_summaries_answer_with_the_estimated_cost(self):
        asked = []

        def serve(prompt, text):
            asked.append((prompt, text))
            return f"{len(text)} characters"

        testing.serve_summaries(serve)
        s = summarize("Sum up.", "abcdefgh", SummaryCaps(max_tokens=10))
        self.assertEqual((s.text, s.input_tokens, s.output_tokens), ("8 characters", 4, 3))
        self.assertEqual(asked, [("Sum up.", "abcdefgh")])
        out = testing.run(Summarizes, "{}", exchange())
        self.assertEqual([m.content for m in out], ["55 characters"])

    def test_a_refusal_is_an_exception_the_processor_catches(self):
        for error, said in [
            (ServiceDenied("grant it with --allow-summarize"), "denied: grant it"),
            (ServiceOverBudget("model tokens"), "over budget: model tokens"),
            (ServiceFailed("the model timed out"), "failed: the model timed out"),
        ]:

            def refuse(prompt, text, error=error):
                raise error

            testing.serve_summaries(refuse)
            out = testing.run(Summarizes, "{}", exchange())
            self.assertEqual(len(out), len(exchange()))
            self.assertEqual(testing.logs(), [f"no summary ({error})"])
            self.assertTrue(testing.logs()[0].startswith(f"no summary ({said}"))

    def test_without_served_summaries_summarize_fails(self):
        with self.assertRaises(ServiceFailed) as e:
            summarize("p", "t")
        self.assertIn("testing.serve_summaries", str(e.exception))

    def test_native_counts_and_memory(self):
        self.assertEqual(count_tokens("abcde"), estimate_tokens("abcde"))
        self.assertEqual(read_memory("", 10), [])

    def test_the_generated_errors_become_the_sdks(self):
        cases = {
            name: dataclasses.make_dataclass(f"ServiceError_{name}", ["value"])
            for name in ["Denied", "OverBudget", "Failed"]
        }
        for name, cls in [
            ("Denied", ServiceDenied),
            ("OverBudget", ServiceOverBudget),
            ("Failed", ServiceFailed),
        ]:
            e = services._error(cases[name]("why"))
            self.assertIs(type(e), cls)
            self.assertEqual(e.message, "why")

    def test_selfcheck_finds_a_drifted_services_interface(self):
        def dc(name, fields):
            return dataclasses.make_dataclass(name, fields)

        generated = types.SimpleNamespace(
            Summary=dc("Summary", ["text", "input_tokens", "output_tokens"]),
            Fact=dc("Fact", ["id", "entity", "text", "attribute", "value", "recorded"]),
            SummarizeCaps=dc("SummarizeCaps", ["max_tokens", "timeout_ms"]),
            ServiceError_Denied=dc("ServiceError_Denied", ["value"]),
            ServiceError_OverBudget=dc("ServiceError_OverBudget", ["value"]),
            ServiceError_Failed=dc("ServiceError_Failed", ["value"]),
        )
        self.assertEqual(selfcheck.service_differences(generated), [])
        generated.SummarizeCaps = dc("SummarizeCaps", ["max_tokens"])
        del generated.ServiceError_Failed
        self.assertEqual(len(selfcheck.service_differences(generated)), 2)


class SelfCheck(unittest.TestCase):
    def test_a_drifted_mirror_is_caught(self):
        generated = types.SimpleNamespace(
            Timestamp=dataclasses.make_dataclass("Timestamp", ["seconds", "nanoseconds"]),
            Role=_native.Role,
        )
        self.assertEqual(selfcheck.differences(generated, _native, ["Timestamp", "Role"]), [])
        generated.Timestamp = dataclasses.make_dataclass("Timestamp", ["seconds", "nanos"])
        problems = selfcheck.differences(generated, _native, ["Timestamp", "Usage"])
        self.assertEqual(len(problems), 2)
        self.assertIn("nanos", problems[0])


def load_tests(loader, tests, pattern):
    """The examples in the SDK's docstrings are tests too."""
    import doctest

    from agent_host_guest import history as history_module
    from agent_host_guest import types as types_module

    tests.addTests(doctest.DocTestSuite(history_module))
    tests.addTests(doctest.DocTestSuite(types_module))
    return tests


if __name__ == "__main__":
    unittest.main()
