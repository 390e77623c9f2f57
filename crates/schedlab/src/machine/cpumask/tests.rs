//! Tests of CpuMask and the cpulist format.
use super::*;
use std::collections::BTreeMap;

const SIZES: [usize; 10] = [0, 1, 8, 63, 64, 65, 128, 129, 1024, 5000];

fn mask(nr: usize, cpus: &[usize]) -> CpuMask {
    CpuMask::from_cpus(nr, cpus.iter().copied())
}

fn cpus(m: &CpuMask) -> Vec<usize> {
    m.iter().collect()
}

fn parse(s: &str, nr: usize) -> Vec<usize> {
    cpus(&CpuMask::parse_cpulist(s, nr).unwrap())
}

proptest::proptest! {
    /// next_and_wrap() finds what walking the intersection from
    /// `start` with iter_wrap() finds first.
    #[test]
    fn next_and_wrap_is_the_wrapped_walk(
        nr in 1usize..300,
        a in proptest::collection::vec(0usize..300, 0..40),
        b in proptest::collection::vec(0usize..300, 0..200),
        c in proptest::option::of(proptest::collection::vec(0usize..300, 0..200)),
        start in 0usize..320,
    ) {
        let m = |v: &Vec<usize>| CpuMask::from_cpus(nr, v.iter().copied().filter(|&x| x < nr));
        let (ma, mb) = (m(&a), m(&b));
        let mc = c.as_ref().map(m);
        let want = ma.iter_wrap(start).find(|&x| mb.test(x) && mc.as_ref().is_none_or(|mc| mc.test(x)));
        proptest::prop_assert_eq!(ma.next_and_wrap(&mb, mc.as_ref(), start), want);
    }
}

#[test]
fn constructors_at_word_boundaries() {
    for nr in SIZES {
        let empty = CpuMask::new(nr);
        assert_eq!(empty.nr_bits(), nr);
        assert!(empty.is_empty());
        assert_eq!(empty.weight(), 0);
        assert_eq!(empty.first(), None);

        let full = CpuMask::full(nr);
        assert_eq!(full.weight(), nr, "full({nr})");
        assert_eq!(full.first(), (nr > 0).then_some(0));
        assert_eq!(cpus(&full), (0..nr).collect::<Vec<_>>());
        assert!(!full.test(nr), "bits past nr_bits must stay clear");

        if nr > 0 {
            let last = CpuMask::single(nr, nr - 1);
            assert_eq!(cpus(&last), vec![nr - 1]);
            assert_eq!(last.weight(), 1);
        }
    }
}

#[test]
fn set_clear_test() {
    let mut m = CpuMask::new(130);
    for cpu in [0, 63, 64, 127, 128, 129] {
        m.set(cpu);
        assert!(m.test(cpu));
    }
    assert_eq!(m.weight(), 6);
    m.clear(64);
    assert!(!m.test(64));
    assert_eq!(cpus(&m), vec![0, 63, 127, 128, 129]);
    assert!(!m.test(130));
    assert!(!m.test(usize::MAX));
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "CpuMask::set(8) on a 8-CPU mask")]
fn set_out_of_range_is_a_debug_assertion() {
    CpuMask::new(8).set(8);
}

#[test]
fn next_set_across_words() {
    let m = mask(300, &[5, 64, 200, 299]);
    assert_eq!(m.next_set(0), Some(5));
    assert_eq!(m.next_set(5), Some(5));
    assert_eq!(m.next_set(6), Some(64));
    assert_eq!(m.next_set(65), Some(200));
    assert_eq!(m.next_set(201), Some(299));
    assert_eq!(m.next_set(300), None);
    assert_eq!(m.next_set(usize::MAX), None);
    assert_eq!(CpuMask::new(300).next_set(0), None);
}

#[test]
fn next_clear_stops_at_machine_size() {
    let full = CpuMask::full(70);
    assert_eq!(full.next_clear(0), None);
    let m = mask(70, &[0, 1, 2, 69]);
    assert_eq!(m.next_clear(0), Some(3));
    assert_eq!(m.next_clear(69), None);
}

#[test]
fn iter_wrap_matches_for_each_cpu_wrap() {
    let m = mask(8, &[1, 3, 5, 7]);
    let wrap = |start| m.iter_wrap(start).collect::<Vec<_>>();
    assert_eq!(wrap(0), vec![1, 3, 5, 7]);
    assert_eq!(wrap(4), vec![5, 7, 1, 3]);
    assert_eq!(wrap(5), vec![5, 7, 1, 3]);
    assert_eq!(wrap(7), vec![7, 1, 3, 5]);
    assert_eq!(wrap(8), vec![1, 3, 5, 7]);
    assert_eq!(wrap(usize::MAX), vec![1, 3, 5, 7]);
    assert_eq!(CpuMask::new(8).iter_wrap(3).count(), 0);

    let big = mask(1000, &[10, 500, 999]);
    assert_eq!(big.iter_wrap(600).collect::<Vec<_>>(), vec![999, 10, 500]);
}

#[test]
fn iter_wrap_is_fused() {
    let m = mask(8, &[2, 6]);
    let mut it = m.iter_wrap(4);
    assert_eq!(it.by_ref().collect::<Vec<_>>(), vec![6, 2]);
    assert_eq!(it.next(), None);
    assert_eq!(it.next(), None);
}

#[test]
fn set_operations() {
    let a = mask(200, &[1, 2, 3, 100, 150]);
    let b = mask(200, &[3, 4, 150, 199]);
    assert_eq!(cpus(&a.and(&b)), vec![3, 150]);
    assert_eq!(cpus(&a.or(&b)), vec![1, 2, 3, 4, 100, 150, 199]);

    let mut c = a.clone();
    c.and_assign(&b);
    assert_eq!(c, a.and(&b));
    let mut d = a.clone();
    d.or_assign(&b);
    assert_eq!(d, a.or(&b));
    let mut e = a.clone();
    e.andnot_assign(&b);
    assert_eq!(cpus(&e), vec![1, 2, 100]);

    assert!(a.intersects(&b));
    assert!(!e.intersects(&b));
    assert_eq!(a.first_and(&b), Some(3));
    assert_eq!(e.first_and(&b), None);
    assert!(c.is_subset_of(&a) && c.is_subset_of(&b));
    assert!(!a.is_subset_of(&b));
    assert!(CpuMask::new(200).is_subset_of(&b));
}

#[test]
#[cfg(not(debug_assertions))]
fn mismatched_sizes_never_leak_bits() {
    let small = CpuMask::full(10);
    let mut m = CpuMask::new(10);
    m.or_assign(&CpuMask::full(300));
    assert_eq!(m, small);
}

#[test]
fn inline_and_heap_storage_behave_alike() {
    let small = mask(128, &[0, 127]);
    let large = mask(129, &[0, 127]);
    assert_eq!(cpus(&small), cpus(&large));
    assert_eq!(small.clone(), small);
    assert_ne!(small, large, "different machine sizes are different masks");
}

#[test]
fn usable_as_ordered_map_key() {
    let mut map = BTreeMap::new();
    map.insert(mask(8, &[0, 1]), "a");
    map.insert(mask(8, &[2]), "b");
    map.insert(mask(8, &[0, 1]), "c");
    assert_eq!(map.len(), 2);
    assert_eq!(map[&mask(8, &[0, 1])], "c");
}

/// Compares against a Vec<bool> model with a fixed pseudo-random
/// sequence, so the test is deterministic.
#[test]
fn agrees_with_a_bool_vector_model() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound as u64) as usize
    };
    for nr in [1, 64, 65, 190, 1100] {
        let mut m = CpuMask::new(nr);
        let mut model = vec![false; nr];
        for _ in 0..2000 {
            let cpu = rand(nr);
            if rand(3) == 0 {
                m.clear(cpu);
                model[cpu] = false;
            } else {
                m.set(cpu);
                model[cpu] = true;
            }
        }
        let expected: Vec<usize> = (0..nr).filter(|&c| model[c]).collect();
        assert_eq!(cpus(&m), expected);
        assert_eq!(m.weight(), expected.len());
        let from = rand(nr);
        assert_eq!(
            m.next_set(from),
            expected.iter().copied().find(|&c| c >= from)
        );
        let round_trip = CpuMask::parse_cpulist(&m.to_cpulist(), nr).unwrap();
        assert_eq!(round_trip, m);
    }
}

#[test]
fn parse_basic_forms() {
    assert_eq!(parse("0", 8), vec![0]);
    assert_eq!(parse("0-3", 8), vec![0, 1, 2, 3]);
    assert_eq!(parse("0,2,4-7", 8), vec![0, 2, 4, 5, 6, 7]);
    assert_eq!(parse(" 1 , 3 - 4 ,\t6 ", 8), vec![1, 3, 4, 6]);
    assert_eq!(parse("5,1,5,0-1", 8), vec![0, 1, 5]);
    assert_eq!(parse("", 8), Vec::<usize>::new());
    assert_eq!(parse("  ", 8), Vec::<usize>::new());
}

#[test]
fn parse_strides_and_n() {
    assert_eq!(parse("0-15:2", 16), vec![0, 2, 4, 6, 8, 10, 12, 14]);
    assert_eq!(parse("1-9:4", 16), vec![1, 5, 9]);
    assert_eq!(parse("0-15:2/8", 16), vec![0, 1, 8, 9]);
    assert_eq!(parse("0-9:3/4", 16), vec![0, 1, 2, 4, 5, 6, 8, 9]);
    assert_eq!(parse("3:2", 16), vec![3]);
    assert_eq!(parse("6-N", 8), vec![6, 7]);
    assert_eq!(parse("N", 8), vec![7]);
    // Only CPUs actually selected need to exist.
    assert_eq!(parse("0-9:2", 9), vec![0, 2, 4, 6, 8]);
}

#[test]
fn parse_scales_past_1024_cpus() {
    let m = CpuMask::parse_cpulist("0-4095:2,4095", 4096).unwrap();
    assert_eq!(m.weight(), 2049);
    assert_eq!(m.next_set(4000), Some(4000));
    assert_eq!(m.next_set(4093), Some(4094));
    assert_eq!(m.next_set(4095), Some(4095));
}

#[test]
fn parse_errors() {
    let err = |s: &str, nr| CpuMask::parse_cpulist(s, nr).unwrap_err();
    assert_eq!(
        err("0,,3", 8),
        CpuListError::EmptyItem {
            position: 2,
            list: "0,,3".into()
        }
    );
    assert!(matches!(
        err("1,", 8),
        CpuListError::EmptyItem { position: 2, .. }
    ));
    assert!(matches!(err("x", 8), CpuListError::BadNumber { .. }));
    assert!(matches!(err("+3", 8), CpuListError::BadNumber { .. }));
    assert!(matches!(err("-3", 8), CpuListError::BadNumber { .. }));
    assert!(matches!(err("1-2-3", 8), CpuListError::BadNumber { .. }));
    assert!(matches!(
        err("99999999999999999999999", 8),
        CpuListError::BadNumber { .. }
    ));
    assert!(matches!(
        err("5-3", 8),
        CpuListError::ReversedRange {
            start: 5,
            end: 3,
            ..
        }
    ));
    assert!(matches!(err("0-7:0", 8), CpuListError::BadStride { .. }));
    assert!(matches!(err("0-7:3/2", 8), CpuListError::BadStride { .. }));
    assert!(matches!(err("0-7:0/2", 8), CpuListError::BadStride { .. }));
    assert!(matches!(err("0-7:x", 8), CpuListError::BadStride { .. }));
    assert_eq!(err("9", 8), CpuListError::OutOfRange { cpu: 9, nr_cpus: 8 });
    assert_eq!(
        err("0-4000000000", 8),
        CpuListError::OutOfRange {
            cpu: 4_000_000_000,
            nr_cpus: 8
        }
    );
    assert_eq!(err("N", 0), CpuListError::OutOfRange { cpu: 0, nr_cpus: 0 });
}

#[test]
fn error_messages_name_the_problem() {
    let msg = |s: &str, nr| CpuMask::parse_cpulist(s, nr).unwrap_err().to_string();
    assert_eq!(
        msg("9", 8),
        "CPU 9 is out of range: the machine has 8 CPUs (0-7)"
    );
    assert_eq!(
        msg("1", 1),
        "CPU 1 is out of range: the machine has 1 CPU (0)"
    );
    assert_eq!(
        msg("0", 0),
        "CPU 0 is out of range: the machine has no CPUs"
    );
    assert_eq!(
        msg("2-x", 8),
        "invalid CPU number \"x\" in \"2-x\": expected a decimal number or N"
    );
    assert_eq!(msg("5-3", 8), "reversed range \"5-3\": 5 is greater than 3");
    assert_eq!(
        msg("0,,1", 8),
        "empty item at position 2 in CPU list \"0,,1\""
    );
    assert!(msg("0-7:0", 8).starts_with("invalid stride in \"0-7:0\""));
}

#[test]
fn region_parsing_details() {
    let r = Region::parse("2-10:3/4", 16).unwrap();
    assert_eq!((r.start, r.end, r.used, r.group), (2, 10, 3, 4));
    assert_eq!(r.last_selected(), 10);
    let r = Region::parse("0-9:2", 16).unwrap();
    assert_eq!(r.last_selected(), 8);
}

#[test]
fn cpulist_formatting() {
    assert_eq!(
        mask(16, &[0, 1, 2, 3, 8, 10, 11]).to_cpulist(),
        "0-3,8,10-11"
    );
    assert_eq!(CpuMask::new(16).to_cpulist(), "");
    assert_eq!(CpuMask::full(1).to_cpulist(), "0");
    assert_eq!(CpuMask::full(192).to_cpulist(), "0-191");
    assert_eq!(
        mask(200, &[63, 64, 127, 128, 199]).to_cpulist(),
        "63-64,127-128,199"
    );
    assert_eq!(mask(16, &[1, 3, 5]).to_string(), "1,3,5");
    assert_eq!(format!("{}", mask(8, &[7])), "7");
}

#[test]
fn into_iterator_for_reference() {
    let m = mask(8, &[1, 4]);
    let mut seen = Vec::new();
    for cpu in &m {
        seen.push(cpu);
    }
    assert_eq!(seen, vec![1, 4]);
}

/// A shared mask's clones read the same words and compare, order and
/// hash as their unshared copies; a write to one clone copies its words
/// first and leaves the others as they were.
#[test]
fn shared_masks_copy_on_write() {
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};
    let hash = |m: &CpuMask| {
        let mut h = DefaultHasher::new();
        m.hash(&mut h);
        h.finish()
    };
    for n in [8, 256, 257, 4096] {
        let plain = CpuMask::full(n);
        let shared = plain.clone().shared();
        let mut a = shared.clone();
        let b = shared.clone();
        assert_eq!(a, plain);
        assert_eq!(a.cmp(&plain), std::cmp::Ordering::Equal);
        assert_eq!(hash(&a), hash(&plain));
        a.clear(n - 1);
        assert_eq!(a.weight(), n - 1);
        assert!(!a.test(n - 1));
        assert_eq!(b, plain, "a write to one clone showed in another ({n} CPUs)");
        assert_eq!(shared.weight(), n);
        assert!(a < b, "ordering by the used words ({n} CPUs)");
        let mut c = CpuMask::new(n).shared();
        c.set(n / 2);
        assert_eq!(c, CpuMask::single(n, n / 2));
    }
}
