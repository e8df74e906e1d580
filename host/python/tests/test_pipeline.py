"""The pipeline with a budget, and its report."""

from __future__ import annotations

import pytest

import agent_host
from agent_host import InvalidInputError


def long_chat(turns: int = 60):
    messages = [{"role": "system", "content": "You are a careful assistant."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"Question {i}: " + "tell me more " * 40})
        messages.append({"role": "assistant", "content": f"Answer {i}: " + "here is more " * 40})
    return messages


def test_a_budget_is_kept_and_reported():
    h = agent_host.from_messages(long_chat())
    assert h.tokens > 6000
    result = agent_host.run(h, context_limit=4000)
    out = result.history
    report = result.report
    assert report["input"]["messages"] == len(h)
    assert report["input"]["format"] == "openai"
    assert report["output"]["messages"] == len(out) < len(h)
    assert report["output"]["tokens"] == out.tokens <= 4000
    assert report["output"]["violations"] == []
    assert report["pipeline"] is not None
    assert report["processors"] == []
    assert out.roles[0] == "system"


def test_an_orphan_tool_result_is_repaired():
    broken = [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "ghost", "content": "a result without its call"},
        {"role": "assistant", "content": "hello"},
    ]
    h = agent_host.from_messages(broken)
    assert h.violations() != []
    result = agent_host.run(h, compact=False)
    assert result.history.violations() == []
    assert result.report["pipeline"]["repairs"], result.report["pipeline"]


def test_a_reserve_over_the_window_and_an_empty_history_are_refused():
    with pytest.raises(InvalidInputError) as e:
        agent_host.run(long_chat(2), context_limit=1000, response_reserve=1000)
    assert "response_reserve" in str(e.value)
    with pytest.raises(InvalidInputError) as e:
        agent_host.run(agent_host.loads("", format="jsonl"))
    assert "no messages" in str(e.value)


def test_a_tau_bench_trajectory_fits_its_budget(corpus):
    import json

    runs = json.loads((corpus / "tau-bench-gpt4o-airline/gpt-4o-airline.json").read_text())
    longest = max(runs, key=lambda r: len(r["traj"]))["traj"]
    result = agent_host.run(longest, context_limit=3000)
    assert result.report["output"]["tokens"] <= 3000
    assert result.history.violations() == []
