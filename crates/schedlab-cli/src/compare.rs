//! `schedlab compare`: one scenario under several schedulers and/or feature
//! settings, side by side.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use schedlab::results::compare::{self, RunSummary};

use crate::common;
use crate::Failure;

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// Scenario file (TOML).
    pub scenario: PathBuf,
    /// Schedulers to compare, comma-separated: eevdf, a shipped sched_ext
    /// scheduler (simple, qmap, central, cpu0, flow) or a .bpf.c path.
    #[arg(long, value_name = "LIST")]
    pub sched: Option<String>,
    /// A feature and the settings to compare, e.g. RUN_TO_PARITY=on,off;
    /// repeat for a grid. A single setting (NO_PLACE_LAG) applies to all.
    #[arg(long = "feature", value_name = "NAME=on,off")]
    pub features: Vec<String>,
    /// Override the scenario's seed.
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=i64::MAX as u64))]
    pub seed: Option<u64>,
    /// Override any scenario field by dotted path, e.g. workload.0.count=8.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub sets: Vec<String>,
    /// A sched_ext scheduler option for every ext variant.
    #[arg(long = "sched-set", value_name = "NAME=VALUE")]
    pub sched_sets: Vec<String>,
    /// Wall time one sched_ext callback may run before it is taken for an
    /// endless loop and the scheduler is ejected (default 5s; 0 = no limit).
    #[arg(long = "op-timeout", value_name = "DURATION")]
    pub op_timeout: Option<String>,
    /// Wall time each variant's run may take; one that reaches it stops
    /// there and shows as "(partial)", with "partial" in the JSON.
    #[arg(long = "max-wall", value_name = "DURATION")]
    pub max_wall: Option<String>,
    /// Machine preset, CPU count, sysfs copy or lscpu -p file.
    #[arg(long)]
    pub machine: Option<String>,
    /// Directory for <scenario>-compare.csv and .json.
    #[arg(long, value_name = "DIR", default_value = "schedlab-out")]
    pub out: PathBuf,
    /// Also print the comparison JSON to stdout ("-") or write it here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write comparison plots (SVG and PNG) into this directory.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Print nothing but errors (the files are still written).
    #[arg(long, short)]
    pub quiet: bool,
    /// Also run each variant for real and print it beside its simulation,
    /// with the checks that do not depend on the machine's speed. Without
    /// --vm on this host's kernel (eevdf only).
    #[arg(long)]
    pub real: bool,
    /// With --real: boot a sched_ext kernel under qemu and run every variant
    /// there (eevdf is the guest kernel's fair class), one boot for all.
    #[arg(long, requires = "real")]
    pub vm: bool,
    /// With --vm: guest CPUs (default: the scenario's CPU count, at most 4).
    #[arg(long, requires = "vm", value_name = "N")]
    pub vm_cpus: Option<usize>,
    /// With --real: run the workloads without making the scenario's cgroups.
    #[arg(long = "no-cgroups", requires = "real")]
    pub no_cgroups: bool,
}

pub use schedlab_host::frontend::Variant;

/// The variants: schedulers x every combination of the listed feature settings.
pub fn variants(a: &CompareArgs) -> Result<Vec<Variant>, Failure> {
    let spec = schedlab_host::frontend::CompareSpec {
        sched: a.sched.clone(),
        features: a.features.clone(),
        seed: a.seed,
        sets: a.sets.clone(),
        sched_sets: a.sched_sets.clone(),
        op_timeout: a.op_timeout.clone(),
    };
    Ok(schedlab_host::frontend::variants(&spec)?)
}

pub fn compare(a: CompareArgs) -> Result<(), Failure> {
    let file = a.scenario.display().to_string();
    let variants = variants(&a)?;
    // Load every variant first: bad input fails before anything runs.
    let mut scenarios = Vec::new();
    for v in &variants {
        let s = common::load(&a.scenario, &v.sets, a.machine.as_deref())?;
        scenarios.push(s);
    }
    let label_of = |v: &Variant, s: &schedlab::workload::scenario::Scenario| if v.label.is_empty() { common::sched_label(s) } else { v.label.clone() };
    let max_wall = schedlab_host::frontend::MaxWall::parse(a.max_wall.as_deref())?;
    if a.real && max_wall.is_some() {
        return Err(Failure::Input("compare --real: --max-wall bounds a simulation's wall time; a real run lasts the scenario's duration (drop --max-wall)".into()));
    }
    if a.real {
        let labels: Vec<String> = variants.iter().zip(&scenarios).map(|(v, s)| label_of(v, s)).collect();
        return crate::compare_real::compare_real(&a, &variants, &labels, &scenarios);
    }
    if !a.quiet {
        eprintln!("schedlab: comparing {} variants of {file}, seed {}", variants.len(), scenarios[0].seed);
    }
    let bar = common::progress_bar(variants.len(), "variants", a.quiet);
    let want_plots = a.plot.is_some();
    // Each variant runs on its own thread; the simulator is single-threaded
    // and deterministic, so the results do not depend on the order.
    let ran: Vec<Result<(RunSummary, Option<PlotData>), Failure>> = variants
        .par_iter()
        .zip(scenarios.par_iter())
        .map(|(v, s)| {
            let r = schedlab_host::frontend::run_bounded(s, &file, want_plots, max_wall)?;
            let label = label_of(v, s);
            let summary = RunSummary::from_results(&label, &r.results);
            let plot = want_plots.then(|| PlotData {
                label,
                latency: r.sim.metrics.iter().map(|m| (m.name.clone(), m.latency.clone())).collect(),
                timeline: r.timeline.map(|t| t.borrow().clone()),
            });
            bar.inc(1);
            Ok((summary, plot))
        })
        .collect();
    bar.finish_and_clear();
    let mut runs = Vec::new();
    let mut plots = Vec::new();
    for r in ran {
        let (s, p) = r?;
        runs.push(s);
        plots.extend(p);
    }
    let stem = common::stem(&a.scenario);
    std::fs::create_dir_all(&a.out).map_err(|e| Failure::Io(format!("{}: {e}", a.out.display())))?;
    let title = scenarios[0].title(&file);
    let csv_path = a.out.join(format!("{stem}-compare.csv"));
    let json_path = a.out.join(format!("{stem}-compare.json"));
    let json = compare::to_json(&title, &runs, None);
    let io = common::io_err;
    schedlab::results::csv::write_atomic(&csv_path, compare::to_csv(&runs).as_bytes()).map_err(io(&csv_path))?;
    schedlab::results::csv::write_atomic(&json_path, json.as_bytes()).map_err(io(&json_path))?;
    let mut wrote = vec![csv_path, json_path];
    if let Some(dir) = &a.plot {
        wrote.extend(plot_compare(dir, &stem, &title, &runs, &plots).map_err(|e| Failure::Io(e.to_string()))?);
    }
    match a.json.as_deref() {
        Some(p) if p.as_os_str() == "-" => {
            use std::io::Write;
            std::io::stdout().write_all(json.as_bytes()).map_err(|e| Failure::Io(e.to_string()))?;
        }
        Some(p) => {
            std::fs::write(p, &json).map_err(io(p))?;
        }
        None => {}
    }
    if !a.quiet {
        if a.json.as_deref().is_none_or(|p| p.as_os_str() != "-") {
            print!("schedlab compare: {title}, seed {}\n\n{}", scenarios[0].seed, compare::tables(&runs));
        }
        for p in wrote {
            eprintln!("schedlab: wrote {}", p.display());
        }
    }
    Ok(())
}

/// What a variant contributes to the comparison plots.
pub struct PlotData {
    pub label: String,
    pub latency: Vec<(String, schedlab_plot::Histogram<u64>)>,
    pub timeline: Option<schedlab::results::trace::Timeline>,
}

fn plot_compare(dir: &Path, stem: &str, title: &str, runs: &[RunSummary], plots: &[PlotData]) -> Result<Vec<PathBuf>, schedlab_plot::PlotError> {
    use schedlab_plot::{self as plot, Bars};
    let mut wrote = Vec::new();
    let Some(first) = runs.first() else { return Ok(wrote) };
    for (wi, w) in first.workloads.iter().enumerate() {
        let slug = plot::slug(&w.name);
        let has_latency = runs.iter().any(|r| r.workloads.get(wi).is_some_and(|w| w.max_ns.is_some()));
        if has_latency {
            let series: Vec<(String, &schedlab_plot::Histogram<u64>)> =
                plots.iter().filter_map(|p| p.latency.get(wi).filter(|h| !h.1.is_empty()).map(|h| (p.label.clone(), &h.1))).collect();
            wrote.extend(plot::latency_histogram(&dir.join(format!("{stem}-compare-{slug}-latency-hist")), &format!("{title}: {} wakeup latency", w.name), &series)?);
            wrote.extend(plot::latency_cdf(&dir.join(format!("{stem}-compare-{slug}-latency-cdf")), &format!("{title}: {} wakeup latency CDF", w.name), &series)?);
            let us = |v: Option<u64>| v.unwrap_or(0) as f64 / 1000.0;
            let metric = |name: &str, f: &dyn Fn(&schedlab::results::compare::WorkloadSummary) -> Option<u64>| {
                (name.to_string(), runs.iter().map(|r| (r.workloads.get(wi).map_or(0.0, |w| us(f(w))), None)).collect::<Vec<_>>())
            };
            let bars = Bars {
                title: format!("{title}: {} wakeup latency by variant", w.name),
                y_desc: "wakeup latency (µs)".into(),
                categories: runs.iter().map(|r| r.label.clone()).collect(),
                series: vec![metric("p99", &|w| w.p99_ns), metric("p99.9", &|w| w.p999_ns), metric("max", &|w| w.max_ns)],
            };
            wrote.extend(plot::bars(&dir.join(format!("{stem}-compare-{slug}-latency-bars")), &bars)?);
        } else if runs.iter().any(|r| r.workloads.get(wi).is_some_and(|w| w.makespan_ns.is_some())) {
            let bars = Bars {
                title: format!("{title}: {} makespan by variant", w.name),
                y_desc: "makespan (ms)".into(),
                categories: runs.iter().map(|r| r.label.clone()).collect(),
                series: vec![("makespan".into(), runs.iter().map(|r| (r.workloads.get(wi).and_then(|w| w.makespan_ns).unwrap_or(0) as f64 / 1e6, None)).collect())],
            };
            wrote.extend(plot::bars(&dir.join(format!("{stem}-compare-{slug}-makespan-bars")), &bars)?);
        } else if runs.iter().any(|r| r.workloads.get(wi).is_some_and(|w| w.work > 0)) {
            let bars = Bars {
                title: format!("{title}: {} throughput by variant", w.name),
                y_desc: "work per simulated second (1/s)".into(),
                categories: runs.iter().map(|r| r.label.clone()).collect(),
                series: vec![("work/s".into(), runs.iter().map(|r| (r.workloads.get(wi).map_or(0, |w| w.work_per_s) as f64, None)).collect())],
            };
            wrote.extend(plot::bars(&dir.join(format!("{stem}-compare-{slug}-throughput-bars")), &bars)?);
        }
    }
    for p in plots {
        if let Some(tl) = &p.timeline {
            wrote.extend(plot::utilisation(&dir.join(format!("{stem}-compare-{}-cpu-util", plot::slug(&p.label))), &format!("{title}: CPU utilisation under {}", p.label), tl)?);
        }
    }
    Ok(wrote)
}
