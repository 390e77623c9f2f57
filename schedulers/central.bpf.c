/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * central: one CPU makes every scheduling decision.
 *
 * A test scheduler modelled on the kernel's scx_central. Its purpose is to
 * exercise remote dispatch (SCX_DSQ_LOCAL_ON | cpu), infinite slices and
 * preemption by kicks, not to schedule well.
 *
 * Queueing
 * --------
 * Every enqueued task's pid goes into one global FIFO, a BPF_MAP_TYPE_QUEUE
 * (central_q). ops.select_cpu() always answers central_cpu, so wakeups land
 * on the central CPU's runqueue and the other CPUs are disturbed as little
 * as possible (the kernel falls back to an allowed CPU when the task may not
 * run on central_cpu). The one exception are per-CPU kernel threads: they go
 * to the head of their CPU's local DSQ with SCX_ENQ_PREEMPT, because the
 * preemption timer below may depend on one of them (ksoftirqd) and must
 * never be starved by a user task with an infinite slice.
 *
 * Dispatch
 * --------
 * A CPU other than central_cpu that runs out of work first tries the
 * fallback DSQ; if that is empty it raises its "gimme" flag and kicks the
 * central CPU with SCX_KICK_PREEMPT. Only the central CPU pops central_q: in
 * its ops.dispatch() it walks all CPUs, and for each one with the flag
 * raised pops pids until one can run there, inserts that task into the
 * CPU's local DSQ with SCX_DSQ_LOCAL_ON | cpu and SCX_SLICE_INF, and kicks
 * the CPU awake. Tasks popped for a CPU they may not run on go to the
 * fallback DSQ (any CPU consumes it). Then the central CPU picks work for
 * itself the same way. If the kernel's dispatch buffer fills up, the central
 * CPU kicks itself to come back for the rest.
 *
 * Preemption
 * ----------
 * All slices are infinite, so the tick never preempts. Instead
 * ops.running() / ops.stopping() record per CPU when the current task
 * started (0 when nothing runs), and a BPF timer on the central CPU fires
 * every timer_interval_ns. For each other CPU whose task has run for at
 * least slice_ns, it sends SCX_KICK_PREEMPT if that CPU has something to
 * switch to: tasks in the fallback DSQ or in its local DSQ, or, while there
 * are pids waiting in central_q, the CPU takes one of those (each waiting
 * pid justifies one such kick). The scan starts at a different CPU on every
 * firing so the same CPUs do not always win.
 *
 * Counters (globals): nr_total, nr_locals, nr_queued (pids currently in
 * central_q), nr_lost_pids, nr_timers, nr_dispatches, nr_mismatches,
 * nr_retries, nr_overflows, nr_preempt_kicks.
 *
 * Options (rodata, set by the loader; scx_central flag in brackets):
 *   central_cpu        0   the deciding CPU                         [-c]
 *   slice_ns           0   slice enforced by the timer, 0 means
 *                          SCX_SLICE_DFL (20 ms)                     [-s]
 *   timer_interval_ns  0   preemption check period, 0 means 1 ms (the
 *                          period of the kernel's scx_central)
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

enum central_consts {
	FALLBACK_DSQ		= 0,
	CENTRAL_Q_DEPTH		= 4096,
	MAX_CPUS		= 1024,
	DFL_TIMER_INTERVAL_NS	= 1000 * 1000,
};

const volatile s32 central_cpu;
const volatile u64 slice_ns;
const volatile u64 timer_interval_ns;

/* Whether the timer is pinned to central_cpu. */
bool timer_pinned;

u64 nr_total;		/* ops.enqueue() calls */
u64 nr_locals;		/* per-CPU kthreads put straight on their CPU */
u64 nr_queued;		/* pids in central_q right now */
u64 nr_lost_pids;	/* popped pids without a task */
u64 nr_timers;		/* timer firings */
u64 nr_dispatches;	/* ops.dispatch() calls on the central CPU */
u64 nr_mismatches;	/* popped for a CPU the task may not use */
u64 nr_retries;		/* dispatch buffer full, central CPU re-kicked */
u64 nr_overflows;	/* central_q full, task went to the fallback DSQ */
u64 nr_preempt_kicks;	/* timer preemptions sent */

UEI_DEFINE(uei);

struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, CENTRAL_Q_DEPTH);
	__type(value, s32);
} central_q SEC(".maps");

struct central_cpu_ctx {
	u64	started_at;	/* when the current task started, 0 if none */
	bool	gimme;		/* the CPU ran dry and waits for the central CPU */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, u32);
	__type(value, struct central_cpu_ctx);
} cpu_ctxs SEC(".maps");

struct central_timer {
	struct bpf_timer timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct central_timer);
} central_timer SEC(".maps");

static __always_inline u64 task_slice(void)
{
	return slice_ns ?: SCX_SLICE_DFL;
}

static __always_inline u64 timer_interval(void)
{
	return timer_interval_ns ?: DFL_TIMER_INTERVAL_NS;
}

static struct central_cpu_ctx *cpu_ctx(s32 cpu)
{
	u32 key = cpu;

	return bpf_map_lookup_elem(&cpu_ctxs, &key);
}

s32 BPF_STRUCT_OPS(central_select_cpu, struct task_struct *p, s32 prev_cpu,
		   u64 wake_flags)
{
	/* Only a hint: the kernel picks an allowed CPU if this is not one. */
	return central_cpu;
}

void BPF_STRUCT_OPS(central_enqueue, struct task_struct *p, u64 enq_flags)
{
	s32 pid = p->pid;

	__sync_fetch_and_add(&nr_total, 1);

	/* Per-CPU kthreads first, on their own CPU: they must never wait. */
	if ((p->flags & PF_KTHREAD) && p->nr_cpus_allowed == 1) {
		__sync_fetch_and_add(&nr_locals, 1);
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, SCX_SLICE_INF,
				   enq_flags | SCX_ENQ_PREEMPT);
		return;
	}

	if (bpf_map_push_elem(&central_q, &pid, 0)) {
		__sync_fetch_and_add(&nr_overflows, 1);
		scx_bpf_dsq_insert(p, FALLBACK_DSQ, SCX_SLICE_INF, enq_flags);
		return;
	}
	__sync_fetch_and_add(&nr_queued, 1);

	/*
	 * The central CPU has to come and hand this task out. A task that is
	 * still running (e.g. ENQ_LAST) will be looked at on the next pass.
	 */
	if (!scx_bpf_task_running(p))
		scx_bpf_kick_cpu(central_cpu, SCX_KICK_PREEMPT);
}

/*
 * Pop pids until one can run on @cpu and put it in @cpu's local DSQ. Returns
 * whether a task was placed.
 */
static bool feed_cpu(s32 cpu)
{
	struct task_struct *p;
	s32 pid;

	bpf_repeat(BPF_MAX_LOOPS) {
		if (bpf_map_pop_elem(&central_q, &pid))
			break;
		__sync_fetch_and_sub(&nr_queued, 1);

		p = bpf_task_from_pid(pid);
		if (!p) {
			__sync_fetch_and_add(&nr_lost_pids, 1);
			continue;
		}

		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr)) {
			/* Not for this CPU: leave it where any CPU can take it. */
			__sync_fetch_and_add(&nr_mismatches, 1);
			scx_bpf_dsq_insert(p, FALLBACK_DSQ, SCX_SLICE_INF, 0);
			bpf_task_release(p);
			/* Without slots the next insert would fail. */
			if (!scx_bpf_dispatch_nr_slots())
				break;
			continue;
		}

		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, SCX_SLICE_INF, 0);
		if (cpu != central_cpu)
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		bpf_task_release(p);
		return true;
	}

	return false;
}

void BPF_STRUCT_OPS(central_dispatch, s32 cpu, struct task_struct *prev)
{
	struct central_cpu_ctx *cctx;
	u32 nr_cpus = scx_bpf_nr_cpu_ids();
	s32 target;

	if (cpu != central_cpu) {
		if (scx_bpf_dsq_move_to_local(FALLBACK_DSQ, 0))
			return;

		/* Ask the central CPU for a task and make it look now. */
		cctx = cpu_ctx(cpu);
		if (cctx)
			cctx->gimme = true;
		scx_bpf_kick_cpu(central_cpu, SCX_KICK_PREEMPT);
		return;
	}

	__sync_fetch_and_add(&nr_dispatches, 1);

	/* Serve the CPUs that asked, then ourselves. */
	bpf_for(target, 0, nr_cpus) {
		if (!scx_bpf_dispatch_nr_slots())
			break;
		if (target == central_cpu)
			continue;

		cctx = cpu_ctx(target);
		if (!cctx || !cctx->gimme)
			continue;

		if (feed_cpu(target))
			cctx->gimme = false;
	}

	/*
	 * Out of dispatch slots: some CPUs may have been skipped, and this
	 * CPU has nothing yet. Come back right away.
	 */
	if (!scx_bpf_dispatch_nr_slots()) {
		__sync_fetch_and_add(&nr_retries, 1);
		scx_bpf_kick_cpu(central_cpu, SCX_KICK_PREEMPT);
		return;
	}

	if (scx_bpf_dsq_move_to_local(FALLBACK_DSQ, 0))
		return;
	feed_cpu(central_cpu);
}

void BPF_STRUCT_OPS(central_running, struct task_struct *p)
{
	struct central_cpu_ctx *cctx = cpu_ctx(scx_bpf_task_cpu(p));

	/* 0 means idle, so a start at time 0 is recorded as 1. */
	if (cctx)
		cctx->started_at = scx_bpf_now() ?: 1;
}

void BPF_STRUCT_OPS(central_stopping, struct task_struct *p, bool runnable)
{
	struct central_cpu_ctx *cctx = cpu_ctx(scx_bpf_task_cpu(p));

	if (cctx)
		cctx->started_at = 0;
}

static int central_timerfn(void *map, int *key, struct bpf_timer *timer)
{
	u32 nr_cpus = scx_bpf_nr_cpu_ids();
	u64 now = scx_bpf_now();
	u64 waiting = nr_queued;
	u64 slice = task_slice();
	s32 i;
	long ret;

	bpf_for(i, 0, nr_cpus) {
		s32 cpu = (nr_timers + i) % nr_cpus;
		struct central_cpu_ctx *cctx;

		if (cpu == central_cpu)
			continue;

		cctx = cpu_ctx(cpu);
		if (!cctx)
			continue;

		/* Still within its slice. */
		if (cctx->started_at && time_before(now, cctx->started_at + slice))
			continue;

		/* Preempt only if there is something to switch to. */
		if (scx_bpf_dsq_nr_queued(FALLBACK_DSQ) ||
		    scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | cpu))
			;
		else if (waiting)
			waiting--;
		else
			continue;

		__sync_fetch_and_add(&nr_preempt_kicks, 1);
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
	}

	ret = bpf_timer_start(timer, timer_interval(),
			      timer_pinned ? BPF_F_TIMER_CPU_PIN : 0);
	if (ret)
		scx_bpf_error("central: cannot re-arm the timer (%ld)", ret);

	__sync_fetch_and_add(&nr_timers, 1);
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(central_init)
{
	struct bpf_timer *timer;
	u32 key = 0;
	long ret;

	if (central_cpu < 0 || (u32)central_cpu >= scx_bpf_nr_cpu_ids() ||
	    central_cpu >= MAX_CPUS) {
		scx_bpf_error("central: invalid central_cpu %d", central_cpu);
		return -EINVAL;
	}

	ret = scx_bpf_create_dsq(FALLBACK_DSQ, -1);
	if (ret) {
		scx_bpf_error("central: cannot create the fallback DSQ (%ld)", ret);
		return ret;
	}

	timer = bpf_map_lookup_elem(&central_timer, &key);
	if (!timer)
		return -ESRCH;

	bpf_timer_init(timer, &central_timer, CLOCK_MONOTONIC);
	bpf_timer_set_callback(timer, central_timerfn);

	/*
	 * Pin the timer to the central CPU when ops.init() runs there (the
	 * loader arranges that). BPF_F_TIMER_CPU_PIN needs 6.7; older kernels
	 * reject it with -EINVAL and get an unpinned timer.
	 */
	timer_pinned = (s32)bpf_get_smp_processor_id() == central_cpu;
	ret = bpf_timer_start(timer, timer_interval(),
			      timer_pinned ? BPF_F_TIMER_CPU_PIN : 0);
	if (ret == -EINVAL && timer_pinned) {
		timer_pinned = false;
		ret = bpf_timer_start(timer, timer_interval(), 0);
	}
	if (ret)
		scx_bpf_error("central: cannot start the timer (%ld)", ret);
	return ret;
}

void BPF_STRUCT_OPS(central_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(central_ops,
	       /*
		* All decisions are remote, so a CPU's last runnable task is
		* nothing special: let it go through ops.enqueue() too.
		*/
	       .flags		= SCX_OPS_ENQ_LAST,
	       .select_cpu	= (void *)central_select_cpu,
	       .enqueue		= (void *)central_enqueue,
	       .dispatch	= (void *)central_dispatch,
	       .running		= (void *)central_running,
	       .stopping	= (void *)central_stopping,
	       .init		= (void *)central_init,
	       .exit		= (void *)central_exit,
	       .name		= "central");
