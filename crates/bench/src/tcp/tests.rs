//! SMTP over smoltcp TCP over both emulated links, in simulated time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use super::*;
use crate::model::Condition;
use crate::workload;

fn cond(channel: &str, snr_db: f64, rate_bps: u32, seed: u64) -> Condition {
    Condition {
        channel: channel.into(),
        snr_db,
        rate_bps,
        interleaver: "short".into(),
        seed,
        segment_size: crate::sweep::DEFAULT_SEGMENT,
    }
}

/// NTIA's JNOS settings.
fn ntia_tcp(window: u32, rate_bps: u32) -> TcpSettings {
    TcpSettings {
        mss: 216,
        window,
        irtt: Duration::from_secs(60),
        max_wait: Duration::from_secs(if rate_bps >= 1200 { 90 } else { 360 }),
        mtu: 256,
    }
}

/// A stock host's TCP on Isode's 1500-byte IP MTU (RFC 6298 timers: k = 1).
fn isode_tcp() -> TcpSettings {
    TcpSettings {
        mss: 1460,
        window: 65_535,
        irtt: Duration::from_secs(1),
        max_wait: Duration::from_secs(60),
        mtu: 1500,
    }
}

#[tokio::test(start_paused = true)]
async fn one_message_over_the_raw_modem() {
    let work = workload::ntia(1024, 1, 7).unwrap();
    let c = cond("awgn", 30.0, 1200, 7);
    let r = run_smtp_tcp_modem_with(&c, &ntia_tcp(1024, 1200), &work, &TcpRunOptions::default())
        .await
        .unwrap();
    println!("{r:#?}");
    assert!(r.completed, "{r:?}");
    assert_eq!((r.result.delivered, r.result.expected), (1, 1));
    assert_eq!(r.client_confirmed, 1);
    assert_eq!(r.xlzw, Some(16), "JNOS XLZW negotiated");
    assert!((r.clock_dilation - 1.5).abs() < 1e-9);
    assert!(r.result.transmissions >= 4);
    assert!(r.result.bytes_on_air > 500);
    // At 1200 bit/s the compressed mail alone needs a few seconds; the handshakes and
    // turnarounds more.
    assert!(r.result.seconds > 10.0 && r.result.seconds < 600.0, "{r:?}");
    let expected = 1024.0 * 8.0 / r.result.seconds;
    assert!((r.result.throughput_bps - expected).abs() < 1e-6);
}

#[tokio::test(start_paused = true)]
async fn raw_modem_runs_are_deterministic_and_plain_smtp_works() {
    let work = workload::ntia(1024, 1, 3).unwrap();
    let c = cond("good", 15.0, 1200, 11);
    let opts = TcpRunOptions {
        no_xlzw: true,
        ..TcpRunOptions::default()
    };
    let a = run_smtp_tcp_modem_with(&c, &ntia_tcp(3072, 1200), &work, &opts)
        .await
        .unwrap();
    let b = run_smtp_tcp_modem_with(&c, &ntia_tcp(3072, 1200), &work, &opts)
        .await
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(a.xlzw, None);
    assert_eq!(a.result.delivered, 1, "{a:?}");
}

#[tokio::test(start_paused = true)]
async fn one_message_over_5066_with_and_without_the_filter() {
    let work = workload::isode(386, 1, 5).unwrap();
    let c = cond("awgn", 30.0, 1200, 5);
    for filter in [true, false] {
        let r = run_smtp_tcp_5066_with(&c, &isode_tcp(), &work, filter, &TcpRunOptions::default())
            .await
            .unwrap();
        println!("{r:#?}");
        assert!(r.completed, "{r:?}");
        assert_eq!((r.result.delivered, r.result.expected), (1, 1), "{r:?}");
        assert!(r.result.transmissions >= 2);
        assert_eq!(r.xlzw, None);
        // Isode: submission to delivery, the message's bits over that time.
        let at = r.deliveries[0].unwrap();
        assert!((r.result.seconds - at).abs() < 1e-9);
        assert!(r.result.seconds > 5.0 && r.result.seconds < 600.0, "{r:?}");
        if !filter {
            assert_eq!(r.duplicates_filtered, 0);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn public_runners_fill_the_run_result() {
    let work = workload::isode(386, 1, 2).unwrap();
    let c = cond("awgn", 30.0, 2400, 2);
    let r = run_smtp_tcp_5066(&c, &isode_tcp(), &work, true)
        .await
        .unwrap();
    assert_eq!(r.delivered, 1);
    assert!(r.bytes_on_air > 386);
    let ntia = workload::ntia(1024, 1, 2).unwrap();
    let r = run_smtp_tcp_modem(&c, &ntia_tcp(1024, 2400), &ntia)
        .await
        .unwrap();
    assert_eq!(r.delivered, 1);
    assert!(r.throughput_bps > 0.0);
}

#[tokio::test(start_paused = true)]
async fn bad_settings_and_conditions_are_errors() {
    let work = workload::ntia(1024, 1, 1).unwrap();
    let c = cond("awgn", 30.0, 1200, 1);
    let mut tcp = ntia_tcp(1024, 1200);
    tcp.mss = 20;
    assert!(matches!(
        run_smtp_tcp_modem(&c, &tcp, &work).await,
        Err(TcpBenchError::Settings(_))
    ));
    let mut tcp = ntia_tcp(1024, 1200);
    tcp.window = 10;
    assert!(matches!(
        run_smtp_tcp_modem(&c, &tcp, &work).await,
        Err(TcpBenchError::Settings(_))
    ));
    let bad = cond("awgn", 30.0, 1234, 1);
    assert!(matches!(
        run_smtp_tcp_modem(&bad, &ntia_tcp(1024, 1200), &work).await,
        Err(TcpBenchError::Condition(_))
    ));
    let mut big = isode_tcp();
    big.mtu = 4000;
    assert!(matches!(
        run_smtp_tcp_5066(&c, &big, &work, true).await,
        Err(TcpBenchError::Settings(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn a_dead_channel_hits_the_time_limit_and_reports_nothing_delivered() {
    let work = workload::ntia(1024, 1, 1).unwrap();
    let c = cond("awgn", -20.0, 1200, 1);
    let opts = TcpRunOptions {
        time_limit: Some(Duration::from_secs(1800)),
        ..TcpRunOptions::default()
    };
    let r = run_smtp_tcp_modem_with(&c, &ntia_tcp(1024, 1200), &work, &opts)
        .await
        .unwrap();
    assert!(!r.completed);
    assert_eq!(r.result.delivered, 0);
    assert_eq!(r.result.throughput_bps, 0.0);
    assert!(r.tcp_retransmissions > 0, "the SYN was resent");
    assert!(r.lost_on_air > 0);
}

/// `calibration/ntia-jnos-table5.csv` (NTIA Report 99-360, Table 5): modem bit/s, TCP window,
/// attachment bytes, published throughput bit/s.
const NTIA_TABLE5: [(u32, u32, usize, f64); 8] = [
    (300, 1024, 1024, 51.8),
    (1200, 1024, 1024, 97.2),
    (300, 1024, 51200, 738.9),
    (1200, 1024, 51200, 1624.2),
    (300, 3072, 1024, 51.8),
    (1200, 3072, 1024, 97.5),
    (300, 3072, 51200, 767.1),
    (1200, 3072, 51200, 1733.6),
];

/// `calibration/isode-smtp-vs-coacp142.csv`: message bytes, published SMTP seconds (1200 bit/s).
const ISODE_SMTP: [(usize, f64); 4] =
    [(386, 89.0), (1867, 125.0), (14025, 250.0), (135604, 1442.0)];

/// Emulated against published, for every row of NTIA Table 5 and Isode's SMTP column.
/// Run with `cargo test -p skywave-bench --release -- --ignored --nocapture calibration`.
#[tokio::test(start_paused = true)]
#[ignore = "long: prints the calibration table (release build recommended)"]
async fn calibration_table() {
    const SEEDS: u64 = 3;
    for fit in [RtoFit::MaxWait, RtoFit::Irtt] {
        println!(
            "\n== NTIA Table 5 (JNOS, raw modem, ITU-R Good 15 dB, short interleaver), RTO fit {fit:?}, mean of {SEEDS} seeds x 10 messages"
        );
        println!(
            "rate  window  attachment  published_bps  emulated_bps  ratio   tcp_resent  lost_frames  collisions"
        );
        for (rate, window, att, published) in NTIA_TABLE5 {
            let (mut sum, mut n, mut resent, mut lost, mut coll) = (0.0, 0u32, 0, 0, 0);
            for seed in 0..SEEDS {
                // NTIA: ten messages, one connection each, five in each direction; the link
                // is symmetric here, so ten one-message runs with distinct seeds.
                for m in 0..10u64 {
                    let s = seed * 100 + m;
                    let work = workload::ntia(att, 1, s).unwrap();
                    let c = cond("good", 15.0, rate, s);
                    let opts = TcpRunOptions {
                        rto_fit: fit,
                        ..TcpRunOptions::default()
                    };
                    let r = run_smtp_tcp_modem_with(&c, &ntia_tcp(window, rate), &work, &opts)
                        .await
                        .unwrap();
                    sum += r.result.throughput_bps;
                    n += 1;
                    resent += r.tcp_retransmissions;
                    lost += r.lost_on_air;
                    coll += r.collisions;
                }
            }
            let emulated = sum / f64::from(n);
            println!(
                "{rate:>4}  {window:>6}  {att:>10}  {published:>13.1}  {emulated:>12.1}  {:>5.2}  {:>10.1}  {:>11.1}  {:>10.1}",
                emulated / published,
                resent as f64 / f64::from(n),
                lost as f64 / f64::from(n),
                coll as f64 / f64::from(n),
            );
        }
    }
    // The interleaver of Isode's RM6 runs is not published: both 110A settings are shown.
    for interleaver in ["short", "long"] {
        println!(
            "\n== Isode SMTP over IP over 5066 (clean 1200 bit/s, {interleaver} interleaver, MTU 1500), seconds submission to delivery, mean of {SEEDS} seeds"
        );
        println!(
            "bytes    published_s  filter_s  ratio  nofilter_s  ratio  dup_dropped  arq_resent  tcp_resent"
        );
        for (size, published) in ISODE_SMTP {
            let mut secs = [0.0f64; 2];
            let (mut dropped, mut arq, mut resent) = (0, 0, 0);
            for (i, filter) in [true, false].into_iter().enumerate() {
                for seed in 0..SEEDS {
                    let work = workload::isode(size, 1, seed).unwrap();
                    let mut c = cond("awgn", 30.0, 1200, seed);
                    c.interleaver = interleaver.into();
                    let r = run_smtp_tcp_5066_with(
                        &c,
                        &isode_tcp(),
                        &work,
                        filter,
                        &TcpRunOptions::default(),
                    )
                    .await
                    .unwrap();
                    assert_eq!(r.result.delivered, 1, "{r:?}");
                    secs[i] += r.result.seconds / SEEDS as f64;
                    if filter {
                        dropped += r.duplicates_filtered;
                        arq += r.arq_retransmissions;
                        resent += r.tcp_retransmissions;
                    }
                }
            }
            println!(
                "{size:>6}  {published:>11.0}  {:>8.1}  {:>5.2}  {:>10.1}  {:>5.2}  {:>11.1}  {:>10.1}  {:>10.1}",
                secs[0],
                secs[0] / published,
                secs[1],
                secs[1] / published,
                dropped as f64 / SEEDS as f64,
                arq as f64 / SEEDS as f64,
                resent as f64 / SEEDS as f64,
            );
        }
    }
}

#[test]
#[ignore = "diagnostic: LZW ratio of the NTIA workload"]
fn lzw_ratio_of_the_ntia_workload() {
    for att in [1024usize, 51200] {
        let work = workload::ntia(att, 1, 0).unwrap();
        let body = &work.messages[0].body;
        let mut enc = skywave_compress::lzw::LzwEncoder::new(16).unwrap();
        enc.push(body);
        enc.flush();
        let out = enc.take_output();
        println!(
            "attachment {att}: message {} bytes, LZW16 {} bytes, ratio {:.2}",
            body.len(),
            out.len(),
            body.len() as f64 / out.len() as f64
        );
    }
}

#[tokio::test(start_paused = true)]
#[ignore = "diagnostic: one NTIA run in detail"]
async fn ntia_one_run_in_detail() {
    for (rate, window) in [(300u32, 1024u32), (1200, 1024)] {
        let work = workload::ntia(51200, 1, 0).unwrap();
        let c = cond("good", 15.0, rate, 0);
        let r = run_smtp_tcp_modem_with(
            &c,
            &ntia_tcp(window, rate),
            &work,
            &TcpRunOptions::default(),
        )
        .await
        .unwrap();
        println!("{rate} bit/s window {window}: {r:#?}");
    }
}
