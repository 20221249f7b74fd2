//! SVG plots of `rqvs replay` time series (plotters, SVG backend only).
//!
//! Stacked panels sharing the time axis (seconds of PMD time): throughput (Mpps); upcalls/s and
//! megaflow deletions/s; megaflows and masks installed; the learned model's coverage (%). Panels
//! with nothing to show (e.g. megaflows in CFLOWS, coverage in ORIG) are left out. Rule updates
//! are marked with a vertical line in every panel, so the plot reads without the JSON.
//! [`compare`] draws several designs' throughput and coverage in one plot; [`xy_panels`] draws
//! any named (x, y) lines in a grid of panels (`rqvs coflows`).

use std::path::Path;

use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::Failure;

/// One sample of the series (the fields `replay` records).
pub trait Point {
    fn t(&self) -> f64;
    fn values(&self) -> [f64; 7]; // mpps, upcalls/s, deletions/s, megaflows, masks, lost, coverage %
}

fn err<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> Failure + '_ {
    move |e| Failure(format!("{}: cannot draw plot: {e}", path.display()))
}

/// One panel: y label and its lines (value index, name, colour).
type Panel = (&'static str, Vec<(usize, &'static str, RGBColor)>);

/// Line colours, in order of the lines of a panel.
const COLOURS: [RGBColor; 8] = [BLUE, RED, GREEN, MAGENTA, BLACK, CYAN, RGBColor(255, 140, 0), RGBColor(128, 0, 128)];
/// The colour of the vertical marks of rule updates.
const MARK: RGBColor = RGBColor(150, 150, 150);

/// An SVG of `size` with `title`, white.
fn canvas<'a>(path: &'a Path, size: (u32, u32), title: &str) -> Result<DrawingArea<SVGBackend<'a>, Shift>, Failure> {
    let e = err(path);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(&e)?;
    root.titled(title, ("sans-serif", 18)).map_err(&e)
}

/// A panel's chart on `area`, with the margins every plot uses.
fn chart_on<'a, 'b>(area: &'a DrawingArea<SVGBackend<'b>, Shift>) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(area);
    b.margin(8).x_label_area_size(30).y_label_area_size(70);
    b
}

/// Vertical marks at the times of rule updates, from `lo` to `hi`.
fn draw_marks<'a, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
    marks: &[f64],
    (lo, hi): (f64, f64),
    path: &Path,
) -> Result<(), Failure>
where
    Y: Ranged<ValueType = f64>,
{
    for &m in marks {
        chart.draw_series(LineSeries::new(vec![(m, lo), (m, hi)], MARK)).map_err(err(path))?;
    }
    Ok(())
}

/// The legend every plot draws.
fn legend<'a, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
    position: SeriesLabelPosition,
    path: &Path,
) -> Result<(), Failure>
where
    Y: Ranged<ValueType = f64>,
{
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(position)
        .draw()
        .map_err(err(path))
}

/// Draws the time series with rule updates (their `at_s`) marked.
pub fn time_series<P: Point>(
    path: &Path,
    title: &str,
    series: &[P],
    updates: &[serde_json::Value],
) -> Result<(), Failure> {
    let e = err(path);
    let root = canvas(path, (1000, 900), title)?;
    let tmax = series.last().map_or(1.0, |p| p.t()).max(0.1);
    let marks: Vec<f64> = updates.iter().filter_map(|u| u["at_s"].as_f64()).collect();
    let specs: Vec<Panel> = vec![
        ("Mpps", vec![(0, "throughput (Mpps)", BLUE)]),
        ("per second", vec![(1, "upcalls/s", RED), (2, "megaflow deletions/s", MAGENTA)]),
        ("count", vec![(3, "megaflows", GREEN), (4, "masks (x100)", BLACK)]),
        ("%", vec![(6, "coverage (%)", CYAN)]),
    ];
    // The throughput panel always; the others when they have something to show.
    let specs: Vec<Panel> = specs
        .into_iter()
        .enumerate()
        .filter(|(k, (_, lines))| *k == 0 || series.iter().any(|p| lines.iter().any(|&(i, _, _)| p.values()[i] != 0.0)))
        .map(|(_, s)| s)
        .collect();
    let panels = root.split_evenly((specs.len(), 1));
    for (area, (ylabel, lines)) in panels.iter().zip(specs) {
        let scale = |i: usize| if i == 4 { 100.0 } else { 1.0 };
        let ymax = series
            .iter()
            .flat_map(|p| lines.iter().map(|&(i, _, _)| p.values()[i] * scale(i)).collect::<Vec<_>>())
            .fold(0.0f64, f64::max)
            .max(1e-9)
            * 1.1;
        let mut chart = chart_on(area).build_cartesian_2d(0f64..tmax, 0f64..ymax).map_err(&e)?;
        chart.configure_mesh().x_desc("PMD time (s)").y_desc(ylabel).draw().map_err(&e)?;
        for &(i, name, colour) in &lines {
            chart
                .draw_series(LineSeries::new(series.iter().map(|p| (p.t(), p.values()[i] * scale(i))), colour))
                .map_err(&e)?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        }
        draw_marks(&mut chart, &marks, (0.0, ymax), path)?;
        legend(&mut chart, SeriesLabelPosition::UpperRight, path)?;
    }
    root.present().map_err(&e)?;
    Ok(())
}

/// Several designs in one plot: throughput (top) and coverage (bottom) over PMD time, rule
/// updates (their `at_s`, from the first run) marked.
pub fn compare<P: Point>(
    path: &Path,
    title: &str,
    runs: &[(&str, &[P])],
    updates: &[serde_json::Value],
) -> Result<(), Failure> {
    let marks: Vec<f64> = updates.iter().filter_map(|u| u["at_s"].as_f64()).collect();
    let e = err(path);
    let root = canvas(path, (1000, 700), title)?;
    let panels = root.split_evenly((2, 1));
    let tmax = runs.iter().filter_map(|(_, s)| s.last().map(|p| p.t())).fold(0.1, f64::max);
    for (area, (ylabel, i)) in panels.iter().zip([("Mpps (log)", 0usize), ("coverage (%)", 6)]) {
        let ymax = runs.iter().flat_map(|(_, s)| s.iter().map(|p| p.values()[i])).fold(1e-3, f64::max) * 1.2;
        let mut chart = chart_on(area).build_cartesian_2d(0f64..tmax, (1e-3f64..ymax).log_scale()).map_err(&e)?;
        chart.configure_mesh().x_desc("PMD time (s)").y_desc(ylabel).draw().map_err(&e)?;
        for (k, (name, s)) in runs.iter().enumerate() {
            let colour = COLOURS[k % 5];
            chart
                .draw_series(LineSeries::new(s.iter().map(|p| (p.t(), p.values()[i].max(1e-3))), colour))
                .map_err(&e)?
                .label(*name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        }
        draw_marks(&mut chart, &marks, (1e-3, ymax), path)?;
        legend(&mut chart, SeriesLabelPosition::LowerRight, path)?;
    }
    root.present().map_err(&e)?;
    Ok(())
}

/// One panel of [`xy_panels`]: axis descriptions, a logarithmic y axis or not, named lines.
pub struct XyPanel {
    pub x_desc: String,
    pub y_desc: String,
    pub log_y: bool,
    pub lines: Vec<(String, Vec<(f64, f64)>)>,
}

/// Panels of named (x, y) lines with point markers, `cols` panels per row, in the style of the
/// time series (colours by line order). A `log_y` panel is drawn on a logarithmic axis when its
/// values span more than a factor of 10 (values below the smallest positive one drawn at it),
/// on a linear one otherwise.
pub fn xy_panels(path: &Path, title: &str, cols: usize, panels: &[XyPanel]) -> Result<(), Failure> {
    let e = err(path);
    let cols = cols.max(1);
    let rows = panels.len().div_ceil(cols).max(1);
    let root = canvas(path, (600 * cols as u32, 330 * rows as u32), title)?;
    for (area, p) in root.split_evenly((rows, cols)).iter().zip(panels) {
        let xs = p.lines.iter().flat_map(|(_, v)| v.iter().map(|q| q.0));
        let (xmin, xmax) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
        let (xmin, xmax) = if xmin < xmax { (xmin, xmax) } else { (xmin.min(0.0), xmin.max(0.0) + 1.0) };
        let ys: Vec<f64> = p.lines.iter().flat_map(|(_, v)| v.iter().map(|q| q.1)).collect();
        let ymax = ys.iter().copied().fold(0.0f64, f64::max).max(1e-9);
        let mut chart = chart_on(area);
        let floor = ys.iter().copied().filter(|&y| y > 0.0).fold(ymax, f64::min);
        if p.log_y && ymax / floor > 10.0 {
            let mut c = chart.build_cartesian_2d(xmin..xmax, (floor * 0.8..ymax * 1.5).log_scale()).map_err(&e)?;
            draw_lines(&mut c, p, floor, path)?;
        } else {
            let mut c = chart.build_cartesian_2d(xmin..xmax, 0f64..ymax * 1.1).map_err(&e)?;
            draw_lines(&mut c, p, f64::MIN, path)?;
        }
    }
    root.present().map_err(&e)?;
    Ok(())
}

fn draw_lines<'a, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
    p: &XyPanel,
    floor: f64,
    path: &Path,
) -> Result<(), Failure>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let e = err(path);
    chart.configure_mesh().x_desc(p.x_desc.as_str()).y_desc(p.y_desc.as_str()).draw().map_err(&e)?;
    for (k, (name, pts)) in p.lines.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().map(|&(x, y)| (x, y.max(floor))), colour).point_size(3))
            .map_err(&e)?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
    }
    legend(chart, SeriesLabelPosition::UpperRight, path)
}
