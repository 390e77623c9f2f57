//! The 7.3 cid form end to end: tests/shim/cid.bpf.c, a
//! `struct sched_ext_ops_cid` scheduler, on amd-16c (16 cores with SMT in
//! two LLCs, CPU c and c + 16 siblings, so cids differ from CPUs). It
//! checks every cid it is given against the cid kfuncs, records the
//! cmasks of ops.set_cmask(), dispatches a task pinned to CPU 1 to
//! `SCX_DSQ_LOCAL_ON | cid`, and calls the sub-scheduler kfuncs as a root
//! with no children, and reenqueues its user DSQ (scx_bpf_dsq_reenq()).

use std::rc::Rc;

use schedlab::sched::ext::check::Checked;
use schedlab_host::LoadConfig;

use crate::{cfg, load_with, manifest, sim};

const MAX_PIDS: usize = 64;

#[repr(C)]
struct Report {
    nr_cids: u64,
    dispatch_bad: u64,
    select_bad: u64,
    select_calls: u64,
    enable_calls: u64,
    enable_mask_bad: u64,
    set_cmask_calls: u64,
    caps_ret: i64,
    caps_word: u64,
    caps_hdr: u64,
    grant_ret: i64,
    sub_dispatch: u64,
    pinned_local_on: u64,
    tid_bad: u64,
    cid_of_cpu1: u64,
    reenq_calls: u64,
    reenq_kfunc: u64,
    reenq_other: u64,
    cmask_words: [u64; MAX_PIDS],
    cmask_hdr: [u64; MAX_PIDS],
}

#[test]
fn cid_form_translates_cids_cmasks_and_local_on() {
    let scenario = "seed = 3\nduration = \"300ms\"\n[machine]\npreset = \"amd-16c\"\n\
                    [[workload]]\nkind = \"hog\"\nname = \"pin\"\ncount = 1\ncpus = \"1\"\n\
                    [[workload]]\nkind = \"hog\"\nname = \"free\"\ncount = 40\n";
    let mut s = sim(scenario);
    let pinned = s.tasks.iter().find(|t| t.name.starts_with("pin")).expect("pinned hog").id;
    let cfg = LoadConfig { rodata: vec![("pinned_pid".into(), (pinned + 1).to_string())], ..cfg() };
    let hosted = Rc::new(load_with(&manifest().join("tests/shim/cid.bpf.c"), &cfg));
    s.scx_enable(Rc::new(Checked::new(hosted.clone()))).unwrap_or_else(|e| panic!("{e}"));
    s.run();
    assert!(s.scx.exit.is_none(), "{:?}", s.scx.exit);
    let mut bytes = vec![0u8; std::mem::size_of::<Report>()];
    assert_eq!(hosted.run_syscall(&mut s, "report", &mut bytes).unwrap_or_else(|e| panic!("{e}")), 0);
    // SAFETY: `bytes` holds a Report the program wrote (plain integers).
    let r: Report = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };

    assert_eq!(r.nr_cids, 32);
    // CPU 0 and its sibling 16 are cids 0 and 1, then CPU 1 is cid 2.
    assert_eq!(r.cid_of_cpu1, 2);
    assert!(r.select_calls > 0 && r.enable_calls > 0 && r.set_cmask_calls >= r.enable_calls);
    assert_eq!((r.dispatch_bad, r.select_bad, r.enable_mask_bad, r.tid_bad), (0, 0, 0, 0));
    // The pinned task's affinity is the one cid of CPU 1; base 0, 32 cids,
    // SCX_CMASK_NR_WORDS(32) = 2 words.
    let pid = pinned as usize + 1;
    assert_eq!(r.cmask_words[pid], 1 << 2, "pinned cmask {:#x}", r.cmask_words[pid]);
    assert_eq!(r.cmask_hdr[pid], (32 << 16) | 2);
    let free = s.tasks.iter().find(|t| t.name.starts_with("free")).expect("free hog").id as usize + 1;
    assert_eq!(r.cmask_words[free], 0xffff_ffff);
    // LOCAL_ON | cid 2 put it on CPU 1, where it ran.
    assert!(r.pinned_local_on > 0);
    assert!(s.tasks[pinned as usize].stats.runtime_ns > 100_000_000, "pinned hog ran {}", s.tasks[pinned as usize].stats.runtime_ns);
    // The root holds every cap on every cid; no child exists.
    assert_eq!((r.caps_ret, r.caps_word, r.caps_hdr), (0, 0xffff_ffff, 32));
    assert_eq!(r.grant_ret, -19);
    assert_eq!(r.sub_dispatch, 0);
    // scx_bpf_dsq_reenq() of the user DSQ: its tasks came back to
    // ops.enqueue() with SCX_ENQ_REENQ and SCX_TASK_REENQ_KFUNC.
    assert!(r.reenq_calls >= 16);
    assert!(r.reenq_kfunc > 0, "{} reenqueues", r.reenq_kfunc);
    assert_eq!(r.reenq_other, 0);
}
