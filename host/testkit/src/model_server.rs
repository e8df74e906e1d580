//! A loopback model server that speaks the OpenAI Chat Completions and the
//! Anthropic Messages wire formats (and, beside Chat Completions, OpenAI
//! Responses: [`responses`]), for tests of everything that calls a model.
//!
//! It checks requests the way the real APIs do (path, required fields, role
//! order, tool call pairing, thinking signatures, unknown top-level fields on
//! Anthropic) and answers a bad one with the API's own 400 body, so a
//! request-building bug fails the test that made the request. Answers are
//! scripted ([`LlmServer::push`], [`LlmServer::respond_with`]); with no
//! script it answers `reply N` to the N-th request. Streamed answers
//! (`"stream": true`) are server-sent events in chunked transfer encoding,
//! one flushed chunk per event, with text and tool arguments split into
//! several deltas as real servers do.
//!
//! Plain `std::net` with a thread per connection and `Connection: close`:
//! no async runtime to share with the code under test. Dropping the server
//! stops its listener, so tests run in parallel on ports of their own.
//!
//! ```ignore
//! use agent_host_testkit::model_server::{Answer, LlmServer, Scripted, Wire};
//! let server = LlmServer::start(Wire::OpenAi);
//! server.push(Scripted::RateLimited);
//! server.push(Answer::text("hello").into());
//! settings.base_url = server.base_url();
//! // ... run the code under test ...
//! assert_eq!(server.requests().len(), 2);
//! ```

use std::collections::{HashSet, VecDeque};
use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

pub mod responses;

/// Which wire format the server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// OpenAI Chat Completions: `POST /v1/chat/completions`.
    OpenAi,
    /// Anthropic Messages: `POST /v1/messages`.
    Anthropic,
}

/// What the server does with one (valid) request.
#[derive(Clone, Debug)]
pub enum Scripted {
    /// A normal answer, streamed iff the request has `"stream": true`.
    Answer(Answer),
    /// A raw answer: this status, this body (sent as `application/json`),
    /// and a `Retry-After` header (seconds) when given.
    Status {
        /// The HTTP status.
        status: u16,
        /// The body, as is.
        body: String,
        /// The `Retry-After` header.
        retry_after: Option<u64>,
    },
    /// 429 with the wire's real rate-limit body and `Retry-After: 0`.
    RateLimited,
    /// 500 with the wire's real server-error body.
    ServerError,
    /// The wire's real context-length error (400).
    ContextLength,
    /// 200 with a body that is not the wire's format (an HTML page, as a
    /// captive portal or a misconfigured proxy sends).
    Malformed,
    /// Reads the request, then says nothing for this long and closes.
    Hang(Duration),
    /// Starts the answer, then drops the connection halfway: half the
    /// events of a stream (no end marker), or half of a whole body.
    CutOff(Answer),
    /// A 200 event stream of exactly these events (each the raw text of one
    /// event, `data: ...\n\n`), one chunk each, then a clean end: for
    /// streams a real server would not send, such as an error event halfway.
    Events(Vec<String>),
    /// 307 Temporary Redirect to `location` (a whole URL or a path), with
    /// no body: a client that follows it sends the same request, body and
    /// headers included, there.
    Redirect(String),
    /// A normal streamed answer whose events go out `every` apart (the
    /// first one too): a long answer that streams fine but slowly.
    SlowStream {
        /// The answer.
        answer: Answer,
        /// The pause before each event.
        every: Duration,
    },
    /// A normal streamed answer that goes silent for `silence` halfway
    /// (after half its events), then sends the rest.
    Stall {
        /// The answer.
        answer: Answer,
        /// The silence.
        silence: Duration,
    },
}

impl From<Answer> for Scripted {
    fn from(answer: Answer) -> Self {
        Scripted::Answer(answer)
    }
}

/// A scripted model answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The answer text (may be empty with tool calls).
    pub text: String,
    /// Reasoning: `reasoning_content` (OpenAI) or a signed thinking block
    /// (Anthropic; the signature is [`signature_for`] the text).
    pub reasoning: Option<String>,
    /// Tool calls: `(id, name, arguments as JSON text)`.
    pub tool_calls: Vec<(String, String, String)>,
    /// The prompt tokens reported.
    pub input_tokens: u64,
    /// The answer tokens reported.
    pub output_tokens: u64,
    /// The model name reported.
    pub model: String,
}

impl Answer {
    /// A text answer with usage 10 in / 5 out from `test-model`.
    pub fn text(t: &str) -> Self {
        Answer {
            text: t.to_owned(),
            reasoning: None,
            tool_calls: Vec::new(),
            input_tokens: 10,
            output_tokens: 5,
            model: "test-model".to_owned(),
        }
    }

    /// An answer that only calls tools: `(id, name, arguments)`.
    pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Self {
        let mut answer = Answer::text("");
        for (id, name, arguments) in calls {
            answer = answer.with_tool_call(id, name, arguments);
        }
        answer
    }

    /// Adds reasoning.
    pub fn with_reasoning(mut self, reasoning: &str) -> Self {
        self.reasoning = Some(reasoning.to_owned());
        self
    }

    /// Adds a tool call.
    pub fn with_tool_call(mut self, id: &str, name: &str, arguments: &str) -> Self {
        self.tool_calls
            .push((id.to_owned(), name.to_owned(), arguments.to_owned()));
        self
    }

    /// Sets the usage reported.
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.input_tokens = input_tokens;
        self.output_tokens = output_tokens;
        self
    }

    /// Sets the model name reported.
    pub fn with_model(mut self, model: &str) -> Self {
        model.clone_into(&mut self.model);
        self
    }
}

/// The signature the server puts on a thinking block with this text, and
/// checks when the block is sent back (the real API refuses a thinking
/// block whose text was changed).
pub fn signature_for(thinking: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in thinking.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("EqQBsig{hash:016x}")
}

/// One request the server received.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    /// `POST`, ...
    pub method: String,
    /// The path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The headers, names lowercased, in order.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Value::String` of the text when it is not JSON).
    pub body: Value,
}

impl Recorded {
    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the request asked for a streamed answer.
    pub fn streamed(&self) -> bool {
        self.body.get("stream") == Some(&Value::Bool(true))
    }

    /// Whether `needle` occurs anywhere in the body (to answer, say,
    /// summary requests differently from the others).
    pub fn contains(&self, needle: &str) -> bool {
        self.body.to_string().contains(needle)
    }

    /// The request's messages (`body.messages`), empty when absent.
    pub fn messages(&self) -> &[Value] {
        self.body
            .get("messages")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }
}

type Responder = dyn Fn(&Recorded) -> Scripted + Send + Sync;

struct Shared {
    wire: Wire,
    script: Mutex<VecDeque<Scripted>>,
    responder: Mutex<Option<Arc<Responder>>>,
    requests: Mutex<Vec<Recorded>>,
    required_key: Mutex<Option<String>>,
    stop: AtomicBool,
}

/// The server. Listens on `127.0.0.1` on a port of its own until dropped.
pub struct LlmServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    listener: Option<JoinHandle<()>>,
}

impl LlmServer {
    /// Starts a server speaking `wire`, with an empty script.
    pub fn start(wire: Wire) -> LlmServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().expect("the bound address");
        let shared = Arc::new(Shared {
            wire,
            script: Mutex::new(VecDeque::new()),
            responder: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
            required_key: Mutex::new(None),
            stop: AtomicBool::new(false),
        });
        let accepting = Arc::clone(&shared);
        let handle = thread::Builder::new()
            .name(format!("llm-server-{}", addr.port()))
            .spawn(move || {
                for stream in listener.incoming() {
                    if accepting.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let shared = Arc::clone(&accepting);
                    thread::spawn(move || {
                        // A client that goes away mid-answer is not the server's problem.
                        let _ = serve(stream, &shared);
                    });
                }
            })
            .expect("spawn the listener thread");
        LlmServer {
            addr,
            shared,
            listener: Some(handle),
        }
    }

    /// Queues a scripted answer; valid requests take them in order.
    pub fn push(&self, s: Scripted) {
        lock(&self.shared.script).push_back(s);
    }

    /// Decides the answer when the queue is empty (instead of `reply N`).
    pub fn respond_with(&self, f: impl Fn(&Recorded) -> Scripted + Send + Sync + 'static) {
        *lock(&self.shared.responder) = Some(Arc::new(f));
    }

    /// Requires this API key (`Authorization: Bearer KEY` or `x-api-key:
    /// KEY`); a request without it gets the wire's real 401.
    pub fn require_key(&self, key: &str) {
        *lock(&self.shared.required_key) = Some(key.to_owned());
    }

    /// The wire it speaks.
    pub fn wire(&self) -> Wire {
        self.shared.wire
    }

    /// What goes in `ProviderSettings::base_url`: `http://127.0.0.1:PORT/v1`
    /// for OpenAI, `http://127.0.0.1:PORT` for Anthropic.
    pub fn base_url(&self) -> String {
        match self.shared.wire {
            Wire::OpenAi => format!("http://{}/v1", self.addr),
            Wire::Anthropic => format!("http://{}", self.addr),
        }
    }

    /// Every request received so far, in order (invalid ones included).
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests).clone()
    }
}

impl Drop for LlmServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept so the listener sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(handle) = self.listener.take() {
            let _ = handle.join();
        }
    }
}

/// A poisoned lock means a test thread panicked; the data is still good.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------- HTTP

struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn serve(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    let Some(request) = read_request(&mut reader)? else {
        return Ok(());
    };
    let body = serde_json::from_slice::<Value>(&request.body);
    let recorded = Recorded {
        method: request.method,
        path: request.path,
        headers: request.headers,
        body: match &body {
            Ok(v) => v.clone(),
            Err(_) => Value::String(String::from_utf8_lossy(&request.body).into_owned()),
        },
    };
    let number = {
        let mut requests = lock(&shared.requests);
        requests.push(recorded.clone());
        requests.len()
    };
    let wire = shared.wire;
    let required_key = lock(&shared.required_key).clone();
    // OpenAI's Responses endpoint, beside Chat Completions.
    let responses_api = wire == Wire::OpenAi && recorded.path == "/v1/responses";
    let checked = if responses_api {
        responses::check(&recorded, body.is_ok(), required_key.as_deref())
    } else {
        check(wire, &recorded, body.is_ok(), required_key.as_deref())
    };
    if let Err((status, error)) = checked {
        return write_body(
            &mut out,
            status,
            "application/json",
            &error.to_string(),
            None,
        );
    }
    let scripted = lock(&shared.script).pop_front();
    let scripted = match scripted {
        Some(s) => s,
        None => {
            let responder = lock(&shared.responder).clone();
            match responder {
                Some(f) => f(&recorded),
                None => Scripted::Answer(Answer::text(&format!("reply {number}"))),
            }
        }
    };
    let json = |out: &mut TcpStream, status, body: Value, retry_after| {
        write_body(
            out,
            status,
            "application/json",
            &body.to_string(),
            retry_after,
        )
    };
    match scripted {
        Scripted::Answer(answer) => {
            let id = format!("{number}");
            if recorded.streamed() {
                let events = stream_events(wire, &recorded, &answer, &id);
                write_stream(&mut out, &events)
            } else {
                let body = match wire {
                    _ if responses_api => responses::answer(&answer, &id, &recorded.body),
                    Wire::OpenAi => openai_answer(&answer, &id),
                    Wire::Anthropic => anthropic_answer(&answer, &id),
                };
                write_body(&mut out, 200, "application/json", &body.to_string(), None)
            }
        }
        Scripted::Status {
            status,
            body,
            retry_after,
        } => write_body(&mut out, status, "application/json", &body, retry_after),
        Scripted::RateLimited => json(&mut out, 429, rate_limited(wire), Some(0)),
        Scripted::ServerError => json(&mut out, 500, server_error(wire), None),
        Scripted::ContextLength => json(&mut out, 400, context_length(wire), None),
        Scripted::Events(events) => write_stream(&mut out, &events),
        Scripted::CutOff(answer) => {
            let id = format!("{number}");
            if recorded.streamed() {
                let events = stream_events(wire, &recorded, &answer, &id);
                // Half the events, then the connection closes without the
                // chunked terminator.
                write_stream_head(&mut out)?;
                for event in &events[..events.len() / 2] {
                    write_chunk(&mut out, event)?;
                }
                Ok(())
            } else {
                let body = match wire {
                    _ if responses_api => responses::answer(&answer, &id, &recorded.body),
                    Wire::OpenAi => openai_answer(&answer, &id),
                    Wire::Anthropic => anthropic_answer(&answer, &id),
                }
                .to_string();
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                out.write_all(head.as_bytes())?;
                out.write_all(&body.as_bytes()[..body.len() / 2])?;
                out.flush()
            }
        }
        Scripted::Malformed => write_body(
            &mut out,
            200,
            "text/html; charset=utf-8",
            "<html><head><title>Welcome</title></head><body>Please log in to continue.</body></html>",
            None,
        ),
        Scripted::Hang(duration) => {
            thread::sleep(duration);
            Ok(())
        }
        Scripted::Redirect(location) => {
            let head = format!(
                "HTTP/1.1 307 Temporary Redirect\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
            out.write_all(head.as_bytes())?;
            out.flush()
        }
        Scripted::SlowStream { answer, every } => {
            let events = stream_events(wire, &recorded, &answer, &number.to_string());
            write_stream_head(&mut out)?;
            for event in &events {
                thread::sleep(every);
                write_chunk(&mut out, event)?;
            }
            out.write_all(b"0\r\n\r\n")?;
            out.flush()
        }
        Scripted::Stall { answer, silence } => {
            let events = stream_events(wire, &recorded, &answer, &number.to_string());
            let (first, rest) = events.split_at(events.len() / 2);
            write_stream_head(&mut out)?;
            for event in first {
                write_chunk(&mut out, event)?;
            }
            thread::sleep(silence);
            for event in rest {
                write_chunk(&mut out, event)?;
            }
            out.write_all(b"0\r\n\r\n")?;
            out.flush()
        }
    }
}

/// The events of `answer` streamed in `wire`'s format (with the usage
/// chunk when the request asked for it).
fn stream_events(wire: Wire, recorded: &Recorded, answer: &Answer, id: &str) -> Vec<String> {
    match wire {
        Wire::OpenAi if recorded.path == "/v1/responses" => {
            responses::stream(answer, id, &recorded.body)
        }
        Wire::OpenAi => {
            let include_usage = recorded.body["stream_options"]["include_usage"] == true;
            openai_stream(answer, id, include_usage)
        }
        Wire::Anthropic => anthropic_stream(answer, id),
    }
}

fn read_request(reader: &mut impl BufRead) -> io::Result<Option<Request>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let header = line.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let size = line.trim().split(';').next().unwrap_or("0");
            let size = usize::from_str_radix(size, 16)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            if size == 0 {
                // Trailers, up to the blank line.
                loop {
                    line.clear();
                    if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            reader.read_exact(&mut body[start..])?;
            line.clear();
            reader.read_line(&mut line)?;
        }
    } else if let Some(length) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    }
    Ok(Some(Request {
        method,
        path,
        headers,
        body,
    }))
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Site Overloaded",
        _ => "Status",
    }
}

fn write_body(
    out: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &str,
    retry_after: Option<u64>,
) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n",
        reason_phrase(status),
        body.len()
    );
    if let Some(seconds) = retry_after {
        head.push_str(&format!("retry-after: {seconds}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.write_all(body.as_bytes())?;
    out.flush()
}

/// Writes server-sent events, one chunk per event, flushed one by one so
/// the client sees them arrive apart.
fn write_stream(out: &mut TcpStream, events: &[String]) -> io::Result<()> {
    write_stream_head(out)?;
    for event in events {
        write_chunk(out, event)?;
    }
    out.write_all(b"0\r\n\r\n")?;
    out.flush()
}

fn write_stream_head(out: &mut TcpStream) -> io::Result<()> {
    out.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
    )?;
    out.flush()
}

fn write_chunk(out: &mut TcpStream, event: &str) -> io::Result<()> {
    write!(out, "{:x}\r\n", event.len())?;
    out.write_all(event.as_bytes())?;
    out.write_all(b"\r\n")?;
    out.flush()
}

// ---------------------------------------------------------------- answers

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `text` in `n` pieces (fewer if it is short), cut on character boundaries.
fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(n).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn parsed_arguments(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(arguments)
        .unwrap_or_else(|e| panic!("scripted tool arguments are not JSON ({e}): {arguments}"))
}

fn openai_answer(a: &Answer, id: &str) -> Value {
    let mut message = json!({
        "role": "assistant",
        "content": if a.text.is_empty() && !a.tool_calls.is_empty() { Value::Null } else { json!(a.text) },
        "refusal": null,
        "annotations": [],
    });
    if let Some(r) = &a.reasoning {
        message["reasoning_content"] = json!(r);
    }
    if !a.tool_calls.is_empty() {
        message["tool_calls"] = a
            .tool_calls
            .iter()
            .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
            .collect();
    }
    json!({
        "id": format!("chatcmpl-test{id}"),
        "object": "chat.completion",
        "created": now(),
        "model": a.model,
        "choices": [{"index": 0, "message": message, "logprobs": null,
                     "finish_reason": if a.tool_calls.is_empty() { "stop" } else { "tool_calls" }}],
        "usage": openai_usage(a),
        "system_fingerprint": "fp_test",
    })
}

fn openai_usage(a: &Answer) -> Value {
    json!({
        "prompt_tokens": a.input_tokens,
        "completion_tokens": a.output_tokens,
        "total_tokens": a.input_tokens + a.output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    })
}

fn openai_stream(a: &Answer, id: &str, include_usage: bool) -> Vec<String> {
    let created = now();
    let chunk = |delta: Value, finish: Value| {
        let mut c = json!({
            "id": format!("chatcmpl-test{id}"),
            "object": "chat.completion.chunk",
            "created": created,
            "model": a.model,
            "system_fingerprint": "fp_test",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        if include_usage {
            c["usage"] = Value::Null;
        }
        format!("data: {c}\n\n")
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": "", "refusal": null}),
        Value::Null,
    )];
    if let Some(r) = &a.reasoning {
        for piece in pieces(r, 3) {
            events.push(chunk(json!({"reasoning_content": piece}), Value::Null));
        }
    }
    for piece in pieces(&a.text, 3) {
        events.push(chunk(json!({"content": piece}), Value::Null));
    }
    for (index, (call_id, name, args)) in a.tool_calls.iter().enumerate() {
        events.push(chunk(
            json!({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                   "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        ));
        for piece in pieces(args, 3) {
            events.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                Value::Null,
            ));
        }
    }
    let finish = if a.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    events.push(chunk(json!({}), json!(finish)));
    if include_usage {
        let usage = json!({
            "id": format!("chatcmpl-test{id}"),
            "object": "chat.completion.chunk",
            "created": created,
            "model": a.model,
            "system_fingerprint": "fp_test",
            "choices": [],
            "usage": openai_usage(a),
        });
        events.push(format!("data: {usage}\n\n"));
    }
    events.push("data: [DONE]\n\n".to_owned());
    events
}

fn anthropic_blocks(a: &Answer) -> Vec<Value> {
    let mut blocks = Vec::new();
    if let Some(r) = &a.reasoning {
        blocks.push(json!({"type": "thinking", "thinking": r, "signature": signature_for(r)}));
    }
    if !a.text.is_empty() || a.tool_calls.is_empty() {
        blocks.push(json!({"type": "text", "text": a.text}));
    }
    for (id, name, args) in &a.tool_calls {
        blocks.push(
            json!({"type": "tool_use", "id": id, "name": name, "input": parsed_arguments(args)}),
        );
    }
    blocks
}

fn anthropic_stop_reason(a: &Answer) -> &'static str {
    if a.tool_calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

fn anthropic_answer(a: &Answer, id: &str) -> Value {
    json!({
        "id": format!("msg_test{id}"),
        "type": "message",
        "role": "assistant",
        "model": a.model,
        "content": anthropic_blocks(a),
        "stop_reason": anthropic_stop_reason(a),
        "stop_sequence": null,
        "usage": {"input_tokens": a.input_tokens, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": a.output_tokens},
    })
}

fn anthropic_stream(a: &Answer, id: &str) -> Vec<String> {
    let event = |data: Value| {
        format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap()
        )
    };
    let mut events = vec![event(json!({
        "type": "message_start",
        "message": {
            "id": format!("msg_test{id}"), "type": "message", "role": "assistant",
            "model": a.model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": a.input_tokens, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0, "output_tokens": 1},
        },
    }))];
    for (index, block) in anthropic_blocks(a).into_iter().enumerate() {
        let start = match block["type"].as_str().unwrap() {
            "thinking" => json!({"type": "thinking", "thinking": "", "signature": ""}),
            "text" => json!({"type": "text", "text": ""}),
            _ => json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
        };
        events.push(event(
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        if index == 0 {
            events.push(event(json!({"type": "ping"})));
        }
        let delta = |delta: Value| {
            event(json!({"type": "content_block_delta", "index": index, "delta": delta}))
        };
        match block["type"].as_str().unwrap() {
            "thinking" => {
                let text = block["thinking"].as_str().unwrap();
                for piece in pieces(text, 3) {
                    events.push(delta(json!({"type": "thinking_delta", "thinking": piece})));
                }
                events.push(delta(
                    json!({"type": "signature_delta", "signature": block["signature"]}),
                ));
            }
            "text" => {
                for piece in pieces(block["text"].as_str().unwrap(), 3) {
                    events.push(delta(json!({"type": "text_delta", "text": piece})));
                }
            }
            _ => {
                let (_, _, args) = a
                    .tool_calls
                    .iter()
                    .find(|(id, _, _)| block["id"] == id.as_str())
                    .unwrap();
                for piece in pieces(args, 3) {
                    events.push(delta(
                        json!({"type": "input_json_delta", "partial_json": piece}),
                    ));
                }
            }
        }
        events.push(event(json!({"type": "content_block_stop", "index": index})));
    }
    events.push(event(json!({
        "type": "message_delta",
        "delta": {"stop_reason": anthropic_stop_reason(a), "stop_sequence": null},
        "usage": {"output_tokens": a.output_tokens},
    })));
    events.push(event(json!({"type": "message_stop"})));
    events
}

// ---------------------------------------------------------------- errors

fn openai_error(message: &str, kind: &str, param: Option<&str>, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": param, "code": code}})
}

fn anthropic_error(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

fn rate_limited(wire: Wire) -> Value {
    match wire {
        Wire::OpenAi => openai_error(
            "Rate limit reached for test-model in organization org-test on tokens per min (TPM): Limit 30000, Used 30000, Requested 100. Please try again in 0s.",
            "tokens",
            None,
            Some("rate_limit_exceeded"),
        ),
        Wire::Anthropic => anthropic_error(
            "rate_limit_error",
            "This request would exceed the rate limit for your organization of 50 requests per minute.",
        ),
    }
}

fn server_error(wire: Wire) -> Value {
    match wire {
        Wire::OpenAi => openai_error(
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
            None,
            None,
        ),
        Wire::Anthropic => anthropic_error("api_error", "Internal server error"),
    }
}

fn context_length(wire: Wire) -> Value {
    match wire {
        Wire::OpenAi => openai_error(
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 210000 tokens. Please reduce the length of the messages.",
            "invalid_request_error",
            Some("messages"),
            Some("context_length_exceeded"),
        ),
        Wire::Anthropic => anthropic_error(
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
        ),
    }
}

// ---------------------------------------------------------------- checks

type Rejection = (u16, Value);

fn check(
    wire: Wire,
    request: &Recorded,
    is_json: bool,
    required_key: Option<&str>,
) -> Result<(), Rejection> {
    match wire {
        Wire::OpenAi => check_openai(request, is_json, required_key),
        Wire::Anthropic => check_anthropic(request, is_json, required_key),
    }
}

fn openai_bad(message: String, param: Option<&str>, code: Option<&str>) -> Rejection {
    (
        400,
        openai_error(&message, "invalid_request_error", param, code),
    )
}

fn check_openai(r: &Recorded, is_json: bool, required_key: Option<&str>) -> Result<(), Rejection> {
    if r.method != "POST" || r.path != "/v1/chat/completions" {
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
    if let Some(key) = required_key {
        match r
            .header("authorization")
            .and_then(|v| v.strip_prefix("Bearer "))
        {
            None => {
                return Err((
                    401,
                    openai_error(
                        "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                        "invalid_request_error",
                        None,
                        None,
                    ),
                ));
            }
            Some(given) if given != key => {
                let tail: String = given
                    .chars()
                    .rev()
                    .take(4)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                return Err((
                    401,
                    openai_error(
                        &format!(
                            "Incorrect API key provided: sk-...{tail}. You can find your API key at https://platform.openai.com/account/api-keys."
                        ),
                        "invalid_request_error",
                        None,
                        Some("invalid_api_key"),
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    if !is_json || !r.body.is_object() {
        return Err(openai_bad(
            "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)".into(),
            None,
            None,
        ));
    }
    let body = &r.body;
    if !body.get("model").is_some_and(Value::is_string) {
        return Err(openai_bad(
            "you must provide a model parameter".into(),
            None,
            None,
        ));
    }
    let Some(messages) = body.get("messages") else {
        return Err(openai_bad(
            "Missing required parameter: 'messages'.".into(),
            Some("messages"),
            Some("missing_required_parameter"),
        ));
    };
    let Some(messages) = messages.as_array() else {
        return Err(openai_bad(
            "Invalid type for 'messages': expected an array of objects.".into(),
            Some("messages"),
            Some("invalid_type"),
        ));
    };
    if messages.is_empty() {
        return Err(openai_bad(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.".into(),
            Some("messages"),
            Some("empty_array"),
        ));
    }
    if let Some(t) = body.get("temperature") {
        match t.as_f64() {
            Some(t) if (0.0..=2.0).contains(&t) => {}
            _ => {
                return Err(openai_bad(
                    format!(
                        "Invalid 'temperature': expected a number between 0 and 2, but got {t} instead."
                    ),
                    Some("temperature"),
                    Some("invalid_value"),
                ));
            }
        }
    }
    for key in ["max_tokens", "max_completion_tokens"] {
        if let Some(v) = body.get(key)
            && v.as_u64().is_none_or(|n| n < 1)
        {
            return Err(openai_bad(
                format!("Invalid '{key}': expected an integer >= 1, but got {v} instead."),
                Some(key),
                Some("invalid_value"),
            ));
        }
    }
    if let Some(stream) = body.get("stream")
        && !stream.is_boolean()
    {
        return Err(openai_bad(
            "Invalid type for 'stream': expected a boolean.".into(),
            Some("stream"),
            Some("invalid_type"),
        ));
    }
    if body.get("stream_options").is_some() && body.get("stream") != Some(&Value::Bool(true)) {
        return Err(openai_bad(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.".into(),
            Some("stream_options"),
            None,
        ));
    }
    if let Some(tools) = body.get("tools") {
        let Some(tools) = tools.as_array() else {
            return Err(openai_bad(
                "Invalid type for 'tools': expected an array.".into(),
                Some("tools"),
                Some("invalid_type"),
            ));
        };
        for (i, tool) in tools.iter().enumerate() {
            if tool.get("type").and_then(Value::as_str) != Some("function")
                || !tool
                    .get("function")
                    .and_then(|f| f.get("name"))
                    .is_some_and(Value::is_string)
            {
                return Err(openai_bad(
                    format!("Missing required parameter: 'tools[{i}].function.name'."),
                    Some(&format!("tools[{i}].function.name")),
                    Some("missing_required_parameter"),
                ));
            }
        }
    }
    check_openai_messages(messages)
}

fn check_openai_messages(messages: &[Value]) -> Result<(), Rejection> {
    // Call ids still waiting for their tool message, and the message that made them.
    let mut open: Vec<String> = Vec::new();
    let mut opened_at = 0;
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        if !open.is_empty() && role != "tool" {
            return Err(openai_bad(
                format!(
                    "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                    open.join(", ")
                ),
                Some(&format!("messages.[{opened_at}].role")),
                None,
            ));
        }
        let content = m.get("content");
        let content_ok = |required: bool| match content {
            None | Some(Value::Null) => !required,
            Some(Value::String(_)) => true,
            Some(Value::Array(parts)) => parts.iter().all(|p| {
                matches!(
                    p.get("type").and_then(Value::as_str),
                    Some("text" | "image_url" | "input_audio" | "file" | "refusal")
                )
            }),
            Some(_) => false,
        };
        match role {
            "system" | "developer" | "user" => {
                if !content_ok(true) {
                    return Err(openai_bad(
                        format!("Missing required parameter: 'messages[{i}].content'."),
                        Some(&format!("messages[{i}].content")),
                        Some("missing_required_parameter"),
                    ));
                }
            }
            "assistant" => {
                let calls = m.get("tool_calls");
                if !content_ok(calls.is_none()) {
                    return Err(openai_bad(
                        format!(
                            "Invalid value for 'messages[{i}].content': expected a string, an array of parts, or null with 'tool_calls'."
                        ),
                        Some(&format!("messages[{i}].content")),
                        Some("invalid_value"),
                    ));
                }
                if let Some(calls) = calls {
                    let Some(calls) = calls.as_array().filter(|c| !c.is_empty()) else {
                        return Err(openai_bad(
                            format!(
                                "Invalid 'messages[{i}].tool_calls': empty array. Expected an array with minimum length 1, but got an empty array instead."
                            ),
                            Some(&format!("messages[{i}].tool_calls")),
                            Some("empty_array"),
                        ));
                    };
                    for (j, call) in calls.iter().enumerate() {
                        let function = call.get("function");
                        let ok = call.get("id").is_some_and(Value::is_string)
                            && call.get("type").and_then(Value::as_str) == Some("function")
                            && function
                                .and_then(|f| f.get("name"))
                                .is_some_and(Value::is_string)
                            && function
                                .and_then(|f| f.get("arguments"))
                                .is_some_and(Value::is_string);
                        if !ok {
                            return Err(openai_bad(
                                format!(
                                    "Missing required parameter: 'messages[{i}].tool_calls[{j}]': each tool call needs 'id', 'type': 'function' and 'function' with string 'name' and 'arguments'."
                                ),
                                Some(&format!("messages[{i}].tool_calls[{j}]")),
                                Some("missing_required_parameter"),
                            ));
                        }
                        open.push(call["id"].as_str().unwrap().to_owned());
                    }
                    opened_at = i;
                }
            }
            "tool" => {
                let id = m.get("tool_call_id").and_then(Value::as_str);
                match id.and_then(|id| open.iter().position(|o| o == id)) {
                    Some(at) => {
                        open.remove(at);
                    }
                    None => {
                        return Err(openai_bad(
                            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.".into(),
                            Some(&format!("messages.[{i}].role")),
                            None,
                        ));
                    }
                }
                if !content_ok(true) {
                    return Err(openai_bad(
                        format!("Missing required parameter: 'messages[{i}].content'."),
                        Some(&format!("messages[{i}].content")),
                        Some("missing_required_parameter"),
                    ));
                }
            }
            other => {
                return Err(openai_bad(
                    format!(
                        "Invalid value: '{other}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'."
                    ),
                    Some(&format!("messages[{i}].role")),
                    Some("invalid_value"),
                ));
            }
        }
    }
    if !open.is_empty() {
        return Err(openai_bad(
            format!(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                open.join(", ")
            ),
            Some(&format!("messages.[{opened_at}].role")),
            None,
        ));
    }
    Ok(())
}

fn anthropic_bad(message: String) -> Rejection {
    (400, anthropic_error("invalid_request_error", &message))
}

/// The request fields the Messages API takes; it refuses any other.
const ANTHROPIC_FIELDS: &[&str] = &[
    "model",
    "messages",
    "max_tokens",
    "system",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "tools",
    "tool_choice",
    "metadata",
    "thinking",
    "service_tier",
    "container",
    "mcp_servers",
];

fn check_anthropic(
    r: &Recorded,
    is_json: bool,
    required_key: Option<&str>,
) -> Result<(), Rejection> {
    if r.method != "POST" || r.path != "/v1/messages" {
        return Err((404, anthropic_error("not_found_error", "Not Found")));
    }
    if let Some(key) = required_key {
        match r.header("x-api-key") {
            None => {
                return Err((
                    401,
                    anthropic_error("authentication_error", "x-api-key header is required"),
                ));
            }
            Some(given) if given != key => {
                return Err((
                    401,
                    anthropic_error("authentication_error", "invalid x-api-key"),
                ));
            }
            Some(_) => {}
        }
    }
    if r.header("anthropic-version").is_none() {
        return Err(anthropic_bad(
            "anthropic-version: header is required".into(),
        ));
    }
    let Some(body) = r.body.as_object().filter(|_| is_json) else {
        return Err(anthropic_bad(
            "There was an issue with your request body: it is not valid JSON".into(),
        ));
    };
    for key in body.keys() {
        if !ANTHROPIC_FIELDS.contains(&key.as_str()) {
            return Err(anthropic_bad(format!(
                "{key}: Extra inputs are not permitted"
            )));
        }
    }
    for key in ["model", "max_tokens", "messages"] {
        if !body.contains_key(key) {
            return Err(anthropic_bad(format!("{key}: Field required")));
        }
    }
    if !body["model"].is_string() {
        return Err(anthropic_bad(
            "model: Input should be a valid string".into(),
        ));
    }
    if body["max_tokens"].as_u64().is_none_or(|n| n < 1) {
        return Err(anthropic_bad(
            "max_tokens: Input should be a valid integer greater than or equal to 1".into(),
        ));
    }
    if let Some(t) = body.get("temperature")
        && !t.as_f64().is_some_and(|t| (0.0..=1.0).contains(&t))
    {
        return Err(anthropic_bad(
            "temperature: Input should be less than or equal to 1".into(),
        ));
    }
    if let Some(stream) = body.get("stream")
        && !stream.is_boolean()
    {
        return Err(anthropic_bad(
            "stream: Input should be a valid boolean".into(),
        ));
    }
    match body.get("system") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(blocks))
            if blocks
                .iter()
                .all(|b| b["type"] == "text" && b["text"].is_string()) => {}
        Some(_) => {
            return Err(anthropic_bad(
                "system: Input should be a valid string or a list of text blocks".into(),
            ));
        }
    }
    if let Some(tools) = body.get("tools") {
        let Some(tools) = tools.as_array() else {
            return Err(anthropic_bad("tools: Input should be a valid list".into()));
        };
        for (i, tool) in tools.iter().enumerate() {
            if !tool.get("name").is_some_and(Value::is_string) {
                return Err(anthropic_bad(format!(
                    "tools.{i}.custom.name: Field required"
                )));
            }
            if !tool.get("input_schema").is_some_and(Value::is_object) {
                return Err(anthropic_bad(format!(
                    "tools.{i}.custom.input_schema: Field required"
                )));
            }
            if let Some(extra) = tool
                .as_object()
                .into_iter()
                .flat_map(|t| t.keys())
                .find(|k| {
                    ![
                        "name",
                        "description",
                        "input_schema",
                        "cache_control",
                        "type",
                    ]
                    .contains(&k.as_str())
                })
            {
                return Err(anthropic_bad(format!(
                    "tools.{i}.custom.{extra}: Extra inputs are not permitted"
                )));
            }
        }
    }
    let Some(messages) = body["messages"].as_array() else {
        return Err(anthropic_bad(
            "messages: Input should be a valid list".into(),
        ));
    };
    check_anthropic_messages(messages)
}

fn check_anthropic_messages(messages: &[Value]) -> Result<(), Rejection> {
    if messages.is_empty() {
        return Err(anthropic_bad(
            "messages: at least one message is required".into(),
        ));
    }
    // The tool_use ids of the previous assistant turn, which the next user
    // turn must answer.
    let mut open: Vec<String> = Vec::new();
    let mut previous_role = "";
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        match role {
            "user" | "assistant" => {}
            "system" => {
                return Err(anthropic_bad(
                    "messages: Unexpected role \"system\". The Messages API accepts a top-level `system` parameter, not \"system\" as an input message role.".into(),
                ));
            }
            other => {
                return Err(anthropic_bad(format!(
                    "messages.{i}.role: Input should be 'user' or 'assistant', got '{other}'"
                )));
            }
        }
        if i == 0 && role != "user" {
            return Err(anthropic_bad(
                "messages: first message must use the \"user\" role".into(),
            ));
        }
        if role == previous_role {
            return Err(anthropic_bad(format!(
                "messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"{role}\" roles in a row"
            )));
        }
        previous_role = role;
        let last = i + 1 == messages.len();
        let blocks: Vec<Value> = match m.get("content") {
            Some(Value::String(text)) => {
                if text.is_empty() && !(last && role == "assistant") {
                    return Err(anthropic_bad(format!(
                        "messages.{i}: all messages must have non-empty content except for the optional final assistant message"
                    )));
                }
                Vec::new()
            }
            Some(Value::Array(blocks)) => {
                if blocks.is_empty() && !(last && role == "assistant") {
                    return Err(anthropic_bad(format!(
                        "messages.{i}: all messages must have non-empty content except for the optional final assistant message"
                    )));
                }
                blocks.clone()
            }
            _ => {
                return Err(anthropic_bad(format!(
                    "messages.{i}.content: Field required"
                )));
            }
        };
        let allowed: &[&str] = if role == "user" {
            &["text", "image", "document", "tool_result"]
        } else {
            &["text", "thinking", "redacted_thinking", "tool_use"]
        };
        let mut answered: HashSet<String> = HashSet::new();
        let mut next_open = Vec::new();
        for (j, block) in blocks.iter().enumerate() {
            let kind = block
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !allowed.contains(&kind) {
                return Err(anthropic_bad(format!(
                    "messages.{i}.content.{j}.type: Input tag '{kind}' found using 'type' does not match any of the expected tags: {}",
                    allowed
                        .iter()
                        .map(|t| format!("'{t}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            match kind {
                "text"
                    if block
                        .get("text")
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty) =>
                {
                    return Err(anthropic_bad(
                        "messages: text content blocks must be non-empty".into(),
                    ));
                }
                "thinking" => {
                    let thinking = block.get("thinking").and_then(Value::as_str);
                    let signature = block.get("signature").and_then(Value::as_str);
                    match (thinking, signature) {
                        (Some(t), Some(s)) if s == signature_for(t) => {}
                        (Some(_), None) => {
                            return Err(anthropic_bad(format!(
                                "messages.{i}.content.{j}.thinking.signature: Field required"
                            )));
                        }
                        _ => {
                            return Err(anthropic_bad(format!(
                                "messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                            )));
                        }
                    }
                }
                "tool_use" => {
                    let id = block.get("id").and_then(Value::as_str);
                    let name = block.get("name").and_then(Value::as_str);
                    if id.is_none() || name.is_none() {
                        return Err(anthropic_bad(format!(
                            "messages.{i}.content.{j}.tool_use: `id` and `name` are required"
                        )));
                    }
                    if !block.get("input").is_some_and(Value::is_object) {
                        return Err(anthropic_bad(format!(
                            "messages.{i}.content.{j}.tool_use.input: Input should be a valid dictionary"
                        )));
                    }
                    next_open.push(id.unwrap().to_owned());
                }
                "tool_result" => {
                    let id = block
                        .get("tool_use_id")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    if !open.iter().any(|o| o == id) {
                        return Err(anthropic_bad(format!(
                            "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                        )));
                    }
                    answered.insert(id.to_owned());
                }
                _ => {}
            }
        }
        if role == "user" {
            let missing: Vec<&str> = open
                .iter()
                .filter(|id| !answered.contains(*id))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                return Err(anthropic_bad(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                    missing.join(", ")
                )));
            }
        }
        open = next_open;
    }
    // A final assistant turn with tool calls is a prefill the model continues; fine.
    Ok(())
}

// ---------------------------------------------------------------- self-checks

#[test]
fn the_server_refuses_what_the_real_apis_refuse() {
    let openai = |body: Value| {
        let r = Recorded {
            method: "POST".into(),
            path: "/v1/chat/completions".into(),
            headers: vec![],
            body,
        };
        check(Wire::OpenAi, &r, true, None)
            .err()
            .map(|(s, e)| (s, e["error"]["message"].as_str().unwrap().to_owned()))
    };
    assert_eq!(
        openai(json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})),
        None
    );
    let (status, message) = openai(json!({"model": "m", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "user", "content": "well?"}]}))
    .unwrap();
    assert_eq!(status, 400);
    assert!(
        message.contains("did not have response messages: c1"),
        "{message}"
    );
    assert!(openai(json!({"model": "m", "messages": [], "stream": false})).is_some());
    assert!(openai(json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream_options": {}})).is_some());

    let anthropic = |body: Value| {
        let r = Recorded {
            method: "POST".into(),
            path: "/v1/messages".into(),
            headers: vec![("anthropic-version".into(), "2023-06-01".into())],
            body,
        };
        check(Wire::Anthropic, &r, true, None)
            .err()
            .map(|(_, e)| e["error"]["message"].as_str().unwrap().to_owned())
    };
    let ok =
        json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(anthropic(ok), None);
    let cases = [
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
            "max_tokens: Field required",
        ),
        (
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}]}),
            "top-level `system`",
        ),
        (
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}),
            "roles must alternate",
        ),
        (
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "assistant", "content": "a"}]}),
            "first message",
        ),
        (
            json!({"model": "m", "max_tokens": 5, "stream_options": {}, "messages": [{"role": "user", "content": "a"}]}),
            "stream_options: Extra inputs",
        ),
        (
            json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "forged"}]},
            {"role": "user", "content": "b"}]}),
            "Invalid `signature`",
        ),
        (
            json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
            {"role": "user", "content": "b"}]}),
            "without `tool_result` blocks",
        ),
    ];
    for (body, expected) in cases {
        let message = anthropic(body).unwrap_or_default();
        assert!(message.contains(expected), "{expected}: {message}");
    }
}
