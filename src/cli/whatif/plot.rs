//! `whatif --plot`: every scenario's simulated busbw by size, one line each, as SVG.

use super::ScenarioOut;

pub(super) fn plot(
    path: &std::path::Path,
    kind: planner::schedule::CollectiveKind,
    out: &[ScenarioOut],
) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let pts: Vec<(String, Vec<(f64, f64)>)> = out
        .iter()
        .map(|s| {
            (
                s.scenario.clone(),
                s.cells
                    .iter()
                    .filter_map(|c| c.as_ref().ok())
                    .map(|c| (c.bytes as f64, c.busbw_gbps))
                    .collect(),
            )
        })
        .collect();
    let xmin = pts
        .iter()
        .flat_map(|p| p.1.iter().map(|x| x.0))
        .fold(f64::INFINITY, f64::min);
    let xmax = pts
        .iter()
        .flat_map(|p| p.1.iter().map(|x| x.0))
        .fold(0.0, f64::max);
    let ymax = pts
        .iter()
        .flat_map(|p| p.1.iter().map(|x| x.1))
        .fold(0.0, f64::max);
    if !xmin.is_finite() {
        return Err("no simulated point to plot".into());
    }
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{} busbw by size (simulated)", kind.name()),
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(
            (xmin..xmax.max(xmin * 2.0)).log_scale(),
            0.0..ymax * 1.1 + 1e-9,
        )?;
    chart
        .configure_mesh()
        .x_desc("size (bytes)")
        .y_desc("busbw (GB/s)")
        .x_label_formatter(&|x| crate::cli::sizes::size_label(*x))
        .draw()?;
    for (i, (name, p)) in pts.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(p.iter().copied(), color.stroke_width(2)))?
            .label(name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}
