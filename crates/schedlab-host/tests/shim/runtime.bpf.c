/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * runtime: a global-FIFO scheduler that checks the runtime's wider BPF
 * features while it schedules (the current task, scx_bpf_cpu_curr /
 * cpu_rq / locked_rq, interrupt context, perf counters, task storage
 * lifetime), and SEC("syscall") programs the test runs to check the rest:
 * rbtree and list ordering, object references, ring buffers, user ring
 * buffers, dynptrs, arena pages, resilient locks, strings, cgroups and
 * their storage, map-in-map hashes.
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

#define SHARED_DSQ 0

/* The kfuncs bpf_experimental.h and bpf_arena_common.bpf.h declare. */
extern void *bpf_refcount_acquire_impl(void *kptr, void *meta) __ksym;
extern int bpf_list_push_front_impl(struct bpf_list_head *head, struct bpf_list_node *node, void *meta, __u64 off) __ksym;
extern int bpf_list_push_back_impl(struct bpf_list_head *head, struct bpf_list_node *node, void *meta, __u64 off) __ksym;
extern struct bpf_list_node *bpf_list_pop_front(struct bpf_list_head *head) __ksym;
extern struct bpf_list_node *bpf_list_pop_back(struct bpf_list_head *head) __ksym;
extern struct bpf_rb_node *bpf_rbtree_remove(struct bpf_rb_root *root, struct bpf_rb_node *node) __ksym;
extern int bpf_rbtree_add_impl(struct bpf_rb_root *root, struct bpf_rb_node *node,
			       bool (less)(struct bpf_rb_node *a, const struct bpf_rb_node *b),
			       void *meta, __u64 off) __ksym;
extern struct bpf_rb_node *bpf_rbtree_first(struct bpf_rb_root *root) __ksym;
extern struct bpf_rb_node *bpf_rbtree_root(struct bpf_rb_root *root) __ksym;
extern struct bpf_rb_node *bpf_rbtree_left(struct bpf_rb_root *root, struct bpf_rb_node *node) __ksym;
extern struct bpf_rb_node *bpf_rbtree_right(struct bpf_rb_root *root, struct bpf_rb_node *node) __ksym;
extern int bpf_res_spin_lock(struct bpf_res_spin_lock *lock) __ksym;
extern void bpf_res_spin_unlock(struct bpf_res_spin_lock *lock) __ksym;
extern struct rq *scx_bpf_locked_rq(void) __ksym;
void __arena *bpf_arena_alloc_pages(void *map, void __arena *addr, __u32 page_cnt, int node_id, __u64 flags) __ksym __weak;
void bpf_arena_free_pages(void *map, void __arena *ptr, __u32 page_cnt) __ksym __weak;

#define bpf_refcount_acquire(kptr) bpf_refcount_acquire_impl(kptr, NULL)
#define bpf_list_push_front(head, node) bpf_list_push_front_impl(head, node, NULL, 0)
#define bpf_list_push_back(head, node) bpf_list_push_back_impl(head, node, NULL, 0)
#define bpf_rbtree_add(head, node, less) bpf_rbtree_add_impl(head, node, less, NULL, 0)

/* preempt_count() as bpf_experimental.h reads it on x86. */
extern const int __preempt_count __ksym __weak;
#define HARDIRQ_MASK_ 0x000f0000
#define SOFTIRQ_OFFSET_ 0x00000100
static int preempt_count(void)
{
	return *(int *)bpf_this_cpu_ptr(&__preempt_count);
}

struct task_ctx {
	u64 runs;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CGRP_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, u64);
} cgrp_vals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_INODE_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, u64);
} inode_vals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_USER_RINGBUF);
	__uint(max_entries, 4096);
} commands SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(u32));
	__uint(value_size, sizeof(u32));
	__uint(max_entries, 4);
} pmu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARENA);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 16);
} arena SEC(".maps");

struct inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} inner0 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, 4);
	__type(key, u32);
	__array(values, struct inner);
} by_key SEC(".maps") = {
	.values = { [3] = &inner0 },
};

/* Checks made while scheduling; the test reads them with `sched_report`. */
u64 tick_checks, tick_bad, hardirq_ticks, timer_checks, timer_bad, perf_reads, perf_last, perf_bad;

struct sched_report {
	u64 tick_checks, tick_bad, hardirq_ticks, timer_checks, timer_bad, perf_reads, perf_last, perf_bad;
};

struct tmr {
	struct bpf_timer t;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct tmr);
} timers SEC(".maps");

static int timer_cb(void *map, int *key, struct bpf_timer *t)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	s32 cpu = bpf_get_smp_processor_id();

	timer_checks++;
	/* A bpf_timer callback runs in softirq context on some CPU. */
	if (!(preempt_count() & SOFTIRQ_OFFSET_) || !cur || scx_bpf_cpu_curr(cpu) != cur ||
	    scx_bpf_task_cpu(cur) != cpu)
		timer_bad++;
	/* On an idle CPU current is that CPU's idle task. */
	if (cur && !cur->pid && (!(cur->flags & PF_IDLE) || !scx_bpf_task_running(cur)))
		timer_bad++;
	bpf_timer_start(t, 3000000, 0);
	return 0;
}

s32 BPF_STRUCT_OPS(rt_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	bool idle = false;
	s32 cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &idle);

	if (idle)
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, SCX_SLICE_DFL, 0);
	return cpu;
}

void BPF_STRUCT_OPS(rt_enqueue, struct task_struct *p, u64 enq_flags)
{
	scx_bpf_dsq_insert(p, SHARED_DSQ, SCX_SLICE_DFL, enq_flags);
}

void BPF_STRUCT_OPS(rt_dispatch, s32 cpu, struct task_struct *prev)
{
	scx_bpf_dsq_move_to_local(SHARED_DSQ);
}

void BPF_STRUCT_OPS(rt_tick, struct task_struct *p)
{
	s32 cpu = scx_bpf_task_cpu(p);
	struct rq *rq = scx_bpf_cpu_rq(cpu);
	struct task_ctx *tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);
	struct bpf_perf_event_value v;

	tick_checks++;
	if (bpf_get_current_task_btf() != p || scx_bpf_cpu_curr(cpu) != p || !rq || rq->curr != p ||
	    rq->cpu != cpu || scx_bpf_locked_rq() != rq || !rq->idle || rq->idle->pid ||
	    rq->scx.local_dsq_nr != (u32)scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL) ||
	    bpf_per_cpu_ptr(&runqueues, cpu) != (void *)rq || !tctx)
		tick_bad++;
	if (tctx)
		tctx->runs++;
	/* The tick is a hard interrupt. */
	if (preempt_count() & HARDIRQ_MASK_)
		hardirq_ticks++;
	if (!bpf_perf_event_read_value(&pmu, BPF_F_CURRENT_CPU, &v, sizeof(v))) {
		perf_reads++;
		if (v.counter < perf_last && cpu == 0)
			perf_bad++;
		if (cpu == 0)
			perf_last = v.counter;
	}
}

s32 BPF_STRUCT_OPS(rt_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	if (!args->cgroup || args->cgroup->level || args->cgroup->kn->id != 1)
		return -22;
	return bpf_task_storage_get(&task_ctxs, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE) ? 0 : -12;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(rt_init)
{
	u32 key = 0;
	struct tmr *t = bpf_map_lookup_elem(&timers, &key);

	if (!t)
		return -2;
	bpf_timer_init(&t->t, &timers, CLOCK_MONOTONIC);
	bpf_timer_set_callback(&t->t, timer_cb);
	bpf_timer_start(&t->t, 3000000, 0);
	return scx_bpf_create_dsq(SHARED_DSQ, -1);
}

SCX_OPS_DEFINE(runtime_ops,
	       .select_cpu = (void *)rt_select_cpu,
	       .enqueue = (void *)rt_enqueue,
	       .dispatch = (void *)rt_dispatch,
	       .tick = (void *)rt_tick,
	       .init_task = (void *)rt_init_task,
	       .init = (void *)rt_init,
	       .name = "runtime");

SEC("syscall")
int sched_report(struct sched_report *r)
{
	r->tick_checks = tick_checks;
	r->tick_bad = tick_bad;
	r->hardirq_ticks = hardirq_ticks;
	r->timer_checks = timer_checks;
	r->timer_bad = timer_bad;
	r->perf_reads = perf_reads;
	r->perf_last = perf_last;
	r->perf_bad = perf_bad;
	return 0;
}

/* ---- the current task outside any op --------------------------------------- */

struct idle_report {
	s32 pid, cpu, task_cpu, running, is_idle, same_as_curr, storage, irq;
	char comm[16];
	u64 cgroup_level, cgroup_id, cgroup_same, cgroup_val;
};

SEC("syscall")
int idle_check(struct idle_report *r)
{
	struct task_struct *cur = bpf_get_current_task_btf(), *acq;
	struct cgroup *cg, *anc;
	struct task_ctx *tctx;
	u64 *cv;

	if (!cur)
		return -1;
	r->pid = cur->pid;
	r->cpu = bpf_get_smp_processor_id();
	r->task_cpu = scx_bpf_task_cpu(cur);
	r->running = scx_bpf_task_running(cur);
	r->is_idle = !!(cur->flags & PF_IDLE);
	r->same_as_curr = scx_bpf_cpu_curr(r->cpu) == cur;
	__builtin_memcpy(r->comm, cur->comm, sizeof(r->comm));
	r->irq = preempt_count();
	acq = bpf_task_acquire(cur);
	if (acq)
		bpf_task_release(acq);
	tctx = bpf_task_storage_get(&task_ctxs, cur, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	r->storage = tctx && bpf_task_storage_delete(&task_ctxs, cur) == 0;

	cg = scx_bpf_task_cgroup(cur);
	if (!cg)
		return -2;
	r->cgroup_level = cg->level;
	r->cgroup_id = cg->kn->id;
	anc = bpf_cgroup_ancestor(cg, 0);
	r->cgroup_same = anc == cg && bpf_cgroup_from_id(1) == cg && !bpf_cgroup_from_id(2);
	if (anc)
		bpf_cgroup_release(anc);
	cv = bpf_cgrp_storage_get(&cgrp_vals, cg, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (cv) {
		*cv += 5;
		r->cgroup_val = *(u64 *)bpf_cgrp_storage_get(&cgrp_vals, cg, 0, 0);
	}
	bpf_cgroup_release(cg);
	return 0;
}

/* ---- rbtree, list, objects ---------------------------------------------------- */

struct node_data {
	struct bpf_refcount ref;
	struct bpf_rb_node rb;
	struct bpf_list_node ln;
	u64 key;
	u64 seq;
};

private(RB) struct bpf_spin_lock glock;
private(RB) struct bpf_rb_root groot __contains(node_data, rb);
private(RB) struct bpf_list_head ghead __contains(node_data, ln);

static bool less(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	struct node_data *na = container_of(a, struct node_data, rb);
	struct node_data *nb = container_of(b, struct node_data, rb);

	return na->key < nb->key;
}

struct ds_report {
	s32 added, popped, order_bad, stable_bad, bst_bad, depth;
	s32 readd_err, remove_again_null, removed_key, lock_missing;
	s32 list_order[7];
	s32 list_len;
};

/* Checks the BST order under @n with the kfuncs that walk the tree; returns its height. */
static int walk(struct bpf_rb_node *n, struct ds_report *r, u64 lo, u64 hi)
{
	struct node_data *d;
	int l, rr;

	if (!n)
		return 0;
	d = container_of(n, struct node_data, rb);
	if (d->key < lo || d->key > hi)
		r->bst_bad++;
	l = walk(bpf_rbtree_left(&groot, n), r, lo, d->key);
	rr = walk(bpf_rbtree_right(&groot, n), r, d->key, hi);
	return 1 + (l > rr ? l : rr);
}

SEC("syscall")
int ds_check(struct ds_report *r)
{
	struct node_data *keep = NULL, *n;
	struct bpf_rb_node *rb;
	struct bpf_list_node *ln;
	u64 x = 12345, last_key = 0, last_seq = 0;
	int i;

	for (i = 0; i < 200; i++) {
		n = bpf_obj_new(struct node_data);
		if (!n)
			return -1;
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		n->key = (x >> 33) % 50;	/* many equal keys */
		n->seq = i;
		if (i == 100) {
			keep = bpf_refcount_acquire(n);
			if (!keep)
				return -2;
		}
		bpf_spin_lock(&glock);
		if (!bpf_rbtree_add(&groot, &n->rb, less))
			r->added++;
		bpf_spin_unlock(&glock);
	}
	if (!keep)
		return -3;
	bpf_spin_lock(&glock);
	r->depth = walk(bpf_rbtree_root(&groot), r, 0, ~0ULL);
	/* The kept node is in the tree: adding it again fails. */
	r->readd_err = bpf_rbtree_add(&groot, &keep->rb, less);
	rb = bpf_rbtree_remove(&groot, &keep->rb);
	r->removed_key = rb ? (s32)container_of(rb, struct node_data, rb)->key : -1;
	r->remove_again_null = !bpf_rbtree_remove(&groot, &keep->rb);
	bpf_spin_unlock(&glock);
	if (rb)
		bpf_obj_drop(container_of(rb, struct node_data, rb));
	bpf_obj_drop(keep);

	for (;;) {
		bpf_spin_lock(&glock);
		rb = bpf_rbtree_first(&groot);
		if (rb)
			rb = bpf_rbtree_remove(&groot, rb);
		bpf_spin_unlock(&glock);
		if (!rb)
			break;
		n = container_of(rb, struct node_data, rb);
		if (r->popped && n->key < last_key)
			r->order_bad++;
		if (r->popped && n->key == last_key && n->seq < last_seq)
			r->stable_bad++;
		last_key = n->key;
		last_seq = n->seq;
		r->popped++;
		bpf_obj_drop(n);
	}

	/* List: push 1..5 at the back and 0 at the front; pop 0..4 from the front, 5 from the back. */
	for (i = 0; i < 6; i++) {
		n = bpf_obj_new(struct node_data);
		if (!n)
			return -4;
		n->key = i < 5 ? i + 1 : 0;
		bpf_spin_lock(&glock);
		if (i < 5)
			bpf_list_push_back(&ghead, &n->ln);
		else
			bpf_list_push_front(&ghead, &n->ln);
		bpf_spin_unlock(&glock);
	}
	for (i = 0; i < 7; i++) {
		bpf_spin_lock(&glock);
		ln = i == 5 ? bpf_list_pop_back(&ghead) : bpf_list_pop_front(&ghead);
		bpf_spin_unlock(&glock);
		r->list_order[i] = ln ? (s32)container_of(ln, struct node_data, ln)->key : -1;
		if (ln) {
			r->list_len++;
			bpf_obj_drop(container_of(ln, struct node_data, ln));
		}
	}
	return 0;
}

/* Without the lock the verifier refuses the program; here the scheduler is ejected. */
SEC("syscall")
int rb_unlocked(void *ctx)
{
	return bpf_rbtree_first(&groot) ? 1 : 0;
}

/* ---- ring buffers and dynptrs ----------------------------------------------- */

struct rb_report {
	s64 out_ret, full_after, avail_before, avail_after, size, dynptr_ret, dynptr_read, bad_flags;
};

/* Phase 1: reserve A, reserve B, submit B, output C; A stays reserved. */
static u32 *held_a;

SEC("syscall")
int rb_phase1(struct rb_report *r)
{
	u32 *b, c = 3;

	held_a = bpf_ringbuf_reserve(&events, sizeof(u32), 0);
	b = bpf_ringbuf_reserve(&events, sizeof(u32), 0);
	if (!held_a || !b)
		return -1;
	*held_a = 1;
	*b = 2;
	bpf_ringbuf_submit(b, 0);
	r->out_ret = bpf_ringbuf_output(&events, &c, sizeof(c), 0);
	r->avail_before = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	r->size = bpf_ringbuf_query(&events, BPF_RB_RING_SIZE);
	r->bad_flags = bpf_ringbuf_reserve(&events, 8, 1) == NULL;
	return 0;
}

/* Phase 2: submit A; then a dynptr record; then fill the buffer and discard. */
SEC("syscall")
int rb_phase2(struct rb_report *r)
{
	struct bpf_dynptr dp;
	u64 v = 0x1122334455667788ULL, back = 0;
	void *big;
	int n = 0;

	if (!held_a)
		return -1;
	bpf_ringbuf_submit(held_a, BPF_RB_FORCE_WAKEUP);
	held_a = NULL;
	r->dynptr_ret = bpf_ringbuf_reserve_dynptr(&events, 16, 0, &dp);
	bpf_dynptr_write(&dp, 8, &v, sizeof(v), 0);
	bpf_dynptr_read(&back, sizeof(back), &dp, 8, 0);
	r->dynptr_read = back == v && bpf_dynptr_read(&back, 8, &dp, 12, 0) == -E2BIG;
	bpf_ringbuf_submit_dynptr(&dp, 0);
	/* 4096 bytes hold at most 4095: records of 1024 + 8 fit three times. */
	while ((big = bpf_ringbuf_reserve(&events, 1024, 0))) {
		n++;
		bpf_ringbuf_discard(big, 0);
		if (n > 100)
			break;
	}
	r->full_after = n;
	r->avail_after = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	return 0;
}

struct drain_ctx {
	u64 sum;
	u32 seen;
	u32 stop_at;
};

static long on_command(struct bpf_dynptr *dp, struct drain_ctx *c)
{
	u64 v = 0;

	if (bpf_dynptr_read(&v, sizeof(v), dp, 0, 0))
		return 1;
	/* User samples are read-only. */
	if (bpf_dynptr_data(dp, 0, 8))
		return 1;
	c->sum += v;
	c->seen++;
	return c->seen == c->stop_at;
}

struct drain_report {
	s64 first, second;
	u64 sum;
};

SEC("syscall")
int urb_drain(struct drain_report *r)
{
	struct drain_ctx c = { .stop_at = 2 };

	r->first = bpf_user_ringbuf_drain(&commands, on_command, &c, 0);
	c.stop_at = 0;
	r->second = bpf_user_ringbuf_drain(&commands, on_command, &c, 0);
	r->sum = c.sum;
	return 0;
}

/* ---- arena, locks, strings, maps of maps, inode storage --------------------- */

struct node_a {
	struct node_a __arena *next;
	u64 val;
};

struct misc_report {
	u64 p1, p2, p3, p4, hinted, zeroed, list_sum, bad_node;
	s32 lock1, lock2, strcmp_lt, strcmp_eq, strcmp_gt, strcmp_prefix;
	u64 inner_val, inner_missing, inode_val, inode_null;
};

struct bpf_res_spin_lock rlock;

SEC("syscall")
int misc_check(struct misc_report *r)
{
	struct node_a __arena *head = NULL, __arena *n;
	u64 __arena *p1, *p2, *p3;
	u32 k3 = 3, k1 = 1, k0 = 0;
	void *in;
	u64 *v, fake_inode[2];
	int i;

	p1 = bpf_arena_alloc_pages(&arena, NULL, 1, -1, 0);
	p2 = bpf_arena_alloc_pages(&arena, NULL, 2, -1, 0);
	if (!p1 || !p2)
		return -1;
	*p1 = 99;
	bpf_arena_free_pages(&arena, p1, 1);
	p3 = bpf_arena_alloc_pages(&arena, NULL, 1, -1, 0);
	r->p1 = (u64)p1;
	r->p2 = (u64)p2;
	r->p3 = (u64)p3;
	r->zeroed = p3 && *p3 == 0;
	r->hinted = bpf_arena_alloc_pages(&arena, (char __arena *)p1 + 8 * 4096, 1, -1, 0) ==
		    (void __arena *)((char __arena *)p1 + 8 * 4096);
	r->bad_node = bpf_arena_alloc_pages(&arena, NULL, 1, 7, 0) == NULL;
	/* A linked list in arena memory, allocated from one page. */
	n = bpf_arena_alloc_pages(&arena, NULL, 1, -1, 0);
	r->p4 = (u64)n;
	for (i = 0; n && i < 10; i++) {
		n[i].val = i + 1;
		n[i].next = head;
		head = &n[i];
	}
	for (; head; head = head->next)
		r->list_sum += head->val;

	r->lock1 = bpf_res_spin_lock(&rlock);
	r->lock2 = bpf_res_spin_lock(&rlock);
	if (!r->lock1)
		bpf_res_spin_unlock(&rlock);

	r->strcmp_lt = bpf_strncmp("abc", 3, "abd");
	r->strcmp_eq = bpf_strncmp("abc", 3, "abc");
	r->strcmp_gt = bpf_strncmp("b", 1, "a");
	r->strcmp_prefix = bpf_strncmp("abcdef", 3, "abcxyz");

	in = bpf_map_lookup_elem(&by_key, &k3);
	if (in) {
		v = bpf_map_lookup_elem(in, &k0);
		if (v) {
			*v = 77;
			r->inner_val = *(u64 *)bpf_map_lookup_elem(&inner0, &k0);
		}
	}
	r->inner_missing = bpf_map_lookup_elem(&by_key, &k1) == NULL;

	v = bpf_inode_storage_get(&inode_vals, fake_inode, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (v) {
		*v = 4;
		r->inode_val = *(u64 *)bpf_inode_storage_get(&inode_vals, fake_inode, 0, 0);
		bpf_inode_storage_delete(&inode_vals, fake_inode);
	}
	r->inode_null = !bpf_inode_storage_get(&inode_vals, fake_inode, 0, 0) &&
			!bpf_inode_storage_get(&inode_vals, NULL, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	return 0;
}
