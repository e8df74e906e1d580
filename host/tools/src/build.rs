//! `agent-host processor build`: cargo for `wasm32-unknown-unknown`, then
//! componentization with `wit-component`.

use std::collections::HashMap;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use cargo_metadata::{Message, MetadataCommand, TargetKind};

/// The target processors are compiled for: no WASI, so the component imports
/// only what the code uses (the agent-host interface).
pub const TARGET: &str = "wasm32-unknown-unknown";

/// What to build.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// A crate or workspace folder, or its `Cargo.toml`.
    pub path: PathBuf,
    /// Where the components go; `processors/` in cargo's target folder when
    /// `None`.
    pub out_dir: Option<PathBuf>,
    /// Only these packages (all `cdylib` members when empty).
    pub packages: Vec<String>,
    /// The dev profile instead of release.
    pub debug: bool,
    /// Cargo prints only errors.
    pub quiet: bool,
    /// Refuse, before building, a path that holds more than one processor.
    pub single: bool,
    /// Cargo features to turn on (`--features`), such as
    /// `agent-host-guest/contract-0-1` to build against contract 0.1.0.
    pub features: Vec<String>,
}

/// One component written.
#[derive(Clone, Debug)]
pub struct Built {
    /// The package's name, which is also the file's stem.
    pub name: String,
    /// Where the component is.
    pub path: PathBuf,
    /// Its size.
    pub bytes: usize,
}

/// Builds the processor crates at `options.path` into components.
pub fn build(options: &BuildOptions) -> Result<Vec<Built>> {
    let manifest = if options.path.is_file() {
        options.path.clone()
    } else {
        options.path.join("Cargo.toml")
    };
    if !manifest.is_file() {
        bail!(
            "no Cargo.toml at {}: `agent-host processor build` takes a Rust processor crate or a \
             workspace of them (`agent-host processor new NAME` creates one)",
            options.path.display()
        );
    }
    // Absolute, because cargo runs in the crate's folder (where its
    // `.cargo/config.toml` applies).
    let manifest = manifest
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", manifest.display()))?;
    let dir = manifest.parent().unwrap_or(Path::new("/"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let metadata = MetadataCommand::new()
        .cargo_path(&cargo)
        .manifest_path(&manifest)
        .current_dir(dir)
        .no_deps()
        .exec()
        .with_context(|| format!("cannot read the crate metadata of {}", manifest.display()))?;

    // The packages to build: the crate itself, or every member of a workspace.
    // (`root_package` needs the dependency resolution `--no-deps` skips.)
    let root = metadata
        .workspace_packages()
        .into_iter()
        .find(|p| p.manifest_path.as_std_path() == manifest);
    let candidates: Vec<&cargo_metadata::Package> = match root {
        Some(root) => vec![root],
        None => metadata.workspace_packages(),
    };
    let mut chosen = Vec::new();
    for wanted in &options.packages {
        if !candidates.iter().any(|p| p.name.as_str() == wanted) {
            let names: Vec<&str> = candidates.iter().map(|p| p.name.as_str()).collect();
            bail!(
                "no package `{wanted}` in {}; it has: {}",
                manifest.display(),
                names.join(", ")
            );
        }
    }
    for p in candidates {
        if !options.packages.is_empty() && !options.packages.iter().any(|w| w == p.name.as_str()) {
            continue;
        }
        let is_cdylib = p
            .targets
            .iter()
            .any(|t| t.kind.contains(&TargetKind::CDyLib));
        if is_cdylib {
            chosen.push(p);
        } else if !options.packages.is_empty() || root.is_some() {
            bail!(
                "{} is not built as a library WebAssembly can load: add\n\n[lib]\ncrate-type = \
                 [\"cdylib\", \"rlib\"]\n\nto {}",
                p.name,
                p.manifest_path
            );
        }
    }
    if chosen.is_empty() {
        bail!(
            "no processor crate (a `cdylib`) in the workspace {}",
            manifest.display()
        );
    }
    if options.single && chosen.len() > 1 {
        let names: Vec<&str> = chosen.iter().map(|p| p.name.as_str()).collect();
        bail!(
            "{} holds {} processors ({}); give one crate's folder",
            manifest.display(),
            chosen.len(),
            names.join(", ")
        );
    }

    let mut cmd = Command::new(&cargo);
    cmd.current_dir(dir)
        .arg("build")
        .arg("--target")
        .arg(TARGET)
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--message-format=json-render-diagnostics")
        .stdout(Stdio::piped());
    // Flags meant for the host (a linker, a CPU) break a WebAssembly build;
    // flags for processors go in CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(var);
    }
    if !options.debug {
        cmd.arg("--release");
    }
    if options.quiet {
        cmd.arg("--quiet");
    }
    for p in &chosen {
        cmd.arg("--package").arg(p.name.as_str());
    }
    if !options.features.is_empty() {
        cmd.arg("--features").arg(options.features.join(","));
    }
    let mut child = cmd.spawn().context("cannot run cargo")?;
    let stdout = child.stdout.take().context("cargo's output")?;
    let names: HashMap<&Path, &str> = chosen
        .iter()
        .map(|p| (p.manifest_path.as_std_path(), p.name.as_str()))
        .collect();
    let mut modules: Vec<(String, PathBuf)> = Vec::new();
    for message in Message::parse_stream(BufReader::new(stdout)) {
        if let Message::CompilerArtifact(a) = message.context("reading cargo's output")?
            && a.target.kind.contains(&TargetKind::CDyLib)
            && let Some(name) = names.get(a.manifest_path.as_std_path())
            && let Some(wasm) = a.filenames.iter().find(|f| f.extension() == Some("wasm"))
        {
            modules.push(((*name).to_owned(), wasm.clone().into_std_path_buf()));
        }
    }
    let status = child.wait().context("waiting for cargo")?;
    if !status.success() {
        bail!(
            "cargo build for {TARGET} failed (its messages are above); if it says the target \
             may not be installed, run `rustup target add {TARGET}`"
        );
    }

    for p in &chosen {
        if !modules.iter().any(|(name, _)| name == p.name.as_str()) {
            bail!("cargo built no WebAssembly module for {}", p.name);
        }
    }

    let out_dir = options.out_dir.clone().unwrap_or_else(|| {
        metadata
            .target_directory
            .join("processors")
            .into_std_path_buf()
    });
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let mut built = Vec::new();
    for (name, module) in modules {
        let bytes =
            std::fs::read(&module).with_context(|| format!("cannot read {}", module.display()))?;
        if !exports_processor(&bytes) {
            bail!(
                "{name} does not export a processor: add \
                 `agent_host_guest::export_processor!(YourType);` to its src/lib.rs"
            );
        }
        let component = componentize(&bytes)
            .with_context(|| format!("cannot turn {} into a component", module.display()))?;
        let path = out_dir.join(format!("{name}.wasm"));
        write_atomically(&path, &component)?;
        built.push(Built {
            name,
            path,
            bytes: component.len(),
        });
    }
    Ok(built)
}

/// Wraps a core module whose bindings were generated by wit-bindgen (the
/// component type travels in a custom section) into a component.
pub fn componentize(module: &[u8]) -> Result<Vec<u8>> {
    wit_component::ComponentEncoder::default()
        .module(module)?
        .validate(true)
        .encode()
}

/// Whether a module built with wit-bindgen exports the `processor`
/// interface: its component-type section names what the bindings export.
fn exports_processor(module: &[u8]) -> bool {
    let Ok((_, bindgen)) = wit_component::metadata::decode(module) else {
        return false;
    };
    let resolve = &bindgen.resolve;
    resolve.worlds[bindgen.world].exports.keys().any(|key| {
        resolve
            .name_world_key(key)
            .starts_with("agent-host:history/processor@")
    })
}

/// Writes through a temporary file and a rename, so a reader never sees half
/// a component.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    std::io::Write::write_all(&mut tmp, bytes)
        .with_context(|| format!("cannot write {}", path.display()))?;
    // Readable by whoever runs it (a temporary file starts as 0600).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    tmp.persist(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
