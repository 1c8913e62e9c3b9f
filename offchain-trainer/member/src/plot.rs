//! PNG loss plots (plotters, bitmap backend).

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

/// One curve: a label and (tokens, validation loss) points.
pub struct Curve<'a> {
    /// Legend label.
    pub label: &'a str,
    /// (tokens seen, validation loss in nats/token).
    pub points: &'a [(f64, f64)],
}

/// Draws validation loss against tokens for each curve into a 900×560 PNG at `path`.
pub fn loss_vs_tokens(path: &Path, title: &str, curves: &[Curve<'_>]) -> Result<()> {
    let all = curves.iter().flat_map(|c| c.points.iter());
    let (mut x_max, mut y_min, mut y_max) = (1.0f64, f64::MAX, f64::MIN);
    for (x, y) in all {
        x_max = x_max.max(*x);
        y_min = y_min.min(*y);
        y_max = y_max.max(*y);
    }
    if y_min > y_max {
        return Err(anyhow!("no points to plot"));
    }
    let pad = ((y_max - y_min) * 0.05).max(0.01);
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..x_max, (y_min - pad)..(y_max + pad))
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("tokens (all workers)")
        .y_desc("validation loss (nats/token)")
        .x_label_formatter(&|x| format!("{:.1}M", x / 1e6))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (i, c) in curves.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                c.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| anyhow!("{e}"))?
            .label(c.label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}
