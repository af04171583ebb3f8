//! SVG figures of a sweep, drawn with plotters:
//!
//! - throughput against SNR, one line per scenario (like NTIA Report 99-360 figures 5-8), one
//!   figure per channel, rate, interleaver, size and run length that was swept over two or more
//!   SNRs;
//! - delivery time against message size (both axes logarithmic), one line per scenario, one
//!   figure per channel, SNR, rate, interleaver and run length swept over two or more sizes.
//!
//! Only points that ran are drawn. Sits beside [`crate::report`], below the CLI.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use thiserror::Error;

use crate::sweep::Row;

/// A figure could not be written.
#[derive(Debug, Error)]
#[error("cannot draw {path}: {reason}")]
pub struct PlotError {
    /// The file being written.
    pub path: PathBuf,
    /// What went wrong.
    pub reason: String,
}

/// One line of a figure: a scenario name and its (x, y) points, sorted by x.
pub(crate) type Series = BTreeMap<String, Vec<(f64, f64)>>;

/// A line ready to draw: its name, its sorted points and its colour.
type Styled = (String, Vec<(f64, f64)>, RGBColor);

/// A line's name: the scenario, and for the TCP scenarios the TCP profile.
fn line_name(p: &crate::sweep::Point) -> String {
    if p.scenario.is_tcp() {
        format!("{} ({})", p.scenario.name(), p.tcp.profile_name())
    } else {
        p.scenario.name().to_string()
    }
}

/// Draws every figure the rows allow into `dir`; returns the files written.
pub fn write_plots(rows: &[Row], dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let mut files = Vec::new();
    // Throughput against SNR.
    let mut groups: BTreeMap<String, (String, Series)> = BTreeMap::new();
    for row in rows {
        let Ok(s) = &row.stats else { continue };
        let p = &row.point;
        let key = format!(
            "throughput-vs-snr_{}_{}bps_{}_{}B_x{}",
            p.channel, p.rate_bps, p.interleaver, p.size, p.count
        );
        let title = format!(
            "Throughput vs SNR: {}, {} bit/s, {} interleaver, {} B x {}",
            p.channel, p.rate_bps, p.interleaver, p.size, p.count
        );
        groups
            .entry(key)
            .or_insert_with(|| (title, Series::new()))
            .1
            .entry(line_name(p))
            .or_default()
            .push((p.snr_db, s.throughput_bps));
    }
    for (key, (title, series)) in groups {
        if distinct_x(&series) < 2 {
            continue;
        }
        let path = dir.join(format!("{}.svg", file_stem(&key)));
        draw(
            &path,
            &title,
            "SNR (dB in 3 kHz)",
            "throughput (bit/s)",
            &series,
            false,
        )?;
        files.push(path);
    }
    // Delivery time against size.
    let mut groups: BTreeMap<String, (String, Series)> = BTreeMap::new();
    for row in rows {
        let Ok(s) = &row.stats else { continue };
        if s.seconds_mean <= 0.0 {
            continue;
        }
        let p = &row.point;
        let key = format!(
            "time-vs-size_{}_{}dB_{}bps_{}_x{}",
            p.channel, p.snr_db, p.rate_bps, p.interleaver, p.count
        );
        let title = format!(
            "Delivery time vs size: {}, {} dB, {} bit/s, {} interleaver, x {}",
            p.channel, p.snr_db, p.rate_bps, p.interleaver, p.count
        );
        groups
            .entry(key)
            .or_insert_with(|| (title, Series::new()))
            .1
            .entry(line_name(p))
            .or_default()
            .push((p.size as f64, s.seconds_mean));
    }
    for (key, (title, series)) in groups {
        if distinct_x(&series) < 2 {
            continue;
        }
        let path = dir.join(format!("{}.svg", file_stem(&key)));
        draw(
            &path,
            &title,
            "message size (bytes)",
            "seconds",
            &series,
            true,
        )?;
        files.push(path);
    }
    Ok(files)
}

/// Axes, one line with dots per series, and the legend, on a chart of either axis kind
/// (linear or logarithmic: plotters gives them different types).
fn draw_lines<'a, DB, X, Y>(
    mut chart: ChartContext<'a, DB, Cartesian2d<X, Y>>,
    x_label: &str,
    y_label: &str,
    styled: &[Styled],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .draw()?;
    for (name, pts, color) in styled {
        let color = *color;
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
}

/// A tick label: whole numbers without decimals, small ones with one.
fn tick(v: f64) -> String {
    if v.abs() >= 10.0 || v == v.round() {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn distinct_x(series: &Series) -> usize {
    let mut xs: Vec<f64> = series.values().flatten().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    xs.len()
}

/// A file name from a group key: letters, digits, `-`, `_` and `.` kept, the rest `-`.
fn file_stem(key: &str) -> String {
    key.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

pub(crate) fn draw(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &Series,
    log: bool,
) -> Result<(), PlotError> {
    let fail = |e: &dyn std::fmt::Display| PlotError {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let points = || series.values().flatten();
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points() {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return Err(fail(&"no points"));
    }
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70);
    let styled: Vec<Styled> = series
        .iter()
        .enumerate()
        .map(|(i, (name, pts))| {
            let mut pts = pts.clone();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let c = Palette99::pick(i).to_rgba();
            (name.clone(), pts, RGBColor(c.0, c.1, c.2))
        })
        .collect();
    if log {
        let (x0, x1) = (x0.max(1.0) * 0.8, x1.max(1.0) * 1.25);
        let (y0, y1) = (y0.max(0.01) * 0.8, y1.max(0.01) * 1.25);
        let chart = builder
            .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
            .map_err(|e| fail(&e))?;
        draw_lines(chart, x_label, y_label, &styled).map_err(|e| fail(&e))?;
    } else {
        let pad = ((x1 - x0) * 0.05).max(0.5);
        let chart = builder
            .build_cartesian_2d((x0 - pad)..(x1 + pad), 0.0..(y1.max(1.0) * 1.1))
            .map_err(|e| fail(&e))?;
        draw_lines(chart, x_label, y_label, &styled).map_err(|e| fail(&e))?;
    }
    root.present().map_err(|e| fail(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::{Stats, SweepSpec};

    #[test]
    fn figures_are_written_for_swept_axes_only() {
        let mut spec = SweepSpec::quick();
        spec.snrs_db = vec![10.0, 20.0];
        spec.sizes = vec![386, 14025];
        let rows: Vec<Row> = spec
            .points()
            .into_iter()
            .map(|point| {
                let stats = if point.scenario.is_tcp() {
                    Err("not built".to_string())
                } else {
                    Ok(Stats {
                        runs: 1,
                        seconds_mean: point.size as f64 / 100.0,
                        throughput_bps: point.snr_db * 10.0,
                        delivered: 1,
                        expected: 1,
                        ..Stats::default()
                    })
                };
                Row { point, stats }
            })
            .collect();
        let dir = std::env::temp_dir().join(format!("skywave-bench-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = write_plots(&rows, &dir).unwrap();
        // Two sizes -> two throughput figures; two SNRs -> two time figures.
        assert_eq!(files.len(), 4, "{files:?}");
        for f in &files {
            let svg = std::fs::read_to_string(f).unwrap();
            assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"), "{f:?}");
            assert!(svg.contains("hmtp-5066-deflate"), "{f:?}");
            assert!(!svg.contains("smtp-tcp-modem"), "{f:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(file_stem("a b/c_1.5"), "a-b-c_1.5");
    }
}
