//! The table of user DSQs by id (scx_bpf_create_dsq()). Schedulers name
//! their DSQs with small numbers (a CPU's, a node's, a layer's) and look
//! them up on most kfunc calls: those ids index a vector, a load instead
//! of hashing; any other id goes to a hash map. Only lookups by id are
//! offered (no iteration), so the split cannot show in any result.

use rustc_hash::FxHashMap;

use super::dsq::DsqIdx;

/// Ids below this index the vector (at most 256 KiB of it).
const DENSE_IDS: u64 = 1 << 16;

/// A vector slot with no DSQ.
const NONE: DsqIdx = DsqIdx::MAX;

/// User DSQs by id: small ids in a vector, others hashed.
#[derive(Clone, Debug, Default)]
pub struct UserDsqs {
    /// `dense[id]`: the DSQ of a small id, or NONE.
    dense: Vec<DsqIdx>,
    /// The DSQs of larger ids.
    sparse: FxHashMap<u64, DsqIdx>,
}

impl UserDsqs {
    /// The DSQ with id `id`.
    #[inline]
    pub fn get(&self, id: &u64) -> Option<&DsqIdx> {
        if *id < DENSE_IDS {
            return self.dense.get(*id as usize).filter(|&&d| d != NONE);
        }
        self.sparse.get(id)
    }

    /// Whether a DSQ has id `id`.
    #[inline]
    pub fn contains_key(&self, id: &u64) -> bool {
        self.get(id).is_some()
    }

    /// Records DSQ `idx` under `id` (the caller checked it was free).
    pub fn insert(&mut self, id: u64, idx: DsqIdx) {
        debug_assert_ne!(idx, NONE);
        if id < DENSE_IDS {
            let i = id as usize;
            if self.dense.len() <= i {
                self.dense.resize(i + 1, NONE);
            }
            self.dense[i] = idx;
        } else {
            self.sparse.insert(id, idx);
        }
    }

    /// Forgets id `id`.
    pub fn remove(&mut self, id: &u64) {
        if *id < DENSE_IDS {
            if let Some(d) = self.dense.get_mut(*id as usize) {
                *d = NONE;
            }
        } else {
            self.sparse.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_large_ids() {
        let mut t = UserDsqs::default();
        assert_eq!(t.get(&3), None);
        t.insert(3, 7);
        t.insert(1 << 40, 8);
        assert_eq!(t.get(&3), Some(&7));
        assert_eq!(t.get(&2), None);
        assert_eq!(t.get(&4), None);
        assert_eq!(t.get(&(1 << 40)), Some(&8));
        assert!(t.contains_key(&3));
        t.remove(&3);
        t.remove(&(1 << 40));
        t.remove(&99);
        assert!(!t.contains_key(&3));
        assert_eq!(t.get(&(1 << 40)), None);
    }
}
