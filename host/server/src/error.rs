//! Every error the server answers with: a JSON body `{error: {kind, message}}`
//! whose HTTP status comes from the kind, in one place ([`status_of`]).

use agent_host_api::ErrorBody;
use agent_host_core::ErrorKind;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// An error answer: a kind and a message that says what and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// What kind of failure it is.
    pub kind: ErrorKind,
    /// What was wrong, where, and what to do.
    pub message: String,
}

impl ApiError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ApiError {
            kind,
            message: message.into(),
        }
    }

    /// A bad request naming the field (`limit`, `body.messages[2].role`).
    pub fn invalid(field: &str, problem: impl std::fmt::Display) -> Self {
        ApiError::new(ErrorKind::InvalidInput, format!("{field}: {problem}"))
    }

    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        status_of(self.kind)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for ApiError {}

/// The one mapping of error kinds to HTTP statuses.
pub fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::InvalidInput => StatusCode::BAD_REQUEST,
        ErrorKind::LimitExceeded => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::Unauthorized => StatusCode::UNAUTHORIZED,
        ErrorKind::Forbidden => StatusCode::FORBIDDEN,
        // The model (an upstream server) failed or refused.
        ErrorKind::ProviderFailed => StatusCode::BAD_GATEWAY,
        // A configured processor failed under its `fail` policy: the
        // server's dependency, not the request, is at fault.
        ErrorKind::ProcessorFailed => StatusCode::FAILED_DEPENDENCY,
        ErrorKind::Io => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(kind = %self.kind, "{}", self.message);
        }
        let mut response = (status, Json(ErrorBody::new(self.kind, self.message))).into_response();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            // The rest of the body was not read: the connection cannot carry
            // another request, and the client must not try to reuse it.
            response.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

pub(crate) use agent_host_core::error_kind::error_chain as chain;

impl From<agent_host_engine::EngineError> for ApiError {
    fn from(e: agent_host_engine::EngineError) -> Self {
        ApiError::new(e.kind(), chain(&e))
    }
}

impl From<agent_host_store::StoreError> for ApiError {
    fn from(e: agent_host_store::StoreError) -> Self {
        ApiError::new(e.kind(), chain(&e))
    }
}

impl From<agent_host_core::format::FormatError> for ApiError {
    fn from(e: agent_host_core::format::FormatError) -> Self {
        ApiError::new(e.kind(), format!("body.messages: {}", chain(&e)))
    }
}

impl From<tokio::task::JoinError> for ApiError {
    fn from(e: tokio::task::JoinError) -> Self {
        ApiError::new(
            ErrorKind::Internal,
            format!("a server task failed: {}", chain(&e)),
        )
    }
}

/// A handler's result.
pub type ApiResult<T> = Result<T, ApiError>;
