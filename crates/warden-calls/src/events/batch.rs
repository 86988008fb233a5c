//! Gathering event lines on the emitters' side, so a call costs the log
//! one `memcpy` under a short lock instead of a wake-up of the writer.
//!
//! tracing-appender's non-blocking writer hands every `write` to its thread
//! through a channel, and a thread waiting on a channel is woken by each
//! message: two records per guard call were two futex wakes, two context
//! switches and two `write(2)`s, about a tenth of the server's CPU per
//! HTTP call (issue 27's profile). Here records gather in one buffer;
//! a small *flusher* thread hands the buffer to the writer at most once per
//! [`FLUSH_INTERVAL`], and is woken only by the first record after it went
//! idle. The writer thread (and so the file, rotation and the disk's
//! errors) is unchanged.
//!
//! Guarantees kept:
//! - **order**: records reach the writer in the order they were emitted
//!   (every hand-off happens under the buffer's lock);
//! - **bounded**: an emitter that finds [`HANDOFF_BYTES`] gathered hands
//!   them off itself, and the writer's queue holds at most
//!   [`super::EVENT_QUEUE_BATCHES`] hand-offs; when the disk falls behind,
//!   emitters wait, nothing is dropped and memory stays bounded;
//! - **complete on a clean shutdown**: dropping the [`EventsGuard`] hands
//!   off what is gathered, then drains and joins the writer (a record
//!   emitted meanwhile goes straight to the writer).
//!
//! A crash loses at most the last [`FLUSH_INTERVAL`] of records, as it
//! could already lose what the writer had queued.

use std::io::Write as _;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing_appender::non_blocking::{NonBlocking, WorkerGuard};

/// How long a record may wait in the buffer before the flusher hands it to
/// the writer: 5 ms. Under load this is one hand-off per 5 ms instead of
/// one per record; a reader of events.jsonl sees a record this much later.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(5);

/// Bytes an emitter lets gather before it hands them off itself: 64 KiB.
pub const HANDOFF_BYTES: usize = 64 * 1024;

/// The emitters' side of the log: the gathered lines and the writer they go to.
pub(crate) struct Batcher {
    state: Mutex<State>,
    /// Signalled when the buffer goes from empty to not, and at shutdown.
    wake: Condvar,
    writer: NonBlocking,
}

#[derive(Default)]
struct State {
    pending: Vec<u8>,
    /// Set by [`EventsGuard`]'s drop: the flusher is gone, so emitters
    /// hand their records off themselves.
    stopped: bool,
}

impl Batcher {
    /// Starts the flusher thread for `writer`. Keep the guard alive until
    /// shutdown.
    pub(crate) fn start(
        writer: NonBlocking,
        inner: WorkerGuard,
    ) -> std::io::Result<(Arc<Self>, EventsGuard)> {
        let batcher = Arc::new(Self {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            writer,
        });
        let flusher = batcher.clone();
        let thread = std::thread::Builder::new()
            .name("warden-events-flush".into())
            .spawn(move || flusher.flush_loop())?;
        Ok((
            batcher.clone(),
            EventsGuard {
                batcher,
                flusher: Some(thread),
                _writer: inner,
            },
        ))
    }

    /// Adds whole lines. Wakes the flusher only when the buffer was empty.
    pub(crate) fn write(&self, lines: &[u8]) {
        let mut state = self.lock();
        if state.stopped {
            self.hand_off(lines);
            return;
        }
        let was_empty = state.pending.is_empty();
        state.pending.extend_from_slice(lines);
        if state.pending.len() >= HANDOFF_BYTES {
            self.hand_off(&state.pending);
            state.pending.clear();
        } else if was_empty {
            self.wake.notify_one();
        }
    }

    /// Waits for a first record, lets more gather for [`FLUSH_INTERVAL`],
    /// hands them all off; until shutdown, then hands off the rest.
    fn flush_loop(&self) {
        let mut state = self.lock();
        loop {
            while state.pending.is_empty() && !state.stopped {
                state = self.wake.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            if !state.stopped {
                drop(state);
                std::thread::sleep(FLUSH_INTERVAL);
                state = self.lock();
            }
            // Under the lock: an emitter's own hand-off cannot overtake it.
            // The writer takes a copy, so the buffer keeps its capacity.
            self.hand_off(&state.pending);
            state.pending.clear();
            if state.stopped {
                return;
            }
        }
    }

    /// Queues `lines` for the writer thread, waiting while its queue is full.
    fn hand_off(&self, lines: &[u8]) {
        if lines.is_empty() {
            return;
        }
        // A failed write must never fail the call it describes; the writer
        // only fails once its thread is gone.
        let _ = self.writer.clone().write_all(lines);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Keeps the event log running; dropping it hands off every gathered
/// record and waits until the writer has written them.
pub struct EventsGuard {
    batcher: Arc<Batcher>,
    flusher: Option<JoinHandle<()>>,
    /// Dropped after the flusher's last hand-off: drains the writer's queue
    /// and joins its thread. Records emitted after that are lost, as they
    /// were with the writer alone.
    _writer: WorkerGuard,
}

impl Drop for EventsGuard {
    fn drop(&mut self) {
        self.batcher.lock().stopped = true;
        self.batcher.wake.notify_one();
        if let Some(flusher) = self.flusher.take() {
            let _ = flusher.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that records every write it gets, as the writer thread sees them.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<Vec<u8>>>>);

    impl std::io::Write for Recorder {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn batcher(recorder: &Recorder) -> (Arc<Batcher>, EventsGuard) {
        let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
            .lossy(false)
            .buffered_lines_limit(4)
            .finish(recorder.clone());
        Batcher::start(writer, guard).unwrap()
    }

    #[test]
    fn a_burst_reaches_the_writer_in_few_writes_in_order_and_whole_at_shutdown() {
        // 2,000 records from four threads: every one arrives, each thread's in its order,
        // in far fewer writes than records (the point of gathering).
        let recorder = Recorder::default();
        let (events, guard) = batcher(&recorder);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let events = events.clone();
                std::thread::spawn(move || {
                    for n in 0..500 {
                        events.write(format!("{{\"t\":{t},\"n\":{n}}}\n").as_bytes());
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        drop(guard);
        let writes = recorder.0.lock().unwrap().clone();
        let text = String::from_utf8(writes.concat()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2000);
        for t in 0..4 {
            let seen: Vec<u64> = lines
                .iter()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter(|v| v["t"] == t)
                .map(|v| v["n"].as_u64().unwrap())
                .collect();
            assert_eq!(seen, (0..500).collect::<Vec<_>>(), "thread {t}");
        }
        assert!(writes.len() < 200, "{} writes for 2,000 records", writes.len());
    }

    #[test]
    fn a_lone_record_is_written_within_the_flush_interval() {
        // Nothing else comes: the flusher still hands the record off.
        let recorder = Recorder::default();
        let (events, _guard) = batcher(&recorder);
        events.write(b"{\"alone\":true}\n");
        let start = std::time::Instant::now();
        while recorder.0.lock().unwrap().is_empty() {
            assert!(start.elapsed() < Duration::from_secs(5), "never written");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(recorder.0.lock().unwrap().concat(), b"{\"alone\":true}\n");
    }

    #[test]
    fn an_emitter_hands_off_a_full_buffer_itself() {
        // Past HANDOFF_BYTES the emitter hands the buffer off at once: nothing
        // waits for the flusher (which would hold it for FLUSH_INTERVAL first).
        let recorder = Recorder::default();
        let (events, _guard) = batcher(&recorder);
        events.write(&vec![b'x'; HANDOFF_BYTES]);
        assert!(events.lock().pending.is_empty(), "still gathered");
        assert_eq!(recorder_total(&recorder, HANDOFF_BYTES), HANDOFF_BYTES);
    }

    /// Waits up to 5 s until `want` bytes were written; the bytes written.
    fn recorder_total(recorder: &Recorder, want: usize) -> usize {
        let start = std::time::Instant::now();
        loop {
            let total: usize = recorder.0.lock().unwrap().iter().map(Vec::len).sum();
            if total >= want || start.elapsed() > Duration::from_secs(5) {
                return total;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
