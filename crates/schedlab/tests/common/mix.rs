//! Scenario texts the core's and the hosting crate's integration tests share.

/// Hogs (twice as many as CPUs), two nice-5 hogs pinned to CPUs 0-1, two
/// cyclictest threads at 1 ms and one hackbench group of 2 fds.
pub fn hog_mix(cpus: usize, duration: &str, seed: u64, hackbench_loops: u32) -> String {
    format!(
        r#"
seed = {seed}
duration = "{duration}"
[machine]
preset = "{cpus}cpu"
[[workload]]
kind = "hog"
name = "hogs"
count = {hogs}
[[workload]]
kind = "hog"
name = "pinned"
count = 2
cpus = "0-1"
nice = 5
[[workload]]
kind = "cyclictest"
name = "ct"
threads = 2
interval = "1ms"
[[workload]]
kind = "hackbench"
name = "hb"
groups = 1
fds = 2
loops = {hackbench_loops}
"#,
        hogs = cpus * 2
    )
}
