//! Request bodies read at a minimum rate.
//!
//! A request in progress keeps its connection open however quiet it is
//! (see [`super::listener`]), so a client that sends a body one byte at a
//! time would hold a connection, and the request's place in its principal's
//! share, for as long as it liked. Here a POST's body is read before anyone
//! else sees it, against a deadline that grows with what has arrived: the
//! body must have delivered `rate` bytes a second on average after a grace
//! of `grace`. A body that falls behind is answered 408 and its connection
//! closed. The body is then handed on whole, so rmcp and the direct path
//! read it from memory (they buffer it whole anyway).

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::IntoResponse;
use futures_util::StreamExt;

/// How a POST body must arrive.
#[derive(Debug, Clone, Copy)]
pub(super) struct BodyPace {
    /// Time allowed before the rate applies.
    pub(crate) grace: Duration,
    /// Bytes a second on average, after the grace.
    pub(crate) rate: u64,
    /// The largest body read; rmcp refuses larger ones with its own answer.
    pub(crate) cap: usize,
}

impl BodyPace {
    /// When a body that has delivered `received` bytes must have delivered more.
    fn deadline(&self, start: tokio::time::Instant, received: usize) -> tokio::time::Instant {
        let earned = Duration::from_secs_f64(received as f64 / self.rate.max(1) as f64);
        start + self.grace + earned
    }
}

/// Why a body was not read.
enum Unread {
    TooSlow,
    TooLarge,
    Broken,
}

impl BodyPace {
    /// The endpoint's step: reads a POST's body at the minimum rate (see
    /// the module docs) and gives the request back with the body in
    /// memory, or the refusal.
    pub(super) async fn read_request(&self, request: Request) -> Result<Request, super::refusal::Refused> {
        if request.method() != Method::POST {
            return Ok(request);
        }
        let (parts, body) = request.into_parts();
        match read(body, self).await {
            Ok(bytes) => Ok(Request::from_parts(parts, Body::from(bytes))),
            Err(Unread::TooLarge) => Err(refusal(
                StatusCode::PAYLOAD_TOO_LARGE,
                warden_core::error::codes::ARGUMENTS_TOO_LARGE,
                format!(
                    "the request body exceeds {} bytes (WARDEN_MAX_MESSAGE_BYTES); send less, or write large \
                     inputs as artifacts",
                    self.cap
                ),
            )),
            Err(Unread::Broken) => Err(Box::new(StatusCode::BAD_REQUEST.into_response())),
            Err(Unread::TooSlow) => Err(refusal(
                StatusCode::REQUEST_TIMEOUT,
                warden_core::error::codes::BODY_TOO_SLOW,
                format!(
                    "the request body arrived slower than {} bytes a second after {} s \
                     (WARDEN_HTTP_BODY_MIN_RATE); send the body at once",
                    self.rate,
                    self.grace.as_secs()
                ),
            )),
        }
    }
}

async fn read(body: Body, pace: &BodyPace) -> Result<Bytes, Unread> {
    let start = tokio::time::Instant::now();
    let mut stream = body.into_data_stream();
    let mut collected: Vec<u8> = Vec::new();
    let mut first: Option<Bytes> = None;
    loop {
        let deadline = pace.deadline(start, collected.len() + first.as_ref().map_or(0, Bytes::len));
        let chunk = match tokio::time::timeout_at(deadline, stream.next()).await {
            Err(_) => return Err(Unread::TooSlow),
            Ok(None) => break,
            Ok(Some(Err(_))) => return Err(Unread::Broken),
            Ok(Some(Ok(chunk))) => chunk,
        };
        // A body in one chunk (the usual case) is passed on without a copy.
        match first.take() {
            None if collected.is_empty() => first = Some(chunk),
            held => {
                if let Some(held) = held {
                    collected.extend_from_slice(&held);
                }
                collected.extend_from_slice(&chunk);
            }
        }
        let received = collected.len() + first.as_ref().map_or(0, Bytes::len);
        if received > pace.cap {
            return Err(Unread::TooLarge);
        }
    }
    Ok(first.unwrap_or_else(|| Bytes::from(collected)))
}

/// A refusal that also closes the connection: the rest of the body is
/// never read.
fn refusal(status: StatusCode, code: &str, message: String) -> super::refusal::Refused {
    let mut response = super::refusal::refuse(status, code, &message, None);
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    Box::new(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pace() -> BodyPace {
        BodyPace {
            grace: Duration::from_millis(200),
            rate: 1000,
            cap: 1 << 20,
        }
    }

    #[tokio::test]
    async fn a_body_sent_at_once_is_passed_on_whole() {
        let bytes = read(Body::from("{\"a\":1}"), &pace()).await.ok().expect("read");
        assert_eq!(&bytes[..], b"{\"a\":1}");
    }

    #[tokio::test]
    async fn a_trickled_body_is_cut_at_its_deadline() {
        // One byte every 100 ms is 10 bytes/s against a rate of 1,000:
        // after the 200 ms grace the body is behind and is refused.
        let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
        tokio::spawn(async move {
            for _ in 0..100 {
                if sender.send(Ok(Bytes::from_static(b"x"))).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let body = Body::from_stream(tokio_stream_of(receiver));
        let started = std::time::Instant::now();
        assert!(matches!(read(body, &pace()).await, Err(Unread::TooSlow)));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    fn tokio_stream_of(
        mut receiver: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
    ) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
        futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx))
    }
}
