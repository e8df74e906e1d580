//! The Python package (`host/python`): its wheel built by `build.sh`,
//! installed into a fresh virtual environment, and its pytest suite run
//! there by `test.sh`, against the standard processors, the hostile test
//! guests and the corpus. So the README's single test command covers the
//! package. `AGENT_HOST_SKIP_LANGS=pypackage` leaves it out, with a
//! `SKIPPED:` line (never under CI).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::langs;
use crate::util::{corpus, standard_processor, stderr, stdout};

fn script(name: &str) -> PathBuf {
    langs::root().join("host/python").join(name)
}

#[test]
fn the_python_package_passes_its_tests_from_a_fresh_environment() {
    if std::env::var_os("CI").is_none()
        && langs::skipped(
            "pypackage",
            "the_python_package_passes_its_tests_from_a_fresh_environment",
        )
    {
        return;
    }
    let processors: &Path = &standard_processor("filter");
    let processors = processors.parent().expect("the processors' folder");
    let wheels = tempfile::tempdir().expect("a folder for the wheel");
    let built = Command::new("bash")
        .arg(script("build.sh"))
        .arg("--debug")
        .arg(wheels.path())
        .output()
        .expect("bash runs");
    assert!(
        built.status.success(),
        "building the wheel failed:\n{}",
        stderr(&built)
    );
    let wheel = stdout(&built).lines().last().unwrap_or_default().to_owned();
    assert!(
        wheel.ends_with(".whl"),
        "build.sh named no wheel: {wheel:?}"
    );
    assert!(
        wheel.contains("-cp39-abi3-"),
        "the wheel is not abi3 for CPython 3.9 and later: {wheel}"
    );

    let mut test = Command::new("bash");
    test.arg(script("test.sh"))
        .env("AGENT_HOST_WHEEL", &wheel)
        .env("AGENT_HOST_PROCESSORS", processors)
        .env("AGENT_HOST_GUEST_PANIC", agent_host_test_artifacts::PANIC)
        .env("AGENT_HOST_GUEST_SPIN", agent_host_test_artifacts::SPIN)
        .env("AGENT_HOST_GUEST_GROW", agent_host_test_artifacts::GROW);
    let has_corpus = corpus().inspect(|dir| {
        test.env("AGENT_HOST_CORPUS", dir);
    });
    let ran = test.output().expect("bash runs");
    let out = stdout(&ran);
    assert!(
        ran.status.success(),
        "the Python package's tests failed:\n{out}\n{}",
        stderr(&ran)
    );
    assert!(out.contains(" passed"), "pytest ran no tests:\n{out}");
    // Only the corpus's tests may skip, and only where there is none.
    if has_corpus.is_some() {
        assert!(!out.contains(" skipped"), "pytest skipped tests:\n{out}");
    }
}
