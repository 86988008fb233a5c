//! Waiting for a pipe's next message without sleeping through it.
//!
//! A script's guard call crosses its pipes twice, and a blocking read that
//! finds the pipe empty puts its thread to sleep: the write that answers it
//! must then wake a halted CPU, which in a virtual machine is an exit to
//! the hypervisor and an interrupt back. Measured on the 2-CPU VM this was
//! written on, those wake-ups were most of a door call's 20 µs, with both
//! CPUs half idle. A reader that expects its answer within microseconds
//! therefore asks the kernel whether the pipe has data (a zero-timeout
//! `ppoll`, which the script worker's seccomp filter allows) for a bounded
//! moment first, and only then blocks. The moment is bounded, so a long
//! guard call or a script computing between calls costs that moment's CPU
//! once, and a busy machine never spins longer than that.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::time::TimeSpec;

/// Returns once `pipe` has something to read (data, or its other end
/// closed) or `spin` has passed, whichever comes first; `true` in the first
/// case. Never blocks: the caller's read that follows does, when this
/// returns `false`. A poll that fails (a descriptor that cannot be polled,
/// a filter refusing `ppoll`) ends the wait at once.
pub fn spin_until_readable(pipe: impl AsFd, spin: Duration) -> bool {
    let started = Instant::now();
    let now = TimeSpec::new(0, 0);
    loop {
        let mut fds = [PollFd::new(pipe.as_fd(), PollFlags::POLLIN)];
        match ppoll(&mut fds, Some(now), None) {
            Ok(0) => {}
            Ok(_) => return true,
            Err(_) => return false,
        }
        if started.elapsed() >= spin {
            return false;
        }
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_pipe_with_data_is_readable_at_once_and_an_empty_one_waits_out_the_spin() {
        let (reader, mut writer) = std::io::pipe().expect("pipe");
        let started = Instant::now();
        assert!(!spin_until_readable(&reader, Duration::from_millis(5)));
        assert!(started.elapsed() >= Duration::from_millis(5));
        writer.write_all(b"x\n").expect("write");
        let started = Instant::now();
        assert!(spin_until_readable(&reader, Duration::from_secs(10)));
        assert!(started.elapsed() < Duration::from_secs(1));
        drop(writer);
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(writer);
        assert!(
            spin_until_readable(&reader, Duration::from_secs(10)),
            "a closed pipe is readable (EOF)"
        );
    }
}
