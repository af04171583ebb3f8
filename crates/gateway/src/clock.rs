//! The gateway's one clock: wall-clock seconds derived from `tokio::time`.
//!
//! The spool keeps unix seconds (arrival, retry times, expiry), and everything that waits uses
//! `tokio::time`. Reading `SystemTime` for the first and sleeping on tokio for the second would
//! split the daemon across two clocks, and in paused virtual time (tests, the demo's simulated
//! radio) a deferred message would never come due. So the gateway reads the wall clock once, at
//! start, and from then on counts tokio time from there: in production the two agree, in
//! virtual time the spool's clock runs with the simulation.

use std::time::SystemTime;

use skywave_spool::unix_seconds;
use tokio::time::Instant;

/// Unix seconds that advance with `tokio::time`.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base_unix: u64,
    base: Instant,
}

impl Clock {
    /// Starts the clock at the current wall-clock time (call inside a tokio runtime).
    pub fn start() -> Self {
        Clock::starting_at(unix_seconds(SystemTime::now()))
    }

    /// Starts the clock at unix second `base_unix` instead of the wall clock (simulations that
    /// must repeat exactly; call inside a tokio runtime).
    pub fn starting_at(base_unix: u64) -> Self {
        Clock {
            base_unix,
            base: Instant::now(),
        }
    }

    /// The current time, unix seconds.
    pub fn unix_now(&self) -> u64 {
        self.base_unix.saturating_add(
            Instant::now()
                .saturating_duration_since(self.base)
                .as_secs(),
        )
    }

    /// The current time, unix seconds with a fraction (for records of short sessions).
    pub fn unix_f64(&self) -> f64 {
        self.base_unix as f64
            + Instant::now()
                .saturating_duration_since(self.base)
                .as_secs_f64()
    }

    /// The current time, unix milliseconds (the sans-IO protocol cores' clock).
    pub fn unix_ms(&self) -> u64 {
        let elapsed = Instant::now()
            .saturating_duration_since(self.base)
            .as_millis();
        self.base_unix
            .saturating_mul(1000)
            .saturating_add(u64::try_from(elapsed).unwrap_or(u64::MAX))
    }

    /// The tokio instant of unix millisecond `t` (now, if it is already past).
    pub fn instant_of_ms(&self, t: u64) -> Instant {
        let ahead = t.saturating_sub(self.unix_ms());
        Instant::now() + std::time::Duration::from_millis(ahead)
    }

    /// The tokio instant at which unix second `t` begins (now, if it is already past).
    pub fn instant_of(&self, t: u64) -> Instant {
        let ahead = t.saturating_sub(self.unix_now());
        Instant::now() + std::time::Duration::from_secs(ahead)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn advances_with_virtual_time() {
        let c = Clock::start();
        let t0 = c.unix_now();
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert_eq!(c.unix_now(), t0 + 3600);
        let at = c.instant_of(t0 + 3660);
        assert_eq!(at - Instant::now(), Duration::from_secs(60));
    }
}
