//! Loader profiles: what a scheduler's user space does before (and right
//! after) it attaches, as data.
//!
//! A sched_ext scheduler is a BPF object plus a user-space loader. The
//! loader reads its own command line and the machine, then sets rodata,
//! fills arrays and maps from the topology, resizes arrays, sets ops flags
//! and runs SEC("syscall") programs (scx_bpfland's `enable_sibling_cpu`,
//! scx_tickless' `enable_primary_cpu` and `start_timer`), and only then
//! attaches. A profile ([`format`](mod@format)) says the same in TOML: flags with their
//! names, types and defaults ([`args`]), and expressions (`expr`) over
//! the flags and the machine (`machine`). [`resolve`] turns a profile, a
//! machine and a command line into a [`Plan`]; [`apply`] carries the plan
//! out on a hosted scheduler, and [`wire`] writes it for the libbpf loader
//! of real runs (scripts/vm/scx-load.c), so both load the same way.
//!
//! Profiles for the published scx schedulers are embedded ([`SHIPPED`],
//! files under crates/schedlab-host/profiles/) and picked by crate name;
//! `--sched-profile FILE` / `scheduler.profile` give any other.

pub mod apply;
pub(crate) mod arena_lib;
pub mod args;
pub(crate) mod expr;
pub mod format;
pub mod layered;
pub(crate) mod layered_topo;
pub(crate) mod machine;
pub(crate) mod resolve;
pub mod wire;

pub use format::{Profile, ProfileError};
pub use apply::ApplyError;
pub use expr::{ExprError, Value};
pub use machine::Machine;
pub use resolve::{resolve, Phase, Plan};

/// Embedded profiles: (scheduler, file name, text). Each file says in
/// `profile.versions` which releases it was written from.
pub const SHIPPED: &[(&str, &str, &str)] = &[
    ("scx_bpfland", "scx_bpfland.toml", include_str!("../../profiles/scx_bpfland.toml")),
    ("scx_beerland", "scx_beerland.toml", include_str!("../../profiles/scx_beerland.toml")),
    ("scx_cosmos", "scx_cosmos.toml", include_str!("../../profiles/scx_cosmos.toml")),
    ("scx_flash", "scx_flash.toml", include_str!("../../profiles/scx_flash.toml")),
    ("scx_lavd", "scx_lavd.toml", include_str!("../../profiles/scx_lavd.toml")),
    ("scx_p2dq", "scx_p2dq.toml", include_str!("../../profiles/scx_p2dq.toml")),
    ("scx_rusty", "scx_rusty.toml", include_str!("../../profiles/scx_rusty.toml")),
    ("scx_tickless", "scx_tickless.toml", include_str!("../../profiles/scx_tickless.toml")),
    ("scx_layered", "scx_layered.toml", include_str!("../../profiles/scx_layered.toml")),
    ("scx_flow", "scx_flow.toml", include_str!("../../profiles/scx_flow.toml")),
    ("scx_central", "scx_central.toml", include_str!("../../profiles/scx_central.toml")),
    ("scx_flatcg", "scx_flatcg.toml", include_str!("../../profiles/scx_flatcg.toml")),
    ("scx_pair", "scx_pair.toml", include_str!("../../profiles/scx_pair.toml")),
    ("scx_qmap", "scx_qmap.toml", include_str!("../../profiles/scx_qmap.toml")),
    ("central", "central.toml", include_str!("../../profiles/central.toml")),
];

/// Data files profiles name (`[layer_specs] default`): (file name, text).
pub const SHIPPED_DATA: &[(&str, &str)] = &[("scx_layered.json", include_str!("../../profiles/scx_layered.json"))];

/// A shipped data file by name.
pub fn shipped_data(name: &str) -> Option<&'static str> {
    SHIPPED_DATA.iter().find(|d| d.0 == name).map(|d| d.1)
}

/// The scheduler (and version, if known) a `--sched` value or source path
/// names: `crate:scx_bpfland@1.1.4`, a path inside an unpacked crate
/// (`.../scx_bpfland-1.1.4/src/bpf/main.bpf.c`), the kernel's
/// `scx_central.bpf.c`, or schedlab's shipped `central` (which has its own
/// profile: it sizes nothing by nr_cpu_ids).
pub fn scheduler_of(sched: &str, source: &std::path::Path) -> Option<(String, Option<String>)> {
    if let Some(c) = sched.strip_prefix("crate:") {
        let (name, ver) = match c.split_once('@') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (c, None),
        };
        return Some((name.to_string(), ver));
    }
    if sched == "central" {
        return Some(("central".into(), None));
    }
    for comp in source.components().rev() {
        let s = comp.as_os_str().to_string_lossy();
        // An unpacked crate: scx_NAME-X.Y.Z.
        if let Some((name, ver)) = s.rsplit_once('-') {
            if name.starts_with("scx_") && ver.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                return Some((name.to_string(), Some(ver.to_string())));
            }
        }
        // The kernel's tools/sched_ext/scx_NAME.bpf.c.
        if let Some(stem) = s.strip_suffix(".bpf.c") {
            if stem.starts_with("scx_") && SHIPPED.iter().any(|p| p.0 == stem) {
                return Some((stem.to_string(), None));
            }
        }
    }
    None
}

/// The embedded profile of `scheduler`, if one ships.
pub fn shipped(scheduler: &str) -> Option<Profile> {
    let (_, file, text) = SHIPPED.iter().find(|p| p.0 == scheduler)?;
    // Embedded profiles are tested to parse (tests below).
    Profile::parse(&format!("profiles/{file}"), text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab::machine::topology::Topology;
    use std::path::Path;

    #[test]
    fn every_shipped_profile_parses_and_resolves_on_every_machine_shape() {
        let machines = [
            Topology::flat(4).unwrap(),
            schedlab::workload::world::machine_of_size(32).unwrap(),
            Topology::preset("epyc-2s-192").unwrap(),
            Topology::uniform("smt", 2, 1, 2, 2, 2).unwrap(),
        ];
        for (name, file, text) in SHIPPED {
            let p = Profile::parse(file, text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(&p.def.profile.scheduler, name);
            for t in &machines {
                let plan = resolve::resolve(&p, &Machine::new(t), &[]).unwrap_or_else(|e| panic!("{}: {e}", t.name));
                assert_eq!(&plan.scheduler, name);
            }
        }
    }

    #[test]
    fn scheduler_names_from_sched_values_and_paths() {
        let none = Path::new("x.bpf.c");
        assert_eq!(scheduler_of("crate:scx_bpfland", none), Some(("scx_bpfland".into(), None)));
        assert_eq!(scheduler_of("crate:scx_flow@2.2.5", none), Some(("scx_flow".into(), Some("2.2.5".into()))));
        let p = Path::new("/c/crates/scx_cosmos-1.1.7/src/bpf/main.bpf.c");
        assert_eq!(scheduler_of(p.to_str().unwrap(), p), Some(("scx_cosmos".into(), Some("1.1.7".into()))));
        let k = Path::new("/src/linux/tools/sched_ext/scx_central.bpf.c");
        assert_eq!(scheduler_of("k", k), Some(("scx_central".into(), None)));
        assert_eq!(scheduler_of("central", none), Some(("central".into(), None)));
        assert_eq!(scheduler_of("simple", Path::new("/c/shipped/simple-1.bpf.c")), None);
    }
}
