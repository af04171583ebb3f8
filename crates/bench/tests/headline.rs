//! The README's headline table (Benchmark section), as the `skywave-bench compare` commands it
//! names print it: every Isode-size figure of the plain and deflate SMTP/TCP columns (`best-case`,
//! `linux`, `jnos-1998`) and of HMTP plain and deflate, asserted to 1 % (or the table's
//! rounding). Virtual time and seeded
//! channels make them deterministic, so a change to TCP, the profiles, the emulator or HMTP that
//! moves the headline fails here and the README must be regenerated with it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use skywave_bench::model::{HmtpCompression, Scenario, SmtpCompression, TcpProfile};
use skywave_bench::sweep::{SweepSpec, run_sweep};
use skywave_bench::workload::ISODE_SIZES;

const fn smtp(compression: SmtpCompression) -> Scenario {
    Scenario::SmtpTcp5066 {
        dup_filter: true,
        compression,
    }
}

const fn hmtp(compression: HmtpCompression) -> Scenario {
    Scenario::Hmtp5066 {
        compression,
        resume: true,
    }
}

#[test]
fn the_readme_headline_holds() {
    let mut spec = SweepSpec::quick();
    spec.scenarios = vec![
        smtp(SmtpCompression::None),
        smtp(SmtpCompression::Deflate),
        hmtp(HmtpCompression::None),
        hmtp(HmtpCompression::Deflate),
    ];
    spec.tcp_profiles = vec![
        TcpProfile::BestCase,
        TcpProfile::Linux,
        TcpProfile::Jnos1998,
    ];
    spec.seeds = vec![1, 2, 3];
    let rows = run_sweep(&spec, |_, _, _| {});
    let secs = |scenario: Scenario, profile: Option<TcpProfile>, size: usize| {
        rows.iter()
            .find(|r| {
                r.point.scenario == scenario
                    && r.point.size == size
                    && profile.is_none_or(|p| r.point.tcp.profile == Some(p))
            })
            .and_then(|r| r.stats.as_ref().ok())
            .map(|s| {
                assert!(s.all_delivered(), "{scenario} {size}: {s:?}");
                s.seconds_mean
            })
            .unwrap_or_else(|| panic!("no row for {scenario} {profile:?} {size}"))
    };
    let (best, linux, jnos) = (
        Some(TcpProfile::BestCase),
        Some(TcpProfile::Linux),
        Some(TcpProfile::Jnos1998),
    );
    // The README's rows: plain best-case, linux, jnos-1998; deflate best-case, linux; HMTP
    // plain, deflate.
    let readme: [(usize, [f64; 7]); 4] = [
        (386, [21.8, 30.1, 26.6, 19.9, 28.4, 4.8, 3.1]),
        (1867, [31.4, 40.4, 50.5, 25.4, 33.8, 14.6, 8.6]),
        (14025, [117.2, 126.8, 231.5, 53.8, 62.5, 98.5, 36.8]),
        (135604, [1018.4, 1094.5, 2031.0, 220.2, 265.9, 957.8, 195.3]),
    ];
    assert_eq!(readme.map(|r| r.0), ISODE_SIZES);
    for (size, quoted) in readme {
        let plain = smtp(SmtpCompression::None);
        let deflate = smtp(SmtpCompression::Deflate);
        let measured = [
            secs(plain, best, size),
            secs(plain, linux, size),
            secs(plain, jnos, size),
            secs(deflate, best, size),
            secs(deflate, linux, size),
            secs(hmtp(HmtpCompression::None), None, size),
            secs(hmtp(HmtpCompression::Deflate), None, size),
        ];
        for (m, q) in measured.iter().zip(quoted) {
            assert!(
                // 1 %, or the rounding of the one decimal the table prints.
                (m - q).abs() <= (0.01 * q).max(0.05),
                "{size} B: measured {measured:?}, README {quoted:?}"
            );
        }
        // The headline's speed-up is quoted against best-case, which must be the faster TCP.
        assert!(measured[3] <= measured[4] + 0.05, "{size} B: {measured:?}");
    }
}

/// The README's "Deployed turnarounds" lines (`skywave-bench compare --scenarios
/// smtp-tcp-5066-deflate,hmtp-5066-deflate --tcp-profile best-case --snr 30 --sizes 386,14025
/// --seeds 1 --turnaround T`): with deployed STANAG 5066 turnarounds SMTP pays every one of
/// its turns before the message is delivered, HMTP none (the message is delivered from its
/// first transmission; the turnaround only delays the reply).
#[test]
fn deployed_turnarounds_cost_smtp_and_not_hmtp_delivery() {
    let deflate = smtp(SmtpCompression::Deflate);
    let run = |turnaround: f64| {
        let mut spec = SweepSpec::quick();
        spec.scenarios = vec![deflate, hmtp(HmtpCompression::Deflate)];
        spec.tcp_profiles = vec![TcpProfile::BestCase];
        spec.sizes = vec![386, 14025];
        spec.turnaround = Some(std::time::Duration::from_secs_f64(turnaround));
        let rows = run_sweep(&spec, |_, _, _| {});
        let secs = |scenario: Scenario, size: usize| {
            rows.iter()
                .find(|r| r.point.scenario == scenario && r.point.size == size)
                .and_then(|r| r.stats.as_ref().ok())
                .map(|s| {
                    assert!(s.all_delivered(), "{scenario} {size}: {s:?}");
                    s.seconds_mean
                })
                .unwrap_or_else(|| panic!("no row for {scenario} {size}"))
        };
        [
            secs(deflate, 386),
            secs(deflate, 14025),
            secs(hmtp(HmtpCompression::Deflate), 386),
            secs(hmtp(HmtpCompression::Deflate), 14025),
        ]
    };
    // Turnaround, then SMTP deflate (best-case) at 386 and 14025 bytes, HMTP deflate at both.
    let readme: [(f64, [f64; 4]); 4] = [
        (0.15, [19.9, 60.8, 3.1, 43.4]),
        (1.0, [26.8, 67.5, 3.1, 43.4]),
        (5.0, [58.8, 99.5, 3.1, 43.4]),
        (10.0, [98.8, 139.6, 3.1, 43.4]),
    ];
    for (t, quoted) in readme {
        let measured = run(t);
        for (m, q) in measured.iter().zip(quoted) {
            assert!(
                (m - q).abs() <= 0.05 + q * 0.01,
                "turnaround {t} s: measured {measured:?}, README {quoted:?}"
            );
        }
    }
}
