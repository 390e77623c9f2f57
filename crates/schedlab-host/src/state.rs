//! Per-scheduler host state and the one way C reaches the simulator.
//!
//! # The accessor
//!
//! Every kfunc entry point (ffi.rs, kptr.rs, mapfns.rs) is an
//! `extern "C"` function the C runtime calls with no context argument. It
//! finds the simulator and this scheduler's state in the [`Ctx`] of the
//! innermost guarded call (fault.rs keeps the thread's stack of them),
//! which [`HostState::guarded`] makes around each call into C (calls nest: a
//! kfunc may run another op, e.g. `scx_bpf_reenqueue_local` calls
//! `ops.enqueue`).
//!
//! Why that is sound: [`HostState::guarded`] receives `&mut Sim` and
//! derives the raw pointer it stores from it, then does not touch its
//! `&mut Sim` until C returns. While C runs, exactly one kfunc at a time
//! turns the raw pointer back into `&mut Sim` ([`with_ctx`]), and that
//! borrow ends before the kfunc returns to C; if the kfunc re-enters a
//! scheduler op, the inner [`HostState::guarded`] derives a new pointer
//! from that borrow and the outer one is again unused until the inner call
//! is over. So the `&mut Sim`s form a stack of reborrows, never two live at
//! once. The simulator is single-threaded and the guard stack is
//! thread-local, so no other thread sees the pointer. Host state is in
//! `RefCell`s that no code holds borrowed across a call into C.
//!
//! A panic inside a kfunc (a simulator bug or a failed assertion in a test)
//! must not unwind through C frames. It is caught and stored, and the
//! call's context is poisoned (`fault::poison`): every further kfunc in
//! that call returns a harmless value, and the call ends as if it had
//! faulted ([`fault::Kind::Panic`]), so the panic resumes once the C call
//! returns to Rust at no extra check for a call that did not panic.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use rustc_hash::FxHashMap;
use schedlab::engine::TaskId;
use schedlab::sched::ext::abi::{CpumaskC, TaskStructC};
use schedlab::sched::ext::kfuncs;
use schedlab::sched::ext::ops::Op;
use schedlab::sched::sim::Sim;

use super::fault::{self, ObjInfo};
use super::kobj::{Kobjs, Who};
use super::loader;
use super::maps::{ArrayView, Graveyard, Map};

/// `struct bpf_cpumask`: the mask first, so a `struct cpumask *` cast works.
#[repr(C)]
pub(super) struct BpfCpumaskC {
    pub mask: CpumaskC,
    pub usage: u32,
    pub _pad: u32,
}

/// A `bpf_timer` the scheduler initialised.
pub(super) struct Timer {
    /// Index of the map whose value holds it, and that value's key.
    pub map: usize,
    pub key: Vec<u8>,
    /// `int cb(void *map, void *key, void *value)`, once set.
    pub cb: usize,
}

impl Inner {
    /// Whether `a` is one of the scheduler's global `struct bpf_cpumask`s.
    pub(super) fn global_cpumask(&self, a: usize) -> bool {
        self.global_cpumasks.iter().any(|&(s, e, sz)| a >= s && a < e && (a - s) % sz.max(1) == 0)
    }
}

/// Mutable state, never borrowed across a call into C.
#[derive(Default)]
pub(super) struct Inner {
    pub maps: Vec<Map>,
    /// Map variable address -> index in `maps`.
    pub map_addr: FxHashMap<usize, usize>,
    /// Task pointers handed to C -> task.
    pub tasks: FxHashMap<usize, TaskId>,
    /// Live `bpf_cpumask`s by address.
    pub cpumasks: FxHashMap<usize, Box<BpfCpumaskC>>,
    /// Masks lent by scx_bpf_get_*_cpumask(), valid until the op returns
    /// (a few: the machine's masks).
    pub lent: Vec<usize>,
    /// Global `struct bpf_cpumask` objects of the scheduler: (start, end,
    /// element size).
    pub global_cpumasks: Vec<(usize, usize, usize)>,
    pub timers: BTreeMap<u64, Timer>,
    pub next_timer: u64,
    /// Memory released during this call, freed when it returns. Code that
    /// adds to it, to `grave_masks` or to `lent` calls
    /// [`HostState::hold_call_memory`].
    pub grave: Graveyard,
    #[allow(clippy::vec_box)] // boxes keep their addresses; the Vec only owns them
    pub grave_masks: Vec<Box<BpfCpumaskC>>,
    /// bpf_printk() output.
    pub trace: Vec<String>,
    /// Idle tasks, rq views.
    pub kobjs: Kobjs,
    /// The cgroups lent to BPF.
    pub cgroups: super::cgroup::Cgroups,
    /// The addresses of maps user space created (`create_inner_map`).
    #[allow(clippy::vec_box)] // boxes keep their addresses; the Vec only owns them
    pub inner_maps: Vec<Box<u64>>,
    /// A cid-form scheduler's layout and arena objects (cid.rs).
    pub cid: Option<super::cid::CidState>,
    /// SCX_OPS_TID_TO_TASK was set at enable (the core does not know the flag).
    pub tid_to_task: bool,
}

/// Array maps whose lookups skip the registry (see `HostState::array_views`).
const ARRAY_VIEWS: usize = 4;

/// Entries of [`HostState::known_masks`] (a power of two).
const KNOWN_MASKS: usize = 32;

/// The entry of [`HostState::known_masks`] for the mask at `a`: bits of
/// the address mixed (boxed masks lie a few hundred bytes apart).
#[inline(always)]
fn mask_slot(a: usize) -> usize {
    a.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (usize::BITS - KNOWN_MASKS.trailing_zeros())
}

/// The tag of a lent mask's entry in [`HostState::known_masks`] (masks
/// are 8-byte aligned, so the address leaves the low bit free).
const LENT: usize = 1;

/// What [`HostState::task_ptr`] did for a task: the address of its view,
/// registered in [`Inner::tasks`], and the task group whose `css_set`
/// `p->cgroups` points to ([`NO_GROUP`]: the cgroup objects did not exist
/// yet). Values go in and out by copy, as with a `Cell`: no reference into
/// the table outlives a method, so it needs no borrow flag.
#[derive(Default)]
struct TaskRegs(std::cell::UnsafeCell<Vec<(usize, u32)>>);

/// A task group no task is in: `p->cgroups` is not set yet.
const NO_GROUP: u32 = u32::MAX;

impl TaskRegs {
    #[inline(always)]
    fn get(&self, p: TaskId) -> (usize, u32) {
        // SAFETY: the reference lives only within this method, which calls
        // nothing that could reach the table (HostState is not Sync).
        let v = unsafe { &*self.0.get() };
        v.get(p as usize).copied().unwrap_or((0, NO_GROUP))
    }

    fn set(&self, p: TaskId, r: (usize, u32)) {
        // SAFETY: as in `get`.
        let v = unsafe { &mut *self.0.get() };
        if v.len() <= p as usize {
            v.resize(p as usize + 1, (0, NO_GROUP));
        }
        v[p as usize] = r;
    }
}

pub(super) struct HostState {
    pub inner: RefCell<Inner>,
    /// Each task's registration (see [`TaskRegs`]).
    task_regs: TaskRegs,
    /// Two-entry cache of the task lookup: (address, task) of the last
    /// task handed to C, and of the last one C named that had to be
    /// looked up (scx_cosmos, say, asks about a callback's task and
    /// another, in turn).
    last_task: Cell<(usize, TaskId)>,
    found_task: Cell<(usize, TaskId)>,
    /// The last `bpf_cpumask` or global mask [`mask_ok`](Self::mask_ok)
    /// found (0: none); forgotten when a `bpf_cpumask` is released
    /// ([`forget_mask`](Self::forget_mask)).
    last_mask: Cell<usize>,
    /// Behind it, every `bpf_cpumask` and global mask found, and the masks
    /// lent (their address | [`LENT`]), direct-mapped by address
    /// ([`mask_slot`]; 0: none): scx_lavd works on a dozen masks per
    /// callback, per-CPU ones among them. A `bpf_cpumask` is forgotten
    /// when it is released, lent masks when the outermost call returns.
    known_masks: [Cell<usize>; KNOWN_MASKS],
    /// Where bpf_cpumask_any_distribute() continues (a Cell, not in
    /// `inner`: scx_lavd calls it in loops over the CPUs).
    pub rotor: Cell<u32>,
    /// One-entry cache of the map lookup: (address, index). A map's
    /// address never changes its index (maps are only ever added).
    last_map: Cell<(usize, usize)>,
    /// The array maps looked up so far (up to [`ARRAY_VIEWS`]): each
    /// one's variable address, and where its values live. A scheduler's
    /// per-CPU context or statistics map is looked up on nearly every
    /// callback; with this the lookup is the kernel's inlined address
    /// arithmetic, not a search of the map registry.
    array_addrs: [Cell<usize>; ARRAY_VIEWS],
    array_views: [Cell<ArrayView>; ARRAY_VIEWS],
    /// The object's rodata pages a loader write made writable; each
    /// writer seals them, before any call into C (see [`loader::Pages`]).
    pub pages: loader::Pages,
    /// The runtime's spin lock / RCU balance check (one that never has
    /// work when the runtime has none, so the call path need not ask),
    /// and the word that says what the outermost call leaves to do.
    end_call: EndCall,
    /// The word of a runtime that has none of its own (see [`EndCall`]).
    _own_word: Box<Cell<u32>>,
    /// The object is cid-form (fixed when it is loaded).
    cid_form: bool,
    /// The object faulted or did not return: it is not called again
    /// (except ops.exit, see fault.rs).
    dead: Cell<bool>,
    /// The callbacks that may be called, by `Op` index (0: none): the
    /// object's, until it is dead, then only ops.exit; one load tells
    /// an op's wrapper both whether the op exists and whether the object
    /// may run.
    op_fns: [Cell<usize>; Op::ALL.len()],
    /// What the fault that killed the object was (for a caller outside
    /// any enabled scheduler, e.g. a loader's SEC("syscall") run).
    pub(super) last_fault: RefCell<Option<String>>,
    /// The wall-time budget of one outermost call (0: none).
    pub budget_ns: Cell<u64>,
    /// The thread's watchdog entry (fault.rs), where this state's calls
    /// are made.
    watch: fault::Watch,
    /// Where [`with_machine_mask`](Self::with_machine_mask) copies a mask.
    mask_buf: RefCell<CpumaskC>,
    /// The object's file and load bias, for file:line of a fault.
    pub obj: ObjInfo,
}

/// The runtime's end-of-call check: `f` reports (and resets) spin locks and
/// RCU sections a call left held, and frees objects it dropped.
///
/// `*pending` says what the outermost call leaves to do: the runtime sets
/// its byte 0 ([`END_C`]) whenever `f` may have work, and the host its
/// byte 1 ([`END_HOST`]) when `grave`, `grave_masks` or `lent` may hold
/// something ([`HostState::hold_call_memory`]); each writes only its own
/// byte, with a plain store. One word for both, so that a call that took
/// no lock, dropped nothing and lent nothing (nearly all) ends with one
/// test. A null `pending` (from the runtime): it does not say, and `f`
/// runs after every call.
#[derive(Clone, Copy)]
pub(super) struct EndCall {
    pub f: unsafe extern "C" fn() -> u32,
    pub pending: *mut u32,
}

/// [`EndCall::pending`]: the runtime's check has work (the runtime's byte).
const END_C: u32 = u32::from_ne_bytes([1, 0, 0, 0]);
/// [`EndCall::pending`]: the call released memory or lent a mask (the
/// host's byte, [`END_HOST_BYTE`]).
const END_HOST: u32 = u32::from_ne_bytes([0, 1, 0, 0]);
const END_HOST_BYTE: usize = 1;

/// What a guarded call's kfuncs run with (see the module doc); part of
/// fault/guard.rs's `Guard`, which the trampoline is handed.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) struct Ctx {
    pub sim: *mut Sim,
    pub host: *const HostState,
}

thread_local! {
    static PANIC: RefCell<Option<Box<dyn Any + Send>>> = const { RefCell::new(None) };
}

/// The check of a runtime without one (never called: its flag stays 0).
unsafe extern "C" fn no_end_call() -> u32 {
    0
}

/// Values a kfunc returns to C when it cannot do its work.
pub(super) trait Zero {
    fn zero() -> Self;
}

macro_rules! zero_is_default {
    ($($t:ty),*) => { $(impl Zero for $t { fn zero() -> Self { Default::default() } })* };
}
zero_is_default!((), bool, i32, u32, i64, u64);

impl<T> Zero for *mut T {
    fn zero() -> Self {
        std::ptr::null_mut()
    }
}

impl<T> Zero for *const T {
    fn zero() -> Self {
        std::ptr::null()
    }
}

/// Runs a kfunc body with the simulator and the calling scheduler's state.
#[inline]
pub(super) fn with_ctx<R: Zero>(f: impl FnOnce(&mut Sim, &HostState) -> R) -> R {
    // Rust from here on: a fault is not the scheduler's (fault.rs).
    let Some((g, ctx)) = fault::kfunc_enter() else {
        // Outside HostState::guarded (impossible for C the host loaded) or
        // after a panic in this call: do nothing.
        return R::zero();
    };
    let r = match catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: see the module documentation: `ctx` was set by
        // HostState::guarded from a live `&mut Sim` and `&HostState` that are
        // not otherwise used until this kfunc returns.
        let (sim, host) = unsafe { (&mut *ctx.sim, &*ctx.host) };
        f(sim, host)
    })) {
        Ok(r) => r,
        Err(payload) => {
            kfunc_panicked(payload);
            R::zero()
        }
    };
    fault::kfunc_exit(g);
    r
}

/// The common case of a kfunc whose usual work is a few loads and no
/// call: `f` runs with the context as under [`with_ctx`], but without
/// `catch_unwind`, so that the kfunc needs no stack frame; it returns
/// None, having changed nothing, for every other case, which the kfunc
/// then hands to its full path (a function of its own, so that the call
/// is a tail call). `f` must not panic (it allocates nothing, and every
/// index it takes is one it checked): a panic here would abort the process
/// instead of being resumed after the C call. Nor may it call out of
/// schedlab's own code (fault::kfunc_ctx).
#[inline(always)]
pub(super) fn with_ctx_fast<R>(f: impl FnOnce(&mut Sim, &HostState) -> Option<R>) -> Option<R> {
    // `f` runs only schedlab's own code, so the call need not be marked
    // as running Rust (fault::kfunc_ctx).
    let ctx = fault::kfunc_ctx()?;
    // SAFETY: as in with_ctx.
    let (sim, host) = unsafe { (&mut *ctx.sim, &*ctx.host) };
    f(sim, host)
}

/// A kfunc whose whole body is such a fast path ([`with_ctx_fast`]: it
/// allocates nothing, takes only indices it checked and calls nothing
/// outside schedlab's own code):
/// zero outside a call or after a panic in it, as [`with_ctx`].
#[inline(always)]
pub(super) fn with_ctx_plain<R: Zero>(f: impl FnOnce(&mut Sim, &HostState) -> R) -> R {
    with_ctx_fast(|sim, h| Some(f(sim, h))).unwrap_or_else(R::zero)
}

/// Keeps a kfunc's panic for HostState::guarded to resume, and poisons the
/// call so no further kfunc of it runs.
#[cold]
#[inline(never)]
fn kfunc_panicked(payload: Box<dyn Any + Send>) {
    PANIC.with(|p| *p.borrow_mut() = Some(payload));
    fault::poison();
}

/// What the host was calling when hosted code faulted, for the message.
#[derive(Clone, Copy)]
pub(super) enum Callee<'a> {
    Op(Op),
    Syscall(&'a str),
    Timer,
    ForEach,
    Tracepoint(&'a str),
    /// An op the core has no [`Op`] for
    /// (the cid form's ops.init_cids()).
    Named(&'a str),
}

impl std::fmt::Display for Callee<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Callee::Op(op) => write!(f, "ops.{}()", op.name()),
            Callee::Syscall(p) => write!(f, "SEC(\"syscall\") {p}()"),
            Callee::Timer => f.write_str("a bpf_timer callback"),
            Callee::ForEach => f.write_str("a bpf_for_each_map_elem() callback"),
            Callee::Tracepoint(tp) => write!(f, "SEC(\"tp_btf/{tp}\") program"),
            Callee::Named(op) => write!(f, "ops.{op}()"),
        }
    }
}

#[cold]
#[inline(never)]
fn bad_mask(sim: &mut Sim, m: *const CpumaskC, what: &str) {
    bad(sim, format!("{what}: invalid cpumask pointer {:#x}", m as usize));
}

/// Reports a rule violation the way the kernel's argument checks do:
/// scx_error() (SCX_EXIT_ERROR), which ejects the scheduler; the kfunc then
/// returns a harmless value.
pub(super) fn bad(sim: &mut Sim, msg: String) {
    sim.scx_error(msg);
}

impl HostState {
    pub(super) fn new(inner: Inner, end_call: Option<EndCall>, obj: ObjInfo, pages: loader::Pages, fns: &[usize; Op::ALL.len()]) -> HostState {
        // A HostState stays on this thread (a raw pointer makes it neither
        // Send nor Sync), so this is where its calls will be made.
        let watch = fault::enter_thread();
        // A runtime without a check never has work for it; one that does
        // not say when gets it after every call ([`END_C`], never cleared
        // in a word the runtime does not know).
        let (f, word, always) = match end_call {
            Some(e) => (e.f, e.pending, e.pending.is_null()),
            None => (no_end_call as unsafe extern "C" fn() -> u32, std::ptr::null_mut(), false),
        };
        let own_word = Box::new(Cell::new(if always { END_C } else { 0 }));
        let pending = if word.is_null() { own_word.as_ptr() } else { word };
        HostState {
            watch,
            cid_form: inner.cid.is_some(),
            inner: RefCell::new(inner),
            task_regs: TaskRegs::default(),
            last_task: Cell::new((0, 0)),
            found_task: Cell::new((0, 0)),
            last_mask: Cell::new(0),
            known_masks: Default::default(),
            rotor: Cell::new(0),
            last_map: Cell::new((0, 0)),
            array_addrs: Default::default(),
            array_views: Default::default(),
            pages,
            end_call: EndCall { f, pending },
            _own_word: own_word,
            dead: Cell::new(false),
            op_fns: fns.map(Cell::new),
            last_fault: RefCell::new(None),
            mask_buf: RefCell::new(CpumaskC::default()),
            budget_ns: Cell::new(fault::DEFAULT_BUDGET_NS),
            obj,
        }
    }

    /// The callback to call for `op` (0: none, or the object is dead).
    #[inline(always)]
    pub(super) fn op_fn(&self, op: Op) -> usize {
        self.op_fns[op.index()].get()
    }

    /// Whether the object faulted (or timed out) and is not to be trusted.
    #[inline]
    pub(super) fn dead(&self) -> bool {
        self.dead.get()
    }

    /// Whether the scheduler is cid-form.
    #[inline]
    pub(super) fn cid_form(&self) -> bool {
        self.cid_form
    }

    /// Calls C function `f` of the object with up to four integer
    /// arguments, guarded (fault.rs): None if it faulted or did not
    /// return in time, which ejects the scheduler (SCX_EXIT_ERROR) with a
    /// message naming `what`, the address and the source line.
    pub(super) fn call_c(&self, sim: &mut Sim, what: Callee, f: usize, args: [u64; 4]) -> Option<u64> {
        let cost0 = sim.scx.cost_acc;
        match self.guarded(sim, f, fault::Args::Four(args)) {
            Ok(r) => Some(r),
            Err(c) => {
                self.caught(sim, what, &c, cost0);
                None
            }
        }
    }

    /// [`call_c`](Self::call_c) for ops.`op`, whose one argument is its
    /// context: the common case, with every argument in a register.
    /// Inlined into each op's wrapper (struct_ops.rs): one prologue and
    /// no call for the two.
    #[inline(always)]
    pub(super) fn call_op(&self, sim: &mut Sim, op: Op, f: usize, ctx: u64) -> Option<u64> {
        let cost0 = sim.scx.cost_acc;
        match self.guarded(sim, f, fault::Args::One(ctx)) {
            Ok(r) => Some(r),
            Err(c) => {
                self.caught(sim, Callee::Op(op), &c, cost0);
                None
            }
        }
    }

    /// Calls `f` guarded (fault.rs) with this state and `sim` as the
    /// context of its kfuncs; a kfunc's panic resumes here.
    #[inline(always)]
    fn guarded(&self, sim: &mut Sim, f: usize, args: fault::Args) -> Result<u64, Box<fault::Caught>> {
        // Calls nest only within one scheduler (a kfunc runs an op of the
        // scheduler that called it; a simulator hosts one), so a call is
        // this state's outermost exactly when no call is in progress on the
        // thread: no depth count to keep.
        debug_assert!(fault::top_ctx().is_none_or(|c| std::ptr::eq(c.host, self)), "calls of two schedulers nested");
        let ctx = Ctx { sim: sim as *mut Sim, host: self as *const HostState };
        fault::call(f, args, self.budget_ns.get(), self.watch, ctx, |r, outermost| {
            // SAFETY: the call has returned, so nothing else uses `ctx.sim`,
            // made from `sim`, which is not used past it (the closure does
            // not hold it across the call).
            let sim = unsafe { &mut *ctx.sim };
            // Two arms, so that a call that returned tests its signal once.
            match r {
                Ok(v) => {
                    if outermost {
                        self.end_outermost(sim);
                    }
                    Ok(v)
                }
                Err(c) => Err(self.ended_early(sim, c, outermost)),
            }
        })
    }

    /// What follows a call that ended early: a kfunc's panic resumes;
    /// anything else is the caller's to report.
    #[cold]
    #[inline(never)]
    fn ended_early(&self, sim: &mut Sim, c: Box<fault::Caught>, outermost: bool) -> Box<fault::Caught> {
        if c.kind == fault::Kind::Panic {
            self.resume_panic(outermost);
        }
        if outermost {
            self.end_outermost(sim);
        }
        c
    }

    #[cold]
    #[inline(never)]
    fn caught(&self, sim: &mut Sim, what: Callee, c: &fault::Caught, cost0: u64) {
        if c.kind == fault::Kind::Timeout {
            // The simulated cost of a call that never returned is not its
            // kfunc calls until the watchdog caught it (a wall-time
            // accident): it is charged as one callback.
            sim.scx.cost_acc = cost0;
        }
        self.fault(sim, what, c);
    }

    /// Records a caught fault: the object is dead, the scheduler ejected.
    pub(super) fn fault(&self, sim: &mut Sim, what: Callee, c: &fault::Caught) {
        self.dead.set(true);
        for op in Op::ALL.into_iter().filter(|&op| op != Op::Exit) {
            self.op_fns[op.index()].set(0);
        }
        let msg = fault::describe(c, &what.to_string(), &self.obj, self.budget_ns.get());
        self.last_fault.replace(Some(msg.clone()));
        if sim.scx.exit.is_some() {
            // Already exiting (e.g. ops.exit itself faulted): keep the
            // first reason, as the kernel does, and leave a trace.
            self.inner.borrow_mut().trace.push(format!("schedlab: {msg}"));
        }
        bad(sim, msg);
    }

    #[cold]
    #[inline(never)]
    fn resume_panic(&self, outermost: bool) -> ! {
        let payload = PANIC.with(|p| p.borrow_mut().take()).expect("a kfunc's panic was stored");
        if outermost {
            self.release_call_memory();
        }
        resume_unwind(payload)
    }

    /// What follows the outermost call: the runtime's lock and RCU balance
    /// check, and freeing what the call released.
    #[inline(always)]
    fn end_outermost(&self, sim: &mut Sim) {
        let w = self.end_word();
        if w != 0 {
            if w == END_HOST {
                // Only the host's (a lent mask, most often): no call into C.
                self.release_call_memory();
            } else {
                self.end_work(sim, w);
            }
        }
    }

    /// The word of [`EndCall::pending`].
    #[inline(always)]
    fn end_word(&self) -> u32 {
        // SAFETY: `pending` is the runtime's word (or this state's own),
        // live as long as the object; C writes it, so it is read as memory
        // C may have changed behind the compiler's back.
        unsafe { std::ptr::read_volatile(self.end_call.pending) }
    }

    /// Sets the host's byte of [`EndCall::pending`].
    #[inline(always)]
    fn set_end_host(&self, on: bool) {
        // SAFETY: as in end_word; no C runs while Rust writes it.
        unsafe { std::ptr::write_volatile(self.end_call.pending.cast::<u8>().add(END_HOST_BYTE), u8::from(on)) }
    }

    /// Notes that the call released memory or lent a mask (see
    /// [`Inner::grave`]).
    #[inline]
    pub(super) fn hold_call_memory(&self) {
        self.set_end_host(true);
    }

    /// What the outermost call left to do, by word `w` (not 0).
    #[cold]
    #[inline(never)]
    fn end_work(&self, sim: &mut Sim, w: u32) {
        if w & END_C != 0 {
            self.run_end_call(sim);
        }
        if w & END_HOST != 0 {
            self.release_call_memory();
        }
    }

    /// The runtime's check; it clears the word (the host's byte with it:
    /// [`end_work`](Self::end_work) read it before).
    fn run_end_call(&self, sim: &mut Sim) {
        // SAFETY: end_call is the runtime's own function (no arguments),
        // taken from the module this state belongs to.
        let held = unsafe { (self.end_call.f)() };
        if held & 1 != 0 {
            bad(sim, "BPF program returned with a bpf_spin_lock held".into());
        }
        if held & 2 != 0 {
            bad(sim, "BPF program returned inside bpf_rcu_read_lock()".into());
        }
    }

    /// Frees the memory released during the call and forgets the masks lent.
    #[cold]
    #[inline(never)]
    fn release_call_memory(&self) {
        self.set_end_host(false);
        let mut i = self.inner.borrow_mut();
        // An empty BTreeSet's clear() still drops and rebuilds it.
        if !i.grave.is_empty() {
            i.grave.clear();
        }
        if !i.grave_masks.is_empty() {
            i.grave_masks.clear();
        }
        for &a in &i.lent {
            self.forget_known(a | LENT);
        }
        i.lent.clear();
    }

    /// The index of the map at `addr`, if it is one of this scheduler's.
    #[inline]
    pub(super) fn map_at(&self, addr: usize) -> Option<usize> {
        if let Some(i) = self.map_known(addr) {
            return Some(i);
        }
        let i = self.inner.borrow().map_addr.get(&addr).copied()?;
        self.last_map.set((addr, i));
        Some(i)
    }

    /// The index of the map at `addr` if it is the last one looked up.
    #[inline]
    pub(super) fn map_known(&self, addr: usize) -> Option<usize> {
        let (a, i) = self.last_map.get();
        (a == addr && addr != 0).then_some(i)
    }

    /// The view of the array map at `addr`, if it was noted.
    #[inline]
    pub(super) fn array_view(&self, addr: usize) -> Option<ArrayView> {
        let k = self.array_addrs.iter().position(|a| a.get() == addr && addr != 0)?;
        Some(self.array_views[k].get())
    }

    /// Notes map `i` (at `addr`) for [`array_view`](Self::array_view) if it
    /// is an array map with storage and a slot is free.
    pub(super) fn note_array(&self, addr: usize, i: usize) {
        let Some(k) = self.array_addrs.iter().position(|a| a.get() == 0) else { return };
        if addr == 0 || self.array_view(addr).is_some() {
            return;
        }
        if let Some(v) = self.inner.borrow_mut().maps[i].array_view() {
            self.array_addrs[k].set(addr);
            self.array_views[k].set(v);
        }
    }

    /// The C view of task `p`, registered so later arguments can be checked.
    #[inline]
    pub(super) fn task_ptr(&self, sim: &mut Sim, p: TaskId) -> *mut TaskStructC {
        match self.task_ptr_known(sim, p) {
            Some(c) => c,
            None => self.task_ptr_slow(sim, p),
        }
    }

    /// [`task_ptr`](Self::task_ptr) in its common case, which has nothing
    /// to do but note the task (None: any other case).
    #[inline]
    pub(super) fn task_ptr_known(&self, sim: &mut Sim, p: TaskId) -> Option<*mut TaskStructC> {
        // The task looked up once for its cgroup and its view (what
        // kfuncs::task_c_built() reads).
        let t = sim.tasks.get_mut(p as usize)?;
        let g = t.cgrp;
        let c: *mut TaskStructC = t.scx.c.built_mut()?;
        let addr = c as usize;
        // The common case: the view is registered at this address and
        // p->cgroups already follows the task's cgroup (a view keeps its
        // address for the task's life, and a task group's css_set never
        // moves, so only a cgroup move changes what is to be written).
        // Anything else takes the full path, which does the same and more.
        if self.task_regs.get(p) != (addr, g) {
            return None;
        }
        // SAFETY: `c` is the task's boxed task_struct.
        debug_assert_eq!(unsafe { (*c).cgroups } as usize, self.inner.borrow().cgroups.cset_addr(g), "p->cgroups of task {p}");
        self.last_task.set((addr, p));
        Some(c)
    }

    #[inline(never)]
    fn task_ptr_slow(&self, sim: &mut Sim, p: TaskId) -> *mut TaskStructC {
        let g = sim.task(p).cgrp;
        let mut cset = self.inner.borrow().cgroups.cset_addr(g);
        if cset == 0 {
            let mut i = self.inner.borrow_mut();
            if let Err(e) = i.cgroups.ensure(sim) {
                drop(i);
                bad(sim, e);
            } else {
                cset = i.cgroups.cset_addr(g);
            }
        }
        let c = kfuncs::task_c(sim, p);
        // SAFETY: `c` is the task's boxed task_struct.
        unsafe { (*c).cgroups = cset as *mut core::ffi::c_void };
        // A task the workload started has no simulated parent: its
        // real_parent is swapper/0 (pid 0, the parent of init and
        // kthreadd), which bpf_task_from_pid() never finds, as for a
        // parent outside the simulation.
        // SAFETY: as above; the idle task lives as long as this state.
        if unsafe { (*c).real_parent.is_null() } {
            let idle = self.inner.borrow_mut().kobjs.idle_ptr(sim, 0);
            unsafe { (*c).real_parent = idle };
        }
        let addr = c as usize;
        let (known, _) = self.task_regs.get(p);
        if known != addr {
            self.inner.borrow_mut().tasks.insert(addr, p);
        }
        self.task_regs.set(p, (addr, if cset == 0 { NO_GROUP } else { g }));
        self.last_task.set((addr, p));
        c
    }

    /// The task behind a pointer from C, or an ejection naming `what`.
    #[inline]
    pub(super) fn task_of(&self, sim: &mut Sim, c: *const TaskStructC, what: &str) -> Option<TaskId> {
        match self.task_known(c) {
            Some(p) => Some(p),
            None => self.task_of_slow(sim, c as usize, what),
        }
    }

    /// The task behind `c` if the lookup cache holds it: the last task
    /// handed to C, or the last one C named that had to be looked up
    /// (None: look it up).
    #[inline]
    pub(super) fn task_known(&self, c: *const TaskStructC) -> Option<TaskId> {
        let addr = c as usize;
        let (last, p) = self.last_task.get();
        if addr != 0 && last == addr {
            return Some(p);
        }
        let (found, q) = self.found_task.get();
        (addr != 0 && found == addr).then_some(q)
    }

    #[inline(never)]
    fn task_of_slow(&self, sim: &mut Sim, addr: usize, what: &str) -> Option<TaskId> {
        let found = if addr == 0 { None } else { self.inner.borrow().tasks.get(&addr).copied() };
        match found {
            Some(p) => {
                self.found_task.set((addr, p));
                Some(p)
            }
            None => {
                let why = if addr == 0 { "NULL task" } else { "pointer is not a task" };
                bad(sim, format!("{what}: invalid argument ({why}: {addr:#x})"));
                None
            }
        }
    }

    /// Who a task pointer from C is: a simulated task or a CPU's idle
    /// task (kfuncs that accept any task, e.g. bpf_task_acquire() and the
    /// local storage helpers), or an ejection naming `what`.
    #[inline]
    pub(super) fn who(&self, sim: &mut Sim, c: *const TaskStructC, what: &str) -> Option<Who> {
        match self.task_known(c) {
            Some(p) => Some(Who::Task(p)),
            None => self.who_slow(sim, c, what),
        }
    }

    #[inline(never)]
    fn who_slow(&self, sim: &mut Sim, c: *const TaskStructC, what: &str) -> Option<Who> {
        let addr = c as usize;
        let i = self.inner.borrow();
        if let Some(&p) = i.tasks.get(&addr) {
            self.found_task.set((addr, p));
            return Some(Who::Task(p));
        }
        if let Some(cpu) = i.kobjs.idle_of(addr) {
            return Some(Who::Idle(cpu));
        }
        drop(i);
        self.task_of_slow(sim, addr, what).map(Who::Task)
    }

    /// The C pointer for `who`.
    pub(super) fn who_ptr(&self, sim: &mut Sim, who: Who) -> *mut TaskStructC {
        match who {
            Who::Task(p) => self.task_ptr(sim, p),
            Who::Idle(cpu) => self.inner.borrow_mut().kobjs.idle_ptr(sim, cpu),
        }
    }

    /// Whether `m` may be read as a `struct cpumask`: a bpf_cpumask, a lent
    /// kernel mask, or a task's `cpus_mask` (an idle task's too).
    /// The two one-entry caches are checked inline; the registries out
    /// of line.
    #[inline]
    pub(super) fn mask_ok(&self, m: *const CpumaskC) -> bool {
        let a = m as usize;
        self.mask_known(m) || (a != 0 && self.mask_ok_slow(a, a.checked_sub(std::mem::offset_of!(TaskStructC, cpus_mask))))
    }

    /// [`mask_ok`](Self::mask_ok) by its one-entry caches only (false:
    /// not known to be valid).
    #[inline]
    pub(super) fn mask_known(&self, m: *const CpumaskC) -> bool {
        let a = m as usize;
        if a == 0 {
            return false;
        }
        // Most often `p->cpus_ptr` of the task the scheduler was just
        // handed or handed back, then the last bpf_cpumask found, then
        // `p->cpus_ptr` of the task C last named, then any bpf_cpumask,
        // global or lent mask found before: none needs a lookup.
        let task = a.checked_sub(std::mem::offset_of!(TaskStructC, cpus_mask));
        let task_is = |(last, _): (usize, TaskId)| task.is_some_and(|t| t != 0 && last == t);
        task_is(self.last_task.get())
            || self.last_mask.get() == a
            || task_is(self.found_task.get())
            || self.known_entry(a)
    }

    /// Whether `a` is a live `bpf_cpumask` or a global mask (the
    /// destination of the kfuncs that write a mask): the cache of
    /// [`mask_known`](Self::mask_known) first, then the registry.
    #[inline]
    pub(super) fn owned(&self, a: usize) -> bool {
        self.owned_known(a) || self.owned_registered(&self.inner.borrow(), a)
    }

    /// Whether `a` is a `bpf_cpumask` or a global mask the cache of
    /// [`mask_known`](Self::mask_known) holds (false: not known; an odd
    /// address never is one, whatever a lent mask's tagged entry holds).
    #[inline]
    fn owned_known(&self, a: usize) -> bool {
        a != 0 && (self.last_mask.get() == a || (a & LENT == 0 && self.known_masks[mask_slot(a)].get() == a))
    }

    /// Whether the registry has a `bpf_cpumask` or a global mask at `a`
    /// (a global `struct bpf_cpumask` is used in place, never released);
    /// one found is noted in the cache.
    fn owned_registered(&self, i: &Inner, a: usize) -> bool {
        let found = i.cpumasks.contains_key(&a) || i.global_cpumask(a);
        if found {
            self.last_mask.set(a);
            self.known_masks[mask_slot(a)].set(a);
        }
        found
    }

    /// The last tier of [`mask_known`](Self::mask_known): whether `a`'s
    /// entry holds it; a `bpf_cpumask` or global mask found there becomes
    /// [`last_mask`](Self::last_mask), as the slow path would make it.
    #[inline(always)]
    fn known_entry(&self, a: usize) -> bool {
        let e = self.known_masks[mask_slot(a)].get();
        if a & LENT != 0 {
            // No mask is at an odd address.
            return false;
        }
        if e == a {
            self.last_mask.set(a);
            return true;
        }
        e == a | LENT
    }

    /// Clears the cache entry that holds `v`, if one does.
    fn forget_known(&self, v: usize) {
        let e = &self.known_masks[mask_slot(v & !LENT)];
        if e.get() == v {
            e.set(0);
        }
    }

    #[inline(never)]
    fn mask_ok_slow(&self, a: usize, task: Option<usize>) -> bool {
        let i = self.inner.borrow();
        if let Some((t, &p)) = task.and_then(|t| Some((t, i.tasks.get(&t)?))) {
            self.found_task.set((t, p));
            return true;
        }
        if self.owned_registered(&i, a) {
            return true;
        }
        i.lent.contains(&a) || task.is_some_and(|t| i.kobjs.idle_of(t).is_some())
    }

    /// A `bpf_cpumask` at `a` is being released: it may not be taken as
    /// valid any more.
    pub(super) fn forget_mask(&self, a: usize) {
        if self.last_mask.get() == a {
            self.last_mask.set(0);
        }
        self.forget_known(a);
    }

    /// Checks a `const struct cpumask *` argument, ejecting on a bad one.
    #[inline]
    pub(super) fn mask<'a>(&self, sim: &mut Sim, m: *const CpumaskC, what: &str) -> Option<&'a CpumaskC> {
        if self.mask_ok(m) {
            // SAFETY: mask_ok() found the address among live objects the host
            // owns or lent for this call (bpf_cpumasks are boxed and removed
            // from the registry before they are freed; lent masks and task
            // masks outlive the call). The reference is used only within the
            // calling kfunc.
            Some(unsafe { &*m })
        } else {
            bad_mask(sim, m, what);
            None
        }
    }

    /// Runs `f` with a copy of the machine's CPUs of mask `m` (checked as
    /// by [`mask`](Self::mask), ejecting on a bad one), for a kfunc that
    /// reads only those (`CpumaskC::intersects` with a machine mask,
    /// `CpumaskC::to_mask`). The mask may be a task's `cpus_mask`, inside
    /// the simulator `f` gets `&mut` of, hence the copy. Only the words
    /// that hold a CPU are copied, into a buffer of this state's, where a
    /// whole `struct cpumask` (NR_CPUS bits, 512 bytes) was copied a call; what
    /// the buffer holds past them (zeros, or an earlier copy's words) is
    /// not read. If the buffer is in use (a kfunc re-entered), the copy is
    /// a whole one.
    #[inline(always)]
    pub(super) fn with_machine_mask<R: Default>(&self, sim: &mut Sim, m: *const CpumaskC, what: &str, f: impl FnOnce(&mut Sim, &CpumaskC) -> R) -> R {
        let Some(src) = self.mask(sim, m, what) else { return R::default() };
        let Ok(mut buf) = self.mask_buf.try_borrow_mut() else {
            let whole = *src;
            return f(sim, &whole);
        };
        let n = sim.nr_cpus().div_ceil(64).min(src.bits.len());
        buf.bits[..n].copy_from_slice(&src.bits[..n]);
        debug_assert_eq!(buf.to_mask(sim.nr_cpus()), src.to_mask(sim.nr_cpus()));
        f(sim, &buf)
    }

    /// Records a kernel mask lent to C and returns its address.
    pub(super) fn lend(&self, m: &CpumaskC) -> *const CpumaskC {
        let p = m as *const CpumaskC;
        let mut i = self.inner.borrow_mut();
        if !i.lent.contains(&(p as usize)) {
            i.lent.push(p as usize);
        }
        self.known_masks[mask_slot(p as usize)].set(p as usize | LENT);
        self.hold_call_memory();
        p
    }
}
