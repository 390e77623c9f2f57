//! `schedlab run --real --vm SCENARIO --sched A[,B...]`: boots Debian's
//! sched_ext kernel under qemu (scripts/scx-vm), loads each scheduler with
//! libbpf (the real verifier), runs the scenario for real inside the guest,
//! and prints the guest's results, the scheduler's exit and its own counters
//! beside a simulation of the same scenario on as many CPUs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use schedlab::workload::scenario::Scenario;
use schedlab::results::agreement::RealScx;
use schedlab::sched::ext::ops::ExitKind;
use serde_json::Value;

use crate::real::{RealArgs, RealFailure};
use schedlab_real::sys;
use schedlab_real::TraceRequest;

/// What the guest reported for one entry: a scheduler it loaded, or the
/// kernel's own fair class (`builtin`, nothing loaded).
#[derive(Debug, Default)]
pub struct GuestSched {
    pub name: String,
    pub builtin: bool,
    /// /sys/kernel/sched_ext/state once loaded, and the ops name.
    pub state: String,
    pub ops: String,
    /// The loader attached it (it may have been ejected before the state was read).
    pub attached: bool,
    pub state_after_detach: String,
    /// scx_exit_kind recorded by the scheduler's UEI, the reason and message.
    pub exit_kind: Option<i64>,
    pub exit_reason: String,
    pub exit_msg: String,
    pub counters: Vec<(String, u64)>,
    pub loader: Vec<String>,
    pub summary: Vec<String>,
    pub json: Option<Value>,
    pub run_rc: Option<i32>,
    /// The guest kernel's trace in Perfetto format (`--trace`), base64 on the console.
    pub trace_b64: Option<String>,
}

impl GuestSched {
    /// The exit kind's kernel name ("UNREG"), or the code when unknown.
    pub fn exit_name(&self) -> Option<String> {
        self.exit_kind.map(|k| ExitKind::from_code(k).map_or(k.to_string(), |k| k.name().to_string()))
    }

    /// The sched_ext side for the real-vs-simulated checks.
    pub fn real_scx(&self) -> Option<RealScx> {
        (!self.builtin).then(|| RealScx {
            name: self.name.clone(),
            state: self.state.clone(),
            ops: self.ops.clone(),
            attached: self.attached,
            state_after_detach: self.state_after_detach.clone(),
            exit_kind: self.exit_name(),
            exit_reason: self.exit_reason.clone(),
            exit_msg: self.exit_msg.clone(),
            counters: self.counters.iter().cloned().collect(),
        })
    }

    /// What the guest's executor noted about the run (its "note: " lines).
    pub fn notes(&self) -> Vec<String> {
        self.summary.iter().filter_map(|l| l.strip_prefix("note: ").map(str::to_string)).collect()
    }

    /// The workload did not run to the end in the guest.
    pub fn run_failures(&self) -> Vec<String> {
        let mut p = Vec::new();
        match &self.json {
            None => p.push("no results from the guest".into()),
            Some(v) => {
                for w in v["workloads"].as_array().into_iter().flatten() {
                    if w["kind"] == "hackbench" && w["finished"] != true {
                        p.push(format!("workload {} did not finish", w["name"]));
                    }
                }
            }
        }
        if self.summary.iter().any(|l| l.contains("did not reach the end")) {
            p.push("some tasks did not reach the end of the run".into());
        }
        if self.run_rc.is_some_and(|r| r != 0) {
            p.push(format!("the workload executor exited with {}", self.run_rc.unwrap_or(0)));
        }
        p
    }

    /// Loaded, every task ran to the end, and unregistered cleanly from user space.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if !self.builtin {
            if self.state != "enabled" && !self.attached {
                p.push(format!("state was {:?}, not enabled", self.state));
            }
            if self.exit_kind != Some(ExitKind::Unreg as i64) {
                p.push(format!("exit kind {} ({}), not a clean unregistration", self.exit_name().unwrap_or("none".into()), self.exit_reason));
            }
        }
        for t in self.json.as_ref().and_then(|v| v["tasks"].as_array()).into_iter().flatten() {
            if t["runtime_ns"].as_u64().unwrap_or(0) == 0 {
                p.push(format!("task {} never ran", t["name"]));
            }
        }
        p.extend(self.run_failures());
        p
    }
}

/// The source checkout's scripts (scx-vm, scx-apt, the guest init, the loader).
pub fn scripts_dir() -> PathBuf {
    std::env::var_os("SCHEDLAB_SCRIPTS").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts"))
}

/// The workload executor for the guest, which has no dynamic loader or
/// shared libraries: `SCHEDLAB_GUEST_EXE` if set, this executable if it is
/// statically linked, else a static build from the source checkout.
fn guest_executor() -> Result<PathBuf, RealFailure> {
    let usable = |p: &Path| match is_static_elf(p) {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!("{} is dynamically linked; the guest needs a static executable (cargo build --target x86_64-unknown-linux-gnu with RUSTFLAGS=\"-C target-feature=+crt-static\")", p.display())),
        Err(e) => Err(format!("{}: {e}", p.display())),
    };
    if let Some(p) = std::env::var_os("SCHEDLAB_GUEST_EXE").map(PathBuf::from) {
        usable(&p).map_err(|e| (2, format!("SCHEDLAB_GUEST_EXE: {e}")))?;
        return Ok(p);
    }
    let me = std::env::current_exe().map_err(|e| (1, format!("cannot find this executable: {e}")))?;
    if usable(&me).is_ok() {
        return Ok(me);
    }
    let built = PathBuf::from(scx_vm(&["guest-exe"])?.lines().last().unwrap_or("").trim());
    usable(&built).map_err(|e| (1, e))?;
    Ok(built)
}

/// Whether an ELF executable is statically linked: it has no PT_INTERP
/// program header (static-pie included).
pub fn is_static_elf(path: &Path) -> std::io::Result<bool> {
    use std::io::{Error, ErrorKind, Read, Seek, SeekFrom};
    const PT_INTERP: u32 = 3;
    let bad = |what: &str| Error::new(ErrorKind::InvalidData, format!("not a 64-bit little-endian ELF file ({what})"));
    let mut f = std::fs::File::open(path)?;
    let mut eh = [0u8; 64];
    f.read_exact(&mut eh).map_err(|_| bad("too short"))?;
    if &eh[..4] != b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
        return Err(bad("header"));
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let phoff = u64::from_le_bytes(eh[32..40].try_into().unwrap());
    let (phentsize, phnum) = (u16_at(&eh, 54) as usize, u16_at(&eh, 56) as usize);
    if phentsize < 4 {
        return Err(bad("program header size"));
    }
    let mut ph = vec![0u8; phentsize * phnum];
    f.seek(SeekFrom::Start(phoff))?;
    f.read_exact(&mut ph).map_err(|_| bad("program headers"))?;
    Ok(!ph.chunks(phentsize).any(|h| u32::from_le_bytes([h[0], h[1], h[2], h[3]]) == PT_INTERP))
}

/// `scx-vm check`: None when everything --vm needs is installed, else why not.
pub fn missing_tools() -> Option<String> {
    let script = scripts_dir().join("scx-vm");
    if !script.is_file() {
        return Some(format!("{} not found: --vm runs from a source checkout (or set SCHEDLAB_SCRIPTS)", script.display()));
    }
    match Command::new("bash").arg(&script).arg("check").output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(String::from_utf8_lossy(&o.stderr).trim().replace('\n', "; ")),
        Err(e) => Some(format!("cannot run bash: {e}")),
    }
}

/// Runs `scripts/scx-vm ARGS` and returns its stdout. The script runs in
/// its own process group, so when schedlab is interrupted (SIGINT, SIGTERM,
/// SIGHUP: caught for the whole `--vm` run, see [`interruptible`]) the
/// script and all it started (cargo, qemu) are stopped and reaped, its
/// temporary directory removed by its own trap; the run then fails with
/// status 130.
fn scx_vm(args: &[&str]) -> Result<String, RealFailure> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let script = scripts_dir().join("scx-vm");
    let mut child = Command::new("bash")
        .arg(&script)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .process_group(0)
        .spawn()
        .map_err(|e| (1, format!("{}: {e}", script.display())))?;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let status = loop {
        if sys::interrupted() {
            sys::stop_group(&mut child, std::time::Duration::from_secs(5));
            let _ = reader.join();
            return Err((130, format!("interrupted: scx-vm {} and everything it started were stopped", args.first().unwrap_or(&""))));
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(50)),
            Err(e) => return Err((1, format!("scx-vm {}: {e}", args.join(" ")))),
        }
    };
    let out = reader.join().unwrap_or_default();
    if !status.success() {
        return Err((1, format!("scx-vm {} failed (exit {})", args.join(" "), status.code().unwrap_or(-1))));
    }
    Ok(out)
}

/// Runs a `--vm` step with SIGINT / SIGTERM / SIGHUP caught, so an
/// interrupt stops the guest (and its build) instead of orphaning it, and
/// turns the interrupt into exit status 130 once all is cleaned up.
pub fn interruptible<T>(step: impl FnOnce() -> Result<T, RealFailure>) -> Result<T, RealFailure> {
    sys::catch_interrupts();
    let out = step();
    let interrupted = sys::interrupted();
    sys::clear_interrupts();
    if interrupted {
        let why = match &out {
            Err((_, msg)) => msg.clone(),
            Ok(_) => "interrupted".to_string(),
        };
        eprintln!("schedlab: {why}");
        std::process::exit(130);
    }
    out
}

/// Parses the serial console of a guest run.
pub fn parse_console(text: &str) -> Vec<GuestSched> {
    let mut out: Vec<GuestSched> = Vec::new();
    // A multi-line block in progress: the results (JSON) or the trace (base64).
    let mut block: Option<(bool, String)> = None;
    let mut in_run = false;
    for raw in text.lines() {
        let line = raw.trim_end_matches('\r');
        if let Some((is_json, buf)) = block.as_mut() {
            let end = if *is_json { "SCHEDLAB_JSON_END" } else { "SCHEDLAB_TRACE_END" };
            if line.starts_with(end) {
                if let Some(g) = out.last_mut() {
                    if *is_json {
                        g.json = serde_json::from_str(buf).ok();
                    } else {
                        g.trace_b64 = Some(std::mem::take(buf));
                    }
                }
                block = None;
            } else {
                buf.push_str(line);
                if *is_json {
                    buf.push('\n');
                }
            }
            continue;
        }
        let mut words = line.splitn(3, ' ');
        let tag = words.next().unwrap_or("");
        let name = words.next().unwrap_or("").to_string();
        let rest = words.next().unwrap_or("");
        let field = |k: &str| rest.split_whitespace().find_map(|w| w.strip_prefix(k)).unwrap_or("").to_string();
        match tag {
            "SCHEDLAB_SCHED_BEGIN" => out.push(GuestSched { name, builtin: rest.trim() == "builtin", ..Default::default() }),
            "SCHEDLAB_STATE" => {
                if let Some(g) = out.last_mut() {
                    g.state = field("state=");
                    g.ops = field("ops=");
                    g.attached = field("attached=") == "1";
                }
                in_run = true;
            }
            "SCHEDLAB_RUN_RC" => {
                in_run = false;
                if let Some(g) = out.last_mut() {
                    g.run_rc = rest.trim().parse().ok();
                }
            }
            "SCHEDLAB_STATE_AFTER_DETACH" => {
                in_run = false;
                if let Some(g) = out.last_mut() {
                    g.state_after_detach = field("state=");
                }
            }
            "SCHEDLAB_LOADER" => {
                if let Some(g) = out.last_mut() {
                    if let Some(e) = rest.strip_prefix("SCX_EXIT ") {
                        g.exit_kind = e.split_whitespace().find_map(|w| w.strip_prefix("kind=")).and_then(|k| k.parse().ok());
                        let reason = e.split_once("reason=").map_or("", |x| x.1);
                        let (reason, msg) = reason.split_once(" msg=").unwrap_or((reason, ""));
                        g.exit_reason = reason.to_string();
                        g.exit_msg = msg.to_string();
                    } else if let Some(v) = rest.strip_prefix("SCX_VAR ") {
                        if let Some((k, n)) = v.split_once('=') {
                            g.counters.push((k.to_string(), n.trim().parse().unwrap_or(0)));
                        }
                    } else {
                        g.loader.push(rest.to_string());
                    }
                }
            }
            "SCHEDLAB_JSON_BEGIN" => block = Some((true, String::new())),
            "SCHEDLAB_TRACE_BEGIN" => block = Some((false, String::new())),
            _ if in_run && !line.starts_with("SCHEDLAB_") => {
                if let Some(g) = out.last_mut() {
                    g.summary.push(line.to_string());
                }
            }
            _ => {}
        }
    }
    out
}

fn share_rows(real: &Value, sim: &schedlab::results::report::Results) -> String {
    let tasks: Vec<&Value> = real["tasks"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
    let total: u64 = tasks.iter().map(|t| t["runtime_ns"].as_u64().unwrap_or(0)).sum::<u64>().max(1);
    let sim_total: u64 = sim.tasks.iter().map(|t| t.runtime_ns).sum::<u64>().max(1);
    let mut rows = vec![vec!["task".to_string(), "real share".into(), "sim share".into(), "real cpus".into(), "sim cpus".into()]];
    for (i, t) in tasks.iter().enumerate().take(32) {
        let s = sim.tasks.get(i);
        rows.push(vec![
            t["name"].as_str().unwrap_or("?").to_string(),
            format!("{:.1}%", t["runtime_ns"].as_u64().unwrap_or(0) as f64 * 100.0 / total as f64),
            s.map_or("-".into(), |s| format!("{:.1}%", s.runtime_ns as f64 * 100.0 / sim_total as f64)),
            t["ran_on"].as_str().unwrap_or("?").to_string(),
            s.map_or("-".into(), |s| s.ran_on.clone()),
        ]);
    }
    schedlab::results::report::table(&rows)
}

/// One entry of a guest run: a sched_ext scheduler to load, or the kernel's
/// own fair class (`source` None).
pub struct GuestVariant {
    /// Its name in the guest's reports (a word).
    pub label: String,
    /// The name it was given (`crate:scx_bpfland`, a path...), which picks
    /// its shipped loader profile.
    pub sched: Option<String>,
    pub source: Option<PathBuf>,
}

/// The guest's entries from (name, sched_ext scheduler or None for the
/// guest kernel's fair class); names become words, unique.
pub fn guest_variants<'a>(entries: impl IntoIterator<Item = (&'a str, Option<&'a str>)>, file: &str) -> Result<Vec<GuestVariant>, RealFailure> {
    let mut out: Vec<GuestVariant> = Vec::new();
    for (n, sched) in entries {
        let source = sched.map(|x| schedlab_host::world::ext_source(x, file).map_err(|e| (2, format!("--sched {x}: {e}")))).transpose()?;
        let mut label = label(n);
        if out.iter().any(|v| v.label == label) {
            label = format!("{label}-{}", out.len());
        }
        out.push(GuestVariant { label, sched: sched.map(str::to_string), source });
    }
    Ok(out)
}

/// A finished guest run.
pub struct Guest {
    pub version: String,
    pub cpus: usize,
    /// Seconds from the guest kernel's start to our init.
    pub up: String,
    pub wall_s: f64,
    pub scheds: Vec<GuestSched>,
    /// The guest's serial console, kept in the cache.
    pub console: PathBuf,
}

impl Guest {
    pub fn header(&self) -> String {
        format!("guest: Linux {}, {} CPUs (qemu TCG), booted to init in {}s, {:.1}s in qemu for {} run(s)\n", self.version, self.cpus, self.up, self.wall_s, self.scheds.len())
    }
}

/// The guest's CPU count: --vm-cpus, else the scenario's, at most 4.
pub fn guest_cpus(vm_cpus: Option<usize>, s: &Scenario, file: &str) -> Result<usize, RealFailure> {
    match vm_cpus {
        Some(0) => Err((2, "--vm-cpus: at least 1".into())),
        Some(n) => Ok(n),
        None => schedlab::workload::world::topology(s, file).map(|t| t.nr_cpus().min(4)).map_err(|e| (2, e.to_string())),
    }
}

/// The scenario as the guest gets it. The guest has the scenario but not
/// the files beside it, so the rt-app JSON files its workloads name
/// (`file`, relative to the scenario) are inlined (`json`).
fn guest_scenario_text(path: &Path) -> Result<String, RealFailure> {
    let text = std::fs::read_to_string(path).map_err(|e| (1, format!("{}: {e}", path.display())))?;
    // A scenario that does not parse reaches the guest as it is, which
    // reports the error as it would on the host.
    let Ok(mut table) = text.parse::<toml::Table>() else { return Ok(text) };
    let base = path.parent().unwrap_or(Path::new("."));
    let mut inlined = false;
    if let Some(toml::Value::Array(workloads)) = table.get_mut("workload") {
        for (i, w) in workloads.iter_mut().enumerate() {
            let Some(w) = w.as_table_mut() else { continue };
            if w.get("kind").and_then(|k| k.as_str()) != Some("rtapp") {
                continue;
            }
            let Some(file) = w.get("file").and_then(|f| f.as_str()).map(str::to_string) else { continue };
            let json_path = base.join(&file);
            let json = std::fs::read_to_string(&json_path).map_err(|e| (2, format!("{}: workload.{i}.file: cannot read {}: {e}", path.display(), json_path.display())))?;
            w.remove("file");
            w.insert("json".into(), toml::Value::String(json));
            inlined = true;
        }
    }
    if !inlined {
        return Ok(text);
    }
    toml::to_string(&table).map_err(|e| (1, format!("{}: {e}", path.display())))
}

/// Boots the sched_ext kernel once and runs the scenario in it under each
/// variant in turn: load (libbpf, the real verifier), run, detach, report.
pub fn boot(path: &Path, s: &Scenario, variants: &[GuestVariant], sets: &[String], cpus: usize, quiet: bool, trace: Option<&TraceRequest>) -> Result<Guest, RealFailure> {
    boot_with(path, s, variants, sets, cpus, quiet, trace, &[])
}

/// [`boot`] with `files` (name, text) added to the guest's root, which the
/// guest's init reads (`calibrate`: run a calibration instead of the scenario).
#[allow(clippy::too_many_arguments)]
pub fn boot_with(path: &Path, s: &Scenario, variants: &[GuestVariant], sets: &[String], cpus: usize, quiet: bool, trace: Option<&TraceRequest>, files: &[(&str, String)]) -> Result<Guest, RealFailure> {
    if let Some(why) = missing_tools() {
        return Err((1, format!("--vm cannot run here: {why}")));
    }
    let prep = scx_vm(&["prepare"])?;
    let version = prep.lines().find_map(|l| l.strip_prefix("VERSION=")).unwrap_or("?").to_string();
    // Stage the guest: our own binary, the scenario and the BPF objects.
    // One cache for everything schedlab builds or fetches (SCHEDLAB_CACHE_DIR).
    let cache = schedlab_host::compile::cache_dir();
    let guest = cache.join(format!("guest-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&guest);
    std::fs::create_dir_all(guest.join("bin")).map_err(|e| (1, format!("{}: {e}", guest.display())))?;
    // Removed however boot() ends: success, failure or interrupt.
    let _staged = RemoveOnDrop(guest.clone());
    let io = |e: std::io::Error| (1, e.to_string());
    let exe = guest_executor()?;
    std::fs::copy(&exe, guest.join("bin/schedlab")).map_err(|e| (1, format!("{}: {e}", exe.display())))?;
    std::fs::write(guest.join("scenario.toml"), guest_scenario_text(path)?).map_err(io)?;
    // Scheduler choices are the loader's business; the rest goes to the guest.
    let guest_sets: Vec<&String> = sets.iter().filter(|x| !x.starts_with("scheduler.")).collect();
    std::fs::write(guest.join("sets"), guest_sets.iter().map(|x| format!("{x}\n")).collect::<String>()).map_err(io)?;
    let opts: Vec<String> = s
        .scheduler
        .options
        .iter()
        .map(|(k, v)| format!("{k}={}", match v {
            toml::Value::String(x) => x.clone(),
            other => other.to_string(),
        }))
        .collect();
    let mut scheds = String::new();
    for v in variants {
        match &v.source {
            None => scheds.push_str(&format!("{} -\n", v.label)),
            Some(src) => {
                let obj = bpf_object(src)?;
                let base = format!("{}.bpf.o", v.label);
                std::fs::copy(&obj, guest.join(&base)).map_err(|e| (1, format!("{obj}: {e}")))?;
                // The loader profile, resolved for the machine the
                // simulation beside it has (`cpus` CPUs), so both load the
                // scheduler the same way.
                let mut profile = String::new();
                if let Some(text) = guest_profile(path, s, v, src, cpus)? {
                    let name = format!("{}.profile", v.label);
                    std::fs::write(guest.join(&name), text).map_err(io)?;
                    profile = format!("--profile /{name} ");
                }
                scheds.push_str(&format!("{} {base} {profile}{}\n", v.label, opts.join(" ")));
            }
        }
    }
    std::fs::write(guest.join("scheds"), scheds).map_err(io)?;
    for (name, text) in files {
        std::fs::write(guest.join(name), text).map_err(io)?;
    }
    if let Some(t) = trace {
        let window = t.window.map_or(String::new(), |(a, b)| format!("--trace-window {a}ns..{}", if b == u64::MAX { String::new() } else { format!("{b}ns") }));
        std::fs::write(guest.join("trace"), window).map_err(io)?;
    }
    // Each boot's console stays in the cache for a day, for a look after a
    // failure (runs in parallel each keep their own).
    prune_consoles(&cache);
    let log = cache.join(format!("console-{}-{}.log", std::process::id(), BOOTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
    if !quiet {
        eprintln!("schedlab: booting Linux {version} under qemu ({cpus} CPUs) for {}", variants.iter().map(|v| v.label.as_str()).collect::<Vec<_>>().join(", "));
    }
    let t0 = Instant::now();
    let booted = scx_vm(&["boot", &guest.display().to_string(), &cpus.to_string(), &log.display().to_string()]);
    let wall_s = t0.elapsed().as_secs_f64();
    let console = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::copy(&log, cache.join("last-console.log"));
    booted?;
    let up = console.lines().find_map(|l| l.split("SCHEDLAB_GUEST_UP ").nth(1)).and_then(|r| r.split_whitespace().next()).unwrap_or("?").to_string();
    let scheds = parse_console(&console);
    if scheds.is_empty() {
        let tail: Vec<&str> = console.lines().rev().take(30).collect();
        return Err((1, format!("the guest reported nothing; the end of its console ({}):\n{}", log.display(), tail.into_iter().rev().collect::<Vec<_>>().join("\n"))));
    }
    Ok(Guest { version, cpus, up, wall_s, scheds, console: log })
}

/// A staging directory, removed when dropped.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Compiles a scheduler for the guest kernel (`scx-vm bpf`): an scx crate
/// or a kernel tools/sched_ext example as its own build does (its include
/// directories and every source it links), anything else against our shim.
fn bpf_object(src: &Path) -> Result<String, RealFailure> {
    use schedlab_host::{compile, fetch, source};
    let cache = compile::cache_dir();
    let fetch_bpf_h = |v: &str| fetch::scx_cargo_headers(v, &cache);
    let spec = source::resolve(src, &[], &cache, &fetch_bpf_h).map_err(|e| (2, format!("{}: {e}", src.display())))?;
    let mut args = vec!["bpf".to_string(), spec.main.display().to_string()];
    if !spec.includes.is_empty() {
        for d in &spec.includes {
            args.extend(["--include".to_string(), d.display().to_string()]);
        }
        for x in &spec.extra {
            args.extend(["--extra".to_string(), x.display().to_string()]);
        }
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let obj = scx_vm(&a)?;
    Ok(obj.lines().last().unwrap_or("").trim().to_string())
}

/// The scheduler's loader profile as scripts/vm/scx-load.c reads it
/// (`schedlab_host::profile::wire`), resolved for a flat `cpus`-CPU machine
/// as `real::simulate_like` builds; None without a profile.
fn guest_profile(path: &Path, s: &Scenario, v: &GuestVariant, src: &Path, cpus: usize) -> Result<Option<String>, RealFailure> {
    let file = path.display().to_string();
    let name = v.sched.as_deref().unwrap_or(&v.label);
    let mut m = s.clone();
    m.machine.preset = None;
    m.machine.sysfs = None;
    m.machine.lscpu = None;
    m.machine.cpus = Some(cpus);
    let topo = schedlab::workload::world::topology(&m, &file).map_err(|e| (2, e.to_string()))?;
    let Some(plan) = schedlab_host::world::loader_plan(&s.scheduler, name, src, &topo, &file).map_err(|e| (2, e.to_string()))? else {
        return Ok(None);
    };
    schedlab_host::profile::wire::write(&plan).map(Some).map_err(|e| (2, format!("{name}: the loader profile: {e}")))
}

static BOOTS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Removes guest consoles older than a day from the cache.
fn prune_consoles(cache: &Path) {
    let day = std::time::Duration::from_secs(24 * 3600);
    for e in std::fs::read_dir(cache).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let old = e.metadata().and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok()).is_some_and(|age| age > day);
        if name.starts_with("console-") && name.ends_with(".log") && old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// What a guest entry printed: state, exit, counters, loader messages and
/// the executor's own summary.
pub fn describe(g: &GuestSched) -> String {
    let mut out = String::new();
    if g.builtin {
        out.push_str(&format!("\n=== {} (the guest kernel's fair class, real) ===\n", g.name));
    } else {
        out.push_str(&format!("\n=== sched_ext {} (real, in the guest) ===\n", g.name));
        out.push_str(&format!("state while loaded: {} (ops {}), after detach: {}\n", g.state, g.ops, g.state_after_detach));
        out.push_str(&format!("exit: {}\n", schedlab::results::compare::exit_text(&g.exit_name().unwrap_or("none".into()), &g.exit_reason, &g.exit_msg)));
        if !g.counters.is_empty() {
            out.push_str(&format!("scheduler counters: {}\n", g.counters.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")));
        }
    }
    for l in g.loader.iter().filter(|l| !l.starts_with("SCX_ATTACHED")).take(40) {
        out.push_str(&format!("loader: {l}\n"));
    }
    for l in &g.summary {
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// Writes each entry's guest kernel trace: to `path` for a single entry,
/// else to `<stem>-<entry>.<ext>` beside it. Returns what went wrong.
fn write_traces(guest: &Guest, path: &Path, quiet: bool) -> Vec<String> {
    use base64::Engine as _;
    let mut failed = Vec::new();
    for g in &guest.scheds {
        let file = if guest.scheds.len() == 1 {
            path.to_path_buf()
        } else {
            let stem = path.file_stem().map_or("trace".into(), |x| x.to_string_lossy().into_owned());
            let ext = path.extension().map_or(String::new(), |x| format!(".{}", x.to_string_lossy()));
            path.with_file_name(format!("{stem}-{}{ext}", g.name))
        };
        let Some(b64) = &g.trace_b64 else {
            failed.push(format!("{}: the guest recorded no trace (see its messages above)", g.name));
            continue;
        };
        match base64::engine::general_purpose::STANDARD.decode(b64.as_bytes()) {
            Ok(bytes) => match std::fs::write(&file, &bytes) {
                Ok(()) if !quiet => eprintln!("schedlab: {}: the guest kernel's trace, {} bytes, in {}", g.name, bytes.len(), file.display()),
                Ok(()) => {}
                Err(e) => failed.push(format!("{}: {e}", file.display())),
            },
            Err(e) => failed.push(format!("{}: the trace from the guest is damaged ({e})", g.name)),
        }
    }
    failed
}

/// `run --real --vm`.
pub fn run(args: &RealArgs, path: &Path, s: &Scenario, sets: &[String], json: Option<PathBuf>, quiet: bool, trace: Option<&TraceRequest>) -> Result<(), RealFailure> {
    let file = path.display().to_string();
    let names: Vec<String> = s.scheduler.sched.as_deref().unwrap_or("").split(',').map(str::trim).filter(|n| !n.is_empty()).map(str::to_string).collect();
    if s.scheduler.kind != "ext" || names.is_empty() {
        return Err((2, "--vm: name the sched_ext scheduler(s) to load: --sched NAME[,NAME...] (shipped: simple, qmap, central, cpu0, flow) or a .bpf.c path".into()));
    }
    // "eevdf" in the list is the guest kernel's fair class.
    let variants = guest_variants(names.iter().map(|n| (n.as_str(), (n != "eevdf").then_some(n.as_str()))), &file)?;
    let cpus = guest_cpus(args.vm_cpus, s, &file)?;
    let guest = interruptible(|| boot(path, s, &variants, sets, cpus, quiet, trace))?;
    let mut failed = Vec::new();
    if let Some(t) = trace {
        failed.extend(write_traces(&guest, &t.path, quiet));
    }
    let mut out = guest.header();
    for g in &guest.scheds {
        out.push_str(&describe(g));
        let mut sim_s = s.clone();
        let name = variants.iter().position(|v| v.label == g.name).map_or(g.name.clone(), |i| names[i].clone());
        if g.builtin {
            sim_s.scheduler.kind = "eevdf".into();
            sim_s.scheduler.sched = None;
        } else {
            sim_s.scheduler.sched = Some(name);
        }
        match (crate::real::simulate_like(&sim_s, &file, cpus), &g.json) {
            (Ok(sim), Some(real)) => {
                out.push_str(&format!("\n--- simulated ({} on {cpus} CPUs) ---\n", sim.scheduler));
                out.push_str(&sim.summary());
                out.push_str("\nreal vs simulated\n");
                out.push_str(&share_rows(real, &sim));
            }
            (Err((_, e)), _) => out.push_str(&format!("(no simulation: {e})\n")),
            _ => {}
        }
        let p = g.problems();
        if !p.is_empty() {
            out.push_str(&format!("PROBLEMS: {}\n", p.join("; ")));
            failed.push(format!("{}: {}", g.name, p.join("; ")));
        }
    }
    if let Some(j) = json {
        let all = Value::Array(
            guest
                .scheds
                .iter()
                .map(|g| {
                    serde_json::json!({
                        "scheduler": g.name, "kernel": guest.version, "state": g.state, "ops": g.ops,
                        "state_after_detach": g.state_after_detach, "exit_kind": g.exit_name(),
                        "exit_reason": g.exit_reason, "exit_msg": g.exit_msg,
                        "counters": g.counters.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
                        "results": g.json, "problems": g.problems(),
                        "output": g.summary, "loader": g.loader, "console": guest.console,
                    })
                })
                .collect(),
        );
        let text = serde_json::to_string_pretty(&all).unwrap_or_default() + "\n";
        if j.as_os_str() == "-" {
            print!("{text}");
        } else {
            std::fs::write(&j, text).map_err(|e| (1, format!("{}: {e}", j.display())))?;
        }
    }
    if !quiet {
        print!("{out}");
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err((1, format!("--vm: {} (the guest's console: {})", failed.join(" | "), guest.console.display())))
    }
}

/// A scheduler's name in the guest's reports.
fn label(n: &str) -> String {
    let base = Path::new(n).file_name().map_or(n.to_string(), |f| f.to_string_lossy().trim_end_matches(".bpf.c").to_string());
    base.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::{guest_scenario_text, is_static_elf};

    #[test]
    fn the_guest_gets_rtapp_files_inlined() {
        let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/rtapp-periodic.toml");
        let text = guest_scenario_text(&shipped).expect("stages");
        // Parsed from a directory where the JSON's relative path leads nowhere.
        let s = schedlab::workload::scenario::Scenario::parse(&text, "/scenario.toml", &[]).expect("parses");
        let rtapp = s.workloads.iter().find_map(|w| match w {
            schedlab::workload::scenario::WorkloadSpec::Rtapp(r) => Some(r),
            _ => None,
        });
        let r = rtapp.expect("an rt-app workload");
        assert!(r.file.is_none() && r.json.as_deref().is_some_and(|j| j.contains("tasks")), "{text}");
        schedlab::workload::world::build(&s, "/scenario.toml").expect("builds without the file");
        // A scenario without rt-app files goes as it is, comments and all.
        let plain = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/nice-hogs.toml");
        assert_eq!(guest_scenario_text(&plain).unwrap(), std::fs::read_to_string(&plain).unwrap());
    }

    /// A minimal ELF64 file whose program headers have these types.
    fn elf(types: &[u32]) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        b[32..40].copy_from_slice(&64u64.to_le_bytes());
        b[54..56].copy_from_slice(&56u16.to_le_bytes());
        b[56..58].copy_from_slice(&(types.len() as u16).to_le_bytes());
        for t in types {
            let mut h = vec![0u8; 56];
            h[..4].copy_from_slice(&t.to_le_bytes());
            b.extend(h);
        }
        b
    }

    #[test]
    fn static_executables_are_told_apart_by_their_interpreter() {
        let dir = std::env::temp_dir().join(format!("schedlab-elf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        };
        // PT_LOAD (1), PT_DYNAMIC (2) without PT_INTERP (3): static-pie.
        assert!(is_static_elf(&write("static", &elf(&[1, 2, 1]))).unwrap());
        assert!(!is_static_elf(&write("dynamic", &elf(&[6, 3, 1, 2]))).unwrap());
        assert!(is_static_elf(&write("text", b"#!/bin/sh\necho hi\n")).is_err());
        assert!(is_static_elf(&write("short", &elf(&[3])[..100])).is_err());
        // This test binary is linked the usual (dynamic) way.
        assert!(!is_static_elf(&std::env::current_exe().unwrap()).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
