//! object_store's HTTP client, on hyper and rustls with *ring*.
//!
//! object_store's `aws` feature brings reqwest with rustls on aws-lc-rs: a
//! second TLS crypto stack beside the *ring* one every other client here
//! uses (ureq for the model and JWKS), a CMake build of C, and a static
//! constructor that ran in every process of the binary, workers included.
//! With `aws-base` + `ring` and this connector, the tree has one stack.
//!
//! What it keeps of object_store's client: HTTPS with the platform's root
//! certificates (plain `http://` only when `AWS_ALLOW_HTTP` allows it), the
//! connect timeout, and a deadline on each request's response headers; the
//! body then streams, and object_store's retries wrap every request.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector as TcpConnector;
use hyper_util::rt::TokioExecutor;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpRequestBody, HttpResponse,
    HttpResponseBody, HttpService,
};
use object_store::{ClientConfigKey, ClientOptions};

/// Builds each store's client; holds nothing itself.
#[derive(Debug, Default)]
pub(super) struct RingConnector {
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
}

impl HttpConnector for RingConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let generic = |source: Box<dyn std::error::Error + Send + Sync>| object_store::Error::Generic {
            store: "S3",
            source,
        };
        let allow_http = match options.get_config_value(&ClientConfigKey::AllowHttp) {
            None => false,
            Some(value) => flag(&value).ok_or_else(|| {
                generic(format!("AWS_ALLOW_HTTP must be true or false, not '{value}'").into())
            })?,
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| generic(Box::new(e)))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut tcp = TcpConnector::new();
        tcp.enforce_http(false);
        tcp.set_connect_timeout(Some(self.connect_timeout));
        let builder = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls);
        let https = if allow_http {
            builder.https_or_http()
        } else {
            builder.https_only()
        }
        .enable_http1()
        .wrap_connector(tcp);
        let client = Client::builder(TokioExecutor::new()).build(https);
        Ok(HttpClient::new(Service {
            client,
            timeout: self.request_timeout,
        }))
    }
}

/// A boolean setting such as `AWS_ALLOW_HTTP` as object_store reads one;
/// `None` for anything else.
pub(super) fn flag(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" | "y" => Some(true),
        "0" | "false" | "off" | "no" | "n" => Some(false),
        _ => None,
    }
}

type Https = hyper_rustls::HttpsConnector<TcpConnector>;

#[derive(Debug)]
struct Service {
    client: Client<Https, HttpRequestBody>,
    timeout: Duration,
}

#[async_trait::async_trait]
impl HttpService for Service {
    async fn call(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        let response = tokio::time::timeout(self.timeout, self.client.request(request))
            .await
            .map_err(|elapsed| HttpError::new(HttpErrorKind::Timeout, elapsed))?
            .map_err(|error| {
                let kind = if error.is_connect() {
                    HttpErrorKind::Connect
                } else {
                    HttpErrorKind::Request
                };
                HttpError::new(kind, error)
            })?;
        Ok(response.map(|body| {
            HttpResponseBody::new(body.map_err(|error| HttpError::new(HttpErrorKind::Interrupted, error)))
        }))
    }
}
