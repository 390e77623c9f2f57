// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * scx-load: a minimal sched_ext loader for schedlab's real-kernel runs.
 *
 *   scx-load OBJ.bpf.o [--profile FILE] [NAME=VALUE ...]
 *   scx-load --link OUT.bpf.o IN.bpf.o...
 *
 * Opens the BPF object, fills scx's enum variables (`const volatile u64
 * __SCX_NAME`) from the running kernel's BTF as scx_utils' enum init and
 * the kernel's SCX_ENUM_INIT() do, applies a resolved loader profile (the
 * line format of schedlab's schedlab_host::profile::wire: array resizes,
 * rodata/.data/.bss writes, ops.flags, map updates, writes into members
 * of map elements (looked up, patched, written back), SEC("syscall")
 * programs run with their argument struct on a given CPU, before and right
 * after the attach), sets read-only options (const volatile globals),
 * loads it (the kernel's verifier checks every program) and attaches its
 * struct_ops map. It then waits for SIGINT/SIGTERM, or for the scheduler to
 * exit by itself (its user_exit_info `uei` records a kind), detaches, and
 * prints what user space learns after the detach:
 *
 *   SCX_ATTACHED <ops map>
 *   SCX_EXIT kind=<scx_exit_kind> code=<exit_code> reason=<...> msg=<...>
 *   SCX_VAR <name>=<value>       every 8-byte global of .bss/.data (counters)
 *
 * With --link it is the BPF static linker (libbpf's bpf_linker, what
 * `bpftool gen object` runs), so that a multi-object scheduler links with
 * this libbpf rather than the host's bpftool (Debian's 7.1 / libbpf 1.1
 * fails on kfunc externs declared in several objects: "failed to resolve
 * size of underlying type").
 *
 * Built statically against libbpf (>= 1.4 for sleepable struct_ops).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int print_fn(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, args);
}

/* The DATASEC of an internal map (.bss, .data, .rodata). */
static const struct btf_type *datasec(struct bpf_object *obj, struct bpf_map *map)
{
	struct btf *btf = bpf_object__btf(obj);
	__u32 id;

	if (!btf || !bpf_map__is_internal(map))
		return NULL;
	id = bpf_map__btf_value_type_id(map);
	if (!id)
		return NULL;
	const struct btf_type *t = btf__type_by_id(btf, id);
	return t && btf_is_datasec(t) ? t : NULL;
}

/* Finds global `name`: its map, offset and size. */
static struct bpf_map *find_var(struct bpf_object *obj, const char *name, __u32 *off, __u32 *size)
{
	struct btf *btf = bpf_object__btf(obj);
	struct bpf_map *map;

	bpf_object__for_each_map(map, obj) {
		const struct btf_type *sec = datasec(obj, map);
		if (!sec)
			continue;
		const struct btf_var_secinfo *vs = btf_var_secinfos(sec);
		for (int i = 0; i < btf_vlen(sec); i++, vs++) {
			const struct btf_type *var = btf__type_by_id(btf, vs->type);
			if (strcmp(btf__name_by_offset(btf, var->name_off), name) == 0) {
				*off = vs->offset;
				*size = vs->size;
				return map;
			}
		}
	}
	return NULL;
}

static int set_option(struct bpf_object *obj, const char *kv)
{
	char name[128];
	const char *eq = strchr(kv, '=');
	__u32 off, size;
	size_t rsz;

	if (!eq || eq - kv >= (long)sizeof(name)) {
		fprintf(stderr, "scx-load: option %s: expected NAME=VALUE\n", kv);
		return -1;
	}
	memcpy(name, kv, eq - kv);
	name[eq - kv] = 0;
	struct bpf_map *map = find_var(obj, name, &off, &size);
	char *data = map ? bpf_map__initial_value(map, &rsz) : NULL;
	if (!data || off + size > rsz) {
		fprintf(stderr, "scx-load: option %s: no such global\n", name);
		return -1;
	}
	unsigned long long v = strcmp(eq + 1, "true") == 0 ? 1 : strcmp(eq + 1, "false") == 0 ? 0 : strtoull(eq + 1, NULL, 0);
	memcpy(data + off, &v, size < 8 ? size : 8); /* little-endian */
	return 0;
}


/* ---- the loader profile (schedlab-profile 1) ---- */

#define MAX_LINES 65536

struct profile {
	char *lines[MAX_LINES];
	int n;
	const char *path;
};

static int load_profile(struct profile *p, const char *path)
{
	FILE *f = fopen(path, "r");
	char buf[65536];

	p->n = 0;
	p->path = path;
	if (!f) {
		fprintf(stderr, "scx-load: profile %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(buf, sizeof(buf), f)) {
		size_t l = strlen(buf);
		while (l && (buf[l - 1] == '\n' || buf[l - 1] == '\r'))
			buf[--l] = 0;
		if (!l)
			continue;
		if (p->n == 0 && strcmp(buf, "schedlab-profile 1")) {
			fprintf(stderr, "scx-load: profile %s: first line is not `schedlab-profile 1`\n", path);
			fclose(f);
			return -1;
		}
		if (p->n >= MAX_LINES) {
			fprintf(stderr, "scx-load: profile %s: more than %d lines\n", path, MAX_LINES);
			fclose(f);
			return -1;
		}
		p->lines[p->n++] = strdup(buf);
	}
	fclose(f);
	return 0;
}

/* Hex digits into bytes ("-" is empty); returns the length or -1. */
static long unhex(const char *h, unsigned char *out, size_t cap)
{
	size_t n = 0;

	if (strcmp(h, "-") == 0)
		return 0;
	while (h[0] && h[1]) {
		unsigned int b;
		if (n >= cap || sscanf(h, "%2x", &b) != 1)
			return -1;
		out[n++] = b;
		h += 2;
	}
	return h[0] ? -1 : (long)n;
}

/* The type a BTF id names once modifiers and typedefs are skipped. */
static const struct btf_type *resolved(const struct btf *btf, __u32 id, __u32 *out_id)
{
	__s32 r = btf__resolve_type(btf, id);
	if (r < 0)
		return NULL;
	if (out_id)
		*out_id = r;
	return btf__type_by_id(btf, r);
}

/*
 * Walks `path` from type `id` of `btf`: any of `.member` (struct members,
 * by name) and `[N]` (array elements),
 * e.g. `[3].neighbor_ids[129]` or `.prox_maps[2].llcs`. Adds the byte
 * offset of what it reaches to *off and returns its type (its id in
 * *out_id), or NULL when a step does not exist.
 */
static const struct btf_type *walk_path(const struct btf *btf, __u32 id, const char *path, __u32 *off, __u32 *out_id)
{
	__u32 tid;
	const struct btf_type *t = resolved(btf, id, &tid);
	const char *rest = path;

	while (*rest && t) {
		if (*rest == '[') {
			/* An array element. */
			char *end;
			unsigned long n = strtoul(rest + 1, &end, 10);
			if (*end != ']' || !btf_is_array(t) || n >= btf_array(t)->nelems)
				return NULL;
			__s64 es = btf__resolve_size(btf, btf_array(t)->type);
			if (es <= 0)
				return NULL;
			*off += (__u32)(n * es);
			t = resolved(btf, btf_array(t)->type, &tid);
			rest = end + 1;
			continue;
		}
		/* A struct member, by name. */
		char mname[256];
		size_t ml = strcspn(rest + 1, ".[");
		if (*rest != '.' || ml >= sizeof(mname) || !btf_is_composite(t))
			return NULL;
		memcpy(mname, rest + 1, ml);
		mname[ml] = 0;
		const struct btf_member *m = btf_members(t);
		int found = 0;
		for (int k = 0; k < btf_vlen(t); k++, m++) {
			if (strcmp(btf__name_by_offset(btf, m->name_off), mname) == 0) {
				*off += btf_member_bit_offset(t, k) / 8;
				t = resolved(btf, m->type, &tid);
				found = 1;
				break;
			}
		}
		if (!found)
			return NULL;
		rest += 1 + ml;
	}
	if (t && out_id)
		*out_id = tid;
	return t;
}

/*
 * Where `target` lives: a global NAME, then a path (walk_path), e.g.
 * cpdom_ctxs[3].neighbor_ids[129]; with element INDEX (-1: none) of an
 * array at the end. Sets the map, the byte offset and the size of what is
 * written.
 */
static struct bpf_map *locate(struct bpf_object *obj, const char *target, long index, __u32 *off, __u32 *size)
{
	struct btf *btf = bpf_object__btf(obj);
	struct bpf_map *map;
	char base[256];
	size_t bl = strcspn(target, ".[");

	if (bl >= sizeof(base))
		return NULL;
	memcpy(base, target, bl);
	base[bl] = 0;
	bpf_object__for_each_map(map, obj) {
		const struct btf_type *sec = datasec(obj, map);
		if (!sec)
			continue;
		const struct btf_var_secinfo *vs = btf_var_secinfos(sec);
		for (int i = 0; i < btf_vlen(sec); i++, vs++) {
			const struct btf_type *var = btf__type_by_id(btf, vs->type);
			if (strcmp(btf__name_by_offset(btf, var->name_off), base))
				continue;
			__u32 o = vs->offset, tid;
			const struct btf_type *t = walk_path(btf, var->type, target + bl, &o, &tid);
			if (!t)
				return NULL;
			if (index >= 0) {
				if (!btf_is_array(t))
					return NULL;
				const struct btf_array *a = btf_array(t);
				__s64 es = btf__resolve_size(btf, a->type);
				if (es <= 0)
					return NULL;
				/* A resized array may hold more than its BTF length. */
				*off = o + (__u32)(index * es);
				*size = es;
			} else {
				__s64 sz = btf__resolve_size(btf, tid);
				if (sz <= 0)
					return NULL;
				*off = o;
				*size = sz;
			}
			return map;
		}
	}
	return NULL;
}

/* Element size of global array `name`, for a resize. */
static __s64 elem_size(struct bpf_object *obj, const char *name)
{
	__u32 off, size;
	struct btf *btf = bpf_object__btf(obj);
	struct bpf_map *map = locate(obj, name, 0, &off, &size);
	(void)btf;
	return map ? (__s64)size : -1;
}

/* Little-endian integer or raw bytes into the map's initial value. */
static int write_bytes(struct bpf_object *obj, const char *target, long index, const void *src, size_t len, int is_int)
{
	__u32 off, size;
	size_t rsz;
	struct bpf_map *map = locate(obj, target, index, &off, &size);
	char *data = map ? bpf_map__initial_value(map, &rsz) : NULL;

	if (!map) {
		fprintf(stderr, "scx-load: profile: no global %s%s in the object\n", target, index >= 0 ? "[...]" : "");
		return -1;
	}
	if (!data || off + size > rsz) {
		fprintf(stderr, "scx-load: profile: %s[%ld] lies outside its map (%zu bytes; resize it first)\n", target, index, rsz);
		return -1;
	}
	if (is_int) {
		memcpy(data + off, src, size < 8 ? size : 8);
	} else {
		memset(data + off, 0, size);
		memcpy(data + off, src, len < size ? len : size);
	}
	return 0;
}

/* bpf_map__set_value_size() of the .data.NAME / .bss.NAME map holding array NAME. */
static int resize_array(struct bpf_object *obj, const char *name, unsigned long n)
{
	char sec[300];
	struct bpf_map *map = NULL, *m;
	__s64 es = elem_size(obj, name);

	if (es <= 0) {
		fprintf(stderr, "scx-load: profile: resize %s: no such global array\n", name);
		return -1;
	}
	bpf_object__for_each_map(m, obj) {
		const struct btf_type *ds = datasec(obj, m);
		if (!ds)
			continue;
		const char *sname = btf__name_by_offset(bpf_object__btf(obj), ds->name_off);
		snprintf(sec, sizeof(sec), ".data.%s", name);
		if (strcmp(sname, sec) == 0)
			map = m;
		snprintf(sec, sizeof(sec), ".bss.%s", name);
		if (strcmp(sname, sec) == 0)
			map = m;
		snprintf(sec, sizeof(sec), ".rodata.%s", name);
		if (strcmp(sname, sec) == 0)
			map = m;
	}
	if (!map) {
		fprintf(stderr, "scx-load: profile: resize %s: it is not alone in a .data.%s / .bss.%s / .rodata.%s section (RESIZABLE_ARRAY)\n", name, name, name, name);
		return -1;
	}
	int err = bpf_map__set_value_size(map, es * (n ? n : 1));
	if (err) {
		fprintf(stderr, "scx-load: profile: resize %s to %lu: %s\n", name, n, strerror(-err));
		return -1;
	}
	return 0;
}

/* The struct_ops map's `flags` member, as a loader sets skel->struct_ops.X->flags. */
static int set_ops_flags(struct bpf_object *obj, struct bpf_map *ops, int replace, unsigned long long bits)
{
	struct btf *btf = bpf_object__btf(obj);
	size_t sz;
	char *data = bpf_map__initial_value(ops, &sz);
	const struct btf_type *t = btf ? resolved(btf, bpf_map__btf_value_type_id(ops), NULL) : NULL;

	if (!data || !t || !btf_is_composite(t)) {
		fprintf(stderr, "scx-load: profile: cannot reach %s's flags\n", bpf_map__name(ops));
		return -1;
	}
	const struct btf_member *m = btf_members(t);
	for (int k = 0; k < btf_vlen(t); k++, m++) {
		if (strcmp(btf__name_by_offset(btf, m->name_off), "flags"))
			continue;
		__u32 o = btf_member_bit_offset(t, k) / 8;
		unsigned long long v = 0;
		if (o + 8 > sz)
			return -1;
		memcpy(&v, data + o, 8);
		v = replace ? bits : (v | bits);
		memcpy(data + o, &v, 8);
		return 0;
	}
	fprintf(stderr, "scx-load: profile: %s has no flags member\n", bpf_map__name(ops));
	return -1;
}

/* The struct_ops map the profile names (`ops NAME`), else the only one. */
static struct bpf_map *pick_ops(struct bpf_object *obj, struct profile *p)
{
	struct bpf_map *map, *ops = NULL;
	const char *want = NULL;

	for (int i = 0; p && i < p->n; i++)
		if (strncmp(p->lines[i], "ops ", 4) == 0)
			want = p->lines[i] + 4;
	bpf_object__for_each_map(map, obj) {
		if (bpf_map__type(map) != BPF_MAP_TYPE_STRUCT_OPS)
			continue;
		if (want && strcmp(bpf_map__name(map), want))
			continue;
		if (!ops)
			ops = map;
	}
	if (!ops && want)
		fprintf(stderr, "scx-load: profile: no struct_ops map %s\n", want);
	return ops;
}

/* Everything of the profile that happens before bpf_object__load(). */
static int profile_before_load(struct bpf_object *obj, struct bpf_map *ops, struct profile *p)
{
	static unsigned char buf[1 << 16];

	for (int i = 1; i < p->n; i++) {
		char *l = p->lines[i], a[256], b[65536];
		long idx;
		unsigned long n;
		long long v;
		unsigned long long bits;

		if (sscanf(l, "resize %255s %lu", a, &n) == 2) {
			if (resize_array(obj, a, n))
				return -1;
		} else if (sscanf(l, "maxent %255s %lu", a, &n) == 2) {
			struct bpf_map *m = bpf_object__find_map_by_name(obj, a);
			if (!m || bpf_map__set_max_entries(m, n)) {
				fprintf(stderr, "scx-load: profile: maxent %s: %s\n", a, m ? strerror(errno) : "no such map");
				return -1;
			}
		} else if (sscanf(l, "write %255s %ld %lld", a, &idx, &v) == 3) {
			if (write_bytes(obj, a, idx, &v, 8, 1))
				return -1;
		} else if (sscanf(l, "writes %255s %65535s", a, b) == 2) {
			long len = unhex(b, buf, sizeof(buf));
			if (len < 0 || write_bytes(obj, a, -1, buf, len, 0))
				return -1;
		} else if (sscanf(l, "flags replace %llx", &bits) == 1) {
			if (set_ops_flags(obj, ops, 1, bits))
				return -1;
		} else if (sscanf(l, "flags add %llx", &bits) == 1) {
			if (set_ops_flags(obj, ops, 0, bits))
				return -1;
		} else if (strncmp(l, "map ", 4) && strncmp(l, "run ", 4) && strncmp(l, "ops ", 4) && strncmp(l, "inner ", 6) &&
			   strncmp(l, "member ", 7) && strncmp(l, "arena_lib ", 10) && strncmp(l, "arena_node ", 11)) {
			fprintf(stderr, "scx-load: profile %s: line %d: cannot read `%s`\n", p->path, i + 1, l);
			return -1;
		}
	}
	return 0;
}

/* Map updates from user space, after the load. */
static int profile_maps(struct bpf_object *obj, struct profile *p)
{
	static unsigned char key[4096], val[1 << 16];

	for (int i = 1; i < p->n; i++) {
		char name[256], kh[8200], vh[1 << 17];
		if (sscanf(p->lines[i], "map %255s %8199s %131071s", name, kh, vh) != 3)
			continue;
		struct bpf_map *m = bpf_object__find_map_by_name(obj, name);
		long kl = unhex(kh, key, sizeof(key)), vl = unhex(vh, val, sizeof(val));
		if (!m || kl < 0 || vl < 0) {
			fprintf(stderr, "scx-load: profile: map %s: %s\n", name, m ? "bad bytes" : "no such map");
			return -1;
		}
		int err = bpf_map_update_elem(bpf_map__fd(m), key, val, 0);
		if (err) {
			fprintf(stderr, "scx-load: profile: bpf_map_update_elem(%s): %s\n", name, strerror(errno));
			return -1;
		}
	}
	/* Maps created into map-in-maps, after the updates. */
	for (int i = 1; i < p->n; i++) {
		char outer[256];
		unsigned slot, type, ks, vs, max;
		if (sscanf(p->lines[i], "inner %255s %u %u %u %u %u", outer, &slot, &type, &ks, &vs, &max) != 6)
			continue;
		struct bpf_map *m = bpf_object__find_map_by_name(obj, outer);
		if (!m) {
			fprintf(stderr, "scx-load: profile: inner %s: no such map\n", outer);
			return -1;
		}
		int fd = bpf_map_create(type, NULL, ks, vs, max, NULL);
		if (fd < 0) {
			fprintf(stderr, "scx-load: profile: bpf_map_create(type %u) for %s[%u]: %s\n", type, outer, slot, strerror(errno));
			return -1;
		}
		int err = bpf_map_update_elem(bpf_map__fd(m), &slot, &fd, 0);
		close(fd);
		if (err) {
			fprintf(stderr, "scx-load: profile: bpf_map_update_elem(%s, %u): %s\n", outer, slot, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/*
 * Writes into members of map elements (`member MAP KEY CPU PATH HEX`),
 * after the map updates and map-in-map creations and before the runs of
 * the load phase, as the simulation applies them: the element is looked
 * up, the bytes go to PATH's offset inside the map's value type (CPU's
 * copy of a per-CPU map) and the element is written back.
 */
static int profile_members(struct bpf_object *obj, struct profile *p)
{
	static unsigned char bytes[1 << 16];
	const struct btf *btf = bpf_object__btf(obj);
	int ncpus = libbpf_num_possible_cpus(), done = 0;

	for (int i = 1; i < p->n; i++) {
		char name[256], path[512], hx[1 << 17];
		unsigned int key;
		int cpu;
		if (sscanf(p->lines[i], "member %255s %u %d %511s %131071s", name, &key, &cpu, path, hx) != 5)
			continue;
		struct bpf_map *m = bpf_object__find_map_by_name(obj, name);
		long len = unhex(hx, bytes, sizeof(bytes));
		if (!m || len < 0) {
			fprintf(stderr, "scx-load: profile: member %s%s: %s\n", name, path, m ? "bad bytes" : "no such map");
			return -1;
		}
		__u32 vid = bpf_map__btf_value_type_id(m), off = 0, tid = 0;
		const struct btf_type *t = btf && vid ? walk_path(btf, vid, path, &off, &tid) : NULL;
		__s64 size = t ? btf__resolve_size(btf, tid) : -1;
		if (size <= 0) {
			fprintf(stderr, "scx-load: profile: member %s%s: no such member in the map's value type%s\n", name, path,
				vid ? "" : " (the map has no BTF value type)");
			return -1;
		}
		__u32 vs = bpf_map__value_size(m);
		if (len > size || off + len > vs) {
			fprintf(stderr, "scx-load: profile: member %s%s: %ld bytes do not fit its %lld bytes at offset %u of a %u-byte value\n", name, path,
				len, (long long)size, off, vs);
			return -1;
		}
		if (bpf_map__key_size(m) != sizeof(key)) {
			fprintf(stderr, "scx-load: profile: member %s%s: the map's key is %u bytes, not a u32\n", name, path, bpf_map__key_size(m));
			return -1;
		}
		enum bpf_map_type ty = bpf_map__type(m);
		int percpu = ty == BPF_MAP_TYPE_PERCPU_ARRAY || ty == BPF_MAP_TYPE_PERCPU_HASH || ty == BPF_MAP_TYPE_LRU_PERCPU_HASH;
		/* A per-CPU map reads and writes every possible CPU's copy, each 8-byte aligned. */
		size_t stride = percpu ? ((vs + 7) & ~7u) : vs;
		if (percpu && (ncpus <= 0 || cpu < 0 || cpu >= ncpus)) {
			fprintf(stderr, "scx-load: profile: member %s%s: CPU %d is not one of the %d possible CPUs\n", name, path, cpu, ncpus);
			return -1;
		}
		unsigned char *val = calloc(percpu ? ncpus : 1, stride);
		if (!val) {
			fprintf(stderr, "scx-load: profile: member %s%s: out of memory\n", name, path);
			return -1;
		}
		if (bpf_map_lookup_elem(bpf_map__fd(m), &key, val)) {
			fprintf(stderr, "scx-load: profile: member %s%s: bpf_map_lookup_elem(key %u): %s\n", name, path, key, strerror(errno));
			free(val);
			return -1;
		}
		memcpy(val + (percpu ? (size_t)cpu * stride : 0) + off, bytes, len);
		int err = bpf_map_update_elem(bpf_map__fd(m), &key, val, 0);
		free(val);
		if (err) {
			fprintf(stderr, "scx-load: profile: member %s%s: bpf_map_update_elem(key %u): %s\n", name, path, key, strerror(errno));
			return -1;
		}
		done++;
	}
	if (done)
		printf("SCX_PROFILE_MEMBERS %d\n", done);
	return 0;
}

/* The SEC("syscall") programs of one phase, each on its CPU. */
static int profile_runs(struct bpf_object *obj, struct profile *p, const char *phase)
{
	static unsigned char ctx[1 << 16];
	cpu_set_t all, one;

	sched_getaffinity(0, sizeof(all), &all);
	for (int i = 1; i < p->n; i++) {
		char ph[16], prog[256], hx[1 << 17];
		int cpu, fail;
		if (sscanf(p->lines[i], "run %15s %255s %d %d %131071s", ph, prog, &cpu, &fail, hx) != 5 || strcmp(ph, phase))
			continue;
		struct bpf_program *pr = bpf_object__find_program_by_name(obj, prog);
		long len = unhex(hx, ctx, sizeof(ctx));
		if (!pr || len < 0) {
			fprintf(stderr, "scx-load: profile: run %s: %s\n", prog, pr ? "bad bytes" : "no such program");
			return -1;
		}
		/* A syscall program runs on the CPU of the thread that runs it. */
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		if (sched_setaffinity(0, sizeof(one), &one))
			fprintf(stderr, "scx-load: profile: run %s: cannot move to CPU %d: %s\n", prog, cpu, strerror(errno));
		LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = len ? ctx : NULL, .ctx_size_in = len);
		int err = bpf_prog_test_run_opts(bpf_program__fd(pr), &opts);
		sched_setaffinity(0, sizeof(all), &all);
		if (err || (fail && opts.retval)) {
			fprintf(stderr, "scx-load: profile: %s on CPU %d: %s (returned %d)\n", prog, cpu, err ? strerror(errno) : "failed", (int)opts.retval);
			if (err || fail)
				return -1;
		}
		printf("SCX_PROFILE_RUN %s phase=%s cpu=%d ret=%d\n", prog, phase, cpu, (int)opts.retval);
	}
	return 0;
}

/* One SEC("syscall") run of the arena library on CPU 0 (its loader's). */
static int arena_run(struct bpf_object *obj, const char *prog, void *ctx, size_t len)
{
	struct bpf_program *pr = bpf_object__find_program_by_name(obj, prog);
	/* A syscall program writes its context back into ctx_in (ctx_out is refused). */
	LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = ctx, .ctx_size_in = len);

	if (!pr) {
		fprintf(stderr, "scx-load: profile: arena_lib: no program %s\n", prog);
		return -1;
	}
	if (bpf_prog_test_run_opts(bpf_program__fd(pr), &opts) || opts.retval) {
		fprintf(stderr, "scx-load: profile: arena_lib: %s: %s (returned %d)\n", prog, strerror(errno), (int)opts.retval);
		return -1;
	}
	return 0;
}

/*
 * scx_arena's ArenaLib::setup(): arena_init with sizeof(TYPE) as the
 * object's BTF has it, arena_topology_init, then per topology node a bitmap
 * from arena_alloc_mask, filled through the arena's mapping, linked in by
 * arena_topology_node_init.
 */
static int profile_arena_lib(struct bpf_object *obj, struct profile *p)
{
	for (int i = 1; i < p->n; i++) {
		unsigned long long sp, al;
		unsigned int m[5];
		int at = 0;
		if (sscanf(p->lines[i], "arena_lib %llu %llu %u %u %u %u %u %n", &sp, &al, &m[0], &m[1], &m[2], &m[3], &m[4], &at) < 7 || !at)
			continue;
		const char *ty = p->lines[i] + at;
		int kind = BTF_KIND_TYPEDEF;
		if (!strncmp(ty, "struct ", 7))
			kind = BTF_KIND_STRUCT, ty += 7;
		else if (!strncmp(ty, "union ", 6))
			kind = BTF_KIND_UNION, ty += 6;
		const struct btf *btf = bpf_object__btf(obj);
		__s32 id = btf ? btf__find_by_name_kind(btf, ty, kind) : -1;
		__s64 size = id > 0 ? btf__resolve_size(btf, id) : -1;
		if (size < 0) {
			fprintf(stderr, "scx-load: profile: arena_lib: no type %s in the object's BTF\n", p->lines[i] + at);
			return -1;
		}
		__u64 init[3] = { sp, (__u64)size, al };
		if (arena_run(obj, "arena_init", init, sizeof(init)) || arena_run(obj, "arena_topology_init", m, sizeof(m)))
			return -1;
		for (int j = 1; j < p->n; j++) {
			static unsigned char words[1 << 12];
			char hx[1 << 13];
			unsigned long long nid;
			if (sscanf(p->lines[j], "arena_node %llu %8191s", &nid, hx) != 2)
				continue;
			long len = unhex(hx, words, sizeof(words));
			__u64 bitmap = 0;
			if (len < 0 || arena_run(obj, "arena_alloc_mask", &bitmap, sizeof(bitmap)))
				return -1;
			memcpy((void *)(unsigned long)bitmap, words, len);
			__u64 node[3] = { bitmap, 0, nid };
			if (arena_run(obj, "arena_topology_node_init", node, sizeof(node)))
				return -1;
		}
		printf("SCX_PROFILE_ARENA_LIB task_ctx=%lld\n", (long long)size);
	}
	return 0;
}

/*
 * scx's enum variables: every `__SCX_NAME` global takes the value of the
 * enumerator SCX_NAME in the running kernel's BTF; names the kernel lacks
 * stay 0 (as __COMPAT_ENUM_OR_ZERO gives).
 */
static void fill_scx_enums(struct bpf_object *obj)
{
	struct btf *vm = btf__load_vmlinux_btf(), *btf = bpf_object__btf(obj);
	struct bpf_map *map;
	int filled = 0;

	if (!vm || !btf) {
		fprintf(stderr, "scx-load: no kernel BTF; scx's enum variables stay 0\n");
		return;
	}
	bpf_object__for_each_map(map, obj) {
		const struct btf_type *sec = datasec(obj, map);
		size_t rsz;
		char *data = sec ? bpf_map__initial_value(map, &rsz) : NULL;
		if (!data)
			continue;
		const struct btf_var_secinfo *vs = btf_var_secinfos(sec);
		for (int i = 0; i < btf_vlen(sec); i++, vs++) {
			const struct btf_type *var = btf__type_by_id(btf, vs->type);
			const char *name = btf__name_by_offset(btf, var->name_off);
			if (strncmp(name, "__SCX_", 6) || vs->size != 8 || vs->offset + 8 > rsz)
				continue;
			for (__u32 id = 1; id < btf__type_cnt(vm); id++) {
				const struct btf_type *t = btf__type_by_id(vm, id);
				int hit = 0;
				unsigned long long v = 0;
				if (btf_is_enum(t)) {
					const struct btf_enum *e = btf_enum(t);
					for (int k = 0; k < btf_vlen(t) && !hit; k++, e++)
						if (strcmp(btf__name_by_offset(vm, e->name_off), name + 2) == 0) {
							v = (unsigned long long)(btf_kflag(t) ? (long long)e->val : (unsigned int)e->val);
							hit = 1;
						}
				} else if (btf_is_enum64(t)) {
					const struct btf_enum64 *e = btf_enum64(t);
					for (int k = 0; k < btf_vlen(t) && !hit; k++, e++)
						if (strcmp(btf__name_by_offset(vm, e->name_off), name + 2) == 0) {
							v = btf_enum64_value(e);
							hit = 1;
						}
				}
				if (hit) {
					memcpy(data + vs->offset, &v, 8);
					filled++;
					break;
				}
			}
		}
	}
	if (filled)
		printf("SCX_ENUMS %d\n", filled);
	btf__free(vm);
}

/* Reads the current value of an internal map into a fresh buffer. */
static char *read_map(struct bpf_map *map)
{
	int zero = 0;
	char *buf = calloc(1, bpf_map__value_size(map));
	if (buf && bpf_map_lookup_elem(bpf_map__fd(map), &zero, buf)) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* struct user_exit_info: kind, exit_code, reason[128], msg[1024]. */
static int uei_kind(struct bpf_map *map, __u32 off)
{
	char *buf = read_map(map);
	int kind = 0;
	if (buf)
		memcpy(&kind, buf + off, sizeof(kind));
	free(buf);
	return kind;
}

static void clean(char *s, size_t n)
{
	for (size_t i = 0; i < n && s[i]; i++)
		if (s[i] == '\n' || s[i] == '\r')
			s[i] = ' ';
}

/* `scx-load --link OUT IN...`: the BPF static linker. */
static int link_objects(int argc, char **argv)
{
	struct bpf_linker *l = bpf_linker__new(argv[2], NULL);

	if (!l) {
		fprintf(stderr, "scx-load: link %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	for (int i = 3; i < argc; i++)
		if (bpf_linker__add_file(l, argv[i], NULL)) {
			fprintf(stderr, "scx-load: link: adding %s: %s\n", argv[i], strerror(errno));
			bpf_linker__free(l);
			return 1;
		}
	int err = bpf_linker__finalize(l);
	bpf_linker__free(l);
	if (err)
		fprintf(stderr, "scx-load: link %s: %s\n", argv[2], strerror(-err));
	return err ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_map *ops = NULL, *uei_map, *map;
	struct bpf_link *link;
	__u32 uei_off = 0, uei_size = 0;
	static struct profile prof;
	struct profile *p = NULL;
	int err, first_opt = 2;

	if (argc < 2) {
		fprintf(stderr, "usage: scx-load OBJ.bpf.o [--profile FILE] [NAME=VALUE ...]\n");
		return 2;
	}
	libbpf_set_print(print_fn);
	if (strcmp(argv[1], "--link") == 0) {
		if (argc < 4) {
			fprintf(stderr, "usage: scx-load --link OUT.bpf.o IN.bpf.o...\n");
			return 2;
		}
		return link_objects(argc, argv);
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (argc > 3 && strcmp(argv[2], "--profile") == 0) {
		if (load_profile(&prof, argv[3])) {
			printf("SCX_LOAD_FAILED profile %s\n", argv[3]);
			return 2;
		}
		p = &prof;
		first_opt = 4;
	}
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		printf("SCX_LOAD_FAILED open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	ops = pick_ops(obj, p);
	if (!ops) {
		printf("SCX_LOAD_FAILED no struct_ops map in %s\n", argv[1]);
		return 1;
	}
	fill_scx_enums(obj);
	if (p && profile_before_load(obj, ops, p)) {
		printf("SCX_LOAD_FAILED profile %s (see above)\n", p->path);
		return 2;
	}
	for (int i = first_opt; i < argc; i++)
		if (set_option(obj, argv[i]))
			return 2;
	/* Only the chosen struct_ops map is created and attached. */
	bpf_object__for_each_map(map, obj)
		if (bpf_map__type(map) == BPF_MAP_TYPE_STRUCT_OPS && map != ops)
			bpf_map__set_autocreate(map, false);
	err = bpf_object__load(obj);
	if (err) {
		printf("SCX_LOAD_FAILED load: %s (the verifier log is above)\n", strerror(-err));
		return 1;
	}
	if (p && (profile_maps(obj, p) || profile_members(obj, p) || profile_runs(obj, p, "load") || profile_arena_lib(obj, p))) {
		printf("SCX_LOAD_FAILED profile %s (see above)\n", p->path);
		return 1;
	}
	link = bpf_map__attach_struct_ops(ops);
	if (!link) {
		printf("SCX_LOAD_FAILED attach: %s\n", strerror(errno));
		return 1;
	}
	/* As a skeleton's attach does: its tracing programs too (warn on failure). */
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, obj) {
		const char *sec = bpf_program__section_name(prog);
		if (!sec || strncmp(sec, "tp_btf/", 7) || !bpf_program__autoload(prog))
			continue;
		if (!bpf_program__attach(prog))
			fprintf(stderr, "scx-load: attaching %s (%s): %s\n", bpf_program__name(prog), sec, strerror(errno));
	}
	if (p && profile_runs(obj, p, "attach"))
		fprintf(stderr, "scx-load: a program of the attach phase failed\n");
	printf("SCX_ATTACHED %s\n", bpf_map__name(ops));
	fflush(stdout);
	uei_map = find_var(obj, "uei", &uei_off, &uei_size);
	while (!stop) {
		usleep(100000);
		if (uei_map && uei_kind(uei_map, uei_off))
			break; /* the scheduler exited by itself (error, stall, scx_bpf_exit) */
	}
	bpf_link__destroy(link);
	if (uei_map) {
		/* ops.exit() runs during the detach; give it a moment to record. */
		for (int i = 0; i < 50 && !uei_kind(uei_map, uei_off); i++)
			usleep(20000);
		char *buf = read_map(uei_map);
		if (buf) {
			int kind;
			long long code;
			char reason[129] = {0}, msg[1025] = {0};
			memcpy(&kind, buf + uei_off, 4);
			memcpy(&code, buf + uei_off + 8, 8);
			memcpy(reason, buf + uei_off + 16, 128);
			memcpy(msg, buf + uei_off + 16 + 128, 1024);
			clean(reason, sizeof(reason));
			clean(msg, sizeof(msg));
			printf("SCX_EXIT kind=%d code=%lld reason=%s msg=%s\n", kind, code, reason, msg);
			free(buf);
		}
	} else {
		printf("SCX_EXIT kind=-1 code=0 reason=(no uei in the object) msg=\n");
	}
	/* The scheduler's own counters: every 8-byte global of .bss and .data. */
	struct btf *btf = bpf_object__btf(obj);
	bpf_object__for_each_map(map, obj) {
		const struct btf_type *sec = datasec(obj, map);
		const char *sname = sec ? btf__name_by_offset(btf, sec->name_off) : "";
		if (!sec || (strcmp(sname, ".bss") && strcmp(sname, ".data")))
			continue;
		char *buf = read_map(map);
		if (!buf)
			continue;
		const struct btf_var_secinfo *vs = btf_var_secinfos(sec);
		for (int i = 0; i < btf_vlen(sec); i++, vs++) {
			const struct btf_type *var = btf__type_by_id(btf, vs->type);
			const struct btf_type *vt = btf__type_by_id(btf, btf__resolve_type(btf, var->type));
			if (vs->size == 8 && vt && btf_is_int(vt)) {
				unsigned long long v;
				memcpy(&v, buf + vs->offset, 8);
				printf("SCX_VAR %s=%llu\n", btf__name_by_offset(btf, var->name_off), v);
			}
		}
		free(buf);
	}
	fflush(stdout);
	bpf_object__close(obj);
	return 0;
}
