//! CFTP sender and receiver session against each other in memory, over a link model that loses,
//! duplicates and reorders U_PDUs (deterministic, seeded): exactly-once delivery with 1 and 4 files
//! in flight, lost acknowledgements, exhausted retries, U_PDU id wrap-around, and a property test
//! over random messages and drop patterns. Time is virtual (an `Instant` advanced by hand).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use skywave_compress::corpus::message_of_size;
use skywave_hmtp::cftp::{BftpHeader, MailFile, RcopHeader};
use skywave_hmtp::{
    AckOutcome, BatchMessage, CftpReceiverEvent, CftpReceiverSession, CftpReceiverSettings,
    CftpSender, CftpSenderSettings, DedupCache, Disposition, cftp_message_id,
};

/// Which way a U_PDU goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    /// Files, sender to receiver.
    Data,
    /// Acknowledgements, receiver to sender.
    Ack,
}

/// What the link does to one U_PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Deliver,
    Drop,
    /// Delivered twice.
    Duplicate,
    /// Delivered late by this much (after U_PDUs sent later).
    Delay(Duration),
}

/// Decides the fate of the `n`-th U_PDU on the link (both directions counted together).
type FaultModel = Box<dyn FnMut(Dir, u64, &[u8]) -> Fate>;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Random loss, duplication and reordering, in parts per thousand per U_PDU.
fn random_faults(seed: u64, loss: u64, dup: u64, reorder: u64) -> FaultModel {
    let mut rng = Rng(seed | 1);
    Box::new(move |_, _, _| {
        let r = rng.below(1000);
        if r < loss {
            Fate::Drop
        } else if r < loss + dup {
            Fate::Duplicate
        } else if r < loss + dup + reorder {
            Fate::Delay(Duration::from_secs(1 + rng.below(20)))
        } else {
            Fate::Deliver
        }
    })
}

const LATENCY: Duration = Duration::from_secs(2);
/// Upper bound on simulation steps: every test ends far below it.
const MAX_STEPS: usize = 1_000_000;

/// What came out of one run.
#[derive(Debug, Default)]
struct Run {
    /// Per CFTP message id: the mail-files spooled (should be one each).
    delivered: HashMap<String, Vec<MailFile>>,
    /// Per caller id: the disposition (same for every recipient).
    outcomes: HashMap<String, Disposition>,
    /// U_PDU ids of segment 0s sent, in order.
    file_ids: Vec<u8>,
    /// Duplicate events at the receiver.
    duplicates: usize,
    /// Decode errors at the receiver.
    dropped: usize,
    /// U_PDUs the link dropped.
    link_drops: u64,
    /// U_PDUs the link dropped, duplicated or delayed.
    link_faults: u64,
    /// Virtual time at the end.
    elapsed: Duration,
}

/// Sender and receiver over the link model until everything settled.
fn run(mut tx: CftpSender, messages: &[BatchMessage], mut fault: FaultModel) -> Run {
    let t0 = Instant::now();
    let mut now = t0;
    for m in messages {
        tx.push(m.clone()).unwrap();
    }
    let mut rx = CftpReceiverSession::new(CftpReceiverSettings::default());
    let mut dedup = DedupCache::new(Duration::from_secs(86_400), 100_000);
    // In flight on the link: (arrival, sequence) -> (direction, U_PDU).
    let mut link: BTreeMap<(Instant, u64), (Dir, Vec<u8>)> = BTreeMap::new();
    let mut seq = 0u64;
    let mut sent = 0u64;
    let mut out = Run::default();
    // Which file (by BFTP file name) owns each U_PDU id on the sender's side right now.
    let mut owner: HashMap<u8, String> = HashMap::new();
    let mut send = |link: &mut BTreeMap<_, _>, out: &mut Run, dir: Dir, updu: Vec<u8>, now| {
        let fate = fault(dir, sent, &updu);
        sent += 1;
        if fate != Fate::Deliver {
            out.link_faults += 1;
        }
        let copies = match fate {
            Fate::Drop => {
                out.link_drops += 1;
                vec![]
            }
            Fate::Deliver => vec![now + LATENCY],
            Fate::Duplicate => vec![now + LATENCY, now + LATENCY],
            Fate::Delay(d) => vec![now + LATENCY + d],
        };
        for at in copies {
            seq += 1;
            link.insert((at, seq), (dir, updu.clone()));
        }
    };
    for _ in 0..MAX_STEPS {
        let mut busy = false;
        while let Some(updu) = tx.poll_transmit(now) {
            busy = true;
            assert!(updu.len() <= tx.settings().mtu, "U_PDU over the MTU");
            let (h, body) = RcopHeader::decode(&updu).unwrap();
            if h.segment == 0 {
                let (bftp, _) = BftpHeader::parse(body).unwrap().unwrap();
                if let Some(prev) = owner.insert(h.updu_id, bftp.filename.clone()) {
                    assert_eq!(
                        prev, bftp.filename,
                        "U_PDU id {} reused in flight",
                        h.updu_id
                    );
                }
                out.file_ids.push(h.updu_id);
            }
            send(&mut link, &mut out, Dir::Data, updu, now);
        }
        while let Some(ack) = rx.poll_transmit() {
            busy = true;
            send(&mut link, &mut out, Dir::Ack, ack, now);
        }
        while let Some(entry) = link.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let (dir, updu) = entry.remove();
            busy = true;
            match dir {
                Dir::Data => {
                    assert_eq!(tx.receive(now, &updu), AckOutcome::NotAnAck);
                    rx.receive(now, &updu, &mut dedup);
                }
                Dir::Ack => {
                    assert_ne!(tx.receive(now, &updu), AckOutcome::NotAnAck);
                }
            }
        }
        while let Some(event) = rx.poll_event() {
            match event {
                CftpReceiverEvent::File(file) => {
                    out.delivered
                        .entry(file.mail.message_id.clone())
                        .or_default()
                        .push(file.mail);
                    rx.accepted(file.ticket, now, &mut dedup).unwrap();
                }
                CftpReceiverEvent::Duplicate { .. } => out.duplicates += 1,
                CftpReceiverEvent::Dropped(_) => out.dropped += 1,
            }
        }
        while let Some(result) = tx.poll_outcome() {
            let name = format!("{}.gz", cftp_message_id(&result.id));
            owner.retain(|_, f| *f != name);
            let first = result.recipients[0].1.clone();
            assert!(result.recipients.iter().all(|(_, d)| *d == first));
            assert!(out.outcomes.insert(result.id, first).is_none());
        }
        if busy {
            continue;
        }
        if tx.poll_timeout().is_some_and(|t| t <= now) {
            tx.handle_timeout(now);
            continue;
        }
        if rx.poll_timeout().is_some_and(|t| t <= now) {
            rx.handle_timeout(now);
            continue;
        }
        let next = [
            link.keys().next().map(|k| k.0),
            tx.poll_timeout(),
            rx.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            Some(t) => {
                assert!(t > now, "a deadline that does not move");
                now = t;
            }
            None => {
                assert!(tx.is_idle(), "sender stuck with nothing to wait for");
                out.elapsed = now - t0;
                return out;
            }
        }
    }
    panic!("simulation did not settle in {MAX_STEPS} steps");
}

fn message(i: usize, seed: u64, size: usize) -> BatchMessage {
    BatchMessage {
        id: format!("M{i:04}"),
        reverse_path: if i % 7 == 3 {
            String::new()
        } else {
            format!("ops{i}@ship.example")
        },
        recipients: (0..1 + i % 3)
            .map(|r| format!("user{r}@shore.example"))
            .collect(),
        body: message_of_size(seed, size).unwrap(),
        eight_bit: false,
        dsn: Default::default(),
        rcpt_dsn: Vec::new(),
    }
}

fn corpus(n: usize, seed: u64) -> Vec<BatchMessage> {
    let mut rng = Rng(seed | 1);
    (0..n)
        .map(|i| message(i, seed + i as u64, 300 + rng.below(4700) as usize))
        .collect()
}

/// Towards a skywave peer, but one message per file: these tests are about files, ids and
/// acknowledgements (bundles have their own test below).
fn one_message_per_file(mtu: usize, in_flight: usize) -> CftpSenderSettings {
    CftpSenderSettings {
        max_bundle: 1,
        ..CftpSenderSettings::skywave(mtu, in_flight)
    }
}

/// Every message with outcome Delivered was spooled exactly once, byte-identical; no message was
/// spooled twice; every message has an outcome.
fn check_at_most_once(messages: &[BatchMessage], run: &Run) {
    for m in messages {
        let copies = run
            .delivered
            .get(&cftp_message_id(&m.id))
            .map_or(&[][..], Vec::as_slice);
        assert!(
            copies.len() <= 1,
            "{} delivered {} times",
            m.id,
            copies.len()
        );
        if let Some(mail) = copies.first() {
            assert_eq!(mail.message, m.body, "{}: body differs", m.id);
            assert_eq!(mail.recipients, m.recipients);
            assert_eq!(mail.return_path.as_deref().unwrap_or(""), m.reverse_path);
        }
        match run.outcomes.get(&m.id) {
            Some(Disposition::Delivered(_)) => {
                assert_eq!(copies.len(), 1, "{} acknowledged but not spooled", m.id)
            }
            Some(Disposition::NoAnswer) => {}
            other => panic!("{}: unexpected outcome {other:?}", m.id),
        }
    }
    assert_eq!(run.outcomes.len(), messages.len());
    let names: Vec<String> = messages.iter().map(|m| cftp_message_id(&m.id)).collect();
    assert!(
        run.delivered.keys().all(|k| names.contains(k)),
        "a file nobody sent"
    );
}

fn check_exactly_once(messages: &[BatchMessage], run: &Run) {
    check_at_most_once(messages, run);
    for m in messages {
        assert!(
            matches!(run.outcomes.get(&m.id), Some(Disposition::Delivered(_))),
            "{} not delivered: {:?}",
            m.id,
            run.outcomes.get(&m.id)
        );
    }
}

#[test]
fn delivers_exactly_once_over_a_lossy_duplicating_reordering_link() {
    let messages = corpus(20, 11);
    // Fault rates (per mille) scaled to the segment counts, so that a file is hit now and then
    // at either MTU.
    for (in_flight, mtu, seed, rate) in [
        (1, 200, 1u64, 10),
        (4, 200, 2, 10),
        (1, 2048, 3, 40),
        (4, 2048, 4, 40),
    ] {
        let settings = CftpSenderSettings {
            max_transmissions: 12,
            ..one_message_per_file(mtu, in_flight)
        };
        let tx = CftpSender::new(settings).unwrap();
        let run = run(tx, &messages, random_faults(seed, 2 * rate, rate, rate));
        eprintln!(
            "in_flight {in_flight} mtu {mtu}: {} files sent for {}, {} faults, {} duplicates, {} dropped",
            run.file_ids.len(),
            messages.len(),
            run.link_faults,
            run.duplicates,
            run.dropped
        );
        check_exactly_once(&messages, &run);
        // The faults really happened and really cost something.
        assert!(run.link_drops > 0, "in_flight {in_flight} mtu {mtu}");
        assert!(
            run.dropped > 0,
            "in_flight {in_flight} mtu {mtu}: no file broken"
        );
        assert!(
            run.file_ids.len() > messages.len(),
            "in_flight {in_flight} mtu {mtu}: no file was sent twice"
        );
    }
}

#[test]
fn bundles_deliver_exactly_once_over_a_lossy_duplicating_reordering_link() {
    let messages = corpus(40, 12);
    for (in_flight, seed) in [(1, 5u64), (4, 6)] {
        let settings = CftpSenderSettings {
            max_transmissions: 12,
            ..CftpSenderSettings::skywave(2048, in_flight)
        };
        let tx = CftpSender::new(settings).unwrap();
        let r = run(tx, &messages, random_faults(seed, 20, 20, 20));
        eprintln!(
            "bundles, in_flight {in_flight}: {} files for {} messages, {} faults, {} duplicates",
            r.file_ids.len(),
            messages.len(),
            r.link_faults,
            r.duplicates
        );
        check_exactly_once(&messages, &r);
        assert!(r.link_faults > 0);
        // Bundled: far fewer files than messages, even counting the ones sent again.
        assert!(
            r.file_ids.len() < messages.len() / 2,
            "{}",
            r.file_ids.len()
        );
    }
}

#[test]
fn several_files_in_flight_finish_sooner() {
    let messages = corpus(12, 5);
    let one = run(
        CftpSender::new(CftpSenderSettings::standard(512)).unwrap(),
        &messages,
        Box::new(|_, _, _| Fate::Deliver),
    );
    let four = run(
        CftpSender::new(one_message_per_file(512, 4)).unwrap(),
        &messages,
        Box::new(|_, _, _| Fate::Deliver),
    );
    check_exactly_once(&messages, &one);
    check_exactly_once(&messages, &four);
    // Stop-and-wait costs one round trip per file; four in flight share them.
    assert_eq!(one.elapsed, LATENCY * 2 * 12);
    assert_eq!(four.elapsed, LATENCY * 2 * 3);
}

#[test]
fn a_lost_ack_means_a_resent_file_that_is_delivered_once() {
    for in_flight in [1, 4] {
        let messages = corpus(3, 21);
        // Lose the first acknowledgement.
        let mut lost = false;
        let fault: FaultModel = Box::new(move |dir, _, _| {
            if dir == Dir::Ack && !lost {
                lost = true;
                Fate::Drop
            } else {
                Fate::Deliver
            }
        });
        let tx = CftpSender::new(one_message_per_file(200, in_flight)).unwrap();
        let r = run(tx, &messages, fault);
        check_exactly_once(&messages, &r);
        assert_eq!(r.duplicates, 1, "the resent file is a duplicate");
        assert_eq!(r.file_ids.len(), 4, "one file sent twice");
        assert_eq!(r.link_drops, 1);
    }
}

#[test]
fn exhausted_retries_leave_the_message_queued() {
    let messages = corpus(2, 31);
    let settings = CftpSenderSettings {
        max_transmissions: 3,
        ack_timeout: Duration::from_secs(60),
        ..CftpSenderSettings::standard(200)
    };
    // Nothing gets through.
    let r = run(
        CftpSender::new(settings.clone()).unwrap(),
        &messages,
        Box::new(|dir, _, _| {
            if dir == Dir::Data {
                Fate::Drop
            } else {
                Fate::Deliver
            }
        }),
    );
    check_at_most_once(&messages, &r);
    assert!(r.delivered.is_empty());
    assert!(r.outcomes.values().all(|d| *d == Disposition::NoAnswer));
    // Three transmissions of each file, one after the other.
    assert_eq!(r.file_ids.len(), 6);
    assert!(r.elapsed >= Duration::from_secs(6 * 60));
    // Every acknowledgement lost: delivered once, but the sender cannot know.
    let r = run(
        CftpSender::new(settings).unwrap(),
        &messages,
        Box::new(|dir, _, _| {
            if dir == Dir::Ack {
                Fate::Drop
            } else {
                Fate::Deliver
            }
        }),
    );
    check_at_most_once(&messages, &r);
    assert_eq!(r.delivered.len(), 2);
    assert_eq!(r.duplicates, 4);
    assert!(r.outcomes.values().all(|d| *d == Disposition::NoAnswer));
}

#[test]
fn updu_ids_wrap_around_without_reuse_in_flight() {
    let messages: Vec<BatchMessage> = (0..300).map(|i| message(i, i as u64, 300)).collect();
    for in_flight in [1, 4] {
        let settings = CftpSenderSettings {
            max_transmissions: 10,
            ..one_message_per_file(2048, in_flight)
        };
        let r = run(
            CftpSender::new(settings).unwrap(),
            &messages,
            random_faults(77 + in_flight as u64, 10, 0, 0),
        );
        check_exactly_once(&messages, &r);
        // All 256 ids were used and then used again (300 files); the harness checks that no
        // id was reused while its file was unsettled.
        assert!((0..=255u8).all(|id| r.file_ids.contains(&id)));
        assert!(r.file_ids[256..].iter().any(|&id| id < 10));
        assert!(r.file_ids.len() > 300, "some file was resent");
    }
}

fn line() -> impl Strategy<Value = Vec<u8>> {
    (any::<bool>(), prop::collection::vec(1u8..=255, 0..60)).prop_map(|(dot, mut l)| {
        l.retain(|&b| b != b'\r' && b != b'\n');
        if dot {
            l.insert(0, b'.');
        }
        l
    })
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(line(), 0..30).prop_map(|lines| {
        let mut b = Vec::new();
        for l in lines {
            b.extend_from_slice(&l);
            b.extend_from_slice(b"\r\n");
        }
        b
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn random_messages_and_drop_patterns(
        bodies in prop::collection::vec(body(), 1..10),
        drops in prop::collection::btree_set(0u64..300, 0..7),
        in_flight in 1usize..=4,
        mtu in 40usize..600,
    ) {
        let messages: Vec<BatchMessage> = bodies
            .into_iter()
            .enumerate()
            .map(|(i, body)| BatchMessage {
                id: format!("q-{i}"),
                reverse_path: format!("s{i}@x"),
                recipients: vec![format!("r{i}@y")],
                body,
                eight_bit: true,
                dsn: Default::default(),
                rcpt_dsn: Vec::new(),
            })
            .collect();
        let settings = CftpSenderSettings {
            max_transmissions: 4,
            ack_timeout: Duration::from_secs(100),
            ..one_message_per_file(mtu, in_flight)
        };
        let r = run(
            CftpSender::new(settings).unwrap(),
            &messages,
            Box::new(move |_, n, _| {
                if drops.contains(&n) {
                    Fate::Drop
                } else {
                    Fate::Deliver
                }
            }),
        );
        check_at_most_once(&messages, &r);
        // Each failed transmission of a file costs at least one dropped U_PDU of its own, so with
        // fewer drops than transmissions every file gets through.
        if r.link_drops < 4 {
            check_exactly_once(&messages, &r);
        }
        prop_assert!(r.file_ids.len() as u64 <= messages.len() as u64 + r.link_drops);
    }
}
