//! One standard processor called in the sandbox over and over on one
//! history, for a profiler: no criterion, no setup inside the measured loop
//! but the history's clone (timed on its own), so that `perf record` on this
//! binary sees the call and little else.
//!
//! `cargo bench -p agent-host --bench call -- [PROCESSOR] [MESSAGES] [SECONDS] [--v0-1] [--on-demand]`
//!
//! PROCESSOR is a standard processor (`keep-last-turns` by default),
//! MESSAGES one of the `standard` bench's histories (100, 1000 or 10000:
//! the one cut nearest), SECONDS how long to loop (5). `--v0-1` calls its
//! 0.1.0 build, `--on-demand` uses the default runtime instead of the
//! pooling one. Prints the mean and median of the whole run (what
//! `Runtime::run` costs the caller), of its call (store, instance and the
//! guest's work: [`ProcessorReport::time_ms`]), and of the clone.
//!
//! [`ProcessorReport::time_ms`]: agent_host_runtime::ProcessorReport
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use agent_host_runtime::{ProcessorOptions, RunInfo, Runtime, RuntimeConfig};

mod histories;

use histories::{config, histories, util};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes `--bench`; flags are read by name, the rest in order.
    let flag = |name: &str| args.iter().any(|a| a == name);
    let mut positional = args.iter().filter(|a| !a.starts_with("--"));
    let name = positional
        .next()
        .map_or("keep-last-turns", String::as_str)
        .to_owned();
    let size: usize = positional.next().map_or(100, |s| {
        s.parse()
            .unwrap_or_else(|_| panic!("MESSAGES is a count, not {s:?}"))
    });
    let seconds: f64 = positional.next().map_or(5.0, |s| {
        s.parse()
            .unwrap_or_else(|_| panic!("SECONDS is a number, not {s:?}"))
    });
    let v0_1 = flag("--v0-1");

    let cache = tempfile::tempdir().expect("a temporary folder");
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: Some(cache.path().to_owned()),
        pooling: !flag("--on-demand"),
        ..RuntimeConfig::default()
    })
    .expect("a runtime");
    let path = if v0_1 {
        util::standard_processor_v0_1(&name)
    } else {
        util::standard_processor(&name)
    };
    let p = runtime
        .load_file(
            &path,
            ProcessorOptions {
                config: Some(config(&name).into()),
                ..ProcessorOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
    let (label, history) = histories()
        .into_iter()
        .min_by_key(|(_, h)| h.len().abs_diff(size))
        .expect("three histories");
    let info = RunInfo::default();
    let first = runtime.run(std::slice::from_ref(&p), &info, history.clone());
    assert!(
        first.failure.is_none() && first.reports[0].error.is_none(),
        "{name} fails: {:?}",
        first.reports[0].error
    );

    let mut runs = Vec::new();
    let mut calls = Vec::new();
    let mut clones = Vec::new();
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < until {
        let t = Instant::now();
        let input = history.clone();
        clones.push(t.elapsed());
        let t = Instant::now();
        let out = runtime.run(std::slice::from_ref(&p), &info, input);
        runs.push(t.elapsed());
        calls.push(Duration::from_secs_f64(out.reports[0].time_ms / 1e3));
        drop(out);
    }
    println!(
        "{name} ({}) on {label}, {} runtime: {} runs in {seconds} s",
        p.contract(),
        if flag("--on-demand") {
            "on-demand"
        } else {
            "pooling"
        },
        runs.len()
    );
    for (what, times) in [
        ("run", &mut runs),
        ("call", &mut calls),
        ("clone", &mut clones),
    ] {
        let mean = times.iter().sum::<Duration>() / u32::try_from(times.len()).unwrap_or(1);
        times.sort();
        println!(
            "  {what:5}: mean {:8.1} µs, median {:8.1} µs",
            mean.as_secs_f64() * 1e6,
            times[times.len() / 2].as_secs_f64() * 1e6
        );
    }
}
