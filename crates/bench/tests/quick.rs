//! The quick comparison CI runs (`skywave-bench compare --quick`), for the HF-native scenarios:
//! every row present, every message delivered byte-identical, and the tables complete.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use skywave_bench::model::{HmtpCompression, Scenario};
use skywave_bench::report::{COLUMNS, csv, markdown};
use skywave_bench::sweep::{SweepSpec, run_sweep};
use skywave_bench::workload::ISODE_SIZES;

const HF_NATIVE: [Scenario; 4] = [
    Scenario::Hmtp5066 {
        compression: HmtpCompression::None,
        resume: true,
    },
    Scenario::Hmtp5066 {
        compression: HmtpCompression::Lzw16,
        resume: true,
    },
    Scenario::Hmtp5066 {
        compression: HmtpCompression::Deflate,
        resume: true,
    },
    Scenario::Cftp5066,
];

#[test]
fn quick_comparison_of_the_hf_native_scenarios_is_complete() {
    let mut spec = SweepSpec::quick();
    spec.scenarios = HF_NATIVE.to_vec();
    let mut runs = 0;
    let rows = run_sweep(&spec, |_, _, _| runs += 1);
    assert_eq!(runs, HF_NATIVE.len() * ISODE_SIZES.len());
    assert_eq!(rows.len(), HF_NATIVE.len() * ISODE_SIZES.len());
    for scenario in HF_NATIVE {
        let mut sizes: Vec<usize> = rows
            .iter()
            .filter(|r| r.point.scenario == scenario)
            .map(|r| r.point.size)
            .collect();
        sizes.sort_unstable();
        assert_eq!(sizes, ISODE_SIZES, "{scenario}");
    }
    for row in &rows {
        let s = row
            .stats
            .as_ref()
            .unwrap_or_else(|e| panic!("{}: {e}", row.point.label()));
        assert!(s.all_delivered(), "{}: {s:?}", row.point.label());
        assert!(s.seconds_mean > 0.0 && s.throughput_bps > 0.0, "{s:?}");
        // A clean channel: no ARQ repeats, and at least a submission and an answer.
        assert_eq!(s.retransmissions, 0.0, "{}", row.point.label());
        assert!(s.transmissions >= 2.0, "{}", row.point.label());
    }
    // Compression pays on the largest message: deflate well ahead of plain HMTP.
    let secs = |sc: Scenario| {
        rows.iter()
            .find(|r| r.point.scenario == sc && r.point.size == 135_604)
            .and_then(|r| r.stats.as_ref().ok())
            .map(|s| s.seconds_mean)
            .unwrap()
    };
    assert!(secs(HF_NATIVE[2]) * 2.0 < secs(HF_NATIVE[0]));

    let md = markdown(&rows);
    let lines: Vec<&str> = md.lines().collect();
    assert_eq!(lines.len(), rows.len() + 2);
    for c in COLUMNS {
        assert!(lines[0].contains(c), "{c}");
    }
    assert!(
        lines[2..]
            .iter()
            // Only the three TCP cells (profile, segments and bytes resent) are empty.
            .all(|l| l.ends_with(" 1/1 |") && l.matches('—').count() == 3),
        "{md}"
    );
    let text = csv(&rows);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), rows.len() + 1);
    for l in &lines[1..] {
        let fields: Vec<&str> = l.split(',').collect();
        assert_eq!(fields.len(), COLUMNS.len(), "{l}");
        let tcp_cells = ["tcp_profile", "tcp_resent", "tcp_resent_bytes"];
        assert!(
            fields
                .iter()
                .zip(COLUMNS)
                .all(|(f, c)| !f.is_empty() || tcp_cells.contains(&c)),
            "{l}"
        );
        assert_eq!(fields[COLUMNS.len() - 1], "1/1");
    }
}
