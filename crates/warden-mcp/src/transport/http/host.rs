//! `Host` validation for `/mcp` (DNS-rebinding protection), before
//! authentication and before rmcp.
//!
//! rmcp's service makes the same check, but logs every refusal at WARN: a
//! client (or an attacker) sending a wrong `Host` in a loop would flood the
//! server's log. Here a refused `Host` is answered 403 and logged at DEBUG,
//! so rmcp only ever sees allowed ones (and the direct path need not check).

use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};

/// The `Host` names `/mcp` answers: lowercase, without brackets or port.
pub(super) struct Hosts(Vec<String>);

impl Hosts {
    pub(super) fn new(hosts: &[String]) -> Self {
        Self(hosts.iter().map(|h| h.to_ascii_lowercase()).collect())
    }

    /// Whether the request names exactly one allowed `Host`.
    fn allow(&self, headers: &HeaderMap) -> bool {
        let mut values = headers.get_all(header::HOST).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return false;
        };
        let Some(authority) = value
            .to_str()
            .ok()
            .and_then(|host| axum::http::uri::Authority::try_from(host).ok())
        else {
            return false;
        };
        let host = authority.host().trim_matches(['[', ']']).to_ascii_lowercase();
        self.0.contains(&host)
    }

    /// The endpoint's first step: a request whose `Host` is not allowed is
    /// answered 403.
    pub(super) fn admit(&self, request: &Request) -> Result<(), super::refusal::Refused> {
        if self.allow(request.headers()) {
            return Ok(());
        }
        tracing::debug!(host = ?request.headers().get(header::HOST), "refused a request with a Host this server does not answer");
        Err(Box::new(super::refusal::refuse(
            StatusCode::FORBIDDEN,
            warden_core::error::codes::FORBIDDEN_HOST,
            "this Host is not served (DNS-rebinding protection); reach the server by its loopback address or \
             WARDEN_PUBLIC_URL's host",
            None,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(hosts: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for host in hosts {
            map.append(header::HOST, host.parse().expect("value"));
        }
        map
    }

    #[test]
    fn only_one_listed_host_passes() {
        let hosts = Hosts::new(&["localhost".into(), "127.0.0.1".into(), "::1".into()]);
        assert!(hosts.allow(&headers(&["127.0.0.1:8080"])));
        assert!(hosts.allow(&headers(&["LOCALHOST"])));
        assert!(hosts.allow(&headers(&["[::1]:80"])));
        assert!(!hosts.allow(&headers(&["evil.example"])));
        assert!(!hosts.allow(&headers(&[])));
        assert!(!hosts.allow(&headers(&["localhost", "evil.example"])));
    }
}
