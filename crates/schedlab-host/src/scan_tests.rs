//! Tests of scan.rs: what the scan finds in preprocessed sources and the
//! descriptor unit it generates.

use super::*;

const SRC: &str = r#"
# 1 "x.bpf.c"
typedef unsigned int u32;
extern int LINUX_KERNEL_VERSION __schedlab_kconfig;
extern const char CONFIG_X[64] __schedlab_kconfig __attribute__((weak));
const volatile u64 slice_ns = 20000000;
const volatile bool fifo, also = 1;
volatile const u32 cpus[16] __attribute__((aligned(8)));
static const u64 not_rodata = 3;
struct foo { const volatile int not_top; };
struct {
	int (*type)[BPF_MAP_TYPE_ARRAY];
	__typeof__(u32) *key;
	__typeof__(struct foo) *value;
	int (*max_entries)[4];
} stats __schedlab_sec(".maps");
struct { int (*type)[22]; int (*value_size)[8]; int (*max_entries)[4]; } q0 __schedlab_sec(".maps"), q1 __schedlab_sec(".maps");
struct {
	int (*type)[BPF_MAP_TYPE_ARRAY_OF_MAPS];
	int (*max_entries)[2];
	__typeof__(int) *key;
	__typeof__(struct { int (*type)[22]; }) *values[];
} qs __schedlab_sec(".maps") = { .values = { [1] = &q1, &q0 } };
struct pidq { int (*type)[22]; int (*max_entries)[8]; __typeof__(int) *value; };
struct pidq fifo0 __schedlab_sec(".maps");
int helper(int a) { if (a) { return 1; } return 0; }
__attribute__((used)) __schedlab_sec("syscall") int run_me(void *ctx) { return 0; }
__schedlab_sec(".struct_ops.link") struct sched_ext_ops simple_ops = { .name = "simple", };
u64 cpu_started_at[1] __schedlab_sec("." "data" "." "cpu_started_at");
const volatile s32 pair_cpu[1] __schedlab_sec("." "rodata" "." "pair_cpu");
u64 not_resizable[1] __schedlab_sec(".data.other");
struct sched_ext_ops *not_ops(void);
"#;

#[test]
fn finds_maps_rodata_ops_programs_kconfig() {
    let s = scan(SRC);
    let names: Vec<&str> = s.rodata.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["slice_ns", "fifo", "also", "cpus"]);
    assert_eq!(s.rodata[3].dims, 1);
    assert_eq!(s.rodata[0].type_text, "const volatile u64");
    let maps: Vec<&str> = s.maps.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(maps, ["stats", "q0", "q1", "qs", "fifo0"]);
    assert_eq!(s.maps[4].members, ["type", "max_entries", "value"]);
    assert_eq!(s.maps[0].members, ["type", "key", "value", "max_entries"]);
    assert_eq!(s.maps[3].slots, [("1".to_string(), "q1".to_string()), ("(1) + 1".to_string(), "q0".to_string())]);
    assert_eq!(s.ops, ["simple_ops"]);
    assert_eq!(s.syscalls, ["run_me"]);
    assert_eq!(s.kconfig, ["LINUX_KERNEL_VERSION", "CONFIG_X"]);
    // RESIZABLE_ARRAY(data, ...) and RESIZABLE_ARRAY(rodata, ...); the
    // latter is no plain rodata variable.
    assert_eq!(s.resizable, ["cpu_started_at", "pair_cpu"]);
    let c = generate(&s, "a.bpf.c", "abi.h", Part::Main { others: &[] }, &[]).unwrap();
    assert!(c.contains("#define cpu_started_at (*__schedlab_resizable_cpu_started_at)\n#define pair_cpu (*__schedlab_resizable_pair_cpu)\n#include \"a.bpf.c\""));
    assert!(c.contains("sizeof((*__schedlab_resizable_cpu_started_at)[0]), 6, 1, _Generic(((*__schedlab_resizable_cpu_started_at)[0]), _Bool: 1"));
}

#[test]
fn struct_rodata_members_nested_and_anonymous() {
    let src = r#"
struct inner { u32 a; struct { bool x, y; }; };
const volatile struct {
	u32 nr_cpus;
	u64 slices[4];
	struct { u16 lo; u16 hi; } range;
	struct inner in;
	union { u32 as_u32; u8 b[4]; };
	u32 bits : 3;
	struct inner *ptr;
} cfg = { .nr_cpus = 1 };
const volatile struct inner named;
const volatile u64 masks[4][8];
"#;
    let s = scan(src);
    let names: Vec<(&str, usize)> = s.rodata.iter().map(|r| (r.name.as_str(), r.dims)).collect();
    assert_eq!(
        names,
        [
            ("cfg", 0),
            ("cfg.nr_cpus", 0),
            ("cfg.slices", 1),
            ("cfg.range.lo", 0),
            ("cfg.range.hi", 0),
            ("cfg.in.a", 0),
            ("cfg.in.x", 0),
            ("cfg.in.y", 0),
            ("cfg.as_u32", 0),
            ("cfg.b", 1),
            ("cfg.ptr", 0),
            ("named", 0),
            ("named.a", 0),
            ("named.x", 0),
            ("named.y", 0),
            ("masks", 2),
        ]
    );
    let c = generate(&s, "a.bpf.c", "abi.h", Part::Main { others: &[] }, &[]).unwrap();
    assert!(c.contains("{ \"cfg.range.hi\", (void *)&cfg.range.hi, sizeof(cfg.range.hi),"), "{c}");
    assert!(c.contains("sizeof(masks[0]) / sizeof(masks[0][0]) }"), "{c}");
}

#[test]
fn special_fields_of_map_values() {
    let src = r#"
struct lock_box { struct bpf_spin_lock lock; u64 n; };
struct dom {
	u32 id;
	struct bpf_spin_lock vtime_lock;
	struct bpf_cpumask __schedlab_kptr *cpumask, *other;
	struct bpf_cpumask *plain;
	struct lock_box box;
	struct { struct bpf_timer t; } inner;
	struct bpf_timer *not_special;
};
struct {
	int (*type)[BPF_MAP_TYPE_ARRAY];
	__typeof__(u32) *key;
	__typeof__(struct dom) *value;
	int (*max_entries)[4];
} doms __schedlab_sec(".maps");
struct tagged { int (*type)[1]; __typeof__(struct lock_box) *value; };
struct tagged boxes __schedlab_sec(".maps");
"#;
    let s = scan(src);
    assert_eq!(s.maps[0].special, ["vtime_lock", "cpumask", "other", "box.lock", "inner.t"]);
    assert_eq!(s.maps[1].special, ["lock"]);
    let c = generate(&s, "a.bpf.c", "abi.h", Part::Main { others: &[] }, &[]).unwrap();
    assert!(
        c.contains("{ 0, (u32)__builtin_offsetof(__typeof__(*doms.value), box.lock), (u32)sizeof(((__typeof__(*doms.value) *)0)->box.lock) },"),
        "{c}"
    );
    assert!(c.contains(".nr_map_fields = 6, .map_fields = __schedlab_fields"), "{c}");
}

#[test]
fn resizable_arrays_of_other_objects_are_referred_to_by_pointer() {
    let s = scan("extern char uei_dump[];\nconst volatile u32 uei_dump_len;\n");
    assert!(s.resizable.is_empty());
    let c = generate(&s, "main.bpf.c", "abi.h", Part::Main { others: &[] }, &["uei_dump".to_string()]).unwrap();
    assert!(c.contains("#define uei_dump (*__schedlab_resizable_uei_dump)\n#include \"main.bpf.c\""), "{c}");
    // Described only by the object that defines it.
    assert!(!c.contains("6, 1 }"), "{c}");
}

#[test]
fn bpf_cpumask_globals_are_recorded() {
    let src = "struct bpf_cpumask { int x; };\nstruct bpf_cpumask __schedlab_sec(\".data.LAVD\") masks[4];\nstruct bpf_cpumask *ptr;\n";
    let s = scan(src);
    assert_eq!(s.cpumask_globals, ["masks"]);
    let c = generate(&s, "a.bpf.c", "abi.h", Part::Main { others: &[] }, &[]).unwrap();
    assert!(c.contains("{ \"masks\", (void *)&masks, sizeof(masks), sizeof(struct bpf_cpumask), 8, sizeof(masks) / sizeof(struct bpf_cpumask) },"), "{c}");
}

#[test]
fn arena_globals_are_compiled_through_a_pointer() {
    let src = "struct q { int a; };\nstruct q __schedlab_sec(\".addr_space.1\") __attribute__((visibility(\"hidden\"))) qnodes[16][4];\n";
    let s = scan(src);
    assert_eq!(s.arena_globals, ["qnodes"]);
    assert!(s.globals.is_empty());
    let c = generate(&s, "a.bpf.c", "abi.h", Part::Main { others: &[] }, &[]).unwrap();
    assert!(c.contains("#define qnodes (*__schedlab_resizable_qnodes)"), "{c}");
    assert!(c.contains("sizeof(*__schedlab_resizable_qnodes), 7, 1 }"), "{c}");
}

#[test]
fn generated_table_names_everything() {
    let mut s = scan(SRC);
    s.maps.retain(|m| m.name != "qs");
    let c = generate(&s, "/x/a \"b\".c", "/shim/schedlab_abi.h", Part::Main { others: &[] }, &[]).unwrap();
    assert!(c.contains("#include \"/x/a \\\"b\\\".c\""));
    assert!(c.contains("(u32)sizeof(*stats.value)"));
    assert!(c.contains("(u32)(sizeof(*q0.value_size) / sizeof(int))"));
    assert!(c.contains("sizeof(cpus[0])"));
    assert!(c.contains("{ \"simple_ops\", (struct sched_ext_ops *)&simple_ops, 0 }"), "{c}");
    assert!(c.contains("__attribute__((weak)) __typeof__(CONFIG_X) CONFIG_X;"));
    let bad = Scan {
        maps: vec![ScannedMap { name: "m".into(), members: vec!["key".into()], slots: vec![], special: vec![] }],
        ..Scan::default()
    };
    assert!(generate(&bad, "a", "b", Part::Main { others: &[] }, &[]).unwrap_err().contains("no __uint(type"));
}

#[test]
fn every_declarator_of_a_global_is_a_global() {
    // scx_pair's counters: `u64 nr_total, nr_dispatched, ...;`.
    let s = scan("u64 nr_a, nr_b, nr_c[4];\nstruct tag;\nstatic u64 nr_d = 1, nr_e;\n");
    let names: Vec<(&str, usize)> = s.globals.iter().map(|g| (g.name.as_str(), g.dims)).collect();
    assert_eq!(names, [("nr_a", 0), ("nr_b", 0), ("nr_c", 1), ("nr_d", 0), ("nr_e", 0)]);
}

#[test]
fn address_space_1_globals_are_arena_globals_and_cid_ops_are_tables() {
    // `__arena_global` under __BPF_FEATURE_ADDR_SPACE_CAST: LLVM puts the
    // global into the arena's section, GCC ignores the attribute.
    let src = "struct qa { int a; };\nstruct qa __attribute__((address_space(1))) qa;\n\
               int __attribute__((address_space(2))) other;\n\
               struct sched_ext_ops_cid cid_ops = { .name = \"x\" };\nstruct sched_ext_ops cpu_ops;\n";
    let s = scan(src);
    assert_eq!(s.arena_globals, ["qa"]);
    assert_eq!(s.ops, ["cid_ops", "cpu_ops"]);
    assert_eq!(s.ops_cid, [true, false]);
}
