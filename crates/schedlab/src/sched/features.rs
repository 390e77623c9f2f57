//! Kernel feature switches, one line each, in the manner of
//! kernel/sched/features.h: the kernel's own name, its default, and why it
//! exists. Scenarios (`[features]`) and the CLI (`--feature NAME=on`) set them
//! by name.

macro_rules! sched_features {
    ($($name:ident = $default:expr, $why:expr;)*) => {
        /// One switchable scheduler feature.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Feature { $(#[doc = $why] $name),* }

        /// Name, default and purpose of every feature, in table order.
        pub const FEATURES: &[FeatureInfo] = &[
            $(FeatureInfo { feature: Feature::$name, name: stringify!($name), default: $default, why: $why }),*
        ];
    };
}

/// A row of the feature table.
#[derive(Debug)]
pub struct FeatureInfo {
    /// The feature.
    pub feature: Feature,
    /// Its name as features.h and `--feature` spell it.
    pub name: &'static str,
    /// Whether it is on by default.
    pub default: bool,
    /// What it changes, for `schedlab features`.
    pub why: &'static str,
}

sched_features! {
    // EEVDF (kernel/sched/fair.c)
    PLACE_LAG = true, "a woken task keeps the lag it had when it slept, scaled for the queue it joins";
    PLACE_DEADLINE_INITIAL = true, "a new task starts with half a slice so it does not preempt its parent at once";
    PLACE_REL_DEADLINE = true, "a task moved between queues keeps its deadline relative to its vruntime";
    RUN_TO_PARITY = true, "protect the current task's slice (up to the shortest queued slice) from wakeup and tick preemption";
    PREEMPT_SHORT = true, "a waking task with a shorter slice may cancel the current task's protection";
    NEXT_BUDDY = false, "a waking task is nominated as the next pick";
    PICK_BUDDY = true, "an eligible nominated buddy (yield_to, NEXT_BUDDY) is picked before pick_eevdf";
    DELAY_DEQUEUE = true, "a sleeping task that is not eligible stays queued until its lag is burnt off";
    DELAY_ZERO = true, "a delayed task that is requeued or dequeued has positive lag clipped to zero";
    WAKEUP_PREEMPTION = true, "a waking task may preempt the current one if it is the better EEVDF pick";
    HRTICK = false, "a high-resolution timer ends the running fair task's slice on time (hrtick_start_fair) instead of the next tick noticing it";
    SCHED_CACHE = false, "cache-aware scheduling: processes prefer the LLC holding their cache (llc_balancing/enabled, experiment 004)";
    SC_VISIT = true, "cache-aware scans read only the CPUs the process visited recently (experiment 004)";
    SC_NODE = false, "cache-aware scans read the CPUs of the current node (without SC_VISIT); neither scans every CPU";
    YIELD_TO_LAG_CREDIT = false, "yield_to() credits the target with lag so it is eligible, and forces a local resched at most every 6 ms (experiment 003)";
    // Placement and balancing
    WA_IDLE = true, "wake_affine prefers an idle waker or previous CPU";
    WA_WEIGHT = true, "wake_affine compares the load of the waker and previous CPUs";
    WA_BIAS = true, "wake_affine's load comparison is biased by the domain's imbalance_pct";
    SIS_UTIL = true, "select_idle_cpu limits how many CPUs it scans by LLC utilisation";
    // sched_ext (kernel/sched/ext.c)
    SCX_DEFERRED_ON_TARGET = true, "deferred sched_ext work (remote reenqueues) is queued as irq_work on the target CPU (7.1), not on the calling CPU (experiment 000)";
    SCX_BYPASS_PERCPU = true, "bypass mode uses per-CPU bypass DSQs, a load balancer, immediate loop exits and the hard-lockup hook (6.19), not per-node global DSQs (experiment 002)";
}

impl Feature {
    /// The feature's table row.
    pub fn info(self) -> &'static FeatureInfo {
        &FEATURES[self as usize]
    }

    /// The feature's name.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// Looks a feature up by its kernel name (case-insensitive, `NO_` prefix not accepted here).
    pub fn from_name(name: &str) -> Option<Feature> {
        FEATURES.iter().find(|f| f.name.eq_ignore_ascii_case(name)).map(|f| f.feature)
    }
}

/// The set of enabled features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    bits: u64,
}

impl Default for Features {
    fn default() -> Self {
        let mut f = Features { bits: 0 };
        for info in FEATURES {
            f.set(info.feature, info.default);
        }
        f
    }
}

impl Features {
    /// Whether the feature is on (`sched_feat(X)`).
    #[inline]
    pub fn on(&self, f: Feature) -> bool {
        self.bits & (1 << f as u8) != 0
    }

    /// Turns the feature on or off.
    pub fn set(&mut self, f: Feature, on: bool) {
        if on {
            self.bits |= 1 << f as u8;
        } else {
            self.bits &= !(1 << f as u8);
        }
    }

    /// Applies "NAME", "NO_NAME", "NAME=on|off|true|false|1|0" as the
    /// kernel's debugfs `sched/features` file and our CLI accept them.
    pub fn apply(&mut self, spec: &str) -> Result<(), FeatureError> {
        let spec = spec.trim();
        let (name, value) = match spec.split_once('=') {
            Some((n, v)) => (n.trim(), Some(parse_switch(v.trim()).ok_or_else(|| FeatureError::NotASwitch { name: n.to_string(), value: v.to_string() })?)),
            None => (spec, None),
        };
        let (name, on) = match (name.strip_prefix("NO_"), value) {
            (Some(base), None) if Feature::from_name(base).is_some() => (base, false),
            (_, v) => (name, v.unwrap_or(true)),
        };
        let f = Feature::from_name(name).ok_or_else(|| FeatureError::Unknown(name.to_string()))?;
        self.set(f, on);
        Ok(())
    }

    /// Features that differ from their defaults, as "NAME" / "NO_NAME".
    pub fn changed(&self) -> Vec<String> {
        FEATURES
            .iter()
            .filter(|i| self.on(i.feature) != i.default)
            .map(|i| if self.on(i.feature) { i.name.to_string() } else { format!("NO_{}", i.name) })
            .collect()
    }
}

/// Parses an on/off value: on/true/1/yes or off/false/0/no.
pub fn parse_switch(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "on" | "true" | "1" | "yes" => Some(true),
        "off" | "false" | "0" | "no" => Some(false),
        _ => None,
    }
}

/// A `sched/features` setting that cannot be applied.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FeatureError {
    /// A name that is not a modelled feature.
    #[error("unknown feature {0:?}: known features are {known}", known = known_features())]
    Unknown(String),
    /// `NAME=VALUE` with a value that is not on/off.
    #[error("feature {name:?}: value {value:?} is not a switch: expected on/off, true/false or 1/0")]
    NotASwitch {
        /// The feature name as written.
        name: String,
        /// The value as written.
        value: String,
    },
}

/// The modelled features' names, comma-separated.
fn known_features() -> String {
    FEATURES.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_order_matches_enum() {
        for (i, info) in FEATURES.iter().enumerate() {
            assert_eq!(info.feature as usize, i);
        }
        assert!(FEATURES.len() <= 64);
    }

    #[test]
    fn apply_forms() {
        let mut f = Features::default();
        assert!(f.on(Feature::RUN_TO_PARITY));
        f.apply("NO_RUN_TO_PARITY").unwrap();
        assert!(!f.on(Feature::RUN_TO_PARITY));
        f.apply("RUN_TO_PARITY=on").unwrap();
        assert!(f.on(Feature::RUN_TO_PARITY));
        f.apply("next_buddy").unwrap();
        assert!(f.on(Feature::NEXT_BUDDY));
        assert_eq!(f.changed(), vec!["NEXT_BUDDY".to_string()]);
        assert!(f.apply("BOGUS").unwrap_err().to_string().contains("known features"));
        assert!(f.apply("PLACE_LAG=maybe").is_err());
    }
}
