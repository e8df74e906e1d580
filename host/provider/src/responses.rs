//! The OpenAI Responses wire, as the gateway relays it: a Responses
//! client's request sent to an upstream that serves `/responses` itself,
//! and its answer read (whole, or streamed as server-sent events) into the
//! reply to store, while the bytes go to the client.
//!
//! The answer's `output` items are read with core's Responses reader, so
//! what the message model has no place for (reasoning items with their
//! `encrypted_content`, web search calls, ...) is kept verbatim in the
//! message's metadata and written back by core's writer on the next
//! request. A stream is read event by event; its answer is the response
//! object of its last event (`response.completed`, `response.incomplete`),
//! the deltas before it only show progress.

use agent_host_core::format::responses;
use agent_host_core::{Message, Role, Usage};
use serde_json::{Value, json};

use super::StreamEvent;
use super::http::{self, ApiError, Reply, StreamDecoder, StreamError, Wire};
use super::sse::Event;

/// The Responses wire.
pub(super) struct Responses;

impl Wire for Responses {
    const END_MARKER: &'static str = "response.completed";
    type Decoder = Decoder;

    fn parse_reply(body: Value) -> Result<Reply, String> {
        read_response(&body)
    }
}

/// Reads a response object: its `output` items as one assistant message,
/// its `usage` and its `model`; why it stopped is its `status` (and the
/// reason of an incomplete one).
fn read_response(response: &Value) -> Result<Reply, String> {
    if let Some(error) = response.get("error").filter(|e| !e.is_null()) {
        return Err(format!("the response failed: {error}"));
    }
    let Some(output) = response.get("output").and_then(Value::as_array) else {
        return Err("the response has no `output` list".to_owned());
    };
    let messages = responses::from_value(json!({ "output": output }))
        .map_err(|e| format!("the response's `output`: {e}"))?;
    let mut message = merged(messages)?;
    let usage = response.get("usage").filter(|u| u.is_object());
    message.usage = usage.map(|usage| {
        let number = |v: Option<&Value>| v.and_then(Value::as_u64);
        Usage {
            input_tokens: number(usage.get("input_tokens")).unwrap_or(0),
            output_tokens: number(usage.get("output_tokens")).unwrap_or(0),
            cache_read_tokens: number(
                usage
                    .get("input_tokens_details")
                    .and_then(|d| d.get("cached_tokens")),
            ),
            cache_write_tokens: None,
        }
    });
    message.model = response
        .get("model")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let status = response.get("status").and_then(Value::as_str);
    let stop_reason = match status {
        Some("incomplete") => Some(
            response
                .get("incomplete_details")
                .and_then(|d| d.get("reason"))
                .and_then(Value::as_str)
                .unwrap_or("incomplete")
                .to_owned(),
        ),
        Some(_) if !message.tool_calls.is_empty() => Some("tool_calls".to_owned()),
        Some(status) => Some(status.to_owned()),
        None => None,
    };
    Ok(Reply {
        message: http::stamp(message),
        stop_reason,
    })
}

/// The assistant messages core's reader made of an answer's items, as one:
/// its texts, reasoning, tool calls and kept items in order. An answer
/// with no item at all is an empty assistant message.
fn merged(messages: Vec<Message>) -> Result<Message, String> {
    let mut answer: Option<Message> = None;
    for m in messages {
        if m.role != Role::Assistant {
            return Err(format!(
                "the response's `output` holds a {} message; an answer holds only the model's items",
                m.role
            ));
        }
        let Some(first) = answer.as_mut() else {
            answer = Some(m);
            continue;
        };
        let text = m.text();
        if !text.is_empty() {
            let mut joined = first.text().into_owned();
            if !joined.is_empty() {
                joined.push('\n');
            }
            joined.push_str(&text);
            first.set_text(joined);
        }
        first.tool_calls.extend(m.tool_calls);
        if first.reasoning.is_none() {
            first.reasoning = m.reasoning;
        }
        // What the reader kept of each item (ids, reasoning items) stays
        // with the one message, in order.
        if let Some(Value::Array(more)) = m.metadata.get(responses::EXTRA_KEY).cloned() {
            let kept = first
                .metadata
                .entry(responses::EXTRA_KEY)
                .or_insert_with(|| json!([]));
            if let Value::Array(kept) = kept {
                kept.extend(more);
            }
        }
    }
    Ok(answer.unwrap_or_else(|| Message::assistant("")))
}

/// Reads a streamed response: text and reasoning deltas are shown as they
/// come; the answer is the response object of the last event.
#[derive(Default)]
pub(super) struct Decoder {
    response: Option<Value>,
}

impl StreamDecoder for Decoder {
    fn event(
        &mut self,
        event: Event,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<(), StreamError> {
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(());
        }
        let value: Value = serde_json::from_str(data).map_err(|e| {
            StreamError::Malformed(format!(
                "a stream event is not JSON ({e}): {}",
                http::truncate(data, 200)
            ))
        })?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let delta = || {
            value
                .get("delta")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        match kind {
            "response.output_text.delta" => emit(StreamEvent::Text(delta())),
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                emit(StreamEvent::Reasoning(delta()));
            }
            "response.output_item.added" => {
                let item = value.get("item");
                if item.and_then(|i| i.get("type")).and_then(Value::as_str) == Some("function_call")
                {
                    let name = item
                        .and_then(|i| i.get("name"))
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    emit(StreamEvent::ToolCall {
                        name: name.to_owned(),
                    });
                }
            }
            "response.completed" | "response.incomplete" => {
                self.response = value.get("response").cloned();
                if self.response.is_none() {
                    return Err(StreamError::Malformed(format!(
                        "a `{kind}` event without its `response`"
                    )));
                }
            }
            "response.failed" => {
                let error = value
                    .get("response")
                    .and_then(|r| r.get("error"))
                    .cloned()
                    .unwrap_or(Value::Null);
                return Err(StreamError::Api(failure(&error)));
            }
            "error" => return Err(StreamError::Api(failure(&value))),
            _ => {}
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.response.is_some()
    }

    fn finish(self) -> Result<Reply, String> {
        match self.response {
            Some(response) => read_response(&response),
            None => Err("the stream ended before its `response.completed` event".to_owned()),
        }
    }
}

/// An error a stream reported (`{"code", "message"}`), as the status it
/// stands for.
fn failure(error: &Value) -> ApiError {
    let mut api = ApiError::from_body(200, &json!({ "error": error }).to_string());
    api.status = match api.code.as_deref() {
        Some("context_length_exceeded") => 400,
        Some("rate_limit_exceeded") => 429,
        _ => 500,
    };
    api
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESPONSE: &str = r#"{
        "id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Look it up."}], "encrypted_content": "gAAAA-opaque"},
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup", "arguments": "{\"q\":1}", "status": "completed"}
        ],
        "usage": {"input_tokens": 120, "output_tokens": 30, "input_tokens_details": {"cached_tokens": 100}}
    }"#;

    #[test]
    fn a_whole_response_is_one_assistant_message_with_what_it_cannot_hold_kept() {
        let reply = Responses::parse_reply(serde_json::from_str(RESPONSE).unwrap()).unwrap();
        let m = &reply.message;
        assert_eq!(m.role, Role::Assistant);
        assert_eq!(m.text(), "Checking.");
        assert_eq!(m.tool_calls.len(), 1);
        assert_eq!(m.tool_calls[0].id, "call_1");
        assert_eq!(m.model.as_deref(), Some("gpt-5"));
        let usage = m.usage.as_ref().unwrap();
        assert_eq!((usage.input_tokens, usage.output_tokens), (120, 30));
        assert_eq!(usage.cache_read_tokens, Some(100));
        assert_eq!(reply.stop_reason.as_deref(), Some("tool_calls"));
        // The encrypted reasoning goes back to the upstream as it came.
        let items = responses::to_items(std::slice::from_ref(m)).unwrap();
        assert!(
            items
                .iter()
                .any(|i| i["encrypted_content"] == "gAAAA-opaque"),
            "{items:#?}"
        );
    }

    #[test]
    fn several_output_messages_are_one_answer() {
        let reply = Responses::parse_reply(json!({"status": "completed", "output": [
            {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "First."}]},
            {"type": "message", "id": "msg_2", "role": "assistant", "content": [{"type": "output_text", "text": "Second."}]},
        ]}))
        .unwrap();
        assert_eq!(reply.message.text(), "First.\nSecond.");
        assert_eq!(reply.stop_reason.as_deref(), Some("completed"));
        let empty = Responses::parse_reply(json!({"status": "completed", "output": []})).unwrap();
        assert_eq!(empty.message.role, Role::Assistant);
        assert!(empty.message.text().is_empty());
    }

    #[test]
    fn a_stream_is_read_from_its_completed_response() {
        let mut decoder = Decoder::default();
        let mut seen = Vec::new();
        let completed =
            format!(r#"{{"type":"response.completed","response":{RESPONSE}}}"#).replace('\n', " ");
        for data in [
            r#"{"type":"response.created","response":{"id":"resp_1","output":[]}}"#,
            r#"{"type":"response.output_text.delta","delta":"Check"}"#,
            r#"{"type":"response.output_item.added","item":{"type":"function_call","name":"lookup"}}"#,
            completed.as_str(),
        ] {
            assert!(!decoder.is_done());
            let event = Event {
                event: String::new(),
                data: data.to_owned(),
            };
            if decoder.event(event, &mut |e| seen.push(e)).is_err() {
                panic!("{data}");
            }
        }
        assert!(decoder.is_done());
        assert_eq!(
            seen,
            vec![
                StreamEvent::Text("Check".into()),
                StreamEvent::ToolCall {
                    name: "lookup".into()
                }
            ]
        );
        assert_eq!(decoder.finish().unwrap().message.text(), "Checking.");
    }

    #[test]
    fn failures_and_bad_answers_say_what_went_wrong() {
        let mut decoder = Decoder::default();
        let failed = Event {
            event: String::new(),
            data: r#"{"type":"response.failed","response":{"error":{"code":"rate_limit_exceeded","message":"slow down"}}}"#.into(),
        };
        match decoder.event(failed, &mut |_| {}) {
            Err(StreamError::Api(api)) => {
                assert_eq!(api.status, 429);
                assert!(api.message.contains("slow down"));
            }
            _ => panic!("a failed response is an error"),
        }
        let cut = Decoder::default().finish().unwrap_err();
        assert!(cut.contains("response.completed"), "{cut}");
        let bad = Responses::parse_reply(json!({"status": "completed"})).unwrap_err();
        assert!(bad.contains("`output`"), "{bad}");
        let user = Responses::parse_reply(
            json!({"output": [{"type": "message", "role": "user", "content": "hi"}]}),
        )
        .unwrap_err();
        assert!(user.contains("user message"), "{user}");
    }
}
