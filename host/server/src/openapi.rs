//! `GET /openapi.json`: the OpenAPI document, generated from the handlers'
//! annotations and the `api` crate's shapes.

use axum::Json;
use utoipa::OpenApi;

use crate::routes;

/// The API's OpenAPI description.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "agent-host",
        description = "Sessions and context for LLM agents: store, compact, summarize and run turns over HTTP. Every error is `{\"error\": {\"kind\", \"message\"}}`; send `Authorization: Bearer TOKEN` when the server has tokens."
    ),
    paths(
        routes::healthz,
        routes::metrics,
        routes::create_session,
        routes::list_sessions,
        routes::get_session,
        routes::update_session,
        routes::delete_session,
        routes::append_messages,
        routes::get_messages,
        routes::context,
        routes::summarize,
        routes::turn,
        routes::export,
        routes::events,
        crate::memory::add_memory,
        crate::memory::list_memory,
        crate::memory::search_memory,
        crate::memory::get_memory,
        crate::memory::update_memory,
        crate::memory::delete_memory,
        crate::gateway::chat_completions,
        crate::gateway::messages,
        crate::gateway::responses_route,
        crate::gateway::models,
    ),
    components(schemas(agent_host_api::ErrorBody, agent_host_api::ServerEvent)),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The document, as served.
pub(crate) async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

/// The document as JSON text (for tests and tools).
pub fn openapi_json() -> String {
    ApiDoc::openapi()
        .to_pretty_json()
        .expect("the OpenAPI document serializes")
}
