//! The chart sweeps (`a2a-fanout chart`): events/s per transport and
//! durability at N = 32, and p99 latency against the number of delegates,
//! each point a short run; written as SVG with `plotters`, with every
//! point's report in `results.json` and a Markdown table (with each run's
//! busiest thread) on stdout.

use crate::report::Report;
use crate::run::{run, Config, Durability, FanoutError, Transport};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::path::Path;

/// What the sweeps measure.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub seconds: f64,
    pub sizes: Vec<usize>,
    pub transports: Vec<Transport>,
    pub progress: bool,
}

/// Runs both sweeps, writes the charts into `out`, returns every report.
pub fn sweep(s: &Sweep, out: &Path) -> Result<Vec<Report>, FanoutError> {
    std::fs::create_dir_all(out)?;
    let mut reports = Vec::new();
    let point = |t, d, n| -> Result<Report, FanoutError> {
        let mut c = Config::new(t, d, n);
        c.tasks = None;
        c.seconds = Some(s.seconds);
        c.progress = s.progress;
        let r = run(&c)?;
        eprintln!(
            "a2a-fanout chart: {} {} N={}: {:.0} events/s, p99 {:.2} ms, checks {}",
            r.transport_label(),
            r.durability,
            n,
            r.events_per_s,
            r.latency.p99_us as f64 / 1000.0,
            if r.checks.passed { "pass" } else { "FAIL" }
        );
        Ok(r)
    };
    for d in [Durability::Normal, Durability::Full] {
        for &t in &s.transports {
            reports.push(point(t, d, 32)?);
        }
    }
    for d in [Durability::Normal, Durability::Full] {
        for &n in &s.sizes {
            if n == 32 {
                continue;
            }
            reports.push(point(Transport::SocketBinary, d, n)?);
        }
    }
    transports_chart(&reports, &out.join("events-per-transport.svg"))?;
    latency_chart(&reports, &out.join("p99-vs-delegates.svg"))?;
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&reports).unwrap_or_default(),
    )?;
    Ok(reports)
}

fn draw_err<E: std::fmt::Debug>(e: E) -> FanoutError {
    FanoutError::Io(std::io::Error::other(format!("drawing: {e:?}")))
}

/// What both charts draw on: f64 by f64 in an SVG file.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// What drawing a chart's series gives.
type Drawn = Result<(), FanoutError>;

/// One 900x520 SVG chart at `path`, titled `title`, over `x` by 0..`top`:
/// `series` draws its axes and series, then the legend goes at `legend`
/// and the file is written.
fn svg_chart(
    path: &Path,
    title: &str,
    x: std::ops::Range<f64>,
    top: f64,
    legend: SeriesLabelPosition,
    series: impl FnOnce(&mut Chart<'_, '_>) -> Drawn,
) -> Drawn {
    let root = SVGBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x, 0f64..top)
        .map_err(draw_err)?;
    series(&mut chart)?;
    chart
        .configure_series_labels()
        .position(legend)
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(draw_err)?;
    root.present().map_err(draw_err)?;
    Ok(())
}

/// Grouped bars: events/s per transport, one bar per durability.
fn transports_chart(reports: &[Report], path: &Path) -> Result<(), FanoutError> {
    let rows: Vec<&Report> = reports.iter().filter(|r| r.delegates == 32).collect();
    let mut names: Vec<String> = Vec::new();
    for r in &rows {
        if !names.contains(&r.transport_label()) {
            names.push(r.transport_label());
        }
    }
    let top = rows.iter().map(|r| r.events_per_s).fold(1.0, f64::max) * 1.15;
    let title = "a2a-fanout: events/s per transport (N = 32 delegates)";
    let x = 0f64..names.len() as f64;
    // The legend where plotters puts it by default.
    svg_chart(
        path,
        title,
        x,
        top,
        SeriesLabelPosition::MiddleRight,
        |chart| transports_bars(chart, &rows, &names),
    )
}

/// The bars and axes of [`transports_chart`].
fn transports_bars(chart: &mut Chart<'_, '_>, rows: &[&Report], names: &[String]) -> Drawn {
    let labels = names.to_vec();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(names.len() * 2 + 1)
        .x_label_formatter(&move |x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 0.01 && i < labels.len() {
                labels[i].clone()
            } else {
                String::new()
            }
        })
        .y_desc("events/s")
        .draw()
        .map_err(draw_err)?;
    for (k, (d, color)) in [("normal", BLUE), ("full", RED)].into_iter().enumerate() {
        let bars: Vec<Rectangle<(f64, f64)>> = rows
            .iter()
            .filter(|r| r.durability == d)
            .filter_map(|r| {
                let i = names.iter().position(|n| *n == r.transport_label())? as f64;
                let x0 = i + 0.12 + 0.38 * k as f64;
                Some(Rectangle::new(
                    [(x0, 0.0), (x0 + 0.36, r.events_per_s)],
                    color.filled(),
                ))
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(draw_err)?
            .label(format!("durability {d}"))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    Ok(())
}

/// Lines: p99 latency (ms) against N, socket-binary, per durability;
/// every event, and job events only.
fn latency_chart(reports: &[Report], path: &Path) -> Result<(), FanoutError> {
    let rows: Vec<&Report> = reports
        .iter()
        .filter(|r| r.transport == "socket-binary")
        .collect();
    let mut sizes: Vec<usize> = rows.iter().map(|r| r.delegates).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let top = rows
        .iter()
        .map(|r| r.latency.p99_us.max(r.job_latency.p99_us) as f64 / 1000.0)
        .fold(1.0, f64::max)
        * 1.2;
    let title = "a2a-fanout: p99 send-to-event latency vs delegates (socket-binary)";
    let x = -0.5f64..sizes.len() as f64 - 0.5;
    svg_chart(
        path,
        title,
        x,
        top,
        SeriesLabelPosition::UpperLeft,
        |chart| latency_lines(chart, &rows, &sizes),
    )
}

/// The lines and axes of [`latency_chart`].
fn latency_lines(chart: &mut Chart<'_, '_>, rows: &[&Report], sizes: &[usize]) -> Drawn {
    let ticks = sizes.to_vec();
    chart
        .configure_mesh()
        .x_labels(sizes.len() * 4 + 1)
        .x_label_formatter(&move |x| {
            let i = x.round();
            if (x - i).abs() < 0.01 && i >= 0.0 && (i as usize) < ticks.len() {
                format!("N = {}", ticks[i as usize])
            } else {
                String::new()
            }
        })
        .x_desc("delegates")
        .y_desc("p99 latency, ms")
        .draw()
        .map_err(draw_err)?;
    let series: [(&str, bool, RGBColor); 4] = [
        ("normal", false, BLUE),
        ("full", false, RED),
        ("normal", true, CYAN),
        ("full", true, MAGENTA),
    ];
    for (d, jobs, color) in series {
        let mut pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.durability == d)
            .filter_map(|r| {
                let i = sizes.iter().position(|&n| n == r.delegates)? as f64;
                let l = if jobs { &r.job_latency } else { &r.latency };
                Some((i, l.p99_us as f64 / 1000.0))
            })
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let what = if jobs {
            "job events"
        } else {
            "all events (claims too, with --workload claims)"
        };
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(draw_err)?
            .label(format!("durability {d}, {what}"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))
            .map_err(draw_err)?;
    }
    Ok(())
}

/// The Markdown table of the sweep, with each run's busiest thread.
pub fn markdown(reports: &[Report]) -> String {
    let mut s = String::from(
        "| transport | durability | N | events/s | tasks/s | p50 ms | p99 ms | jobs p99 ms | checks | busiest thread |\n|---|---|---:|---:|---:|---:|---:|---:|---|---|\n",
    );
    for r in reports {
        s.push_str(&format!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {} | {} |\n",
            r.transport_label(),
            r.durability,
            r.delegates,
            r.events_per_s,
            r.tasks_per_s,
            r.latency.p50_us as f64 / 1000.0,
            r.latency.p99_us as f64 / 1000.0,
            r.job_latency.p99_us as f64 / 1000.0,
            if r.checks.passed { "pass" } else { "FAIL" },
            r.bottleneck.clone().unwrap_or_default()
        ));
    }
    s
}
