//! Loading a processor from the compile cache (reading the entry, checking
//! its tag, deserializing, linking, `describe`) against compiling it, for a
//! small guest and a WASI one (whose artifact is larger).
//!
//! `cargo bench -p agent-host-runtime --bench cache`

// `criterion_group!` makes an undocumented public function.
#![allow(missing_docs)]

use std::path::Path;

use agent_host_runtime::{ProcessorOptions, Runtime, RuntimeConfig};
use agent_host_test_artifacts as guests;
use criterion::{Criterion, criterion_group, criterion_main};

fn runtime(cache: Option<&Path>) -> Runtime {
    Runtime::new(RuntimeConfig {
        cache_dir: cache.map(Path::to_owned),
        ..RuntimeConfig::default()
    })
    .expect("the runtime starts")
}

fn bench_load(c: &mut Criterion) {
    let cache = tempfile::tempdir().unwrap();
    let cached = runtime(Some(cache.path()));
    let uncached = runtime(None);
    let mut group = c.benchmark_group("cache_load");
    group.sample_size(20);
    for (name, guest) in [("edits", guests::EDITS), ("wasi_env", guests::WASI_ENV)] {
        let path = Path::new(guest);
        let p = cached.load_file(path, ProcessorOptions::default()).unwrap();
        let entry = cached
            .cache()
            .unwrap()
            .dir()
            .join(format!("{}.cwasm", p.hash()));
        eprintln!(
            "{name}: component {} bytes, cache entry {} bytes",
            std::fs::metadata(path).unwrap().len(),
            std::fs::metadata(entry).unwrap().len()
        );
        group.bench_function(format!("{name}/from_cache"), |b| {
            b.iter(|| cached.load_file(path, ProcessorOptions::default()).unwrap())
        });
        group.bench_function(format!("{name}/compile"), |b| {
            b.iter(|| {
                uncached
                    .load_file(path, ProcessorOptions::default())
                    .unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_load);
criterion_main!(benches);
