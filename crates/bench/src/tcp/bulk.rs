//! One bulk TCP stream over the STANAG 5066 IP client: the measurement behind
//! `calibration/isode-tcp-over-5066.csv`. The ship's application writes as fast as its socket
//! takes bytes, the shore's reads everything; the run records how many bytes the shore had read
//! when, and derives the publication's four figures from that trace ([`BulkTcpReport`]).
//!
//! The same hosts (the profile's TCP, its congestion window, Nagle, delayed ACKs and RTO
//! constants) and the same IP link as `smtp-tcp-5066`; only the application differs.

use std::time::Duration;

use skywave_emu::net::Subnet;

use super::host::Host;
use super::link::IpLink;
use super::{
    ADDRESSES, CLIENT_PORT, MAX_ROUNDS, MAX_STEPS, SMTP_PORT, TcpBenchError, dilation,
    host_settings,
};
use crate::model::{Condition, TcpSettings};
use crate::stack;

/// Width of the window the throughput is judged over when the time to reach a share of the
/// final throughput is read off the trace.
pub const RATE_WINDOW: Duration = Duration::from_secs(60);
/// Share of the run, at its end, whose mean throughput is the "final stable throughput".
pub const FINAL_SHARE: f64 = 0.25;

/// What a bulk run yielded.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BulkTcpReport {
    /// (simulated seconds from the start, bytes the shore had read by then), one point per read.
    pub trace: Vec<(f64, u64)>,
    /// Seconds from the start (the first SYN) to the first byte at the shore.
    pub first_data_s: Option<f64>,
    /// Mean throughput over the last [`FINAL_SHARE`] of the run, bit/s.
    pub final_bps: f64,
    /// Minutes from the start until the throughput over the [`RATE_WINDOW`] ending then first
    /// reached 50 % of `final_bps` (`None`: never; never less than the window).
    pub minutes_to_50: Option<f64>,
    /// The same for 80 %.
    pub minutes_to_80: Option<f64>,
    /// TCP segments resent by either host.
    pub tcp_resent_segments: u64,
    /// Datagrams the IP clients dropped while their node had flow off (with a hold).
    pub ip_client_drops: u64,
    /// Seconds from the start to when a host's give-up rule dropped the connection (the
    /// profile's `tcp_retries2`, say), if it did; the stream carries nothing after it.
    pub dropped_at_s: Option<f64>,
}

/// Bytes the shore had read at `t` seconds, from a trace in time order.
fn bytes_at(trace: &[(f64, u64)], t: f64) -> u64 {
    let i = trace.partition_point(|&(s, _)| s <= t);
    if i == 0 { 0 } else { trace[i - 1].1 }
}

/// The publication's figures from a trace of a run of `duration`.
pub fn analyse(trace: Vec<(f64, u64)>, duration: Duration) -> BulkTcpReport {
    let total = duration.as_secs_f64();
    let from = total * (1.0 - FINAL_SHARE);
    let final_bps = (bytes_at(&trace, total).saturating_sub(bytes_at(&trace, from))) as f64 * 8.0
        / (total - from).max(f64::MIN_POSITIVE);
    let w = RATE_WINDOW.as_secs_f64();
    let reach = |share: f64| {
        if final_bps <= 0.0 {
            return None;
        }
        // The throughput over the window ending at each read (and at the window's first end).
        trace
            .iter()
            .map(|&(t, _)| t.max(w))
            .find(|&t| {
                let bits = bytes_at(&trace, t).saturating_sub(bytes_at(&trace, t - w)) as f64;
                bits * 8.0 / w >= share * final_bps
            })
            .map(|t| t / 60.0)
    };
    BulkTcpReport {
        first_data_s: trace.first().map(|&(t, _)| t),
        final_bps,
        minutes_to_50: reach(0.5),
        minutes_to_80: reach(0.8),
        trace,
        tcp_resent_segments: 0,
        ip_client_drops: 0,
        dropped_at_s: None,
    }
}

/// Runs one bulk stream for `duration` over the 5066 IP client under `cond` (tokio clock
/// paused), SIS duplicate filter on.
pub async fn run_bulk_tcp_5066(
    cond: &Condition,
    tcp: &TcpSettings,
    duration: Duration,
) -> Result<BulkTcpReport, TcpBenchError> {
    let cfg = stack::subnet_config(cond).map_err(|e| TcpBenchError::Condition(e.to_string()))?;
    if usize::from(tcp.mtu) > usize::from(cfg.mtu) {
        return Err(TcpBenchError::Settings(format!(
            "IP MTU {} is larger than the {} bytes a U_PDU may have",
            tcp.mtu, cfg.mtu
        )));
    }
    let ttl = stack::ip_ttl(cond).map_err(|e| TcpBenchError::Condition(e.to_string()))?;
    let mut link = IpLink::s5066(Subnet::start(cfg)?, true, tcp.ip_client_hold, ttl).await?;
    let dil = dilation(tcp)?;
    let start = link.now();
    let [s0, s1] = host_settings(tcp, cond.seed, dil)?;
    let t0 = dil.tcp_time_of(start);
    let mut hosts = [Host::new(s0, t0)?, Host::new(s1, t0)?];
    hosts[1].listen(SMTP_PORT)?;
    hosts[0].connect(ADDRESSES[1], SMTP_PORT, CLIENT_PORT)?;
    // What the writer has ready: topped up to a socket buffer's worth before every send.
    let mut out: Vec<u8> = Vec::new();
    let fill = [0x5a_u8; 4096];
    let mut read: u64 = 0;
    let mut trace = Vec::new();
    let mut dropped_at = None;
    for _ in 0..MAX_STEPS {
        let now = link.now();
        let elapsed = now.saturating_sub(start);
        if elapsed >= duration {
            break;
        }
        let tnow = dil.tcp_time_of(now);
        for _ in 0..MAX_ROUNDS {
            hosts[0].poll(tnow);
            hosts[1].poll(tnow);
            while out.len() < 64 * 1024 {
                out.extend_from_slice(&fill);
            }
            let mut progress = hosts[0].send(&mut out, false);
            let n = hosts[1].recv().len();
            if n > 0 {
                read += n as u64;
                trace.push((elapsed.as_secs_f64(), read));
                progress = true;
            }
            if !progress {
                break;
            }
        }
        let mut arrivals = Vec::new();
        for (station, host) in hosts.iter_mut().enumerate() {
            for d in host.take_tx(now) {
                link.send(station, d, &mut arrivals)?;
            }
            if host.gave_up() && dropped_at.is_none() {
                dropped_at = Some(elapsed.as_secs_f64());
            }
        }
        if arrivals.is_empty() {
            let mut next = start + duration;
            for h in &mut hosts {
                if let Some(t) = h.poll_at(tnow) {
                    next = next.min(dil.sim_time_of(t).max(now + Duration::from_millis(1)));
                }
            }
            arrivals = link.wait(next).await;
        }
        for (station, d) in arrivals {
            if let Some(h) = hosts.get_mut(station) {
                h.deliver(d);
            }
        }
    }
    let mut report = analyse(trace, duration);
    report.dropped_at_s = dropped_at;
    report.tcp_resent_segments = hosts.iter_mut().map(|h| h.final_stats().resent).sum();
    if let super::link::LinkCounters::S5066 { overflow, .. } = link.counters() {
        report.ip_client_drops = overflow;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_read_off_the_trace() {
        // 100 B/s from 30 s on, 400 s in all: final 800 bit/s, first data at 30 s; the
        // 60-second window ending at 60 s holds 3100 B (413 bit/s, 50 % reached), the one
        // ending at 77 s 4800 B (640 bit/s, 80 %).
        let trace: Vec<(f64, u64)> = (30u32..=400)
            .map(|t| (f64::from(t), u64::from(t - 29) * 100))
            .collect();
        let r = analyse(trace, Duration::from_secs(400));
        assert_eq!(r.first_data_s, Some(30.0));
        assert!((r.final_bps - 800.0).abs() < 1e-9, "{r:?}");
        assert_eq!(r.minutes_to_50, Some(1.0));
        assert_eq!(r.minutes_to_80, Some(77.0 / 60.0));
        let empty = analyse(Vec::new(), Duration::from_secs(100));
        assert_eq!((empty.first_data_s, empty.minutes_to_50), (None, None));
    }
}
