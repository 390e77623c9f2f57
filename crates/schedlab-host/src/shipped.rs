//! The schedulers shipped in `schedulers/`, embedded so that they can be
//! named from any directory (`--sched qmap`).

use std::path::{Path, PathBuf};

/// (name, what it is, BPF C source).
pub const SHIPPED: &[(&str, &str, &str)] = &[
    ("simple", "one shared DSQ, weighted vtime or FIFO (like scx_simple)", include_str!("../../../schedulers/simple.bpf.c")),
    ("qmap", "five FIFO queues by weight; -I/-F IMMED options (like scx_qmap; experiment 000)", include_str!("../../../schedulers/qmap.bpf.c")),
    ("central", "one CPU makes every decision, with a timer (like scx_central)", include_str!("../../../schedulers/central.bpf.c")),
    ("cpu0", "everything queues on CPU 0 (like scx_cpu0; experiment 002)", include_str!("../../../schedulers/cpu0.bpf.c")),
    ("flow", "budgets refilled on sleep, wake profiles, priority lanes, hog containment (like scx_flow v2.2.4; experiment 001)", include_str!("../../../schedulers/flow.bpf.c")),
];

/// The source of a shipped scheduler.
pub fn source(name: &str) -> Option<&'static str> {
    SHIPPED.iter().find(|s| s.0 == name).map(|s| s.2)
}

/// Writes a shipped scheduler's source into `dir` (named by its content, so
/// the compile cache keys stay stable) and returns the path.
pub fn materialize(name: &str, dir: &Path) -> std::io::Result<Option<PathBuf>> {
    let Some(src) = source(name) else { return Ok(None) };
    let mut hasher = schedlab::engine::StreamHash::default();
    for chunk in src.as_bytes().chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        hasher.mix(u64::from_le_bytes(w));
    }
    let h = hasher.finish();
    let sub = dir.join("shipped");
    std::fs::create_dir_all(&sub)?;
    let path = sub.join(format!("{name}-{h:016x}.bpf.c"));
    if !path.exists() {
        let tmp = sub.join(format!(".{name}-{h:016x}.{}.tmp", std::process::id()));
        std::fs::write(&tmp, src)?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(Some(path))
}
