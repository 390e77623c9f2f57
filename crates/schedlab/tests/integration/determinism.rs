use crate::run;

const RANDOM: &str = r#"
duration = "1s"
seed = 42
[machine]
preset = "ryzen-3900x"
[[workload]]
kind = "hog"
count = 40
nice = 0
run = "exp:1ms"
sleep = "exp:2ms"
[[workload]]
kind = "hackbench"
groups = 2
fds = 4
loops = 50
"#;

#[test]
fn same_seed_gives_identical_json_and_hash() {
    let (_, a) = run(RANDOM);
    let (_, b) = run(RANDOM);
    assert_eq!(a.to_json(), b.to_json());
    assert_eq!(a.event_hash, b.event_hash);
}

#[test]
fn another_seed_changes_the_hash() {
    let (_, a) = run(RANDOM);
    let (_, b) = run(&RANDOM.replace("seed = 42", "seed = 43"));
    assert_ne!(a.event_hash, b.event_hash);
}
