//! The measurements behind `schedlab calibrate`, one function each.
//!
//! Conventions: every thread pins itself before it measures
//! (`sched_setaffinity` of the calling thread); time is CLOCK_MONOTONIC,
//! which is one clock on every CPU, so a timestamp taken on one CPU and
//! read on another gives a latency; a "busy" CPU runs a [`Spinner`], a
//! `SCHED_IDLE` thread that spins, so the CPU never enters an idle state
//! yet any normal task woken there preempts the spinner at once.

use std::fs::File;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::{Figure, Stat};
use crate::sys;

/// How many samples each probe takes.
pub(super) struct Plan {
    /// Rounds of the ping-pong and migration probes (one sample each).
    rounds: usize,
    /// Round trips (or moves) per round.
    iters: usize,
    /// Blocks of the wakeup and timer probes (paired across variants).
    blocks: usize,
    /// Wakeups or timer expiries per block.
    per_block: usize,
    /// Timer-wheel timeouts.
    wheel: usize,
    /// Forks.
    forks: usize,
}

impl Plan {
    /// The default plan (~3-4 s on a 2-CPU VM), or about a quarter of it.
    pub(super) fn new(quick: bool) -> Plan {
        if quick {
            Plan { rounds: 8, iters: 400, blocks: 4, per_block: 25, wheel: 20, forks: 50 }
        } else {
            Plan { rounds: 24, iters: 2000, blocks: 8, per_block: 60, wheel: 80, forks: 200 }
        }
    }
}

/// Every probe in turn. `a` and `b` are two CPUs in one LLC (`b` None on
/// a single-CPU machine), `x` a CPU in another LLC than `a`, if any.
pub(super) fn all(plan: &Plan, a: usize, b: Option<usize>, x: Option<usize>) -> Vec<Figure> {
    let mut out = Vec::new();
    let fig = |key, what, stat: Option<Stat>, why: &str| Figure { key, what, stat: stat.ok_or_else(|| why.to_string()) };
    let err = |e: io::Error| format!("failed: {e}");

    // Context switches.
    match context_switches(plan, a) {
        Ok((t, p, mm)) => {
            out.push(fig("context_switch", "thread to thread on one CPU (pipe ping-pong)", t, "no samples"));
            out.push(fig("context_switch_process", "process to process on one CPU (pipe ping-pong)", p, "no samples"));
            out.push(fig("mm_switch", "process switch minus thread switch", mm, "no samples"));
        }
        Err(e) => out.push(Figure { key: "context_switch", what: "pipe ping-pong on one CPU", stat: Err(err(e)) }),
    }

    // Wakeups across CPUs, to an idle and to a busy target.
    let no_pair = "not measurable here: one CPU";
    match b.map(|b| wakeups(plan, a, b, x)) {
        Some(Ok(w)) => {
            out.push(fig("wakeup_idle", "pipe wakeup of a sleeper on an idle CPU, same LLC", Stat::of(&w.idle.concat()), "no samples"));
            out.push(fig("wakeup_busy", "pipe wakeup of a sleeper on a busy CPU, same LLC", Stat::of(&w.busy.concat()), "no samples"));
            out.push(fig("idle_exit", "wakeup on an idle CPU minus on a busy one", Stat::paired(&w.idle, &w.busy), "no samples"));
            let one_llc = "not measurable here: one LLC";
            out.push(fig("wakeup_xllc_idle", "pipe wakeup of a sleeper on an idle CPU, other LLC", Stat::of(&w.x_idle.concat()), one_llc));
            out.push(fig("wakeup_xllc_busy", "pipe wakeup of a sleeper on a busy CPU, other LLC", Stat::of(&w.x_busy.concat()), one_llc));
            out.push(fig("xllc_extra", "busy wakeup across LLCs minus within one", Stat::paired(&w.x_busy, &w.busy), one_llc));
        }
        Some(Err(e)) => out.push(Figure { key: "wakeup_idle", what: "cross-CPU wakeups", stat: Err(err(e)) }),
        None => out.push(fig("wakeup_idle", "cross-CPU wakeups", None, no_pair)),
    }

    // Messages: a write and a read that neither block nor wake anyone.
    match messages(plan, a) {
        Ok(m) => {
            out.push(fig("msg_write_pipe", "100-byte write() to a pipe, nobody to wake, one thread", Stat::of(&m.write_pipe), "no samples"));
            out.push(fig("msg_read_pipe", "100-byte read() from a pipe with data, one thread", Stat::of(&m.read_pipe), "no samples"));
            out.push(fig("msg_write_socket", "100-byte write() to a unix stream socket, nobody to wake, one thread", Stat::of(&m.write_socket), "no samples"));
            out.push(fig("msg_read_socket", "100-byte read() from a unix stream socket with data, one thread", Stat::of(&m.read_socket), "no samples"));
        }
        Err(e) => out.push(Figure { key: "msg_write_pipe", what: "pipe and socket messages", stat: Err(err(e)) }),
    }
    out.push(match b.map(|b| waking_writes(plan, a, b)) {
        Some(Ok(v)) => fig("msg_write_wakes", "100-byte pipe write() that wakes a reader blocked on an idle CPU, writer's time", Stat::of(&v), "no samples"),
        Some(Err(e)) => Figure { key: "msg_write_wakes", what: "waking writes", stat: Err(err(e)) },
        None => fig("msg_write_wakes", "waking writes", None, no_pair),
    });

    // Timers, on the target CPU (the only one, on a single-CPU machine).
    let t = b.unwrap_or(a);
    match timers(plan, t) {
        Ok(tm) => {
            out.push(fig("hrtimer", "clock_nanosleep overshoot, slack 1 ns, idle CPU", Stat::of(&tm.exact.concat()), "no samples"));
            out.push(fig("hrtimer_default_slack", "clock_nanosleep overshoot, default slack, idle CPU", Stat::of(&tm.slack.concat()), "no samples"));
            out.push(fig("timer_slack", "overshoot with default slack minus with 1 ns", Stat::paired(&tm.slack, &tm.exact), "no samples"));
            out.push(fig("hrtimer_busy", "clock_nanosleep overshoot, slack 1 ns, busy CPU", Stat::of(&tm.busy.concat()), "no samples"));
        }
        Err(e) => out.push(Figure { key: "hrtimer", what: "hrtimer probes", stat: Err(err(e)) }),
    }
    out.push(match timer_wheel(plan, t) {
        Ok(v) => fig("timer_wheel", "SO_RCVTIMEO 2 ms timeout overshoot (timer wheel)", Stat::of(&v), "no samples"),
        Err(e) => Figure { key: "timer_wheel", what: "timer wheel", stat: Err(err(e)) },
    });

    // Migration.
    out.push(match b.map(|b| migration(plan, a, b)) {
        Some(Ok(v)) => fig("migrate", "sched_setaffinity moving the caller to a busy CPU, minus one that keeps it", Stat::of(&v), "no samples"),
        Some(Err(e)) => Figure { key: "migrate", what: "migration", stat: Err(err(e)) },
        None => fig("migrate", "migration", None, no_pair),
    });

    // How the kernel ends a CPU-bound task's turn: at a tick, or on time.
    out.push(match turns(plan, a) {
        Ok(v) => fig("turn", "two CPU-bound threads on one CPU: how long each runs before the other gets the CPU", Stat::of(&v), "no complete turns"),
        Err(e) => Figure { key: "turn", what: "turns of two CPU-bound threads", stat: Err(err(e)) },
    });

    // Fork and exit.
    match fork_exit(plan, a) {
        Ok((f, c, e)) => {
            out.push(fig("fork", "fork() in the parent, call to return", Stat::of(&f), "no samples"));
            out.push(fig("fork_child_runs", "fork() call to the child's first instruction, same CPU", Stat::of(&c), "no samples"));
            out.push(fig("exit", "child _exit() to the parent's return from waitpid", Stat::of(&e), "no samples"));
        }
        Err(e) => out.push(Figure { key: "fork", what: "fork and exit", stat: Err(err(e)) }),
    }
    out
}

/// Two SCHED_OTHER processes spin on `cpu` for a while, each reading the
/// vDSO clock in a loop (no system call: reading the thread's CPU clock
/// would run the scheduler's update_curr() and end the turn at the slice
/// by itself): a gap of over 50 us between two reads is the other one's
/// turn (an interrupt takes a few us). Returns the length of every
/// complete turn, ns. With only the tick to notice a used-up slice a turn
/// lasts to the tick after it; with the hrtick it ends on time. Linux
/// 6.18.44 here: 3.98 ms turns at HZ 250, no hrtick.
fn turns(plan: &Plan, cpu: usize) -> io::Result<Vec<f64>> {
    const GAP_NS: u64 = 50_000;
    let run_ns = if plan.rounds < 24 { 300_000_000 } else { 1_000_000_000 };
    std::thread::scope(|s| {
        s.spawn(|| -> io::Result<Vec<f64>> {
            pin(cpu)?;
            let start = sys::now_ns() + 5_000_000;
            let mut kids = Vec::new();
            for _ in 0..2 {
                // One pipe each: a report longer than PIPE_BUF is not
                // written atomically.
                let (r, w) = sys::pipe_files()?;
                let pid = sys::fork()?;
                if pid == 0 {
                    drop(r);
                    let mut w = w;
                    let mut out: Vec<u8> = Vec::new();
                    sys::sleep_until(start);
                    let (mut last, mut began) = (sys::now_ns(), None::<u64>);
                    loop {
                        let t = sys::now_ns();
                        if t - start >= run_ns {
                            break;
                        }
                        if t - last > GAP_NS {
                            // The turn that ended at `last` began at `began`;
                            // the first one may have begun before the run.
                            if let Some(b) = began {
                                out.extend_from_slice(&(last - b).to_ne_bytes());
                            }
                            began = Some(t);
                        }
                        last = t;
                    }
                    let ok = w.write_all(&out).is_ok();
                    sys::exit_now(if ok { 0 } else { 1 });
                }
                drop(w);
                kids.push((pid, r));
            }
            let mut v = Vec::new();
            for (pid, mut r) in kids {
                let mut buf = Vec::new();
                r.read_to_end(&mut buf)?;
                sys::wait_child(pid)?;
                v.extend(buf.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap_or_default()) as f64));
            }
            Ok(v)
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("turn probe thread panicked")))
    })
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) -> io::Result<()> {
    sys::sched_setaffinity(0, &[cpu])
}

/// A `SCHED_IDLE` thread spinning on one CPU until dropped: the CPU is
/// busy (no idle state) but yields to any normal task at once.
struct Spinner {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Spinner {
    fn start(cpu: usize) -> io::Result<Spinner> {
        let stop = Arc::new(AtomicBool::new(false));
        // 0 starting, 1 spinning, 2 could not pin itself or become SCHED_IDLE.
        let state = Arc::new(std::sync::atomic::AtomicU8::new(0));
        let (s, st) = (stop.clone(), state.clone());
        let thread = std::thread::spawn(move || {
            let ok = pin(cpu).is_ok() && sys::sched_setattr(0, sys::SCHED_IDLE, 0, 0, 0).is_ok();
            st.store(if ok { 1 } else { 2 }, Ordering::SeqCst);
            while ok && !s.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        let spinner = Spinner { stop, thread: Some(thread) };
        loop {
            match state.load(Ordering::SeqCst) {
                0 => std::thread::yield_now(),
                1 => break,
                _ => return Err(io::Error::other(format!("cannot run a SCHED_IDLE spinner on CPU {cpu}"))),
            }
        }
        // Let it settle on its CPU.
        std::thread::sleep(std::time::Duration::from_millis(2));
        Ok(spinner)
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A small xorshift for the gaps between wakeups (no two runs alike in
/// phase with the tick, nothing to seed from the outside).
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        Rng(sys::now_ns() | 1)
    }
    /// Uniform in `lo..hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + self.0 % (hi - lo).max(1)
    }
}

fn byte_in(r: &mut File) -> io::Result<()> {
    r.read_exact(&mut [0u8; 1])
}

fn byte_out(w: &mut File) -> io::Result<()> {
    w.write_all(&[1u8])
}

/// Context switches, lmbench lat_ctx's way: two tasks pinned to one CPU
/// pass a byte back and forth through two pipes, so each round trip is
/// two switches plus two pipe writes and two reads; the same writes and
/// reads done by one thread on one pipe (no switch, nothing to wake) are
/// measured in the same round and subtracted. Once with two threads of
/// this process, once with a forked child (a different address space);
/// per round: (thread switch, process switch, their difference) in ns.
#[allow(clippy::type_complexity)]
fn context_switches(plan: &Plan, cpu: usize) -> io::Result<(Option<Stat>, Option<Stat>, Option<Stat>)> {
    let (mut t, mut p, mut d) = (Vec::new(), Vec::new(), Vec::new());
    std::thread::scope(|s| {
        s.spawn(|| -> io::Result<()> {
            pin(cpu)?;
            for round in 0..=plan.rounds {
                let base = pipe_alone(plan.iters)?;
                let th = pingpong(plan.iters, false)?;
                let pr = pingpong(plan.iters, true)?;
                if round == 0 {
                    continue; // warm-up
                }
                let (th, pr) = ((th - 2.0 * base) / 2.0, (pr - 2.0 * base) / 2.0);
                t.push(th);
                p.push(pr);
                d.push(pr - th);
            }
            Ok(())
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("probe thread panicked")))
    })?;
    Ok((Stat::of(&t), Stat::of(&p), Stat::of(&d)))
}

/// One write and one read of a byte on one pipe by one thread, ns per pair.
fn pipe_alone(iters: usize) -> io::Result<f64> {
    let (mut r, mut w) = sys::pipe_files()?;
    let t0 = sys::now_ns();
    for _ in 0..iters {
        byte_out(&mut w)?;
        byte_in(&mut r)?;
    }
    Ok((sys::now_ns() - t0) as f64 / iters as f64)
}

/// A ping-pong of `iters` round trips with a partner on the caller's CPU
/// (a thread, or a forked process); ns per round trip.
fn pingpong(iters: usize, process: bool) -> io::Result<f64> {
    let (mut r1, mut w1) = sys::pipe_files()?;
    let (mut r2, mut w2) = sys::pipe_files()?;
    let partner = move |r1: &mut File, w2: &mut File| -> io::Result<()> {
        for _ in 0..iters {
            byte_in(r1)?;
            byte_out(w2)?;
        }
        Ok(())
    };
    let measure = |w1: &mut File, r2: &mut File| -> io::Result<f64> {
        let t0 = sys::now_ns();
        for _ in 0..iters {
            byte_out(w1)?;
            byte_in(r2)?;
        }
        Ok((sys::now_ns() - t0) as f64 / iters as f64)
    };
    if process {
        // The child inherits the caller's pinning and only reads, writes and _exits.
        let pid = sys::fork()?;
        if pid == 0 {
            let ok = partner(&mut r1, &mut w2).is_ok();
            sys::exit_now(if ok { 0 } else { 1 });
        }
        drop(r1);
        drop(w2);
        let rt = measure(&mut w1, &mut r2);
        drop(w1);
        let _ = sys::wait_child(pid);
        rt
    } else {
        let cpu = sys::current_cpu() as usize;
        std::thread::scope(|s| {
            let h = s.spawn(move || {
                pin(cpu)?;
                partner(&mut r1, &mut w2)
            });
            let rt = measure(&mut w1, &mut r2);
            drop(w1);
            h.join().unwrap_or_else(|_| Err(io::Error::other("partner panicked")))?;
            rt
        })
    }
}

/// Per-call costs of message writes and reads (ns), one sample per round.
struct Messages {
    write_pipe: Vec<f64>,
    read_pipe: Vec<f64>,
    write_socket: Vec<f64>,
    read_socket: Vec<f64>,
}

/// Messages per batch of the message probe: far below what a pipe (16
/// pages, 655 such messages) or a unix socket's send buffer (212992 bytes
/// at ~676 bytes of truesize each, 315) holds, so no write blocks.
const MSG_BATCH: usize = 32;

/// hackbench's message size (its DATASIZE).
const MSG_BYTES: usize = 100;

/// Message costs: a thread pinned to `cpu` writes [`MSG_BATCH`] 100-byte
/// messages into a pipe (and a unix stream socket pair), timing the batch,
/// then reads them back, timing that batch: nothing blocks and nobody
/// waits, so each call is the system call, its locking and the copy, what
/// hackbench pays per message when its peer does not have to be woken.
/// One sample per round and kind: the batch's time per call; the kinds
/// alternate within a round, and a first round warms up.
fn messages(plan: &Plan, cpu: usize) -> io::Result<Messages> {
    std::thread::scope(|s| {
        s.spawn(|| -> io::Result<Messages> {
            pin(cpu)?;
            let mut m = Messages { write_pipe: Vec::new(), read_pipe: Vec::new(), write_socket: Vec::new(), read_socket: Vec::new() };
            let (mut pr, mut pw) = sys::pipe_files()?;
            let (mut sw, mut sr) = std::os::unix::net::UnixStream::pair()?;
            let mut buf = [0x5au8; MSG_BYTES];
            for round in 0..=plan.rounds {
                let (w, r) = batch(&mut pw, &mut pr, &mut buf)?;
                let (ws, rs) = batch(&mut sw, &mut sr, &mut buf)?;
                if round > 0 {
                    m.write_pipe.push(w);
                    m.read_pipe.push(r);
                    m.write_socket.push(ws);
                    m.read_socket.push(rs);
                }
            }
            Ok(m)
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("message probe thread panicked")))
    })
}

/// [`MSG_BATCH`] writes then as many reads; ns per write and per read.
fn batch(w: &mut impl Write, r: &mut impl Read, buf: &mut [u8; MSG_BYTES]) -> io::Result<(f64, f64)> {
    let t0 = sys::now_ns();
    for _ in 0..MSG_BATCH {
        w.write_all(buf)?;
    }
    let t1 = sys::now_ns();
    for _ in 0..MSG_BATCH {
        r.read_exact(buf)?;
    }
    let t2 = sys::now_ns();
    let n = MSG_BATCH as f64;
    Ok(((t1 - t0) as f64 / n, (t2 - t1) as f64 / n))
}

/// A write that wakes its reader: a reader pinned to `b` blocks in read(2)
/// on a pipe; the writer, pinned to `a`, waits a random 150-650 us (the
/// reader's CPU goes idle), then times its own 100-byte write(), which
/// now includes try_to_wake_up and the IPI to the idle CPU (in a VM, the
/// trap that sends it). Compare with `msg_write_pipe`, the same write
/// with nobody to wake. One sample per write, ns.
fn waking_writes(plan: &Plan, a: usize, b: usize) -> io::Result<Vec<f64>> {
    let n = plan.blocks * plan.per_block;
    let (mut r, mut w) = sys::pipe_files()?;
    let (done, gone) = (&AtomicU64::new(0), &AtomicBool::new(false));
    let mut rng = Rng::new();
    let gaps: Vec<u64> = (0..=n).map(|_| rng.range(150_000, 650_000)).collect();
    std::thread::scope(|s| {
        let reader = s.spawn(move || -> io::Result<()> {
            let mut run = || -> io::Result<()> {
                pin(b)?;
                let mut buf = [0u8; MSG_BYTES];
                loop {
                    match r.read(&mut buf)? {
                        0 => return Ok(()),
                        k => {
                            done.fetch_add(k as u64, Ordering::SeqCst);
                        }
                    }
                }
            };
            let out = run();
            gone.store(true, Ordering::SeqCst);
            out
        });
        // The writer owns the write end: when it stops, the reader reads EOF.
        let writer = s.spawn(move || -> io::Result<Vec<f64>> {
            pin(a)?;
            let buf = [0x5au8; MSG_BYTES];
            let mut v = Vec::with_capacity(n);
            for (i, gap) in gaps.iter().enumerate() {
                // The previous message is read: the reader is back in read(2).
                while done.load(Ordering::SeqCst) < (i * MSG_BYTES) as u64 {
                    if gone.load(Ordering::SeqCst) {
                        return Err(io::Error::other("the reader stopped"));
                    }
                    std::hint::spin_loop();
                }
                sys::sleep_until(sys::now_ns() + gap);
                let t0 = sys::now_ns();
                w.write_all(&buf)?;
                let t1 = sys::now_ns();
                if i > 0 {
                    v.push((t1 - t0) as f64); // the first one warms up
                }
            }
            Ok(v)
        });
        let v = writer.join().unwrap_or_else(|_| Err(io::Error::other("writer panicked")));
        let rd = reader.join().unwrap_or_else(|_| Err(io::Error::other("reader panicked")));
        rd.and(v)
    })
}

/// Wakeup latencies in blocks (ns): to an idle and a busy target in the
/// same LLC, and, with `x`, in another LLC.
struct Wakeups {
    idle: Vec<Vec<f64>>,
    busy: Vec<Vec<f64>>,
    x_idle: Vec<Vec<f64>>,
    x_busy: Vec<Vec<f64>>,
}

/// Wakeup latency: a sleeper pinned to the target CPU blocks in read(2) on
/// a pipe; the waker, pinned to another CPU, waits a random 150-650 us
/// (long enough for the target to enter an idle state), stamps the time
/// and writes a byte; the sleeper stamps the time when read returns. The
/// difference covers the waker's try_to_wake_up, the IPI (or the polling
/// idle loop noticing), the target's idle exit when idle, the switch and
/// the return to user space. Busy: the same with a [`Spinner`] on the
/// target. Blocks of each kind alternate.
fn wakeups(plan: &Plan, a: usize, b: usize, x: Option<usize>) -> io::Result<Wakeups> {
    let mut w = Wakeups { idle: Vec::new(), busy: Vec::new(), x_idle: Vec::new(), x_busy: Vec::new() };
    let mut rng = Rng::new();
    wake_block(a, b, 5, false, &mut rng)?; // warm-up
    for _ in 0..plan.blocks {
        w.idle.push(wake_block(a, b, plan.per_block, false, &mut rng)?);
        w.busy.push(wake_block(a, b, plan.per_block, true, &mut rng)?);
        if let Some(x) = x {
            w.x_idle.push(wake_block(a, x, plan.per_block, false, &mut rng)?);
            w.x_busy.push(wake_block(a, x, plan.per_block, true, &mut rng)?);
        }
    }
    Ok(w)
}

/// `n` wakeups of a sleeper on `target` from `waker` (see [`wakeups`]).
fn wake_block(waker: usize, target: usize, n: usize, busy: bool, rng: &mut Rng) -> io::Result<Vec<f64>> {
    let _spin = if busy { Some(Spinner::start(target)?) } else { None };
    let (mut r, mut w) = sys::pipe_files()?;
    let (sent, done, gone) = (&AtomicU64::new(0), &AtomicU64::new(0), &AtomicBool::new(false));
    let gaps: Vec<u64> = (0..n).map(|_| rng.range(150_000, 650_000)).collect();
    std::thread::scope(|s| {
        let sleeper = s.spawn(move || -> io::Result<Vec<f64>> {
            let mut run = || -> io::Result<Vec<f64>> {
                pin(target)?;
                let mut lat = Vec::with_capacity(n);
                for _ in 0..n {
                    byte_in(&mut r)?;
                    lat.push(sys::now_ns().saturating_sub(sent.load(Ordering::SeqCst)) as f64);
                    done.fetch_add(1, Ordering::SeqCst);
                }
                Ok(lat)
            };
            let out = run();
            // A sleeper that failed must not leave the waker waiting for it.
            gone.store(true, Ordering::SeqCst);
            out
        });
        // The waker owns the write end: when it stops, the sleeper reads EOF.
        let waker = s.spawn(move || -> io::Result<()> {
            pin(waker)?;
            for (i, gap) in gaps.iter().enumerate() {
                sys::sleep_until(sys::now_ns() + gap);
                while done.load(Ordering::SeqCst) < i as u64 {
                    if gone.load(Ordering::SeqCst) {
                        return Err(io::Error::other("the sleeper stopped"));
                    }
                    std::hint::spin_loop();
                }
                sent.store(sys::now_ns(), Ordering::SeqCst);
                byte_out(&mut w)?;
            }
            Ok(())
        });
        let waker = waker.join().unwrap_or_else(|_| Err(io::Error::other("waker panicked")));
        let lat = sleeper.join().unwrap_or_else(|_| Err(io::Error::other("sleeper panicked")));
        match (waker, lat) {
            (Ok(()), Ok(lat)) => Ok(lat),
            // The sleeper read EOF because the waker stopped: the waker's error says why.
            (Err(e), Err(l)) if l.kind() == io::ErrorKind::UnexpectedEof => Err(e),
            (_, Err(e)) | (Err(e), _) => Err(e),
        }
    })
}

/// Timer overshoots in blocks (ns).
struct Timers {
    exact: Vec<Vec<f64>>,
    slack: Vec<Vec<f64>>,
    busy: Vec<Vec<f64>>,
}

/// hrtimer latency: a thread pinned to `cpu` sleeps with
/// clock_nanosleep(TIMER_ABSTIME) until 500 us from now, and the overshoot
/// is the time it runs again minus the time asked for (cyclictest's
/// measure). With PR_SET_TIMERSLACK 1 ns ("exact") the hrtimer fires at
/// the time asked; with the thread's default slack (50 us for SCHED_OTHER)
/// the kernel may fire anywhere up to the slack later to batch expiries;
/// "busy": 1 ns slack with a [`Spinner`] on the CPU, so no idle exit.
/// Blocks of the three kinds alternate.
fn timers(plan: &Plan, cpu: usize) -> io::Result<Timers> {
    let mut t = Timers { exact: Vec::new(), slack: Vec::new(), busy: Vec::new() };
    let default = sys::timer_slack();
    timer_block(cpu, 5, 1)?; // warm-up
    for _ in 0..plan.blocks {
        t.exact.push(timer_block(cpu, plan.per_block, 1)?);
        t.slack.push(timer_block(cpu, plan.per_block, default)?);
        let _spin = Spinner::start(cpu)?;
        t.busy.push(timer_block(cpu, plan.per_block, 1)?);
    }
    Ok(t)
}

/// `n` overshoots of 500 us absolute sleeps on `cpu` with timer slack `slack` ns.
fn timer_block(cpu: usize, n: usize, slack: u64) -> io::Result<Vec<f64>> {
    std::thread::scope(|s| {
        s.spawn(|| -> io::Result<Vec<f64>> {
            pin(cpu)?;
            sys::set_timer_slack(slack)?;
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                let at = sys::now_ns() + 500_000;
                sys::sleep_until(at);
                v.push(sys::now_ns().saturating_sub(at) as f64);
            }
            Ok(v)
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("timer thread panicked")))
    })
}

/// Timer-wheel latency: recv(2) on a unix datagram socket with SO_RCVTIMEO
/// of 2 ms and nothing to receive. The socket's wait is schedule_timeout,
/// a timer-wheel (jiffies) timer, unlike the hrtimers of nanosleep, poll
/// or futex, so the overshoot past 2 ms shows the tick granularity.
fn timer_wheel(plan: &Plan, cpu: usize) -> io::Result<Vec<f64>> {
    std::thread::scope(|s| {
        s.spawn(|| -> io::Result<Vec<f64>> {
            pin(cpu)?;
            let (sock, _peer) = std::os::unix::net::UnixDatagram::pair()?;
            let timeout = std::time::Duration::from_millis(2);
            sock.set_read_timeout(Some(timeout))?;
            let mut buf = [0u8; 1];
            let mut v = Vec::with_capacity(plan.wheel);
            for _ in 0..plan.wheel {
                let t0 = sys::now_ns();
                match sock.recv(&mut buf) {
                    Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                    Err(e) => return Err(e),
                    Ok(_) => return Err(io::Error::other("received a datagram nobody sent")),
                }
                v.push((sys::now_ns() - t0) as f64 - timeout.as_nanos() as f64);
            }
            Ok(v)
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("timer thread panicked")))
    })
}

/// Migration: a thread pinned to one of `a`, `b` (both busy with a
/// [`Spinner`]) first widens its affinity to both (a mask change that
/// moves nothing), then narrows it to the other CPU, which makes the
/// kernel move it there (through the stopper thread of its CPU) before
/// sched_setaffinity returns. Per round: the mean time of the moving
/// call minus that of the non-moving one, ns.
fn migration(plan: &Plan, a: usize, b: usize) -> io::Result<Vec<f64>> {
    let _sa = Spinner::start(a)?;
    let _sb = Spinner::start(b)?;
    std::thread::scope(|s| {
        s.spawn(|| -> io::Result<Vec<f64>> {
            pin(a)?;
            let mut v = Vec::new();
            let mut there = b;
            let iters = (plan.iters / 10).max(20);
            for round in 0..=plan.rounds {
                let (mut stay, mut mv) = (0u64, 0u64);
                for _ in 0..iters {
                    let t0 = sys::now_ns();
                    sys::sched_setaffinity(0, &[a, b])?;
                    let t1 = sys::now_ns();
                    sys::sched_setaffinity(0, &[there])?;
                    let t2 = sys::now_ns();
                    if sys::current_cpu() as usize != there {
                        return Err(io::Error::other(format!("sched_setaffinity returned before the move to CPU {there}")));
                    }
                    stay += t1 - t0;
                    mv += t2 - t1;
                    there = if there == a { b } else { a };
                }
                if round > 0 {
                    v.push((mv as f64 - stay as f64) / iters as f64);
                }
            }
            Ok(v)
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("migration thread panicked")))
    })
}

/// Fork and exit: a thread pinned to `cpu` stamps the time and forks; the
/// child (same CPU, inherited) stamps its first instruction and the time
/// just before _exit(0), and sends both through a pipe; the parent stamps
/// fork's return and, after a blocking waitpid, its return. Per fork: the
/// parent's fork() call, fork to the child running, and _exit to the
/// parent's waitpid return (the child's teardown, the parent's wakeup and
/// switch), ns.
#[allow(clippy::type_complexity)]
fn fork_exit(plan: &Plan, cpu: usize) -> io::Result<(Vec<f64>, Vec<f64>, Vec<f64>)> {
    std::thread::scope(|s| {
        s.spawn(|| -> io::Result<(Vec<f64>, Vec<f64>, Vec<f64>)> {
            pin(cpu)?;
            let (mut r, mut w) = sys::pipe_files()?;
            let (mut f, mut c, mut e) = (Vec::new(), Vec::new(), Vec::new());
            for i in 0..=plan.forks {
                let t0 = sys::now_ns();
                let pid = sys::fork()?;
                if pid == 0 {
                    let tc = sys::now_ns();
                    let mut msg = [0u8; 16];
                    msg[..8].copy_from_slice(&tc.to_ne_bytes());
                    msg[8..].copy_from_slice(&sys::now_ns().to_ne_bytes());
                    let ok = w.write_all(&msg).is_ok();
                    sys::exit_now(if ok { 0 } else { 1 });
                }
                let tf = sys::now_ns();
                sys::wait_child(pid)?;
                let tw = sys::now_ns();
                let mut msg = [0u8; 16];
                r.read_exact(&mut msg)?;
                let tc = u64::from_ne_bytes(msg[..8].try_into().unwrap_or_default());
                let te = u64::from_ne_bytes(msg[8..].try_into().unwrap_or_default());
                if i > 0 {
                    f.push((tf - t0) as f64);
                    c.push(tc.saturating_sub(t0) as f64);
                    e.push(tw.saturating_sub(te) as f64);
                }
            }
            Ok((f, c, e))
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("fork thread panicked")))
    })
}
