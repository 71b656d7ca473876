//! PNG line charts drawn like the papers' figures (one line per protocol), with plotters' bitmap backend.
//!
//! Text is rendered with DejaVu Sans compiled into the binary (`assets/DejaVuSans.ttf`, Bitstream Vera
//! licence in `assets/DejaVuSans-LICENSE.txt`) through plotters' `ab_glyph` feature, so charts need no system
//! font library (plotters' default `ttf` feature would need fontconfig and freetype).

use anyhow::{Context, Result, anyhow};
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

fn register_font() {
    REGISTER.call_once(|| {
        for style in [FontStyle::Normal, FontStyle::Bold] {
            let parsed = plotters::style::register_font("sans-serif", style, FONT).is_ok();
            assert!(parsed, "the bundled font parses");
        }
    });
}

/// One line of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    /// `(x, y)` points, drawn in the order given.
    pub points: Vec<(f64, f64)>,
}

/// A line chart: title, axis labels and lines.
#[derive(Clone, Debug, PartialEq)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Start the y axis at zero (otherwise at the smallest value, less a margin).
    pub y_from_zero: bool,
    /// A dashed horizontal reference line at this y with its label (e.g. "COPS = 1").
    pub reference: Option<(f64, String)>,
    /// Where the legend goes.
    pub legend: Legend,
}

/// Where a chart's legend goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Legend {
    /// Inside the plot, upper left (for rising lines).
    UpperLeft,
    /// Inside the plot, lower left (for falling lines).
    LowerLeft,
    /// Beside the plot, in a column of its own, so that it never covers a point.
    Right,
}

/// Width of the column a [`Legend::Right`] legend takes, pixels.
const LEGEND_COLUMN_PX: u32 = 190;

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

fn range(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if from_zero {
        lo = lo.min(0.0);
    }
    let span = if hi > lo { hi - lo } else { hi.abs().max(1.0) };
    let lo = if from_zero && lo >= 0.0 { 0.0 } else { lo - span * 0.05 };
    (lo, hi + span * 0.08)
}

impl LineChart {
    /// Draw the chart as a `width` × `height` PNG at `path`.
    pub fn draw_png(&self, path: &Path, width: u32, height: u32) -> Result<()> {
        register_font();
        let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
        self.draw_on(&root).with_context(|| format!("drawing {}", path.display()))?;
        root.present().map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
        Ok(())
    }

    /// Draw `panels` side by side, `columns` to a row, as one `width` × `height` PNG at `path` (one panel per
    /// protocol family, say, so that no panel has more lines than there are distinguishable colours).
    pub fn draw_panels_png(panels: &[LineChart], columns: usize, path: &Path, width: u32, height: u32) -> Result<()> {
        register_font();
        let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
        let columns = columns.max(1);
        let rows = panels.len().div_ceil(columns).max(1);
        for (panel, area) in panels.iter().zip(root.split_evenly((rows, columns))) {
            panel.draw_on(&area).with_context(|| format!("drawing {} in {}", panel.title, path.display()))?;
        }
        root.present().map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
        Ok(())
    }

    fn draw_on(&self, area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>) -> Result<()> {
        let err = |e: DrawingAreaErrorKind<_>| anyhow!("{e}");
        area.fill(&WHITE).map_err(err)?;
        // A legend beside the plot gets a column of its own, drawn by hand: plotters clips its own legend to
        // the plotting area.
        let (width, _) = area.dim_in_pixel();
        let (root, legend_column) = if self.legend == Legend::Right && width > 2 * LEGEND_COLUMN_PX {
            let (plot, column) = area.split_horizontally(width - LEGEND_COLUMN_PX);
            (plot, Some(column))
        } else {
            (area.clone(), None)
        };
        let points = || self.series.iter().flat_map(|s| s.points.iter());
        let (x0, x1) = range(points().map(|p| p.0), true);
        let reference = self.reference.iter().map(|r| r.0);
        let (y0, y1) = range(points().map(|p| p.1).chain(reference), self.y_from_zero);
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(err)?;
        let (x_format, y_format) = (tick_format(x1 - x0), tick_format(y1 - y0));
        chart
            .configure_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .x_labels(6)
            .y_labels(8)
            .x_label_formatter(&x_format)
            .y_label_formatter(&y_format)
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 16))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        let mut keys: Vec<(String, ShapeStyle)> = Vec::new();
        if let Some((y, label)) = &self.reference {
            let style = ShapeStyle::from(&BLACK.mix(0.6)).stroke_width(1);
            chart
                .draw_series(DashedLineSeries::new(vec![(x0, *y), (x1, *y)], 6, 4, style))
                .map_err(err)?
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
            keys.push((label.clone(), style));
        }
        for (i, s) in self.series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let line = ShapeStyle::from(&color).stroke_width(2);
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), line))
                .map_err(err)?
                .label(s.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], line));
            chart
                .draw_series(s.points.iter().map(|p| Circle::new(*p, 4, ShapeStyle::from(&color).filled())))
                .map_err(err)?;
            keys.push((s.name.clone(), line));
        }
        if let Some(column) = legend_column {
            for (i, (name, style)) in keys.iter().enumerate() {
                let y = 56 + 24 * i as i32;
                column.draw(&PathElement::new(vec![(4, y), (28, y)], *style)).map_err(err)?;
                column.draw(&Circle::new((16, y), 4, style.filled())).map_err(err)?;
                column.draw(&Text::new(name.clone(), (34, y - 8), ("sans-serif", 15))).map_err(err)?;
            }
            return Ok(());
        }
        chart
            .configure_series_labels()
            .label_font(("sans-serif", 15))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .position(match self.legend {
                Legend::LowerLeft => SeriesLabelPosition::LowerLeft,
                Legend::UpperLeft | Legend::Right => SeriesLabelPosition::UpperLeft,
            })
            .draw()
            .map_err(err)?;
        Ok(())
    }
}

/// Tick labels with as many decimals as the axis's span needs (no "1000.02000.0" run-ons).
fn tick_format(span: f64) -> impl Fn(&f64) -> String {
    let decimals = if span >= 20.0 {
        0
    } else if span >= 2.0 {
        1
    } else {
        2
    };
    move |v: &f64| format!("{v:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_renders_to_a_png_with_text() {
        let dir = std::env::temp_dir().join(format!("snowline-chart-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("chart.png");
        let chart = LineChart {
            title: "Throughput vs p95 ROT latency".into(),
            x_label: "throughput (Kops/s)".into(),
            y_label: "p95 ROT latency (ms)".into(),
            series: vec![
                Series { name: "contrarian".into(), points: vec![(10.0, 0.3), (50.0, 0.4), (90.0, 1.2)] },
                Series { name: "cc-lo".into(), points: vec![(8.0, 0.2), (25.0, 0.9)] },
            ],
            y_from_zero: true,
            reference: Some((1.0, "reference".into())),
            legend: Legend::UpperLeft,
        };
        chart.draw_png(&path, 640, 420).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        std::fs::remove_dir_all(&dir).unwrap();
        // An empty chart still draws (axes only).
        let empty = LineChart { series: Vec::new(), reference: None, ..chart };
        let path = std::env::temp_dir().join(format!("snowline-chart-empty-{}.png", std::process::id()));
        empty.draw_png(&path, 320, 240).unwrap();
        std::fs::remove_file(&path).unwrap();
    }
}
