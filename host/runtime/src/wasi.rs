//! Closed-by-default WASI for processors built against WASI (`wasm32-wasip2`
//! guests import a dozen interfaces from Rust's std even when they never use
//! them), the explicit grants, and the audit of a component's imports.
//!
//! Without grants a processor gets: no preopened directories, no environment,
//! no arguments, stdin closed, stdout and stderr captured into its log, no
//! network, and clocks and random numbers that trap with an explanation when
//! called (only `wasi:random/insecure-seed` answers, with a fixed seed, since
//! Rust's `HashMap` asks for one on creation).
//!
//! Every function that reads a clock, randomness, the environment or the
//! granted folders is counted at the host on its way to WASI's own
//! implementation (and every refused call noted), so that a call's record
//! says whether it was deterministic (see [`crate::record::Sources`]).

use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use wasmtime::component::{Linker, Resource};
use wasmtime::{StoreContextMut, Trap};
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock::Host as _;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use super::State;

/// The WASI version the host links; a guest importing any 0.2.x is served.
const WASI: &str = "0.2.12";
/// Bytes of stdout and of stderr kept per call.
pub(crate) const STDIO_CAPTURE: usize = 64 << 10;

/// Capabilities granted to one processor. Everything not granted is closed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grants {
    /// Host directories the processor may read (never write), each visible to
    /// the guest at the same absolute path.
    pub read_dirs: Vec<PathBuf>,
    /// Wall and monotonic clocks, and sleeping (a sleep past the deadline fails at once).
    pub clocks: bool,
    /// Random numbers from the host's generator.
    pub random: bool,
    /// The host service `summarize` (contract 0.2.0): the session's model
    /// writes a summary, which spends the user's model tokens.
    pub summarize: bool,
    /// The host service `count-tokens`: the session's tokenizer.
    pub count_tokens: bool,
    /// The host service `read-memory`: the facts of the run's user and
    /// agent in long-term memory.
    pub memory: bool,
}

/// How the host answers one import of a component.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ImportUse {
    /// The agent-host interface.
    Host,
    /// A WASI interface served closed, or opened by a grant.
    Wasi {
        /// The grant that opens it, when one does (`--allow-clocks`).
        grant: Option<&'static str>,
    },
}

/// One import of a component and how the host serves it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Import {
    /// The import's full name (`wasi:clocks/wall-clock@0.2.3`).
    pub name: String,
    /// How it is served.
    pub serves: ImportUse,
}

/// Checks every import of a component; returns how each is served, or the
/// first import the host cannot grant, by name.
pub(crate) fn audit<'a>(names: impl Iterator<Item = &'a str>) -> Result<Vec<Import>, String> {
    let mut out = Vec::new();
    for name in names {
        let serves = classify(name).ok_or_else(|| name.to_owned())?;
        out.push(Import {
            name: name.to_owned(),
            serves,
        });
    }
    Ok(out)
}

fn classify(name: &str) -> Option<ImportUse> {
    // `types` holds the type definitions (and, from 0.2.0, the history
    // resource's methods); `host` the host's functions. Each version the
    // host links; a component whose imports mix versions fails to link.
    // The host services exist from 0.2.0 on.
    if let Some(rest) = name.strip_prefix("agent-host:history/services@") {
        return rest.starts_with("0.2.").then_some(ImportUse::Host);
    }
    for iface in ["agent-host:history/host@", "agent-host:history/types@"] {
        if let Some(rest) = name.strip_prefix(iface) {
            return ["0.1.", "0.2."]
                .iter()
                .any(|v| rest.starts_with(v))
                .then_some(ImportUse::Host);
        }
    }
    let (iface, version) = name.strip_prefix("wasi:")?.split_once('@')?;
    if !version.starts_with("0.2.") {
        return None;
    }
    let grant = match iface {
        "clocks/wall-clock" | "clocks/monotonic-clock" => Some("--allow-clocks"),
        "random/random" | "random/insecure" | "random/insecure-seed" => Some("--allow-random"),
        "filesystem/types" | "filesystem/preopens" => Some("--allow-dir"),
        "io/error"
        | "io/poll"
        | "io/streams"
        | "cli/environment"
        | "cli/exit"
        | "cli/stdin"
        | "cli/stdout"
        | "cli/stderr"
        | "cli/terminal-input"
        | "cli/terminal-output"
        | "cli/terminal-stdin"
        | "cli/terminal-stdout"
        | "cli/terminal-stderr" => None,
        // Sockets are linked but closed: no address is ever allowed.
        "sockets/network"
        | "sockets/instance-network"
        | "sockets/tcp"
        | "sockets/tcp-create-socket"
        | "sockets/udp"
        | "sockets/udp-create-socket"
        | "sockets/ip-name-lookup" => None,
        _ => return None,
    };
    Some(ImportUse::Wasi { grant })
}

/// The WASI context for one call, closed except for `grants`. Built only when
/// the guest first calls WASI.
pub(crate) fn context(
    grants: &Grants,
    stdout: &MemoryOutputPipe,
    stderr: &MemoryOutputPipe,
) -> WasiCtx {
    let mut b = WasiCtxBuilder::new();
    b.stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .allow_blocking_current_thread(true)
        .max_random_size(crate::limits::MAX_RANDOM_BYTES);
    if !grants.random {
        b.insecure_random_seed(0x6167_656e_742d_686f_7374_2d73_6565_6421);
    }
    for dir in &grants.read_dirs {
        let guest = dir.to_string_lossy().into_owned();
        if let Err(e) = b.preopened_dir(dir, &guest, FsPerms::ReadOnly) {
            tracing::warn!(dir = %dir.display(), "granted directory could not be opened: {e:#}");
        }
    }
    b.build()
}

/// Adds WASI to `linker`, with the clock and random functions replaced by
/// traps unless granted, sleeping cut off at the call's deadline, and every
/// function that reads a clock, randomness, the environment or the granted
/// folders counted into the call's [`SourceLog`](crate::record::SourceLog)
/// on its way to WASI's own implementation.
pub(crate) fn add_to_linker(linker: &mut Linker<State>, grants: &Grants) -> wasmtime::Result<()> {
    use wasmtime_wasi::clocks::WasiClocksCtxView;
    use wasmtime_wasi::p2::bindings::clocks::{monotonic_clock, wall_clock};
    use wasmtime_wasi::p2::bindings::random::{insecure, insecure_seed, random};
    type Datetime = wasmtime_wasi::p2::bindings::clocks::wall_clock::Datetime;

    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    linker.allow_shadowing(true);
    let mono = format!("wasi:clocks/monotonic-clock@{WASI}");
    let wall = format!("wasi:clocks/wall-clock@{WASI}");
    if grants.clocks {
        let mut m = linker.instance(&mono)?;
        m.func_wrap("now", |mut store: StoreContextMut<'_, State>, (): ()| {
            let state = store.data_mut();
            state
                .sources
                .called("wasi:clocks/monotonic-clock#now", true);
            let (ctx, table) = state.wasi_parts();
            Ok((monotonic_clock::Host::now(&mut WasiClocksCtxView {
                ctx: ctx.clocks(),
                table,
            })?,))
        })?;
        m.func_wrap(
            "resolution",
            |mut store: StoreContextMut<'_, State>, (): ()| {
                let state = store.data_mut();
                state
                    .sources
                    .called("wasi:clocks/monotonic-clock#resolution", true);
                let (ctx, table) = state.wasi_parts();
                Ok((monotonic_clock::Host::resolution(&mut WasiClocksCtxView {
                    ctx: ctx.clocks(),
                    table,
                })?,))
            },
        )?;
        m.func_wrap("subscribe-duration", |mut store, (nanos,): (u64,)| {
            store
                .data_mut()
                .sources
                .called("wasi:clocks/monotonic-clock#subscribe-duration", true);
            sleep_until_deadline(store, nanos)
        })?;
        m.func_wrap("subscribe-instant", |mut store, (when,): (u64,)| {
            let now = {
                let state = store.data_mut();
                state
                    .sources
                    .called("wasi:clocks/monotonic-clock#subscribe-instant", true);
                let (ctx, table) = state.wasi_parts();
                let mut view = WasiClocksCtxView {
                    ctx: ctx.clocks(),
                    table,
                };
                monotonic_clock::Host::now(&mut view)?
            };
            sleep_until_deadline(store, when.saturating_sub(now))
        })?;
        let mut w = linker.instance(&wall)?;
        w.func_wrap("now", |mut store: StoreContextMut<'_, State>, (): ()| {
            let state = store.data_mut();
            state.sources.called("wasi:clocks/wall-clock#now", true);
            let (ctx, table) = state.wasi_parts();
            let now: Datetime = wall_clock::Host::now(&mut WasiClocksCtxView {
                ctx: ctx.clocks(),
                table,
            })?;
            Ok((now,))
        })?;
        w.func_wrap(
            "resolution",
            |mut store: StoreContextMut<'_, State>, (): ()| {
                let state = store.data_mut();
                state
                    .sources
                    .called("wasi:clocks/wall-clock#resolution", true);
                let (ctx, table) = state.wasi_parts();
                let res: Datetime = wall_clock::Host::resolution(&mut WasiClocksCtxView {
                    ctx: ctx.clocks(),
                    table,
                })?;
                Ok((res,))
            },
        )?;
    } else {
        deny::<(), (u64,)>(linker, &mono, "now", "clocks")?;
        deny::<(), (u64,)>(linker, &mono, "resolution", "clocks")?;
        deny::<(u64,), (Resource<DynPollable>,)>(linker, &mono, "subscribe-duration", "clocks")?;
        deny::<(u64,), (Resource<DynPollable>,)>(linker, &mono, "subscribe-instant", "clocks")?;
        deny::<(), (Datetime,)>(linker, &wall, "now", "clocks")?;
        deny::<(), (Datetime,)>(linker, &wall, "resolution", "clocks")?;
    }
    let r = format!("wasi:random/random@{WASI}");
    let i = format!("wasi:random/insecure@{WASI}");
    if grants.random {
        let mut ri = linker.instance(&r)?;
        ri.func_wrap(
            "get-random-bytes",
            |mut store: StoreContextMut<'_, State>, (len,): (u64,)| {
                let state = store.data_mut();
                state
                    .sources
                    .called("wasi:random/random#get-random-bytes", true);
                let (ctx, _) = state.wasi_parts();
                Ok((random::Host::get_random_bytes(ctx.random(), len)?,))
            },
        )?;
        ri.func_wrap(
            "get-random-u64",
            |mut store: StoreContextMut<'_, State>, (): ()| {
                let state = store.data_mut();
                state
                    .sources
                    .called("wasi:random/random#get-random-u64", true);
                let (ctx, _) = state.wasi_parts();
                Ok((random::Host::get_random_u64(ctx.random())?,))
            },
        )?;
        let mut ii = linker.instance(&i)?;
        ii.func_wrap(
            "get-insecure-random-bytes",
            |mut store: StoreContextMut<'_, State>, (len,): (u64,)| {
                let state = store.data_mut();
                state
                    .sources
                    .called("wasi:random/insecure#get-insecure-random-bytes", true);
                let (ctx, _) = state.wasi_parts();
                Ok((insecure::Host::get_insecure_random_bytes(
                    ctx.random(),
                    len,
                )?,))
            },
        )?;
        ii.func_wrap(
            "get-insecure-random-u64",
            |mut store: StoreContextMut<'_, State>, (): ()| {
                let state = store.data_mut();
                state
                    .sources
                    .called("wasi:random/insecure#get-insecure-random-u64", true);
                let (ctx, _) = state.wasi_parts();
                Ok((insecure::Host::get_insecure_random_u64(ctx.random())?,))
            },
        )?;
    } else {
        deny::<(u64,), (Vec<u8>,)>(linker, &r, "get-random-bytes", "random")?;
        deny::<(), (u64,)>(linker, &r, "get-random-u64", "random")?;
        deny::<(u64,), (Vec<u8>,)>(linker, &i, "get-insecure-random-bytes", "random")?;
        deny::<(), (u64,)>(linker, &i, "get-insecure-random-u64", "random")?;
    }
    // Answered either way: with the host's generator's seed when random
    // numbers are granted, else with the fixed seed of `context`.
    let seed_varies = grants.random;
    linker
        .instance(&format!("wasi:random/insecure-seed@{WASI}"))?
        .func_wrap(
            "insecure-seed",
            move |mut store: StoreContextMut<'_, State>, (): ()| {
                let state = store.data_mut();
                state
                    .sources
                    .called("wasi:random/insecure-seed#insecure-seed", seed_varies);
                let (ctx, _) = state.wasi_parts();
                Ok((insecure_seed::Host::insecure_seed(ctx.random())?,))
            },
        )?;
    count_environment(linker)?;
    count_preopens(linker, !grants.read_dirs.is_empty())?;
    open_regular_files_only(linker)?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Counts the calls of `wasi:cli/environment` (always answered empty: fixed,
/// not a source of nondeterminism).
fn count_environment(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    use wasmtime_wasi::cli::WasiCliCtxView;
    use wasmtime_wasi::p2::bindings::cli::environment::Host;
    let mut env = linker.instance(&format!("wasi:cli/environment@{WASI}"))?;
    env.func_wrap(
        "get-environment",
        |mut store: StoreContextMut<'_, State>, (): ()| {
            let state = store.data_mut();
            state
                .sources
                .called("wasi:cli/environment#get-environment", false);
            let (ctx, table) = state.wasi_parts();
            Ok((WasiCliCtxView {
                ctx: ctx.cli(),
                table,
            }
            .get_environment()?,))
        },
    )?;
    env.func_wrap(
        "get-arguments",
        |mut store: StoreContextMut<'_, State>, (): ()| {
            let state = store.data_mut();
            state
                .sources
                .called("wasi:cli/environment#get-arguments", false);
            let (ctx, table) = state.wasi_parts();
            Ok((WasiCliCtxView {
                ctx: ctx.cli(),
                table,
            }
            .get_arguments()?,))
        },
    )?;
    env.func_wrap(
        "initial-cwd",
        |mut store: StoreContextMut<'_, State>, (): ()| {
            let state = store.data_mut();
            state
                .sources
                .called("wasi:cli/environment#initial-cwd", false);
            let (ctx, table) = state.wasi_parts();
            Ok((WasiCliCtxView {
                ctx: ctx.cli(),
                table,
            }
            .initial_cwd()?,))
        },
    )?;
    Ok(())
}

/// Counts the calls of `wasi:filesystem/preopens`: the way to the granted
/// folders, whose files may change between runs (`varies` when any is
/// granted; without one the list is empty).
fn count_preopens(linker: &mut Linker<State>, varies: bool) -> wasmtime::Result<()> {
    use wasmtime_wasi::filesystem::WasiFilesystemCtxView;
    use wasmtime_wasi::p2::bindings::filesystem::preopens::Host;
    linker
        .instance(&format!("wasi:filesystem/preopens@{WASI}"))?
        .func_wrap(
            "get-directories",
            move |mut store: StoreContextMut<'_, State>, (): ()| {
                let state = store.data_mut();
                state
                    .sources
                    .called("wasi:filesystem/preopens#get-directories", varies);
                let (ctx, table) = state.wasi_parts();
                Ok((WasiFilesystemCtxView {
                    ctx: ctx.filesystem(),
                    table,
                }
                .get_directories()?,))
            },
        )?;
    Ok(())
}

/// Replaces `descriptor.open-at` with one that first looks at what the path
/// names and refuses (`access`) anything but a file or a folder: opening a
/// FIFO planted in a granted folder blocks the host thread until a writer
/// comes, where no deadline reaches it, and a device may never end. A path
/// that does not exist yet goes on to the open (which may create a file).
fn open_regular_files_only(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    use wasmtime_wasi::filesystem::WasiFilesystemCtxView;
    use wasmtime_wasi::p2::bindings::sync::filesystem::types::{
        Descriptor, DescriptorFlags, DescriptorType, ErrorCode, HostDescriptor, OpenFlags,
        PathFlags,
    };
    type Answer = Result<Resource<Descriptor>, ErrorCode>;

    let iface = format!("wasi:filesystem/types@{WASI}");
    linker.instance(&iface)?.func_wrap(
        "[method]descriptor.open-at",
        |mut store: StoreContextMut<'_, State>,
         (fd, path_flags, path, oflags, flags): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )|
         -> wasmtime::Result<(Answer,)> {
            let state = store.data_mut();
            state
                .sources
                .called("wasi:filesystem/types#[method]descriptor.open-at", true);
            let (ctx, table) = state.wasi_parts();
            let mut view = WasiFilesystemCtxView {
                ctx: ctx.filesystem(),
                table,
            };
            let at = Resource::<Descriptor>::new_borrow(fd.rep());
            match view.stat_at(at, path_flags, path.clone()) {
                Ok(stat) => match stat.type_ {
                    DescriptorType::RegularFile | DescriptorType::Directory => {}
                    other => {
                        tracing::warn!(
                            path = %path,
                            kind = ?other,
                            "a processor's open of something that is not a file or a folder was refused"
                        );
                        return Ok((Err(ErrorCode::Access),));
                    }
                },
                Err(e) => {
                    let code = wasmtime_wasi::p2::bindings::sync::filesystem::types::Host::convert_error_code(&mut view, e)?;
                    if code != ErrorCode::NoEntry {
                        return Ok((Err(code),));
                    }
                }
            }
            match view.open_at(fd, path_flags, path, oflags, flags) {
                Ok(opened) => Ok((Ok(opened),)),
                Err(e) => Ok((Err(wasmtime_wasi::p2::bindings::sync::filesystem::types::Host::convert_error_code(&mut view, e)?),)),
            }
        },
    )?;
    Ok(())
}

/// Replaces `iface.func` with a function that traps, saying which grant is missing.
fn deny<P, R>(
    linker: &mut Linker<State>,
    iface: &str,
    func: &str,
    what: &'static str,
) -> wasmtime::Result<()>
where
    P: wasmtime::component::ComponentNamedList + wasmtime::component::Lift + 'static,
    R: wasmtime::component::ComponentNamedList + wasmtime::component::Lower + 'static,
{
    // Named as the counted functions are: without the WASI version.
    let import = format!("{}#{func}", iface.split('@').next().unwrap_or(iface));
    linker.instance(iface)?.func_wrap(
        func,
        move |mut store: StoreContextMut<'_, State>, _: P| -> wasmtime::Result<R> {
            store.data_mut().sources.denied(&import);
            Err(wasmtime::Error::new(NotGranted {
                import: import.clone(),
                grant: what,
            }))
        },
    )?;
    Ok(())
}

/// A processor called a WASI function it was not granted.
#[derive(Debug)]
pub(crate) struct NotGranted {
    pub(crate) import: String,
    pub(crate) grant: &'static str,
}

impl std::fmt::Display for NotGranted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "called {} without the {} grant (--allow-{})",
            self.import, self.grant, self.grant
        )
    }
}

impl std::error::Error for NotGranted {}

/// A processor asked to sleep past its deadline.
#[derive(Debug)]
pub(crate) struct SleepPastDeadline;

impl std::fmt::Display for SleepPastDeadline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("asked to sleep past its deadline")
    }
}

impl std::error::Error for SleepPastDeadline {}

/// A granted sleep, refused at once when it would end after the call's
/// deadline, so that a sleeping guest is stopped on time like a spinning one
/// (epoch interruption only reaches code running in wasm).
fn sleep_until_deadline(
    mut store: StoreContextMut<'_, State>,
    nanos: u64,
) -> wasmtime::Result<(Resource<DynPollable>,)> {
    let state = store.data_mut();
    let left = state.deadline.saturating_duration_since(Instant::now());
    if u128::from(nanos) > left.as_nanos() {
        return Err(wasmtime::Error::new(SleepPastDeadline));
    }
    let (ctx, table) = state.wasi_parts();
    let mut view = wasmtime_wasi::clocks::WasiClocksCtxView {
        ctx: ctx.clocks(),
        table,
    };
    Ok((view.subscribe_duration(nanos)?,))
}

/// Whether an error is the trap of a deadline (an epoch interruption).
pub(crate) fn is_interrupt(e: &wasmtime::Error) -> bool {
    e.downcast_ref::<Trap>() == Some(&Trap::Interrupt)
        || e.downcast_ref::<SleepPastDeadline>().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_audit_names_the_first_import_it_cannot_grant() {
        let ok = audit(
            [
                "agent-host:history/host@0.1.0",
                "wasi:clocks/wall-clock@0.2.3",
                "wasi:io/streams@0.2.0",
            ]
            .into_iter(),
        )
        .unwrap();
        assert_eq!(ok[0].serves, ImportUse::Host);
        assert_eq!(
            ok[1].serves,
            ImportUse::Wasi {
                grant: Some("--allow-clocks")
            }
        );
        assert_eq!(
            audit(["wasi:io/streams@0.2.0", "wasi:http/outgoing-handler@0.2.0"].into_iter()),
            Err("wasi:http/outgoing-handler@0.2.0".to_owned())
        );
        // 0.2.0 is served beside 0.1.0; a version the host does not have, or
        // another major version of WASI, is not ours to serve.
        assert!(audit(["agent-host:history/host@0.2.0"].into_iter()).is_ok());
        assert!(audit(["agent-host:history/types@0.2.0"].into_iter()).is_ok());
        assert!(audit(["agent-host:history/host@0.3.0"].into_iter()).is_err());
        // The services came with 0.2.0: a 0.1.0 component cannot have them.
        assert!(audit(["agent-host:history/services@0.2.0"].into_iter()).is_ok());
        assert!(audit(["agent-host:history/services@0.1.0"].into_iter()).is_err());
        assert!(audit(["wasi:cli/environment@0.3.0"].into_iter()).is_err());
    }
}
