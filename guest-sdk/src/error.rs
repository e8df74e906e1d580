//! Why a call failed, as the host reports it.

use std::fmt;

use crate::__private::WitError;

/// Why a processor refused to answer. The host names the processor and its
/// hash around the message, so say what was wrong, not who you are.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is not what the processor takes.
    BadConfig(String),
    /// The processor could not do its work on this history.
    Failed(String),
}

/// A result whose error is an [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A configuration error: `Error::bad_config(format!("unknown tool {name}"))`.
    pub fn bad_config(message: impl Into<String>) -> Self {
        Error::BadConfig(message.into())
    }

    /// Any other failure.
    pub fn failed(message: impl Into<String>) -> Self {
        Error::Failed(message.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadConfig(m) => write!(f, "bad configuration: {m}"),
            Error::Failed(m) => write!(f, "failed: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for WitError {
    fn from(e: Error) -> Self {
        match e {
            Error::BadConfig(m) => WitError::BadConfig(m),
            Error::Failed(m) => WitError::Failed(m),
        }
    }
}

/// Parses the user's configuration: none (empty or `null`) is the default.
pub(crate) fn parse_config<C: serde::de::DeserializeOwned + Default>(text: &str) -> Result<C> {
    let text = text.trim();
    if text.is_empty() || text == "null" {
        return Ok(C::default());
    }
    let mut json = serde_json::Deserializer::from_str(text);
    let config = serde_path_to_error::deserialize(&mut json).map_err(|e| {
        // Name the key: `turns`: invalid type... (the root has no path).
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            Error::BadConfig(format!("not valid JSON: {inner}"))
        } else if path == "." {
            Error::BadConfig(inner.to_string())
        } else {
            Error::BadConfig(format!("`{path}`: {inner}"))
        }
    })?;
    json.end()
        .map_err(|e| Error::BadConfig(format!("not valid JSON after the configuration: {e}")))?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NoConfig;

    #[derive(serde::Deserialize, Default, Debug, PartialEq)]
    #[serde(default, deny_unknown_fields)]
    struct Turns {
        turns: u32,
    }

    #[test]
    fn no_configuration_is_the_default() {
        assert_eq!(parse_config::<Turns>("").unwrap(), Turns::default());
        assert_eq!(parse_config::<Turns>(" null ").unwrap(), Turns::default());
        assert_eq!(parse_config::<NoConfig>("{}").unwrap(), NoConfig {});
    }

    #[test]
    fn a_bad_configuration_names_the_field_and_where() {
        let e = parse_config::<Turns>(r#"{"turns": "four"}"#).unwrap_err();
        let Error::BadConfig(m) = &e else {
            panic!("{e:?}")
        };
        assert!(
            m.starts_with("`turns`: invalid type: string \"four\""),
            "{m}"
        );
        assert!(m.contains("line 1 column"), "{m}");
        let e = parse_config::<Turns>(r#"{"turns": 1} x"#).unwrap_err();
        assert!(e.to_string().contains("trailing characters"), "{e}");
        let e = parse_config::<NoConfig>(r#"{"turns": 1}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `turns`"), "{e}");
    }
}
