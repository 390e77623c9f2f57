/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * cid: a global-FIFO scheduler in the 7.3 cid form (struct sched_ext_ops_cid)
 * that checks what the host hands it: every cid it sees against
 * scx_bpf_this_cid() / scx_bpf_task_cid(), the cmasks of ops.enable() and
 * ops.set_cmask() (recorded per pid for the test), SCX_DSQ_LOCAL_ON | cid
 * for a task pinned to one CPU, and the sub-scheduler kfuncs of a root
 * with no children. Results are read through SEC("syscall") report.
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

#define SHARED_DSQ 0
#define MAX_PIDS 64

s32 scx_bpf_task_cid(const struct task_struct *p) __ksym;
s32 scx_bpf_this_cid(void) __ksym;
u32 scx_bpf_nr_cids(void) __ksym;
s32 scx_bpf_cid_to_cpu(s32 cid) __ksym;
s32 scx_bpf_cpu_to_cid(s32 cpu) __ksym;
s32 scx_bpf_sub_caps(u64 cgroup_id, u64 caps, struct scx_cmask *out) __ksym;
s32 scx_bpf_sub_grant(u64 cgroup_id, u64 caps, const struct scx_cmask *cmask, struct scx_cmask *denied) __ksym;
bool scx_bpf_sub_dispatch___compat(u64 cgroup_id) __ksym;
struct task_struct *scx_bpf_tid_to_task(u64 tid) __ksym;

struct {
	__uint(type, BPF_MAP_TYPE_ARENA);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 16);
} arena SEC(".maps");

/* An arena cmask with room for 128 cids. */
struct cm {
	struct scx_cmask mask;
	u64 words[4];
};

struct cm held SEC(".addr_space.1");

struct report {
	u64 nr_cids;
	u64 dispatch_bad;
	u64 select_bad;
	u64 select_calls;
	u64 enable_calls;
	u64 enable_mask_bad;
	u64 set_cmask_calls;
	s64 caps_ret;
	u64 caps_word;
	u64 caps_hdr;
	s64 grant_ret;
	u64 sub_dispatch;
	u64 pinned_local_on;
	u64 tid_bad;
	u64 cid_of_cpu1;
	u64 reenq_calls;
	u64 reenq_kfunc;
	u64 reenq_other;
	u64 cmask_words[MAX_PIDS];
	u64 cmask_hdr[MAX_PIDS];
};

struct report rep;

const volatile s32 pinned_pid = -1;

static u64 cmask_word0(const struct scx_cmask *m)
{
	return m->bits[0];
}

s32 BPF_STRUCT_OPS(cid_select, struct task_struct *p, s32 prev_cid, u64 wake_flags)
{
	rep.select_calls++;
	if (prev_cid != scx_bpf_task_cid(p))
		rep.select_bad++;
	return prev_cid;
}

void BPF_STRUCT_OPS(cid_enqueue, struct task_struct *p, u64 enq_flags)
{
	if (p->pid == pinned_pid) {
		/* CPU 1 only: its cid's local DSQ. */
		rep.pinned_local_on++;
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | scx_bpf_cpu_to_cid(1), SCX_SLICE_DFL, enq_flags);
		return;
	}
	if (enq_flags & SCX_ENQ_REENQ) {
		if ((p->scx.flags & SCX_TASK_REENQ_REASON_MASK) == SCX_TASK_REENQ_KFUNC)
			rep.reenq_kfunc++;
		else
			rep.reenq_other++;
	}
	if (scx_bpf_tid_to_task(p->scx.tid) != p)
		rep.tid_bad++;
	scx_bpf_dsq_insert(p, SHARED_DSQ, SCX_SLICE_DFL, enq_flags);
}

void BPF_STRUCT_OPS(cid_dispatch, s32 cid, struct task_struct *prev)
{
	if (cid != scx_bpf_this_cid())
		rep.dispatch_bad++;
	if (scx_bpf_sub_dispatch___compat(2))
		rep.sub_dispatch++;
	/* Now and then, every task on the user DSQ back to ops.enqueue(). */
	if (!(++rep.reenq_calls % 16))
		scx_bpf_dsq_reenq(SHARED_DSQ, 0);
	scx_bpf_dsq_move_to_local(SHARED_DSQ);
}

void BPF_STRUCT_OPS(cid_enable, struct task_struct *p, struct scx_enable_args *args)
{
	const struct scx_cmask *m = (const struct scx_cmask *)args->cmask_arena_addr;

	rep.enable_calls++;
	if (!m || m->nr_cids != scx_bpf_nr_cids())
		rep.enable_mask_bad++;
}

void BPF_STRUCT_OPS(cid_set_cmask, struct task_struct *p, const struct scx_cmask *m)
{
	s32 pid = p->pid;

	rep.set_cmask_calls++;
	if (pid >= 0 && pid < MAX_PIDS) {
		rep.cmask_words[pid] = cmask_word0(m);
		rep.cmask_hdr[pid] = ((u64)m->base << 48) | ((u64)m->nr_cids << 16) | m->alloc_words;
	}
}

s32 BPF_STRUCT_OPS_SLEEPABLE(cid_init)
{
	rep.nr_cids = scx_bpf_nr_cids();
	rep.cid_of_cpu1 = scx_bpf_cpu_to_cid(1);
	held.mask.base = 0;
	held.mask.nr_cids = rep.nr_cids;
	held.mask.alloc_words = (rep.nr_cids + 63) / 64 + 1;
	rep.caps_ret = scx_bpf_sub_caps(0, SCX_CAP_ENQ, &held.mask);
	rep.caps_word = held.mask.bits[0];
	rep.caps_hdr = held.mask.nr_cids;
	rep.grant_ret = scx_bpf_sub_grant(2, SCX_CAP_ENQ, &held.mask, NULL);
	return scx_bpf_create_dsq(SHARED_DSQ, -1);
}

SEC("syscall")
int report(struct report *out)
{
	__builtin_memcpy(out, &rep, sizeof(rep));
	return 0;
}

SEC(".struct_ops.link")
struct sched_ext_ops_cid cid_ops = {
	.select_cid		= (void *)cid_select,
	.enqueue		= (void *)cid_enqueue,
	.dispatch		= (void *)cid_dispatch,
	.enable			= (void *)cid_enable,
	.set_cmask		= (void *)cid_set_cmask,
	.init			= (void *)cid_init,
	.flags			= SCX_OPS_TID_TO_TASK,
	.name			= "cid",
};
