//! The loopback server's OpenAI Responses endpoint (`POST /v1/responses`
//! on an [`Wire::OpenAi`](super::Wire) server): what it checks of a request
//! as the real API does, and its answers, whole and as the event sequence
//! the official SDKs read.
//!
//! It keeps no state, as the API with `store: false` does: a request that
//! names a `previous_response_id` is refused like one the API never stored,
//! and every tool result must answer a call in the same `input`. Reasoning
//! comes back with `encrypted_content` ([`encrypted_for`] its text), and a
//! reasoning item sent back must carry exactly that: content altered on
//! the way is refused, as the API refuses content it cannot decrypt.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::{Answer, Recorded, Rejection, now, openai_error, pieces, signature_for};

/// The `encrypted_content` the server gives reasoning of `text`.
pub fn encrypted_for(text: &str) -> String {
    format!("enc-{}", signature_for(text))
}

fn bad(message: String, param: Option<&str>) -> Rejection {
    (
        400,
        openai_error(&message, "invalid_request_error", param, None),
    )
}

/// Refuses what the real endpoint refuses (see the module documentation).
pub(super) fn check(
    r: &Recorded,
    is_json: bool,
    required_key: Option<&str>,
) -> Result<(), Rejection> {
    if r.method != "POST" {
        return Err((
            404,
            openai_error(
                &format!("Invalid URL ({} {})", r.method, r.path),
                "invalid_request_error",
                None,
                None,
            ),
        ));
    }
    if let Some(key) = required_key
        && r.header("authorization")
            .and_then(|v| v.strip_prefix("Bearer "))
            != Some(key)
    {
        return Err((
            401,
            openai_error(
                "Incorrect API key provided.",
                "invalid_request_error",
                None,
                Some("invalid_api_key"),
            ),
        ));
    }
    if !is_json || !r.body.is_object() {
        return Err(bad(
            "We could not parse the JSON body of your request.".into(),
            None,
        ));
    }
    let body = &r.body;
    if !body["model"].is_string() {
        return Err(bad(
            "Missing required parameter: 'model'.".into(),
            Some("model"),
        ));
    }
    if let Some(id) = body["previous_response_id"].as_str() {
        return Err(bad(
            format!("Previous response with id '{id}' not found."),
            Some("previous_response_id"),
        ));
    }
    let items = match &body["input"] {
        Value::String(_) => return Ok(()),
        Value::Array(items) => items,
        _ => {
            return Err(bad(
                "Missing required parameter: 'input'.".into(),
                Some("input"),
            ));
        }
    };
    let mut calls = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let kind = item["type"].as_str().unwrap_or("message");
        match kind {
            "message" => {
                let role = item["role"].as_str().unwrap_or_default();
                if !["user", "assistant", "system", "developer"].contains(&role) {
                    return Err(bad(
                        format!("Invalid value: '{role}'."),
                        Some(&format!("input[{i}].role")),
                    ));
                }
            }
            "function_call" => {
                let Some(id) = item["call_id"].as_str() else {
                    return Err(bad(
                        "Missing required parameter: 'call_id'.".into(),
                        Some(&format!("input[{i}].call_id")),
                    ));
                };
                calls.insert(id.to_owned());
            }
            "function_call_output" => {
                let id = item["call_id"].as_str().unwrap_or_default();
                if !calls.contains(id) {
                    return Err(bad(
                        format!("No tool call found for function call output with call_id {id}."),
                        Some("input"),
                    ));
                }
            }
            "reasoning" => {
                let text: String = item["summary"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s["text"].as_str())
                    .collect();
                if item["encrypted_content"].as_str() != Some(encrypted_for(&text).as_str()) {
                    return Err(bad(
                        format!(
                            "The encrypted content for item {} could not be verified.",
                            item["id"]
                        ),
                        None,
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn output(a: &Answer, id: &str, done: bool) -> Vec<Value> {
    let status = if done { "completed" } else { "in_progress" };
    let mut items = Vec::new();
    if let Some(r) = &a.reasoning {
        items.push(json!({
            "type": "reasoning", "id": format!("rs_{id}"),
            "summary": [{"type": "summary_text", "text": r}],
            "encrypted_content": encrypted_for(r),
        }));
    }
    if !a.text.is_empty() || a.tool_calls.is_empty() {
        let content = if done {
            json!([{"type": "output_text", "text": a.text, "annotations": [], "logprobs": []}])
        } else {
            json!([])
        };
        items.push(json!({
            "type": "message", "id": format!("msg_{id}"), "status": status,
            "role": "assistant", "content": content,
        }));
    }
    for (n, (call_id, name, arguments)) in a.tool_calls.iter().enumerate() {
        items.push(json!({
            "type": "function_call", "id": format!("fc_{id}_{n}"), "call_id": call_id,
            "name": name, "arguments": if done { arguments.as_str() } else { "" }, "status": status,
        }));
    }
    items
}

fn object(a: &Answer, id: &str, request: &Value, done: bool) -> Value {
    json!({
        "id": format!("resp_test{id}"),
        "object": "response",
        "created_at": now(),
        "status": if done { "completed" } else { "in_progress" },
        "background": false,
        "error": null,
        "incomplete_details": null,
        "instructions": request["instructions"],
        "max_output_tokens": request["max_output_tokens"],
        "model": a.model,
        "output": if done { Value::Array(output(a, id, true)) } else { json!([]) },
        "parallel_tool_calls": true,
        "previous_response_id": null,
        "store": request["store"].as_bool().unwrap_or(true),
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": request.get("tool_choice").cloned().unwrap_or(json!("auto")),
        "tools": request.get("tools").cloned().unwrap_or(json!([])),
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": if done {
            json!({
                "input_tokens": a.input_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": a.output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": a.input_tokens + a.output_tokens,
            })
        } else {
            Value::Null
        },
        "metadata": {},
    })
}

/// The whole response object for `a`.
pub(super) fn answer(a: &Answer, id: &str, request: &Value) -> Value {
    object(a, id, request, true)
}

/// The events of `a` streamed, as the API sends them.
pub(super) fn stream(a: &Answer, id: &str, request: &Value) -> Vec<String> {
    let mut events = Vec::new();
    let mut push = |mut event: Value| {
        event["sequence_number"] = json!(events.len());
        let kind = event["type"].as_str().unwrap_or_default().to_owned();
        events.push(format!("event: {kind}\ndata: {event}\n\n"));
    };
    let started = object(a, id, request, false);
    push(json!({"type": "response.created", "response": started}));
    push(json!({"type": "response.in_progress", "response": started}));
    let opened = output(a, id, false);
    let finished = output(a, id, true);
    for (index, (open, done)) in opened.into_iter().zip(finished).enumerate() {
        let item_id = done["id"].clone();
        push(json!({"type": "response.output_item.added", "output_index": index, "item": open}));
        match done["type"].as_str() {
            Some("message") => {
                let part =
                    json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
                push(
                    json!({"type": "response.content_part.added", "item_id": item_id,
                            "output_index": index, "content_index": 0, "part": part}),
                );
                for piece in pieces(&a.text, 3) {
                    push(
                        json!({"type": "response.output_text.delta", "item_id": item_id,
                                "output_index": index, "content_index": 0, "delta": piece, "logprobs": []}),
                    );
                }
                push(
                    json!({"type": "response.output_text.done", "item_id": item_id,
                            "output_index": index, "content_index": 0, "text": a.text, "logprobs": []}),
                );
                push(
                    json!({"type": "response.content_part.done", "item_id": item_id,
                            "output_index": index, "content_index": 0, "part": done["content"][0]}),
                );
            }
            Some("function_call") => {
                let arguments = done["arguments"].as_str().unwrap_or_default().to_owned();
                for piece in pieces(&arguments, 3) {
                    push(
                        json!({"type": "response.function_call_arguments.delta", "item_id": item_id,
                                "output_index": index, "delta": piece}),
                    );
                }
                push(
                    json!({"type": "response.function_call_arguments.done", "item_id": item_id,
                            "output_index": index, "arguments": arguments}),
                );
            }
            _ => {}
        }
        push(json!({"type": "response.output_item.done", "output_index": index, "item": done}));
    }
    push(json!({"type": "response.completed", "response": object(a, id, request, true)}));
    events
}
