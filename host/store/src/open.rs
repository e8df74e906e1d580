//! Opening a store from its spec: `postgres://...`, `sqlite:PATH` or a
//! folder.
//!
//! The one place that turns what a user typed (`--store`, the
//! `AGENT_HOST_STORE` variable, config) into a [`SessionStore`].

use std::path::Path;

use crate::postgres::URL_PREFIXES;
use crate::{FileStore, PostgresStore, Result, SessionStore, SqliteStore, StoreError};

/// The prefix that selects the SQLite backend in a store spec.
pub const SQLITE_PREFIX: &str = "sqlite:";

/// The store used when nothing names one: a folder in the working directory.
pub const DEFAULT_STORE: &str = ".agent-host";

/// Whether anything is stored at `spec` yet (the folder or database
/// exists), so that a command that only reads never creates a store.
pub fn exists(spec: &str) -> bool {
    if is_postgres(spec) {
        // A database is asked, not looked for: opening it says.
        return true;
    }
    let path = spec.strip_prefix(SQLITE_PREFIX).unwrap_or(spec);
    Path::new(path).exists()
}

/// Opens the store `spec` names, creating what is missing.
///
/// - `postgres://...` or `postgresql://...`: the [`PostgresStore`] of that
///   database (its schema created or migrated).
/// - `sqlite:PATH`: the [`SqliteStore`] at `PATH` (created with its parent
///   folders when missing).
/// - anything else: the [`FileStore`] rooted at that folder (created with
///   its parents when missing).
///
/// Relative paths are relative to the working folder. A folder whose name
/// starts with `sqlite:` is named `./sqlite:...`. An empty spec, or `sqlite:`
/// without a path, is [`StoreError::Invalid`]; a file that is not a SQLite
/// database is [`StoreError::Backend`] naming the path. The signature is
/// stable: a new backend gets a new prefix here.
///
/// ```
/// use agent_host_store::{self as store, NewSession};
///
/// let dir = tempfile::tempdir()?;
/// let files = store::open(&dir.path().join("store").to_string_lossy())?;
/// files.create(&NewSession::new("default"))?;
/// let db = store::open(&format!("sqlite:{}", dir.path().join("sessions.db").display()))?;
/// db.create(&NewSession::new("default"))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open(spec: &str) -> Result<Box<dyn SessionStore>> {
    if is_postgres(spec) {
        return Ok(Box::new(PostgresStore::open(spec)?));
    }
    if let Some(path) = spec.strip_prefix(SQLITE_PREFIX) {
        if path.is_empty() {
            return Err(invalid(
                spec,
                "`sqlite:` needs a path, as in `sqlite:sessions.db`",
            ));
        }
        return open_sqlite(Path::new(path));
    }
    if spec.is_empty() {
        return Err(invalid(
            spec,
            "it is empty; give a folder, or `sqlite:PATH` for a database",
        ));
    }
    Ok(Box::new(FileStore::open(spec)?))
}

/// [`open`] for a process that appends to many sessions at once (the
/// server): a folder store acknowledges appends by group commit across
/// sessions ([`FileStore::with_group_commit`]); the other backends are as
/// [`open`] gives them (their own commits group already).
pub fn open_for_concurrent_appends(spec: &str) -> Result<Box<dyn SessionStore>> {
    if is_postgres(spec) || spec.starts_with(SQLITE_PREFIX) || spec.is_empty() {
        return open(spec);
    }
    Ok(Box::new(FileStore::open(spec)?.with_group_commit()?))
}

fn open_sqlite(path: &Path) -> Result<Box<dyn SessionStore>> {
    Ok(Box::new(SqliteStore::open(path)?))
}

fn invalid(spec: &str, reason: &str) -> StoreError {
    StoreError::Invalid {
        what: "store",
        value: spec.to_owned(),
        reason: reason.to_owned(),
    }
}

/// Whether `spec` names a PostgreSQL database (`postgres://` or
/// `postgresql://`, in any case).
pub fn is_postgres(spec: &str) -> bool {
    URL_PREFIXES.iter().any(|prefix| {
        spec.get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
    })
}

/// `spec` as it may be shown (in `config show`, errors, logs): a
/// PostgreSQL URL's password, in its user part or a `password=` parameter,
/// becomes `***`. Other specs are returned as they are.
///
/// ```
/// use agent_host_store::redact;
///
/// assert_eq!(
///     redact("postgres://app:s3cret@db.internal:5432/agents?sslmode=require"),
///     "postgres://app:***@db.internal:5432/agents?sslmode=require"
/// );
/// assert_eq!(redact("postgresql://db/x?password=s3cret&sslmode=require"),
///     "postgresql://db/x?password=***&sslmode=require");
/// assert_eq!(redact("sqlite:sessions.db"), "sqlite:sessions.db");
/// ```
pub fn redact(spec: &str) -> String {
    if !is_postgres(spec) {
        return spec.to_owned();
    }
    let Some((scheme, rest)) = spec.split_once("://") else {
        return spec.to_owned();
    };
    let (authority, tail) = match rest.find(['/', '?', '#']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _password)) => format!("{name}:***@{host}"),
            None => format!("{user}@{host}"),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        for (spec, shown) in [
            ("postgres://u:p@h/d", "postgres://u:***@h/d"),
            ("POSTGRES://u:p%40ss@h:1/d", "POSTGRES://u:***@h:1/d"),
            // An `@` in the password, unescaped: the last one ends it.
            ("postgresql://u:a@b@h/d", "postgresql://u:***@h/d"),
            (
                "postgres://u@h/d?password=p",
                "postgres://u@h/d?password=***",
            ),
            (
                "postgres://h?a=1&PASSWORD=p&b=2",
                "postgres://h?a=1&PASSWORD=***&b=2",
            ),
            ("postgres://u@h", "postgres://u@h"),
            ("store/dir", "store/dir"),
        ] {
            assert_eq!(redact(spec), shown, "{spec}");
        }
    }

    #[test]
    fn bad_urls_say_what_and_where_without_the_password() {
        for (spec, says) in [
            ("postgres://u:hunter2@h:notaport/d", "not a PostgreSQL URL"),
            ("postgres://u:hunter2@/d", "no host"),
        ] {
            let err = open(spec).err().expect("refused");
            let text = crate::error_chain(&err);
            assert!(text.contains(says), "{text}");
            assert!(!text.contains("hunter2"), "{text}");
            assert!(text.contains("u:***@"), "{text}");
            assert_eq!(err.kind(), agent_host_core::ErrorKind::Configuration);
        }
    }

    #[test]
    fn an_unreachable_server_is_named() {
        // A port nothing listens on: bind one, then free it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let spec = format!("postgres://u:hunter2@127.0.0.1:{port}/d?connect_timeout=5");
        let err = open(&spec).err().expect("refused");
        let text = crate::error_chain(&err);
        assert!(
            text.contains("cannot connect to the PostgreSQL database"),
            "{text}"
        );
        assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }
}
