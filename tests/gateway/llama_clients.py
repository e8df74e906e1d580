"""Drives agent-host's gateway in front of a real model server (llama.cpp's
llama-server with SmolLM2-135M-Instruct) with the official SDKs.

    python llama_clients.py BASE_URL SCENARIO

Each scenario is a two-turn conversation that resends its history, as real
agents do, streamed or not. The model's words are its own; what is printed
(one JSON object) is what the SDKs got back: the texts, the usage, the finish
reasons and agent-host's response headers, which the Rust test
(host/server/tests/llama.rs) checks against the store.
"""

import json
import sys

import anthropic
import openai

BASE, SCENARIO = sys.argv[1], sys.argv[2]
SESSION = {"x-session-id": "llama-" + SCENARIO}
QUESTIONS = ["What is the capital of France? Answer in one word.", "And of Italy?"]


def headers_of(raw):
    return {k: v for k, v in raw.headers.items() if k.startswith("x-agent-host-")}


def openai_conversation(stream):
    client = openai.OpenAI(base_url=BASE + "/v1", api_key="unused", max_retries=0, timeout=120)
    history = [{"role": "system", "content": "You answer briefly."}]
    turns = []
    for question in QUESTIONS:
        history.append({"role": "user", "content": question})
        if stream:
            with client.chat.completions.with_streaming_response.create(
                model="smollm2",
                messages=history,
                max_tokens=24,
                temperature=0,
                stream=True,
                stream_options={"include_usage": True},
                extra_headers=SESSION,
            ) as raw:
                headers = headers_of(raw)
                text, usage, finish, chunks = "", None, None, 0
                for chunk in raw.parse():
                    chunks += 1
                    if chunk.usage is not None:
                        usage = chunk.usage.model_dump()
                    for choice in chunk.choices:
                        finish = choice.finish_reason or finish
                        text += choice.delta.content or ""
        else:
            raw = client.chat.completions.with_raw_response.create(
                model="smollm2",
                messages=history,
                max_tokens=24,
                temperature=0,
                extra_headers=SESSION,
            )
            headers = headers_of(raw)
            reply = raw.parse()
            text = reply.choices[0].message.content or ""
            usage = reply.usage.model_dump() if reply.usage else None
            finish = reply.choices[0].finish_reason
            chunks = 0
        turns.append(
            {"text": text, "usage": usage, "finish": finish, "headers": headers, "chunks": chunks}
        )
        history.append({"role": "assistant", "content": text})
    return {"turns": turns}


def anthropic_conversation(stream):
    client = anthropic.Anthropic(base_url=BASE, api_key="unused", max_retries=0, timeout=120)
    history = []
    turns = []
    for question in QUESTIONS:
        history.append({"role": "user", "content": question})
        if stream:
            events = []
            with client.messages.with_streaming_response.create(
                model="smollm2",
                system="You answer briefly.",
                messages=history,
                max_tokens=24,
                temperature=0,
                stream=True,
                extra_headers=SESSION,
            ) as raw:
                headers = headers_of(raw)
                text, usage, finish = "", {}, None
                for event in raw.parse():
                    events.append(event.type)
                    if event.type == "content_block_delta" and event.delta.type == "text_delta":
                        text += event.delta.text
                    elif event.type == "message_delta":
                        finish = event.delta.stop_reason
                        usage["output_tokens"] = event.usage.output_tokens
                    elif event.type == "message_start":
                        usage["input_tokens"] = event.message.usage.input_tokens
        else:
            events = []
            raw = client.messages.with_raw_response.create(
                model="smollm2",
                system="You answer briefly.",
                messages=history,
                max_tokens=24,
                temperature=0,
                extra_headers=SESSION,
            )
            headers = headers_of(raw)
            reply = raw.parse()
            text = "".join(b.text for b in reply.content if b.type == "text")
            usage = reply.usage.model_dump()
            finish = reply.stop_reason
        turns.append(
            {"text": text, "usage": usage, "finish": finish, "headers": headers, "events": events}
        )
        history.append({"role": "assistant", "content": text})
    return {"turns": turns}


def responses_conversation(stream):
    """The Responses API in front of llama-server's Chat Completions: the
    second request sends only its question and names the first response."""
    client = openai.OpenAI(base_url=BASE + "/v1", api_key="unused", max_retries=0, timeout=120)
    turns, previous = [], None
    for question in QUESTIONS:
        request = dict(
            model="smollm2",
            instructions="You answer briefly.",
            input=question,
            max_output_tokens=24,
            temperature=0,
            previous_response_id=previous,
            extra_headers=SESSION,
        )
        events = []
        if stream:
            with client.responses.with_streaming_response.create(stream=True, **request) as raw:
                headers = headers_of(raw)
                response, text = None, ""
                for event in raw.parse():
                    events.append(event.type)
                    if event.type == "response.output_text.delta":
                        text += event.delta
                    elif event.type in ("response.completed", "response.incomplete"):
                        response = event.response
            assert text == response.output_text, (text, response.output_text)
        else:
            raw = client.responses.with_raw_response.create(**request)
            headers = headers_of(raw)
            response = raw.parse()
        previous = response.id
        turns.append(
            {
                "text": response.output_text,
                "usage": response.usage.model_dump(),
                "finish": response.status,
                "headers": headers,
                "events": events,
                "id": response.id,
            }
        )
    return {"turns": turns}


SCENARIOS = {
    "openai": lambda: openai_conversation(False),
    "openai-stream": lambda: openai_conversation(True),
    "anthropic": lambda: anthropic_conversation(False),
    "anthropic-stream": lambda: anthropic_conversation(True),
    "responses": lambda: responses_conversation(False),
    "responses-stream": lambda: responses_conversation(True),
}

print(json.dumps(SCENARIOS[SCENARIO]()))
