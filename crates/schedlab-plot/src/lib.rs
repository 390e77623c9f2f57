//! Plots as SVG and PNG (plotters): latency histograms and CDFs, per-CPU
//! utilisation over time, and comparison bars with spread whiskers.
//!
//! Every plot has a title, labelled axes with units and a legend where
//! there is more than one series. PNG text is drawn with DejaVu Sans,
//! embedded (assets/fonts, Bitstream Vera licence), so no system fonts or
//! font libraries are needed; SVG text is left to the viewer's fonts.
//!
//! The plotting layer of schedlab: it reads the results of the core crate
//! (`schedlab`) and only the programs that draw charts (the CLI) link it.

#![deny(missing_docs)]
#![deny(unreachable_pub)]

use std::path::{Path, PathBuf};

pub use hdrhistogram::Histogram;
use plotters::coord::Shift;
use plotters::prelude::*;

use schedlab::results::trace::Timeline;

const SIZE: (u32, u32) = (1024, 640);

static FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for style in [FontStyle::Normal, FontStyle::Bold] {
            assert!(plotters::style::register_font("sans-serif", style, FONT).is_ok(), "the embedded font is valid");
        }
    });
}

/// A chart in the house style: title, margin and the label areas' sizes.
fn framed<'a, 'b, DB: DrawingBackend>(root: &'a DrawingArea<DB, Shift>, title: impl AsRef<str>, label_areas: (u32, u32)) -> ChartBuilder<'a, 'b, DB> {
    let mut b = ChartBuilder::on(root);
    b.caption(title, ("sans-serif", 26)).margin(16).x_label_area_size(label_areas.0).y_label_area_size(label_areas.1);
    b
}

/// A chart that could not be written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlotError {
    /// The output directory cannot be created.
    #[error("{dir}: {err}")]
    Dir {
        /// The directory.
        dir: String,
        /// The I/O error.
        err: String,
    },
    /// The drawing backend failed (font, file, or encoder).
    #[error("plot: {0}")]
    Draw(String),
}

fn err<E: std::fmt::Debug>(e: E) -> PlotError {
    PlotError::Draw(format!("{e:?}"))
}

/// Colours that stay distinct in print and for common colour blindness
/// (Okabe-Ito).
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(240, 228, 66),
];

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Draws with `$f(&root, args...)` into `<base>.svg` and `<base>.png`;
/// evaluates to the two paths.
macro_rules! both {
    ($base:expr, $f:ident $(, $arg:expr)*) => {{
        register_font();
        let base: &Path = $base;
        if let Some(d) = base.parent() {
            std::fs::create_dir_all(d).map_err(|e| PlotError::Dir { dir: d.display().to_string(), err: e.to_string() })?;
        }
        let svg = base.with_extension("svg");
        let png = base.with_extension("png");
        {
            let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
            $f(&root $(, $arg)*)?;
            root.present().map_err(err)?;
        }
        {
            let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
            $f(&root $(, $arg)*)?;
            root.present().map_err(err)?;
        }
        Ok(vec![svg, png])
    }};
}

/// A series of a latency plot: its label and histogram (values in ns).
pub type LatencySeries<'a> = (String, &'a Histogram<u64>);

/// Log-spaced bins (10 per decade) of a histogram: (lower us, upper us, count).
fn log_bins(h: &Histogram<u64>) -> Vec<(f64, f64, u64)> {
    let mut bins: std::collections::BTreeMap<i64, u64> = Default::default();
    for v in h.iter_recorded() {
        let us = (v.value_iterated_to().max(1) as f64) / 1000.0;
        let b = (us.log10() * 10.0).floor() as i64;
        *bins.entry(b).or_default() += v.count_since_last_iteration();
    }
    bins.into_iter().map(|(b, c)| (10f64.powf(b as f64 / 10.0), 10f64.powf((b + 1) as f64 / 10.0), c)).collect()
}

fn latency_range(series: &[LatencySeries]) -> (f64, f64) {
    let lo = series.iter().filter(|s| !s.1.is_empty()).map(|s| s.1.min().max(1) as f64 / 1000.0).fold(f64::MAX, f64::min);
    let hi = series.iter().filter(|s| !s.1.is_empty()).map(|s| s.1.max().max(1) as f64 / 1000.0).fold(0.0, f64::max);
    if lo > hi {
        return (0.1, 10.0);
    }
    (lo / 1.5, hi * 1.5)
}

fn draw_hist<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, title: &str, series: &[LatencySeries]) -> Result<(), PlotError> {
    root.fill(&WHITE).map_err(err)?;
    let (lo, hi) = latency_range(series);
    let binned: Vec<Vec<(f64, f64, u64)>> = series.iter().map(|s| log_bins(s.1)).collect();
    let ymax = binned.iter().flatten().map(|b| b.2).max().unwrap_or(1).max(1) as f64;
    let mut chart = framed(root, title, (56, 80))
        .build_cartesian_2d((lo..hi).log_scale(), (0.8..ymax * 2.0).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("wakeup latency (µs, log scale)")
        .y_desc("samples per bin (log scale, 10 bins per decade)")
        .axis_desc_style(("sans-serif", 18))
        .label_style(("sans-serif", 15))
        .x_label_formatter(&|v| fmt_axis(*v))
        .y_label_formatter(&|v| fmt_axis(*v))
        .draw()
        .map_err(err)?;
    for (i, (s, bins)) in series.iter().zip(&binned).enumerate() {
        let c = color(i);
        // A step outline per series so that several overlay legibly.
        let mut pts: Vec<(f64, f64)> = Vec::new();
        for (j, &(a, b, n)) in bins.iter().enumerate() {
            // Adjacent bins share an edge: step, without dropping to the floor.
            if pts.last().is_none_or(|p| (p.0 - a).abs() > a * 1e-9) {
                pts.push((a, 0.8));
            }
            pts.push((a, n as f64));
            pts.push((b, n as f64));
            let next_adjacent = bins.get(j + 1).is_some_and(|nb| (nb.0 - b).abs() <= b * 1e-9);
            if !next_adjacent {
                pts.push((b, 0.8));
            }
        }
        chart
            .draw_series(std::iter::once(PathElement::new(pts, c.stroke_width(2))))
            .map_err(err)?
            .label(format!("{} ({} samples)", s.0, s.1.len()))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
    }
    legend(&mut chart)?;
    Ok(())
}

fn draw_cdf<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, title: &str, series: &[LatencySeries]) -> Result<(), PlotError> {
    root.fill(&WHITE).map_err(err)?;
    let (lo, hi) = latency_range(series);
    let mut chart = framed(root, title, (56, 80))
        .build_cartesian_2d((lo..hi).log_scale(), 0.0..100.0)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("wakeup latency (µs, log scale)")
        .y_desc("samples at or below (%)")
        .axis_desc_style(("sans-serif", 18))
        .label_style(("sans-serif", 15))
        .x_label_formatter(&|v| fmt_axis(*v))
        .y_label_formatter(&|v| fmt_axis(*v))
        .draw()
        .map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        let c = color(i);
        let total = s.1.len().max(1) as f64;
        let mut acc = 0u64;
        let mut pts = Vec::new();
        for v in s.1.iter_recorded() {
            let x = v.value_iterated_to().max(1) as f64 / 1000.0;
            pts.push((x, acc as f64 * 100.0 / total));
            acc += v.count_at_value();
            pts.push((x, acc as f64 * 100.0 / total));
        }
        let p99 = s.1.value_at_quantile(0.99) as f64 / 1000.0;
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(err)?
            .label(format!("{} (p99 {})", s.0, schedlab::engine::time::fmt_ns((p99 * 1000.0) as u64)))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
    }
    legend(&mut chart)?;
    Ok(())
}

fn legend<'a, DB: DrawingBackend + 'a, X: Ranged, Y: Ranged>(chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>) -> Result<(), PlotError> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(err)
}

/// 0.5, 2, 10, 1.5k, 2M: short tick labels.
fn fmt_axis(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = if v.abs() >= 100.0 { format!("{v:.0}") } else if v.abs() >= 1.0 { format!("{v:.1}") } else { format!("{v:.2}") };
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
}

/// Latency histogram: `<base>.svg` and `<base>.png`.
pub fn latency_histogram(base: &Path, title: &str, series: &[LatencySeries]) -> Result<Vec<PathBuf>, PlotError> {
    both!(base, draw_hist, title, series)
}

/// Latency CDF: `<base>.svg` and `<base>.png`.
pub fn latency_cdf(base: &Path, title: &str, series: &[LatencySeries]) -> Result<Vec<PathBuf>, PlotError> {
    both!(base, draw_cdf, title, series)
}

/// Heat colour for a busy fraction: white (idle) to dark blue (busy).
fn heat(u: f64) -> RGBColor {
    let u = u.clamp(0.0, 1.0);
    let lerp = |a: f64, b: f64| (a + (b - a) * u).round() as u8;
    RGBColor(lerp(247.0, 8.0), lerp(251.0, 48.0), lerp(255.0, 107.0))
}

fn draw_util<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, title: &str, tl: &Timeline) -> Result<(), PlotError> {
    root.fill(&WHITE).map_err(err)?;
    let (main, bar) = root.split_horizontally(SIZE.0 - 110);
    let n = tl.busy_ns.len().max(1);
    let buckets = tl.nr_buckets().max(1);
    let ms = |i: usize| (i as u64 * tl.bucket_ns) as f64 / 1e6;
    let mut chart = framed(&main, title, (56, 70))
        .build_cartesian_2d(0.0..ms(buckets), 0.0..n as f64)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc(format!("simulated time (ms; {} per column)", schedlab::engine::time::fmt_ns(tl.bucket_ns)))
        .y_desc("CPU")
        .axis_desc_style(("sans-serif", 18))
        .label_style(("sans-serif", 15))
        .y_labels(n.min(32))
        .y_label_formatter(&|v| format!("{}", v.floor() as i64))
        .draw()
        .map_err(err)?;
    let cells = (0..n).flat_map(|c| (0..buckets).map(move |i| (c, i)));
    chart
        .draw_series(cells.map(|(c, i)| Rectangle::new([(ms(i), c as f64), (ms(i + 1), c as f64 + 1.0)], heat(tl.util(c, i)).filled())))
        .map_err(err)?;
    // Colour scale.
    let mut scale = ChartBuilder::on(&bar)
        .margin_top(60)
        .margin_bottom(72)
        .margin_right(10)
        .y_label_area_size(50)
        .caption("busy %", ("sans-serif", 16))
        .build_cartesian_2d(0.0..1.0, 0.0..100.0)
        .map_err(err)?;
    scale.configure_mesh().disable_mesh().disable_x_axis().label_style(("sans-serif", 14)).y_label_formatter(&|v| fmt_axis(*v)).draw().map_err(err)?;
    scale
        .draw_series((0..100).map(|p| Rectangle::new([(0.0, p as f64), (1.0, p as f64 + 1.0)], heat(p as f64 / 100.0).filled())))
        .map_err(err)?;
    Ok(())
}

/// Per-CPU utilisation over time as a heat map.
pub fn utilisation(base: &Path, title: &str, tl: &Timeline) -> Result<Vec<PathBuf>, PlotError> {
    both!(base, draw_util, title, tl)
}

/// A bar chart's data: categories along x, and per series one value per
/// category with an optional (low, high) whisker.
/// One bar: its value and an optional (low, high) whisker.
pub type Bar = (f64, Option<(f64, f64)>);

/// A grouped bar chart.
pub struct Bars {
    /// The chart's title.
    pub title: String,
    /// The y axis' label.
    pub y_desc: String,
    /// One group of bars per category (x axis).
    pub categories: Vec<String>,
    /// (series name, one bar per category).
    pub series: Vec<(String, Vec<Bar>)>,
}

fn draw_bars<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, b: &Bars) -> Result<(), PlotError> {
    root.fill(&WHITE).map_err(err)?;
    let ncat = b.categories.len().max(1);
    let nser = b.series.len().max(1);
    let ymax = b.series.iter().flat_map(|s| s.1.iter()).map(|(v, w)| w.map_or(*v, |w| w.1.max(*v))).fold(0.0, f64::max);
    let ymax = if ymax > 0.0 { ymax * 1.3 } else { 1.0 };
    let cats = b.categories.clone();
    let mut chart = framed(root, &b.title, (70, 80))
        .build_cartesian_2d(0.0..ncat as f64, 0.0..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(ncat * 2 + 1)
        .x_label_formatter(&|x| {
            // Label the centre of each category only.
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 1e-6 { cats.get(i).cloned().unwrap_or_default() } else { String::new() }
        })
        .y_desc(b.y_desc.as_str())
        .axis_desc_style(("sans-serif", 18))
        .label_style(("sans-serif", 15))
        .y_label_formatter(&|v| fmt_axis(*v))
        .draw()
        .map_err(err)?;
    let width = 0.8 / nser as f64;
    for (si, (name, vals)) in b.series.iter().enumerate() {
        let c = color(si);
        let x0 = |ci: usize| ci as f64 + 0.1 + si as f64 * width;
        chart
            .draw_series(vals.iter().enumerate().map(|(ci, (v, _))| Rectangle::new([(x0(ci), 0.0), (x0(ci) + width * 0.9, *v)], c.filled())))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()));
        chart
            .draw_series(vals.iter().enumerate().filter_map(|(ci, (_, w))| {
                w.map(|(lo, hi)| {
                    let xm = x0(ci) + width * 0.45;
                    ErrorBar::new_vertical(xm, lo, (lo + hi) / 2.0, hi, BLACK.stroke_width(2), 10)
                })
            }))
            .map_err(err)?;
    }
    if nser > 1 || b.series.iter().any(|s| !s.0.is_empty()) {
        legend(&mut chart)?;
    }
    Ok(())
}

/// A grouped bar chart with optional whiskers.
pub fn bars(base: &Path, b: &Bars) -> Result<Vec<PathBuf>, PlotError> {
    both!(base, draw_bars, b)
}

/// A file-name-safe form of a label.
pub fn slug(s: &str) -> String {
    let mut out: String = s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect();
    while out.contains("--") {
        out = out.replace("--", "-");
    }
    out.trim_matches('-').to_string()
}
