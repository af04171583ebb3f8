//! Fuzz skywave's own TCP (`skywave_bench::tcp::tcb`): a connected endpoint is fed well-formed
//! TCP/IP datagrams built from the input (any flags, sequence and acknowledgement numbers near
//! or far from the connection's, any window, SACK offers and blocks, payloads, checksums right
//! so the state machine sees them), interleaved with the application writing, reading and closing and with time
//! passing. No input may panic or hang it; what it sends must parse as TCP/IP from its own
//! address; it never hands the application more bytes than arrived in segments, and its timers
//! never lie in the past.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use skywave_bench::model::{Congestion, CubicEra, Nagle, RttEstimator, WindowRules};
use skywave_bench::tcp::tcb::{
    CwndLimited, IdleRestart, RcvEra, RenoRules, RtoTimers, SndEra, Tcb, TcbConfig, datagram,
};
use smoltcp::wire::{IpProtocol, Ipv4Packet, TcpControl, TcpPacket, TcpRepr, TcpSeqNumber};

const US: [u8; 4] = [10, 0, 0, 2];
const PEER: [u8; 4] = [10, 0, 0, 1];
const ISS: u32 = 0xFFFF_FF00;
const PEER_ISS: u32 = 7;

fuzz_target!(|data: &[u8]| {
    let Some((&setup, mut rest)) = data.split_first() else {
        return;
    };
    let mut tcb = Tcb::new(TcbConfig {
        address: US,
        mss: [48, 216, 1460][usize::from(setup % 3)],
        rx_buffer: [64, 1024, 70_000][usize::from(setup / 3 % 3)],
        rcv_tuning: match setup % 10 {
            0 => Some(RcvEra::Linux34),
            5 => Some(RcvEra::Linux420),
            _ => None,
        },
        tx_buffer: 4096,
        snd_tuning: match setup % 7 {
            1 => Some(SndEra::Linux3),
            4 => Some(SndEra::Linux316),
            _ => None,
        },
        iss: ISS,
        rto: RtoTimers {
            initial: Duration::from_secs(1),
            min: Duration::from_millis(200),
            max: Duration::from_secs(60),
        },
        rtt_estimator: match (setup & 0x10 == 0, setup & 2 == 0) {
            (true, _) => RttEstimator::Rfc6298,
            (false, true) => RttEstimator::Jnos,
            (false, false) => RttEstimator::Linux,
        },
        congestion: {
            let era = if setup & 2 == 0 {
                CubicEra::Linux2639
            } else {
                CubicEra::Linux41
            };
            match setup >> 5 & 3 {
                0 => Congestion::Reno { initial: 1 },
                1 => Congestion::Segments { initial: 10 },
                2 if setup & 1 == 0 => Congestion::LinuxReno { initial: 10, era },
                2 => Congestion::Cubic { initial: 10, era },
                _ => Congestion::Unlimited,
            }
        },
        nagle: [Nagle::Off, Nagle::Classic, Nagle::Minshall][usize::from(setup >> 7)],
        ack_delay: (setup & 8 != 0).then_some(Duration::from_millis(40)),
        timestamps: setup & 4 != 0,
        spurious_syn_undo: setup & 2 != 0,
        syn_linear_timeouts: if setup & 1 != 0 { 4 } else { 0 },
        sack: setup % 3 != 1,
        tlp: setup & 0x20 != 0,
        linux_acks: setup & 0x40 != 0,
        window_rules: if setup.count_ones() % 2 == 0 {
            WindowRules::Jnos
        } else {
            WindowRules::Linux
        },
        initial_ssthresh: (setup & 1 != 0).then_some(2),
        idle_restart: match setup % 7 {
            0 => Some(IdleRestart::OnSend),
            3 => Some(IdleRestart::OnQueue),
            5 => Some(IdleRestart::Jnos),
            _ => None,
        },
        cwnd_limited: [
            CwndLimited::Segment,
            CwndLimited::Linux3,
            CwndLimited::Linux518,
        ][usize::from(setup / 9 % 3)],
        reno: if setup / 27 % 2 == 0 {
            RenoRules::NewReno
        } else {
            RenoRules::Ka9q
        },
    });
    if tcb.listen(25).is_err() {
        return;
    }
    let mut now = Duration::ZERO;
    let mut arrived = 0usize;
    let mut read = 0usize;
    // Each step: op, flags, seq offset (2), ack offset (2), window (2), payload length.
    while let Some((step, tail)) = rest.split_first_chunk::<9>() {
        rest = tail;
        let [op, flags, s0, s1, a0, a1, w0, w1, len] = *step;
        let seq = PEER_ISS.wrapping_add(u32::from(u16::from_le_bytes([s0, s1])));
        let ack = ISS.wrapping_add(u32::from(u16::from_le_bytes([a0, a1])));
        let payload = vec![0x5a; usize::from(len)];
        let control = [
            TcpControl::Syn,
            TcpControl::None,
            TcpControl::Psh,
            TcpControl::Fin,
            TcpControl::Rst,
        ][usize::from(flags % 5)];
        let repr = TcpRepr {
            src_port: 1025,
            dst_port: 25,
            control,
            seq_number: TcpSeqNumber(seq as i32),
            ack_number: (flags & 0x80 != 0).then_some(TcpSeqNumber(ack as i32)),
            window_len: u16::from_le_bytes([w0, w1]),
            window_scale: (flags & 0x40 != 0).then_some(flags & 0x0f),
            max_seg_size: (flags & 0x20 != 0).then_some(u16::from(len)),
            // The SYN offers SACK, and later segments carry a block near the ACK, any width.
            sack_permitted: flags & 0x10 != 0 && control == TcpControl::Syn,
            sack_ranges: [
                (flags & 0x10 != 0 && control != TcpControl::Syn).then(|| {
                    let left = ack.wrapping_add(u32::from(len));
                    (left, left.wrapping_add(u32::from(w0) * 8))
                }),
                None,
                None,
            ],
            timestamp: None,
            payload: if control == TcpControl::Syn {
                &[]
            } else {
                &payload
            },
        };
        arrived += repr.payload.len();
        tcb.deliver(now, &datagram(PEER, US, &repr));
        match op % 8 {
            0 => {
                tcb.send_slice(&payload);
            }
            1 => read += tcb.recv().len(),
            2 => tcb.close(),
            3 => now += Duration::from_millis(u64::from(op) * 97),
            4 => {
                if let Some(t) = tcb.poll_at() {
                    now = now.max(t);
                }
            }
            _ => {}
        }
        tcb.poll(now);
        // A poll runs every timer due, so the next one is later.
        assert!(
            tcb.poll_at().is_none_or(|t| t > now),
            "a timer due after a poll"
        );
        for d in tcb.take_tx() {
            let ip = Ipv4Packet::new_checked(&d[..]).expect("an IPv4 datagram");
            assert_eq!(ip.src_addr().octets(), US);
            assert_eq!(ip.next_header(), IpProtocol::Tcp);
            TcpPacket::new_checked(ip.payload()).expect("a TCP segment");
        }
    }
    read += tcb.recv().len();
    assert!(
        read <= arrived,
        "read {read} of {arrived} bytes that arrived"
    );
});
