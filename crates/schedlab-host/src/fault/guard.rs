//! Guarded calls: the guard stack, the trampolines, the kfuncs' context.
//!
//! Every call from the host into a scheduler's object goes through [`call`],
//! which pushes a [`Guard`] on this thread's guard stack: the signal
//! handler (the parent module, fault.rs) abandons the call through it, and
//! the call's kfuncs find their context in it. Kept apart from the signal
//! handling because this is the path every op, kfunc and nested callback
//! takes, counted in instructions (the outermost call is inlined into its
//! caller on purpose), while the handler, the watchdog and the error
//! messages run only once something went wrong.
//!
//! # Mechanism
//!
//! `__schedlab_guard_call` (assembly below, x86-64) stores the callee-saved
//! registers, the stack pointer and the return address into a [`Guard`]
//! on the Rust caller's stack and tail-jumps into the C function, which
//! then returns straight to the Rust caller. To abandon the call, the
//! signal handler writes what happened into the innermost guard and
//! rewrites the interrupted context (`ucontext`) to those saved registers,
//! with the return address as the instruction pointer; when the handler
//! returns, `sigreturn` resumes the thread exactly as if the trampoline had
//! returned, with the signal mask and alternate stack state restored by
//! the kernel. Nothing is unwound and no `longjmp` crosses a Rust frame:
//! only the C frames above the trampoline are dropped. This costs a few
//! stores per call (cheaper than `sigsetjmp`, which would save the signal
//! mask with a system call unless told not to).
//!
//! Elsewhere than x86-64 Linux, [`call`] calls without a guard.

use std::mem::MaybeUninit;

use super::super::state::Ctx;
use super::{Caught, Fault, Kind, Watch};

/// One guarded call in progress: what the trampoline saved, what the
/// signal handler found, and the context the call's kfuncs run in.
///
/// Only `sig`, `hosted`, `ctx` and `prev` are set before the call: the
/// trampoline fills `regs` before any hosted instruction runs (the handler
/// never abandons a call from schedlab's own text, where the trampoline
/// is), and the handler fills `fault` before it sets `sig`. Leaving them
/// unwritten saves a dozen stores per call.
#[repr(C)]
pub(crate) struct Guard {
    /// rbx, rbp, r12, r13, r14, r15, rsp after the return, return address.
    pub(super) regs: MaybeUninit<[u64; 8]>,
    /// The signal that ended the call (0: none; [`PANICKED`]: a kfunc of
    /// the call panicked).
    pub(super) sig: i32,
    /// Hosted C is running, not one of our kfuncs (see the module doc).
    pub(super) hosted: bool,
    pub(super) fault: MaybeUninit<Fault>,
    /// What the call's kfuncs reach the simulator through (state.rs); its
    /// `sim` is null once a kfunc of the call panicked.
    ctx: Ctx,
    prev: *mut Guard,
}

/// [`Guard::sig`] of a call one of whose kfuncs panicked.
const PANICKED: i32 = -1;

/// The bottom of every thread's guard stack, standing for no call: its
/// null `sim` turns kfuncs away and its clear `hosted` turns the handler
/// away, so neither needs to test for an empty stack first.
#[repr(transparent)]
struct Bottom(Guard);

// SAFETY: nothing writes the bottom guard: kfunc_enter writes only a guard
// with a context, poison only the guard of a kfunc kfunc_enter let in, the
// handler only a guard whose `hosted` is set, and `call` only its own.
unsafe impl Sync for Bottom {}

static BOTTOM: Bottom = Bottom(Guard {
    regs: MaybeUninit::uninit(),
    sig: 0,
    hosted: false,
    fault: MaybeUninit::uninit(),
    ctx: Ctx { sim: std::ptr::null_mut(), host: std::ptr::null() },
    prev: std::ptr::null_mut(),
});

/// [`BOTTOM`] as a stack entry (only ever read through).
#[inline(always)]
fn bottom() -> *mut Guard {
    (&raw const BOTTOM.0).cast_mut()
}

/// Whether `g`, a live guard or the bottom, is the bottom: the one guard
/// with no previous one. A load, where comparing with the bottom's
/// address would keep that address in a callee-saved register across
/// the C call (a push and a pop per call).
#[inline(always)]
fn is_bottom(g: *mut Guard) -> bool {
    // SAFETY: the callers pass this thread's innermost guard or the one
    // below it, both live (or the bottom); `prev` is set in every guard.
    let below = unsafe { (*g).prev };
    debug_assert_eq!(below.is_null(), g == bottom());
    below.is_null()
}

/// The innermost guard of this thread ([`BOTTOM`]: not in a guarded call).
#[inline(always)]
pub(super) fn top() -> *mut Guard {
    imp::top()
}

/// Makes `g` the innermost guard of this thread.
#[inline(always)]
fn set_top(g: *mut Guard) {
    imp::set_top(g)
}

/// Whether no guarded call is in progress on this thread (the next one is
/// the outermost).
#[cfg(test)]
fn idle() -> bool {
    top() == bottom()
}

/// The context of the innermost guarded call, if any (for assertions).
pub(crate) fn top_ctx() -> Option<Ctx> {
    let g = top();
    // SAFETY: top() is this thread's innermost live guard (or the bottom).
    (g != bottom()).then(|| unsafe { (*g).ctx })
}

/// Starts a kfunc (Rust called from hosted C, ended by [`kfunc_exit`]):
/// the innermost guarded call and its context, with the call marked as
/// running Rust, so that a fault from here on is not taken for the
/// scheduler's. None outside any guarded call (impossible for C the host
/// loaded) or after a kfunc of this call panicked.
///
/// A kfunc is only ever entered from hosted C, so the flag is cleared on
/// entry and set again on the way out rather than saved and restored.
/// (Kfuncs do not nest: one is never called from another's Rust, which
/// would also alias the simulator; the debug assertion checks.)
#[inline(always)]
pub(crate) fn kfunc_enter() -> Option<(*mut Guard, Ctx)> {
    let g = top();
    // SAFETY: `g` is the innermost live guard of this thread (`call`,
    // suspended below this kfunc, owns it until its C call returns), or
    // the bottom, which has no context and is not written.
    unsafe {
        let ctx = (*g).ctx;
        if ctx.sim.is_null() {
            return None;
        }
        debug_assert!((*g).hosted, "a kfunc entered from Rust");
        (*g).hosted = false;
        Some((g, ctx))
    }
}

/// The context of the innermost guarded call, for a kfunc's fast path
/// (state::with_ctx_fast), which runs only schedlab's own code (it calls
/// nothing outside it, not even the C library): the call stays marked as running
/// hosted C, as the handler tells a fault or a timeout signal in that
/// code from the scheduler's by its address alone (see the module doc),
/// and the two stores of [`kfunc_enter`] and [`kfunc_exit`] are saved.
/// None as for [`kfunc_enter`].
#[inline(always)]
pub(crate) fn kfunc_ctx() -> Option<Ctx> {
    let g = top();
    // SAFETY: as in kfunc_enter; nothing is written.
    let (ctx, hosted) = unsafe { ((*g).ctx, (*g).hosted) };
    debug_assert!(ctx.sim.is_null() || hosted, "a kfunc entered from Rust");
    (!ctx.sim.is_null()).then_some(ctx)
}

/// Ends the kfunc [`kfunc_enter`] started, with the guard it returned
/// (the innermost again: any guarded call the kfunc made has returned).
#[inline(always)]
pub(crate) fn kfunc_exit(g: *mut Guard) {
    // SAFETY: as in kfunc_enter.
    unsafe { (*g).hosted = true };
}

/// A kfunc of the innermost call panicked: the call's further kfuncs do
/// nothing, and [`call`] reports [`Kind::Panic`] when it returns.
#[cold]
pub(crate) fn poison() {
    let g = top();
    if g != bottom() {
        // SAFETY: as in kfunc_enter; the handler leaves the guard alone
        // while Rust runs (`hosted` is clear).
        unsafe {
            (*g).ctx.sim = std::ptr::null_mut();
            (*g).sig = PANICKED;
        }
    }
}

/// The arguments of a guarded call.
#[derive(Clone, Copy)]
pub(crate) enum Args {
    /// One (an op's context): the trampoline that passes only it, with
    /// no registers to clear for the others.
    One(u64),
    Four([u64; 4]),
}

/// Calls `f(a...)`, a function of a loaded scheduler (any C function of up
/// to four integer or pointer arguments returning void or an integer,
/// whose result is then in the low bits), under a guard with `budget_ns`
/// of wall time (0: unlimited) if this is the outermost call on the
/// thread (`watch`: the thread's), its kfuncs running in `ctx`, and hands
/// `done` the result and whether the call was the outermost. The error is
/// boxed so that the result of a call that returned stays two words.
/// The outermost call (nearly every one) is inlined with its own `done`:
/// knowing the guard below to be the bottom, it reads nothing back and
/// keeps nothing in a register across the C call for it.
#[inline(always)]
pub(crate) fn call<R>(f: usize, a: Args, budget_ns: u64, watch: Watch, ctx: Ctx, done: impl FnOnce(Result<u64, Box<Caught>>, bool) -> R) -> R {
    let prev = top();
    if !is_bottom(prev) {
        let [a0, a1, a2, a3] = match a {
            Args::One(a0) => [a0, 0, 0, 0],
            Args::Four(a) => a,
        };
        return done(call_nested(f, a0, a1, a2, a3, ctx, prev), false);
    }
    let mut g = MaybeUninit::<Guard>::uninit();
    let gp = new_guard(&mut g, ctx, prev);
    super::imp::enter_outermost(watch.0, budget_ns);
    set_top(gp);
    // SAFETY: `f` is a function of a loaded scheduler taking up to four
    // integer arguments (extra ones are ignored by the C ABI); `g`
    // outlives the call.
    let r = unsafe {
        match a {
            Args::One(a0) => imp::guard_call1(a0, f, gp),
            Args::Four(a) => imp::guard_call(a, f, gp),
        }
    };
    // SAFETY: `g` is a live local; the handler or a kfunc may have written
    // it during the call, through the pointer in `top()`. Only `sig` is
    // read on the way out; the rest only after a fault.
    let sig = unsafe { std::ptr::read_volatile(&raw const (*gp).sig) };
    set_top(bottom());
    super::imp::leave_outermost(watch.0);
    done(if sig != 0 { Err(caught(gp)) } else { Ok(r) }, true)
}

/// [`call`] inside the call of guard `prev` (no watchdog epoch), out of
/// line; scalar arguments, so the outermost path stores none for it.
#[inline(never)]
fn call_nested(f: usize, a0: u64, a1: u64, a2: u64, a3: u64, ctx: Ctx, prev: *mut Guard) -> Result<u64, Box<Caught>> {
    let mut g = MaybeUninit::<Guard>::uninit();
    let gp = new_guard(&mut g, ctx, prev);
    set_top(gp);
    // SAFETY: as in `call`.
    let r = unsafe { imp::guard_call([a0, a1, a2, a3], f, gp) };
    // SAFETY: as in `call`.
    let sig = unsafe { std::ptr::read_volatile(&raw const (*gp).sig) };
    set_top(prev);
    if sig != 0 { Err(caught(gp)) } else { Ok(r) }
}

/// Fills what a guard needs before its call (see [`Guard`]) and returns it.
#[inline(always)]
fn new_guard(g: &mut MaybeUninit<Guard>, ctx: Ctx, prev: *mut Guard) -> *mut Guard {
    // Every guarded call starts from Rust, never from hosted C.
    // SAFETY: `prev` is the live guard of the call below, or the bottom.
    debug_assert!(unsafe { !(*prev).hosted }, "a guarded call from hosted C");
    let gp = g.as_mut_ptr();
    // SAFETY: writing fields of our own local (see Guard for the rest).
    unsafe {
        (&raw mut (*gp).sig).write(0);
        (&raw mut (*gp).hosted).write(true);
        (&raw mut (*gp).ctx).write(ctx);
        (&raw mut (*gp).prev).write(prev);
    }
    gp
}

/// What ended the call at `g` early (its `sig` is set).
#[cold]
#[inline(never)]
fn caught(g: *const Guard) -> Box<Caught> {
    // SAFETY: the guard of a call that just returned; `ctx` and `sig` are
    // always set.
    let (sig, ctx) = unsafe { (std::ptr::read_volatile(&raw const (*g).sig), (*g).ctx) };
    if ctx.sim.is_null() {
        // A kfunc panicked (and C may have faulted after that): the panic
        // is what the caller resumes.
        return Box::new(Caught { kind: Kind::Panic, code: 0, addr: 0, ip: 0, sp: 0, entry_sp: 0, write: None, general_protection: false });
    }
    // SAFETY: the handler set `sig` only after filling `fault`, and it
    // acts only after the trampoline filled `regs` (see Guard).
    let (f, regs) = unsafe { ((*g).fault.assume_init(), (*g).regs.assume_init()) };
    let kind = match sig {
        libc::SIGSEGV => Kind::Segv,
        libc::SIGBUS => Kind::Bus,
        libc::SIGILL => Kind::Ill,
        libc::SIGFPE => Kind::Fpe,
        _ => Kind::Timeout,
    };
    // #PF (trap 14): error code bit 1 is "write".
    let write = (f.trapno == 14).then_some(f.err & 2 != 0);
    let general_protection = f.trapno == 13;
    Box::new(Caught { kind, code: f.code, addr: f.addr, ip: f.ip, sp: f.sp, entry_sp: regs[6] as usize, write, general_protection })
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod imp {
    use super::*;

    // __schedlab_guard_call(a0, a1, a2, a3, f, guard): see the module doc.
    // The callee's arguments come first so they are already in the
    // registers the C ABI passes them in (rdi, rsi, rdx, rcx).
    std::arch::global_asm!(
        ".pushsection .text.__schedlab_guard_call,\"ax\",@progbits",
        ".globl __schedlab_guard_call",
        ".hidden __schedlab_guard_call",
        ".type __schedlab_guard_call,@function",
        ".p2align 4",
        "__schedlab_guard_call:",
        "mov [r9], rbx",
        "mov [r9 + 8], rbp",
        "mov [r9 + 16], r12",
        "mov [r9 + 24], r13",
        "mov [r9 + 32], r14",
        "mov [r9 + 40], r15",
        "lea rax, [rsp + 8]",
        "mov [r9 + 48], rax",
        "mov rax, [rsp]",
        "mov [r9 + 56], rax",
        "jmp r8",
        ".size __schedlab_guard_call, . - __schedlab_guard_call",
        ".popsection",
    );

    // __schedlab_guard_call1(a0, f, guard): the same for a callee of one
    // argument, which ignores what rsi and rdx hold.
    std::arch::global_asm!(
        ".pushsection .text.__schedlab_guard_call1,\"ax\",@progbits",
        ".globl __schedlab_guard_call1",
        ".hidden __schedlab_guard_call1",
        ".type __schedlab_guard_call1,@function",
        ".p2align 4",
        "__schedlab_guard_call1:",
        "mov [rdx], rbx",
        "mov [rdx + 8], rbp",
        "mov [rdx + 16], r12",
        "mov [rdx + 24], r13",
        "mov [rdx + 32], r14",
        "mov [rdx + 40], r15",
        "lea rax, [rsp + 8]",
        "mov [rdx + 48], rax",
        "mov rax, [rsp]",
        "mov [rdx + 56], rax",
        "jmp rsi",
        ".size __schedlab_guard_call1, . - __schedlab_guard_call1",
        ".popsection",
    );

    // __schedlab_top: the thread-local behind top(), in the initial-exec
    // model (its offset from the thread pointer is fixed at load time).
    // A `thread_local!` of a library crate is reached through
    // __tls_get_addr unless link-time optimisation shows it to be in the
    // executable: the linker relaxes that call away, but each kfunc has
    // already saved its arguments around it (a dozen instructions on
    // every call from C).
    std::arch::global_asm!(
        ".pushsection .tdata.__schedlab_top,\"awT\",@progbits",
        ".globl __schedlab_top",
        ".hidden __schedlab_top",
        ".type __schedlab_top,@object",
        ".p2align 3",
        "__schedlab_top:",
        ".quad {bottom}",
        ".size __schedlab_top, 8",
        ".popsection",
        bottom = sym BOTTOM,
    );

    #[inline(always)]
    pub(super) fn top() -> *mut Guard {
        let g: *mut Guard;
        // SAFETY: reads this thread's __schedlab_top, a pointer.
        unsafe {
            std::arch::asm!(
                "mov {g}, qword ptr [rip + __schedlab_top@GOTTPOFF]",
                "mov {g}, qword ptr fs:[{g}]",
                g = out(reg) g,
                options(nostack, readonly, preserves_flags, pure),
            );
        }
        g
    }

    #[inline(always)]
    pub(super) fn set_top(g: *mut Guard) {
        // SAFETY: writes this thread's __schedlab_top, a pointer.
        unsafe {
            std::arch::asm!(
                "mov {t}, qword ptr [rip + __schedlab_top@GOTTPOFF]",
                "mov qword ptr fs:[{t}], {g}",
                t = out(reg) _,
                g = in(reg) g,
                options(nostack, preserves_flags),
            );
        }
    }

    extern "C" {
        fn __schedlab_guard_call(a0: u64, a1: u64, a2: u64, a3: u64, f: usize, g: *mut std::ffi::c_void) -> u64;
        fn __schedlab_guard_call1(a0: u64, f: usize, g: *mut std::ffi::c_void) -> u64;
    }

    /// The trampoline: `f(a[0], a[1], a[2], a[3])` with the registers to
    /// abandon it saved into `g`.
    ///
    /// # Safety
    /// `f` is a C function of up to four integer arguments; `g` is the
    /// caller's live guard.
    #[inline(always)]
    pub(super) unsafe fn guard_call(a: [u64; 4], f: usize, g: *mut Guard) -> u64 {
        // SAFETY: per the contract.
        unsafe { __schedlab_guard_call(a[0], a[1], a[2], a[3], f, g.cast()) }
    }

    /// [`guard_call`] of a function of one argument.
    ///
    /// # Safety
    /// As for [`guard_call`].
    #[inline(always)]
    pub(super) unsafe fn guard_call1(a0: u64, f: usize, g: *mut Guard) -> u64 {
        // SAFETY: per the contract.
        unsafe { __schedlab_guard_call1(a0, f, g.cast()) }
    }

}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod imp {
    use std::cell::Cell;

    use super::*;

    thread_local! {
        static TOP: Cell<*mut Guard> = const { Cell::new((&raw const BOTTOM.0).cast_mut()) };
    }

    pub(super) fn top() -> *mut Guard {
        TOP.get()
    }

    pub(super) fn set_top(g: *mut Guard) {
        TOP.set(g)
    }

    /// # Safety
    /// `f` is a C function of up to four integer arguments.
    pub unsafe fn guard_call(a: [u64; 4], f: usize, _g: *mut Guard) -> u64 {
        // SAFETY: per the contract.
        let f: unsafe extern "C" fn(u64, u64, u64, u64) -> u64 = unsafe { std::mem::transmute(f) };
        // SAFETY: see above.
        unsafe { f(a[0], a[1], a[2], a[3]) }
    }

    /// # Safety
    /// As for [`guard_call`].
    pub unsafe fn guard_call1(a0: u64, f: usize, g: *mut Guard) -> u64 {
        // SAFETY: per the contract.
        unsafe { guard_call([a0, 0, 0, 0], f, g) }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{enter_thread, install};
    use super::*;

    /// Stands for hosted C: runs one kfunc that panics (as `with_ctx`
    /// handles it: poison, then leave), then another, which must find
    /// the call poisoned.
    extern "C" fn c_with_a_panicking_kfunc(_: u64, _: u64, _: u64, _: u64) -> u64 {
        let first = kfunc_enter().map(|(g, _)| {
            poison();
            kfunc_exit(g);
        });
        let second = kfunc_enter().is_some();
        u64::from(first.is_some()) | u64::from(second) << 1
    }

    extern "C" fn c_returning(a: u64, b: u64, _: u64, _: u64) -> u64 {
        let ctx_seen = kfunc_enter().map(|(g, ctx)| {
            kfunc_exit(g);
            ctx.sim as u64
        });
        a + b + ctx_seen.unwrap_or(0)
    }

    #[test]
    fn a_kfunc_panic_ends_the_call_and_the_stack_unwinds() {
        install();
        // Never dereferenced: only compared.
        let ctx = Ctx { sim: std::ptr::dangling_mut(), host: std::ptr::null() };
        assert!(idle() && top_ctx().is_none());
        let w = enter_thread();
        let (r, outermost) = call(c_with_a_panicking_kfunc as *const () as usize, Args::Four([0; 4]), 0, w, ctx, |r, o| (r, o));
        assert!(outermost);
        assert!(matches!(r, Err(ref c) if c.kind == Kind::Panic), "{r:?}");
        assert!(idle(), "the guard is popped");
        let r = call(c_returning as *const () as usize, Args::Four([2, 3, 0, 0]), 0, w, ctx, |r, _| r);
        assert_eq!(r.ok(), Some(5 + ctx.sim as u64), "a later call runs, with its context");
        assert!(kfunc_enter().is_none(), "no context outside a call");
    }
}
