/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The 7.3 cid-form kfuncs (kernel/sched/ext/{cid,sub,ext}.c), included by
 * runtime.c. Each forwards to the host function of the same name
 * (host/cid.rs, host/sub.rs), which translates between cids and the
 * simulator's CPUs. The ___compat names are the ones scx's compat.bpf.h
 * tests with bpf_ksym_exists() (libbpf drops a ___suffix when resolving).
 */

#define SCHEDLAB_CID_HOST_FNS(X)                                               \
	X(s32, scx_bpf_task_cid, (const struct task_struct *p), (p))           \
	X(s32, scx_bpf_this_cid, (void), ())                                   \
	X(u32, scx_bpf_nr_cids, (void), ())                                    \
	X(u32, scx_bpf_nr_online_cids, (void), ())                             \
	X(s32, scx_bpf_cid_to_cpu, (s32 cid), (cid))                           \
	X(s32, scx_bpf_cpu_to_cid, (s32 cpu), (cpu))                           \
	X(struct task_struct *, scx_bpf_cid_curr, (s32 cid), (cid))            \
	X(const void *, scx_bpf_online_cmask, (void), ())                      \
	X(u32, scx_bpf_cidperf_cap, (s32 cid), (cid))                          \
	X(u32, scx_bpf_cidperf_cur, (s32 cid), (cid))                          \
	X(s32, scx_bpf_cidperf_set, (s32 cid, u32 perf), (cid, perf))          \
	X(struct task_struct *, scx_bpf_tid_to_task, (u64 tid), (tid))         \
	X(bool, scx_bpf_sub_dispatch, (u64 cgroup_id), (cgroup_id))            \
	X(s32, scx_bpf_sub_grant, (u64 cgroup_id, u64 caps, const struct scx_cmask *cmask, \
				   struct scx_cmask *denied_out), (cgroup_id, caps, cmask, denied_out)) \
	X(s32, scx_bpf_sub_caps, (u64 cgroup_id, u64 caps, struct scx_cmask *out), (cgroup_id, caps, out)) \
	X(s32, schedlab_sub_kill, (u64 cgroup_id, const char *msg), (cgroup_id, msg))

#define SCHEDLAB_CID_HOST_VOID_FNS(X)                                          \
	X(scx_bpf_kick_cid, (s32 cid, u64 flags), (cid, flags))                \
	X(scx_bpf_cid_topo, (s32 cid, struct scx_cid_topo *out, size_t out__sz), (cid, out, out__sz)) \
	X(scx_bpf_cid_override, (const s32 *cpu_to_cid, u32 cpu_to_cid_cnt, const s32 *shard_start, \
				 u32 shard_start_cnt), (cpu_to_cid, cpu_to_cid_cnt, shard_start, shard_start_cnt)) \
	X(scx_bpf_sub_revoke, (u64 cgroup_id, u64 caps, const struct scx_cmask *cmask), (cgroup_id, caps, cmask))

SCHEDLAB_CID_HOST_FNS(DECL_HOST)
SCHEDLAB_CID_HOST_VOID_FNS(DECL_HOST_VOID)
SCHEDLAB_CID_HOST_FNS(FWD)
SCHEDLAB_CID_HOST_VOID_FNS(FWD_VOID)

bool scx_bpf_sub_dispatch___compat(u64 cgroup_id)
{
	return h_scx_bpf_sub_dispatch(cgroup_id);
}

void scx_bpf_cid_override___compat(const s32 *cpu_to_cid, u32 cpu_to_cid_cnt, const s32 *shard_start,
				   u32 shard_start_cnt)
{
	h_scx_bpf_cid_override(cpu_to_cid, cpu_to_cid_cnt, shard_start, shard_start_cnt);
}

/* The reason is formatted as scx_bpf_exit_bstr() formats its message. */
s32 scx_bpf_sub_kill_bstr(u64 cgroup_id, char *fmt, unsigned long long *data, u32 data__sz)
{
	char msg[BSTR_BUF];

	bstr_format(msg, sizeof(msg), fmt ? fmt : "", data, data__sz);
	return h_schedlab_sub_kill(cgroup_id, msg);
}
