"""Processors: WebAssembly components in the sandbox, from Python."""

from __future__ import annotations

from pathlib import Path

import pytest

import agent_host
from agent_host import InvalidInputError, NotFoundError, ProcessorFailedError


def test_a_standard_processor_describes_itself_and_runs(processor, chat):
    keep = agent_host.Processor(processor("keep-last-turns"), config={"turns": 1})
    assert keep.name == "keep-last-turns"
    assert keep.version == "0.1.0"
    assert len(keep.hash) == 64
    d = keep.describe()
    assert d["name"] == "keep-last-turns" and d["config_example"]
    result = keep.run(chat)
    assert result.history.roles == ["system", "user", "assistant"]
    [report] = result.report["processors"]
    assert report["name"] == "keep-last-turns"
    assert report["error"] is None
    assert len(report["dropped"]) == 4
    assert result.report["pipeline"] is None


def test_a_chain_runs_after_the_pipeline_in_order(processor, chat):
    only_users = agent_host.Processor(processor("filter"), '{"roles": ["user"]}', deadline_ms=1000)
    last = agent_host.Processor(processor("keep-last-turns"), {"turns": 1}, memory_mib=32)
    result = agent_host.run(chat, [only_users, last], context_limit=8000)
    names = [r["name"] for r in result.report["processors"]]
    assert names == ["filter", "keep-last-turns"]
    assert result.history.roles == ["system", "user"]
    assert result.history.to_messages()[1]["content"] == "And tomorrow?"


def test_a_processor_refusing_its_configuration_raises_with_the_report(processor, chat):
    p = agent_host.Processor(processor("keep-last-turns"), {"no_such_key": 1})
    with pytest.raises(ProcessorFailedError) as e:
        p.run(chat)
    assert "no_such_key" in str(e.value)
    assert e.value.kind == "processor_failed"
    assert e.value.report["processors"][0]["error"]
    assert e.value.report["output"]["messages"] == len(chat)


def test_configuration_that_is_not_json_is_invalid_input(processor):
    with pytest.raises(InvalidInputError) as e:
        agent_host.Processor(processor("filter"), "{roles: [user]}")
    assert "not valid JSON" in str(e.value)


def test_bad_options_are_invalid_input(processor):
    with pytest.raises(InvalidInputError) as e:
        agent_host.Processor(processor("filter"), on_failure="retry")
    assert "retry" in str(e.value)
    with pytest.raises(InvalidInputError):
        agent_host.Processor(processor("filter"), deadline_ms=0)


def test_a_missing_component_is_not_found(tmp_path: Path):
    missing = tmp_path / "gone.wasm"
    with pytest.raises(NotFoundError) as e:
        agent_host.Processor(missing)
    assert str(missing) in str(e.value)


def test_a_file_that_is_no_component_fails_to_load(tmp_path: Path):
    junk = tmp_path / "junk.wasm"
    junk.write_bytes(b"\0asm not really")
    with pytest.raises(ProcessorFailedError) as e:
        agent_host.Processor(junk)
    assert str(junk) in str(e.value)


def test_a_processor_that_traps_raises_and_the_host_goes_on(guest, chat):
    panic = agent_host.Processor(guest("panic"))
    with pytest.raises(ProcessorFailedError) as e:
        panic.run(chat)
    message = str(e.value)
    assert "panic" in message
    assert "trap" in message or "panicked" in message, message
    # The same component answers the next call: a trap spoils only its call.
    spared = panic.run([{"role": "user", "content": "spare me"}])
    assert len(spared.history) == 1


def test_skip_keeps_the_input_and_reports_the_failure(guest, chat):
    panic = agent_host.Processor(guest("panic"), on_failure="skip")
    result = agent_host.run(chat, [panic])
    assert len(result.history) == len(chat)
    [report] = result.report["processors"]
    assert report["error"]
    assert result.report["failure"] is None


def test_a_processor_past_its_deadline_is_stopped(guest, chat):
    spin = agent_host.Processor(guest("spin"), deadline_ms=50)
    with pytest.raises(ProcessorFailedError) as e:
        spin.run(chat)
    assert "deadline" in str(e.value) or "time" in str(e.value), str(e.value)


def test_a_processor_over_its_memory_is_stopped(guest, chat):
    grow = agent_host.Processor(guest("grow"), memory_mib=2)
    with pytest.raises(ProcessorFailedError) as e:
        grow.run(chat)
    assert "memory" in str(e.value), str(e.value)
