"""Native tests of the Python summarize-history: `python3 -m unittest` in this
folder. The cases follow the Rust processor's tests; the integration test
`services` then runs the built component through the host against a model
and compares its answer with the Rust one's."""

import pathlib
import sys
import unittest

# The processor's source, and the SDK from this checkout.
HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "src"), str(HERE.parents[2] / "guest-sdk" / "python")]

from agent_host_guest import (  # noqa: E402
    BadConfig,
    MessageFlags,
    Role,
    ServiceDenied,
    ToolCall,
    message,
    testing,
    tool_result,
)
from agent_host_guest import host  # noqa: E402

from summarize_history import SummarizeHistory  # noqa: E402

host.echo = False


def turns(n):
    h = [message(Role.SYSTEM, "rules")]
    for i in range(n):
        h.append(message(Role.USER, f"question {i}"))
        h.append(message(Role.ASSISTANT, f"answer {i}"))
    return h


def contents(out):
    return [m.content for m in out]


class SummarizeHistoryTests(unittest.TestCase):
    def setUp(self):
        self.asked = []

        def serve(prompt, text):
            self.asked.append(text)
            return "THE SUMMARY"

        testing.serve_summaries(serve)

    def tearDown(self):
        testing.stop_serving_summaries()

    def test_the_older_part_becomes_a_flagged_checkpoint_pair_and_the_newest_turns_stay(self):
        out = testing.run(SummarizeHistory, '{"keep_turns": 2, "min_messages": 2}', turns(5))
        self.assertEqual(
            contents(out),
            [
                "rules",
                "[The 6 earlier messages of this conversation were summarized.]",
                "THE SUMMARY",
                "question 3",
                "answer 3",
                "question 4",
                "answer 4",
            ],
        )
        for m in out[1:3]:
            self.assertEqual(m.flags, MessageFlags.SYNTHETIC | MessageFlags.SUMMARY)
        self.assertEqual((out[1].role, out[2].role), (Role.USER, Role.ASSISTANT))
        # Natively the cost is the host's default estimate: "THE SUMMARY" is 3.
        self.assertRegex(out[2].metadata, r'^\{"summary_of":6,"input_tokens":\d+,"output_tokens":3\}$')
        material = self.asked[0]
        self.assertIn("[user]\nquestion 0", material)
        self.assertIn("answer 2", material)
        self.assertNotIn("question 3", material)
        self.assertNotIn("rules", material)

    def test_a_tool_exchange_across_the_cut_stays_whole(self):
        h = turns(3)
        # The call is in turn 2; its result comes after turn 3 starts.
        h.insert(5, message(Role.ASSISTANT, tool_calls=[ToolCall("c1", "search", "{}")]))
        h.insert(7, tool_result("c1", "found"))
        out = testing.run(SummarizeHistory, '{"keep_turns": 1, "min_messages": 1}', h)
        self.assertEqual(contents(out)[3:], ["", "question 2", "found", "answer 2"])
        self.assertEqual(len(out[3].tool_calls), 1)

    def test_a_refused_summary_leaves_the_history_as_it_was(self):
        def refuse(prompt, text):
            raise ServiceDenied("grant it with --allow-summarize")

        testing.serve_summaries(refuse)
        h = turns(6)
        out = testing.run(SummarizeHistory, '{"keep_turns": 2, "min_messages": 2}', h)
        self.assertEqual(contents(out), contents(h))
        self.assertEqual(
            testing.logs(),
            ["no summary (denied: grant it with --allow-summarize); the history is kept"],
        )

    def test_too_little_to_summarize_asks_nothing(self):
        out = testing.run(SummarizeHistory, '{"keep_turns": 2}', turns(4))
        self.assertEqual(len(out), 9)
        config = '{"keep_turns": 2, "min_messages": 1, "trigger_tokens": 1000000}'
        self.assertEqual(len(testing.run(SummarizeHistory, config, turns(4))), 9)
        self.assertEqual(self.asked, [])

    def test_a_previous_summary_is_carried_into_the_material(self):
        h = turns(4)
        h[2].flags = MessageFlags.SYNTHETIC | MessageFlags.SUMMARY
        testing.run(SummarizeHistory, '{"keep_turns": 1, "min_messages": 1}', h)
        self.assertIn("[previous summary]\nanswer 0", self.asked[0])

    def test_a_long_message_is_quoted_with_its_middle_elided(self):
        h = turns(3)
        h[1].content = "é" * 2_500 + "x" * 2_500
        testing.run(SummarizeHistory, '{"keep_turns": 1, "min_messages": 1}', h)
        quoted = self.asked[0].split("[user]\n")[1].split("\n\n")[0]
        self.assertEqual(
            quoted, "é" * 2_000 + "\n[... 1000 characters elided ...]\n" + "x" * 2_000
        )

    def test_the_summary_is_trimmed_as_rust_trims(self):
        # U+0085 is white space to Rust, U+001C is not (Python's strip takes both).
        testing.serve_summaries(lambda prompt, text: "\x85\x1cTHE SUMMARY\u3000\n")
        out = testing.run(SummarizeHistory, '{"keep_turns": 2, "min_messages": 2}', turns(5))
        self.assertEqual(out[2].content, "\x1cTHE SUMMARY")

    def test_bad_configurations_are_refused(self):
        for config in [
            '{"keep_turns": 0}',
            '{"max_words": 0}',
            '{"turns": 2}',
            '{"min_messages": -1}',
            "[1, 2]",
        ]:
            with self.assertRaises(BadConfig, msg=config):
                testing.run(SummarizeHistory, config, [])


if __name__ == "__main__":
    unittest.main()
