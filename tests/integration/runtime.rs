//! The processor runtime against real guests, well-behaved and hostile.
//!
//! Every hostile guest must be contained: the host keeps running, the input
//! history comes back unchanged, the error names the cause, and the call ends
//! within twice the deadline.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use agent_host_core::Message;
use agent_host_runtime::{
    Cause, FailurePolicy, Grants, InvalidPolicy, Outcome, ProcessorOptions, RunInfo, Runtime,
    RuntimeConfig,
};
use agent_host_test_artifacts as guests;

/// One runtime for the whole test binary, with its compile cache in a
/// temporary folder: tests share it across threads, as embedders will.
pub fn runtime() -> &'static Runtime {
    static RT: OnceLock<(Runtime, tempfile::TempDir)> = OnceLock::new();
    &RT.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let rt = Runtime::new(RuntimeConfig {
            cache_dir: Some(dir.path().to_owned()),
            ..RuntimeConfig::default()
        })
        .expect("the runtime starts");
        (rt, dir)
    })
    .0
}

pub fn sample() -> Vec<Message> {
    agent_host_engine::transcript::sample().transcript.messages
}

fn load(path: &str, options: ProcessorOptions) -> agent_host_runtime::Processor {
    runtime()
        .load_file(Path::new(path), options)
        .unwrap_or_else(|e| panic!("{path} loads: {e:#}"))
}

fn with_config(config: &str) -> ProcessorOptions {
    ProcessorOptions {
        config: Some(config.to_owned()),
        ..ProcessorOptions::default()
    }
}

/// Runs one guest over the sample and checks that it was contained: the
/// input is unchanged, the report says failed, and it took less than twice
/// the deadline. Returns the cause.
fn contained(path: &str, options: ProcessorOptions) -> Cause {
    let p = load(path, options);
    let deadline = p.options().limits.deadline;
    let input = sample();
    let start = Instant::now();
    let out = runtime().run(std::slice::from_ref(&p), &RunInfo::default(), input.clone());
    let took = start.elapsed();
    // The cause the caller checks is what proves containment; the clock is
    // a backstop against a guest left to run, with room for a loaded
    // machine (CI on two cores once took 532 ms under a 250 ms deadline).
    assert!(
        took < deadline * 2 + Duration::from_millis(1500),
        "{path} took {took:?}, deadline {deadline:?}"
    );
    assert_eq!(out.messages, input, "{path}: the input must stand");
    let report = &out.reports[0];
    assert_eq!(report.outcome, Outcome::Failed, "{path}: {report:?}");
    let error = report.error.as_deref().expect("a failed call has an error");
    assert!(
        error.contains(p.hash().get(..12).unwrap()),
        "the error names the hash: {error}"
    );
    assert!(
        error.contains(p.name()),
        "the error names the processor: {error}"
    );
    // Under `skip` the run carries on; the cause is in the report.
    assert!(out.failure.is_none());
    let failing = ProcessorOptions {
        on_failure: FailurePolicy::Fail,
        ..p.options().clone()
    };
    let p = load(path, failing);
    let out = runtime().run(&[p], &RunInfo::default(), input.clone());
    assert_eq!(out.messages, input);
    out.failure
        .expect("under `fail` the run stops with the error")
        .cause
}

#[test]
fn a_processor_that_keeps_everything_changes_nothing_and_logs() {
    let p = load(guests::KEEP_ALL, ProcessorOptions::default());
    assert_eq!(p.name(), "keep-all");
    assert_eq!(p.description().version, "1.0.0");
    assert!(
        !p.uses_wasi(),
        "a wasm32-unknown-unknown guest imports only our interface"
    );
    let input = sample();
    let out = runtime().run(&[p], &RunInfo::default(), input.clone());
    assert_eq!(out.messages, input);
    let r = &out.reports[0];
    assert_eq!(r.outcome, Outcome::Applied);
    assert_eq!(r.kept.len(), input.len());
    assert!(r.dropped.is_empty() && r.inserted.is_empty() && r.replaced.is_empty());
    assert_eq!(r.tokens_before, r.tokens_after);
    assert!(r.peak_memory_bytes > 0);
    assert!(
        r.logs
            .iter()
            .any(|l| l.level == "info" && l.text.starts_with("saw 12 messages")),
        "{:?}",
        r.logs
    );
}

#[test]
fn edits_are_applied_and_every_one_is_in_the_report() {
    // Drop the final user message, replace the first assistant text, insert a note.
    let p = load(
        guests::EDITS,
        with_config(r#"{"drop": [11], "replace": [[10, "Fixed."]], "insert": "note"}"#),
    );
    let input = sample();
    let out = runtime().run(&[p], &RunInfo::default(), input.clone());
    let r = &out.reports[0];
    assert_eq!(r.outcome, Outcome::Applied, "{:?}", r.error);
    assert_eq!(r.dropped, vec!["m11"]);
    assert_eq!(r.replaced.len(), 1);
    assert_eq!(r.replaced[0].id, "m10");
    assert_eq!(
        r.replaced[0].by, "m10",
        "an empty id inherits the replaced one"
    );
    assert_eq!(r.inserted.len(), 1);
    assert_eq!(r.kept.len(), 10);
    assert_eq!(out.messages.len(), 12);
    assert_eq!(out.messages[10].content, "Fixed.");
    assert_eq!(out.messages[11].content, "note");
    assert!(out.messages[11].synthetic);
    assert_eq!(out.messages[11].id, r.inserted[0]);
    // Kept messages are the input's, untouched.
    assert_eq!(out.messages[..10], input[..10]);
    assert!(r.tokens_after < r.tokens_before);
}

#[test]
fn every_field_of_a_message_survives_the_trip_into_a_guest_and_back() {
    use agent_host_core::{MediaRef, Part, Reasoning, Usage};
    let mut call = Message::assistant("Reading.").with_id("a1");
    call.push_tool_call("c1", "read", r#"{"path":"x"}"#);
    call.reasoning = Some(Reasoning {
        text: "think".into(),
        signature: Some("sig".into()),
        redacted: false,
    });
    call.parts.push(Part::Image {
        source: MediaRef::Url("https://x/y.png".into()),
        mime_type: Some("image/png".into()),
    });
    call.parts.push(Part::File {
        name: "notes.md".into(),
        path: "media/notes.md".into(),
        mime_type: None,
    });
    call.usage = Some(Usage {
        input_tokens: 10,
        output_tokens: 2,
        cache_read_tokens: Some(3),
        cache_write_tokens: None,
    });
    call.model = Some("gpt-4o".into());
    call.agent = Some("coder".into());
    call.channel = Some("cli".into());
    call.timestamp = chrono::DateTime::from_timestamp(1_700_000_000, 123);
    call.synthetic = true;
    call.metadata
        .insert("k".into(), serde_json::json!({"nested": [1, "two"]}));
    let mut result = Message::tool_result("c1", "read", "contents").with_id("t1");
    result.is_error = true;
    result.summary = true;
    let input = vec![Message::user("go").with_id("u1"), call, result];

    let p = load(guests::EDITS, with_config(r#"{"echo": true}"#));
    let out = runtime().run(&[p], &RunInfo::default(), input.clone());
    let r = &out.reports[0];
    assert_eq!(r.outcome, Outcome::Applied, "{:?}", r.error);
    assert_eq!(r.replaced.len(), 3);
    assert_eq!(out.messages, input);
}

#[test]
fn an_answer_that_orphans_a_tool_result_is_rejected_or_repaired_as_configured() {
    // Message 2 is the assistant message that makes call_01; 3 is its result.
    let rejected = contained(guests::EDITS, with_config(r#"{"drop": [2]}"#));
    assert!(
        matches!(&rejected, Cause::Invalid(d) if d.contains("m03")),
        "{rejected}"
    );

    let p = load(
        guests::EDITS,
        ProcessorOptions {
            on_invalid: InvalidPolicy::Repair,
            ..with_config(r#"{"drop": [2]}"#)
        },
    );
    let out = runtime().run(&[p], &RunInfo::default(), sample());
    let r = &out.reports[0];
    assert_eq!(r.outcome, Outcome::Repaired);
    assert!(r.repairs[0].contains("m03"), "{:?}", r.repairs);
    assert!(agent_host_core::validate::validate(&out.messages).is_empty());
    assert!(!out.messages.iter().any(|m| m.id == "m03"));
}

#[test]
fn bad_indices_duplicates_and_undeclared_reordering_are_refused() {
    let c = contained(guests::EDITS, with_config(r#"{"out_of_range": true}"#));
    assert!(
        matches!(&c, Cause::BadAnswer(d) if d.contains("but the history has 12 messages")),
        "{c}"
    );
    let c = contained(guests::EDITS, with_config(r#"{"duplicate": true}"#));
    assert!(
        matches!(&c, Cause::BadAnswer(d) if d.contains("already used")),
        "{c}"
    );
    let c = contained(guests::EDITS, with_config(r#"{"reverse": true}"#));
    assert!(
        matches!(&c, Cause::BadAnswer(d) if d.contains("reordering")),
        "{c}"
    );
    let c = contained(guests::EDITS, with_config(r#"{"bad_metadata": true}"#));
    assert!(
        matches!(&c, Cause::BadAnswer(d) if d.contains("metadata must be a JSON object")),
        "{c}"
    );
    let c = contained(
        guests::EDITS,
        with_config(r#"{"insert": "x", "new_id": "m05"}"#),
    );
    assert!(
        matches!(&c, Cause::BadAnswer(d) if d.contains("\"m05\"")),
        "{c}"
    );
}

#[test]
fn a_processor_that_declares_it_reorders_may_reorder() {
    let p = load(guests::REVERSE, ProcessorOptions::default());
    assert!(p.description().reorders);
    let input = vec![
        Message::user("one").with_id("a"),
        Message::assistant("two").with_id("b"),
    ];
    let out = runtime().run(&[p], &RunInfo::default(), input);
    assert_eq!(out.reports[0].outcome, Outcome::Applied);
    assert_eq!(out.messages[0].id, "b");
}

#[test]
fn configuration_errors_and_reported_failures_name_their_reason() {
    let c = contained(guests::EDITS, with_config(r#"{"turns": 3}"#));
    assert_eq!(c, Cause::BadConfig("unknown key `turns`".into()));
    let c = contained(
        guests::EDITS,
        with_config(r#"{"fail": "no summary model"}"#),
    );
    assert_eq!(c, Cause::Failed("no summary model".into()));
    let e = runtime()
        .load_file(Path::new(guests::EDITS), with_config("{drop"))
        .err()
        .expect("bad JSON is refused at load");
    assert!(format!("{e:#}").contains("not valid JSON"), "{e:#}");
}

#[test]
fn an_infinite_loop_is_stopped_at_the_deadline() {
    let c = contained(guests::SPIN, ProcessorOptions::default());
    assert_eq!(c, Cause::Deadline(Duration::from_millis(250)));
}

#[test]
fn unbounded_memory_growth_is_stopped_at_the_memory_limit() {
    let mut options = ProcessorOptions::default();
    options.limits.memory_bytes = 16 << 20;
    let c = contained(guests::GROW, options);
    assert!(
        matches!(c, Cause::Memory { limit, wanted } if limit == 16 << 20 && wanted > limit),
        "{c}"
    );
    assert!(c.to_string().contains("memory limit of 16.0 MiB"), "{c}");
}

#[test]
fn memory_under_the_limit_is_fine_and_over_it_is_not() {
    // keep-all on the sample needs well under 2 MiB; a 1-page limit is too small.
    let mut tiny = ProcessorOptions::default();
    tiny.limits.memory_bytes = 64 << 10;
    let e = runtime()
        .load_file(Path::new(guests::KEEP_ALL), tiny)
        .err()
        .expect("refused");
    assert!(format!("{e:#}").contains("memory limit"), "{e:#}");
    let mut enough = ProcessorOptions::default();
    enough.limits.memory_bytes = 4 << 20;
    let p = load(guests::KEEP_ALL, enough);
    let out = runtime().run(&[p], &RunInfo::default(), sample());
    assert_eq!(out.reports[0].outcome, Outcome::Applied);
    assert!(out.reports[0].peak_memory_bytes <= 4 << 20);
}

#[test]
fn deep_recursion_is_stopped_by_the_stack_limit() {
    let c = contained(guests::RECURSE, ProcessorOptions::default());
    assert!(matches!(c, Cause::Stack(_) | Cause::Trap(_)), "{c}");
    assert!(c.to_string().contains("stack"), "{c}");
}

#[test]
fn a_panic_is_a_trap_that_costs_only_that_call() {
    let c = contained(guests::PANIC, ProcessorOptions::default());
    assert!(matches!(c, Cause::Trap(_)), "{c}");
    // The same loaded processor serves the next call after its trap, in a
    // fresh store (a trapped store is never reused): it traps on the sample
    // again, and answers an input it spares. (Regression: this test used
    // to call another processor after the trap, which proved nothing.)
    let p = load(guests::PANIC, ProcessorOptions::default());
    let out = runtime().run(std::slice::from_ref(&p), &RunInfo::default(), sample());
    assert_eq!(out.reports[0].outcome, Outcome::Failed);
    let spared = vec![Message::user("spare me"), Message::assistant("fine")];
    for _ in 0..3 {
        let out = runtime().run(
            std::slice::from_ref(&p),
            &RunInfo::default(),
            spared.clone(),
        );
        assert_eq!(
            out.reports[0].outcome,
            Outcome::Applied,
            "{:?}",
            out.reports[0]
        );
        assert_eq!(out.messages, spared);
        let out = runtime().run(std::slice::from_ref(&p), &RunInfo::default(), sample());
        assert_eq!(out.reports[0].outcome, Outcome::Failed);
    }
}

#[test]
fn millions_of_items_or_a_100_mb_string_are_contained() {
    let c = contained(guests::FLOOD, ProcessorOptions::default());
    assert!(matches!(c, Cause::Memory { .. }), "{c}");
    let c = contained(guests::FLOOD, with_config(r#"{"string": true}"#));
    assert!(matches!(c, Cause::Memory { .. }), "{c}");
    // With room to build them, items over the limit are refused.
    let roomy = ProcessorOptions {
        limits: agent_host_runtime::Limits {
            max_items: 1_000,
            ..Default::default()
        },
        ..with_config(r#"{"items": 100000}"#)
    };
    let c = contained(guests::FLOOD, roomy);
    assert!(
        matches!(&c, Cause::BadAnswer(d) if d.contains("100000 items, over the limit of 1000")),
        "{c}"
    );
}

#[test]
fn an_import_the_host_cannot_grant_is_refused_by_name_before_instantiation() {
    let e = runtime()
        .load_file(Path::new(guests::EVIL_IMPORT), ProcessorOptions::default())
        .err()
        .expect("refused");
    let text = format!("{e:#}");
    assert!(text.contains("imports `test:evil/exfiltrate`"), "{text}");
    assert!(text.contains("cannot grant"), "{text}");
}

#[test]
fn a_wasi_guest_sees_no_environment_and_no_arguments() {
    // The test process has an environment (PATH at least) and arguments;
    // the guest must see none of them.
    assert!(std::env::vars().count() > 0);
    let c = contained(guests::WASI_ENV, ProcessorOptions::default());
    assert_eq!(
        c,
        Cause::Failed("environment is empty: 0 variables, 0 arguments".into())
    );
}

#[test]
fn a_wasi_guest_without_a_grant_reads_no_files() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secret.txt");
    std::fs::write(&file, "s3cret").unwrap();
    let config = format!(r#"{{"read": "{}"}}"#, file.display());
    let c = contained(guests::WASI_FS, with_config(&config));
    assert!(
        matches!(&c, Cause::Failed(d) if d.contains("cannot read")),
        "{c}"
    );
}

#[test]
fn a_granted_directory_is_readable_and_not_writable() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().canonicalize().unwrap().join("notes.txt");
    std::fs::write(&file, "granted text").unwrap();
    let options = ProcessorOptions {
        grants: Grants {
            read_dirs: vec![dir.path().to_owned()],
            ..Grants::default()
        },
        ..with_config(&format!(r#"{{"read": "{}"}}"#, file.display()))
    };
    let p = load(guests::WASI_FS, options);
    assert!(p.uses_wasi());
    let out = runtime().run(&[p], &RunInfo::default(), sample());
    let r = &out.reports[0];
    assert_eq!(r.outcome, Outcome::Applied, "{:?}", r.error);
    let inserted = out.messages.iter().find(|m| m.id == r.inserted[0]).unwrap();
    assert_eq!(inserted.content, "read: granted text; write: false");
    assert!(!dir.path().join("notes.txt.written").exists());
    // What it printed on stdout is in its log.
    assert!(
        r.logs
            .iter()
            .any(|l| l.level == "stdout" && l.text.contains("write refused")),
        "{:?}",
        r.logs
    );
}

#[test]
#[cfg(unix)]
fn a_fifo_or_a_device_in_a_granted_directory_is_refused_not_waited_on() {
    // Issue 15, item 7: a FIFO planted in a granted folder hung the host
    // forever (the open blocked the host thread, out of the deadline's
    // reach). The guest's open now fails at once.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let fifo = root.join("notes.txt");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let link = root.join("zero");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    for target in [&fifo, &link] {
        let options = ProcessorOptions {
            grants: Grants {
                read_dirs: vec![root.clone()],
                ..Grants::default()
            },
            ..with_config(&format!(r#"{{"read": "{}"}}"#, target.display()))
        };
        let p = load(guests::WASI_FS, options);
        // On a host that waits on the FIFO, the call never returns: the
        // test fails after 20 s rather than hanging.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(runtime().run(&[p], &RunInfo::default(), sample()));
        });
        let out = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("the call on {target:?} did not return"));
        let r = &out.reports[0];
        assert_eq!(r.outcome, Outcome::Failed, "{target:?}: {:?}", r.error);
        let error = r.error.as_deref().unwrap_or_default();
        assert!(error.contains("cannot read"), "{target:?}: {error}");
    }
}

fn clocks_granted() -> ProcessorOptions {
    ProcessorOptions {
        grants: Grants {
            clocks: true,
            ..Grants::default()
        },
        ..ProcessorOptions::default()
    }
}

#[test]
fn a_granted_directory_that_does_not_exist_is_refused_at_load_by_name() {
    let options = ProcessorOptions {
        grants: Grants {
            read_dirs: vec!["/no/such/dir".into()],
            ..Grants::default()
        },
        ..ProcessorOptions::default()
    };
    let e = runtime()
        .load_file(Path::new(guests::WASI_FS), options)
        .err()
        .expect("refused");
    assert!(
        format!("{e:#}").contains("granted directory /no/such/dir"),
        "{e:#}"
    );
}

#[test]
fn a_sleeping_guest_without_clocks_traps_and_with_clocks_stops_at_the_deadline() {
    let c = contained(guests::WASI_SLEEP, ProcessorOptions::default());
    assert!(
        matches!(&c, Cause::NotGranted(d) if d.contains("--allow-clocks")),
        "{c}"
    );
    let granted = clocks_granted();
    let start = Instant::now();
    let c = contained(guests::WASI_SLEEP, granted);
    assert_eq!(c, Cause::Deadline(Duration::from_millis(250)));
    // A sleep past the deadline fails at once rather than at the deadline.
    assert!(
        start.elapsed() < Duration::from_millis(250),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn the_clock_is_closed_unless_granted() {
    let c = contained(guests::WASI_CLOCK, ProcessorOptions::default());
    assert!(
        matches!(&c, Cause::NotGranted(d) if d.contains("wall-clock")),
        "{c}"
    );
    let granted = clocks_granted();
    let c = contained(guests::WASI_CLOCK, granted);
    assert!(
        matches!(&c, Cause::Failed(d) if d.starts_with("the time is 1")),
        "{c}"
    );
}

#[test]
fn a_chain_skips_a_failing_processor_and_carries_on() {
    let spin = load(guests::PANIC, ProcessorOptions::default());
    let drop_last = load(guests::EDITS, with_config(r#"{"drop": [11]}"#));
    let out = runtime().run(&[spin, drop_last], &RunInfo::default(), sample());
    assert_eq!(out.reports[0].outcome, Outcome::Failed);
    assert_eq!(out.reports[1].outcome, Outcome::Applied);
    assert_eq!(out.messages.len(), 11);
}

#[test]
fn concurrent_calls_on_one_runtime_are_independent() {
    let p = Arc::new(load(guests::EDITS, with_config(r#"{"drop": [11]}"#)));
    let spin = Arc::new(load(guests::SPIN, ProcessorOptions::default()));
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let p = Arc::clone(if i % 4 == 0 { &spin } else { &p });
            std::thread::spawn(move || {
                let out = runtime().run(std::slice::from_ref(&*p), &RunInfo::default(), sample());
                (i, out.messages.len())
            })
        })
        .collect();
    for h in handles {
        let (i, n) = h.join().expect("no panic");
        assert_eq!(n, if i % 4 == 0 { 12 } else { 11 });
    }
}

#[test]
fn a_second_load_comes_from_the_compile_cache() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::new(RuntimeConfig {
        cache_dir: Some(dir.path().to_owned()),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let first = rt
        .load_file(Path::new(guests::KEEP_ALL), ProcessorOptions::default())
        .unwrap();
    let second = rt
        .load_file(Path::new(guests::KEEP_ALL), ProcessorOptions::default())
        .unwrap();
    use agent_host_runtime::CacheOutcome;
    assert_eq!(first.compile(), CacheOutcome::Compiled);
    assert_eq!(second.compile(), CacheOutcome::Hit);
    // A corrupt entry is compiled again, not trusted. (It is replaced, not
    // edited in place: loaded entries are mapped into memory.)
    let entry = std::fs::read_dir(rt.cache().unwrap().dir())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::remove_file(&entry).unwrap();
    std::fs::write(&entry, b"garbage").unwrap();
    let third = rt
        .load_file(Path::new(guests::KEEP_ALL), ProcessorOptions::default())
        .unwrap();
    assert_eq!(third.compile(), CacheOutcome::Compiled);
}

#[test]
fn a_pooled_runtime_serves_calls_and_refuses_limits_beyond_its_slots() {
    let rt = Runtime::new(RuntimeConfig {
        cache_dir: None,
        pooling: true,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let p = rt
        .load_file(Path::new(guests::EDITS), with_config(r#"{"drop": [11]}"#))
        .unwrap();
    // Slots are reused: the second call must not see the first one's memory.
    for _ in 0..3 {
        let out = rt.run(std::slice::from_ref(&p), &RunInfo::default(), sample());
        assert_eq!(out.messages.len(), 11);
    }
    let mut big = ProcessorOptions::default();
    big.limits.memory_bytes = 1 << 30;
    let e = rt
        .load_file(Path::new(guests::KEEP_ALL), big)
        .err()
        .expect("refused");
    assert!(
        e.to_string()
            .contains("over the 256.0 MiB a pooled runtime allows"),
        "{e}"
    );
}

/// Regression (usage was summed with `+=`, which panics in a debug build
/// and wraps in a release one): a history whose usage figures add up past
/// `u64::MAX` is run, not a crash of the host.
#[test]
fn usage_that_overflows_when_summed_is_saturated() {
    let mut history = sample();
    for m in history
        .iter_mut()
        .filter(|m| m.role == agent_host_core::Role::Assistant)
    {
        m.usage = Some(agent_host_core::Usage {
            input_tokens: u64::MAX,
            output_tokens: u64::MAX,
            cache_read_tokens: None,
            cache_write_tokens: None,
        });
    }
    let p = load(guests::KEEP_ALL, ProcessorOptions::default());
    let out = runtime().run(&[p], &RunInfo::default(), history.clone());
    assert_eq!(
        out.reports[0].outcome,
        Outcome::Applied,
        "{:?}",
        out.reports[0]
    );
    assert_eq!(out.messages, history);
}
