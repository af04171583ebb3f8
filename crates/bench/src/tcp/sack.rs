//! Selective acknowledgement for skywave's TCP (`tcp/tcb.rs`): the blocks a receiver reports
//! (RFC 2018) and the sender's scoreboard with RFC 6675's loss-recovery rules (IsLost,
//! SetPipe, NextSeg), as a Linux host recovers with `tcp_sack` on, its default.
//!
//! It sits inside one connection: `Tcb` hands it each ACK's cumulative acknowledgement and
//! blocks, and asks it which bytes count as in flight and which hole to resend next. Sans-IO
//! and clock-free. Sequence numbers are compared as offsets from the left edge, so the
//! 2^32 wrap needs no special case.
//!
//! D-SACK (RFC 2883) is here too: the receiver reports a duplicate in the first block, and the
//! sender tells one apart ([`duplicate_reported`]), which the tail-loss probe needs to know
//! whether its resend repaired anything. What Linux does that is not here: its undo of a
//! fast recovery that D-SACKs show needless, RACK's time-based loss marking (Linux 4.18 on;
//! before it, as here, a hole is lost once three segments' worth of data above it is SACKed),
//! forward retransmission of holes not yet lost (RFC 6675's NextSeg rule 3, which Linux later
//! dropped), the rescue retransmission (rule 4, a MAY) and the detection of a receiver that
//! reneges on what it SACKed (skywave's receiver never does).

/// RFC 6675's DupThresh, Linux's default `tcp_reordering`.
pub(super) const DUP_THRESH: u32 = 3;

/// The most blocks one ACK carries: three beside the timestamp option in a TCP header's 40
/// bytes of options (RFC 2018 3), and the most smoltcp's wire format holds.
pub(super) const MAX_BLOCKS: usize = 3;

/// The blocks of one ACK, as `smoltcp::wire::TcpRepr` holds them.
pub(super) type Blocks = [Option<(u32, u32)>; MAX_BLOCKS];

/// `s` as an offset from `edge` (negative: before it).
fn off(s: u32, edge: u32) -> i64 {
    i64::from(s.wrapping_sub(edge) as i32)
}

/// `spans` (offsets `[start, end)`, any order) merged where they overlap or touch, in order.
fn merged(mut spans: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    spans.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(spans.len());
    for (s, e) in spans {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// The sender's record of what the receiver holds above the cumulative acknowledgement, and
/// of the recovery under way.
#[derive(Debug, Clone, Default)]
pub(super) struct Scoreboard {
    /// The cumulative acknowledgement the ranges are above (`snd_una`).
    una: u32,
    /// SACKed ranges `[start, end)` above `una`: disjoint, not touching, in sequence order.
    ranges: Vec<(u32, u32)>,
    /// RFC 6675's HighRxt, one past: every hole below it was resent in this recovery.
    high_rxt: u32,
    /// After a retransmission timeout every hole below this is lost, as Linux's
    /// `tcp_enter_loss` marks each segment not SACKed.
    lost_below: Option<u32>,
}

impl Scoreboard {
    /// A scoreboard whose left edge is `una`.
    pub(super) fn new(una: u32) -> Scoreboard {
        Scoreboard {
            una,
            ranges: Vec::new(),
            high_rxt: una,
            lost_below: None,
        }
    }

    /// Takes an ACK: the cumulative acknowledgement `ack` (one at or before the left edge
    /// moves nothing) and the `blocks` it carried, with `max` one past the highest sequence
    /// number sent. A block is believed only where it lies within `(ack, max]`; the part of one
    /// at or below `ack` (a D-SACK, or a stale block) is dropped. Returns the bytes newly
    /// SACKed, which make an ACK that moves nothing a duplicate (RFC 6675 2).
    pub(super) fn update(&mut self, ack: u32, max: u32, blocks: &Blocks) -> u32 {
        if off(ack, self.una) > 0 {
            self.una = ack;
            if off(self.high_rxt, ack) < 0 {
                self.high_rxt = ack;
            }
            if self.lost_below.is_some_and(|l| off(l, ack) <= 0) {
                self.lost_below = None;
            }
        }
        let una = self.una;
        let limit = off(max, una);
        let mut spans: Vec<(i64, i64)> = self
            .ranges
            .iter()
            .map(|&(s, e)| (off(s, una).max(0), off(e, una)))
            .filter(|&(s, e)| s < e)
            .collect();
        let before: i64 = spans.iter().map(|(s, e)| e - s).sum();
        for &(s, e) in blocks.iter().flatten() {
            let (s, e) = (off(s, una).max(0), off(e, una));
            if s < e && e <= limit {
                spans.push((s, e));
            }
        }
        let merged = merged(spans);
        let after: i64 = merged.iter().map(|(s, e)| e - s).sum();
        let at = |o: i64| una.wrapping_add(o as u32);
        self.ranges = merged.into_iter().map(|(s, e)| (at(s), at(e))).collect();
        u32::try_from(after - before).unwrap_or(0)
    }

    /// The bytes SACKed above the left edge (RFC 6937's "SACKed" total, whose change with the
    /// cumulative acknowledgement's is the data an ACK delivered).
    pub(super) fn sacked(&self) -> u32 {
        self.ranges
            .iter()
            .map(|&(s, e)| e.wrapping_sub(s))
            .fold(0u32, u32::saturating_add)
    }

    /// RFC 6675's IsLost for `seq`: three SACKed ranges above it, or more than two segments'
    /// worth of SACKed bytes; or a timeout marked it.
    pub(super) fn is_lost(&self, seq: u32, mss: u32) -> bool {
        if self.lost_below.is_some_and(|l| off(l, seq) > 0) {
            return true;
        }
        let above = self.ranges.iter().filter(|&&(_, e)| off(e, seq) > 1);
        let (count, bytes) = above.fold((0u32, 0i64), |(n, b), &(s, e)| {
            let s = if off(s, seq) > 0 {
                s
            } else {
                seq.wrapping_add(1)
            };
            (n + 1, b + off(e, s))
        });
        count >= DUP_THRESH || bytes > i64::from((DUP_THRESH - 1) * mss)
    }

    /// The bytes between the left edge and `max` the receiver does not hold, as
    /// `[start, end)` pieces, each cut where a timeout's mark ends so that IsLost is the same
    /// for every byte of a piece (no SACKed byte lies inside one).
    fn holes(&self, max: u32) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        let mut from = self.una;
        let mut push = |s: u32, e: u32| {
            if off(e, s) <= 0 {
                return;
            }
            match self.lost_below {
                Some(l) if off(l, s) > 0 && off(e, l) > 0 => {
                    out.push((s, l));
                    out.push((l, e));
                }
                _ => out.push((s, e)),
            }
        };
        for &(s, e) in &self.ranges {
            push(from, s);
            from = e;
        }
        push(from, max);
        out
    }

    /// RFC 6675's SetPipe: the bytes in the network. Every byte not SACKed and not lost
    /// counts once, and every byte resent in this recovery once more (a resent byte still
    /// marked lost counts for its resend alone).
    pub(super) fn pipe(&self, max: u32, mss: u32) -> u32 {
        let mut pipe = 0i64;
        for (s, e) in self.holes(max) {
            if !self.is_lost(s, mss) {
                pipe += off(e, s);
            }
            let resent_end = if off(self.high_rxt, e) < 0 {
                self.high_rxt
            } else {
                e
            };
            pipe += off(resent_end, s).max(0);
        }
        u32::try_from(pipe).unwrap_or(u32::MAX)
    }

    /// RFC 6675's NextSeg rule 1: the first hole not yet resent in this recovery and lost,
    /// as `[start, end)` (the sender sends at most a segment of it). `None`: no lost hole is
    /// left to resend, so new data goes next (rule 2).
    pub(super) fn next_lost(&self, max: u32, mss: u32) -> Option<(u32, u32)> {
        self.holes(max).into_iter().find_map(|(s, e)| {
            let s = if off(self.high_rxt, s) > 0 {
                self.high_rxt
            } else {
                s
            };
            (off(e, s) > 0 && self.is_lost(s, mss)).then_some((s, e))
        })
    }

    /// `[.., end)` was resent.
    pub(super) fn resent(&mut self, end: u32) {
        if off(end, self.high_rxt) > 0 {
            self.high_rxt = end;
        }
    }

    /// Fast recovery begins (RFC 6675 5 (4.1)): nothing resent yet.
    pub(super) fn enter_recovery(&mut self) {
        self.high_rxt = self.una;
    }

    /// A retransmission timeout: every hole below `max` is lost and resent afresh. SACKed
    /// data stays SACKed, as in Linux and RFC 6675 5.1 (skywave's receiver never reneges).
    pub(super) fn enter_loss(&mut self, max: u32) {
        self.high_rxt = self.una;
        self.lost_below = Some(max);
    }

    /// A timeout's holes are still being repaired.
    pub(super) fn in_loss(&self) -> bool {
        self.lost_below.is_some()
    }

    /// The timeout proved spurious (Eifel): nothing it marked is lost.
    pub(super) fn undo_loss(&mut self) {
        self.lost_below = None;
    }
}

/// The blocks a receiver reports on an ACK (RFC 2018 4, RFC 2883): first a D-SACK block for
/// the `duplicate` data the segment being answered brought, if any; then the out-of-order
/// data it `held` (`(start, length)` each, any order, overlaps allowed) above `rcv_nxt`,
/// merged into contiguous blocks: the one holding the duplicate, if it lies there (RFC 2883
/// 4), the one holding the most recent segment, those holding the other `recent` segment
/// starts (most recent first), then the rest from the highest down; at most [`MAX_BLOCKS`].
pub(super) fn receiver_blocks(
    rcv_nxt: u32,
    held: impl Iterator<Item = (u32, usize)>,
    recent: &[u32],
    duplicate: Option<(u32, u32)>,
) -> Blocks {
    let spans: Vec<(i64, i64)> = held
        .map(|(s, len)| (off(s, rcv_nxt), off(s, rcv_nxt) + len as i64))
        .filter(|&(s, e)| s > 0 && s < e)
        .collect();
    let merged = merged(spans);
    let holding = |seq: u32| {
        let o = off(seq, rcv_nxt);
        merged.iter().position(|&(s, e)| s <= o && o < e)
    };
    let room = MAX_BLOCKS - usize::from(duplicate.is_some());
    let mut order: Vec<usize> = Vec::with_capacity(MAX_BLOCKS);
    let firsts = duplicate.iter().map(|d| d.0).chain(recent.iter().copied());
    for i in firsts.filter_map(holding).chain((0..merged.len()).rev()) {
        if order.len() == room {
            break;
        }
        if !order.contains(&i) {
            order.push(i);
        }
    }
    let at = |o: i64| rcv_nxt.wrapping_add(o as u32);
    let list = duplicate.into_iter().chain(
        order
            .into_iter()
            .map(|i| (at(merged[i].0), at(merged[i].1))),
    );
    let mut blocks: Blocks = [None; MAX_BLOCKS];
    for (slot, b) in blocks.iter_mut().zip(list) {
        *slot = Some(b);
    }
    blocks
}

/// The D-SACK block an ACK carries (RFC 2883 4): its first block, if that lies at or below the
/// cumulative acknowledgement `ack` or within the second block.
pub(super) fn duplicate_reported(blocks: &Blocks, ack: u32) -> Option<(u32, u32)> {
    let (s0, e0) = blocks[0]?;
    let within_second = blocks[1].is_some_and(|(s1, e1)| off(s0, s1) >= 0 && off(e1, e0) >= 0);
    (off(e0, ack) <= 0 || within_second).then_some((s0, e0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 100;

    /// Segments `[i·100, i·100 + 100)` from 1000 on: the `i`-th's range.
    fn seg(i: u32) -> (u32, u32) {
        (1000 + i * MSS, 1000 + (i + 1) * MSS)
    }

    fn blocks(list: &[(u32, u32)]) -> Blocks {
        let mut b = [None; MAX_BLOCKS];
        for (slot, &r) in b.iter_mut().zip(list) {
            *slot = Some(r);
        }
        b
    }

    #[test]
    fn the_scoreboard_merges_trims_and_counts_only_new_bytes() {
        let mut sb = Scoreboard::new(1000);
        let max = 2000;
        assert_eq!(sb.update(1000, max, &blocks(&[seg(2)])), 100);
        // The same block again: a duplicate ACK that brings nothing new.
        assert_eq!(sb.update(1000, max, &blocks(&[seg(2)])), 0);
        // A block touching it merges; one overlapping counts only its new bytes.
        assert_eq!(sb.update(1000, max, &blocks(&[seg(3), (1250, 1450)])), 150);
        assert_eq!(sb.ranges, vec![(1200, 1450)]);
        // Beyond what was sent, reversed, or empty: not believed.
        assert_eq!(
            sb.update(
                1000,
                max,
                &blocks(&[(1900, 2100), (1600, 1500), (1700, 1700)])
            ),
            0
        );
        // The cumulative ACK moves into the range: its part below is trimmed, and that is
        // not new SACKed data.
        assert_eq!(sb.update(1300, max, &blocks(&[])), 0);
        assert_eq!(sb.ranges, vec![(1300, 1450)]);
        // A D-SACK-like block below the edge is dropped, and past the range all is trimmed.
        assert_eq!(sb.update(1500, max, &blocks(&[(1000, 1100)])), 0);
        assert!(sb.ranges.is_empty());
    }

    #[test]
    fn sequence_numbers_wrap() {
        let una = u32::MAX - 149;
        let mut sb = Scoreboard::new(una);
        let max = una.wrapping_add(1000);
        let b = (una.wrapping_add(200), una.wrapping_add(300));
        assert_eq!(sb.update(una, max, &blocks(&[b])), 100);
        assert_eq!(sb.holes(max), vec![(una, b.0), (b.1, max)]);
        assert_eq!(
            receiver_blocks(una, [(b.0, 100usize)].into_iter(), &[b.0], None),
            blocks(&[b])
        );
    }

    /// RFC 6675's rules on one window of ten segments of which 0, 3 and 4 were lost and the
    /// rest SACKed.
    #[test]
    fn is_lost_pipe_and_next_seg_follow_rfc_6675() {
        let mut sb = Scoreboard::new(1000);
        let max = seg(9).1;
        sb.update(1000, max, &blocks(&[seg(1), seg(2)]));
        // Two segments SACKed above segment 0: not yet lost (DupThresh 3).
        assert!(!sb.is_lost(1000, MSS));
        assert_eq!(sb.next_lost(max, MSS), None);
        sb.update(1000, max, &blocks(&[seg(5), seg(1)]));
        // Three segments' worth: 0 is lost, 3-4 are not (one segment above them), nor is the
        // tail beyond the highest SACK.
        assert!(sb.is_lost(1000, MSS));
        assert!(!sb.is_lost(seg(3).0, MSS));
        assert_eq!(sb.next_lost(max, MSS), Some(seg(0)));
        // In flight: holes 3-4 (200) and the tail 6-9 (400); segment 0 is lost.
        assert_eq!(sb.pipe(max, MSS), 600);
        sb.update(1000, max, &blocks(&[seg(6), seg(7)]));
        sb.update(1000, max, &blocks(&[(seg(8).0, max)]));
        sb.enter_recovery();
        assert_eq!(sb.next_lost(max, MSS), Some(seg(0)));
        assert_eq!(sb.pipe(max, MSS), 0);
        // Segment 0 resent: it counts once more, and the next hole is 3-4.
        sb.resent(seg(0).1);
        assert_eq!(sb.pipe(max, MSS), 100);
        assert_eq!(sb.next_lost(max, MSS), Some((seg(3).0, seg(4).1)));
        sb.resent(seg(3).1);
        assert_eq!(sb.next_lost(max, MSS), Some(seg(4)));
        sb.resent(seg(4).1);
        assert_eq!(sb.next_lost(max, MSS), None);
        assert_eq!(sb.pipe(max, MSS), 300);
        // The ACK of the resent 0 moves the edge to 3.
        sb.update(seg(3).0, max, &blocks(&[seg(5)]));
        assert_eq!(sb.pipe(max, MSS), 200);
    }

    #[test]
    fn after_a_timeout_every_hole_is_lost_and_sacked_data_is_not_resent() {
        let mut sb = Scoreboard::new(1000);
        let max = seg(5).1;
        sb.update(1000, max, &blocks(&[seg(2)]));
        sb.enter_loss(max);
        // Holes 0-1 and 3-5 are lost, nothing is in flight.
        assert_eq!(sb.pipe(max, MSS), 0);
        assert_eq!(sb.next_lost(max, MSS), Some((seg(0).0, seg(1).1)));
        sb.resent(seg(1).1);
        assert_eq!(sb.next_lost(max, MSS), Some((seg(3).0, max)));
        assert_eq!(sb.pipe(max, MSS), 200);
        // New data sent after the timeout is not marked.
        let newer = seg(7).1;
        sb.resent(max);
        assert_eq!(sb.next_lost(newer, MSS), None);
        assert_eq!(sb.pipe(newer, MSS), 500 + 200);
        // Shown spurious: nothing is lost any more.
        sb.undo_loss();
        assert!(!sb.is_lost(1000, MSS));
        // Acknowledged past the mark: the loss is over.
        sb.enter_loss(max);
        sb.update(max, newer, &blocks(&[]));
        assert!(sb.ranges.is_empty() && !sb.in_loss());
    }

    #[test]
    fn a_duplicate_is_told_from_its_place() {
        // Below the cumulative ACK, or inside the second block: D-SACK.
        assert_eq!(
            duplicate_reported(&blocks(&[(900, 1000), (1500, 1600)]), 1000),
            Some((900, 1000))
        );
        assert_eq!(
            duplicate_reported(&blocks(&[(1300, 1400), (1200, 1400)]), 1000),
            Some((1300, 1400))
        );
        // An ordinary first block, or none.
        assert_eq!(
            duplicate_reported(&blocks(&[(1500, 1600), (1200, 1400)]), 1000),
            None
        );
        assert_eq!(duplicate_reported(&blocks(&[]), 1000), None);
    }

    #[test]
    fn the_receiver_reports_the_latest_block_first() {
        let held = [
            (1200u32, 100usize),
            (1300, 100),
            (1500, 100),
            (1700, 50),
            (1900, 10),
        ];
        // Five segments in four blocks; the most recent segment (1500) first, then 1200's
        // block, then the highest of the rest.
        let got = receiver_blocks(1000, held.into_iter(), &[1500, 1250], None);
        assert_eq!(got, blocks(&[(1500, 1600), (1200, 1400), (1900, 1910)]));
        // Nothing recent: the highest three.
        let got = receiver_blocks(1000, held.into_iter(), &[], None);
        assert_eq!(got, blocks(&[(1900, 1910), (1700, 1750), (1500, 1600)]));
        // A duplicate first (RFC 2883): below rcv_nxt, then the latest block; one inside a
        // held block, then that block.
        let got = receiver_blocks(1000, held.into_iter(), &[1500], Some((900, 1000)));
        assert_eq!(got, blocks(&[(900, 1000), (1500, 1600), (1900, 1910)]));
        let got = receiver_blocks(1000, held.into_iter(), &[1500], Some((1300, 1400)));
        assert_eq!(got, blocks(&[(1300, 1400), (1200, 1400), (1500, 1600)]));
        // Data at or below rcv_nxt is not out of order.
        assert_eq!(
            receiver_blocks(1300, [(1200, 100)].into_iter(), &[1200], None),
            [None; MAX_BLOCKS]
        );
    }
}
