/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * What a scheduler reads of the cgroup tree (tests/integration/ext_cgroup.rs):
 * css iterator walks from ops.init(), struct cgroup's level / kn->id /
 * ancestors[], bpf_cgroup_ancestor(), CGRP_STORAGE created in
 * ops.cgroup_init() and found again from ops.init_task(), and
 * args->cgroup == scx_bpf_task_cgroup() == p->cgroups->dfl_cgrp.
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

extern int bpf_iter_css_new(struct bpf_iter_css *it, struct cgroup_subsys_state *start, unsigned int flags) __weak __ksym;
extern struct cgroup_subsys_state *bpf_iter_css_next(struct bpf_iter_css *it) __weak __ksym;
extern void bpf_iter_css_destroy(struct bpf_iter_css *it) __weak __ksym;

struct cg_ctx {
	u64 weight;
	u64 quota_us;
};

struct {
	__uint(type, BPF_MAP_TYPE_CGRP_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct cg_ctx);
} cg_ctx SEC(".maps");

u64 pre_ids[16];
u64 post_ids[16];
u64 child_ids[16];
u64 up_ids[16];
u64 anc_ids[16];
u64 nr_pre;
u64 nr_post;
u64 nr_child;
u64 nr_up;
u64 nr_anc;
u64 deep_level;
u64 anc_beyond_null;
u64 tasks_seen;
u64 task_cgroup_mismatch;
u64 storage_missing;
u64 weight_sum;
u64 exits;

/* Set by the test: hand bpf_cgroup_release() something that is no cgroup. */
const volatile bool pass_bad_cgroup;

static u64 walk(struct cgroup *start, u32 order, u64 *ids)
{
	struct cgroup_subsys_state *pos;
	u64 n = 0;

	bpf_for_each(css, pos, &start->self, order) {
		if (n < 16)
			ids[n++] = pos->cgroup->kn->id;
	}
	return n;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(cg_init)
{
	struct cgroup *root, *deep, *a;
	int lvl;

	if (pass_bad_cgroup)
		bpf_cgroup_release((struct cgroup *)&nr_pre);
	root = bpf_cgroup_from_id(1);
	if (!root)
		return -2;
	nr_pre = walk(root, BPF_CGROUP_ITER_DESCENDANTS_PRE, pre_ids);
	nr_post = walk(root, BPF_CGROUP_ITER_DESCENDANTS_POST, post_ids);
	nr_child = walk(root, BPF_CGROUP_ITER_CHILDREN, child_ids);
	bpf_cgroup_release(root);
	if (!nr_pre || nr_pre > 16)
		return -3;

	/* The last cgroup of the pre-order walk: its ancestors, up and by index. */
	deep = bpf_cgroup_from_id(pre_ids[nr_pre - 1]);
	if (!deep)
		return -4;
	nr_up = walk(deep, BPF_CGROUP_ITER_ANCESTORS_UP, up_ids);
	deep_level = deep->level;
	bpf_for(lvl, 0, deep->level + 1) {
		a = bpf_cgroup_ancestor(deep, lvl);
		if (!a)
			break;
		if (a != deep->ancestors[lvl])
			anc_beyond_null += 100;
		if (nr_anc < 16)
			anc_ids[nr_anc++] = a->kn->id;
		bpf_cgroup_release(a);
	}
	a = bpf_cgroup_ancestor(deep, deep->level + 1);
	if (!a)
		anc_beyond_null += 1;
	else
		bpf_cgroup_release(a);
	bpf_cgroup_release(deep);
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(cg_cgroup_init, struct cgroup *cgrp, struct scx_cgroup_init_args *args)
{
	struct cg_ctx *c = bpf_cgrp_storage_get(&cg_ctx, cgrp, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!c)
		return -12;
	c->weight = args->weight;
	c->quota_us = args->bw_quota_us;
	return 0;
}

void BPF_STRUCT_OPS(cg_cgroup_exit, struct cgroup *cgrp)
{
	bpf_cgrp_storage_delete(&cg_ctx, cgrp);
	exits++;
}

s32 BPF_STRUCT_OPS(cg_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	struct cgroup *cg = scx_bpf_task_cgroup(p);
	struct cg_ctx *c;

	tasks_seen++;
	if (!cg)
		return -2;
	if (cg != args->cgroup || p->cgroups->dfl_cgrp != cg)
		task_cgroup_mismatch++;
	c = bpf_cgrp_storage_get(&cg_ctx, cg, 0, 0);
	if (!c)
		storage_missing++;
	else
		weight_sum += c->weight;
	bpf_cgroup_release(cg);
	return 0;
}

SCX_OPS_DEFINE(cg_ops,
	       .init			= (void *)cg_init,
	       .init_task		= (void *)cg_init_task,
	       .cgroup_init		= (void *)cg_cgroup_init,
	       .cgroup_exit		= (void *)cg_cgroup_exit,
	       .name			= "cgroups");
