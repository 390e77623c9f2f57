/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * badarg: a global-FIFO scheduler that, once, passes ops.enqueue() a bad
 * argument of the kind `mode` selects. The kernel's verifier or argument
 * checks would refuse these; natively the host must eject the scheduler
 * (SCX_EXIT_ERROR) instead of crashing.
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

const volatile u32 mode;

struct locked {
	struct bpf_spin_lock lock;
	u64 n;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct locked);
} arr SEC(".maps");

u64 not_an_object[64];
static bool done;

void BPF_STRUCT_OPS(badarg_enqueue, struct task_struct *p, u64 enq_flags)
{
	u32 key = 0;
	struct locked *l;

	if (!done) {
		done = true;
		switch (mode) {
		case 0:
			scx_bpf_dsq_insert((struct task_struct *)not_an_object, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, 0);
			break;
		case 1:
			scx_bpf_dsq_insert(NULL, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, 0);
			break;
		case 2:
			bpf_cpumask_weight((const struct cpumask *)not_an_object);
			break;
		case 3:
			bpf_map_lookup_elem(not_an_object, &key);
			break;
		case 4:
			l = bpf_map_lookup_elem(&arr, &key);
			if (l)
				bpf_spin_lock(&l->lock);	/* and never unlock */
			break;
		case 5:
			bpf_cpumask_release((struct bpf_cpumask *)not_an_object);
			break;
		case 6: {
			/* A mask used, released, then used again. */
			struct bpf_cpumask *m = bpf_cpumask_create();

			if (m) {
				bpf_cpumask_test_cpu(0, (const struct cpumask *)m);
				bpf_cpumask_release(m);
				bpf_cpumask_weight((const struct cpumask *)m);
			}
			break;
		}
		}
	}
	scx_bpf_dsq_insert(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
}

SCX_OPS_DEFINE(badarg_ops,
	       .enqueue = (void *)badarg_enqueue,
	       .name = "badarg");
