//! A command's parameters: the query string and, for a POST, the form
//! body, decoded once; each name given once at most.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{bad_request, failure};

/// The parameters of one request, from the query and the form body
/// together.
#[derive(Debug, Default)]
pub(crate) struct Params(HashMap<String, String>);

/// How long a handler waits for the request's body: a request extension
/// the server sets from its limits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BodyReadTimeout(pub(crate) Duration);

impl Params {
    /// The parameter, if given and not empty (Sentinel treats an empty
    /// value as absent).
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// Adds the pairs of `encoded`; a name already given (here or before)
    /// is refused: which of two `type`s or `data`s was meant is a guess.
    fn extend(&mut self, encoded: &[u8]) -> Result<(), String> {
        for (name, value) in form_urlencoded::parse(encoded) {
            match self.0.entry(name.into_owned()) {
                Entry::Occupied(given) => {
                    return Err(format!(
                        "the parameter {} is given more than once",
                        given.key()
                    ));
                }
                Entry::Vacant(slot) => {
                    slot.insert(value.into_owned());
                }
            }
        }
        Ok(())
    }
}

impl<S: Send + Sync> FromRequest<S> for Params {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let mut params = Params::default();
        if let Some(query) = request.uri().query() {
            params.extend(query.as_bytes()).map_err(bad_request)?;
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
        let deadline = request.extensions().get::<BodyReadTimeout>().map(|t| t.0);
        // Reading the body goes through the body limit; past it, 413.
        let read = Bytes::from_request(request, state);
        let body = match deadline {
            Some(deadline) => tokio::time::timeout(deadline, read).await.map_err(|_| {
                failure(
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "the request's body did not arrive within {deadline:?} (CommandCenter::body_read_timeout)"
                    ),
                )
            })?,
            None => read.await,
        }
        .map_err(IntoResponse::into_response)?;
        if form {
            params.extend(&body).map_err(bad_request)?;
        }
        Ok(params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_given_twice_is_refused_wherever_it_comes_from() {
        let mut params = Params::default();
        assert!(params.extend(b"type=flow&data=%5B%5D").is_ok());
        assert_eq!(params.get("type"), Some("flow"));
        let twice = params.extend(b"type=degrade").unwrap_err();
        assert!(twice.contains("type is given more than once"), "{twice}");
        let mut params = Params::default();
        let inside = params.extend(b"data=1&data=2").unwrap_err();
        assert!(inside.contains("data"), "{inside}");
    }
}
