//! Host services (contract 0.2.0, issue 20): the `services` test guest
//! calls `summarize`, `count-tokens` and `read-memory` under grants and
//! budgets; a refusal is an answer it reads, never a trap; every call is
//! in the report, and a report's calls answer a replay.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_host_core::Message;
use agent_host_runtime::{
    Grants, HostServices, Limits, MemoryFact, Outcome, ProcessorOptions, ProcessorReport,
    RecordedServices, RunInfo, Runtime, RuntimeConfig, ServiceAnswer, ServiceBudget, ServiceError,
    ServiceRequest, ServiceResult,
};

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig {
        cache_dir: None,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

/// A host's services that answer everything, after `delay`, and keep the
/// requests they were asked.
#[derive(Default)]
struct Fake {
    asked: Mutex<Vec<ServiceRequest>>,
    delay: Duration,
}

impl HostServices for Fake {
    fn call(&self, processor: &str, r: &ServiceRequest) -> Result<ServiceAnswer, ServiceError> {
        assert_eq!(processor, "services");
        self.asked.lock().unwrap().push(r.clone());
        std::thread::sleep(self.delay);
        Ok(match r {
            ServiceRequest::Summarize { text, .. } => ServiceAnswer::Summary {
                text: format!("SUMMARY of {} bytes", text.len()),
                input_tokens: 40,
                output_tokens: 7,
                model: Some("fake-model".into()),
            },
            ServiceRequest::CountTokens { text } => ServiceAnswer::Tokens {
                count: u32::try_from(text.split_whitespace().count()).unwrap(),
            },
            ServiceRequest::ReadMemory { .. } => ServiceAnswer::Memory {
                facts: vec![MemoryFact {
                    id: "f1".into(),
                    entity: "user".into(),
                    text: "likes tea".into(),
                    attribute: None,
                    value: None,
                    recorded: chrono::Utc::now(),
                }],
            },
        })
    }
}

fn history() -> Vec<Message> {
    vec![
        Message::user("one two three").with_id("u1"),
        Message::assistant("four five").with_id("a1"),
    ]
}

fn options(config: &str, grants: Grants, limits: Limits) -> ProcessorOptions {
    ProcessorOptions {
        config: Some(config.into()),
        grants,
        limits,
        ..ProcessorOptions::default()
    }
}

fn all() -> Grants {
    Grants {
        summarize: true,
        count_tokens: true,
        memory: true,
        ..Grants::default()
    }
}

/// Runs the services guest once with `services`; its report.
fn run_guest(opts: ProcessorOptions, services: Arc<dyn HostServices>) -> ProcessorReport {
    let rt = runtime();
    let p = rt
        .load_file(agent_host_test_artifacts::SERVICES.as_ref(), opts)
        .unwrap();
    let out = rt.run_with_services(&[p], &RunInfo::default(), history(), services);
    assert!(out.failure.is_none(), "{:?}", out.failure);
    out.reports.into_iter().next().unwrap()
}

fn logs(r: &ProcessorReport) -> Vec<String> {
    r.logs.iter().map(|l| l.text.clone()).collect()
}

const ALL_CALLS: &str = r#"{"calls": ["summarize", "count", "memory"]}"#;

#[test]
fn granted_services_answer_and_every_call_is_in_the_report() {
    let fake = Arc::new(Fake::default());
    let r = run_guest(options(ALL_CALLS, all(), Limits::default()), fake.clone());
    assert_eq!(r.outcome, Outcome::Applied, "{:?}", r.error);
    assert_eq!(
        logs(&r),
        [
            "summarize: ok SUMMARY of 23 bytes in=40 out=7",
            "count: ok 5",
            "memory: ok user=likes tea",
        ]
    );
    let asked = fake.asked.lock().unwrap();
    assert_eq!(asked.len(), 3);
    // The caps the guest left to the host are the budget's.
    match &asked[0] {
        ServiceRequest::Summarize {
            prompt,
            max_tokens,
            timeout_ms,
            ..
        } => {
            assert_eq!(prompt, "Summarize this.");
            assert_eq!(*max_tokens, agent_host_runtime::DEFAULT_ANSWER_TOKENS);
            assert!(*timeout_ms > 0 && *timeout_ms <= 120_000, "{timeout_ms}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(r.services.len(), 3);
    assert!(r.services.iter().all(|c| c.served));
    assert_eq!(r.service_usage.calls, 3);
    assert_eq!(r.service_usage.model_tokens, 47);
    assert_eq!(r.service_usage.denied, 0);
}

#[test]
fn ungranted_services_are_denied_as_answers_not_traps() {
    let fake = Arc::new(Fake::default());
    let r = run_guest(
        options(
            ALL_CALLS,
            Grants {
                count_tokens: true,
                ..Grants::default()
            },
            Limits::default(),
        ),
        fake.clone(),
    );
    // The processor read the refusals and answered: its edits stand.
    assert_eq!(r.outcome, Outcome::Applied, "{:?}", r.error);
    let logs = logs(&r);
    assert!(
        logs[0].starts_with("summarize: denied: `summarize` is not granted")
            && logs[0].contains("--allow-summarize")
            && logs[0].contains("allow_summarize = true"),
        "{logs:?}"
    );
    assert_eq!(logs[1], "count: ok 5");
    assert!(
        logs[2].starts_with("memory: denied:") && logs[2].contains("--allow-memory"),
        "{logs:?}"
    );
    // The host was asked only what was granted.
    assert_eq!(fake.asked.lock().unwrap().len(), 1);
    assert_eq!(r.service_usage.denied, 2);
    assert_eq!(
        r.services.iter().map(|c| c.served).collect::<Vec<_>>(),
        [false, true, false]
    );
}

#[test]
fn calls_past_the_budget_are_refused_and_the_host_is_not_asked() {
    let fake = Arc::new(Fake::default());
    let limits = Limits {
        services: ServiceBudget {
            calls: 2,
            ..ServiceBudget::default()
        },
        ..Limits::default()
    };
    let r = run_guest(
        options(r#"{"calls": ["count"], "repeat": 3}"#, all(), limits),
        fake.clone(),
    );
    let logs = logs(&r);
    assert_eq!(logs[..2], ["count: ok 5", "count: ok 5"]);
    assert!(logs[2].starts_with("count: over-budget:"), "{logs:?}");
    assert!(logs[2].contains("2 service calls"), "{logs:?}");
    assert_eq!(fake.asked.lock().unwrap().len(), 2);
    assert_eq!(r.service_usage.over_budget, 1);
}

#[test]
fn a_summary_over_the_model_token_budget_is_refused_before_the_model() {
    let fake = Arc::new(Fake::default());
    let limits = Limits {
        services: ServiceBudget {
            model_tokens: 100,
            answer_tokens: 60,
            ..ServiceBudget::default()
        },
        ..Limits::default()
    };
    // The first call fits (about 10 + 16 + 60 tokens) and is charged the
    // 47 reported; the second no longer fits in the 53 left.
    let r = run_guest(
        options(r#"{"calls": ["summarize"], "repeat": 2}"#, all(), limits),
        fake.clone(),
    );
    let logs = logs(&r);
    assert!(logs[0].starts_with("summarize: ok"), "{logs:?}");
    assert!(
        logs[1].starts_with("summarize: over-budget:") && logs[1].contains("53 of the"),
        "{logs:?}"
    );
    assert_eq!(fake.asked.lock().unwrap().len(), 1);
    // A processor asking for a smaller answer gets it.
    let fake = Arc::new(Fake::default());
    run_guest(
        options(
            r#"{"calls": ["summarize"], "max_tokens": 20}"#,
            all(),
            Limits::default(),
        ),
        fake.clone(),
    );
    match &fake.asked.lock().unwrap()[0] {
        ServiceRequest::Summarize { max_tokens, .. } => assert_eq!(*max_tokens, 20),
        other => panic!("{other:?}"),
    }
}

#[test]
fn time_in_services_is_not_the_guests_deadline_but_the_time_budget_caps_it() {
    // Each call takes 300 ms, past the guest's 250 ms deadline: the guest
    // still finishes, since service time is not its own.
    let fake = Arc::new(Fake {
        delay: Duration::from_millis(300),
        ..Fake::default()
    });
    let limits = Limits {
        services: ServiceBudget {
            time: Duration::from_millis(500),
            ..ServiceBudget::default()
        },
        ..Limits::default()
    };
    let r = run_guest(
        options(r#"{"calls": ["count"], "repeat": 3}"#, all(), limits),
        fake.clone(),
    );
    assert_eq!(r.outcome, Outcome::Applied, "{:?}", r.error);
    let logs = logs(&r);
    // 300 ms, then 600 ms spent: the third call finds the 500 ms gone.
    assert_eq!(logs[..2], ["count: ok 5", "count: ok 5"], "{logs:?}");
    assert!(
        logs[2].starts_with("count: over-budget:") && logs[2].contains("500 ms"),
        "{logs:?}"
    );
    assert!(r.time_ms >= 600.0, "{}", r.time_ms);
    assert!(r.service_usage.time_us >= 600_000);
}

#[test]
fn without_services_a_granted_call_fails_as_an_answer() {
    let rt = runtime();
    let p = rt
        .load_file(
            agent_host_test_artifacts::SERVICES.as_ref(),
            options(ALL_CALLS, all(), Limits::default()),
        )
        .unwrap();
    let out = rt.run(&[p], &RunInfo::default(), history());
    let r = &out.reports[0];
    assert_eq!(r.outcome, Outcome::Applied, "{:?}", r.error);
    assert!(
        logs(r)[0].starts_with("summarize: failed: this host offers no `summarize` service"),
        "{:?}",
        logs(r)
    );
    assert_eq!(r.service_usage.failed, 3);
}

#[test]
fn the_guest_imports_the_services_interface_and_others_do_not() {
    let rt = runtime();
    let p = rt
        .load_file(
            agent_host_test_artifacts::SERVICES.as_ref(),
            ProcessorOptions::default(),
        )
        .unwrap();
    assert_eq!(p.contract(), "0.2.0");
    let names: Vec<&str> = p.imports().iter().map(|i| i.name.as_str()).collect();
    assert!(
        names.contains(&"agent-host:history/services@0.2.0"),
        "{names:?}"
    );
    // A 0.1.0 guest built before the services existed loads as it did.
    let old = rt
        .load_file(
            agent_host_test_artifacts::KEEP_ALL.as_ref(),
            ProcessorOptions::default(),
        )
        .unwrap();
    assert!(old.imports().iter().all(|i| !i.name.contains("services")));
}

#[test]
fn a_reports_service_calls_answer_a_replay_of_the_run() {
    let fake = Arc::new(Fake::default());
    let opts = || {
        options(
            ALL_CALLS,
            Grants {
                summarize: true,
                count_tokens: true,
                ..Grants::default()
            },
            Limits::default(),
        )
    };
    let first = run_guest(opts(), fake);
    // Through JSON, as a report file would keep it.
    let json = serde_json::to_string(&first).unwrap();
    let kept: ProcessorReport = serde_json::from_str(&json).unwrap();
    let replay = Arc::new(RecordedServices::new(kept.services.clone()));
    let again = run_guest(opts(), replay.clone());
    assert_eq!(logs(&again), logs(&first));
    assert_eq!(replay.remaining(), 0);
    assert!(matches!(
        &again.services[2].result,
        ServiceResult::Error(ServiceError::Denied(_))
    ));
}
