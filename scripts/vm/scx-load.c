// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * scx-load: a minimal sched_ext loader for schedlab's real-kernel runs.
 *
 *   scx-load OBJ.bpf.o [NAME=VALUE ...]
 *
 * Opens the BPF object, sets read-only options (const volatile globals),
 * loads it (the kernel's verifier checks every program) and attaches its
 * struct_ops map. It then waits for SIGINT/SIGTERM, or for the scheduler to
 * exit by itself (its user_exit_info `uei` records a kind), detaches, and
 * prints what user space learns after the detach:
 *
 *   SCX_ATTACHED <ops map>
 *   SCX_EXIT kind=<scx_exit_kind> code=<exit_code> reason=<...> msg=<...>
 *   SCX_VAR <name>=<value>       every 8-byte global of .bss/.data (counters)
 *
 * Built statically against libbpf (>= 1.4 for sleepable struct_ops).
 */
#include <errno.h>
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

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_map *map, *ops = NULL, *uei_map;
	struct bpf_link *link;
	__u32 uei_off = 0, uei_size = 0;
	int err;

	if (argc < 2) {
		fprintf(stderr, "usage: scx-load OBJ.bpf.o [NAME=VALUE ...]\n");
		return 2;
	}
	libbpf_set_print(print_fn);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		printf("SCX_LOAD_FAILED open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	for (int i = 2; i < argc; i++)
		if (set_option(obj, argv[i]))
			return 2;
	bpf_object__for_each_map(map, obj)
		if (bpf_map__type(map) == BPF_MAP_TYPE_STRUCT_OPS)
			ops = map;
	if (!ops) {
		printf("SCX_LOAD_FAILED no struct_ops map in %s\n", argv[1]);
		return 1;
	}
	err = bpf_object__load(obj);
	if (err) {
		printf("SCX_LOAD_FAILED load: %s (the verifier log is above)\n", strerror(-err));
		return 1;
	}
	link = bpf_map__attach_struct_ops(ops);
	if (!link) {
		printf("SCX_LOAD_FAILED attach: %s\n", strerror(errno));
		return 1;
	}
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
