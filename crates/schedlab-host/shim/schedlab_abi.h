/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The interface between a compiled scheduler object and the host
 * (crates/schedlab-host/src/loader.rs mirrors these structs).
 *
 * A scheduler .so is three translation units: the scheduler's own .bpf.c,
 * the descriptor table the loader generates for it (host/scan.rs), and the
 * runtime (runtime.c). It exports one symbol, schedlab_attach(): the host
 * passes a resolver for its functions and receives the module description.
 */
#ifndef __SCHEDLAB_ABI_H__
#define __SCHEDLAB_ABI_H__

#define SCHEDLAB_ABI_VERSION 5

/* One `SEC(".maps")` definition. */
struct schedlab_map_desc {
	const char *name;
	void *map;
	u32 type;
	u32 key_size;
	u32 value_size;
	u32 max_entries;
	u32 map_flags;
	u32 _pad;
};

/*
 * A special field of map `map`'s value type (a kptr, bpf_spin_lock,
 * bpf_timer, list or rbtree head, refcount, ...): the kernel's btf_record
 * fields, which map updates copy around (copy_map_value()).
 */
struct schedlab_map_field {
	u32 map;
	u32 offset;
	u32 size;
};

/* A static initializer of an ARRAY_OF_MAPS: outer[slot] = inner. */
struct schedlab_map_slot {
	u32 outer;
	u32 slot;
	void *inner;
};

enum schedlab_rodata_kind {
	SCHEDLAB_RO_BOOL = 1,
	SCHEDLAB_RO_SIGNED = 2,
	SCHEDLAB_RO_UNSIGNED = 3,
	SCHEDLAB_RO_CHAR = 4,
	SCHEDLAB_RO_OTHER = 5,
};

/* One `const volatile` global (a skeleton's rodata). */
struct schedlab_rodata_desc {
	const char *name;
	void *ptr;
	u32 size;
	u32 elem_size;
	u32 kind;
	u32 nr_elems; /* 0 for a scalar; all elements of a 2-D array */
	u32 row_elems; /* elements per row of a 2-D array, else 0 */
};

struct schedlab_ops_desc {
	const char *name;
	/*
	 * A struct sched_ext_ops_cid when cid is 1 (the shared prefix lines
	 * up). ABI 5: the cid form; address_space(1) globals are arena globals.
	 */
	struct sched_ext_ops *ops;
	u32 cid;
};

/* A SEC("syscall") program: int prog(void *ctx). */
struct schedlab_prog_desc {
	const char *name;
	void *fn;
};

struct schedlab_module {
	u32 abi_version;
	u32 sizeof_ops;
	u32 sizeof_task;
	u32 nr_maps;
	u32 nr_map_slots;
	u32 nr_rodata;
	u32 nr_ops;
	u32 nr_progs;
	const struct schedlab_map_desc *maps;
	const struct schedlab_map_slot *map_slots;
	const struct schedlab_rodata_desc *rodata;
	const struct schedlab_ops_desc *ops;
	const struct schedlab_prog_desc *progs;
	/* Filled by the runtime. */
	/* Spin locks and RCU sections still held; resets them. Called after each op. */
	u32 (*end_call)(void);
	/* Writable scalar globals (.bss/.data), same layout as rodata. */
	u32 nr_globals;
	const struct schedlab_rodata_desc *globals;
	/* Special fields of map values. */
	u32 nr_map_fields;
	const struct schedlab_map_field *map_fields;
	/*
	 * Filled by the runtime: its byte 0 set once a call may have left
	 * something for end_call (a lock taken, an RCU section entered, an
	 * object dropped), so the host skips end_call after the calls that did
	 * not. The host sets byte 1 for its own end-of-call work; end_call
	 * clears the word.
	 */
	u32 *end_call_pending;
};

/* Defined by the generated descriptor unit. */
extern struct schedlab_module __schedlab_module;

#endif /* __SCHEDLAB_ABI_H__ */
