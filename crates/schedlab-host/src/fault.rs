//! Containing hosted code that faults or does not return.
//!
//! In the kernel the BPF verifier proves, before a scheduler loads, that it
//! cannot fault and cannot loop forever. Natively neither holds, so every
//! call from the host into a scheduler's object goes through [`call`]:
//!
//! - **Faults.** SIGSEGV, SIGBUS, SIGILL (and a SIGFPE that is not a BPF
//!   division, see fpe.rs) raised while hosted code runs end that call: the
//!   handler puts the thread back where [`call`] was entered, as if the
//!   callback had returned, and [`call`] reports a [`Caught`]. A stack
//!   overflow is a SIGSEGV delivered on the thread's alternate signal stack
//!   (std sets one up for its threads; [`enter_thread`] adds one where
//!   missing).
//! - **Endless loops.** A watchdog thread sees a thread that has been inside
//!   one outermost call for longer than its budget (wall time, default
//!   [`DEFAULT_BUDGET_NS`], `scheduler.op_timeout` / `--op-timeout`), and
//!   signals it with [`timeout_signal`] until the handler catches it in
//!   the scheduler's text. The budget decides nothing else: a run whose
//!   callbacks all return is unaffected by it (and byte-identical).
//!
//! # When a signal is taken as the scheduler's
//!
//! Only when the thread is inside a guarded call (a
//! [`Guard`](guard::Guard) is on the thread's guard stack) **and** hosted
//! C is what runs: the innermost
//! guard's `hosted` flag is set by [`call`] and cleared by every kfunc for
//! its duration ([`kfunc_enter`], used by `state::with_ctx`), so a fault in
//! schedlab's own Rust code is never mistaken for the scheduler's, and
//! goes to the previous handler (std's stack overflow report, or the
//! default action) as before. (A kfunc's fast path, which runs only
//! schedlab's own text, leaves the flag set: the address test below tells
//! its faults apart; [`kfunc_ctx`].) For a fault, the instruction must
//! also lie in a loaded scheduler's text or outside the object holding
//! schedlab's own code, the executable or the Python extension module (a
//! C library function such as `memcpy` the scheduler called). For the
//! timeout, it must lie in a scheduler's text; anywhere else (a kfunc, the
//! C library) the signal is ignored and sent again a little later, so an
//! asynchronous abort never lands in Rust or in a C library call.
//!
//! # Soundness
//!
//! - Every Rust frame below the trampoline is paused at a call into C.
//!   Host state lives in `RefCell`s that are never borrowed across a call
//!   into C (state.rs), so none is left borrowed; [`call`] pops its
//!   guard, and with it the kfuncs' context, on the normal return path,
//!   which the abandoned call takes too.
//! - A kfunc's work is never half done: Rust code is never interrupted by
//!   the abort (see above). A kfunc that ran before the fault keeps its
//!   effect, as it would in the kernel before `scx_error()`.
//! - The scheduler's own memory may be half updated. The object is
//!   therefore not trusted again: after a fault the host calls nothing in
//!   it except `ops.exit` (where the kernel calls it after an error),
//!   guarded too. What it wrote into simulator-owned memory it could reach
//!   (map values, task views) stays within those buffers' bytes; a wild
//!   write that lands in schedlab's heap without faulting cannot be seen
//!   by any in-process scheme, which is why the invariant checks run after
//!   an ejection in the tests.
//! - A nested call (a kfunc such as `scx_bpf_reenqueue_local()` running
//!   `ops.enqueue`, or a `bpf_for_each_map_elem()` callback) has its own
//!   guard; a fault there returns to that kfunc, which completes and
//!   returns into the outer op.
//!
//! The guarded call itself ([`call`]), the trampoline that lets it be
//! abandoned and the guard stack the kfuncs find their context on are in
//! guard.rs; this module holds what takes and reports a fault: the
//! signal handler, the watchdog and the error messages.
//!
//! Elsewhere than x86-64 Linux, [`call`] calls without a guard.

mod guard;

use std::path::PathBuf;

pub(super) use guard::{call, kfunc_ctx, kfunc_enter, kfunc_exit, poison, top_ctx, Args};
use guard::top;

/// The default budget of one callback: 5 s of wall time.
pub(super) const DEFAULT_BUDGET_NS: u64 = 5_000_000_000;

/// What ended a guarded call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Segv,
    Bus,
    Ill,
    Fpe,
    /// The budget ran out.
    Timeout,
    /// A kfunc of the call panicked (state.rs resumes the panic; not a
    /// fault of the scheduler's).
    Panic,
}

/// A caught fault or timeout.
#[derive(Clone, Copy, Debug)]
pub(super) struct Caught {
    pub kind: Kind,
    /// `si_code`.
    pub code: i32,
    /// The faulting data address (`si_addr`).
    pub addr: usize,
    /// The instruction.
    pub ip: usize,
    /// The stack pointer at the fault, and at the guarded call's entry.
    pub sp: usize,
    pub entry_sp: usize,
    /// Page fault error code bit 1 (x86): the access was a write.
    pub write: Option<bool>,
    /// A general protection fault (x86 trap 13: a non-canonical address,
    /// for which the kernel reports no address).
    pub general_protection: bool,
}

/// What the handler saw, valid once [`Guard::sig`] is set.
#[derive(Clone, Copy)]
#[repr(C)]
struct Fault {
    code: i32,
    addr: usize,
    ip: usize,
    sp: usize,
    err: i64,
    trapno: i64,
}

/// This thread's entry in the watchdog's table ([`enter_thread`]). A host
/// state keeps it, as its calls are all made on the thread that created
/// it, so that a call need not look it up (a thread-local) twice.
#[derive(Clone, Copy)]
pub(super) struct Watch(imp::SlotRef);

/// Where a fault was, as the debug information of the object says.
pub(super) struct ObjInfo {
    /// The shared object (the cached build; a private copy is deleted once loaded).
    pub so: PathBuf,
    /// Its load bias.
    pub base: usize,
}

/// `file:line` (and function) of `ip` in `obj`, from its DWARF.
pub(super) fn locate(obj: &ObjInfo, ip: usize) -> Option<String> {
    let probe = ip.checked_sub(obj.base)? as u64;
    let loader = addr2line::Loader::new(&obj.so).ok()?;
    let loc = loader.find_location(probe).ok().flatten();
    let func = loader.find_symbol(probe).map(str::to_string);
    let at = loc.and_then(|l| Some(format!("{}:{}", l.file?, l.line?)));
    match (at, func) {
        (Some(at), Some(f)) => Some(format!("in {f}() at {at}")),
        (Some(at), None) => Some(format!("at {at}")),
        (None, Some(f)) => Some(format!("in {f}() (+{probe:#x}, no line information)")),
        (None, None) => None,
    }
}

/// The error exit's message for `c` in `what` (e.g. `ops.enqueue`).
pub(super) fn describe(c: &Caught, what: &str, obj: &ObjInfo, budget_ns: u64) -> String {
    let in_sched = super::fpe::in_scheduler_text(c.ip);
    let at = if in_sched {
        locate(obj, c.ip).map_or_else(|| format!(" at {:#x}", c.ip), |l| format!(" {l}"))
    } else {
        format!(" in a C library function it called (pc {:#x})", c.ip)
    };
    let verifier = "the kernel's verifier would have rejected this program";
    if c.kind == Kind::Timeout {
        return format!(
            "{what} did not return within {} of wall time (an endless loop? interrupted{at}); {verifier}: it only loads programs whose every loop is bounded (bpf_for(), bpf_repeat(), can_loop). The budget is scheduler.op_timeout / --op-timeout",
            schedlab::engine::time::fmt_ns(budget_ns)
        );
    }
    let stack = c.entry_sp.saturating_sub(c.sp);
    let near_sp = c.addr.abs_diff(c.sp) < 1 << 16;
    if c.kind == Kind::Segv && near_sp && stack > 256 << 10 {
        return format!(
            "{what}: stack overflow{at}: the callback used {} KiB of stack (deep or unbounded recursion); {verifier}: BPF programs have 512 bytes of stack and at most 8 nested calls",
            stack >> 10
        );
    }
    let access = match c.write {
        Some(true) => "write to",
        Some(false) => "read of",
        None => "access to",
    };
    // SEGV_MAPERR (1), SEGV_ACCERR (2).
    let mapping = match c.code {
        1 => "unmapped ",
        2 => "protected ",
        _ => "",
    };
    let what_addr = if c.general_protection {
        "access to a non-canonical address (general protection fault; a wild pointer)".to_string()
    } else if c.addr < 4096 && c.kind == Kind::Segv {
        format!("{access} address {:#x} (NULL pointer dereference)", c.addr)
    } else {
        format!("{access} {mapping}address {:#x}", c.addr)
    };
    let (sig, detail, why) = match c.kind {
        Kind::Segv => ("SIGSEGV", format!("invalid memory access: {what_addr}"), "it proves every memory access safe before loading"),
        Kind::Bus => (
            "SIGBUS",
            format!("invalid memory access: bus error at address {:#x}", c.addr),
            "it proves every memory access safe before loading",
        ),
        Kind::Ill => (
            "SIGILL",
            "illegal instruction (__builtin_trap(), or code the compiler took for unreachable)".into(),
            "it refuses unreachable instructions and every path that does not return",
        ),
        Kind::Fpe => ("SIGFPE", "arithmetic exception".into(), "BPF arithmetic cannot trap"),
        Kind::Timeout => unreachable!("handled above"),
        Kind::Panic => unreachable!("a kfunc's panic is resumed, not described"),
    };
    format!("{what}: {detail}{at} ({sig} natively); {verifier}: {why}")
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod imp {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
    use std::sync::Once;
    use std::time::{Duration, Instant};

    use super::*;

    /// One thread the watchdog watches.
    pub(crate) struct Slot {
        /// Kernel thread id (0: free).
        tid: AtomicI32,
        /// Odd while the thread is inside an outermost guarded call.
        epoch: AtomicU64,
        budget: AtomicU64,
        /// The epoch the watchdog gave up on (the handler aborts only it).
        kill: AtomicU64,
    }

    /// A thread's slot ([`Watch`]).
    pub(crate) type SlotRef = &'static Slot;

    const NSLOTS: usize = 512;
    const fn free_slot() -> Slot {
        Slot { tid: AtomicI32::new(0), epoch: AtomicU64::new(0), budget: AtomicU64::new(0), kill: AtomicU64::new(u64::MAX) }
    }
    static SLOTS: [Slot; NSLOTS] = [const { free_slot() }; NSLOTS];
    /// The slot of threads not registered, or that found none free: the
    /// watchdog never reads it (their calls have no time limit), its `kill`
    /// never matches, and its epoch, shared, means nothing.
    static UNWATCHED: Slot = free_slot();
    const NO_SLOT: usize = usize::MAX;

    thread_local! {
        /// This thread's slot, UNWATCHED until [`enter_thread`] finds it
        /// one. A reference rather than an index, so the outermost call
        /// needs no bounds check.
        static MY_SLOT: Cell<&'static Slot> = const { Cell::new(&UNWATCHED) };
        static OWNER: SlotOwner = const { SlotOwner(Cell::new(NO_SLOT)) };
    }

    /// Frees this thread's slot when it exits.
    struct SlotOwner(Cell<usize>);
    impl Drop for SlotOwner {
        fn drop(&mut self) {
            if let Some(s) = SLOTS.get(self.0.get()) {
                let e = s.epoch.load(Ordering::Acquire);
                s.epoch.store((e | 1) + 1, Ordering::Release);
                s.tid.store(0, Ordering::Release);
            }
        }
    }

    static INSTALL: Once = Once::new();
    static WATCHDOG: Once = Once::new();
    static mut OLD: [std::mem::MaybeUninit<libc::sigaction>; 4] = [const { std::mem::MaybeUninit::uninit() }; 4];
    const SIGS: [i32; 3] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL];
    /// Executable ranges of the object that holds schedlab's own code: the
    /// executable for the CLI, the extension module under Python (whose
    /// executable is the interpreter).
    static OWN_TEXT: [(AtomicU64, AtomicU64); 8] = [const { (AtomicU64::new(0), AtomicU64::new(0)) }; 8];

    pub(super) fn timeout_signal() -> i32 {
        libc::SIGRTMIN() + 5
    }

    fn in_own_text(ip: usize) -> bool {
        OWN_TEXT.iter().any(|(s, e)| {
            let (s, e) = (s.load(Ordering::Relaxed) as usize, e.load(Ordering::Relaxed) as usize);
            s != 0 && ip >= s && ip < e
        })
    }

    /// dl_iterate_phdr's callback: records the executable segments of the
    /// object whose text holds this very function, and stops there.
    unsafe extern "C" fn own_phdrs(info: *mut libc::dl_phdr_info, _: libc::size_t, _: *mut libc::c_void) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes a valid info.
        let info = unsafe { &*info };
        let here = own_phdrs as *const () as u64;
        // SAFETY: dlpi_phdr has dlpi_phnum entries.
        let segments = || (0..info.dlpi_phnum as usize).map(|i| unsafe { &*info.dlpi_phdr.add(i) });
        let text = |ph: &libc::Elf64_Phdr| {
            let start = info.dlpi_addr + ph.p_vaddr;
            (ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0).then_some((start, start + ph.p_memsz))
        };
        if !segments().filter_map(text).any(|(s, e)| (s..e).contains(&here)) {
            return 0;
        }
        for (slot, (s, e)) in OWN_TEXT.iter().zip(segments().filter_map(text)) {
            slot.0.store(s, Ordering::Relaxed);
            slot.1.store(e, Ordering::Relaxed);
        }
        1
    }

    /// Installs the handlers (once per process).
    pub(crate) fn install() {
        INSTALL.call_once(|| {
            // SAFETY: the callback only reads the program headers it is given.
            unsafe { libc::dl_iterate_phdr(Some(own_phdrs), std::ptr::null_mut()) };
            let mut all = SIGS.to_vec();
            all.push(timeout_signal());
            for (i, &sig) in all.iter().enumerate() {
                // SAFETY: a zeroed sigaction is valid; we fill the handler,
                // flags and an empty mask, and save the previous action in
                // OLD[i], written only here, once, before it can be read.
                unsafe {
                    let mut sa: libc::sigaction = std::mem::zeroed();
                    sa.sa_sigaction = on_signal as *const () as usize;
                    sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
                    libc::sigemptyset(&mut sa.sa_mask);
                    libc::sigaction(sig, &sa, (&raw mut OLD[i]).cast());
                }
            }
        });
    }

    /// Prepares this thread for guarded calls: installs the handlers,
    /// makes sure it has an alternate signal stack (for stack overflows)
    /// and registers it with the watchdog. The host state of a scheduler
    /// calls it when it is created; it is neither Send nor Sync, so every
    /// call into the scheduler is made on a thread that did, and [`call`]
    /// need not check.
    pub(crate) fn enter_thread() -> Watch {
        if !std::ptr::eq(MY_SLOT.get(), &UNWATCHED) {
            return Watch(MY_SLOT.get());
        }
        install();
        // SAFETY: querying and setting this thread's alternate stack; the
        // mapping we install is never freed (threads that host schedulers
        // are few and long-lived).
        unsafe {
            let mut cur: libc::stack_t = std::mem::zeroed();
            libc::sigaltstack(std::ptr::null(), &mut cur);
            if cur.ss_flags & libc::SS_DISABLE != 0 {
                let size = 64 << 10;
                let p = libc::mmap(std::ptr::null_mut(), size, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
                if p != libc::MAP_FAILED {
                    let st = libc::stack_t { ss_sp: p, ss_flags: 0, ss_size: size };
                    libc::sigaltstack(&st, std::ptr::null_mut());
                }
            }
        }
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let slot = SLOTS.iter().position(|s| s.tid.compare_exchange(0, tid, Ordering::AcqRel, Ordering::Acquire).is_ok()).unwrap_or(NO_SLOT);
        if slot != NO_SLOT {
            // Epochs go on from the slot's previous thread, so the watchdog
            // never takes this thread's call for that one's.
            let e = SLOTS[slot].epoch.load(Ordering::Acquire);
            SLOTS[slot].epoch.store((e | 1) + 1, Ordering::Release);
            OWNER.with(|o| o.0.set(slot));
            WATCHDOG.call_once(|| {
                let _ = std::thread::Builder::new().name("schedlab-op-watchdog".into()).spawn(watchdog);
            });
        }
        MY_SLOT.set(SLOTS.get(slot).unwrap_or(&UNWATCHED));
        Watch(MY_SLOT.get())
    }

    /// Signals threads that stay inside one outermost call past their budget.
    fn watchdog() {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let mut seen: Vec<(u64, Instant)> = vec![(0, Instant::now()); NSLOTS];
        loop {
            std::thread::sleep(Duration::from_millis(20));
            let now = Instant::now();
            for (i, s) in SLOTS.iter().enumerate() {
                let tid = s.tid.load(Ordering::Acquire);
                let e = s.epoch.load(Ordering::Acquire);
                if tid == 0 || e % 2 == 0 {
                    seen[i].0 = e;
                    continue;
                }
                if seen[i].0 != e {
                    seen[i] = (e, now);
                    continue;
                }
                let budget = s.budget.load(Ordering::Relaxed);
                if budget > 0 && now.duration_since(seen[i].1) >= Duration::from_nanos(budget) {
                    s.kill.store(e, Ordering::Release);
                    // SAFETY: signalling a thread of this process; the handler
                    // ignores the signal unless it is still in epoch `e`.
                    unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, timeout_signal()) };
                }
            }
        }
    }

    /// Starts the outermost call of this thread: its epoch turns odd, so the
    /// watchdog starts timing it.
    #[inline(always)]
    pub(super) fn enter_outermost(s: SlotRef, budget_ns: u64) {
        debug_assert!(std::ptr::eq(s, MY_SLOT.get()), "a call on another thread than its host state's");
        s.budget.store(budget_ns, Ordering::Relaxed);
        // Only this thread writes its slot's epoch, so a load and a store
        // do (no locked read-modify-write); Release publishes the budget.
        s.epoch.store(s.epoch.load(Ordering::Relaxed) + 1, Ordering::Release);
    }

    /// Ends the outermost call of this thread: its epoch turns even.
    #[inline(always)]
    pub(super) fn leave_outermost(s: SlotRef) {
        s.epoch.store(s.epoch.load(Ordering::Relaxed) + 1, Ordering::Release);
    }

    /// (see the module doc); false if it is not ours.
    ///
    /// # Safety
    /// Called from a signal handler with the kernel's `info` and `ctx`.
    pub(crate) unsafe fn try_recover(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) -> bool {
        let top = top();
        // SAFETY: `top` is this thread's innermost live guard (its `call`
        // is suspended below this handler), or the bottom.
        if unsafe { !(*top).hosted } {
            return false;
        }
        // SAFETY: the kernel passes a ucontext_t for SA_SIGINFO handlers.
        let uc = unsafe { &mut *ctx.cast::<libc::ucontext_t>() };
        let gr = &mut uc.uc_mcontext.gregs;
        let ip = gr[libc::REG_RIP as usize] as usize;
        let in_sched = super::super::fpe::in_scheduler_text(ip);
        if sig == timeout_signal() {
            let s = MY_SLOT.get();
            if !in_sched || s.kill.load(Ordering::Acquire) != s.epoch.load(Ordering::Acquire) {
                // Not now: the watchdog sends it again.
                return true;
            }
        } else if !in_sched && in_own_text(ip) {
            return false;
        }
        // SAFETY: `top` is the innermost live guard of this thread (set by
        // `call`, which is suspended below this handler), and the trampoline
        // has filled its registers (we are not in schedlab's own text).
        let regs = unsafe { (*top).regs.assume_init() };
        // SAFETY: reading the siginfo the kernel passed.
        let (code, addr) = unsafe { ((*info).si_code, if sig == timeout_signal() { 0 } else { (*info).si_addr() as usize }) };
        let fault = Fault {
            code,
            addr,
            ip,
            sp: gr[libc::REG_RSP as usize] as usize,
            err: gr[libc::REG_ERR as usize],
            trapno: gr[libc::REG_TRAPNO as usize],
        };
        // SAFETY: as above; `fault` before `sig`, which `call` reads first.
        unsafe {
            (*top).fault.write(fault);
            (*top).sig = sig;
        }
        for (reg, v) in [libc::REG_RBX, libc::REG_RBP, libc::REG_R12, libc::REG_R13, libc::REG_R14, libc::REG_R15].into_iter().zip(regs) {
            gr[reg as usize] = v as i64;
        }
        gr[libc::REG_RSP as usize] = regs[6] as i64;
        gr[libc::REG_RIP as usize] = regs[7] as i64;
        gr[libc::REG_RAX as usize] = 0;
        true
    }

    extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: we are the handler the kernel called with these.
        if unsafe { try_recover(sig, info, ctx) } {
            return;
        }
        if sig == timeout_signal() {
            return;
        }
        // Not ours: the previous disposition decides, as if we were not here.
        let i = SIGS.iter().position(|&s| s == sig).unwrap_or(0);
        // SAFETY: OLD[i] was filled by sigaction() before this handler could run.
        let old = unsafe { &*(&raw const OLD[i]).cast::<libc::sigaction>() };
        let h = old.sa_sigaction;
        if h == libc::SIG_DFL || h == libc::SIG_IGN {
            // SAFETY: restoring the default; the instruction faults again
            // under it and the process ends as it would have.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        } else if old.sa_flags & libc::SA_SIGINFO != 0 {
            // SAFETY: the previous handler (e.g. std's stack overflow
            // report) with the arguments it was registered to take.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = unsafe { std::mem::transmute(h) };
            f(sig, info, ctx);
        } else {
            // SAFETY: a plain handler.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
            f(sig);
        }
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod imp {
    use super::*;

    pub type SlotRef = ();

    pub fn enter_outermost(_: SlotRef, _budget_ns: u64) {}

    pub fn leave_outermost(_: SlotRef) {}


    pub fn timeout_signal() -> i32 {
        0
    }

    pub fn install() {}

    pub fn enter_thread() -> Watch {
        Watch(())
    }
}

pub(super) use imp::{enter_thread, install};
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(super) use imp::try_recover;
