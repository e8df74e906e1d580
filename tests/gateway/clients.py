"""Drives agent-host's gateway with the official OpenAI and Anthropic SDKs.

    python clients.py BASE_URL SCENARIO

BASE_URL is the server (http://127.0.0.1:PORT). Each scenario is a short
conversation a real agent would have: it resends its whole history each
time, with a tool call and its result. What the SDKs returned (texts, tool
calls, usage, agent-host's response headers) is printed as one JSON object,
which the Rust test (host/server/tests/gateway.rs) checks against what the
upstream received and what the store holds.
"""

import json
import sys

import anthropic
import openai

BASE, SCENARIO = sys.argv[1], sys.argv[2]
SESSION = {"x-session-id": "sdk-" + SCENARIO}
TOOLS_OPENAI = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Reads a file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
TOOLS_ANTHROPIC = [
    {
        "name": "read_file",
        "description": "Reads a file",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    }
]


def headers_of(raw):
    return {k: v for k, v in raw.headers.items() if k.startswith("x-agent-host-")}


def openai_conversation(stream):
    client = openai.OpenAI(base_url=BASE + "/v1", api_key="gateway-token", max_retries=0)
    history = [
        {"role": "system", "content": "You read files."},
        {"role": "user", "content": "What is in a.rs?"},
    ]
    out = {"turns": []}
    for turn in range(3):
        if stream:
            with client.chat.completions.with_streaming_response.create(
                model="test-model",
                messages=history,
                tools=TOOLS_OPENAI,
                stream=True,
                stream_options={"include_usage": True},
                extra_headers=SESSION,
            ) as raw:
                headers = headers_of(raw)
                text, calls, usage, finish = "", {}, None, None
                for chunk in raw.parse():
                    if chunk.usage is not None:
                        usage = chunk.usage.model_dump()
                    for choice in chunk.choices:
                        finish = choice.finish_reason or finish
                        delta = choice.delta
                        text += delta.content or ""
                        for call in delta.tool_calls or []:
                            entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                            entry["id"] = call.id or entry["id"]
                            if call.function is not None:
                                entry["name"] += call.function.name or ""
                                entry["arguments"] += call.function.arguments or ""
                calls = [calls[i] for i in sorted(calls)]
        else:
            raw = client.chat.completions.with_raw_response.create(
                model="test-model",
                messages=history,
                tools=TOOLS_OPENAI,
                extra_headers=SESSION,
            )
            headers = headers_of(raw)
            reply = raw.parse()
            message = reply.choices[0].message
            text = message.content or ""
            calls = [
                {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
                for c in message.tool_calls or []
            ]
            usage = reply.usage.model_dump() if reply.usage else None
            finish = reply.choices[0].finish_reason
        out["turns"].append(
            {"text": text, "calls": calls, "usage": usage, "finish": finish, "headers": headers}
        )
        assistant = {"role": "assistant", "content": text or None}
        if calls:
            assistant["tool_calls"] = [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls
            ]
        history.append(assistant)
        if turn == 0:
            history.append({"role": "tool", "tool_call_id": calls[0]["id"], "content": "fn main() {}"})
        elif turn == 1:
            history.append({"role": "user", "content": "Thanks. Anything else?"})
    return out


def anthropic_conversation(stream):
    client = anthropic.Anthropic(base_url=BASE, api_key="gateway-token", max_retries=0)
    system = "You read files."
    history = [{"role": "user", "content": "What is in a.rs?"}]
    out = {"turns": []}
    for turn in range(3):
        if stream:
            with client.messages.stream(
                model="test-model",
                max_tokens=256,
                system=system,
                messages=history,
                tools=TOOLS_ANTHROPIC,
                extra_headers=SESSION,
            ) as events:
                kinds = []
                for event in events:
                    kinds.append(event.type)
                message = events.get_final_message()
                headers = headers_of(events.response)
        else:
            raw = client.messages.with_raw_response.create(
                model="test-model",
                max_tokens=256,
                system=system,
                messages=history,
                tools=TOOLS_ANTHROPIC,
                extra_headers=SESSION,
            )
            headers = headers_of(raw)
            message = raw.parse()
            kinds = []
        blocks = [b.model_dump() for b in message.content]
        text = "".join(b["text"] for b in blocks if b["type"] == "text")
        calls = [
            {"id": b["id"], "name": b["name"], "arguments": json.dumps(b["input"])}
            for b in blocks
            if b["type"] == "tool_use"
        ]
        out["turns"].append(
            {
                "text": text,
                "calls": calls,
                "usage": message.usage.model_dump(),
                "finish": message.stop_reason,
                "headers": headers,
                "events": kinds,
            }
        )
        history.append({"role": "assistant", "content": blocks})
        if turn == 0:
            history.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": calls[0]["id"], "content": "fn main() {}"}
                    ],
                }
            )
        elif turn == 1:
            history.append({"role": "user", "content": "Thanks. Anything else?"})
    return out


TOOLS_RESPONSES = [
    {
        "type": "function",
        "name": "read_file",
        "description": "Reads a file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    }
]


def responses_turn(client, stream, helper, **request):
    """One Responses request: what the SDK read of it."""
    kinds = []
    if stream and helper:
        # The SDK's own accumulator: it checks that every event fits the
        # ones before it (an item added before its deltas, and so on).
        with client.responses.stream(**request) as events:
            for event in events:
                kinds.append(event.type)
            response = events.get_final_response()
        headers = {}
    elif stream:
        with client.responses.with_streaming_response.create(stream=True, **request) as raw:
            headers = headers_of(raw)
            response, numbers = None, []
            for event in raw.parse():
                kinds.append(event.type)
                numbers.append(event.sequence_number)
                if event.type == "response.completed":
                    response = event.response
            assert numbers == list(range(len(numbers))), numbers
    else:
        raw = client.responses.with_raw_response.create(**request)
        headers = headers_of(raw)
        response = raw.parse()
    calls = [
        {"id": item.call_id, "name": item.name, "arguments": item.arguments}
        for item in response.output
        if item.type == "function_call"
    ]
    return {
        "id": response.id,
        "status": response.status,
        "text": response.output_text,
        "items": [item.type for item in response.output],
        "calls": calls,
        "usage": response.usage.model_dump() if response.usage else None,
        "previous": response.previous_response_id,
        "headers": headers,
        "events": kinds,
    }


def responses_conversation(stream):
    """A conversation kept by the gateway: each request sends only what is
    new and names the response it continues."""
    client = openai.OpenAI(base_url=BASE + "/v1", api_key="gateway-token", max_retries=0)
    common = {"model": "test-model", "instructions": "You read files.", "tools": TOOLS_RESPONSES}
    turns = []
    first = responses_turn(client, stream, False, input="What is in a.rs?", **common)
    turns.append(first)
    call = first["calls"][0]
    output = [{"type": "function_call_output", "call_id": call["id"], "output": "fn main() {}"}]
    second = responses_turn(
        client, stream, stream, input=output, previous_response_id=first["id"], **common
    )
    turns.append(second)
    third = responses_turn(
        client, stream, False, input="Thanks. Anything else?", previous_response_id=second["id"], **common
    )
    turns.append(third)
    # Continuing from an older response would carry the newer turns along:
    # refused.
    try:
        client.responses.create(input="Again?", previous_response_id=first["id"], **common)
        fork = {"status": 200}
    except openai.APIStatusError as e:
        fork = {"status": e.status_code, "message": str(e)}
    return {"turns": turns, "fork": fork}


def openai_upstream_error():
    client = openai.OpenAI(base_url=BASE + "/v1", api_key="gateway-token", max_retries=0)
    try:
        client.chat.completions.create(
            model="test-model",
            messages=[{"role": "user", "content": "hello"}],
            extra_headers=SESSION,
        )
    except openai.APIStatusError as e:
        return {"status": e.status_code, "message": str(e)}
    return {"status": 200}


def anthropic_upstream_error():
    client = anthropic.Anthropic(base_url=BASE, api_key="gateway-token", max_retries=0)
    try:
        client.messages.create(
            model="test-model",
            max_tokens=64,
            messages=[{"role": "user", "content": "hello"}],
            extra_headers=SESSION,
        )
    except anthropic.APIStatusError as e:
        return {"status": e.status_code, "message": str(e)}
    return {"status": 200}


SCENARIOS = {
    "openai": lambda: openai_conversation(False),
    "openai-stream": lambda: openai_conversation(True),
    "anthropic": lambda: anthropic_conversation(False),
    "anthropic-stream": lambda: anthropic_conversation(True),
    "responses": lambda: responses_conversation(False),
    "responses-stream": lambda: responses_conversation(True),
    "openai-error": openai_upstream_error,
    "anthropic-error": anthropic_upstream_error,
}

print(json.dumps(SCENARIOS[SCENARIO]()))
