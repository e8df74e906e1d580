//! `agent-host config`: the effective configuration and where each value
//! came from.

use std::io::Write;
use std::path::{Path, PathBuf};

use agent_host_config::{
    FILE_NAME, Overrides, Settings, TrustList, TrustState, find_file, user_config_dir,
};
use anyhow::{Context, Result};

/// The commands of `agent-host config`.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print every effective setting with where it came from (flag, environment, file or
    /// default).
    ///
    /// The output is TOML, a valid agent-host.toml; each line's comment says where the value
    /// came from. API keys are never printed: only the name of their variable is
    /// configuration.
    Show {
        /// Print JSON: {"file": ..., "values": {"context.context_limit": {"value": ...,
        /// "origin": ...}, ...}}.
        #[arg(long)]
        json: bool,
        /// Show the effect of these overrides too.
        #[command(flatten)]
        overrides: Overrides,
    },
    /// Print which configuration file would be read, or say there is none.
    Path,
    /// Trust a project's configuration file, after reviewing it.
    ///
    /// An agent-host.toml found in the working directory (a cloned repository can ship one)
    /// is honoured for the keys that choose where requests go, which secret is sent, where
    /// sessions are written and which folders a processor reads (provider.base_url,
    /// provider.api_key_env, store.path, processors[].allow_dirs) only once trusted. Trust
    /// holds for the file's path and exact content: any edit asks again. The list lives in
    /// trusted.json in the user configuration folder.
    Trust {
        /// The file to trust (default: the one that would be read).
        file: Option<PathBuf>,
        /// Stop trusting it instead.
        #[arg(long)]
        revoke: bool,
    },
}

/// Runs `agent-host config`. `explicit` is the global `--config FILE`,
/// `store_flag` the global `--store`.
pub fn run(
    command: &ConfigCommand,
    explicit: Option<&Path>,
    store_flag: Option<&str>,
    out: &mut dyn Write,
) -> Result<()> {
    match command {
        ConfigCommand::Show { json, overrides } => {
            let settings = Settings::load_for_show(explicit, overrides, store_flag)?;
            if *json {
                serde_json::to_writer_pretty(&mut *out, &settings.show_json())?;
                writeln!(out)?;
            } else {
                out.write_all(settings.show().as_bytes())?;
            }
        }
        ConfigCommand::Path => {
            let cwd = std::env::current_dir()
                .map_err(|e| anyhow::anyhow!("cannot read the working directory: {e}"))?;
            let user = user_config_dir();
            let env = |name: &str| std::env::var(name).ok();
            match find_file(explicit, &env, &cwd, user.as_deref())? {
                Some(f) => writeln!(
                    out,
                    "{} ({})",
                    crate::term::safe(&f.path.display().to_string()),
                    f.found_by
                )?,
                None => {
                    let mut looked = vec![cwd.join(FILE_NAME).display().to_string()];
                    if let Some(dir) = user {
                        looked.push(dir.join(FILE_NAME).display().to_string());
                    }
                    writeln!(
                        out,
                        "no configuration file (looked for {}): the defaults apply",
                        looked.join(" and ")
                    )?;
                }
            }
        }
        ConfigCommand::Trust { file, revoke } => trust(file.as_deref(), explicit, *revoke, out)?,
    }
    Ok(())
}

/// `agent-host config trust [FILE] [--revoke]`.
fn trust(
    file: Option<&Path>,
    explicit: Option<&Path>,
    revoke: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let cwd = std::env::current_dir()
        .map_err(|e| anyhow::anyhow!("cannot read the working directory: {e}"))?;
    let dir = user_config_dir().context(
        "there is no user configuration folder to keep the trust list in: set HOME or \
         XDG_CONFIG_HOME",
    )?;
    let path = match file {
        Some(file) => cwd.join(file),
        None => {
            let env = |name: &str| std::env::var(name).ok();
            find_file(explicit, &env, &cwd, Some(&dir))?
                .map(|f| f.path)
                .with_context(|| {
                    format!(
                        "there is no configuration file to trust: {} does not exist",
                        cwd.join(FILE_NAME).display()
                    )
                })?
        }
    };
    let shown = path.display().to_string();
    let shown = crate::term::safe(&shown);
    let mut list = TrustList::load(Some(&dir))?;
    if revoke {
        let was = list.revoke(&path);
        list.save(&dir)?;
        if was {
            writeln!(out, "no longer trusted: {shown}")?;
        } else {
            writeln!(out, "{shown} was not trusted")?;
        }
        return Ok(());
    }
    let (text, sensitive) = agent_host_config::read_for_trust(&path)?;
    if list.state(&path, &text) == TrustState::Trusted {
        writeln!(out, "already trusted: {shown}")?;
        return Ok(());
    }
    list.trust(&path, &text);
    list.save(&dir)?;
    writeln!(
        out,
        "trusted: {shown} (this content only: an edit asks again)"
    )?;
    if sensitive.is_empty() {
        writeln!(out, "it sets no key that needs trust")?;
    }
    for (key, value) in sensitive {
        writeln!(out, "  {key} = {}", crate::term::safe(&value))?;
    }
    Ok(())
}
