//! Request extractors whose errors are JSON and name the bad field: axum's
//! own answer in plain text and often without the path.

use agent_host_core::ErrorKind;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON body; a syntax or shape error names the field
/// (`body.messages[3].role: unknown variant ...`).
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_json = request
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                let essence = v.split(';').next().unwrap_or("").trim();
                essence.eq_ignore_ascii_case("application/json")
                    || essence
                        .get(essence.len().saturating_sub(5)..)
                        .is_some_and(|end| end.eq_ignore_ascii_case("+json"))
            });
        if !is_json {
            return Err(ApiError::invalid(
                "content-type",
                "the body must be JSON: send `Content-Type: application/json`",
            ));
        }
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(
                        ErrorKind::LimitExceeded,
                        "body: larger than the server's request size limit (--max-body)",
                    )
                } else {
                    ApiError::invalid("body", rejection.body_text())
                }
            })?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// Parses `bytes` as `T`, naming the field of an error.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Paths are tracked only to explain a failure: a body that parses is
    // read once, without them.
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "body".to_owned()
        } else {
            format!("body.{path}")
        };
        ApiError::invalid(&field, e.inner())
    })?;
    de.end()
        .map_err(|e| ApiError::invalid("body", format!("{e} after the JSON value")))?;
    Ok(value)
}

/// A query string; an error names the parameter.
#[derive(Debug)]
pub struct QueryArgs<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for QueryArgs<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or("");
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de)
            .map(QueryArgs)
            .map_err(|e| {
                let path = e.path().to_string();
                let field = if path == "." {
                    "query".to_owned()
                } else {
                    path
                };
                ApiError::invalid(&field, e.inner())
            })
    }
}
