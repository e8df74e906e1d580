"""Drives agent-host's gateway with a pydantic-ai agent, as README shows it.

    python pydantic_ai_client.py BASE_URL

BASE_URL is the server (http://127.0.0.1:PORT). The agent has one tool and
a system prompt; its first run calls the tool, its second continues with
the first's messages as history, streamed. What the runs gave (outputs,
the number of messages pydantic-ai holds) is printed as one JSON object,
which the Rust test (host/server/tests/gateway.rs) checks against what the
upstream received and what the store holds.
"""

import asyncio
import json
import sys

import openai
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

BASE = sys.argv[1]


async def main():
    client = openai.AsyncOpenAI(
        base_url=BASE + "/v1",
        api_key="unused-on-loopback",
        max_retries=0,
        default_headers={"x-session-id": "pydantic-ai"},
    )
    model = OpenAIChatModel("test-model", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, system_prompt="You read files.")

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Reads a file."""
        return "fn main() {}" if path == "a.rs" else ""

    first = await agent.run("What is in a.rs?")
    async with agent.run_stream("Anything else?", message_history=first.all_messages()) as run:
        second = await run.get_output()
        messages = len(run.all_messages())
    print(
        json.dumps(
            {
                "first": first.output,
                "second": second,
                "first_messages": len(first.all_messages()),
                "messages": messages,
            }
        )
    )


asyncio.run(main())
