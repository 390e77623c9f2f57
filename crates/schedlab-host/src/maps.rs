//! BPF maps for hosted schedulers (kernel/bpf/arraymap.c, hashtab.c,
//! queue_stack_maps.c, bpf_task_storage.c, bpf_cgrp_storage.c,
//! bpf_inode_storage.c, map_in_map.c), with the kernel's flag rules and
//! error codes. Ring buffers live in ringbuf.rs, arenas in arena.rs and
//! perf event arrays in perf.rs; this file holds them as map stores.
//!
//! Values live in boxed `u64` slices: 8-byte aligned like the kernel's
//! element storage, and at a fixed address for as long as the element
//! exists, because BPF code keeps the pointers `bpf_map_lookup_elem()`
//! returns. A removed element is not freed at once: it goes to the caller's
//! graveyard, emptied when the outermost call into the scheduler returns
//! (the kernel frees after an RCU grace period, which is the same promise).
//!
//! Lookups by key or owner hash (rustc-hash), but everything iterates in a
//! fixed order (keys as bytes, task ids, LRU stamps), never a hash order,
//! so runs are reproducible.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rustc_hash::FxHashMap;
use schedlab::engine::TaskId;

use super::arena::Arena;
use super::owners::Owned;
use super::perf::PerfSlot;
use super::ringbuf::RingBuf;

/// ENOENT: no such element (lookup or delete of a missing key).
pub(crate) const ENOENT: i64 = 2;
/// E2BIG: the map is full.
pub(crate) const E2BIG: i64 = 7;
/// EBUSY: the resource is in use (a lock or storage already held).
pub(crate) const EBUSY: i64 = 16;
/// EEXIST: the key exists and BPF_NOEXIST was given.
pub(crate) const EEXIST: i64 = 17;
/// EINVAL: invalid argument.
pub(crate) const EINVAL: i64 = 22;
/// EOPNOTSUPP: the operation is not supported by this map type.
pub(crate) const EOPNOTSUPP: i64 = 95;

/// Update flags (BPF_NOEXIST / BPF_EXIST / BPF_F_LOCK; BPF_ANY is 0).
/// Create only: fail with EEXIST if the key exists.
pub(crate) const BPF_NOEXIST: u64 = 1;
/// Update only: fail with ENOENT if the key is missing.
pub(crate) const BPF_EXIST: u64 = 2;
/// Update a value that holds a bpf_spin_lock under that lock.
pub(crate) const BPF_F_LOCK: u64 = 4;
/// `BPF_LOCAL_STORAGE_GET_F_CREATE`.
pub(crate) const F_CREATE: u64 = 1;

/// The map types the host implements (`enum bpf_map_type` values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MapKind {
    /// BPF_MAP_TYPE_HASH.
    Hash,
    /// BPF_MAP_TYPE_ARRAY.
    Array,
    /// BPF_MAP_TYPE_PERCPU_ARRAY: one value per CPU per key.
    PercpuArray,
    /// BPF_MAP_TYPE_LRU_HASH: a full map evicts the least recently used entry.
    LruHash,
    /// BPF_MAP_TYPE_ARRAY_OF_MAPS: values are inner maps.
    ArrayOfMaps,
    /// BPF_MAP_TYPE_QUEUE: FIFO of values (push / pop / peek).
    Queue,
    /// BPF_MAP_TYPE_STACK: LIFO of values.
    Stack,
    /// BPF_MAP_TYPE_TASK_STORAGE: a value per task.
    TaskStorage,
    /// BPF_MAP_TYPE_HASH_OF_MAPS: a hash whose values are inner maps.
    HashOfMaps,
    /// BPF_MAP_TYPE_PERF_EVENT_ARRAY: per-CPU perf event slots.
    PerfEventArray,
    /// BPF_MAP_TYPE_RINGBUF: a kernel-to-user ring buffer.
    Ringbuf,
    /// BPF_MAP_TYPE_USER_RINGBUF: a user-to-kernel ring buffer.
    UserRingbuf,
    /// BPF_MAP_TYPE_INODE_STORAGE: a value per inode.
    InodeStorage,
    /// BPF_MAP_TYPE_CGRP_STORAGE: a value per cgroup.
    CgrpStorage,
    /// BPF_MAP_TYPE_ARENA: pages shared by BPF and user space.
    Arena,
}

impl MapKind {
    /// The kind for an `enum bpf_map_type` value, if the host implements it.
    pub(crate) fn from_type(t: u32) -> Option<MapKind> {
        Some(match t {
            1 => MapKind::Hash,
            2 => MapKind::Array,
            6 => MapKind::PercpuArray,
            9 => MapKind::LruHash,
            12 => MapKind::ArrayOfMaps,
            22 => MapKind::Queue,
            23 => MapKind::Stack,
            29 => MapKind::TaskStorage,
            13 => MapKind::HashOfMaps,
            4 => MapKind::PerfEventArray,
            27 => MapKind::Ringbuf,
            31 => MapKind::UserRingbuf,
            28 => MapKind::InodeStorage,
            32 => MapKind::CgrpStorage,
            33 => MapKind::Arena,
            _ => return None,
        })
    }

    /// Local storage: values owned by a task, cgroup or inode.
    pub(crate) fn is_storage(self) -> bool {
        matches!(self, MapKind::TaskStorage | MapKind::CgrpStorage | MapKind::InodeStorage)
    }

    /// Maps whose values are other maps.
    pub(crate) fn is_map_in_map(self) -> bool {
        matches!(self, MapKind::ArrayOfMaps | MapKind::HashOfMaps)
    }
}

/// The map types the host implements, for messages.
pub(crate) const SUPPORTED: &str = "ARRAY, PERCPU_ARRAY, HASH, LRU_HASH, QUEUE, STACK, ARRAY_OF_MAPS, HASH_OF_MAPS, \
                             PERF_EVENT_ARRAY, RINGBUF, USER_RINGBUF, TASK_STORAGE, CGRP_STORAGE, INODE_STORAGE, ARENA";

/// `BPF_F_MMAPABLE`, which an arena requires.
pub(crate) const BPF_F_MMAPABLE: u32 = 1 << 10;

/// What the scheduler's map definition says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MapDef {
    /// The map's name in the object (the variable of its SEC(".maps") definition).
    pub name: String,
    /// Its type.
    pub kind: MapKind,
    /// Key size in bytes.
    pub key_size: u32,
    /// Value size in bytes.
    pub value_size: u32,
    /// The most entries (an arena's: pages).
    pub max_entries: u32,
    /// `map_flags` (BPF_F_NO_PREALLOC, BPF_F_MMAPABLE, ...).
    pub flags: u32,
    /// `map_extra` (an arena's user-space start address; 0 = any).
    pub extra: u64,
}

/// Why a definition cannot be created, as libbpf/the kernel would refuse it.
pub(crate) fn check_def(def: &MapDef) -> Result<(), String> {
    let need = |ok: bool, what: &str| if ok { Ok(()) } else { Err(format!("map `{}`: {what}", def.name)) };
    match def.kind {
        MapKind::Array | MapKind::PercpuArray | MapKind::ArrayOfMaps => {
            need(def.key_size == 4, "array maps need a 4-byte key")?;
            need(def.max_entries > 0, "max_entries must be positive")?;
        }
        MapKind::PerfEventArray => {
            need(def.key_size == 4 && def.value_size == 4, "perf event arrays need 4-byte keys and values")?;
        }
        MapKind::Ringbuf | MapKind::UserRingbuf => {
            need(def.key_size == 0 && def.value_size == 0, "ring buffers have no key or value size")?;
            need(
                def.max_entries.is_power_of_two() && def.max_entries % 4096 == 0,
                "a ring buffer's max_entries must be a power of 2 and a multiple of the page size (4096)",
            )?;
        }
        MapKind::Arena => {
            need(def.key_size == 0 && def.value_size == 0, "arenas have no key or value size")?;
            need(def.max_entries > 0, "an arena's max_entries (pages) must be positive")?;
            need(def.max_entries <= 1 << 20, "an arena spans at most 4 GiB (max_entries <= 1048576 pages)")?;
            need(def.flags & BPF_F_MMAPABLE != 0, "an arena needs map_flags BPF_F_MMAPABLE")?;
            return Ok(());
        }
        MapKind::HashOfMaps | MapKind::Hash | MapKind::LruHash => {
            need(def.key_size > 0, "hash maps need a key")?;
            need(def.max_entries > 0, "max_entries must be positive")?;
        }
        MapKind::Queue | MapKind::Stack => {
            need(def.key_size == 0, "queue and stack maps have no key")?;
            need(def.max_entries > 0, "max_entries must be positive")?;
        }
        MapKind::TaskStorage | MapKind::CgrpStorage | MapKind::InodeStorage => {
            need(def.key_size == 4, "local storage needs an int key")?;
            need(def.max_entries == 0, "local storage takes max_entries 0")?;
        }
    }
    if !def.kind.is_map_in_map() && !matches!(def.kind, MapKind::Ringbuf | MapKind::UserRingbuf) {
        need(def.value_size > 0, "value_size must be positive")?;
    }
    need(def.value_size <= 1 << 20, "value_size over 1 MiB")
}

fn words(bytes: u32) -> usize {
    (bytes as usize).div_ceil(8).max(1)
}

fn zeroed(bytes: u32) -> Box<[u64]> {
    vec![0u64; words(bytes)].into_boxed_slice()
}

fn bytes_mut(v: &mut [u64]) -> *mut u8 {
    v.as_mut_ptr().cast()
}

fn copy_in(dst: &mut [u64], src: &[u8]) {
    // SAFETY: `dst` holds at least `src.len()` bytes (sized from the same
    // value_size), and u64 storage may be written byte-wise.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), bytes_mut(dst), src.len()) }
}

/// copy_map_value(): copies `src` to `dst` except the special fields.
///
/// # Safety
/// `dst` must be valid for writes of `src.len()` bytes and not overlap
/// `src`; `special` ranges lie within `src.len()` (Map::add_special).
unsafe fn copy_map_value(dst: *mut u8, src: &[u8], special: &[(u32, u32)]) {
    let mut at = 0usize;
    for &(off, size) in special {
        let (off, end) = (off as usize, (off + size) as usize);
        if off > at {
            // SAFETY: the caller's guarantee; at < off <= src.len().
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().add(at), dst.add(at), off - at) };
        }
        at = at.max(end);
    }
    if at < src.len() {
        // SAFETY: as above.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().add(at), dst.add(at), src.len() - at) };
    }
}

fn copy_out(src: &[u64], dst: &mut [u8]) {
    // SAFETY: as copy_in, reading.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().cast::<u8>(), dst.as_mut_ptr(), dst.len()) }
}

struct Elem {
    val: Box<[u64]>,
    /// LRU recency stamp.
    stamp: u64,
}

enum Store {
    Array(Box<[u64]>),
    /// Per-CPU copies, allocated at the first access (the CPU count is the
    /// simulated machine's).
    PercpuArray(Option<(u32, Box<[u64]>)>),
    /// HASH and LRU_HASH: elements found by hashing their key (lookups and
    /// updates, on the hot path), iterated in key byte order through `keys`
    /// (bpf_for_each_map_elem() and the host's readers).
    Hash {
        elems: FxHashMap<Vec<u8>, Elem>,
        keys: BTreeSet<Vec<u8>>,
        lru: BTreeMap<u64, Vec<u8>>,
        clock: u64,
    },
    Queue(VecDeque<Box<[u64]>>),
    /// Local storage by owner ([`owner_key`]).
    Storage(Owned),
    /// Inner map addresses (0: empty slot).
    Maps(Vec<usize>),
    /// HASH_OF_MAPS: inner map address by key.
    MapsByKey(BTreeMap<Vec<u8>, usize>),
    Perf(Vec<PerfSlot>),
    Ring(RingBuf),
    Arena(Arena),
}

/// The key a local storage map files a task's value under (cgroups and
/// inodes use their address; [`IDLE_OWNER`] + cpu is a CPU's idle task).
pub(crate) fn owner_key(task: TaskId) -> u64 {
    task as u64
}

/// Storage owners at or above this are per-CPU idle tasks.
pub(crate) const IDLE_OWNER: u64 = 1 << 32;

/// Memory a removal detached; dropped when the outermost call returns.
pub(crate) type Graveyard = Vec<Box<[u64]>>;

/// An array map's values as [`Map::array_view`] found them: what
/// `bpf_map_lookup_elem()` and `bpf_map_lookup_percpu_elem()` compute
/// (the kernel's verifier inlines the same address arithmetic), with the
/// same answers as [`Map::lookup`] and [`Map::lookup_percpu`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ArrayView {
    /// The first value's address.
    base: usize,
    /// Words per value.
    stride: usize,
    /// max_entries.
    max: usize,
    /// Per-CPU copies held (0: not a per-CPU map).
    copies: usize,
}

impl ArrayView {
    /// The value of element `key` (of CPU `cpu`'s copy for a per-CPU map,
    /// NULL for a CPU at or past `nr_cpus` or past the copies held), NULL
    /// past max_entries.
    #[inline]
    pub(crate) fn at(&self, key: u32, cpu: u32, nr_cpus: u32) -> *mut u8 {
        let i = key as usize;
        if i >= self.max {
            return std::ptr::null_mut();
        }
        let slot = if self.copies == 0 {
            i
        } else if cpu < nr_cpus && (cpu as usize) < self.copies {
            cpu as usize * self.max + i
        } else {
            return std::ptr::null_mut();
        };
        (self.base + slot * self.stride * 8) as *mut u8
    }

    /// Whether this is a per-CPU map's view.
    #[inline]
    pub(crate) fn percpu(&self) -> bool {
        self.copies != 0
    }
}

/// A BPF map as the host keeps it: its definition and its storage.
pub(crate) struct Map {
    /// What the map's definition says.
    pub def: MapDef,
    store: Store,
    /// Words per value.
    stride: usize,
    /// The value's special fields (kptrs, spin locks, timers, list and
    /// rbtree heads, refcounts): (offset, size), sorted. An update copies
    /// around them, as the kernel's copy_map_value() does with the fields
    /// of the value type's btf_record.
    special: Vec<(u32, u32)>,
}

impl Map {
    /// An empty map for a definition (arrays zero-filled, as the kernel creates them).
    pub(crate) fn new(def: MapDef) -> Map {
        let stride = words(def.value_size);
        let store = match def.kind {
            MapKind::Array => Store::Array(vec![0u64; stride * def.max_entries as usize].into_boxed_slice()),
            MapKind::PercpuArray => Store::PercpuArray(None),
            MapKind::Hash | MapKind::LruHash => Store::Hash { elems: FxHashMap::default(), keys: BTreeSet::new(), lru: BTreeMap::new(), clock: 0 },
            MapKind::Queue | MapKind::Stack => Store::Queue(VecDeque::new()),
            MapKind::TaskStorage => Store::Storage(Owned::new(true)),
            MapKind::CgrpStorage | MapKind::InodeStorage => Store::Storage(Owned::new(false)),
            MapKind::ArrayOfMaps => Store::Maps(vec![0; def.max_entries as usize]),
            MapKind::HashOfMaps => Store::MapsByKey(BTreeMap::new()),
            MapKind::PerfEventArray => Store::Perf(vec![PerfSlot::default(); def.max_entries as usize]),
            MapKind::Ringbuf | MapKind::UserRingbuf => Store::Ring(RingBuf::new(def.max_entries)),
            MapKind::Arena => Store::Arena(Arena::new(def.max_entries)),
        };
        Map { def, store, stride, special: Vec::new() }
    }

    /// Marks bytes `offset..offset + size` of the value as a special field.
    pub(crate) fn add_special(&mut self, offset: u32, size: u32) -> Result<(), String> {
        if offset.checked_add(size).is_none_or(|end| end > self.def.value_size) || size == 0 {
            return Err(format!("map `{}`: special field at {offset}+{size} is outside its {}-byte value", self.def.name, self.def.value_size));
        }
        self.special.push((offset, size));
        self.special.sort_unstable();
        Ok(())
    }

    fn index(&self, key: &[u8]) -> Option<usize> {
        let i = u32::from_ne_bytes(key.get(..4)?.try_into().ok()?) as usize;
        (i < self.def.max_entries as usize).then_some(i)
    }

    fn percpu(&mut self, nr_cpus: u32) -> &mut Box<[u64]> {
        let (stride, max) = (self.stride, self.def.max_entries as usize);
        let Store::PercpuArray(slot) = &mut self.store else { unreachable!("percpu on a non-percpu map") };
        &mut slot.get_or_insert_with(|| (nr_cpus, vec![0u64; stride * max * nr_cpus as usize].into_boxed_slice())).1
    }

    /// `bpf_map_lookup_elem()`: a pointer to the value, NULL if absent.
    /// `cpu` picks the copy of a per-CPU map; `nr_cpus` sizes it.
    pub(crate) fn lookup(&mut self, key: &[u8], cpu: u32, nr_cpus: u32) -> *mut u8 {
        let stride = self.stride;
        match self.def.kind {
            MapKind::Array => {
                let Some(i) = self.index(key) else { return std::ptr::null_mut() };
                let Store::Array(v) = &mut self.store else { unreachable!() };
                bytes_mut(&mut v[i * stride..])
            }
            MapKind::PercpuArray => self.lookup_percpu(key, cpu, nr_cpus),
            MapKind::Hash | MapKind::LruHash => {
                let lru = self.def.kind == MapKind::LruHash;
                let Store::Hash { elems, lru: order, clock, .. } = &mut self.store else { unreachable!() };
                let Some(e) = elems.get_mut(key) else { return std::ptr::null_mut() };
                if lru {
                    *clock += 1;
                    order.remove(&e.stamp);
                    e.stamp = *clock;
                    order.insert(*clock, key.to_vec());
                }
                bytes_mut(&mut e.val)
            }
            MapKind::ArrayOfMaps => {
                let Some(i) = self.index(key) else { return std::ptr::null_mut() };
                let Store::Maps(slots) = &self.store else { unreachable!() };
                slots[i] as *mut u8
            }
            MapKind::HashOfMaps => {
                let Store::MapsByKey(m) = &self.store else { unreachable!() };
                m.get(key).map_or(std::ptr::null_mut(), |&a| a as *mut u8)
            }
            _ => std::ptr::null_mut(),
        }
    }

    /// Where the values of an array map live, for lookups that need not
    /// search (`ArrayView`): an ARRAY or PERCPU_ARRAY with 4-byte keys whose
    /// storage exists (a per-CPU map's is made at its first access). The
    /// storage never moves once made.
    pub(crate) fn array_view(&mut self) -> Option<ArrayView> {
        if self.def.key_size != 4 {
            return None;
        }
        let (stride, max) = (self.stride, self.def.max_entries as usize);
        match &mut self.store {
            Store::Array(v) => Some(ArrayView { base: v.as_mut_ptr() as usize, stride, max, copies: 0 }),
            Store::PercpuArray(Some((_, v))) if stride * max > 0 => {
                Some(ArrayView { base: v.as_mut_ptr() as usize, stride, max, copies: v.len() / (stride * max) })
            }
            _ => None,
        }
    }

    /// `bpf_map_lookup_percpu_elem()`: NULL for a CPU past the machine.
    pub(crate) fn lookup_percpu(&mut self, key: &[u8], cpu: u32, nr_cpus: u32) -> *mut u8 {
        if self.def.kind != MapKind::PercpuArray || cpu >= nr_cpus {
            return std::ptr::null_mut();
        }
        let Some(i) = self.index(key) else { return std::ptr::null_mut() };
        let (stride, max) = (self.stride, self.def.max_entries as usize);
        let v = self.percpu(nr_cpus);
        if v.len() < stride * max * (cpu as usize + 1) {
            return std::ptr::null_mut();
        }
        bytes_mut(&mut v[(cpu as usize * max + i) * stride..])
    }

    /// `bpf_map_update_elem()`: 0 or a negative errno.
    pub(crate) fn update(&mut self, key: &[u8], value: &[u8], flags: u64, cpu: u32, nr_cpus: u32) -> i64 {
        let op = flags & !BPF_F_LOCK;
        if op > BPF_EXIST {
            return -EINVAL;
        }
        match self.def.kind {
            MapKind::Array | MapKind::PercpuArray => {
                if self.index(key).is_none() {
                    return -E2BIG;
                }
                if op == BPF_NOEXIST {
                    return -EEXIST;
                }
                let p = self.lookup(key, cpu, nr_cpus);
                // SAFETY: `p` points at value_size bytes of this map's storage.
                unsafe { copy_map_value(p, value, &self.special) };
                0
            }
            MapKind::Hash | MapKind::LruHash => self.hash_update(key, value, op),
            MapKind::Queue | MapKind::Stack => self.push(value, flags),
            MapKind::HashOfMaps => {
                let Some(addr) = value.get(..8).and_then(|v| v.try_into().ok()).map(usize::from_ne_bytes) else {
                    return -EINVAL;
                };
                let max = self.def.max_entries as usize;
                let Store::MapsByKey(m) = &mut self.store else { unreachable!() };
                let exists = m.contains_key(key);
                match (op, exists) {
                    (BPF_NOEXIST, true) => return -EEXIST,
                    (BPF_EXIST, false) => return -ENOENT,
                    (_, false) if m.len() >= max => return -E2BIG,
                    _ => {}
                }
                m.insert(key.to_vec(), addr);
                0
            }
            _ => -EOPNOTSUPP,
        }
    }

    fn hash_update(&mut self, key: &[u8], value: &[u8], op: u64) -> i64 {
        let lru = self.def.kind == MapKind::LruHash;
        let (max, vsize) = (self.def.max_entries as usize, self.def.value_size);
        let special = &self.special;
        let Store::Hash { elems, keys, lru: order, clock } = &mut self.store else { unreachable!() };
        *clock += 1;
        if let Some(e) = elems.get_mut(key) {
            if op == BPF_NOEXIST {
                return -EEXIST;
            }
            // In place, so a pointer BPF already holds sees the new value;
            // its special fields stay.
            // SAFETY: `e.val` holds value_size bytes.
            unsafe { copy_map_value(bytes_mut(&mut e.val), value, special) };
            order.remove(&e.stamp);
            e.stamp = *clock;
            order.insert(*clock, key.to_vec());
            return 0;
        }
        if op == BPF_EXIST {
            return -ENOENT;
        }
        if elems.len() >= max {
            if !lru {
                return -E2BIG;
            }
            // Evict the least recently used element (the kernel's LRU is
            // approximate; this one is exact and deterministic).
            let Some((_, victim)) = order.pop_first() else { return -E2BIG };
            elems.remove(&victim);
            keys.remove(&victim);
        }
        // A new element's special fields start zeroed
        // (check_and_init_map_value()).
        let mut val = zeroed(vsize);
        // SAFETY: `val` holds value_size bytes.
        unsafe { copy_map_value(bytes_mut(&mut val), value, special) };
        elems.insert(key.to_vec(), Elem { val, stamp: *clock });
        keys.insert(key.to_vec());
        order.insert(*clock, key.to_vec());
        0
    }

    /// `bpf_map_delete_elem()`.
    pub(crate) fn delete(&mut self, key: &[u8], grave: &mut Graveyard) -> i64 {
        match self.def.kind {
            MapKind::Hash | MapKind::LruHash => {
                let Store::Hash { elems, keys, lru, .. } = &mut self.store else { unreachable!() };
                match elems.remove(key) {
                    Some(e) => {
                        keys.remove(key);
                        lru.remove(&e.stamp);
                        grave.push(e.val);
                        0
                    }
                    None => -ENOENT,
                }
            }
            MapKind::HashOfMaps => {
                let Store::MapsByKey(m) = &mut self.store else { unreachable!() };
                if m.remove(key).is_some() {
                    0
                } else {
                    -ENOENT
                }
            }
            MapKind::Array | MapKind::PercpuArray | MapKind::ArrayOfMaps | MapKind::PerfEventArray => -EINVAL,
            _ => -EOPNOTSUPP,
        }
    }

    /// `bpf_map_push_elem()`: with BPF_EXIST a full queue/stack drops its oldest element.
    pub(crate) fn push(&mut self, value: &[u8], flags: u64) -> i64 {
        if !matches!(self.def.kind, MapKind::Queue | MapKind::Stack) {
            return -EOPNOTSUPP;
        }
        if flags & !BPF_EXIST != 0 {
            return -EINVAL;
        }
        let (max, vsize) = (self.def.max_entries as usize, self.def.value_size);
        let Store::Queue(q) = &mut self.store else { unreachable!() };
        if q.len() >= max {
            if flags & BPF_EXIST == 0 {
                return -E2BIG;
            }
            q.pop_front();
        }
        let mut val = zeroed(vsize);
        copy_in(&mut val, value);
        q.push_back(val);
        0
    }

    /// `bpf_map_pop_elem()` / `bpf_map_peek_elem()`: queue is FIFO, stack LIFO.
    pub(crate) fn pop(&mut self, out: &mut [u8], remove: bool, grave: &mut Graveyard) -> i64 {
        let stack = match self.def.kind {
            MapKind::Queue => false,
            MapKind::Stack => true,
            _ => return -EOPNOTSUPP,
        };
        let Store::Queue(q) = &mut self.store else { unreachable!() };
        let item = if stack { q.back() } else { q.front() };
        let Some(v) = item else { return -ENOENT };
        copy_out(v, out);
        if remove {
            let v = if stack { q.pop_back() } else { q.pop_front() };
            grave.extend(v);
        }
        0
    }

    /// `bpf_{task,cgrp,inode}_storage_get()` (bpf_local_storage.c): the
    /// owner's value; created (from `init`, or zeroed) with F_CREATE, else
    /// NULL when absent.
    ///
    /// Inlined for the common case, an owner that has its value.
    #[inline]
    pub(crate) fn storage_get(&mut self, owner: u64, init: Option<&[u8]>, flags: u64) -> Result<*mut u8, i64> {
        // Only local storage maps have a Storage store.
        match self.storage_present(owner, flags, false) {
            Some(v) => Ok(v),
            None => self.storage_create(owner, init, flags),
        }
    }

    /// [`storage_get`](Self::storage_get) when the owner has a value
    /// (None: any other case, which that handles); `task_only`: only if
    /// the owner is a task of a task storage map (no hash lookup, no call).
    #[inline(always)]
    pub(crate) fn storage_present(&mut self, owner: u64, flags: u64, task_only: bool) -> Option<*mut u8> {
        let Store::Storage(m) = &mut self.store else { return None };
        if flags & !F_CREATE != 0 {
            return None;
        }
        if task_only {
            m.task_mut(owner).map(bytes_mut)
        } else {
            m.get_mut(owner).map(bytes_mut)
        }
    }

    /// [`storage_get`](Self::storage_get) of an owner without a value (or
    /// with bad arguments).
    #[inline(never)]
    fn storage_create(&mut self, owner: u64, init: Option<&[u8]>, flags: u64) -> Result<*mut u8, i64> {
        if !self.def.kind.is_storage() {
            return Err(-EINVAL);
        }
        if flags & !F_CREATE != 0 {
            return Err(-EINVAL);
        }
        let (vsize, special) = (self.def.value_size, &self.special);
        let Store::Storage(m) = &mut self.store else { unreachable!() };
        if let Some(v) = m.get_mut(owner) {
            return Ok(bytes_mut(v));
        }
        if flags & F_CREATE == 0 {
            return Ok(std::ptr::null_mut());
        }
        let mut v = zeroed(vsize);
        if let Some(init) = init {
            // SAFETY: `v` holds value_size bytes, as many as `init`.
            unsafe { copy_map_value(bytes_mut(&mut v), init, special) };
        }
        Ok(bytes_mut(m.insert(owner, v)))
    }

    /// `bpf_{task,cgrp,inode}_storage_delete()`, and the owner's death
    /// (bpf_task_storage_free()): -ENOENT when it had no value.
    pub(crate) fn storage_delete(&mut self, owner: u64, grave: &mut Graveyard) -> i64 {
        let Store::Storage(m) = &mut self.store else { return -EINVAL };
        match m.remove(owner) {
            Some(v) => {
                grave.push(v);
                0
            }
            None => -ENOENT,
        }
    }

    /// Fills slot `i` of an ARRAY_OF_MAPS with an inner map's address.
    pub(crate) fn set_inner(&mut self, i: u32, inner: usize) -> bool {
        match &mut self.store {
            Store::Maps(slots) if (i as usize) < slots.len() => {
                slots[i as usize] = inner;
                true
            }
            Store::MapsByKey(m) if m.len() < self.def.max_entries as usize => {
                m.insert(i.to_ne_bytes().to_vec(), inner);
                true
            }
            _ => false,
        }
    }

    /// The ring buffer of a RINGBUF or USER_RINGBUF map.
    pub(crate) fn ring(&mut self) -> Option<&mut RingBuf> {
        match &mut self.store {
            Store::Ring(r) => Some(r),
            _ => None,
        }
    }

    /// The arena of an ARENA map.
    pub(crate) fn arena(&mut self) -> Option<&mut Arena> {
        match &mut self.store {
            Store::Arena(a) => Some(a),
            _ => None,
        }
    }

    /// The slots of a PERF_EVENT_ARRAY.
    pub(crate) fn perf_slots(&mut self) -> Option<&mut Vec<PerfSlot>> {
        match &mut self.store {
            Store::Perf(p) => Some(p),
            _ => None,
        }
    }

    /// (key, value) addresses in iteration order, for bpf_for_each_map_elem()
    /// and the host's readers. Keys of arrays are indices in `idx_keys`.
    pub(crate) fn elems(&mut self, cpu: u32, nr_cpus: u32, idx_keys: &mut Vec<u32>) -> Vec<(*const u8, *mut u8)> {
        let mut out = Vec::new();
        match self.def.kind {
            MapKind::Array | MapKind::PercpuArray => {
                *idx_keys = (0..self.def.max_entries).collect();
                for i in 0..self.def.max_entries as usize {
                    let k = idx_keys[i].to_ne_bytes();
                    let v = self.lookup(&k, cpu, nr_cpus);
                    out.push((idx_keys[i..].as_ptr().cast::<u8>(), v));
                }
            }
            MapKind::Hash | MapKind::LruHash => {
                let Store::Hash { elems, keys, .. } = &mut self.store else { unreachable!() };
                for k in keys.iter() {
                    let e = elems.get_mut(k).expect("every key has its element");
                    out.push((k.as_ptr(), bytes_mut(&mut e.val)));
                }
            }
            _ => {}
        }
        out
    }

    /// Number of elements present (queues, hashes, task storage) or max_entries (arrays).
    pub(crate) fn len(&self) -> usize {
        match &self.store {
            Store::Array(_) | Store::PercpuArray(_) => self.def.max_entries as usize,
            Store::Hash { elems, .. } => elems.len(),
            Store::Queue(q) => q.len(),
            Store::Storage(m) => m.len(),
            Store::Maps(s) => s.iter().filter(|&&p| p != 0).count(),
            Store::MapsByKey(m) => m.len(),
            Store::Perf(p) => p.iter().filter(|s| s.installed()).count(),
            Store::Ring(r) => r.len(),
            Store::Arena(a) => a.allocated_pages(),
        }
    }

    /// Whether `addr` lies inside a value this map stores: for bpf_timer,
    /// whose callback receives the map and the key of the element holding it.
    pub(crate) fn key_of_value_addr(&self, addr: usize) -> Option<Vec<u8>> {
        let vbytes = self.stride * 8;
        let within = |base: *const u64, n: usize| {
            let b = base as usize;
            (addr >= b && addr < b + n * vbytes).then(|| (addr - b) / vbytes)
        };
        match &self.store {
            Store::Array(v) => {
                within(v.as_ptr(), self.def.max_entries as usize).map(|i| (i as u32).to_ne_bytes().to_vec())
            }
            Store::PercpuArray(Some((n, v))) => within(v.as_ptr(), self.def.max_entries as usize * *n as usize)
                .map(|i| ((i % self.def.max_entries as usize) as u32).to_ne_bytes().to_vec()),
            Store::Hash { elems, .. } => {
                // Values are distinct allocations: at most one holds `addr`.
                elems.iter().find(|(_, e)| within(e.val.as_ptr(), 1).is_some()).map(|(k, _)| k.clone())
            }
            Store::Storage(m) => m.find(|v| within(v.as_ptr(), 1).is_some()).map(|t| t.to_ne_bytes().to_vec()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BPF_ANY: create or update.
    const BPF_ANY: u64 = 0;

    fn def(kind: MapKind, key: u32, val: u32, max: u32) -> MapDef {
        MapDef { name: "m".into(), kind, key_size: key, value_size: val, max_entries: max, flags: 0, extra: 0 }
    }

    fn read_u64(p: *mut u8) -> u64 {
        assert!(!p.is_null());
        // SAFETY: test maps have 8-byte values at `p`.
        unsafe { *(p as *const u64) }
    }

    #[test]
    fn updates_copy_around_special_fields() {
        // struct { u64 id; struct bpf_cpumask __kptr *mask; u64 n; }
        let val = |id: u64, mask: u64, n: u64| [id.to_ne_bytes(), mask.to_ne_bytes(), n.to_ne_bytes()].concat();
        let words = |p: *mut u8| -> [u64; 3] {
            // SAFETY: 24-byte values.
            unsafe { [0, 1, 2].map(|i| *(p as *const u64).add(i)) }
        };
        for kind in [MapKind::Array, MapKind::Hash] {
            let mut m = Map::new(def(kind, 4, 24, 4));
            m.add_special(8, 8).unwrap();
            let k = 1u32.to_ne_bytes();
            assert_eq!(m.update(&k, &val(7, 0xdead, 9), 0, 0, 1), 0);
            let p = m.lookup(&k, 0, 1);
            // A new value's special field is zero, not what the update held.
            assert_eq!(words(p), [7, 0, 9], "{kind:?}");
            // SAFETY: the field BPF set with bpf_kptr_xchg().
            unsafe { *(p as *mut u64).add(1) = 0x1000 };
            assert_eq!(m.update(&k, &val(8, 0xbeef, 10), 0, 0, 1), 0);
            assert_eq!(words(m.lookup(&k, 0, 1)), [8, 0x1000, 10], "{kind:?}");
        }
        let mut m = Map::new(def(MapKind::Array, 4, 24, 4));
        assert!(m.add_special(20, 8).unwrap_err().contains("outside"));
    }

    #[test]
    fn array_semantics() {
        let mut m = Map::new(def(MapKind::Array, 4, 8, 2));
        assert_eq!(read_u64(m.lookup(&0u32.to_ne_bytes(), 0, 1)), 0, "zero-initialised");
        assert!(m.lookup(&2u32.to_ne_bytes(), 0, 1).is_null(), "index past max_entries");
        assert_eq!(m.update(&1u32.to_ne_bytes(), &7u64.to_ne_bytes(), BPF_ANY, 0, 1), 0);
        assert_eq!(read_u64(m.lookup(&1u32.to_ne_bytes(), 0, 1)), 7);
        assert_eq!(m.update(&1u32.to_ne_bytes(), &8u64.to_ne_bytes(), BPF_NOEXIST, 0, 1), -EEXIST);
        assert_eq!(m.update(&1u32.to_ne_bytes(), &9u64.to_ne_bytes(), BPF_EXIST, 0, 1), 0);
        assert_eq!(m.update(&5u32.to_ne_bytes(), &9u64.to_ne_bytes(), BPF_ANY, 0, 1), -E2BIG);
        assert_eq!(m.update(&0u32.to_ne_bytes(), &9u64.to_ne_bytes(), 8, 0, 1), -EINVAL);
        assert_eq!(m.delete(&0u32.to_ne_bytes(), &mut Vec::new()), -EINVAL);
    }

    #[test]
    fn percpu_array_has_a_copy_per_cpu() {
        let mut m = Map::new(def(MapKind::PercpuArray, 4, 8, 3));
        let k = 2u32.to_ne_bytes();
        m.update(&k, &5u64.to_ne_bytes(), BPF_ANY, 1, 4);
        assert_eq!(read_u64(m.lookup(&k, 1, 4)), 5);
        assert_eq!(read_u64(m.lookup(&k, 0, 4)), 0);
        assert_eq!(read_u64(m.lookup_percpu(&k, 1, 4)), 5);
        assert!(m.lookup_percpu(&k, 4, 4).is_null(), "CPU past the machine");
    }

    #[test]
    fn hash_flags_errors_and_limit() {
        let mut m = Map::new(def(MapKind::Hash, 4, 8, 2));
        let (a, b, c) = (1u32.to_ne_bytes(), 2u32.to_ne_bytes(), 3u32.to_ne_bytes());
        assert_eq!(m.update(&a, &1u64.to_ne_bytes(), BPF_EXIST, 0, 1), -ENOENT);
        assert_eq!(m.update(&a, &1u64.to_ne_bytes(), BPF_NOEXIST, 0, 1), 0);
        let p = m.lookup(&a, 0, 1);
        assert_eq!(m.update(&a, &2u64.to_ne_bytes(), BPF_NOEXIST, 0, 1), -EEXIST);
        assert_eq!(m.update(&a, &3u64.to_ne_bytes(), BPF_ANY, 0, 1), 0);
        assert_eq!(read_u64(p), 3, "update is in place: held pointers see it");
        assert_eq!(m.update(&b, &4u64.to_ne_bytes(), BPF_ANY, 0, 1), 0);
        assert_eq!(m.update(&c, &5u64.to_ne_bytes(), BPF_ANY, 0, 1), -E2BIG, "full");
        let mut grave = Vec::new();
        assert_eq!(m.delete(&a, &mut grave), 0);
        assert_eq!(read_u64(p), 3, "a deleted value stays readable until the call ends");
        assert_eq!(m.delete(&a, &mut grave), -ENOENT);
        assert!(m.lookup(&a, 0, 1).is_null());
        assert_eq!(m.update(&c, &5u64.to_ne_bytes(), BPF_ANY, 0, 1), 0);
        assert_eq!(m.len(), 2);
    }

    /// Hash maps iterate in key byte order whatever the order of inserts,
    /// deletes and evictions, each key once with its own value.
    #[test]
    fn hash_iteration_is_in_key_order() {
        for kind in [MapKind::Hash, MapKind::LruHash] {
            let mut m = Map::new(def(kind, 4, 8, 6));
            let mut grave = Vec::new();
            for k in [0x0300_0000u32, 7, 0x0100_0000, 2, 0x0200_0000, 9] {
                assert_eq!(m.update(&k.to_be_bytes(), &(k as u64).to_ne_bytes(), BPF_ANY, 0, 1), 0);
            }
            assert_eq!(m.delete(&2u32.to_be_bytes(), &mut grave), 0);
            let want_after_delete = [7u32, 9, 0x0100_0000, 0x0200_0000, 0x0300_0000];
            let mut idx = Vec::new();
            let got: Vec<(u32, u64)> = m
                .elems(0, 1, &mut idx)
                .into_iter()
                .map(|(k, v)| {
                    // SAFETY: 4-byte keys and 8-byte values of this map.
                    let key = u32::from_be_bytes(unsafe { std::slice::from_raw_parts(k, 4) }.try_into().unwrap());
                    (key, read_u64(v))
                })
                .collect();
            let want: Vec<(u32, u64)> = want_after_delete.iter().map(|&k| (k, k as u64)).collect();
            assert_eq!(got, want, "{kind:?}");
            assert_eq!(m.len(), 5);
        }
    }

    #[test]
    fn lru_evicts_least_recently_used() {
        let mut m = Map::new(def(MapKind::LruHash, 4, 8, 3));
        for k in 1u32..=3 {
            m.update(&k.to_ne_bytes(), &(k as u64).to_ne_bytes(), BPF_ANY, 0, 1);
        }
        // Touch 1 (lookup) and 2 (update): 3 is now the oldest.
        m.lookup(&1u32.to_ne_bytes(), 0, 1);
        m.update(&2u32.to_ne_bytes(), &20u64.to_ne_bytes(), BPF_EXIST, 0, 1);
        assert_eq!(m.update(&4u32.to_ne_bytes(), &4u64.to_ne_bytes(), BPF_NOEXIST, 0, 1), 0);
        assert!(m.lookup(&3u32.to_ne_bytes(), 0, 1).is_null(), "3 evicted");
        assert_eq!(m.update(&5u32.to_ne_bytes(), &5u64.to_ne_bytes(), BPF_ANY, 0, 1), 0);
        assert!(m.lookup(&1u32.to_ne_bytes(), 0, 1).is_null(), "then 1");
        assert_eq!(read_u64(m.lookup(&2u32.to_ne_bytes(), 0, 1)), 20);
    }

    #[test]
    fn queue_and_stack_order_and_overflow() {
        let mut grave = Vec::new();
        for (kind, first) in [(MapKind::Queue, 1u64), (MapKind::Stack, 2u64)] {
            let mut m = Map::new(def(kind, 0, 8, 2));
            let mut out = [0u8; 8];
            assert_eq!(m.pop(&mut out, true, &mut grave), -ENOENT);
            assert_eq!(m.push(&1u64.to_ne_bytes(), 0), 0);
            assert_eq!(m.push(&2u64.to_ne_bytes(), 0), 0);
            assert_eq!(m.push(&3u64.to_ne_bytes(), 0), -E2BIG);
            assert_eq!(m.push(&3u64.to_ne_bytes(), 1), -EINVAL);
            assert_eq!(m.pop(&mut out, false, &mut grave), 0);
            assert_eq!(u64::from_ne_bytes(out), first, "{kind:?} peek");
            assert_eq!(m.len(), 2);
            // BPF_EXIST on a full map drops the oldest element.
            assert_eq!(m.push(&3u64.to_ne_bytes(), BPF_EXIST), 0);
            m.pop(&mut out, true, &mut grave);
            let expect = if kind == MapKind::Queue { 2 } else { 3 };
            assert_eq!(u64::from_ne_bytes(out), expect, "{kind:?} pop after overwrite");
            assert!(m.lookup(&[], 0, 1).is_null());
        }
    }

    #[test]
    fn task_storage_create_and_delete() {
        let mut m = Map::new(def(MapKind::TaskStorage, 4, 8, 0));
        assert!(m.storage_get(3, None, 0).unwrap().is_null());
        let p = m.storage_get(3, Some(&9u64.to_ne_bytes()), F_CREATE).unwrap();
        assert_eq!(read_u64(p), 9);
        assert_eq!(m.storage_get(3, None, F_CREATE).unwrap(), p, "existing value returned");
        assert_eq!(m.storage_get(3, None, 2), Err(-EINVAL));
        let mut grave = Vec::new();
        assert_eq!(m.storage_delete(3, &mut grave), 0);
        assert_eq!(m.storage_delete(3, &mut grave), -ENOENT);
        assert_eq!(m.key_of_value_addr(p as usize), None);
    }

    #[test]
    fn array_of_maps_and_value_keys() {
        let mut m = Map::new(def(MapKind::ArrayOfMaps, 4, 8, 4));
        assert!(m.set_inner(1, 0x1000));
        assert!(!m.set_inner(4, 0x1000));
        assert_eq!(m.lookup(&1u32.to_ne_bytes(), 0, 1) as usize, 0x1000);
        assert!(m.lookup(&0u32.to_ne_bytes(), 0, 1).is_null());

        let mut a = Map::new(def(MapKind::Array, 4, 16, 4));
        let p = a.lookup(&2u32.to_ne_bytes(), 0, 1) as usize;
        assert_eq!(a.key_of_value_addr(p + 8), Some(2u32.to_ne_bytes().to_vec()));
        assert!(check_def(&def(MapKind::Array, 8, 8, 1)).is_err());
        assert!(check_def(&def(MapKind::TaskStorage, 4, 8, 0)).is_ok());
    }

    /// An array map's view answers every lookup as the map does: inside
    /// and past max_entries, for CPUs inside, at and past the machine and
    /// past the per-CPU copies held, and it exists only once the storage does.
    #[test]
    fn array_views_answer_as_lookups_do() {
        for (kind, vs, max) in [(MapKind::Array, 8, 5), (MapKind::Array, 20, 3), (MapKind::PercpuArray, 16, 4), (MapKind::PercpuArray, 8, 1)] {
            let mut m = Map::new(def(kind, 4, vs, max));
            let nr_made = 6;
            if kind == MapKind::PercpuArray {
                assert!(m.array_view().is_none(), "no per-CPU storage yet");
                m.lookup(&0u32.to_ne_bytes(), 0, nr_made);
            }
            let v = m.array_view().expect("a view once the storage exists");
            assert_eq!(v.percpu(), kind == MapKind::PercpuArray);
            for key in 0..max + 3 {
                for cpu in 0..nr_made + 3 {
                    for nr in [1, nr_made - 1, nr_made, nr_made + 2] {
                        let k = key.to_ne_bytes();
                        assert_eq!(v.at(key, cpu, nr), m.lookup(&k, cpu, nr), "{kind:?} lookup {key} cpu {cpu} of {nr}");
                        if kind == MapKind::PercpuArray {
                            assert_eq!(v.at(key, cpu, nr), m.lookup_percpu(&k, cpu, nr), "lookup_percpu {key} cpu {cpu} of {nr}");
                        }
                    }
                }
            }
        }
        assert!(Map::new(def(MapKind::Array, 8, 8, 2)).array_view().is_none(), "8-byte keys take the full path");
        assert!(Map::new(def(MapKind::Hash, 4, 8, 2)).array_view().is_none());
    }
}
