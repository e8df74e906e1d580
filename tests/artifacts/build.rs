//! Builds every guest in `tests/guests/examples` into a component and writes
//! `artifacts.rs`, one `pub const NAME: &str = "path"` per guest.
//!
//! Guests named `wasi_*` are built for `wasm32-wasip2` (rustc makes the
//! component, with the WASI imports std brings); the others for
//! `wasm32-unknown-unknown`, then turned into components with
//! `wit-component`, so they import only the agent-host interface.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

fn main() -> Result<()> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let guests = manifest.join("../guests");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    // One target dir for the guests, shared by every profile of the host, so
    // that a `cargo test` after a `cargo bench` does not rebuild them.
    let target = manifest.join("../../target/guests");
    for watched in [
        "../guests/examples",
        "../guests/wit",
        "../guests/Cargo.toml",
        "../../wit",
    ] {
        println!(
            "cargo:rerun-if-changed={}",
            manifest.join(watched).display()
        );
    }

    let mut names: Vec<String> = std::fs::read_dir(guests.join("examples"))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".rs").map(str::to_owned)
        })
        .collect();
    names.sort();
    let (wasi, plain): (Vec<&String>, Vec<&String>) =
        names.iter().partition(|n| n.starts_with("wasi_"));

    let mut consts = String::new();
    for (target_triple, list) in [("wasm32-unknown-unknown", &plain), ("wasm32-wasip2", &wasi)] {
        cargo_build(&guests, &target, target_triple, list)?;
        for name in list.iter() {
            let built = target
                .join(target_triple)
                .join("release/examples")
                .join(format!("{name}.wasm"));
            let bytes =
                std::fs::read(&built).with_context(|| format!("reading {}", built.display()))?;
            let component = if target_triple == "wasm32-wasip2" {
                bytes
            } else {
                wit_component::ComponentEncoder::default()
                    .module(&bytes)
                    .and_then(|e| e.validate(true).encode())
                    .with_context(|| format!("turning {name} into a component"))?
            };
            let path = out.join(format!("{name}.wasm"));
            std::fs::write(&path, component)?;
            writeln!(
                consts,
                "/// The `{name}` test guest, built into a component.\npub const {}: &str = {:?};",
                name.to_uppercase(),
                path.display().to_string()
            )?;
        }
    }
    std::fs::write(out.join("artifacts.rs"), consts)?;
    Ok(())
}

fn cargo_build(guests: &Path, target_dir: &Path, triple: &str, names: &[&String]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--release")
        .arg("--quiet")
        .arg("--target")
        .arg(triple)
        .arg("--manifest-path")
        .arg(guests.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir);
    for name in names {
        cmd.arg("--example").arg(name.as_str());
    }
    // The host build's flags are not the guests' flags.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .context("running cargo to build the test guests")?;
    if !status.success() {
        bail!(
            "building the test guests for {triple} failed; if the target is missing, run \
             `rustup target add wasm32-unknown-unknown wasm32-wasip2`"
        );
    }
    Ok(())
}
