//! Bearer tokens with scopes.
//!
//! Tokens come from a file (`--tokens FILE`: one `SCOPES TOKEN` a line, such
//! as `read,write 6f1c...`; `#` starts a comment) or the environment
//! (`AGENT_HOST_API_TOKEN`, one admin token). Only SHA-256 digests are kept
//! in memory, and a presented token is compared with every one of them in
//! constant time, so neither timing nor a memory dump gives a token away.
//!
//! Scopes nest: `admin` can do what `write` can, `write` what `read` can.
//! `GET` needs `read`, every other method `write`, `/metrics` `admin`;
//! `/healthz` and `/openapi.json` are open.

use std::path::Path;

use agent_host_core::ErrorKind;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::ApiError;

/// The environment variable holding one admin token.
pub const TOKEN_ENV: &str = "AGENT_HOST_API_TOKEN";

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Read sessions, messages, context, events.
    Read,
    /// Also create, append, turn, summarize, rename, delete.
    Write,
    /// Also the metrics.
    Admin,
}

impl Scope {
    /// The scope's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }
}

impl std::str::FromStr for Scope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "read" => Ok(Scope::Read),
            "write" => Ok(Scope::Write),
            "admin" => Ok(Scope::Admin),
            other => Err(format!(
                "unknown scope {other:?}; expected read, write or admin"
            )),
        }
    }
}

/// The tokens the server accepts.
#[derive(Clone, Default)]
pub struct Tokens {
    entries: Vec<([u8; 32], Scope)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokens({} configured)", self.entries.len())
    }
}

/// The shortest token accepted: guessing one must be hopeless.
pub const MIN_TOKEN_LEN: usize = 16;

impl Tokens {
    /// No tokens: every request is allowed (loopback only).
    pub fn none() -> Self {
        Tokens::default()
    }

    /// Whether any token is configured.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many tokens are configured.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Adds `token` with `scope`.
    pub fn add(&mut self, token: &str, scope: Scope) -> Result<(), String> {
        if token.len() < MIN_TOKEN_LEN {
            return Err(format!(
                "a token must be at least {MIN_TOKEN_LEN} characters (this one has {})",
                token.len()
            ));
        }
        if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("a token must not hold spaces or control characters".to_owned());
        }
        self.entries.push((digest(token), scope));
        Ok(())
    }

    /// Reads a token file: one `SCOPES TOKEN` a line (`read`, `write`,
    /// `admin`, or several joined by commas: the widest counts). The file
    /// must not be readable by other users.
    pub fn read_file(path: &Path) -> Result<Tokens, String> {
        let shown = path.display();
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
            if meta.mode() & 0o077 != 0 {
                return Err(format!(
                    "{shown} can be read by other users (mode {:o}); run `chmod 600 {shown}`",
                    meta.mode() & 0o777
                ));
            }
        }
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
        let mut tokens = Tokens::default();
        tokens.add_lines(&text, &shown.to_string())?;
        if tokens.is_empty() {
            return Err(format!("{shown} holds no token"));
        }
        Ok(tokens)
    }

    /// Adds the tokens of `text` (the token file's format); `source` names
    /// it in errors.
    pub fn add_lines(&mut self, text: &str, source: &str) -> Result<(), String> {
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let at = |problem: String| format!("{source}:{}: {problem}", n + 1);
            let (scopes, token) = line.split_once(char::is_whitespace).ok_or_else(|| {
                at("expected `SCOPES TOKEN`, such as `read,write 6f1c...`".into())
            })?;
            let scope = scopes
                .split(',')
                .map(|s| s.trim().parse::<Scope>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(at)?
                .into_iter()
                .max()
                .ok_or_else(|| at("no scope".into()))?;
            self.add(token.trim(), scope).map_err(at)?;
        }
        Ok(())
    }

    /// The scope of the request's `Authorization` header value, compared
    /// in constant time with every configured token.
    pub fn scope_of(&self, header: Option<&str>) -> Result<Scope, ApiError> {
        let Some(header) = header else {
            return Err(ApiError::new(
                ErrorKind::Unauthorized,
                "this server needs a token: send `Authorization: Bearer TOKEN`",
            ));
        };
        let Some(token) = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
        else {
            return Err(ApiError::new(
                ErrorKind::Unauthorized,
                "the Authorization header must be `Bearer TOKEN`",
            ));
        };
        let presented = digest(token.trim());
        let mut found: Option<Scope> = None;
        for (known, scope) in &self.entries {
            // Every entry is compared, match or not.
            if bool::from(known.ct_eq(&presented)) {
                found = Some(found.map_or(*scope, |s| s.max(*scope)));
            }
        }
        found.ok_or_else(|| ApiError::new(ErrorKind::Unauthorized, "the token is not valid"))
    }

    /// Whether a request with `header` may do what needs `needed`.
    pub fn check(&self, header: Option<&str>, needed: Scope) -> Result<(), ApiError> {
        if self.is_empty() {
            return Ok(());
        }
        let scope = self.scope_of(header)?;
        if scope >= needed {
            Ok(())
        } else {
            Err(ApiError::new(
                ErrorKind::Forbidden,
                format!(
                    "the token's scope is `{}`; this needs `{}`",
                    scope.as_str(),
                    needed.as_str()
                ),
            ))
        }
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The scope a request needs: `None` for the open endpoints.
pub fn needed(method: &axum::http::Method, path: &str) -> Option<Scope> {
    match path {
        "/healthz" | "/openapi.json" | "/login" | "/logout" => None,
        _ if path.starts_with("/assets/") => None,
        "/metrics" => Some(Scope::Admin),
        // A report posted to be shown: nothing is kept or changed.
        "/reports" => Some(Scope::Read),
        _ if method == axum::http::Method::GET || method == axum::http::Method::HEAD => {
            Some(Scope::Read)
        }
        _ => Some(Scope::Write),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const READER: &str = "reader-token-0123456789";
    const WRITER: &str = "writer-token-0123456789";

    fn tokens() -> Tokens {
        let mut t = Tokens::none();
        t.add_lines(
            &format!("# tokens\nread {READER}\nread,write {WRITER}  # the app\n"),
            "tokens",
        )
        .unwrap();
        t
    }

    #[test]
    fn scopes_nest_and_wrong_tokens_are_refused() {
        let t = tokens();
        assert_eq!(t.len(), 2);
        let bearer = |tok: &str| format!("Bearer {tok}");
        assert!(t.check(Some(&bearer(READER)), Scope::Read).is_ok());
        let e = t.check(Some(&bearer(READER)), Scope::Write).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Forbidden);
        assert!(e.message.contains("`read`") && e.message.contains("`write`"));
        assert!(t.check(Some(&bearer(WRITER)), Scope::Write).is_ok());
        assert!(t.check(Some(&bearer(WRITER)), Scope::Admin).is_err());
        let wrong = t.check(Some(&bearer("not-a-known-token-at-all")), Scope::Read);
        assert_eq!(wrong.unwrap_err().kind, ErrorKind::Unauthorized);
        assert_eq!(
            t.check(None, Scope::Read).unwrap_err().kind,
            ErrorKind::Unauthorized
        );
        assert_eq!(
            t.check(Some(READER), Scope::Read).unwrap_err().kind,
            ErrorKind::Unauthorized
        );
        assert!(Tokens::none().check(None, Scope::Admin).is_ok());
    }

    #[test]
    fn bad_token_lines_name_the_line() {
        let mut t = Tokens::none();
        let e = t.add_lines("read short", "tokens.txt").unwrap_err();
        assert!(e.starts_with("tokens.txt:1:") && e.contains("16"), "{e}");
        let e = t
            .add_lines("\nsuper abcdefghijklmnopqrstuvwxyz", "tokens.txt")
            .unwrap_err();
        assert!(e.starts_with("tokens.txt:2:") && e.contains("super"), "{e}");
        let e = t.add_lines("justonetoken", "t").unwrap_err();
        assert!(e.contains("SCOPES TOKEN"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_token_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, format!("admin {WRITER}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Tokens::read_file(&path).unwrap_err();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let t = Tokens::read_file(&path).unwrap();
        assert!(
            t.check(Some(&format!("Bearer {WRITER}")), Scope::Admin)
                .is_ok()
        );
    }

    #[test]
    fn routes_need_the_right_scope() {
        use axum::http::Method;
        assert_eq!(needed(&Method::GET, "/healthz"), None);
        assert_eq!(needed(&Method::GET, "/v1/sessions"), Some(Scope::Read));
        assert_eq!(needed(&Method::POST, "/v1/sessions"), Some(Scope::Write));
        assert_eq!(
            needed(&Method::DELETE, "/v1/sessions/x"),
            Some(Scope::Write)
        );
        assert_eq!(needed(&Method::GET, "/metrics"), Some(Scope::Admin));
        assert_eq!(needed(&Method::POST, "/reports"), Some(Scope::Read));
    }
}
