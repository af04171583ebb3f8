//! The fleet benchmark's headline, asserted in virtual time (deterministic for the seed): a
//! message for every one of five ships on one 1200 bit/s frequency goes once by P_MUL and
//! reaches every ship sooner, in a fraction of the airtime HMTP to each ship takes.
//! `skywave-bench fleet` prints the same rows; README quotes them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use skywave_bench::fleet::{FleetResult, FleetSpec, FleetWorkload, run_fleet};

fn spec(multicast: bool, emcon: usize) -> FleetSpec {
    FleetSpec {
        ships: 5,
        workload: FleetWorkload::All,
        multicast,
        emcon,
        size: 2000,
        rate_bps: 1200,
        snr_db: 18.0,
        seed: 1,
        ip: None,
        turnaround: None,
        cas1: false,
        link_idle: None,
        max_links: None,
        ship_impairments: Vec::new(),
        slot_minutes: None,
    }
}

fn within(what: &str, v: f64, lo: f64, hi: f64) {
    assert!((lo..=hi).contains(&v), "{what} = {v}, expected {lo}..={hi}");
}

/// A multicast run that needed no link: the same delivery, airtime and transmissions as the
/// plain 5-ship multicast.
fn same_as_plain_multicast(multi: &FleetResult) {
    let plain = run(&spec(true, 0));
    assert_eq!(
        (multi.all_delivered_s, multi.airtime_s, multi.transmissions),
        (plain.all_delivered_s, plain.airtime_s, plain.transmissions)
    );
}

fn run(s: &FleetSpec) -> FleetResult {
    let r = run_fleet(s).unwrap();
    assert_eq!(r.delivered, r.expected, "{s:?}: {r:?}");
    assert!(r.done_s.is_some(), "{s:?} never finished: {r:?}");
    r
}

/// HMTP to each ship and P_MUL multicast under the same conditions (`spec` given whether to
/// multicast), each run as [`run`] checks it; printed under `what`.
fn both(what: &str, spec: impl Fn(bool) -> FleetSpec) -> (FleetResult, FleetResult) {
    let uni = run(&spec(false));
    let multi = run(&spec(true));
    eprintln!("{what}: unicast {uni:?}\nmulticast {multi:?}");
    (uni, multi)
}

/// `fleet --ships 5 --workload all --outage 5@5+600`: the farthest ship hears nothing from
/// the base for ten minutes from 5 s in, before any message has reached it. Every ship has
/// its message after the outage either way, by HMTP 92 s after the channel is back and by
/// P_MUL 63 s after (where P_MUL gives the ship up after five repair rounds and HMTP carries
/// it). The base's node gave up on the link mid-session; every gateway of the fleet states
/// that its peers honour the cut marker (`xcut = true`), so the base's next session starts
/// with the marker instead of waiting until the ship's server must have given up what it may
/// hold of the cut one (`peer_session_timeout`, 327 s here: 287 and 269 s after the channel
/// was back, with 181.8 and 207.4 s of airtime, while the base learnt `XCUT` only from a
/// reply, which this ship had never sent). Both pay in airtime for sending into the dead
/// channel meanwhile: 197.4 s for HMTP (sessions begun again at every retry) and 207.4 s for
/// P_MUL, against 59.5 and 28.2 s.
#[test]
fn a_ship_out_of_reach_for_ten_minutes_gets_its_mail_after_by_either_way() {
    use skywave_emu::channel::{ImpairmentKind, ScheduledImpairment};
    let outage = ScheduledImpairment::parse(ImpairmentKind::Outage, "5+600").unwrap();
    let (uni, multi) = both("ship 5 out for ten minutes", |multicast| FleetSpec {
        ship_impairments: vec![(4, outage)],
        ..spec(multicast, 0)
    });
    within(
        "unicast: every ship has it, s",
        uni.all_delivered_s.unwrap(),
        692.0,
        702.0,
    );
    within(
        "multicast: every ship has it, s",
        multi.all_delivered_s.unwrap(),
        663.0,
        673.0,
    );
    within("unicast airtime, s", uni.airtime_s, 186.0, 206.0);
    within("multicast airtime, s", multi.airtime_s, 195.0, 216.0);
}

#[test]
fn a_message_for_five_ships_goes_once_by_multicast() {
    let (uni, multi) = both("plain", |multicast| spec(multicast, 0));
    let (ut, mt) = (uni.all_delivered_s.unwrap(), multi.all_delivered_s.unwrap());
    // Deterministic (the same figures every run): 45 s / 59.5 s of airtime for HMTP to each
    // ship against 11 s / 28.2 s for P_MUL. The bands only leave room for a change that
    // moves them a little; anything more is a change to look at.
    within("unicast: every ship has it, s", ut, 43.0, 47.0);
    within("multicast: every ship has it, s", mt, 10.0, 13.0);
    within("unicast airtime, s", uni.airtime_s, 56.0, 61.0);
    within("multicast airtime, s", multi.airtime_s, 26.0, 31.0);
    assert!(mt <= 0.3 * ut, "multicast {mt} s against unicast {ut} s");
    assert!(multi.airtime_s <= 0.55 * uni.airtime_s);
    // The ships' acks wait for the end of the base's burst of repeats, each in its own slot.
    assert_eq!(multi.collided, 0, "{multi:?}");
    within("multicast: all acked, s", multi.done_s.unwrap(), 38.0, 42.0);
}

#[test]
fn ten_ships_acknowledge_a_multicast_each_in_its_slot() {
    let r = run(&FleetSpec {
        ships: 10,
        ..spec(true, 0)
    });
    eprintln!("multicast to 10 {r:?}");
    // A ship whose slot comes while the channel is idle keys up at once; only one that was
    // waiting for another's carrier backs off. When every ship that overheard an ack backed off
    // as well, two of them met (one collision, all acked after 90 s, 40.4 s of airtime).
    assert_eq!(r.collided, 0, "{r:?}");
    within(
        "multicast to 10: all acked, s",
        r.done_s.unwrap(),
        58.0,
        62.0,
    );
    within("multicast to 10: airtime, s", r.airtime_s, 34.0, 38.0);
}

#[test]
fn a_repair_round_waits_for_the_bases_own_unicast_to_be_sent() {
    // Ten ships, a message for all and one for each ship alone (HMTP, queued behind the
    // multicast on the base's node), the last ship in EMCON. The base's repair timer comes
    // while its node is still sending the unicast mail, before any ship could ack: the round
    // waits until the node has sent it and the ships have had their slots, and then lists only
    // the EMCON ship. Before, it went out listing every ship and each acked twice: 190 s, 22
    // transmissions, 158.7 s of airtime.
    let r = run(&FleetSpec {
        ships: 10,
        workload: FleetWorkload::Mixed,
        ..spec(true, 1)
    });
    eprintln!("mixed, 10 ships, one in EMCON {r:?}");
    within("all acked, s", r.done_s.unwrap(), 168.0, 172.0);
    assert!(r.transmissions <= 14, "{r:?}");
    within("airtime, s", r.airtime_s, 145.0, 150.0);
}

#[test]
fn an_emcon_ship_gets_the_multicast_and_its_ack_comes_when_emcon_ends() {
    let r = run(&spec(true, 1));
    let plain = run(&spec(true, 0));
    // The ships have it as soon as without EMCON; only the last ack waits for the lift.
    assert_eq!(r.all_delivered_s, plain.all_delivered_s);
    assert!(r.done_s >= plain.done_s, "{r:?} against {plain:?}");
}

#[test]
fn the_same_multicast_over_an_ip_network_with_loss_is_repaired_and_puts_nothing_on_hf() {
    let ip = skywave_emu::ipnet::IpNetConfig {
        delay: std::time::Duration::from_millis(270),
        loss: 0.02,
        rate_bps: 64_000,
        seed: 1,
    };
    let r = run(&FleetSpec {
        ip: Some(ip),
        ..spec(true, 0)
    });
    eprintln!("pmul-ip {r:?}");
    // A 2 kB message in two or three datagrams plus the address, each ship's ack after
    // its slot: a few seconds, a few kB on the network, and the HF channel idle.
    within(
        "pmul-ip: every ship has it, s",
        r.all_delivered_s.unwrap(),
        1.0,
        6.0,
    );
    within("pmul-ip: all acked, s", r.done_s.unwrap(), 2.0, 12.0);
    assert_eq!(r.transmissions, 0, "nothing on HF: {r:?}");
    assert!(
        (4..=40).contains(&r.ip_datagrams),
        "{} datagrams",
        r.ip_datagrams
    );
}

/// The README's fleet lines on deployed turnarounds (`skywave-bench fleet --ships 5 --workload
/// all --scenarios hmtp-unicast,pmul-multicast --emcon 0 --turnaround 5`): every ship has the
/// mail as soon as before (the turnaround comes after the data), and the ships' P_MUL acks,
/// spaced by the base's `[hf] turnaround_ms`, still do not collide. With the ack slots of the
/// default turnaround they did: 4 collisions and 191 s until all acked.
#[test]
fn deployed_turnarounds_keep_the_ships_acks_apart() {
    let slow = Some(std::time::Duration::from_secs(5));
    let (uni, multi) = both("turnaround 5 s", |multicast| FleetSpec {
        turnaround: slow,
        ..spec(multicast, 0)
    });
    within(
        "unicast: every ship has it, s",
        uni.all_delivered_s.unwrap(),
        43.0,
        47.0,
    );
    within("unicast: all acked, s", uni.done_s.unwrap(), 84.0, 88.0);
    within(
        "multicast: every ship has it, s",
        multi.all_delivered_s.unwrap(),
        10.0,
        12.0,
    );
    within("multicast: all acked, s", multi.done_s.unwrap(), 81.0, 85.0);
    assert_eq!(multi.collided, 0, "{multi:?}");
    assert_eq!(multi.transmissions, 6, "{multi:?}");
}

/// The README's fleet line on CAS-1 (`skywave-bench fleet --ships 5 --workload all --scenarios
/// hmtp-unicast,pmul-multicast --emcon 0 --cas1`): HMTP to each ship must first make that
/// ship's link (a PHYSICAL LINK REQUEST to each, each ship's ACCEPTED in a turn of its own),
/// which costs 10 s and 8.4 s of airtime; the multicast needs no link at all and does not
/// change.
#[test]
fn with_cas1_unicast_makes_every_ships_link_and_multicast_needs_none() {
    let (uni, multi) = both("CAS-1", |multicast| FleetSpec {
        cas1: true,
        ..spec(multicast, 0)
    });
    within(
        "unicast: every ship has it, s",
        uni.all_delivered_s.unwrap(),
        53.0,
        57.0,
    );
    within("unicast airtime, s", uni.airtime_s, 66.5, 69.0);
    assert_eq!(uni.transmissions, 13, "{uni:?}");
    assert_eq!(uni.collided, 0, "{uni:?}");
    // Exactly the figures without CAS-1.
    same_as_plain_multicast(&multi);
}

/// The README's fleet line on a 5066 server that holds one link at a time
/// (`skywave-bench fleet --ships 5 --workload all --scenarios hmtp-unicast,pmul-multicast
/// --emcon 0 --cas1 --link-idle 0 --max-links 1`): the base serves its ships' HMTP one after
/// another, breaking each ship's link before it makes the next, so every ship has its mail
/// after 91 s instead of 55 s with 31 transmissions instead of 13; the multicast needs no link
/// and does not change.
#[test]
fn a_base_holding_one_link_at_a_time_serves_its_ships_in_turn() {
    let (uni, multi) = both("one link at a time", |multicast| FleetSpec {
        cas1: true,
        link_idle: Some(std::time::Duration::ZERO),
        max_links: Some(1),
        ..spec(multicast, 0)
    });
    within(
        "unicast: every ship has it, s",
        uni.all_delivered_s.unwrap(),
        89.0,
        93.0,
    );
    within("unicast: all acked, s", uni.done_s.unwrap(), 93.0, 97.0);
    within("unicast airtime, s", uni.airtime_s, 89.5, 93.0);
    assert_eq!(uni.transmissions, 31, "{uni:?}");
    assert_eq!(uni.collided, 0, "{uni:?}");
    same_as_plain_multicast(&multi);
}

/// The README's fleet line on time slots (`skywave-bench fleet --workload reports --scenarios
/// hmtp-unicast --ships 5 --slot-minutes 0,3 --emcon 0`): five ships that all send the base
/// a report at once key up over each other, 10 transmissions are lost to collisions (their first
/// five together), and the resends take 158.5 s of airtime for 10 kB of mail; in 3-minute slots (a radio schedule in every routing table)
/// nothing collides and the reports take 68.1 s of airtime, but the last ship waits for its
/// slot, 12 minutes into the cycle.
#[test]
fn time_slots_keep_the_ships_reports_apart() {
    let reports = |slot_minutes| {
        run(&FleetSpec {
            workload: FleetWorkload::Reports,
            slot_minutes,
            ..spec(false, 0)
        })
    };
    let free = reports(None);
    assert_eq!((free.delivered, free.expected), (5, 5), "{free:?}");
    within(
        "free: the base has them all, s",
        free.all_delivered_s.unwrap(),
        100.0,
        120.0,
    );
    within("free: airtime, s", free.airtime_s, 150.0, 167.0);
    assert!((8..=12).contains(&free.collided), "{free:?}");
    let slotted = reports(Some(3));
    assert_eq!((slotted.delivered, slotted.expected), (5, 5), "{slotted:?}");
    assert_eq!(slotted.collided, 0, "{slotted:?}");
    within("slotted: airtime, s", slotted.airtime_s, 64.0, 70.0);
    assert_eq!(slotted.transmissions, 15, "{slotted:?}");
    // Ship 5's slot opens 12 minutes into the cycle; its session takes seconds.
    within(
        "slotted: the base has them all, s",
        slotted.all_delivered_s.unwrap(),
        720.0,
        745.0,
    );
}

/// The README's fleet lines on orders and reports at once (`skywave-bench fleet --workload
/// exchange --scenarios hmtp-unicast,pmul-multicast --ships 5 --slot-minutes 0,2 --emcon 0`):
/// the base multicasts one message to every ship while each ship sends it a report. In
/// 2-minute slots the base's multicast keeps the first slot of the cycle (its group's radio
/// schedule) and each ship its own after it: nothing collides, the base's multicast is on the
/// air for 36.0 s as without slots, and the last report comes in ship 5's slot, ten minutes
/// into the cycle.
#[test]
fn in_time_slots_the_bases_multicast_keeps_a_slot_of_its_own() {
    let exchange = |slot_minutes| {
        run(&FleetSpec {
            workload: FleetWorkload::Exchange,
            slot_minutes,
            ..spec(true, 0)
        })
    };
    let free = exchange(None);
    assert_eq!((free.delivered, free.expected), (10, 10), "{free:?}");
    within(
        "free: every ship has the order and the base every report, s",
        free.all_delivered_s.unwrap(),
        100.0,
        110.0,
    );
    within("free: airtime, s", free.airtime_s, 90.0, 95.0);
    let slotted = exchange(Some(2));
    assert_eq!(
        (slotted.delivered, slotted.expected),
        (10, 10),
        "{slotted:?}"
    );
    assert_eq!(slotted.collided, 0, "{slotted:?}");
    within("slotted: airtime, s", slotted.airtime_s, 93.0, 97.0);
    within(
        "slotted: base airtime, s",
        slotted.base_airtime_s,
        35.0,
        37.0,
    );
    assert_eq!(slotted.transmissions, 21, "{slotted:?}");
    within(
        "slotted: all in, s",
        slotted.all_delivered_s.unwrap(),
        600.0,
        620.0,
    );
}

/// The README's fleet lines on a base serving thirty ships (`skywave-bench fleet --ships 30
/// --workload mixed --scenarios hmtp-unicast --emcon 0`): the base's sessions to the ships wait
/// in its node behind one another for minutes, and one given up there at its reply timeout went
/// again behind its own first copy. The reply wait runs from the node's delivery confirmation
/// now: every ship has its mail after 539 s and all is acknowledged after 572 s with 424.1 s of
/// the base's airtime in 67 transmissions, where it took 854 s, 1649 s, 1151.6 s and 186.
#[test]
fn a_base_serving_thirty_ships_sends_no_session_twice() {
    let r = run(&FleetSpec {
        ships: 30,
        workload: FleetWorkload::Mixed,
        ..spec(false, 0)
    });
    eprintln!("30 ships, mixed, unicast {r:?}");
    within(
        "every ship has its mail, s",
        r.all_delivered_s.unwrap(),
        520.0,
        560.0,
    );
    within("all acked, s", r.done_s.unwrap(), 550.0, 600.0);
    within("base airtime, s", r.base_airtime_s, 405.0, 440.0);
    assert!((62..=70).contains(&r.transmissions), "{r:?}");
}
