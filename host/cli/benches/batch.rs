//! `agent-host run` on many histories: one batch process (`--input DIR
//! --output-dir OUT`: the runtime, the compile cache and the loaded
//! processor shared), with a job per core (its default) and with `--jobs 1`,
//! against one process per history (what a shell loop over the files does),
//! on the corpus' histories, the same processor, in the same run. A bench
//! binary: the figures are whole-command times.
//!
//! `cargo bench -p agent-host --bench batch` (`BENCH_ROUNDS`, default 3;
//! the median is reported).
#![allow(missing_docs)]

use std::path::Path;
use std::time::Instant;

#[path = "../../../tests/integration/util.rs"]
#[allow(dead_code)]
mod util;

fn run(args: &[&str], cache: &Path) {
    let output = util::agent_host()
        .args(args)
        .args(["--quiet", "--cache-dir"])
        .arg(cache)
        .output()
        .expect("agent-host starts");
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(3);
    let histories = util::corpus_histories();
    if histories.is_empty() {
        println!("no corpus (../shared/corpus): nothing to measure");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in");
    std::fs::create_dir(&inputs).unwrap();
    let mut files = Vec::new();
    let (mut bytes, mut messages) = (0, 0);
    for (i, (_, history)) in histories.iter().enumerate() {
        let text = agent_host_core::format::write(agent_host_core::format::Format::OpenAi, history)
            .unwrap();
        let path = inputs.join(format!("h{i:04}.json"));
        bytes += text.len();
        messages += history.len();
        std::fs::write(&path, text).unwrap();
        files.push(path);
    }
    let processor = util::standard_processor("keep-last-turns");
    let processor = processor.to_str().unwrap();
    let cache = dir.path().join("cache");
    let chain = [
        "--context-limit",
        "8000",
        "--processor",
        processor,
        "--processor-config",
        r#"{"turns": 4}"#,
    ];
    // The compile cache is warm for both.
    let warm = dir.path().join("warm.json");
    let mut args = vec!["run", "--input", files[0].to_str().unwrap(), "--output"];
    args.push(warm.to_str().unwrap());
    args.extend(chain);
    run(&args, &cache);

    let (mut batch, mut serial, mut each) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        for (jobs, times) in [(None, &mut batch), (Some("1"), &mut serial)] {
            let out = dir
                .path()
                .join(format!("batch-{round}-{}", jobs.unwrap_or("all")));
            let mut args = vec!["run", "--input", inputs.to_str().unwrap(), "--output-dir"];
            args.push(out.to_str().unwrap());
            if let Some(jobs) = jobs {
                args.extend(["--jobs", jobs]);
            }
            args.extend(chain);
            let started = Instant::now();
            run(&args, &cache);
            times.push(started.elapsed().as_secs_f64() * 1e3);
        }

        let out = dir.path().join(format!("each-{round}"));
        std::fs::create_dir(&out).unwrap();
        let started = Instant::now();
        for file in &files {
            let target = out.join(file.file_name().unwrap());
            let mut args = vec!["run", "--input", file.to_str().unwrap(), "--output"];
            args.push(target.to_str().unwrap());
            args.extend(chain);
            run(&args, &cache);
        }
        each.push(started.elapsed().as_secs_f64() * 1e3);
        println!(
            "round {}: batch {:.0} ms, batch --jobs 1 {:.0} ms, one process per history {:.0} ms",
            round + 1,
            batch[round],
            serial[round],
            each[round]
        );
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let (batch, serial, each) = (median(batch), median(serial), median(each));
    println!();
    println!(
        "{} histories ({messages} messages, {:.1} MB), keep-last-turns after the pipeline at 8,000 tokens:",
        files.len(),
        bytes as f64 / 1e6
    );
    println!("| way | total | per history |");
    println!("|---|---:|---:|");
    println!(
        "| one process per history (baseline) | {each:.0} ms | {:.1} ms |",
        each / files.len() as f64
    );
    println!(
        "| one batch process, --jobs 1 | {serial:.0} ms | {:.1} ms |",
        serial / files.len() as f64
    );
    println!(
        "| one batch process, a job per core ({cores}) | {batch:.0} ms | {:.1} ms |",
        batch / files.len() as f64
    );
    println!(
        "batch: {:.1} times faster ({:.1} with --jobs 1)",
        each / batch,
        each / serial
    );
}
