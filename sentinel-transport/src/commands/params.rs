//! A command's parameters: the query string and, for a POST, the form
//! body, decoded once.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header;
use axum::response::{IntoResponse, Response};

/// The parameters of one request; a body parameter wins over a query one of
/// the same name.
#[derive(Debug, Default)]
pub(crate) struct Params(HashMap<String, String>);

impl Params {
    /// The parameter, if given and not empty (Sentinel treats an empty
    /// value as absent).
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn extend(&mut self, encoded: &[u8]) {
        self.0.extend(form_urlencoded::parse(encoded).into_owned());
    }
}

impl<S: Send + Sync> FromRequest<S> for Params {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let mut params = Params::default();
        if let Some(query) = request.uri().query() {
            params.extend(query.as_bytes());
        }
        // The dashboard posts forms, with a Content-Type or (from 1.7.1)
        // without one; a body of another type is not parameters.
        let form = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_none_or(|t| {
                t.trim().is_empty() || t.starts_with("application/x-www-form-urlencoded")
            });
        // Reading the body goes through the body limit; past it, 413.
        let body = Bytes::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        if form {
            params.extend(&body);
        }
        Ok(params)
    }
}
