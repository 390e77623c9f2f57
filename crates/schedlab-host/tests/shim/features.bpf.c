/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * features: a small vtime scheduler, written like the sched-ext examples,
 * that touches every part of the shim a real scheduler uses: each map type,
 * bpf_cpumask kptrs, a bpf_timer, bpf_for/bpf_repeat/bpf_for_each(scx_dsq),
 * spin locks and RCU, rodata, UEI, BPF's division by zero and SEC("syscall")
 * programs through which the test reads what happened.
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

#define SHARED_DSQ 7
#define NR_SLOTS 4

const volatile u64 slice_ns = SCX_SLICE_DFL;
const volatile bool use_timer = true;
const volatile s32 bias = -3;
const volatile u32 weights[4] = { 1, 2, 3, 4 };
const volatile char tag[8] = "none";

UEI_DEFINE(uei);

/* Per-task context with a kptr, as scx schedulers keep their cpumasks. */
struct task_ctx {
	struct bpf_cpumask __kptr *mask;
	u64 enq;
	u64 last_vtime;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, u64);
} pcpu_runs SEC(".maps");

struct counters {
	struct bpf_spin_lock lock;
	u64 enqueued;
	u64 dispatched;
	u64 iterated;
	u64 timer_fires;
	u64 slices;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct counters);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, s32);
	__type(value, u64);
} pid_runs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 3);
	__uint(key_size, sizeof(u32));
	__uint(value_size, sizeof(u64));
} recent SEC(".maps");

struct pidq {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, 8);
	__type(value, u32);
};
struct pidq q0 SEC(".maps"), q1 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK);
	__uint(max_entries, 8);
	__type(value, u32);
} stk SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, u32);
	__array(values, struct pidq);
} queues SEC(".maps") = {
	.values = { [0] = &q0, [1] = &q1 },
};

struct feat_timer {
	struct bpf_timer timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct feat_timer);
} timers SEC(".maps");

private(FEAT) struct bpf_cpumask __kptr *even_cpus;

static u64 vtime_now;
volatile u64 zero;	/* divisors the compiler cannot see through */
volatile s64 minus_one = -1;

static struct counters *ctrs(void)
{
	u32 key = 0;

	return bpf_map_lookup_elem(&counters, &key);
}

static int timerfn(void *map, int *key, struct bpf_timer *timer)
{
	struct counters *c = ctrs();

	if (c)
		__sync_fetch_and_add(&c->timer_fires, 1);
	bpf_timer_start(timer, 5 * 1000 * 1000, 0);
	return 0;
}

s32 BPF_STRUCT_OPS(feat_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	bool idle = false;
	s32 cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &idle);

	if (idle)
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, 0);
	return cpu;
}

void BPF_STRUCT_OPS(feat_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);
	struct counters *c = ctrs();
	u64 vtime = p->scx.dsq_vtime;
	u32 pid = p->pid, slot = pid % 2;
	void *q;

	if (!tctx || !c) {
		scx_bpf_error("no task ctx for %s[%d]", p->comm, p->pid);
		return;
	}
	tctx->enq++;
	bpf_spin_lock(&c->lock);
	c->enqueued++;
	bpf_spin_unlock(&c->lock);

	/* Exercise the map-in-map queues: push, then pop it back. */
	q = bpf_map_lookup_elem(&queues, &slot);
	if (q && !bpf_map_push_elem(q, &pid, 0)) {
		u32 back = 0;

		if (bpf_map_pop_elem(q, &back) || back != pid)
			scx_bpf_error("queue returned %u for %u", back, pid);
	}

	if (time_before(vtime, vtime_now - slice_ns))
		vtime = vtime_now - slice_ns;
	scx_bpf_dsq_insert_vtime(p, SHARED_DSQ, slice_ns, vtime, enq_flags);
}

void BPF_STRUCT_OPS(feat_dispatch, s32 cpu, struct task_struct *prev)
{
	struct task_struct *p;
	struct counters *c = ctrs();
	u64 n = 0;

	bpf_for_each(scx_dsq, p, SHARED_DSQ, 0) {
		if (++n >= 4)
			break;
	}
	if (c)
		c->iterated += n;
	if (scx_bpf_dsq_move_to_local(SHARED_DSQ) && c)
		c->dispatched++;
}

void BPF_STRUCT_OPS(feat_running, struct task_struct *p)
{
	u32 key = 0;
	u64 *cnt = bpf_map_lookup_elem(&pcpu_runs, &key);
	s32 pid = p->pid;
	u64 one = 1, *runs;

	if (cnt)
		(*cnt)++;
	runs = bpf_map_lookup_elem(&pid_runs, &pid);
	if (runs)
		(*runs)++;
	else
		bpf_map_update_elem(&pid_runs, &pid, &one, BPF_NOEXIST);
	if (time_after(p->scx.dsq_vtime, vtime_now))
		vtime_now = p->scx.dsq_vtime;
}

void BPF_STRUCT_OPS(feat_stopping, struct task_struct *p, bool runnable)
{
	struct counters *c = ctrs();
	u64 used = slice_ns - p->scx.slice;

	/* BPF division: by a zero weight this is 0, not a trap. */
	p->scx.dsq_vtime += used * 100 / (p->scx.weight * (zero + 1));
	if (c)
		c->slices += used / zero;	/* always 0 */
}

s32 BPF_STRUCT_OPS(feat_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	struct task_ctx *tctx;
	struct bpf_cpumask *mask;

	tctx = bpf_task_storage_get(&task_ctxs, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!tctx)
		return -ENOMEM;
	mask = bpf_cpumask_create();
	if (!mask)
		return -ENOMEM;
	bpf_cpumask_copy(mask, p->cpus_ptr);
	mask = bpf_kptr_xchg(&tctx->mask, mask);
	if (mask)
		bpf_cpumask_release(mask);
	return 0;
}

void BPF_STRUCT_OPS(feat_exit_task, struct task_struct *p, struct scx_exit_task_args *args)
{
	bpf_task_storage_delete(&task_ctxs, p);
}

void BPF_STRUCT_OPS(feat_enable, struct task_struct *p)
{
	p->scx.dsq_vtime = vtime_now;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(feat_init)
{
	struct bpf_cpumask *mask;
	struct bpf_timer *timer;
	u32 key = 0;
	s32 i;

	mask = bpf_cpumask_create();
	if (!mask)
		return -ENOMEM;
	bpf_for(i, 0, scx_bpf_nr_cpu_ids())
		if (!(i & 1))
			bpf_cpumask_set_cpu(i, mask);
	mask = bpf_kptr_xchg(&even_cpus, mask);
	if (mask)
		bpf_cpumask_release(mask);

	if (use_timer) {
		timer = bpf_map_lookup_elem(&timers, &key);
		if (!timer)
			return -ESRCH;
		bpf_timer_init(timer, &timers, CLOCK_MONOTONIC);
		bpf_timer_set_callback(timer, timerfn);
		bpf_timer_start(timer, 5 * 1000 * 1000, 0);
	}
	return scx_bpf_create_dsq(SHARED_DSQ, -1);
}

void BPF_STRUCT_OPS(feat_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(feat_ops,
	       .select_cpu = (void *)feat_select_cpu,
	       .enqueue = (void *)feat_enqueue,
	       .dispatch = (void *)feat_dispatch,
	       .running = (void *)feat_running,
	       .stopping = (void *)feat_stopping,
	       .init_task = (void *)feat_init_task,
	       .exit_task = (void *)feat_exit_task,
	       .enable = (void *)feat_enable,
	       .init = (void *)feat_init,
	       .exit = (void *)feat_exit,
	       .timeout_ms = 5000,
	       .name = "features");

/* What the test reads back through the syscall programs. */
struct feat_report {
	u64 enqueued, dispatched, iterated, timer_fires, slices;
	u64 runs_cpu0, runs_cpu1, nr_pids;
	u32 even_weight, even_first, any_even[3];
	s32 bias;
	u32 weight_sum;
	char tag[8];
	s32 uei_kind;
	s64 uei_code;
	char uei_reason[32];
	char uei_msg[64];
};

static long count_pid(void *map, s32 *key, u64 *val, u64 *n)
{
	(*n)++;
	return 0;
}

SEC("syscall")
int report(struct feat_report *r)
{
	struct counters *c = ctrs();
	struct bpf_cpumask *even;
	u32 key = 0, i;
	u64 *v;

	if (c) {
		r->enqueued = c->enqueued;
		r->dispatched = c->dispatched;
		r->iterated = c->iterated;
		r->timer_fires = c->timer_fires;
		r->slices = c->slices;
	}
	v = bpf_map_lookup_percpu_elem(&pcpu_runs, &key, 0);
	r->runs_cpu0 = v ? *v : ~0ULL;
	v = bpf_map_lookup_percpu_elem(&pcpu_runs, &key, 1);
	r->runs_cpu1 = v ? *v : ~0ULL;
	bpf_for_each_map_elem(&pid_runs, count_pid, &r->nr_pids, 0);

	bpf_rcu_read_lock();
	even = even_cpus;
	if (even) {
		r->even_weight = bpf_cpumask_weight(cast_mask(even));
		r->even_first = bpf_cpumask_first(cast_mask(even));
		for (i = 0; i < 3; i++)
			r->any_even[i] = bpf_cpumask_any_distribute(cast_mask(even));
	}
	bpf_rcu_read_unlock();

	r->bias = bias;
	bpf_for(i, 0, 4)
		r->weight_sum += weights[i];
	__builtin_memcpy(r->tag, (const char *)tag, sizeof(r->tag));
	r->uei_kind = uei.kind;
	r->uei_code = uei.exit_code;
	bpf_probe_read_kernel_str(r->uei_reason, sizeof(r->uei_reason), uei.reason);
	bpf_probe_read_kernel_str(r->uei_msg, sizeof(r->uei_msg), uei.msg);
	return 0;
}

/* BPF's division results where x86 would trap. */
struct div_report {
	u64 u64_div, u64_mod;
	u32 u32_div, u32_mod;
	s64 s64_div, s64_mod;
	s32 s32_div, s32_mod;
	s64 min_div, min_mod;
	s32 min32_div, min32_mod;
	u64 mem_div;
};

SEC("syscall")
int divide(struct div_report *r)
{
	u64 a = 1234567;
	volatile u32 b = 77;
	s64 neg = -99;
	s64 min = (s64)1 << 63;

	r->u64_div = a / zero;
	r->u64_mod = a % zero;
	r->u32_div = b / (u32)zero;
	r->u32_mod = b % (u32)zero;
	r->s64_div = neg / (s64)zero;
	r->s64_mod = neg % (s64)zero;
	r->s32_div = (s32)neg / (s32)zero;
	r->s32_mod = (s32)neg % (s32)zero;
	r->min_div = min / minus_one;
	r->min_mod = min % minus_one;
	r->min32_div = (s32)0x80000000 / (s32)minus_one;
	r->min32_mod = (s32)0x80000000 % (s32)minus_one;
	r->mem_div = a / *(volatile u64 *)&zero;
	return 0;
}

/* Queue, stack and LRU semantics as BPF sees them. */
struct map_report {
	u32 fifo[3], lifo[3];
	s64 push_full, pop_empty, exist_push;
	u32 lru_has[4];
	s64 noexist_again;
};

SEC("syscall")
int map_semantics(struct map_report *r)
{
	u32 i, v, k;
	u64 val = 1;

	bpf_for(i, 1, 4) {
		bpf_map_push_elem(&q0, &i, 0);
		bpf_map_push_elem(&stk, &i, 0);
	}
	for (i = 0; i < 3; i++) {
		bpf_map_pop_elem(&q0, &r->fifo[i]);
		bpf_map_pop_elem(&stk, &r->lifo[i]);
	}
	r->pop_empty = bpf_map_pop_elem(&q0, &v);
	bpf_repeat(8)
		bpf_map_push_elem(&stk, &val, 0);
	r->push_full = bpf_map_push_elem(&stk, &val, 0);
	r->exist_push = bpf_map_push_elem(&stk, &val, BPF_EXIST);

	/* recent holds 3: add 0..3, touching 0 before 3 goes in. */
	for (k = 0; k < 3; k++)
		bpf_map_update_elem(&recent, &k, &val, BPF_ANY);
	k = 0;
	bpf_map_lookup_elem(&recent, &k);
	k = 3;
	bpf_map_update_elem(&recent, &k, &val, BPF_ANY);
	for (k = 0; k < 4; k++)
		r->lru_has[k] = bpf_map_lookup_elem(&recent, &k) != NULL;
	k = 3;
	r->noexist_again = bpf_map_update_elem(&recent, &k, &val, BPF_NOEXIST);
	return 0;
}

/* Each load has its own globals: bump and return a counter. */
u64 bumps;

SEC("syscall")
int bump(void *ctx)
{
	return ++bumps;
}
