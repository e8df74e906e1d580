//! `redact-secrets` end to end on the corpus' histories, sandboxed, against
//! its Python peer (`benches/peers/redact_secrets.py`) and the same crate
//! built natively, on the same files, in one run (issue 23).
//!
//! `cargo bench -p agent-host --bench redact` (`BENCH_ROUNDS`, default 10;
//! `PEER_PYTHON`, default `python3`; `BENCH_PROCESSOR`, another build of the
//! component to measure; `BENCH_WAY=N`, way N alone, without the peer, to
//! profile it; `bash benches/peers/run.sh redact` runs it too).
//!
//! The inputs: every corpus history (the tau-bench trajectories and the
//! Claude Code sessions) written as an OpenAI chat document, one file each,
//! with a fake secret of a kind in turn appended to every 25th tool result
//! (the corpus holds none of the default kinds), so that both sides have
//! something to find. Each way reads every file, parses it, redacts every
//! text of every message and writes the result to a file:
//!
//! - the peer: `json.loads`, one `re.sub` per kind, `json.dumps`;
//! - `agent-host run --input DIR --output-dir OUT --no-compact --processor
//!   redact-secrets.wasm`: the whole command, process start included (the
//!   compile cache warm), with `--jobs 1` (like for like with the peer) and
//!   with a job per core (what the command does by default);
//! - in process, through [`Runtime::run`] (what an embedder does): on demand
//!   (the CLI's runtime) and pooling, the compile cache warm, the processor
//!   loaded once before the timing;
//! - native: the same parse and write with the crate's `Redactor` called on
//!   each text (the baseline for the sandbox's cost);
//! - parse and write only: the floor under every Rust way.
//!
//! The files are on `/dev/shm` when there is one (so that neither side
//! measures the disk's file system), each timed run writing into a folder of
//! its own.
//!
//! Checks, before the timing: the sandboxed processor's output is byte for
//! byte the native one's, and the peer found as many secrets of each kind.
#![allow(missing_docs)]

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use agent_host_core::Message;
use agent_host_core::format::{self, Format};
use agent_host_runtime::{Processor, ProcessorOptions, RunInfo, Runtime, RuntimeConfig};
use redact_secrets::{Config, Redactor};

#[path = "../../../tests/integration/util.rs"]
#[allow(dead_code)]
mod util;

/// Fake secrets of the default kinds, built from pieces so that no secret
/// scanner takes this file for a leak; each as a line of a tool result.
fn fake_secrets() -> Vec<String> {
    let body = ["MIIEow", "IBAAKCAQEA7", "xYzAbC+/dEf=="].concat();
    vec![
        format!(
            "OPENAI_API_KEY={}",
            ["sk-", "proj-", &"Xy7kP2".repeat(8)].concat()
        ),
        format!(
            "key: {}",
            ["sk-", "ant-", "api03-", &"Ab9_c-D".repeat(13)].concat()
        ),
        format!(
            "aws_access_key_id = {}",
            ["AKIA", "IOSFODNN7", "EXAMPLE"].concat()
        ),
        format!(
            "aws_secret_access_key = {}",
            ["wJalrXUtnFEMI", "/K7MDENG/bPxRfiCY", "EXAMPLEKEY"].concat()
        ),
        format!(
            "token {}",
            ["ghp_", &"A1b2C3d4E5".repeat(3), "f6G7h8"].concat()
        ),
        format!(
            "https://hooks.slack.com/services/{}",
            ["T0A1B2C3D", "/B0A1B2C3D/", "XyZ123abcDEF456ghiJKL789"].concat()
        ),
        format!(
            "SLACK={}",
            ["xoxb", "-123456789012", "-AbCdEfGhIjKl"].concat()
        ),
        format!(
            "Authorization: Bearer {}",
            [
                "eyJhbGciOiJIUzI1NiJ9",
                ".eyJzdWIiOiIxMjM0In0",
                ".Sf1Kx-9aB_cD"
            ]
            .concat()
        ),
        "DATABASE_URL=postgres://app:hunter2@db.internal:5432/app".to_owned(),
        format!("-----BEGIN RSA PRIVATE KEY-----\n{body}\n{body}\n-----END RSA PRIVATE KEY-----"),
    ]
}

/// The texts `redact-secrets` scans in a message, mutably.
fn texts_mut(m: &mut Message) -> impl Iterator<Item = &mut String> {
    use agent_host_core::message::Part;
    let parts = m.parts.iter_mut().filter_map(|p| match p {
        Part::Text { text } => Some(text),
        _ => None,
    });
    std::iter::once(&mut m.content)
        .chain(parts)
        .chain(
            m.reasoning
                .iter_mut()
                .filter(|r| !r.redacted)
                .map(|r| &mut r.text),
        )
        .chain(m.tool_calls.iter_mut().map(|c| &mut c.arguments))
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn min(times: &[f64]) -> f64 {
    times.iter().copied().fold(f64::INFINITY, f64::min)
}

/// Reads, parses, transforms and writes every file of `inputs` into `out`.
fn end_to_end(
    inputs: &[PathBuf],
    out: &Path,
    mut transform: impl FnMut(Vec<Message>) -> Vec<Message>,
) {
    for input in inputs {
        let text = std::fs::read_to_string(input).expect("an input");
        let messages = format::parse(Format::OpenAi, &text)
            .expect("an OpenAI document")
            .messages;
        let messages = transform(messages);
        let written = format::write(Format::OpenAi, &messages).expect("written");
        std::fs::write(out.join(input.file_name().unwrap()), written).expect("a result");
    }
}

/// The sandboxed call, panicking on a failure; adds the call's own time
/// (instantiation and call, from its report) to `called`.
fn sandboxed(
    runtime: &Runtime,
    processor: &Processor,
    messages: Vec<Message>,
    called: &Cell<f64>,
) -> Vec<Message> {
    let outcome = runtime.run(
        std::slice::from_ref(processor),
        &RunInfo::default(),
        messages,
    );
    if let Some(error) = &outcome.reports[0].error {
        panic!("redact-secrets failed: {error}");
    }
    called.set(called.get() + outcome.reports[0].time_ms);
    outcome.messages
}

/// The peer's output: its lines, and its counts per kind.
fn peer(inputs: &Path, runs: usize) -> Option<(Vec<String>, BTreeMap<String, usize>)> {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benches/peers/redact_secrets.py");
    let python = std::env::var("PEER_PYTHON").unwrap_or_else(|_| "python3".into());
    let output = match std::process::Command::new(&python)
        .arg(&script)
        .arg(inputs)
        .env("PEER_RUNS", runs.to_string())
        .env(
            "PEER_TMP",
            inputs
                .parent()
                .expect("the inputs' folder is in a temporary one"),
        )
        .output()
    {
        Ok(output) if output.status.success() => output,
        Ok(output) => panic!(
            "the peer failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(e) => {
            println!("no peer: cannot start {python} ({e}); set PEER_PYTHON");
            return None;
        }
    };
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 from the peer");
    let mut counts = BTreeMap::new();
    let mut lines = Vec::new();
    for line in stdout.lines() {
        match line.strip_prefix("counts ") {
            Some(json) => counts = serde_json::from_str(json).expect("the peer's counts"),
            None => lines.push(line.to_owned()),
        }
    }
    Some((lines, counts))
}

fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(10);
    let histories = util::corpus_histories();
    if histories.is_empty() {
        println!("SKIPPED: no corpus (../shared/corpus or AGENT_HOST_CORPUS): nothing to measure");
        return;
    }
    // Inputs and outputs in memory when the machine has a tmpfs, so that
    // neither side measures the disk's file system.
    let shm = Path::new("/dev/shm");
    let dir = match shm.is_dir() {
        true => tempfile::tempdir_in(shm),
        false => tempfile::tempdir(),
    }
    .unwrap();
    let inputs_dir = dir.path().join("in");
    std::fs::create_dir(&inputs_dir).unwrap();
    let secrets = fake_secrets();
    let (mut inputs, mut bytes, mut messages, mut results) = (Vec::new(), 0, 0, 0);
    for (i, (_, mut history)) in histories.into_iter().enumerate() {
        for m in &mut history {
            if m.tool_call_id.is_some() {
                if results % 25 == 0 {
                    let secret = &secrets[results / 25 % secrets.len()];
                    m.content.push_str(&format!("\n{secret}\n"));
                }
                results += 1;
            }
        }
        let text = format::write(Format::OpenAi, &history).unwrap();
        let path = inputs_dir.join(format!("h{i:04}.json"));
        bytes += text.len();
        messages += history.len();
        std::fs::write(&path, text).unwrap();
        inputs.push(path);
    }
    let mib = bytes as f64 / 1_048_576.0;
    println!(
        "{} histories, {messages} messages, {bytes} bytes as OpenAI documents; {} fake secrets",
        inputs.len(),
        results.div_ceil(25)
    );

    // The native redactor's counts, and its output as the reference.
    let redactor = Redactor::new(&Config::default()).expect("the default configuration");
    let mut counts = vec![0; redactor.kind_count()];
    let native_out = dir.path().join("native");
    std::fs::create_dir(&native_out).unwrap();
    let native = |out: &Path, counts: &mut [usize]| {
        end_to_end(&inputs, out, |mut messages| {
            for m in &mut messages {
                for text in texts_mut(m) {
                    if let Some(new) = redactor.redact_counting(text, counts) {
                        *text = new;
                    }
                }
            }
            messages
        })
    };
    native(&native_out, &mut counts);
    let native_counts: BTreeMap<String, usize> = counts
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| (redactor.kind_name(k).to_owned(), *n))
        .collect();
    println!("native redact-secrets: {native_counts:?}");

    // `BENCH_PROCESSOR`: another build of redact-secrets to measure (to
    // compare a change's before and after in one session).
    let processor = match std::env::var_os("BENCH_PROCESSOR") {
        Some(path) => PathBuf::from(path),
        None => util::standard_processor("redact-secrets"),
    };
    println!("component: {}", processor.display());
    let cache = dir.path().join("cache");
    let mut options = ProcessorOptions {
        config: Some("{}".into()),
        ..ProcessorOptions::default()
    };
    options.limits.deadline = std::time::Duration::from_secs(10);
    let runtimes = [false, true].map(|pooling| {
        let runtime = Runtime::new(RuntimeConfig {
            cache_dir: Some(cache.clone()),
            pooling,
            ..RuntimeConfig::default()
        })
        .expect("a runtime");
        let loaded = runtime
            .load_file(&processor, options.clone())
            .expect("redact-secrets loads");
        (runtime, loaded)
    });
    // The sandbox writes what native writes.
    for (runtime, loaded) in &runtimes {
        let out = dir.path().join("check");
        std::fs::create_dir_all(&out).unwrap();
        end_to_end(&inputs, &out, |m| {
            sandboxed(runtime, loaded, m, &Cell::new(0.0))
        });
        for input in &inputs {
            let name = input.file_name().unwrap();
            let (a, b) = (
                std::fs::read(out.join(name)).unwrap(),
                std::fs::read(native_out.join(name)).unwrap(),
            );
            assert!(a == b, "{name:?}: the sandbox and native differ");
        }
    }

    let cli_args = |out: &Path, jobs: &str| -> Vec<String> {
        [
            "run",
            "--input",
            inputs_dir.to_str().unwrap(),
            "--output-dir",
            out.to_str().unwrap(),
            "--jobs",
            jobs,
            "--no-compact",
            "--processor",
            processor.to_str().unwrap(),
            "--quiet",
            "--cache-dir",
            cache.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec()
    };
    let cli = |out: &Path, jobs: &str| {
        let output = util::agent_host()
            .args(cli_args(out, jobs))
            .output()
            .expect("agent-host starts");
        assert!(
            output.status.success(),
            "agent-host run: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    // The CLI redacts what native redacts (its writer may differ from
    // `format::write` in form, not in the texts).
    let cli_out = dir.path().join("cli-check");
    cli(&cli_out, "1");
    let cli_texts: usize = inputs
        .iter()
        .map(|i| {
            let text = std::fs::read_to_string(cli_out.join(i.file_name().unwrap())).unwrap();
            text.matches("[REDACTED:").count()
        })
        .sum();
    assert_eq!(
        cli_texts,
        counts.iter().sum::<usize>(),
        "the CLI's placeholders against native's count"
    );

    let peer_before = if std::env::var_os("BENCH_WAY").is_some() {
        None
    } else {
        peer(&inputs_dir, rounds)
    };
    if let Some((_, peer_counts)) = &peer_before {
        println!("peer: {peer_counts:?}");
        if *peer_counts == native_counts {
            println!("the peer and redact-secrets found the same secrets per kind");
        } else {
            println!("the peer and redact-secrets DIFFER in their counts per kind");
        }
    }

    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let ways = [
        "agent-host run --output-dir --jobs 1 (whole command)",
        "in process, on-demand runtime",
        "in process, pooling runtime",
        "native redact-secrets",
        "parse and write only",
        "agent-host run --output-dir, a job per core (whole command)",
    ];
    // `BENCH_WAY=N` times way N alone (to profile it), without the peer.
    let only: Option<usize> = std::env::var("BENCH_WAY").ok().and_then(|w| w.parse().ok());
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); ways.len()];
    // The sandboxed calls' own time, per round, of ways 1 and 2.
    let mut calls: Vec<Vec<f64>> = vec![Vec::new(); 2];
    for round in 0..rounds {
        for (w, time) in times.iter_mut().enumerate() {
            if only.is_some_and(|o| o != w) {
                continue;
            }
            // A fresh folder each time: rewriting a file ext4 has just
            // written makes its close wait for the disk (`auto_da_alloc`).
            let out = dir.path().join(format!("out-{round}-{w}"));
            std::fs::create_dir(&out).unwrap();
            let started = Instant::now();
            match w {
                0 => cli(&out, "1"),
                5 => cli(&out, &cores.to_string()),
                1 | 2 => {
                    let (runtime, loaded) = &runtimes[w - 1];
                    let called = Cell::new(0.0);
                    end_to_end(&inputs, &out, |m| sandboxed(runtime, loaded, m, &called));
                    calls[w - 1].push(called.get());
                }
                3 => native(&out, &mut vec![0; counts.len()]),
                4 => end_to_end(&inputs, &out, |m| m),
                _ => unreachable!("way {w}"),
            }
            time.push(started.elapsed().as_secs_f64() * 1e3);
            std::fs::remove_dir_all(&out).unwrap();
        }
    }
    let report_calls = || {
        for (w, called) in calls.iter().enumerate().filter(|(_, c)| !c.is_empty()) {
            println!(
                "{}: the {} calls themselves (instantiate and call, from the reports): median {:.1} ms",
                ways[w + 1],
                inputs.len(),
                median(called.clone())
            );
        }
    };
    if let Some(w) = only {
        println!(
            "{}: median {:.1} ms, min {:.1} ms",
            ways[w],
            median(times[w].clone()),
            min(&times[w])
        );
        report_calls();
        return;
    }
    let peer_after = peer(&inputs_dir, rounds);

    println!();
    println!("| way | median | min | MiB/s (median) |");
    println!("|---|---:|---:|---:|");
    let mut peer_median = None;
    for (label, run) in [("before", &peer_before), ("after", &peer_after)] {
        for line in run.iter().flat_map(|(lines, _)| lines) {
            // "peer NAME: N histories, B bytes: median X ms, R MiB/s (min Y ms)"
            let Some((name, rest)) = line.strip_prefix("peer ").and_then(|l| l.split_once(": "))
            else {
                continue;
            };
            let number = |after: &str| -> Option<f64> {
                rest.split_once(after)?.1.split(' ').next()?.parse().ok()
            };
            let (Some(med), Some(low)) = (number("median "), number("(min ")) else {
                continue;
            };
            if name == "redact end to end" {
                peer_median.get_or_insert(Vec::new()).push(med);
            }
            println!(
                "| Python peer, {name} ({label} the others) | {med:.1} ms | {low:.1} ms | {:.0} |",
                mib / (med / 1e3)
            );
        }
    }
    let medians: Vec<f64> = times.iter().map(|t| median(t.clone())).collect();
    for (w, label) in ways.iter().enumerate() {
        println!(
            "| {label} | {:.1} ms | {:.1} ms | {:.0} |",
            medians[w],
            min(&times[w]),
            mib / (medians[w] / 1e3)
        );
    }
    report_calls();
    println!();
    if let Some(peer) = peer_median {
        let peer = median(peer);
        for (w, label) in ways.iter().enumerate().filter(|(w, _)| *w != 4) {
            println!(
                "{label}: {:.1} times faster than the peer",
                peer / medians[w]
            );
        }
    }
    for w in 0..3 {
        println!(
            "{}: {:.2} times native end to end",
            ways[w],
            medians[w] / medians[3]
        );
    }
}
