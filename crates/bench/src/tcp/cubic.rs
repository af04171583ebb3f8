//! Linux's CUBIC congestion control (RFC 9438; `net/ipv4/tcp_cubic.c`, Linux's default since
//! 2.6.19) with its hybrid slow start (HyStart, Linux 2.6.29 on), as a sans-IO window
//! calculator for skywave's TCP (`tcp/tcb.rs`, [`crate::tcp::profile::Congestion::Cubic`]).
//!
//! It sits beside the Reno growth of `tcb.rs`: the TCB keeps the window, loss detection and
//! recovery (SACK, PRR, the timeout and its undo) and asks this module three things, in
//! segments as Linux counts: how much an ACK grows the window (slow start, then the cubic
//! function `W(t) = C·(t − K)³ + W_max` with Reno's rate as a floor), what the slow-start
//! threshold becomes on a loss (`β = 717/1024` of the window, with fast convergence), and
//! whether HyStart ends slow start early on an RTT sample. Written from RFC 9438, RFC 9406's
//! description of HyStart and the behaviour of Linux's `bictcp_update`, `bictcp_cong_avoid`,
//! `bictcp_recalc_ssthresh`, `bictcp_state`, `bictcp_acked` and `hystart_update` (read for
//! their behaviour, nothing copied).
//!
//! Two generations of the code ([`CubicEra`]) differ in how an ACK is counted:
//! - **Linux 2.6.39 to 4.0** (the `isode-stock` hosts' era): slow start and avoidance count
//!   ACKs, one segment per ACK in slow start (`tcp_slow_start` before 3.10) and one per `cnt`
//!   ACKs in avoidance, `cnt` scaled by the packets-per-ACK ratio CUBIC tracks, so a receiver
//!   that acknowledges every second segment does not halve avoidance's growth below the
//!   fastest (`tcp_cong_avoid_ai` then adds a segment every second ACK: 1.25 times a round
//!   trip behind such a receiver); before the first loss growth is at least 5 % a round trip
//!   (`cnt` at most 20).
//! - **Linux 4.1 on** (`linux`, a current host): both phases count the segments acknowledged,
//!   and avoidance grows at most 1.5 times a round trip (`cnt` at least 2).
//!
//! On a STANAG 5066 link the round trip is seconds, so the cubic term `C·(t + RTT_min)³`
//! (C = 0.4 segments per s³) is tens of segments within one round trip: after a loss the
//! window is back at `W_max` within K = ∛(W_max·(1 − β)/C) seconds (4.2 s for 100 segments),
//! less than a round trip here, and beyond it CUBIC grows at its cap. HyStart's thresholds
//! are milliseconds (an RTT rise of 4-16 ms over the smallest seen ends slow start; a train of
//! ACKs under 2 ms apart for half the smallest RTT too), far below the seconds a 5066
//! transmission spreads the round trips over, so it ends slow start at its low window of 16
//! segments on nearly any link of this kind.
//!
//! After an idle spell, a [`CubicEra::Linux41`] window's epoch moves on by the time nothing was
//! sent (Linux 4.4's `CA_EVENT_TX_START`, [`Cubic::tx_start`]), so the cubic function resumes
//! where it stopped; the 2.6.39-4.0 kernels kept the epoch, and their window jumps by the
//! time spent idle. The slow-start restart after idle is the TCB's (`tcb.rs`), as it is
//! Linux's `tcp_cwnd_restart`, whatever the congestion control.
//!
//! Left out: HyStart's pacing-rate allowance (Linux 5.7 on) and HyStart++ (RFC 9406's limited
//! slow start, not in Linux's CUBIC).

use std::time::Duration;

/// CUBIC's multiplicative decrease, `β_cubic`, over 1024 (`beta`).
const BETA: u32 = 717;
const BETA_SCALE: u32 = 1024;
/// CUBIC's constant C, segments per second cubed (`bic_scale` 41 scaled by 10/1024).
const C: f64 = 41.0 * 10.0 / 1024.0;
/// Reno's growth per ACK counted for the TCP-friendly estimate: one segment per
/// `cwnd · FRIENDLY / 8` counted (`beta_scale`, 8·(1024 + 717) / 3 / (1024 − 717) = 15).
const FRIENDLY: u32 = 8 * (BETA_SCALE + BETA) / 3 / (BETA_SCALE - BETA);
/// HyStart acts from this window, segments (`hystart_low_window`).
const HYSTART_LOW_WINDOW: u32 = 16;
/// RTT samples per round HyStart takes the minimum of (`HYSTART_MIN_SAMPLES`).
const HYSTART_MIN_SAMPLES: u32 = 8;
/// ACKs this close together form a train (`hystart_ack_delta`).
const HYSTART_ACK_DELTA: Duration = Duration::from_millis(2);
/// Bounds of the RTT rise that ends slow start (`HYSTART_DELAY_MIN`, `HYSTART_DELAY_MAX`).
const HYSTART_DELAY_MIN: Duration = Duration::from_millis(4);
const HYSTART_DELAY_MAX: Duration = Duration::from_millis(16);
/// Largest packets-per-ACK ratio tracked (`ACK_RATIO_LIMIT`, 32 in units of 1/16).
const ACK_RATIO_LIMIT: u32 = 32 << 4;
/// Within this time of the last computation the window's target is not recomputed
/// (`HZ / 32`).
const RECOMPUTE: Duration = Duration::from_micros(31_250);

/// Which generation of Linux's CUBIC (and of its Reno, [`super::profile::Congestion::LinuxReno`]):
/// how ACKs are counted and growth is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CubicEra {
    /// Linux 2.6.39 to 4.0: growth counted per ACK, scaled by the packets-per-ACK ratio.
    Linux2639,
    /// Linux 4.1 on: growth counted per segment acknowledged, at most 1.5 times a round trip;
    /// and the epoch moved on after an idle spell ([`Cubic::tx_start`], 4.4 on).
    Linux41,
}

/// One connection's CUBIC state, windows in segments.
#[derive(Debug, Clone)]
pub struct Cubic {
    era: CubicEra,
    /// ACKs (or segments, [`CubicEra::Linux41`]) per segment of growth.
    cnt: u32,
    /// `W_max`: the window before the last reduction (0: no loss yet this epoch family).
    last_max_cwnd: u32,
    /// The window at the last loss.
    loss_cwnd: u32,
    last_cwnd: u32,
    last_time: Option<Duration>,
    /// The cubic function's plateau, `W_max` or the window the epoch began with.
    origin: u32,
    /// Seconds from the epoch's start to the plateau.
    k: f64,
    /// The smallest RTT seen since the last timeout.
    delay_min: Option<Duration>,
    /// Start of the current avoidance epoch (`None`: the next ACK in avoidance starts one).
    epoch_start: Option<Duration>,
    /// ACKs (segments) counted towards the TCP-friendly estimate.
    ack_cnt: u32,
    /// Reno's window over the same epoch.
    tcp_cwnd: u32,
    /// Packets per ACK, in 1/16 ([`CubicEra::Linux2639`]).
    delayed_ack: u32,
    // HyStart.
    found: bool,
    round_start: Duration,
    last_ack: Duration,
    end_seq: u32,
    curr_rtt: Option<Duration>,
    sample_cnt: u32,
}

/// `a` is after `b` in sequence space.
fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

impl Cubic {
    /// A new connection's state (`bictcp_init`): slow start's first round ends at `snd_nxt`.
    pub fn new(era: CubicEra, now: Duration, snd_nxt: u32) -> Cubic {
        let mut c = Cubic {
            era,
            cnt: 0,
            last_max_cwnd: 0,
            loss_cwnd: 0,
            last_cwnd: 0,
            last_time: None,
            origin: 0,
            k: 0.0,
            delay_min: None,
            epoch_start: None,
            ack_cnt: 0,
            tcp_cwnd: 0,
            delayed_ack: 2 << 4,
            found: false,
            round_start: now,
            last_ack: now,
            end_seq: snd_nxt,
            curr_rtt: None,
            sample_cnt: 0,
        };
        c.hystart_reset(now, snd_nxt);
        c
    }

    /// Whether `cwnd` is still in slow start (Linux before 3.10 grows a window equal to
    /// ssthresh by slow start too).
    pub fn in_slow_start(&self, cwnd: u32, ssthresh: u32) -> bool {
        match self.era {
            CubicEra::Linux2639 => cwnd <= ssthresh,
            CubicEra::Linux41 => cwnd < ssthresh,
        }
    }

    fn hystart_reset(&mut self, now: Duration, snd_nxt: u32) {
        self.round_start = now;
        self.last_ack = now;
        self.end_seq = snd_nxt;
        self.curr_rtt = None;
        self.sample_cnt = 0;
    }

    /// An ACK of `acked` new segments with an RTT sample (`bictcp_acked`), while the window is
    /// `cwnd` and the threshold `ssthresh`; `open`: no recovery or loss state. Returns `true`
    /// when HyStart ends slow start here: the caller sets ssthresh to the window.
    pub fn sample(
        &mut self,
        now: Duration,
        rtt: Duration,
        (cwnd, ssthresh): (u32, u32),
        acked: u32,
        open: bool,
    ) -> bool {
        if self.era == CubicEra::Linux2639 && open {
            let ratio = self.delayed_ack - (self.delayed_ack >> 4) + acked;
            self.delayed_ack = ratio.min(ACK_RATIO_LIMIT);
        }
        // Samples right after a reduction would show the queue the reduction is draining.
        if self
            .epoch_start
            .is_some_and(|e| now.saturating_sub(e) < Duration::from_secs(1))
        {
            return false;
        }
        let rtt = rtt.max(Duration::from_millis(1));
        let delay_min = match self.delay_min {
            Some(d) if d <= rtt => d,
            _ => {
                self.delay_min = Some(rtt);
                rtt
            }
        };
        if self.found || !self.in_slow_start(cwnd, ssthresh) || cwnd < HYSTART_LOW_WINDOW {
            return false;
        }
        // The ACK train: ACKs closely spaced for longer than half the smallest RTT.
        if now.saturating_sub(self.last_ack) <= HYSTART_ACK_DELTA {
            self.last_ack = now;
            if now.saturating_sub(self.round_start) > delay_min / 2 {
                self.found = true;
            }
        }
        // The delay: the round's smallest RTT (of its first eight) above the smallest seen.
        if self.sample_cnt < HYSTART_MIN_SAMPLES {
            self.curr_rtt = Some(self.curr_rtt.map_or(rtt, |c| c.min(rtt)));
            self.sample_cnt += 1;
        } else if let Some(curr) = self.curr_rtt {
            let thresh = (delay_min / 16).clamp(HYSTART_DELAY_MIN, HYSTART_DELAY_MAX);
            if curr > delay_min + thresh {
                self.found = true;
            }
        }
        self.found
    }

    /// The window after an ACK of `acked` new segments in the open state (`bictcp_cong_avoid`):
    /// slow start up to `ssthresh`, then the cubic function. `cwnd_cnt` is the TCB's count
    /// towards the next segment (`snd_cwnd_cnt`).
    pub fn grow(
        &mut self,
        now: Duration,
        (ack, snd_nxt): (u32, u32),
        (cwnd, ssthresh): (u32, u32),
        acked: u32,
        cwnd_cnt: &mut u32,
    ) -> u32 {
        let mut cwnd = cwnd.max(1);
        let mut acked = acked;
        if self.in_slow_start(cwnd, ssthresh) {
            if after(ack, self.end_seq) {
                self.hystart_reset(now, snd_nxt);
            }
            match self.era {
                // One segment per ACK, whatever it acknowledges.
                CubicEra::Linux2639 => return cwnd.saturating_add(1),
                CubicEra::Linux41 => {
                    let grown = cwnd.saturating_add(acked).min(ssthresh);
                    acked -= grown - cwnd;
                    cwnd = grown;
                    if acked == 0 {
                        return cwnd;
                    }
                }
            }
        }
        self.update(now, cwnd, acked);
        match self.era {
            CubicEra::Linux2639 => {
                // `tcp_cong_avoid_ai` before 4.1: one count per ACK.
                if *cwnd_cnt >= self.cnt {
                    *cwnd_cnt = 0;
                    cwnd.saturating_add(1)
                } else {
                    *cwnd_cnt += 1;
                    cwnd
                }
            }
            CubicEra::Linux41 => {
                if *cwnd_cnt >= self.cnt {
                    *cwnd_cnt = 0;
                    cwnd = cwnd.saturating_add(1);
                }
                *cwnd_cnt = cwnd_cnt.saturating_add(acked);
                if *cwnd_cnt >= self.cnt {
                    let steps = *cwnd_cnt / self.cnt;
                    *cwnd_cnt -= steps * self.cnt;
                    cwnd = cwnd.saturating_add(steps);
                }
                cwnd
            }
        }
    }

    /// `bictcp_update`: the count of ACKs (segments) per segment of growth towards the cubic
    /// function's value one smallest RTT ahead, Reno's rate as a floor.
    fn update(&mut self, now: Duration, cwnd: u32, acked: u32) {
        let counted = match self.era {
            CubicEra::Linux2639 => 1,
            CubicEra::Linux41 => acked.max(1),
        };
        self.ack_cnt = self.ack_cnt.saturating_add(counted);
        let recent = self
            .last_time
            .is_some_and(|t| now.saturating_sub(t) <= RECOMPUTE);
        if self.last_cwnd == cwnd && recent {
            return;
        }
        self.last_cwnd = cwnd;
        self.last_time = Some(now);
        let epoch = match self.epoch_start {
            Some(e) => e,
            None => {
                self.epoch_start = Some(now);
                self.ack_cnt = counted;
                self.tcp_cwnd = cwnd;
                if self.last_max_cwnd <= cwnd {
                    self.k = 0.0;
                    self.origin = cwnd;
                } else {
                    self.k = (f64::from(self.last_max_cwnd - cwnd) / C).cbrt();
                    self.origin = self.last_max_cwnd;
                }
                now
            }
        };
        let t = (now.saturating_sub(epoch) + self.delay_min.unwrap_or_default()).as_secs_f64();
        let offs = (t - self.k).abs();
        // Bounded far above any window a 16-bit receive window lets a host use.
        let delta = (C * offs * offs * offs).min(f64::from(u32::MAX / 4)) as u32;
        let target = if t < self.k {
            self.origin.saturating_sub(delta)
        } else {
            self.origin.saturating_add(delta)
        };
        self.cnt = if target > cwnd {
            cwnd / (target - cwnd)
        } else {
            cwnd.saturating_mul(100)
        };
        // Before any loss, at least 5 % a round trip (Linux 2.6.39 on).
        if self.last_max_cwnd == 0 {
            self.cnt = self.cnt.min(20);
        }
        // Never slower than Reno over the same epoch (the TCP-friendly region).
        let per_segment = (cwnd.saturating_mul(FRIENDLY) >> 3).max(1);
        while self.ack_cnt > per_segment {
            self.ack_cnt -= per_segment;
            self.tcp_cwnd += 1;
        }
        if self.tcp_cwnd > cwnd {
            let max_cnt = cwnd / (self.tcp_cwnd - cwnd);
            self.cnt = self.cnt.min(max_cnt);
        }
        self.cnt = match self.era {
            CubicEra::Linux2639 => ((self.cnt << 4) / self.delayed_ack.max(1)).max(1),
            CubicEra::Linux41 => self.cnt.max(2),
        };
    }

    /// The slow-start threshold after a loss seen with the window at `cwnd`
    /// (`bictcp_recalc_ssthresh`): `β·cwnd`, at least two segments. Ends the epoch, and
    /// remembers `W_max`, lowered further when the window had not regained the last one (fast
    /// convergence).
    pub fn loss(&mut self, cwnd: u32) -> u32 {
        self.epoch_start = None;
        self.last_max_cwnd = if cwnd < self.last_max_cwnd {
            cwnd.saturating_mul(BETA_SCALE + BETA) / (2 * BETA_SCALE)
        } else {
            cwnd
        };
        self.loss_cwnd = cwnd;
        (cwnd.saturating_mul(BETA) / BETA_SCALE).max(2)
    }

    /// A retransmission timeout (Linux's loss state, `bictcp_state`): everything but the
    /// window at the last loss starts afresh, slow start's rounds from `snd_nxt`.
    pub fn timeout(&mut self, now: Duration, snd_nxt: u32) {
        let (era, loss_cwnd) = (self.era, self.loss_cwnd);
        *self = Cubic::new(era, now, snd_nxt);
        self.loss_cwnd = loss_cwnd;
    }

    /// Data goes with nothing in flight, `idle` after the last data sent (`CA_EVENT_TX_START`,
    /// `bictcp_cwnd_event`, Linux 4.4 on, so [`CubicEra::Linux41`] only): the host was
    /// application-limited, so the epoch moves on by that time, never past `now`.
    pub fn tx_start(&mut self, now: Duration, idle: Duration) {
        if self.era != CubicEra::Linux41 || idle.is_zero() {
            return;
        }
        if let Some(e) = self.epoch_start.as_mut() {
            *e = e.saturating_add(idle).min(now);
        }
    }

    /// The window an undone reduction returns to at least (`bictcp_undo_cwnd`).
    pub fn undo_cwnd(&self, cwnd: u32) -> u32 {
        cwnd.max(self.loss_cwnd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    /// ACKs every `gap` for `rounds` round trips of `rtt`, each acknowledging `per_ack`
    /// segments of a window that is always in use; the window at each round's end.
    fn avoidance(
        era: CubicEra,
        start: u32,
        last_max: Option<u32>,
        rtt: Duration,
        per_ack: u32,
        rounds: usize,
    ) -> Vec<u32> {
        let mut c = Cubic::new(era, Duration::ZERO, 0);
        c.delay_min = Some(rtt);
        let mut cwnd = start;
        if let Some(w) = last_max {
            c.last_max_cwnd = w;
        }
        let (mut cnt, mut now, mut seq) = (0u32, Duration::ZERO, 0u32);
        let mut out = Vec::new();
        for _ in 0..rounds {
            let acks = (cwnd / per_ack).max(1);
            let gap = rtt / acks;
            for _ in 0..acks {
                now += gap;
                seq = seq.wrapping_add(per_ack);
                c.sample(now, rtt, (cwnd, 1), per_ack, true);
                cwnd = c.grow(now, (seq, seq), (cwnd, 1), per_ack, &mut cnt);
            }
            out.push(cwnd);
        }
        out
    }

    #[test]
    fn a_loss_keeps_seven_tenths_and_remembers_the_window() {
        let mut c = Cubic::new(CubicEra::Linux41, Duration::ZERO, 0);
        assert_eq!(c.loss(100), 70);
        assert_eq!(c.last_max_cwnd, 100);
        // A second loss below the first W_max lowers it further (fast convergence).
        assert_eq!(c.loss(80), 56);
        assert_eq!(c.last_max_cwnd, 80 * 1741 / 2048);
        assert_eq!(c.loss(2), 2);
        assert_eq!(c.undo_cwnd(10), 10);
        assert_eq!(Cubic::new(CubicEra::Linux41, Duration::ZERO, 0).loss(1), 2);
    }

    #[test]
    fn the_plateau_is_reached_after_k_seconds() {
        // W_max 100, window 70: K = ∛(30 / 0.4) = 4.2 s. On a 0.1 s path the window creeps
        // up to the plateau over K and grows past it only after.
        let w = avoidance(
            CubicEra::Linux41,
            70,
            Some(100),
            Duration::from_millis(100),
            1,
            80,
        );
        let at = |secs: f64| w[(secs * 10.0) as usize - 1];
        assert!(at(1.0) > 80 && at(1.0) < 92, "{w:?}");
        assert!((97..=101).contains(&at(4.2)), "{w:?}");
        assert!(at(5.0) <= 102, "{w:?}");
        assert!(at(8.0) > 110, "{w:?}");
    }

    #[test]
    fn on_a_long_round_trip_growth_is_capped_at_half_a_window_per_round() {
        // A 5066 round trip of 10 s: C·(t + 10)³ is 400 segments from the start, so only the
        // caps bind. Linux 4.1 on: 1.5 times a round trip.
        let w = avoidance(CubicEra::Linux41, 20, Some(20), 10 * S, 1, 4);
        assert_eq!(w, vec![30, 45, 67, 101]);
        // Before 4.1 each ACK counts once whatever it acknowledges, and `tcp_cong_avoid_ai`
        // adds a segment every second count at the fastest (`cnt` 1): with every second
        // segment acknowledged, 1.25 times a round trip.
        let w = avoidance(CubicEra::Linux2639, 20, Some(20), 10 * S, 2, 4);
        assert_eq!(w, vec![25, 31, 38, 48]);
    }

    #[test]
    fn before_any_loss_growth_is_at_least_five_percent_a_round() {
        // A short path where the cubic term is small: the 5 % floor (cnt at most 20) binds
        // until Reno's rate or the cubic term take over.
        let w = avoidance(
            CubicEra::Linux41,
            100,
            None,
            Duration::from_millis(10),
            1,
            10,
        );
        assert!((104..=106).contains(&w[0]), "{w:?}");
        assert!(w[9] >= 160, "{w:?}");
    }

    #[test]
    fn hystart_ends_slow_start_when_the_round_trip_rises() {
        let mut c = Cubic::new(CubicEra::Linux41, Duration::ZERO, 0);
        let rtt = |ms| Duration::from_millis(ms);
        // Below its low window HyStart only learns the smallest RTT.
        assert!(!c.sample(S, rtt(2000), (10, u32::MAX), 1, true));
        assert_eq!(c.delay_min, Some(rtt(2000)));
        // A new round at 16 segments, eight samples 10 ms up (under the 16 ms bound) ...
        c.hystart_reset(2 * S, 100);
        for i in 0..9 {
            assert!(!c.sample(2 * S + i * 100 * rtt(1), rtt(2010), (16, u32::MAX), 1, true));
        }
        // ... and a round whose fastest of its first eight is 20 ms up ends slow start.
        c.hystart_reset(5 * S, 200);
        let found: Vec<bool> = (0..9)
            .map(|i| c.sample(5 * S + i * 100 * rtt(1), rtt(2020), (20, u32::MAX), 1, true))
            .collect();
        assert_eq!(found, [vec![false; 8], vec![true]].concat());
        // Out of slow start it no longer looks.
        let mut d = Cubic::new(CubicEra::Linux41, Duration::ZERO, 0);
        d.delay_min = Some(rtt(10));
        for i in 0..20 {
            assert!(!d.sample(S + i * rtt(1), rtt(500), (40, 30), 1, true));
        }
    }

    #[test]
    fn an_ack_train_longer_than_half_the_round_trip_ends_slow_start() {
        let mut c = Cubic::new(CubicEra::Linux2639, Duration::ZERO, 0);
        c.delay_min = Some(Duration::from_millis(40));
        c.hystart_reset(S, 0);
        // ACKs 1 ms apart at the smallest RTT: the train passes 20 ms at the 21st.
        let found = (1..=21)
            .map(|i| {
                c.sample(
                    S + Duration::from_millis(i),
                    Duration::from_millis(40),
                    (32, u32::MAX),
                    2,
                    true,
                )
            })
            .position(|f| f);
        assert_eq!(found, Some(20));
    }

    #[test]
    fn slow_start_counts_acks_before_linux_4_1_and_segments_after() {
        let mut cnt = 0;
        let mut old = Cubic::new(CubicEra::Linux2639, Duration::ZERO, 0);
        assert_eq!(old.grow(S, (10, 20), (10, 100), 2, &mut cnt), 11);
        // A window equal to ssthresh is still in slow start there.
        assert_eq!(old.grow(S, (10, 20), (100, 100), 2, &mut cnt), 101);
        let mut new = Cubic::new(CubicEra::Linux41, Duration::ZERO, 0);
        assert_eq!(new.grow(S, (10, 20), (10, 100), 2, &mut cnt), 12);
        // Up to ssthresh, the rest counted towards avoidance.
        assert_eq!(new.grow(S, (10, 20), (99, 100), 2, &mut cnt), 100);
    }

    #[test]
    fn an_idle_spell_moves_a_current_kernels_epoch_on() {
        // An epoch begun at 10 s (a window of 50 after a loss at 100); data goes again at 40 s
        // after 25 s without any: a current kernel's epoch moves on by the 25 s, never past
        // the moment itself; 2.6.39-4.0 kept it where it was.
        let epoch_after = |era: CubicEra, idle: Duration| {
            let mut c = Cubic::new(era, Duration::ZERO, 0);
            c.loss(100);
            let mut cnt = 0;
            c.grow(10 * S, (1, 1), (50, 40), 1, &mut cnt);
            c.tx_start(40 * S, idle);
            c.epoch_start
        };
        assert_eq!(epoch_after(CubicEra::Linux41, 25 * S), Some(35 * S));
        assert_eq!(epoch_after(CubicEra::Linux41, 35 * S), Some(40 * S));
        assert_eq!(epoch_after(CubicEra::Linux2639, 25 * S), Some(10 * S));
        // No epoch yet (slow start): nothing to move.
        let mut c = Cubic::new(CubicEra::Linux41, Duration::ZERO, 0);
        c.tx_start(40 * S, 25 * S);
        assert_eq!(c.epoch_start, None);
    }

    #[test]
    fn a_timeout_starts_afresh_but_remembers_the_last_loss() {
        let mut c = Cubic::new(CubicEra::Linux41, Duration::ZERO, 0);
        c.loss(50);
        c.delay_min = Some(S);
        c.found = true;
        c.timeout(10 * S, 777);
        assert_eq!(
            (c.last_max_cwnd, c.delay_min, c.found, c.end_seq),
            (0, None, false, 777)
        );
        assert_eq!(c.undo_cwnd(10), 50);
    }
}
