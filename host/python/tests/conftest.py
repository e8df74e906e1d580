"""Fixtures of the package's tests: the standard processors, the hostile
test guests and the corpus, named by environment variables that
host/python/test.sh documents (and `cargo test -p agent-host --test
integration python` sets). A missing one fails the test that needs it with
the variable's name: nothing is skipped quietly."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Dict, List

import pytest


def _required(variable: str) -> Path:
    value = os.environ.get(variable)
    if not value:
        pytest.fail(
            f"{variable} is not set; run the tests with `cargo test -p agent-host --test integration python`"
            " or see host/python/test.sh"
        )
    path = Path(value)
    if not path.exists():
        pytest.fail(f"{variable} names {path}, which does not exist")
    return path


@pytest.fixture(scope="session")
def processor() -> Callable[[str], str]:
    """The path of a standard processor's component, by name."""
    folder = _required("AGENT_HOST_PROCESSORS")

    def path(name: str) -> str:
        p = folder / f"{name}.wasm"
        if not p.is_file():
            pytest.fail(f"{p} is missing: build the standard processors first")
        return str(p)

    return path


@pytest.fixture(scope="session")
def guest() -> Callable[[str], str]:
    """The path of a hostile test guest (panic, spin, grow)."""

    def path(name: str) -> str:
        return str(_required(f"AGENT_HOST_GUEST_{name.upper()}"))

    return path


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The corpus of real transcripts (../shared/corpus)."""
    value = os.environ.get("AGENT_HOST_CORPUS")
    if value and Path(value).is_dir():
        return Path(value)
    if os.environ.get("CI"):
        pytest.fail("AGENT_HOST_CORPUS names no folder; under CI the corpus must be there")
    pytest.skip("no corpus: set AGENT_HOST_CORPUS to ../shared/corpus")


@pytest.fixture
def chat() -> List[Dict[str, object]]:
    """A short OpenAI chat with a tool call and its result."""
    return [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C, clear"},
        {"role": "assistant", "content": "It is 18 C and clear in Paris."},
        {"role": "user", "content": "And tomorrow?"},
        {"role": "assistant", "content": "Tomorrow looks like rain."},
    ]
