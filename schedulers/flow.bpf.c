/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * flow: per-task time budgets, wake profiles and priority lanes.
 *
 * Modelled on scx_flow (sched-ext/scx, scheds/experimental, v2.2.x), written
 * from its description and formulas. The idea: a task that sleeps a lot and
 * runs little is probably latency sensitive, so it earns a budget while it
 * sleeps and spends it while it runs. How a wakeup is treated depends on
 * that budget and on a few slowly moving per-task signals.
 *
 * Budget
 * ------
 * Each task has budget_ns, kept within [-500 us, 2 ms]. When it wakes up it
 * is credited sleep / 100 (sleep capped at 250 ms), scaled by its weight; a
 * sleep of at least 750 us earns at least the interactive floor (100 us by
 * default, tunable within 80..200 us). While it runs, the wall time from
 * ops.running() to ops.stopping() is debited. Running a positive budget down
 * to zero or below is an "exhaustion".
 *
 * Signals (small saturating counters)
 * -----------------------------------
 *  - containment (0..8): +2 per exhaustion; a task with 3 or more is a CPU
 *    hog and is contained. A refill of at least floor + 50 us (a long sleep)
 *    takes it down again (by half, at least 1).
 *  - latency allowance (0..4): +2 for a refill >= 60 us that leaves at least
 *    80 us of budget; spent when the task uses the latency lane, and on
 *    exhaustion.
 *  - latency pressure (0..4): +1 when a task that had a good refill (or
 *    allowance) exhausts its budget and is still runnable, i.e. it was
 *    preempted mid-burst; at 1 or more its next lane wakeup is urgent.
 *  - locality (0..8): +1 for each short run (<= 150 us) that ended in a
 *    sleep on the same CPU, decayed by migrations and wrong-CPU wakeups.
 *  - IPC confidence (0..16): +4 for very short runs (<= 120 us) of tasks
 *    allowed on at most two CPUs that then sleep with budget left.
 *
 * Wake profile
 * ------------
 * Recomputed on wakeup, on running and on stopping, from the budget and the
 * signals. The two bits this scheduler is about:
 *
 *  - rt_sensitive: not contained, last refill >= 80 us, and the task is
 *    pinned (one allowed CPU) or, with prio_aware_rt_sensitive (scx_flow
 *    v2.2.4), has a real-time priority (p->prio < 100). v2.2.0 required the
 *    pin.
 *  - preempt_ready: not contained, and pinned or budget >= 150 us.
 *    v2.2.0 also asked for a last refill >= 200 us (preempt_refill_gate);
 *    v2.2.4 dropped that gate.
 *
 * Others: latency lane (allowance or pressure, not rt_sensitive), urgent
 * latency (pressure and lane), locality fast, IPC and strong IPC, reserved
 * head (rt_sensitive, locality fast or IPC).
 *
 * Lanes
 * -----
 * Five user DSQs and two per CPU:
 *
 *	urgent		latency-lane wakeups under pressure
 *	latency		latency-lane wakeups with allowance
 *	reserved	positive-budget tasks (one per CPU for wakeups with a
 *			target CPU, one global for the rest)
 *	contained	CPU hogs (slice >= 1.2 ms, FIFO at the tail)
 *	shared		tasks without budget (one per CPU for wakeups, one global)
 *
 * Direct local paths
 * ------------------
 * A positive-budget wakeup goes straight into the target CPU's local DSQ
 * (SCX_DSQ_LOCAL_ON | cpu) when it should preempt: it is rt_sensitive, has
 * IPC confidence, or is preempt_ready and woke onto a busy CPU. It is
 * inserted at the head with SCX_ENQ_PREEMPT, the CPU is kicked with
 * SCX_KICK_PREEMPT, and it gets a 50 us slice (120 us for IPC). Locality
 * wakeups may also go straight to the local DSQ (without preempting) while
 * few tasks run and a burst quota allows. Per-CPU kthreads always go to
 * the local DSQ.
 *
 * Dispatch order
 * --------------
 * urgent (at most 2 in a row), latency, reserved (this CPU's, then global),
 * contained, shared (this CPU's, then global). Starvation counters per CPU
 * guarantee the lower lanes progress: each high-priority dispatch bumps the
 * contained and shared rounds; at 6 (contained) or 12 (shared) that lane is
 * served first, and after 4 high-priority dispatches in a row a lane that
 * waited at all is. A run of 5 reserved dispatches also yields to whichever
 * of shared and contained is more starved. When nothing is queued the
 * previous task keeps the CPU with a fresh slice.
 *
 * Slices: the budget clamped to 50 us .. reserved_slice_max_ns (250 us) for
 * positive budgets, shared_slice_ns (1 ms) otherwise.
 *
 * ops.cpu_release() re-enqueues the local DSQ when a higher class takes the
 * CPU. ops.flags: ENQ_EXITING, ENQ_LAST, ENQ_MIGRATION_DISABLED,
 * ALLOW_QUEUED_WAKEUP (as scx_flow's loader sets them).
 *
 * Not carried over: scx_flow's user-space autotuner (the tunables stay at
 * its "balanced" defaults; a few are rodata here), its statistics server,
 * and its per-field counters (a smaller set of counters is kept in
 * `stats`).
 *
 * Options (rodata):
 *   prio_aware_rt_sensitive  true   rt_sensitive also for p->prio < 100
 *                                   (v2.2.4); false: pinned only (v2.2.0)
 *   preempt_refill_gate      false  preempt_ready also needs a last refill
 *                                   >= preempt_refill_min_ns (v2.2.0)
 *   preempt_budget_min_ns    150 us budget for preempt_ready (150..350 us)
 *   preempt_refill_min_ns    200 us refill for the gate (200..350 us)
 *   interactive_floor_ns     100 us refill floor for sleeps >= 750 us
 *                                   (80..200 us)
 *   reserved_slice_max_ns    250 us largest budget slice (50..350 us)
 *   shared_slice_ns          1 ms   slice without budget (0.75..1.5 ms)
 *   kick_self                true   also SCX_KICK_PREEMPT the current CPU
 *                                   after a preempting insert into its own
 *                                   local DSQ, as scx_flow does (see
 *                                   flow_enqueue()); false skips that kick
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

enum flow_consts {
	FLOW_USEC			= 1000ULL,
	FLOW_MSEC			= 1000ULL * 1000ULL,

	/* slices */
	FLOW_SLICE_MIN			= 50 * FLOW_USEC,
	FLOW_SLICE_RESERVED_CAP		= 350 * FLOW_USEC,
	FLOW_SLICE_SHARED_LO		= 750 * FLOW_USEC,
	FLOW_SLICE_SHARED_HI		= 1500 * FLOW_USEC,
	FLOW_SLICE_CONTAINED_LO		= 1200 * FLOW_USEC,
	FLOW_SLICE_RT_WAKE		= 50 * FLOW_USEC,
	FLOW_SLICE_LOCAL_HI		= 150 * FLOW_USEC,
	FLOW_SLICE_IPC			= 120 * FLOW_USEC,

	/* budget */
	FLOW_BUDGET_HI			= 2 * FLOW_MSEC,
	FLOW_BUDGET_LO			= 500 * FLOW_USEC,	/* as a debt */
	FLOW_SLEEP_CAP			= 250 * FLOW_MSEC,
	FLOW_REFILL_DIV			= 100,
	FLOW_INTERACTIVE_SLEEP		= 750 * FLOW_USEC,
	FLOW_FLOOR_LO			= 80 * FLOW_USEC,
	FLOW_FLOOR_HI			= 200 * FLOW_USEC,
	FLOW_PREEMPT_BUDGET_LO		= 150 * FLOW_USEC,
	FLOW_PREEMPT_BUDGET_HI		= 350 * FLOW_USEC,
	FLOW_PREEMPT_REFILL_LO		= 200 * FLOW_USEC,
	FLOW_PREEMPT_REFILL_HI		= 350 * FLOW_USEC,
	FLOW_RT_REFILL_MIN		= 80 * FLOW_USEC,

	/* latency allowance and pressure */
	FLOW_LANE_REFILL_MIN		= 60 * FLOW_USEC,
	FLOW_LANE_BUDGET_MIN		= 80 * FLOW_USEC,
	FLOW_ALLOWANCE_MAX		= 4,
	FLOW_ALLOWANCE_GRANT		= 2,
	FLOW_ALLOWANCE_SPEND		= 1,
	FLOW_PRESSURE_MAX		= 4,
	FLOW_PRESSURE_URGENT		= 1,

	/* locality and IPC */
	FLOW_LOCALITY_MAX		= 8,
	FLOW_LOCALITY_MIN		= 3,
	FLOW_LOCALITY_GAIN		= 1,
	FLOW_LOCALITY_MIGRATE_DECAY	= 2,
	FLOW_LOCALITY_MISS_DECAY	= 1,
	FLOW_IPC_MAX			= 16,
	FLOW_IPC_MIN			= 4,
	FLOW_IPC_GAIN			= 4,
	FLOW_IPC_CPUS			= 2,
	FLOW_IPC_SLEEP_HI		= 2 * FLOW_MSEC,
	FLOW_IPC_RUN_HI			= 120 * FLOW_USEC,
	FLOW_IPC_REFILL_MIN		= 80 * FLOW_USEC,
	FLOW_LOCAL_FAST_RUNNING_MAX	= 4,

	/* containment */
	FLOW_HOG_MAX			= 8,
	FLOW_HOG_CONTAIN		= 3,
	FLOW_HOG_EXHAUST_STEP		= 2,
	FLOW_HOG_RECOVER_MARGIN		= 50 * FLOW_USEC,

	/* per-CPU dispatch fairness */
	FLOW_URGENT_BURST_MAX		= 2,
	FLOW_HP_QUOTA			= 4,
	FLOW_RESERVED_BURST_MAX		= 5,
	FLOW_LOCAL_BURST_MAX		= 5,
	FLOW_CONTAINED_STARVE_MAX	= 6,
	FLOW_SHARED_STARVE_MAX		= 12,
};

/* DSQ ids (scx_flow's numbering). */
#define URGENT_DSQ		1022ULL
#define LATENCY_DSQ		1023ULL
#define RESERVED_DSQ		1024ULL
#define CONTAINED_DSQ		1025ULL
#define SHARED_DSQ		1026ULL
#define RESERVED_CPU_DSQ(cpu)	(0x40000000ULL | (u32)(cpu))
#define SHARED_CPU_DSQ(cpu)	(0x50000000ULL | (u32)(cpu))

const volatile bool prio_aware_rt_sensitive = true;
const volatile bool preempt_refill_gate = false;
const volatile u64 preempt_budget_min_ns = 150000;
const volatile u64 preempt_refill_min_ns = 200000;
const volatile u64 interactive_floor_ns = 100000;
const volatile u64 reserved_slice_max_ns = 250000;
const volatile u64 shared_slice_ns = 1000000;
const volatile bool kick_self = true;

UEI_DEFINE(uei);

enum wake_bits {
	WP_BUDGET		= 1U << 0,
	WP_CONTAINED		= 1U << 1,
	WP_ALLOWANCE		= 1U << 2,
	WP_PRESSURE		= 1U << 3,
	WP_LANE			= 1U << 4,
	WP_URGENT		= 1U << 5,
	WP_RT_SENSITIVE		= 1U << 6,
	WP_LOCALITY		= 1U << 7,
	WP_LOCALITY_FAST	= 1U << 8,
	WP_IPC			= 1U << 9,
	WP_IPC_STRONG		= 1U << 10,
	WP_PREEMPT_READY	= 1U << 11,
	WP_RESERVED_HEAD	= 1U << 12,
};

struct flow_task {
	s64	budget_ns;
	s64	last_refill_ns;		/* credit of the last wakeup, 0 if none */
	u64	run_start;		/* ops.running() time, 0 when off CPU */
	u64	last_sleep_ns;
	u64	sleep_start;		/* 0 unless sleeping */
	u32	allowance;
	u32	pressure;
	u32	containment;
	u32	locality;
	u32	ipc;
	u32	profile;		/* enum wake_bits */
	s32	last_cpu;
	s32	wake_cpu;		/* chosen in ops.select_cpu() */
	bool	wake_idle;		/* ... and it was idle */
	bool	wake_valid;		/* ... and the task may run there */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct flow_task);
} task_ctxs SEC(".maps");

/* Per-CPU dispatch bookkeeping. */
struct flow_cpu {
	u64	urgent_rounds;		/* urgent dispatches in a row */
	u64	hp_rounds;		/* high-priority dispatches since a low lane ran */
	u64	local_rounds;		/* ordinary local fast-path grants in a row */
	u64	reserved_rounds;	/* reserved dispatches in a row */
	u64	contained_starve;
	u64	shared_starve;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(key_size, sizeof(u32));
	__uint(value_size, sizeof(struct flow_cpu));
	__uint(max_entries, 1);
} cpu_ctxs SEC(".maps");

enum flow_stat {
	ST_LOCAL_KTHREAD,	/* per-CPU kthread to its local DSQ */
	ST_LOCAL_RT,		/* rt_sensitive wakeup, LOCAL_ON + PREEMPT */
	ST_LOCAL_PREEMPT,	/* preempt_ready wakeup, LOCAL_ON + PREEMPT */
	ST_LOCAL_IPC,		/* IPC wakeup, LOCAL_ON + PREEMPT */
	ST_LOCAL_LOCALITY,	/* locality wakeup, LOCAL_ON, no preemption */
	ST_ENQ_URGENT,
	ST_ENQ_LATENCY,
	ST_ENQ_RESERVED,	/* reserved lane, per-CPU or global */
	ST_ENQ_CONTAINED,
	ST_ENQ_SHARED,		/* shared lane, per-CPU or global */
	ST_DSP_URGENT,
	ST_DSP_LATENCY,
	ST_DSP_RESERVED,
	ST_DSP_CONTAINED,
	ST_DSP_SHARED,
	ST_DSP_RESCUE,		/* lower lane served first against starvation */
	ST_DSP_KEEP,		/* nothing queued: prev keeps the CPU */
	ST_RT_WAKEUPS,		/* wakeups with rt_sensitive set */
	ST_REFILLS,
	ST_EXHAUSTIONS,
	ST_HOG_RECOVERIES,
	ST_CPU_RELEASE,
	NR_FLOW_STATS,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(key_size, sizeof(u32));
	__uint(value_size, sizeof(u64));
	__uint(max_entries, NR_FLOW_STATS);
} stats SEC(".maps");

/* Tasks of this scheduler on a CPU right now (for the locality quota). */
u64 nr_running;

static u32 nr_cpus;

static void stat_inc(u32 idx)
{
	u64 *cnt = bpf_map_lookup_elem(&stats, &idx);

	if (cnt)
		(*cnt)++;
}

static __always_inline u64 clamp_u64(u64 v, u64 lo, u64 hi)
{
	return v < lo ? lo : (v > hi ? hi : v);
}

static __always_inline struct flow_task *task_ctx(const struct task_struct *p)
{
	return bpf_task_storage_get(&task_ctxs, (struct task_struct *)p, NULL, 0);
}

static __always_inline struct flow_cpu *cpu_ctx(void)
{
	u32 zero = 0;

	return bpf_map_lookup_elem(&cpu_ctxs, &zero);
}

static __always_inline u64 floor_ns(void)
{
	return clamp_u64(interactive_floor_ns, FLOW_FLOOR_LO, FLOW_FLOOR_HI);
}

static __always_inline bool pinned(const struct task_struct *p)
{
	return p->nr_cpus_allowed == 1;
}

static __always_inline bool cpu_ok(s32 cpu)
{
	return cpu >= 0 && (u32)cpu < nr_cpus;
}

/* --- saturating signals ------------------------------------------------ */

static __always_inline u32 sig_add(u32 v, u32 d, u32 max)
{
	v += d;
	return v > max ? max : v;
}

static __always_inline u32 sig_sub(u32 v, u32 d)
{
	return v > d ? v - d : 0;
}

/*
 * Drop a signal by half (at least 1), then by step - 1 more: recent
 * evidence counts, old evidence fades quickly.
 */
static __always_inline u32 sig_fade(u32 v, u32 step)
{
	u32 half;

	if (!v)
		return 0;
	half = v >> 1;
	v = sig_sub(v, half ? half : 1);
	if (step > 1)
		v = sig_sub(v, step - 1);
	return v;
}

static __always_inline bool contained(const struct flow_task *t)
{
	return t->containment >= FLOW_HOG_CONTAIN;
}

static __always_inline void fade_containment(struct flow_task *t)
{
	bool was = contained(t);

	t->containment = sig_fade(t->containment, 1);
	if (was && !contained(t))
		stat_inc(ST_HOG_RECOVERIES);
}

/* --- slices ------------------------------------------------------------ */

static __always_inline u64 budget_slice(const struct flow_task *t)
{
	u64 hi;

	if (t && t->budget_ns > 0) {
		hi = clamp_u64(reserved_slice_max_ns, FLOW_SLICE_MIN,
			       FLOW_SLICE_RESERVED_CAP);
		return clamp_u64((u64)t->budget_ns, FLOW_SLICE_MIN, hi);
	}
	return clamp_u64(shared_slice_ns, FLOW_SLICE_SHARED_LO, FLOW_SLICE_SHARED_HI);
}

static __always_inline u64 contained_slice(void)
{
	return clamp_u64(shared_slice_ns, FLOW_SLICE_CONTAINED_LO, FLOW_SLICE_SHARED_HI);
}

/* --- wake profile ------------------------------------------------------ */

static void update_profile(const struct task_struct *p, struct flow_task *t)
{
	u64 pre_budget = clamp_u64(preempt_budget_min_ns, FLOW_PREEMPT_BUDGET_LO,
				   FLOW_PREEMPT_BUDGET_HI);
	u64 pre_refill = clamp_u64(preempt_refill_min_ns, FLOW_PREEMPT_REFILL_LO,
				   FLOW_PREEMPT_REFILL_HI);
	bool hog = contained(t);
	bool allowance, pressure, lane, rt, preempt, rt_class, refill_ok;
	u32 wp = 0;

	if (t->budget_ns > 0)
		wp |= WP_BUDGET;
	if (hog)
		wp |= WP_CONTAINED;
	if (t->budget_ns <= 0) {
		t->profile = wp;
		return;
	}

	allowance = !hog && t->allowance &&
		t->budget_ns >= (s64)FLOW_LANE_BUDGET_MIN;
	pressure = !hog && t->pressure >= FLOW_PRESSURE_URGENT;

	/* v2.2.0: pinned only; v2.2.4: or a real-time priority. */
	rt_class = pinned(p) || (prio_aware_rt_sensitive && p->prio < 100);
	rt = !hog && rt_class && t->last_refill_ns > 0 &&
		t->last_refill_ns >= (s64)FLOW_RT_REFILL_MIN;

	/* v2.2.0 also gated on the last refill; v2.2.4 looks at the budget. */
	refill_ok = !preempt_refill_gate || t->last_refill_ns >= (s64)pre_refill;
	preempt = !hog && (pinned(p) ||
			   (refill_ok && t->budget_ns >= (s64)pre_budget));

	lane = (allowance || pressure) && !rt;

	if (allowance)
		wp |= WP_ALLOWANCE;
	if (pressure)
		wp |= WP_PRESSURE;
	if (lane)
		wp |= WP_LANE;
	if (lane && pressure)
		wp |= WP_URGENT;
	if (rt)
		wp |= WP_RT_SENSITIVE;
	if (preempt)
		wp |= WP_PREEMPT_READY;

	if (!hog && t->locality >= FLOW_LOCALITY_MIN) {
		wp |= WP_LOCALITY;
		if (!rt && !lane)
			wp |= WP_LOCALITY_FAST;
	}

	if (!hog && p->nr_cpus_allowed <= FLOW_IPC_CPUS &&
	    t->last_sleep_ns > 0 && t->last_sleep_ns <= FLOW_IPC_SLEEP_HI &&
	    t->budget_ns >= (s64)FLOW_IPC_REFILL_MIN &&
	    t->last_refill_ns >= (s64)FLOW_IPC_REFILL_MIN) {
		if (t->ipc >= FLOW_IPC_MIN && t->locality >= FLOW_LOCALITY_GAIN)
			wp |= WP_IPC;
		if (p->nr_cpus_allowed == FLOW_IPC_CPUS &&
		    t->ipc >= FLOW_IPC_MIN + FLOW_IPC_GAIN &&
		    t->locality >= FLOW_LOCALITY_MIN)
			wp |= WP_IPC_STRONG;
	}

	if (!hog && !lane && (rt || (wp & (WP_LOCALITY_FAST | WP_IPC))))
		wp |= WP_RESERVED_HEAD;

	t->profile = wp;
}

/*
 * Credit the sleep that just ended. Called from ops.select_cpu() and again
 * from ops.runnable(); the second call finds no sleep and only clears
 * last_refill_ns, leaving the profile computed by the first.
 */
static void credit_sleep(const struct task_struct *p, struct flow_task *t, u64 now)
{
	u64 sleep, base, fl;
	s64 refill = 0;

	t->last_refill_ns = 0;
	if (!t->sleep_start || now <= t->sleep_start) {
		t->last_sleep_ns = 0;
		return;
	}

	sleep = now - t->sleep_start;
	if (sleep > FLOW_SLEEP_CAP)
		sleep = FLOW_SLEEP_CAP;
	base = sleep / FLOW_REFILL_DIV;
	fl = floor_ns();
	if (base) {
		refill = (s64)scale_by_task_weight(p, base);
		if (sleep >= FLOW_INTERACTIVE_SLEEP && refill < (s64)fl)
			refill = (s64)fl;
	}

	t->budget_ns += refill;
	if (t->budget_ns > (s64)FLOW_BUDGET_HI)
		t->budget_ns = FLOW_BUDGET_HI;
	t->last_refill_ns = refill;
	t->last_sleep_ns = now - t->sleep_start;
	t->sleep_start = 0;

	if (refill > 0) {
		stat_inc(ST_REFILLS);
		if (refill >= (s64)(fl + FLOW_HOG_RECOVER_MARGIN))
			fade_containment(t);
		if (refill >= (s64)FLOW_LANE_REFILL_MIN &&
		    t->budget_ns >= (s64)FLOW_LANE_BUDGET_MIN)
			t->allowance = sig_add(t->allowance, FLOW_ALLOWANCE_GRANT,
					       FLOW_ALLOWANCE_MAX);
	}

	if (p->nr_cpus_allowed > FLOW_IPC_CPUS || !t->last_sleep_ns ||
	    t->last_sleep_ns > FLOW_IPC_SLEEP_HI ||
	    refill < (s64)FLOW_IPC_REFILL_MIN)
		t->ipc = sig_fade(t->ipc, 1);

	update_profile(p, t);
}

static __always_inline void forget_wake_cpu(struct flow_task *t)
{
	t->wake_cpu = -1;
	t->wake_idle = false;
	t->wake_valid = false;
}

static void reset_task(struct flow_task *t, u64 now, bool sleeping)
{
	__builtin_memset(t, 0, sizeof(*t));
	t->sleep_start = sleeping ? now : 0;
	t->last_cpu = -1;
	forget_wake_cpu(t);
}

/* --- dispatch fairness ------------------------------------------------- */

static __always_inline void bump(u64 *v, u64 max)
{
	if (*v < max)
		(*v)++;
}

/* A high-priority lane ran: the low lanes waited one more round. */
static void note_high(struct flow_cpu *c)
{
	bump(&c->contained_starve, FLOW_CONTAINED_STARVE_MAX);
	bump(&c->shared_starve, FLOW_SHARED_STARVE_MAX);
	bump(&c->hp_rounds, FLOW_HP_QUOTA);
}

static void note_low(struct flow_cpu *c, bool shared)
{
	if (shared) {
		c->shared_starve = 0;
		bump(&c->contained_starve, FLOW_CONTAINED_STARVE_MAX);
	} else {
		c->contained_starve = 0;
		bump(&c->shared_starve, FLOW_SHARED_STARVE_MAX);
	}
	c->hp_rounds = 0;
	c->urgent_rounds = 0;
	c->reserved_rounds = 0;
	c->local_rounds = 0;
}

static bool low_lanes_waiting(const struct flow_cpu *c)
{
	return nr_running > FLOW_LOCAL_FAST_RUNNING_MAX ||
		c->contained_starve > 0 || c->shared_starve > 0;
}

/* --- ops --------------------------------------------------------------- */

s32 BPF_STRUCT_OPS(flow_select_cpu, struct task_struct *p, s32 prev_cpu,
		   u64 wake_flags)
{
	s32 this_cpu = bpf_get_smp_processor_id();
	bool fixed = pinned(p) || is_migration_disabled(p);
	bool idle = false;
	struct flow_task *t;
	s32 pref, cpu;

	t = task_ctx(p);
	if (t) {
		if (t->sleep_start)
			credit_sleep(p, t, bpf_ktime_get_ns());
		forget_wake_cpu(t);
	}

	if (!bpf_cpumask_test_cpu(prev_cpu, p->cpus_ptr))
		prev_cpu = bpf_cpumask_test_cpu(this_cpu, p->cpus_ptr) ?
			this_cpu : (s32)bpf_cpumask_first(p->cpus_ptr);

	/* Prefer the CPU the task last ran on: its cache is there. */
	pref = prev_cpu;
	if (!fixed && t && t->last_cpu >= 0 &&
	    bpf_cpumask_test_cpu(t->last_cpu, p->cpus_ptr))
		pref = t->last_cpu;

	if (fixed) {
		cpu = pref;
		idle = scx_bpf_test_and_clear_cpu_idle(pref);
	} else {
		cpu = scx_bpf_select_cpu_dfl(p, pref, wake_flags, &idle);
	}
	if (cpu < 0)
		cpu = pref;

	if (t) {
		t->wake_cpu = cpu;
		t->wake_idle = idle;
		t->wake_valid = bpf_cpumask_test_cpu(cpu, p->cpus_ptr);
		if (t->last_cpu >= 0 && cpu != t->last_cpu) {
			t->locality = sig_fade(t->locality, FLOW_LOCALITY_MISS_DECAY);
			update_profile(p, t);
		}
	}
	return cpu;
}

void BPF_STRUCT_OPS(flow_runnable, struct task_struct *p, u64 enq_flags)
{
	struct flow_task *t = task_ctx(p);

	if (t)
		credit_sleep(p, t, bpf_ktime_get_ns());
}

/* Contained hogs: the tail of CONTAINED_DSQ, or its head when starved. */
static void enqueue_contained(struct task_struct *p, struct flow_cpu *c,
			      u64 enq_flags)
{
	if (c && c->contained_starve * 2 >= FLOW_CONTAINED_STARVE_MAX)
		enq_flags |= SCX_ENQ_HEAD;
	scx_bpf_dsq_insert(p, CONTAINED_DSQ, contained_slice(), enq_flags);
	if (c)
		c->local_rounds = 0;
	stat_inc(ST_ENQ_CONTAINED);
}

void BPF_STRUCT_OPS(flow_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct flow_task *t = task_ctx(p);
	struct flow_cpu *c = cpu_ctx();
	bool wakeup = enq_flags & SCX_ENQ_WAKEUP;
	bool fixed = pinned(p) || is_migration_disabled(p);
	bool have_target = false;
	u64 slice = budget_slice(t);
	s32 task_cpu = scx_bpf_task_cpu(p);
	s32 target = task_cpu;

	if (t && t->wake_valid) {
		target = t->wake_cpu;
		have_target = true;
	}
	/* A task that cannot move is placed where it is. */
	if (fixed && task_cpu >= 0 &&
	    bpf_cpumask_test_cpu(task_cpu, p->cpus_ptr) &&
	    (!have_target || target != task_cpu)) {
		target = task_cpu;
		have_target = true;
		if (t) {
			t->wake_cpu = task_cpu;
			t->wake_idle = false;
			t->wake_valid = true;
		}
	}

	if ((p->flags & PF_KTHREAD) && pinned(p)) {
		if (t)
			forget_wake_cpu(t);
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, budget_slice(NULL), enq_flags);
		stat_inc(ST_LOCAL_KTHREAD);
		return;
	}

	if (!t) {
		scx_bpf_dsq_insert(p, SHARED_DSQ, slice, enq_flags);
		stat_inc(ST_ENQ_SHARED);
		return;
	}

	if (t->budget_ns > 0) {
		u32 wp = wakeup ? t->profile : 0;
		bool hog = t->profile & WP_CONTAINED;
		bool rt = wp & WP_RT_SENSITIVE;
		bool lane = wp & WP_LANE;
		bool urgent = wp & WP_URGENT;
		bool ipc = false, local = false, preempt = false;
		bool target_ok = have_target ||
			(target >= 0 && bpf_cpumask_test_cpu(target, p->cpus_ptr));

		if (rt)
			stat_inc(ST_RT_WAKEUPS);

		/* IPC partners: the same CPU as last time, or (strong) close. */
		if (wakeup && !hog && !lane && (wp & WP_IPC) &&
		    target >= 0 && t->last_cpu >= 0) {
			if (target == t->last_cpu)
				ipc = true;
			else if (wp & WP_IPC_STRONG)
				ipc = target == task_cpu || t->wake_idle;
		}

		/* Locality: cheap direct placement while few tasks run. */
		if (wakeup && !hog && !rt && !lane && target >= 0 &&
		    (wp & WP_LOCALITY_FAST) &&
		    (target == t->last_cpu || t->wake_idle)) {
			local = true;
			if (nr_running > FLOW_LOCAL_FAST_RUNNING_MAX) {
				local = false;
				t->locality = sig_fade(t->locality, FLOW_LOCALITY_MISS_DECAY);
				update_profile(p, t);
			}
		}

		if (wakeup && !hog)
			enq_flags |= SCX_ENQ_HEAD;

		if (target_ok) {
			bool direct;

			preempt = rt || ipc ||
				(wakeup && !hog && !t->wake_idle &&
				 (wp & WP_PREEMPT_READY));
			direct = preempt || local;

			/* Plain locality grants yield to waiting low lanes. */
			if (direct && !preempt && c && low_lanes_waiting(c) &&
			    c->local_rounds >= FLOW_LOCAL_BURST_MAX)
				direct = false;

			if (preempt) {
				enq_flags |= SCX_ENQ_PREEMPT;
				/*
				 * SCX_ENQ_PREEMPT already reschedules a local
				 * target; scx_flow kicks it anyway. The kick's
				 * irq_work runs when this CPU enables
				 * interrupts again, before the switch, so it
				 * only ends the outgoing task's slice.
				 * kick_self = false skips it.
				 */
				if (kick_self || target != bpf_get_smp_processor_id())
					scx_bpf_kick_cpu(target, SCX_KICK_PREEMPT);
			} else if (t->wake_idle &&
				   (wakeup || !scx_bpf_task_running(p))) {
				scx_bpf_kick_cpu(target, SCX_KICK_IDLE);
			}

			if (direct) {
				u64 s;

				if (ipc) {
					s = FLOW_SLICE_IPC;
					stat_inc(ST_LOCAL_IPC);
				} else if (rt) {
					s = FLOW_SLICE_RT_WAKE;
					stat_inc(ST_LOCAL_RT);
				} else {
					s = clamp_u64(slice, FLOW_SLICE_MIN, FLOW_SLICE_LOCAL_HI);
					stat_inc(preempt ? ST_LOCAL_PREEMPT : ST_LOCAL_LOCALITY);
				}
				scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | target, s, enq_flags);
				if (!preempt && c)
					bump(&c->local_rounds, FLOW_LOCAL_BURST_MAX);
				forget_wake_cpu(t);
				return;
			}
		}

		if (local) {
			t->locality = sig_fade(t->locality, FLOW_LOCALITY_MISS_DECAY);
			update_profile(p, t);
		}

		if (hog) {
			enqueue_contained(p, c, enq_flags);
			forget_wake_cpu(t);
			return;
		}

		if (lane) {
			scx_bpf_dsq_insert(p, urgent ? URGENT_DSQ : LATENCY_DSQ,
					   slice, enq_flags);
			if (c)
				c->local_rounds = 0;
			t->allowance = sig_fade(t->allowance, FLOW_ALLOWANCE_SPEND);
			t->pressure = sig_fade(t->pressure, 1);
			stat_inc(urgent ? ST_ENQ_URGENT : ST_ENQ_LATENCY);
			if (have_target && (wakeup || !scx_bpf_task_running(p)))
				scx_bpf_kick_cpu(target, SCX_KICK_IDLE);
			forget_wake_cpu(t);
			return;
		}

		if (wakeup && !hog && (wp & WP_RESERVED_HEAD) &&
		    (rt || local || ipc || (wp & WP_LOCALITY_FAST)))
			enq_flags |= SCX_ENQ_HEAD;

		if (c)
			c->local_rounds = 0;
		stat_inc(ST_ENQ_RESERVED);
		if (have_target && wakeup && cpu_ok(target)) {
			scx_bpf_dsq_insert(p, RESERVED_CPU_DSQ(target), slice, enq_flags);
			if (t->wake_idle)
				scx_bpf_kick_cpu(target, SCX_KICK_IDLE);
		} else {
			scx_bpf_dsq_insert(p, RESERVED_DSQ, slice, enq_flags);
			if (have_target && (wakeup || !scx_bpf_task_running(p)))
				scx_bpf_kick_cpu(target, SCX_KICK_IDLE);
		}
		forget_wake_cpu(t);
		return;
	}

	if (contained(t)) {
		enqueue_contained(p, c, enq_flags);
		forget_wake_cpu(t);
		return;
	}

	/* No budget: the shared lane, promoted to the head when it starves. */
	if (c && c->shared_starve * 2 >= FLOW_SHARED_STARVE_MAX)
		enq_flags |= SCX_ENQ_HEAD;
	if (c)
		c->local_rounds = 0;
	stat_inc(ST_ENQ_SHARED);
	if (wakeup && have_target && cpu_ok(target)) {
		scx_bpf_dsq_insert(p, SHARED_CPU_DSQ(target), slice, enq_flags);
		if (t->wake_idle)
			scx_bpf_kick_cpu(target, SCX_KICK_IDLE);
	} else {
		scx_bpf_dsq_insert(p, SHARED_DSQ, slice, enq_flags);
	}
	forget_wake_cpu(t);
}

static bool pull_reserved(s32 cpu)
{
	if (cpu_ok(cpu) && scx_bpf_dsq_move_to_local(RESERVED_CPU_DSQ(cpu), 0))
		return true;
	return scx_bpf_dsq_move_to_local(RESERVED_DSQ, 0);
}

static bool pull_shared(s32 cpu)
{
	if (cpu_ok(cpu) && scx_bpf_dsq_move_to_local(SHARED_CPU_DSQ(cpu), 0))
		return true;
	return scx_bpf_dsq_move_to_local(SHARED_DSQ, 0);
}

/* Serve a low lane: shared or contained, the other as a fallback. */
static bool pull_low(struct flow_cpu *c, s32 cpu, bool shared_first, bool rescue)
{
	if (shared_first && pull_shared(cpu)) {
		stat_inc(ST_DSP_SHARED);
		note_low(c, true);
	} else if (scx_bpf_dsq_move_to_local(CONTAINED_DSQ, 0)) {
		stat_inc(ST_DSP_CONTAINED);
		note_low(c, false);
	} else if (!shared_first && pull_shared(cpu)) {
		stat_inc(ST_DSP_SHARED);
		note_low(c, true);
	} else {
		return false;
	}
	if (rescue)
		stat_inc(ST_DSP_RESCUE);
	return true;
}

void BPF_STRUCT_OPS(flow_dispatch, s32 cpu, struct task_struct *prev)
{
	struct flow_cpu *c = cpu_ctx();
	bool quota, shared_worse;
	struct flow_task *t;

	if (!c) {
		/* Cannot happen; drain in lane order without bookkeeping. */
		if (!scx_bpf_dsq_move_to_local(URGENT_DSQ, 0) &&
		    !scx_bpf_dsq_move_to_local(LATENCY_DSQ, 0) &&
		    !pull_reserved(cpu) &&
		    !scx_bpf_dsq_move_to_local(CONTAINED_DSQ, 0))
			pull_shared(cpu);
		return;
	}

	/* Which low lane waited longer, relative to its limit. */
	shared_worse = c->shared_starve * FLOW_CONTAINED_STARVE_MAX >=
		c->contained_starve * FLOW_SHARED_STARVE_MAX;
	quota = c->hp_rounds >= FLOW_HP_QUOTA;

	/* After a quota of high-priority dispatches, a waiting low lane. */
	if (quota && c->shared_starve > 0 && c->shared_starve < FLOW_SHARED_STARVE_MAX &&
	    (shared_worse || c->contained_starve == 0 ||
	     c->contained_starve >= FLOW_CONTAINED_STARVE_MAX) &&
	    pull_shared(cpu)) {
		stat_inc(ST_DSP_SHARED);
		stat_inc(ST_DSP_RESCUE);
		note_low(c, true);
		return;
	}
	if (quota && c->contained_starve > 0 &&
	    c->contained_starve < FLOW_CONTAINED_STARVE_MAX &&
	    (!shared_worse || c->shared_starve == 0 ||
	     c->shared_starve >= FLOW_SHARED_STARVE_MAX) &&
	    scx_bpf_dsq_move_to_local(CONTAINED_DSQ, 0)) {
		stat_inc(ST_DSP_CONTAINED);
		stat_inc(ST_DSP_RESCUE);
		note_low(c, false);
		return;
	}

	/* A lane at its starvation limit goes first. */
	if (c->shared_starve >= FLOW_SHARED_STARVE_MAX) {
		if (pull_shared(cpu)) {
			stat_inc(ST_DSP_SHARED);
			stat_inc(ST_DSP_RESCUE);
			note_low(c, true);
			return;
		}
		c->shared_starve = FLOW_SHARED_STARVE_MAX - 1;
	}
	if (c->contained_starve >= FLOW_CONTAINED_STARVE_MAX) {
		if (scx_bpf_dsq_move_to_local(CONTAINED_DSQ, 0)) {
			stat_inc(ST_DSP_CONTAINED);
			stat_inc(ST_DSP_RESCUE);
			note_low(c, false);
			return;
		}
		c->contained_starve = FLOW_CONTAINED_STARVE_MAX - 1;
	}

	if (c->urgent_rounds < FLOW_URGENT_BURST_MAX &&
	    scx_bpf_dsq_move_to_local(URGENT_DSQ, 0)) {
		c->urgent_rounds++;
		c->reserved_rounds = 0;
		c->local_rounds = 0;
		note_high(c);
		stat_inc(ST_DSP_URGENT);
		return;
	}

	if (scx_bpf_dsq_move_to_local(LATENCY_DSQ, 0)) {
		c->urgent_rounds = 0;
		c->reserved_rounds = 0;
		c->local_rounds = 0;
		note_high(c);
		stat_inc(ST_DSP_LATENCY);
		return;
	}

	/* A long reserved run lets the more starved low lane in. */
	if (c->reserved_rounds >= FLOW_RESERVED_BURST_MAX &&
	    pull_low(c, cpu, shared_worse, true))
		return;

	if (pull_reserved(cpu)) {
		bump(&c->reserved_rounds, FLOW_RESERVED_BURST_MAX);
		c->urgent_rounds = 0;
		c->local_rounds = 0;
		note_high(c);
		stat_inc(ST_DSP_RESERVED);
		return;
	}

	if (pull_low(c, cpu, false, false))
		return;

	/* Nothing queued: let the previous task go on. */
	if (prev && (prev->scx.flags & SCX_TASK_QUEUED)) {
		t = task_ctx(prev);
		scx_bpf_task_set_slice(prev, budget_slice(t));
		stat_inc(ST_DSP_KEEP);
	}
}

void BPF_STRUCT_OPS(flow_running, struct task_struct *p)
{
	s32 cpu = bpf_get_smp_processor_id();
	struct flow_task *t = task_ctx(p);

	if (t) {
		if (t->last_cpu >= 0 && t->last_cpu != cpu) {
			t->locality = sig_fade(t->locality, FLOW_LOCALITY_MIGRATE_DECAY);
			t->ipc = sig_fade(t->ipc, 1);
		}
		t->last_cpu = cpu;
		t->run_start = bpf_ktime_get_ns();
		update_profile(p, t);
	}
	__sync_fetch_and_add(&nr_running, 1);
}

void BPF_STRUCT_OPS(flow_stopping, struct task_struct *p, bool runnable)
{
	struct flow_task *t = task_ctx(p);
	u64 now = bpf_ktime_get_ns();
	u64 ran = 0;
	bool exhausted;

	if (t) {
		if (t->run_start && now > t->run_start)
			ran = now - t->run_start;

		exhausted = t->budget_ns > 0 && t->budget_ns - (s64)ran <= 0;
		if (exhausted) {
			stat_inc(ST_EXHAUSTIONS);
			t->containment = sig_add(t->containment, FLOW_HOG_EXHAUST_STEP,
						 FLOW_HOG_MAX);
			t->allowance = sig_fade(t->allowance, FLOW_ALLOWANCE_SPEND);
			t->locality = sig_fade(t->locality, FLOW_LOCALITY_MIGRATE_DECAY);
			t->ipc = sig_fade(t->ipc, 1);
			/* Cut off mid-burst after a good refill: owed latency. */
			if (runnable && !contained(t) &&
			    (t->last_refill_ns >= (s64)FLOW_LANE_REFILL_MIN ||
			     t->allowance > 0))
				t->pressure = sig_add(t->pressure, 1, FLOW_PRESSURE_MAX);
		}

		t->budget_ns -= (s64)ran;
		if (t->budget_ns < -(s64)FLOW_BUDGET_LO)
			t->budget_ns = -(s64)FLOW_BUDGET_LO;
		if (t->budget_ns > (s64)FLOW_BUDGET_HI)
			t->budget_ns = FLOW_BUDGET_HI;

		if (!runnable && !exhausted && !contained(t) && ran > 0) {
			if (ran <= FLOW_SLICE_LOCAL_HI && t->last_cpu >= 0)
				t->locality = sig_add(t->locality, FLOW_LOCALITY_GAIN,
						      FLOW_LOCALITY_MAX);
		}
		if (!runnable && !exhausted && !contained(t) && ran > 0 &&
		    p->nr_cpus_allowed <= FLOW_IPC_CPUS && ran <= FLOW_IPC_RUN_HI &&
		    t->budget_ns > (s64)FLOW_IPC_REFILL_MIN)
			t->ipc = sig_add(sig_fade(t->ipc, 1), FLOW_IPC_GAIN, FLOW_IPC_MAX);
		else if (ran > FLOW_IPC_RUN_HI || p->nr_cpus_allowed > FLOW_IPC_CPUS)
			t->ipc = sig_fade(t->ipc, 1);

		t->run_start = 0;
		t->sleep_start = runnable ? 0 : now;
		if (!runnable)
			forget_wake_cpu(t);
		update_profile(p, t);
	}
	__sync_fetch_and_sub(&nr_running, 1);
}

bool BPF_STRUCT_OPS(flow_yield, struct task_struct *from, struct task_struct *to)
{
	scx_bpf_task_set_slice(from, FLOW_SLICE_MIN);
	return false;
}

void BPF_STRUCT_OPS(flow_cpu_release, s32 cpu, struct scx_cpu_release_args *args)
{
	/* A higher class took the CPU: whatever waited here may run elsewhere. */
	scx_bpf_reenqueue_local();
	stat_inc(ST_CPU_RELEASE);
}

s32 BPF_STRUCT_OPS_SLEEPABLE(flow_init_task, struct task_struct *p,
			     struct scx_init_task_args *args)
{
	struct flow_task *t;

	t = bpf_task_storage_get(&task_ctxs, p, NULL,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!t)
		return -ENOMEM;
	reset_task(t, bpf_ktime_get_ns(), true);
	return 0;
}

void BPF_STRUCT_OPS(flow_enable, struct task_struct *p)
{
	struct flow_task *t = task_ctx(p);

	if (t)
		reset_task(t, bpf_ktime_get_ns(), !scx_bpf_task_running(p));
}

void BPF_STRUCT_OPS(flow_exit_task, struct task_struct *p,
		    struct scx_exit_task_args *args)
{
	struct flow_task *t = task_ctx(p);

	if (t)
		reset_task(t, 0, false);
}

static s32 create_dsq(u64 id)
{
	s32 ret = scx_bpf_create_dsq(id, -1);

	if (ret && ret != -EEXIST) {
		scx_bpf_error("cannot create DSQ 0x%llx (%d)", id, ret);
		return ret;
	}
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(flow_init)
{
	s32 cpu, ret;

	nr_cpus = scx_bpf_nr_cpu_ids();

	bpf_for(cpu, 0, nr_cpus) {
		ret = create_dsq(RESERVED_CPU_DSQ(cpu));
		if (ret)
			return ret;
		ret = create_dsq(SHARED_CPU_DSQ(cpu));
		if (ret)
			return ret;
	}

	ret = create_dsq(URGENT_DSQ);
	if (!ret)
		ret = create_dsq(LATENCY_DSQ);
	if (!ret)
		ret = create_dsq(RESERVED_DSQ);
	if (!ret)
		ret = create_dsq(CONTAINED_DSQ);
	if (!ret)
		ret = create_dsq(SHARED_DSQ);
	return ret;
}

void BPF_STRUCT_OPS(flow_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(flow_ops,
	       .select_cpu	= (void *)flow_select_cpu,
	       .enqueue		= (void *)flow_enqueue,
	       .dispatch	= (void *)flow_dispatch,
	       .runnable	= (void *)flow_runnable,
	       .running		= (void *)flow_running,
	       .stopping	= (void *)flow_stopping,
	       .yield		= (void *)flow_yield,
	       .cpu_release	= (void *)flow_cpu_release,
	       .init_task	= (void *)flow_init_task,
	       .enable		= (void *)flow_enable,
	       .exit_task	= (void *)flow_exit_task,
	       .init		= (void *)flow_init,
	       .exit		= (void *)flow_exit,
	       .flags		= SCX_OPS_ENQ_EXITING | SCX_OPS_ENQ_LAST |
				  SCX_OPS_ENQ_MIGRATION_DISABLED |
				  SCX_OPS_ALLOW_QUEUED_WAKEUP,
	       .timeout_ms	= 5000,
	       .name		= "flow");
