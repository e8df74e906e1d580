//! Long-term memory on LoCoMo: retrieval quality of the offline extractor
//! and the BM25 index, and recall latency at 10,000 and 1,000,000 facts.
//!
//! `cargo bench -p agent-host-core --bench memory`
//!
//! Reads the ten LoCoMo conversations from `../shared/memory-bench/locomo10`
//! (beside the workspace; `AGENT_HOST_MEMORY_BENCH` names another folder).
//! Each conversation is ingested session by session (each turn through the
//! extractor, in order, dated by its session), then every question is a
//! search. Only the conversation text (turns, their image captions, the
//! session dates) and the questions are read: no derived annotation.
//!
//! Quality, over questions of categories 1 to 4 (answerable): hit@1 and
//! hit@5 (a retrieved fact comes from an evidence turn), evidence recall@5
//! (the share of evidence turns among the top five facts' turns), and the
//! same at the level of sessions (a top-five fact comes from a session that
//! holds evidence). Category 5 (adversarial: the answer is not in the
//! conversation): the share of questions where memory would assert an
//! answer, that is the best fact is about the person the question names
//! and scores at least a threshold; the share of answerable questions so
//! asserted (and right at rank 1) is given beside it. The baseline, in the
//! same run: the same index over whole turns without extraction.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_host_core::memory::extract::{Utterance, extract};
use agent_host_core::memory::recall::recall;
use agent_host_core::memory::{Change, Fact, Filter, Memory, Scope};
use agent_host_core::tokens::HeuristicCounter;
use chrono::{DateTime, NaiveDateTime, Utc};
use serde_json::Value;

#[path = "memory/tantivy.rs"]
mod tantivy_side;
use tantivy_side::Tantivy;

struct Turn {
    speaker: String,
    id: String,
    session: usize,
    text: String,
    at: DateTime<Utc>,
}

struct Question {
    text: String,
    category: u64,
    evidence: Vec<String>,
}

struct Conversation {
    name: String,
    speakers: [String; 2],
    turns: Vec<Turn>,
    questions: Vec<Question>,
}

fn data_dir() -> PathBuf {
    std::env::var_os("AGENT_HOST_MEMORY_BENCH").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/memory-bench/locomo10"),
        PathBuf::from,
    )
}

fn load(path: &Path) -> Conversation {
    let bytes =
        std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let doc: Value =
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let mut turns = Vec::new();
    for session in 1.. {
        let Some(list) = doc
            .get(format!("session_{session}"))
            .and_then(Value::as_array)
        else {
            if doc.get(format!("session_{session}_date_time")).is_some() {
                continue;
            }
            break;
        };
        let date = text(&doc[format!("session_{session}_date_time")]);
        let start = NaiveDateTime::parse_from_str(&date, "%I:%M %P on %d %B, %Y")
            .unwrap_or_else(|e| panic!("{}: session {session} date {date:?}: {e}", path.display()))
            .and_utc();
        for (i, turn) in list.iter().enumerate() {
            let mut said = text(&turn["text"]);
            if let Some(caption) = turn.get("blip_caption").and_then(Value::as_str) {
                said.push_str("\n[shares a photo] ");
                said.push_str(caption);
            }
            turns.push(Turn {
                speaker: text(&turn["speaker"]),
                id: text(&turn["dia_id"]),
                session,
                text: said,
                at: start + chrono::Duration::seconds(30 * i as i64),
            });
        }
    }
    let questions = doc["qa"]
        .as_array()
        .expect("qa")
        .iter()
        .map(|q| Question {
            text: text(&q["question"]),
            category: q["category"].as_u64().unwrap_or(0),
            evidence: q["evidence"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|e| turn_ids(e.as_str().unwrap_or_default()))
                .collect(),
        })
        .collect();
    Conversation {
        name: path.file_stem().unwrap().to_string_lossy().into_owned(),
        speakers: [text(&doc["speaker_a"]), text(&doc["speaker_b"])],
        turns,
        questions,
    }
}

/// `D8:6; D9:17`, `D:11:26` -> `D8:6`, `D9:17`, `D11:26`.
fn turn_ids(evidence: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = evidence.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'D' {
            let mut j = i + 1;
            if bytes.get(j) == Some(&b':') {
                j += 1;
            }
            let a = j;
            while bytes.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
            if j > a && bytes.get(j) == Some(&b':') {
                let b = j + 1;
                let mut k = b;
                while bytes.get(k).is_some_and(u8::is_ascii_digit) {
                    k += 1;
                }
                if k > b {
                    out.push(format!("D{}:{}", &evidence[a..j], &evidence[b..k]));
                    i = k;
                    continue;
                }
            }
        }
        i += 1;
    }
    out
}

fn session_of(turn: &str) -> &str {
    turn.split(':').next().unwrap_or(turn)
}

/// The memory of one conversation, and how many facts went in.
fn ingest(conversation: &Conversation, rows: Rows) -> Memory {
    let scope = Scope::new(conversation.name.clone(), "locomo");
    let mut memory = Memory::new();
    let mut before: Option<&Turn> = None;
    for turn in &conversation.turns {
        let session = format!("session_{}", turn.session);
        let answered = before
            .replace(turn)
            .filter(|b| b.session == turn.session && b.speaker != turn.speaker)
            .map(|b| b.text.as_str());
        let facts = if rows != Rows::Extracted {
            let mut fact = Fact::new(
                turn.id.clone(),
                scope.clone(),
                turn.speaker.clone(),
                turn.text.clone(),
                turn.at,
            );
            fact.source.message = Some(turn.id.clone());
            if rows == Rows::WholeTurnsReplying {
                fact.reply_to = answered.map(str::to_owned);
            }
            vec![fact]
        } else {
            let mut said = Utterance::new(&turn.speaker, &turn.id, &turn.text, turn.at);
            if let Some(answered) = answered {
                said = said.replying_to(answered);
            }
            extract(&scope, Some(&session), &said, turn.at)
        };
        for fact in facts {
            let plan = memory.plan_add(fact).expect("a valid fact");
            for change in plan.changes {
                memory.apply(change).expect("a planned change applies");
            }
        }
    }
    memory
}

#[derive(Default)]
struct Quality {
    answerable: usize,
    hit1: usize,
    hit5: usize,
    recall5: f64,
    session_hit5: usize,
    facts: usize,
    adversarial: usize,
    /// (threshold, adversarial asserted, answerable asserted and right at 1)
    asserted: Vec<(f32, usize, usize)>,
}

const THRESHOLDS: [f32; 4] = [0.0, 8.0, 12.0, 16.0];

/// What a memory holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rows {
    /// Each turn, whole, as a fact (the baseline).
    WholeTurns,
    /// Each turn, whole, with the turn it answered as its `reply_to`.
    WholeTurnsReplying,
    /// What the offline extractor finds in each turn (which sets `reply_to`).
    Extracted,
}

/// Counts hit@1, hit@5, recall@5 and session hit@5 of the top five
/// `turns`; whether the first is right.
fn rank(q: &mut Quality, turns: &[&str], evidence: &HashSet<&str>) -> bool {
    let right1 = turns.first().is_some_and(|t| evidence.contains(t));
    q.hit1 += usize::from(right1);
    q.hit5 += usize::from(turns.iter().any(|t| evidence.contains(t)));
    let found: HashSet<&str> = turns
        .iter()
        .copied()
        .filter(|t| evidence.contains(t))
        .collect();
    q.recall5 += found.len() as f64 / evidence.len() as f64;
    let sessions: HashSet<&str> = evidence.iter().map(|t| session_of(t)).collect();
    q.session_hit5 += usize::from(turns.iter().any(|t| sessions.contains(session_of(t))));
    right1
}

/// The quality of core's search over `rows`, and with `with_tantivy` that
/// of tantivy over the same valid facts.
fn measure(
    conversations: &[Conversation],
    rows: Rows,
    with_tantivy: bool,
) -> (Quality, Option<Quality>) {
    let mut q = Quality {
        asserted: THRESHOLDS.iter().map(|&t| (t, 0, 0)).collect(),
        ..Quality::default()
    };
    let mut other: Option<Quality> = None;
    for conversation in conversations {
        let memory = ingest(conversation, rows);
        q.facts += memory.len();
        let filter = Filter::user(conversation.name.clone());
        let tantivy = with_tantivy.then(|| {
            let facts = memory.list(&filter, None, usize::MAX).expect("a listing");
            let valid: Vec<&Fact> = facts.into_iter().filter(|f| f.is_valid()).collect();
            other.get_or_insert_with(Quality::default).facts += valid.len();
            Tantivy::new(valid)
        });
        for question in &conversation.questions {
            let hits = memory.search_distinct(&question.text, &filter, 5, false);
            let turns: Vec<&str> = hits
                .iter()
                .filter_map(|h| h.fact.source.message.as_deref())
                .collect();
            let evidence: HashSet<&str> = question.evidence.iter().map(String::as_str).collect();
            let lower = question.text.to_lowercase();
            let asks_about = |entity: &str| {
                let first = entity
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .to_lowercase();
                !first.is_empty() && lower.contains(&first)
            };
            let named = conversation.speakers.iter().any(|s| asks_about(s));
            let asserts = |threshold: f32| {
                hits.first()
                    .is_some_and(|h| h.score >= threshold && (!named || asks_about(&h.fact.entity)))
            };
            if question.category == 5 {
                q.adversarial += 1;
                for a in &mut q.asserted {
                    a.1 += usize::from(asserts(a.0));
                }
                continue;
            }
            if evidence.is_empty() {
                continue;
            }
            q.answerable += 1;
            let right1 = rank(&mut q, &turns, &evidence);
            if let Some(tantivy) = &tantivy {
                let turns: Vec<&str> = tantivy
                    .search(&question.text, 5)
                    .into_iter()
                    .filter_map(|n| tantivy.source(n))
                    .collect();
                let t = other.get_or_insert_with(Quality::default);
                t.answerable += 1;
                rank(t, &turns, &evidence);
            }
            for a in &mut q.asserted {
                a.2 += usize::from(right1 && asserts(a.0));
            }
        }
    }
    (q, other)
}

fn percent(n: impl Into<f64>, of: usize) -> f64 {
    100.0 * n.into() / of.max(1) as f64
}

fn report(name: &str, q: &Quality) {
    println!(
        "{name:<28} facts {:>6}  hit@1 {:5.1}  hit@5 {:5.1}  recall@5 {:5.1}  session hit@5 {:5.1}  (answerable {})",
        q.facts,
        percent(q.hit1 as f64, q.answerable),
        percent(q.hit5 as f64, q.answerable),
        percent(q.recall5, q.answerable),
        percent(q.session_hit5 as f64, q.answerable),
        q.answerable,
    );
    for (threshold, adversarial, answerable) in &q.asserted {
        println!(
            "{:<28} score >= {threshold:>4}: adversarial asserted {:5.1}% of {}  answerable asserted and right at 1 {:5.1}%",
            "",
            percent(*adversarial as f64, q.adversarial),
            q.adversarial,
            percent(*answerable as f64, q.answerable),
        );
    }
}

/// A memory of `n` facts in one user's scope: the conversations' facts,
/// copied with a distinct token (and source message) per copy until there
/// are `n`.
fn synthetic(conversations: &[Conversation], n: usize) -> Memory {
    let scope = Scope::new("load", "locomo");
    let mut base: Vec<Fact> = Vec::new();
    for conversation in conversations {
        let mut before: Option<&Turn> = None;
        for turn in &conversation.turns {
            let mut said = Utterance::new(&turn.speaker, &turn.id, &turn.text, turn.at);
            if let Some(b) = before.replace(turn)
                && b.session == turn.session
                && b.speaker != turn.speaker
            {
                said = said.replying_to(&b.text);
            }
            base.extend(extract(&scope, Some(&conversation.name), &said, turn.at));
        }
    }
    let mut memory = Memory::new();
    for i in 0..n {
        let mut fact = base[i % base.len()].clone();
        let copy = i / base.len();
        fact.id = format!("{}-{copy}", fact.id);
        if copy > 0 {
            fact.text = format!("{} c{copy}", fact.text);
            // A copy is another message's fact.
            fact.source.message = fact.source.message.map(|m| format!("{m}-c{copy}"));
        }
        memory
            .apply(Change::Add {
                fact: Box::new(fact),
            })
            .expect("a fresh id");
    }
    memory
}

fn latency(conversations: &[Conversation], n: usize) {
    let started = Instant::now();
    let memory = synthetic(conversations, n);
    let built = started.elapsed();
    let counter = HeuristicCounter::default();
    let filter = Filter::user("load");
    let questions: Vec<&str> = conversations
        .iter()
        .flat_map(|c| c.questions.iter().map(|q| q.text.as_str()))
        .collect();
    let mut times: Vec<Duration> = Vec::with_capacity(questions.len());
    let mut exhaustive: Vec<Duration> = Vec::with_capacity(questions.len());
    let mut recalled = 0;
    // The exhaustive search takes a quarter of a second at a million facts:
    // there, it is timed (and compared with) on every tenth question.
    let stride = if n > 100_000 { 10 } else { 1 };
    for (i, question) in questions.iter().enumerate() {
        let at = Instant::now();
        let r = recall(&memory, &filter, question, 10, 1_000, &counter);
        times.push(at.elapsed());
        recalled += r.facts.len();
        if i % stride != 0 {
            continue;
        }
        let at = Instant::now();
        let reference = memory.search_exhaustive(question, &filter, 10, false);
        exhaustive.push(at.elapsed());
        let fast = memory.search(question, &filter, 10, false);
        assert_eq!(
            fast, reference,
            "the search equals the exhaustive one for {question:?}"
        );
    }
    let line = |what: &str, times: &mut Vec<Duration>| {
        times.sort();
        let pick = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
        let mean = times.iter().sum::<Duration>() / times.len() as u32;
        println!(
            "{what:<28} at {n:>9} facts: {} turns, mean {:>8.3} ms, p50 {:>8.3} ms, p95 {:>8.3} ms, p99 {:>8.3} ms",
            times.len(),
            mean.as_secs_f64() * 1e3,
            pick(0.5).as_secs_f64() * 1e3,
            pick(0.95).as_secs_f64() * 1e3,
            pick(0.99).as_secs_f64() * 1e3,
        );
    };
    line("recall (MaxScore search)", &mut times);
    line("exhaustive search (baseline)", &mut exhaustive);
    let started = Instant::now();
    let tantivy = Tantivy::new(memory.list(&filter, None, usize::MAX).expect("a listing"));
    let tantivy_built = started.elapsed();
    let mut tantivy_times: Vec<Duration> = Vec::with_capacity(questions.len());
    for question in &questions {
        let at = Instant::now();
        let found = tantivy.search(question, 10);
        tantivy_times.push(at.elapsed());
        std::hint::black_box(found);
    }
    line("tantivy search (top 10)", &mut tantivy_times);
    println!(
        "{:<28} tantivy indexed them in {:.1} s",
        "",
        tantivy_built.as_secs_f64()
    );
    println!(
        "{:<28} built in {:.1} s; {:.1} facts recalled a turn",
        "",
        built.as_secs_f64(),
        recalled as f64 / questions.len() as f64,
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it once as a test.
    let dir = data_dir();
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect(),
        Err(e) => {
            eprintln!(
                "LoCoMo not found at {} ({e}); set AGENT_HOST_MEMORY_BENCH",
                dir.display()
            );
            if std::env::var_os("CI").is_some() {
                std::process::exit(1);
            }
            return;
        }
    };
    files.sort();
    let conversations: Vec<Conversation> = files.iter().map(|p| load(p)).collect();
    let questions: usize = conversations.iter().map(|c| c.questions.len()).sum();
    println!(
        "LoCoMo: {} conversations, {} turns, {} questions",
        conversations.len(),
        conversations.iter().map(|c| c.turns.len()).sum::<usize>(),
        questions
    );
    report(
        "whole turns (baseline)",
        &measure(&conversations, Rows::WholeTurns, false).0,
    );
    report(
        "whole turns, reply context",
        &measure(&conversations, Rows::WholeTurnsReplying, false).0,
    );
    let (facts, tantivy) = measure(&conversations, Rows::Extracted, true);
    report("extracted facts", &facts);
    report("extracted facts, tantivy", &tantivy.expect("tantivy's row"));
    let sizes: Vec<usize> = match std::env::var("AGENT_HOST_MEMORY_BENCH_SIZES") {
        Ok(list) => list
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect(),
        Err(_) => vec![10_000, 1_000_000],
    };
    for n in sizes {
        latency(&conversations, n);
    }
}
