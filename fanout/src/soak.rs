//! The soak mode (`--soak`): a long run that watches the broker it started.
//! Every few seconds it samples the broker's resident memory (`VmRSS` of
//! `/proc/PID/status`), the sizes of the database and its `-wal`, and the
//! bytes the broker had written (`write_bytes` of `/proc/PID/io`: what
//! reached the block layer, log and database alike), prints each sample as
//! it goes, and keeps sampling for a while after the load stops. The
//! [`SoakReport`] sums them up (largest log, bytes written per job, the
//! resident memory's slope by least squares after a warm-up) and
//! [`chart`] draws them. The bytes are also split by thread: those of the
//! broker's checkpoint thread ([`CHECKPOINT_THREAD`], `/proc/PID/task/TID/io`)
//! went to the database file, nearly all the rest is the writer's log.

use crate::error::FanoutError;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a soak samples, and how.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    /// Time between two samples.
    pub every: Duration,
    /// Samples before this are left out of the slope and the per-job
    /// figures (start-up: caches filling, the allocator's arenas growing).
    pub warmup: Duration,
    /// How long sampling goes on after the load stopped.
    pub idle: Duration,
    /// Print each sample on stderr.
    pub print: bool,
    /// Where to write `soak.svg` and `soak.json` (nothing if `None`).
    pub out_dir: Option<PathBuf>,
}

impl Default for SoakConfig {
    fn default() -> Self {
        SoakConfig {
            every: Duration::from_secs(5),
            warmup: Duration::from_secs(60),
            idle: Duration::from_secs(10),
            print: true,
            out_dir: None,
        }
    }
}

/// One sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the sampling began.
    pub t_s: f64,
    /// Whether the load was still running: new jobs being started (the
    /// drain of the jobs in flight after `--seconds`, and the idle tail,
    /// are not).
    pub loaded: bool,
    pub rss_bytes: u64,
    pub wal_bytes: u64,
    pub db_bytes: u64,
    /// The broker's `write_bytes` so far.
    pub write_bytes: u64,
    /// Of those, its checkpoint thread's: the database file (absent from
    /// soak.json files written before it was sampled).
    #[serde(default)]
    pub checkpoint_write_bytes: u64,
    /// Jobs completed so far, and events received.
    pub jobs: u64,
    pub events: u64,
}

/// A soak's samples and what they add up to.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SoakReport {
    pub every_s: f64,
    pub warmup_s: f64,
    pub samples: Vec<Sample>,
    /// The largest `-wal` and database file seen.
    pub max_wal_bytes: u64,
    pub max_db_bytes: u64,
    /// Resident memory's growth under load after the warm-up, MB per
    /// minute, by least squares (`None`: fewer than three samples).
    pub rss_slope_mb_per_min: Option<f64>,
    /// Resident memory at the first sample after the warm-up, at the last
    /// under load, and at the last one after the load stopped.
    pub rss_after_warmup: u64,
    pub rss_end_of_load: u64,
    pub rss_after_idle: u64,
    /// Bytes the broker wrote per completed job after the warm-up.
    pub bytes_per_job: Option<f64>,
    /// Of those, the checkpoint thread's (the database file).
    #[serde(default)]
    pub checkpoint_bytes_per_job: Option<f64>,
    /// Jobs completed per second after the warm-up.
    pub jobs_per_s: Option<f64>,
}

const MB: f64 = 1024.0 * 1024.0;

impl SoakReport {
    pub fn of(samples: Vec<Sample>, every: Duration, warmup: Duration) -> SoakReport {
        let w = warmup.as_secs_f64();
        let steady: Vec<&Sample> = samples.iter().filter(|s| s.loaded && s.t_s >= w).collect();
        let pts: Vec<(f64, f64)> = steady
            .iter()
            .map(|s| (s.t_s / 60.0, s.rss_bytes as f64 / MB))
            .collect();
        let (first, last) = (steady.first(), steady.last());
        let per_job_of = |bytes: fn(&Sample) -> u64| {
            first.zip(last).and_then(|(a, b)| {
                let jobs = b.jobs.saturating_sub(a.jobs);
                (jobs > 0).then(|| bytes(b).saturating_sub(bytes(a)) as f64 / jobs as f64)
            })
        };
        let per_job = per_job_of(|s| s.write_bytes);
        let checkpoint_per_job = per_job_of(|s| s.checkpoint_write_bytes);
        let jobs_per_s = first.zip(last).and_then(|(a, b)| {
            let dt = b.t_s - a.t_s;
            (dt > 0.0).then(|| b.jobs.saturating_sub(a.jobs) as f64 / dt)
        });
        SoakReport {
            every_s: every.as_secs_f64(),
            warmup_s: w,
            max_wal_bytes: samples.iter().map(|s| s.wal_bytes).max().unwrap_or(0),
            max_db_bytes: samples.iter().map(|s| s.db_bytes).max().unwrap_or(0),
            rss_slope_mb_per_min: slope(&pts),
            rss_after_warmup: first.map_or(0, |s| s.rss_bytes),
            rss_end_of_load: last.map_or(0, |s| s.rss_bytes),
            rss_after_idle: samples.last().map_or(0, |s| s.rss_bytes),
            bytes_per_job: per_job,
            checkpoint_bytes_per_job: checkpoint_per_job,
            jobs_per_s,
            samples,
        }
    }

    /// A few lines for the end of the run.
    pub fn summary(&self) -> String {
        let mb = |b: u64| b as f64 / MB;
        format!(
            "soak: largest -wal {:.1} MB, largest database {:.1} MB; after the {:.0} s warm-up: {} bytes written per job ({} by the checkpoint thread), {} jobs/s, RSS {:.1} MB -> {:.1} MB under load (slope {} MB/min), {:.1} MB after the load stopped",
            mb(self.max_wal_bytes),
            mb(self.max_db_bytes),
            self.warmup_s,
            self.bytes_per_job.map_or("-".into(), |b| format!("{b:.0}")),
            self.checkpoint_bytes_per_job
                .map_or("-".into(), |b| format!("{b:.0}")),
            self.jobs_per_s.map_or("-".into(), |j| format!("{j:.0}")),
            mb(self.rss_after_warmup),
            mb(self.rss_end_of_load),
            self.rss_slope_mb_per_min
                .map_or("-".into(), |s| format!("{s:.2}")),
            mb(self.rss_after_idle),
        )
    }
}

/// The least-squares slope of `pts` (`None` for fewer than three points
/// or no spread in x).
pub fn slope(pts: &[(f64, f64)]) -> Option<f64> {
    if pts.len() < 3 {
        return None;
    }
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// A number field (`Name:   123 kB`) of `/proc/PID/status` or `/proc/PID/io`.
fn field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The name the broker gives its checkpoint thread (`store::checkpoint`).
pub const CHECKPOINT_THREAD: &str = "a2a-checkpoint";

/// The `write_bytes` summed over the threads named `name` in `task_dir`
/// (`/proc/PID/task`: one directory per thread, with `comm` and `io`).
/// A thread that has exited is no longer there: sample it while it lives.
pub fn thread_write_bytes(task_dir: &Path, name: &str) -> u64 {
    let Ok(dir) = std::fs::read_dir(task_dir) else {
        return 0;
    };
    dir.flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == name)
        })
        .filter_map(|t| std::fs::read_to_string(t.path().join("io")).ok())
        .filter_map(|io| field(&io, "write_bytes"))
        .sum()
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

/// The sampling thread.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    loaded: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<Vec<Sample>>>,
    cfg: SoakConfig,
}

impl Sampler {
    /// Samples broker `pid` on database `db` from now on, for a load that
    /// starts new jobs for `load_for` (`None`: until [`Sampler::finish`]);
    /// `progress` gives (jobs completed, events) so far.
    pub fn start(
        pid: u32,
        db: PathBuf,
        cfg: &SoakConfig,
        load_for: Option<Duration>,
        progress: impl Fn() -> (u64, u64) + Send + 'static,
    ) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let loaded = Arc::new(AtomicBool::new(true));
        let (s, l) = (stop.clone(), loaded.clone());
        let (every, print) = (cfg.every, cfg.print);
        let handle = std::thread::spawn(move || {
            let mut wal = db.clone().into_os_string();
            wal.push("-wal");
            let wal = PathBuf::from(wal);
            let began = Instant::now();
            let mut out = Vec::new();
            let mut next = began;
            loop {
                let status = std::fs::read_to_string(format!("/proc/{pid}/status"));
                let io = std::fs::read_to_string(format!("/proc/{pid}/io"));
                let (jobs, events) = progress();
                let sample = Sample {
                    t_s: began.elapsed().as_secs_f64(),
                    loaded: l.load(Ordering::Relaxed)
                        && load_for.is_none_or(|d| began.elapsed() <= d),
                    rss_bytes: status
                        .ok()
                        .and_then(|t| field(&t, "VmRSS"))
                        .map_or(0, |kb| kb * 1024),
                    wal_bytes: file_len(&wal),
                    db_bytes: file_len(&db),
                    write_bytes: io.ok().and_then(|t| field(&t, "write_bytes")).unwrap_or(0),
                    checkpoint_write_bytes: thread_write_bytes(
                        Path::new(&format!("/proc/{pid}/task")),
                        CHECKPOINT_THREAD,
                    ),
                    jobs,
                    events,
                };
                if print {
                    eprintln!(
                        "a2a-fanout soak: {:>6.0} s{} RSS {:>7.1} MB, -wal {:>7.1} MB, database {:>7.1} MB, written {:>8.1} MB, {} jobs",
                        sample.t_s,
                        if sample.loaded { "" } else { " (idle)" },
                        sample.rss_bytes as f64 / MB,
                        sample.wal_bytes as f64 / MB,
                        sample.db_bytes as f64 / MB,
                        sample.write_bytes as f64 / MB,
                        sample.jobs
                    );
                }
                out.push(sample);
                next += every;
                // Wake often enough to stop promptly.
                while Instant::now() < next {
                    if s.load(Ordering::Relaxed) {
                        return out;
                    }
                    std::thread::sleep(
                        next.saturating_duration_since(Instant::now())
                            .min(Duration::from_millis(100)),
                    );
                }
                if s.load(Ordering::Relaxed) {
                    return out;
                }
            }
        });
        Sampler {
            stop,
            loaded,
            handle: Some(handle),
            cfg: cfg.clone(),
        }
    }

    /// The load stopped: samples from now on are marked idle. Returns once
    /// the idle period has passed, with the report.
    pub fn finish(mut self) -> SoakReport {
        self.loaded.store(false, Ordering::Relaxed);
        std::thread::sleep(self.cfg.idle);
        self.stop.store(true, Ordering::Relaxed);
        let samples = self
            .handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        SoakReport::of(samples, self.cfg.every, self.cfg.warmup)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Writes `soak.json` and `soak.svg` into `dir`.
pub fn write(report: &SoakReport, title: &str, dir: &Path) -> Result<(), FanoutError> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join("soak.json"),
        serde_json::to_string_pretty(report).unwrap_or_default(),
    )?;
    chart(report, title, &dir.join("soak.svg"))
}

/// Two panels against time: above, the broker's resident memory and the
/// `-wal` (MB); below, the database file (MB) and the bytes written per
/// job between two samples (KB). A grey band marks the warm-up, the idle
/// tail is after the dashed line.
pub fn chart(report: &SoakReport, title: &str, path: &Path) -> Result<(), FanoutError> {
    let s = &report.samples;
    let end = s.last().map_or(1.0, |x| x.t_s).max(1.0);
    let root = SVGBackend::new(path, (960, 720)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let root = root.titled(title, ("sans-serif", 20)).map_err(draw_err)?;
    let (upper, lower) = root.split_vertically(360);
    let mb = |b: u64| b as f64 / MB;
    let top = s
        .iter()
        .map(|x| mb(x.rss_bytes).max(mb(x.wal_bytes)))
        .fold(64.0, f64::max)
        * 1.15;
    let stopped = s.iter().find(|x| !x.loaded).map(|x| x.t_s);
    let mut c = ChartBuilder::on(&upper)
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..end, 0f64..top)
        .map_err(draw_err)?;
    c.configure_mesh()
        .x_desc("seconds")
        .y_desc("MB")
        .draw()
        .map_err(draw_err)?;
    marks(&mut c, report.warmup_s, stopped, top)?;
    line(&mut c, s, |x| mb(x.rss_bytes), BLUE, "broker RSS (VmRSS)")?;
    line(&mut c, s, |x| mb(x.wal_bytes), RED, "-wal file")?;
    c.draw_series(LineSeries::new(
        [(0.0, 64.0), (end, 64.0)],
        RED.mix(0.4).stroke_width(1),
    ))
    .map_err(draw_err)?
    .label("64 MB (the log's target bound)")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], RED.mix(0.4)));
    legend(&mut c)?;

    let per_job: Vec<(f64, f64)> = s
        .windows(2)
        .filter_map(|w| {
            let jobs = w[1].jobs.saturating_sub(w[0].jobs);
            (jobs > 0).then(|| {
                (
                    w[1].t_s,
                    w[1].write_bytes.saturating_sub(w[0].write_bytes) as f64 / jobs as f64 / 1024.0,
                )
            })
        })
        .collect();
    let top2 = s
        .iter()
        .map(|x| mb(x.db_bytes))
        .chain(per_job.iter().map(|p| p.1))
        .fold(16.0, f64::max)
        * 1.15;
    let mut c = ChartBuilder::on(&lower)
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..end, 0f64..top2)
        .map_err(draw_err)?;
    c.configure_mesh()
        .x_desc("seconds")
        .y_desc("MB / KB per job")
        .draw()
        .map_err(draw_err)?;
    marks(&mut c, report.warmup_s, stopped, top2)?;
    line(&mut c, s, |x| mb(x.db_bytes), GREEN, "database file, MB")?;
    c.draw_series(LineSeries::new(per_job, MAGENTA.stroke_width(2)))
        .map_err(draw_err)?
        .label("KB written per job (between samples)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], MAGENTA.stroke_width(2)));
    legend(&mut c)?;
    root.present().map_err(draw_err)?;
    Ok(())
}

type Chart<'a> = ChartContext<
    'a,
    SVGBackend<'a>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

fn line(
    c: &mut Chart<'_>,
    s: &[Sample],
    y: impl Fn(&Sample) -> f64,
    color: RGBColor,
    label: &str,
) -> Result<(), FanoutError> {
    c.draw_series(LineSeries::new(
        s.iter().map(|x| (x.t_s, y(x))),
        color.stroke_width(2),
    ))
    .map_err(draw_err)?
    .label(label)
    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2)));
    Ok(())
}

fn marks(
    c: &mut Chart<'_>,
    warmup: f64,
    stopped: Option<f64>,
    top: f64,
) -> Result<(), FanoutError> {
    c.draw_series(std::iter::once(Rectangle::new(
        [(0.0, 0.0), (warmup, top)],
        BLACK.mix(0.06).filled(),
    )))
    .map_err(draw_err)?;
    if let Some(t) = stopped {
        c.draw_series(DashedLineSeries::new(
            [(t, 0.0), (t, top)],
            6,
            4,
            BLACK.mix(0.5).into(),
        ))
        .map_err(draw_err)?;
    }
    Ok(())
}

fn legend(c: &mut Chart<'_>) -> Result<(), FanoutError> {
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()
        .map_err(draw_err)
}

fn draw_err<E: std::fmt::Debug>(e: E) -> FanoutError {
    FanoutError::Io(std::io::Error::other(format!("drawing: {e:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_s: f64, loaded: bool, rss_mb: f64, written: u64, jobs: u64) -> Sample {
        Sample {
            t_s,
            loaded,
            rss_bytes: (rss_mb * MB) as u64,
            wal_bytes: (t_s as u64) << 20,
            db_bytes: 1 << 20,
            write_bytes: written,
            checkpoint_write_bytes: written / 10,
            jobs,
            events: jobs * 5,
        }
    }

    #[test]
    fn the_slope_is_least_squares_and_ignores_one_outlier_s_weight() {
        assert_eq!(slope(&[(0.0, 1.0), (1.0, 3.0)]), None);
        let s = slope(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]).unwrap();
        assert!((s - 2.0).abs() < 1e-9);
        // A flat series with one spike in the middle stays flat.
        let flat = slope(&[
            (0.0, 10.0),
            (1.0, 10.0),
            (2.0, 30.0),
            (3.0, 10.0),
            (4.0, 10.0),
        ]);
        assert!(flat.unwrap().abs() < 1e-9);
    }

    #[test]
    fn the_report_counts_after_the_warm_up_and_under_load_only() {
        let samples = vec![
            sample(0.0, true, 50.0, 0, 0),
            sample(60.0, true, 80.0, 1000, 10),
            sample(120.0, true, 81.0, 3000, 30),
            sample(180.0, true, 82.0, 5000, 50),
            sample(190.0, false, 60.0, 5100, 50),
        ];
        let r = SoakReport::of(samples, Duration::from_secs(60), Duration::from_secs(60));
        assert_eq!(r.bytes_per_job, Some(100.0));
        assert_eq!(r.checkpoint_bytes_per_job, Some(10.0));
        assert!((r.rss_slope_mb_per_min.unwrap() - 1.0).abs() < 1e-6);
        assert_eq!(r.rss_after_warmup, (80.0 * MB) as u64);
        assert_eq!(r.rss_end_of_load, (82.0 * MB) as u64);
        assert_eq!(r.rss_after_idle, (60.0 * MB) as u64);
        assert_eq!(r.max_wal_bytes, 190 << 20);
        assert!((r.jobs_per_s.unwrap() - 40.0 / 120.0).abs() < 1e-9);
    }

    #[test]
    fn proc_fields_are_read() {
        let status = "Name:\ta2a-broker\nVmRSS:\t   12345 kB\nThreads:\t9\n";
        assert_eq!(field(status, "VmRSS"), Some(12345));
        let io = "rchar: 1\nwchar: 2\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n";
        assert_eq!(field(io, "write_bytes"), Some(4096));
        assert_eq!(field(io, "missing"), None);
        // This process's own files parse.
        let own = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(field(&own, "VmRSS").unwrap() > 0);
    }

    #[test]
    fn a_thread_s_bytes_are_summed_by_its_name() {
        // A /proc/PID/task of three threads, two of them checkpointers.
        let dir = tempfile::tempdir().unwrap();
        for (tid, name, written) in [
            (1, "a2a-writer", 9000),
            (2, CHECKPOINT_THREAD, 4096),
            (3, CHECKPOINT_THREAD, 100),
        ] {
            let t = dir.path().join(tid.to_string());
            std::fs::create_dir(&t).unwrap();
            std::fs::write(t.join("comm"), format!("{name}\n")).unwrap();
            std::fs::write(
                t.join("io"),
                format!("rchar: 5\nwrite_bytes: {written}\ncancelled_write_bytes: 0\n"),
            )
            .unwrap();
        }
        assert_eq!(thread_write_bytes(dir.path(), CHECKPOINT_THREAD), 4196);
        assert_eq!(thread_write_bytes(dir.path(), "a2a-writer"), 9000);
        assert_eq!(thread_write_bytes(dir.path(), "nobody"), 0);
        assert_eq!(
            thread_write_bytes(&dir.path().join("gone"), "a2a-writer"),
            0
        );
    }

    #[test]
    fn the_chart_is_drawn() {
        let dir = tempfile::tempdir().unwrap();
        let samples = (0..20)
            .map(|i| {
                sample(
                    i as f64 * 5.0,
                    i < 16,
                    50.0 + i as f64,
                    i * 4096 * 10,
                    i * 10,
                )
            })
            .collect();
        let r = SoakReport::of(samples, Duration::from_secs(5), Duration::from_secs(20));
        write(&r, "test soak", dir.path()).unwrap();
        let svg = std::fs::read_to_string(dir.path().join("soak.svg")).unwrap();
        assert!(svg.contains("<svg") && svg.contains("broker RSS"), "{svg}");
        let back: SoakReport =
            serde_json::from_slice(&std::fs::read(dir.path().join("soak.json")).unwrap()).unwrap();
        assert_eq!(back.samples.len(), 20);
    }
}
