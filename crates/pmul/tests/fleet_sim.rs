//! One base sends one MULE message by P_MUL to five ships over a simulated broadcast bearer, in
//! virtual time, with deterministic losses: every ship gets the message exactly once and
//! byte-identical, repair rounds carry only the Data_PDUs that acks reported missing, and an EMCON
//! ship sends nothing until its EMCON is lifted, then acknowledges, and the base completes.

use std::collections::{BTreeMap, BTreeSet};

use skywave_pmul::mule::{self, MuleEnvelope, MuleLimits, MuleMessage, MuleRecipient};
use skywave_pmul::pdu::Pdu;
use skywave_pmul::receiver::{Receiver, ReceiverConfig, ReceiverEvent};
use skywave_pmul::sender::{DestState, Destination, Sender, SenderConfig};

const BASE: u32 = 0x0a00_0001;
const T0: u64 = 1_800_000_000_000;
const HOUR: u64 = 3_600_000;
/// Airtime of one PDU on the simulated channel.
const PDU_AIRTIME: u64 = 250;

/// A deterministic xorshift64 generator: the simulation must not depend on a crate's RNG stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// How a ship's downlink (base to ship) loses PDUs.
enum Loss {
    None,
    EveryKth { k: u64, count: u64 },
    Random { percent: u64, rng: Rng },
}

impl Loss {
    fn drops(&mut self) -> bool {
        match self {
            Loss::None => false,
            Loss::EveryKth { k, count } => {
                *count += 1;
                *count % *k == 0
            }
            Loss::Random { percent, rng } => rng.chance(*percent),
        }
    }
}

struct Ship {
    id: u32,
    rx: Receiver,
    down: Loss,
    /// Uplink (ship to base) loss, in percent.
    up_loss: u64,
    up_rng: Rng,
    messages: Vec<Vec<u8>>,
    acks_sent: u64,
    acks_sent_in_emcon: u64,
}

fn message() -> MuleMessage {
    let mut rng = Rng(0x5eed);
    let body: Vec<u8> = (0..12_000)
        .map(|_| b"abcdefghijklmnopqrstuvwxyz \r\n0123456789"[(rng.next() % 39) as usize])
        .collect();
    let mut message = b"From: ops@base.example\r\nSubject: fleet notice\r\n\r\n".to_vec();
    message.extend_from_slice(&body);
    MuleMessage {
        envelope: MuleEnvelope {
            reverse_path: "ops@base.example".into(),
            mail_params: String::new(),
            recipients: (1..=5)
                .map(|i| MuleRecipient {
                    address: format!("co@ship{i}.example"),
                    params: String::new(),
                })
                .collect(),
        },
        message,
    }
}

#[test]
fn five_ships_lossy_bearer_and_an_emcon_ship() {
    let mule_msg = message();
    let data = mule::encode(&mule_msg).unwrap_or_else(|e| panic!("{e}"));
    // Pseudo-random text compresses to roughly two thirds: about 30 Data_PDUs of 240 bytes.
    let config = SenderConfig {
        pdu_size: 256,
        repair_interval_ms: 30_000,
        max_repairs: 20,
        emcon_repeats: 3,
        emcon_interval_ms: HOUR,
        ..SenderConfig::default()
    };
    let ids: Vec<u32> = (2..=6).map(|n| 0x0a00_0000 + n).collect();
    let emcon_id = ids[4];
    let dests: Vec<Destination> = ids
        .iter()
        .map(|&id| {
            if id == emcon_id {
                Destination::emcon(id)
            } else {
                Destination::new(id)
            }
        })
        .collect();
    let mut tx =
        Sender::new(config, 42, BASE, dests, data.clone(), T0).unwrap_or_else(|e| panic!("{e}"));
    let total = tx.total_pdus();
    assert_eq!(usize::from(total), data.len().div_ceil(240));

    let downs = vec![
        Loss::None,
        Loss::EveryKth { k: 5, count: 0 },
        Loss::Random {
            percent: 30,
            rng: Rng(0xdead_beef),
        },
        Loss::EveryKth { k: 11, count: 0 },
        Loss::Random {
            percent: 10,
            rng: Rng(0x1234_5678),
        },
    ];
    let mut ships: Vec<Ship> = ids
        .iter()
        .zip(downs)
        .map(|(&id, down)| {
            let mut c = ReceiverConfig::new(id);
            c.ack_delay_ms = 3_000;
            c.pdu_size = 256;
            c.emcon = id == emcon_id;
            Ship {
                id,
                rx: Receiver::new(c),
                down,
                up_loss: if id == ids[2] { 30 } else { 0 },
                up_rng: Rng(u64::from(id) * 7919),
                messages: Vec::new(),
                acks_sent: 0,
                acks_sent_in_emcon: 0,
            }
        })
        .collect();

    let lift_at = T0 + 5 * HOUR;
    let mut lifted = false;
    let mut now = T0;
    let mut first_round = true;
    // Per ship, the missing list of its latest ack that reached the base.
    let mut heard: BTreeMap<u32, Vec<u16>> = BTreeMap::new();
    let mut ever_missing: BTreeSet<u32> = BTreeSet::new();
    let mut repair_checked = 0u64;
    let mut non_emcon_done_at = None;
    let mut last_stats = tx.stats();

    for _step in 0..100_000 {
        // The base transmits everything it has queued; every ship hears it through its loss.
        // Rounds are counted when queued (at the last handle_timeout), so compare with the stats
        // after the previous batch.
        let before = last_stats;
        let mut batch_data: Vec<u16> = Vec::new();
        while let Some(pdu) = tx.poll_transmit(now) {
            if let Ok(Pdu::Data(d)) = Pdu::decode(&pdu) {
                batch_data.push(d.seq);
            }
            for s in &mut ships {
                if !s.down.drops() {
                    s.rx.handle_pdu(&pdu, now)
                        .unwrap_or_else(|e| panic!("ship {:#x}: {e}", s.id));
                }
            }
            now += PDU_AIRTIME;
        }
        let after = tx.stats();
        last_stats = after;
        if !batch_data.is_empty() {
            if first_round {
                first_round = false;
                assert_eq!(batch_data.len(), usize::from(total));
            } else if after.emcon_data_pdus == before.emcon_data_pdus
                && after.repair_data_pdus > before.repair_data_pdus
            {
                // A pure repair round: only Data_PDUs that the latest ack the base heard from
                // some ship reported missing.
                let reported: BTreeSet<u16> = heard.values().flatten().copied().collect();
                for seq in &batch_data {
                    assert!(
                        reported.contains(seq),
                        "Data_PDU {seq} repaired without being reported missing"
                    );
                }
                repair_checked += batch_data.len() as u64;
            }
        }
        // Ships deliver and answer.
        for s in &mut ships {
            while let Some(ev) = s.rx.poll_event() {
                match ev {
                    ReceiverEvent::Message {
                        source,
                        message_id,
                        data,
                        ..
                    } => {
                        assert_eq!((source, message_id), (BASE, 42));
                        s.messages.push(data);
                    }
                    other => panic!("ship {:#x}: unexpected {other:?}", s.id),
                }
            }
            while let Some(ack) = s.rx.poll_transmit(now) {
                s.acks_sent += 1;
                if s.rx.emcon() {
                    s.acks_sent_in_emcon += 1;
                }
                now += PDU_AIRTIME;
                if !s.up_rng.chance(s.up_loss) {
                    if let Ok(Pdu::Ack(a)) = Pdu::decode(&ack) {
                        for e in &a.entries {
                            if !e.missing.is_empty() {
                                ever_missing.insert(s.id);
                            }
                            heard.insert(s.id, e.missing.clone());
                        }
                    }
                    tx.handle_pdu(&ack, now)
                        .unwrap_or_else(|e| panic!("base: {e}"));
                }
            }
        }
        if non_emcon_done_at.is_none()
            && tx
                .status()
                .iter()
                .filter(|d| !d.dest.emcon)
                .all(|d| d.state == DestState::Complete)
        {
            non_emcon_done_at = Some(now);
        }
        if tx.is_complete() {
            break;
        }
        // Advance virtual time to the next deadline (or the EMCON lift).
        let mut next = [tx.poll_timeout()]
            .into_iter()
            .chain(ships.iter().map(|s| s.rx.poll_timeout()))
            .flatten()
            .min()
            .unwrap_or(u64::MAX);
        if !lifted {
            next = next.min(lift_at);
        }
        assert!(next != u64::MAX, "nothing left to happen at {now}");
        now = now.max(next);
        if !lifted && now >= lift_at {
            lifted = true;
            let s = ships
                .iter_mut()
                .find(|s| s.id == emcon_id)
                .unwrap_or_else(|| panic!("no EMCON ship"));
            assert_eq!(
                s.acks_sent, 0,
                "the EMCON ship transmitted before its EMCON ended"
            );
            assert_eq!(
                s.messages.len(),
                1,
                "the EMCON ship receives and delivers while silent"
            );
            s.rx.set_emcon(false, now);
        }
        tx.handle_timeout(now);
        for s in &mut ships {
            s.rx.handle_timeout(now);
        }
    }

    assert!(lifted, "the EMCON ship was never lifted");
    assert!(tx.is_complete(), "base not complete: {:?}", tx.status());
    for s in &ships {
        assert_eq!(s.messages.len(), 1, "ship {:#x} deliveries", s.id);
        assert_eq!(s.messages[0], data, "ship {:#x} bytes", s.id);
        assert_eq!(s.acks_sent_in_emcon, 0);
        assert!(s.acks_sent >= 1, "ship {:#x} never acknowledged", s.id);
        let m =
            mule::decode(&s.messages[0], MuleLimits::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m, mule_msg);
    }
    let emcon_done = tx
        .status()
        .iter()
        .find(|d| d.dest.id == emcon_id)
        .and_then(|d| d.completed_at)
        .unwrap_or(0);
    assert!(
        emcon_done >= lift_at,
        "EMCON ship completed before it could ack"
    );
    let non_emcon = non_emcon_done_at.unwrap_or(u64::MAX);
    assert!(
        non_emcon < T0 + 10 * 60_000,
        "ships not under EMCON took {} s",
        (non_emcon - T0) / 1000
    );
    // The lossless ship never missed anything; the lossy non-EMCON ones did.
    assert!(!ever_missing.contains(&ids[0]));
    assert!(ever_missing.contains(&ids[1]) && ever_missing.contains(&ids[2]));
    let st = tx.stats();
    // Lossy ships needed repairs, and repairs were a fraction of a full retransmission each.
    assert!(st.repair_rounds >= 1);
    assert!(st.repair_data_pdus >= 1);
    assert!(repair_checked >= 1);
    assert!(
        st.repair_data_pdus < u64::from(total) * u64::from(st.repair_rounds),
        "repairs resent whole messages: {st:?}"
    );
    assert_eq!(st.emcon_data_pdus, 3 * u64::from(total));
    println!(
        "PDUs/message {total}, stats {st:?}, non-EMCON done after {} s, EMCON ship done after {} s",
        (non_emcon - T0) / 1000,
        (emcon_done - T0) / 1000
    );
}

/// Runs one message to `ships` receivers, each losing `loss` percent of the base's PDUs and of its
/// own acks (seeded), until the base completes or gives up; returns each ship's deliveries.
fn simulate(seed: u64, size: usize, pdu_size: usize, ships: u32, loss: u64) -> Vec<Vec<Vec<u8>>> {
    let mut rng = Rng(seed | 1);
    let data: Vec<u8> = (0..size).map(|_| rng.next() as u8).collect();
    let ids: Vec<u32> = (0..ships).map(|i| 100 + i).collect();
    let config = SenderConfig {
        pdu_size,
        repair_interval_ms: 20_000,
        max_repairs: 1000,
        ..SenderConfig::default()
    };
    let dests = ids.iter().map(|&id| Destination::new(id)).collect();
    let mut tx =
        Sender::new(config, 7, BASE, dests, data.clone(), T0).unwrap_or_else(|e| panic!("{e}"));
    let mut rxs: Vec<Receiver> = ids
        .iter()
        .map(|&id| {
            let mut c = ReceiverConfig::new(id);
            c.pdu_size = pdu_size;
            Receiver::new(c)
        })
        .collect();
    let mut got = vec![Vec::new(); rxs.len()];
    let mut now = T0;
    while !tx.is_finished() && now < T0 + HOUR {
        while let Some(pdu) = tx.poll_transmit(now) {
            for rx in &mut rxs {
                if !rng.chance(loss) {
                    rx.handle_pdu(&pdu, now).unwrap_or_else(|e| panic!("{e}"));
                }
            }
            now += PDU_AIRTIME;
        }
        for (rx, got) in rxs.iter_mut().zip(&mut got) {
            while let Some(ev) = rx.poll_event() {
                if let ReceiverEvent::Message { data, .. } = ev {
                    got.push(data);
                }
            }
            while let Some(ack) = rx.poll_transmit(now) {
                if !rng.chance(loss) {
                    tx.handle_pdu(&ack, now).unwrap_or_else(|e| panic!("{e}"));
                }
            }
        }
        let next = [tx.poll_timeout()]
            .into_iter()
            .chain(rxs.iter().map(Receiver::poll_timeout))
            .flatten()
            .min();
        let Some(next) = next else { break };
        now = now.max(next);
        tx.handle_timeout(now);
        for rx in &mut rxs {
            rx.handle_timeout(now);
        }
    }
    assert!(tx.is_complete(), "seed {seed}: {:?}", tx.status());
    for g in &got {
        for m in g {
            assert_eq!(m, &data);
        }
    }
    got
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Whatever the losses (up to 40 % each way), every ship gets the message exactly once.
    #[test]
    fn every_ship_gets_it_exactly_once(
        seed in proptest::prelude::any::<u64>(),
        size in 0usize..6000,
        pdu_size in 32usize..600,
        ships in 1u32..6,
        loss in 0u64..40,
    ) {
        for g in simulate(seed, size, pdu_size, ships, loss) {
            proptest::prop_assert_eq!(g.len(), 1);
        }
    }
}
