//! The shim's C declarations against the Rust side: a probe program
//! compiled against the shim's vmlinux.h prints sizes, offsets and enum
//! values, and each must equal its Rust counterpart.

use std::mem::{offset_of, size_of};
use std::process::Command;

use super::compile::{compiler, materialize_shim, unique_suffix};
use super::loader::{ModuleC, SchedExtOpsC};
use super::state::BpfCpumaskC;
use super::*;
use schedlab::sched::ext::abi::TaskStructC;
use super::struct_ops::{CgroupInitArgsC, CpuReleaseArgsC, DumpCtxC, ExitInfoC, ExitTaskArgsC, InitTaskArgsC};
use schedlab::sched::ext::abi::{CpumaskC, CredC, DsqIterC, LoadWeightC, PidC, PidNamespaceC, SchedEntityC, SchedExtEntityC, SignalC, UpidC};
use schedlab::sched::ext::ops::{deq_flags, dsq_id, enq_flags, kick_flags, pick_idle_flags, task_flags};

macro_rules! off {
    ($v:ident, $rs:ty, $c:literal, $($f:ident),+) => {
        $( $v.push((format!("offsetof(struct {}, {})", $c, stringify!($f)), offset_of!($rs, $f) as u64)); )+
    };
}

fn size<T>(v: &mut Vec<(String, u64)>, c: &str) {
    v.push((format!("sizeof(struct {c})"), size_of::<T>() as u64));
}

#[test]
fn c_layouts_and_constants_match_rust() {
    let mut v: Vec<(String, u64)> = Vec::new();
    size::<TaskStructC>(&mut v, "task_struct");
    off!(v, TaskStructC, "task_struct", schedlab_id, __state, flags, on_cpu, cpu, recent_used_cpu, wake_cpu, on_rq);
    off!(v, TaskStructC, "task_struct", prio, static_prio, normal_prio, rt_priority, policy, nr_cpus_allowed);
    off!(v, TaskStructC, "task_struct", migration_disabled, pid, tgid, cpus_ptr, cpus_mask, real_parent);
    off!(v, TaskStructC, "task_struct", group_leader, mm, se, scx, comm, utime, stime, numa_preferred_nid, mempolicy, sched_task_group, cgroups);
    off!(v, TaskStructC, "task_struct", sched_class, signal, thread_node, thread_pid, real_cred, cred, __schedlab_pid, __schedlab_signal);
    size::<PidC>(&mut v, "pid");
    off!(v, PidC, "pid", level, numbers);
    size::<UpidC>(&mut v, "upid");
    off!(v, UpidC, "upid", nr, ns);
    size::<SignalC>(&mut v, "signal_struct");
    off!(v, SignalC, "signal_struct", nr_threads, thread_head, pids);
    size::<CredC>(&mut v, "cred");
    size::<kobj::CssSetC>(&mut v, "css_set");
    off!(v, kobj::CssSetC, "css_set", subsys, dfl_cgrp);
    size::<PidNamespaceC>(&mut v, "pid_namespace");
    v.push(("offsetof(struct pid_namespace, ns.inum)".into(), offset_of!(PidNamespaceC, ns_inum) as u64));
    v.push(("offsetof(struct cred, euid)".into(), 16));
    v.push(("PIDTYPE_MAX".into(), schedlab::sched::ext::abi::PIDTYPE_MAX as u64));
    size::<SchedExtEntityC>(&mut v, "sched_ext_entity");
    off!(v, SchedExtEntityC, "sched_ext_entity", dsq, dsq_seq, dsq_flags, flags, weight, sticky_cpu, holding_cpu);
    off!(v, SchedExtEntityC, "sched_ext_entity", selected_cpu, kf_mask, ops_state, runnable_at, core_sched_at);
    off!(v, SchedExtEntityC, "sched_ext_entity", ddsp_dsq_id, ddsp_enq_flags, slice, dsq_vtime, disallow);
    size::<SchedEntityC>(&mut v, "sched_entity");
    off!(v, SchedEntityC, "sched_entity", load, sum_exec_runtime, vruntime, prev_sum_exec_runtime, nr_migrations);
    size::<LoadWeightC>(&mut v, "load_weight");
    off!(v, LoadWeightC, "load_weight", weight, inv_weight);
    size::<CpumaskC>(&mut v, "cpumask");
    size::<BpfCpumaskC>(&mut v, "bpf_cpumask");
    off!(v, BpfCpumaskC, "bpf_cpumask", usage);
    v.push(("sizeof(struct bpf_iter_scx_dsq)".into(), 96));
    v.push(("(sizeof(struct bpf_iter_scx_dsq) >= sizeof(u64) * 12)".into(), (size_of::<DsqIterC>() <= 96) as u64));
    size::<SchedExtOpsC>(&mut v, "sched_ext_ops");
    for (i, m) in loader::OPS_MEMBERS.iter().enumerate() {
        v.push((format!("offsetof(struct sched_ext_ops, {m})"), (i * 8) as u64));
    }
    off!(v, SchedExtOpsC, "sched_ext_ops", dispatch_max_batch, flags, timeout_ms, exit_dump_len, hotplug_seq, name);
    size::<ExitInfoC>(&mut v, "scx_exit_info");
    off!(v, ExitInfoC, "scx_exit_info", kind, exit_code, flags, reason, bt, bt_len, msg, dump, exit_cpu);
    size::<InitTaskArgsC>(&mut v, "scx_init_task_args");
    off!(v, InitTaskArgsC, "scx_init_task_args", fork, cgroup);
    size::<CgroupInitArgsC>(&mut v, "scx_cgroup_init_args");
    off!(v, CgroupInitArgsC, "scx_cgroup_init_args", weight, bw_period_us, bw_quota_us, bw_burst_us, sched_idle);
    size::<ExitTaskArgsC>(&mut v, "scx_exit_task_args");
    size::<CpuReleaseArgsC>(&mut v, "scx_cpu_release_args");
    off!(v, CpuReleaseArgsC, "scx_cpu_release_args", reason, task);
    size::<DumpCtxC>(&mut v, "scx_dump_ctx");
    off!(v, DumpCtxC, "scx_dump_ctx", kind, exit_code, reason, at_ns, at_jiffies);
    size::<ffi::SelectCpuAndArgsC>(&mut v, "scx_bpf_select_cpu_and_args");
    size::<ModuleC>(&mut v, "schedlab_module");
    off!(v, ModuleC, "schedlab_module", maps, map_slots, rodata, ops, progs, end_call, end_call_pending);
    size::<loader::MapDescC>(&mut v, "schedlab_map_desc");
    size::<loader::RodataDescC>(&mut v, "schedlab_rodata_desc");
    size::<loader::MapSlotC>(&mut v, "schedlab_map_slot");
    size::<kobj::RqC>(&mut v, "rq");
    off!(v, kobj::RqC, "rq", clock_task, clock_pelt, lost_idle_time, prev_steal_time_rq, clock, nr_running, cpu);
    off!(v, kobj::RqC, "rq", online, curr, idle, scx);
    size::<kobj::ScxRqC>(&mut v, "scx_rq");
    off!(v, kobj::ScxRqC, "scx_rq", extra_enq_flags, nr_running, flags, cpuperf_target, cpu_released, pnt_seq);
    off!(v, kobj::ScxRqC, "scx_rq", local_dsq_nr);
    size::<kobj::CgroupC>(&mut v, "cgroup");
    off!(v, kobj::CgroupC, "cgroup", flags, level, max_depth, kn, ancestors);
    size::<kobj::CssC>(&mut v, "cgroup_subsys_state");
    size::<kobj::KernfsNodeC>(&mut v, "kernfs_node");
    size::<perf::PerfValueC>(&mut v, "bpf_perf_event_value");
    v.push(("sizeof(struct bpf_dynptr)".into(), 16));
    let consts: &[(&str, u64)] = &[
        ("SCX_DSQ_FLAG_BUILTIN", dsq_id::BUILTIN),
        ("SCX_DSQ_FLAG_LOCAL_ON", dsq_id::FLAG_LOCAL_ON),
        ("SCX_DSQ_LOCAL_ON", dsq_id::LOCAL_ON),
        ("SCX_DSQ_GLOBAL", dsq_id::GLOBAL),
        ("SCX_DSQ_LOCAL", dsq_id::LOCAL),
        ("SCX_DSQ_BYPASS", dsq_id::BYPASS),
        ("SCX_DSQ_LOCAL_CPU_MASK", dsq_id::LOCAL_CPU_MASK),
        ("SCX_ENQ_WAKEUP", enq_flags::WAKEUP),
        ("SCX_ENQ_HEAD", enq_flags::HEAD),
        ("SCX_ENQ_CPU_SELECTED", enq_flags::CPU_SELECTED),
        ("SCX_ENQ_PREEMPT", enq_flags::PREEMPT),
        ("SCX_ENQ_IMMED", enq_flags::IMMED),
        ("SCX_ENQ_REENQ", enq_flags::REENQ),
        ("SCX_ENQ_LAST", enq_flags::LAST),
        ("SCX_ENQ_DSQ_PRIQ", enq_flags::DSQ_PRIQ),
        ("SCX_DEQ_SLEEP", deq_flags::SLEEP),
        ("SCX_DEQ_CORE_SCHED_EXEC", deq_flags::CORE_SCHED_EXEC),
        ("SCX_DEQ_SCHED_CHANGE", deq_flags::SCHED_CHANGE),
        ("SCX_KICK_IDLE", kick_flags::IDLE),
        ("SCX_KICK_PREEMPT", kick_flags::PREEMPT),
        ("SCX_KICK_WAIT", kick_flags::WAIT),
        ("SCX_PICK_IDLE_CORE", pick_idle_flags::CORE),
        ("SCX_PICK_IDLE_IN_NODE", pick_idle_flags::IN_NODE),
        ("SCX_TASK_QUEUED", task_flags::QUEUED as u64),
        ("SCX_TASK_DEQD_FOR_SLEEP", task_flags::DEQD_FOR_SLEEP as u64),
        ("SCX_OPS_ALL_FLAGS", ops_flags::ALL),
        ("SCX_OPS_ENQ_LAST", ops_flags::ENQ_LAST),
        ("SCX_OPS_SWITCH_PARTIAL", ops_flags::SWITCH_PARTIAL),
        ("SCX_OPS_ALWAYS_ENQ_IMMED", ops_flags::ALWAYS_ENQ_IMMED),
        ("SCX_SLICE_DFL", schedlab::sched::ext::ops::SLICE_DFL_NS),
        ("SCX_SLICE_INF", schedlab::sched::ext::ops::SLICE_INF),
        ("SCX_REENQ_ANY", schedlab::sched::ext::ops::REENQ_ANY),
        ("SCX_EXIT_ERROR_BPF", schedlab::sched::ext::ops::ExitKind::ErrorBpf as u64),
        ("SCX_EXIT_UNREG", schedlab::sched::ext::ops::ExitKind::Unreg as u64),
    ];
    v.extend(consts.iter().map(|(n, x)| (format!("(u64){n}"), *x)));

    let dir = std::env::temp_dir().join(format!("schedlab-probe-{}", unique_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    let shim = materialize_shim(&dir.join("cache")).unwrap();
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include \"vmlinux.h\"\n#include \"../schedlab_abi.h\"\nint main(void) {\n",
    );
    for (expr, _) in &v {
        c.push_str(&format!("\tprintf(\"%llu\\n\", (unsigned long long)({expr}));\n"));
    }
    c.push_str("\treturn 0;\n}\n");
    std::fs::write(dir.join("probe.c"), c).unwrap();
    let out = Command::new(compiler())
        .arg("-I")
        .arg(shim.join("include"))
        .arg("-o")
        .arg(dir.join("probe"))
        .arg(dir.join("probe.c"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(dir.join("probe")).output().unwrap();
    let got: Vec<u64> = String::from_utf8_lossy(&run.stdout).lines().map(|l| l.parse().unwrap()).collect();
    let bad: Vec<String> = v
        .iter()
        .zip(&got)
        .filter(|((_, want), got)| want != *got)
        .map(|((e, want), got)| format!("{e}: C {got}, Rust {want}"))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(bad.is_empty(), "layout mismatches:\n{}", bad.join("\n"));
    assert_eq!(got.len(), v.len());
}
