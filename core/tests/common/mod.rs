//! Shared by the test binaries that read the real transcripts.

use std::path::PathBuf;

/// The corpus of real transcripts beside this checkout (`../shared/corpus`,
/// or `AGENT_HOST_CORPUS`), or `None` after saying that the test skips.
pub fn corpus_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("AGENT_HOST_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"));
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "SKIPPED: no corpus at {} (set AGENT_HOST_CORPUS)",
            dir.display()
        );
        None
    }
}
