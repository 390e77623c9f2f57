//! The values of one local storage map (task, cgroup or inode storage) by
//! owner ([`maps::owner_key`](super::maps::owner_key)).
//!
//! A task storage map files a simulated task's value under its task id,
//! which indexes a vector: schedulers such as scx_bpfland and scx_cosmos
//! call bpf_task_storage_get() several times per callback, and the vector
//! answers in a few instructions where a hash lookup took some sixty.
//! Every other owner (a CPU's idle task, a cgroup or inode address) is
//! hashed.

use rustc_hash::FxHashMap;

use super::maps::IDLE_OWNER;

/// One local storage map's values.
#[derive(Default)]
pub(crate) struct Owned {
    /// Values of task owners by task id (task storage maps only).
    tasks: Vec<Option<Box<[u64]>>>,
    /// How many of `tasks` are present.
    nr_tasks: usize,
    /// Values of every other owner.
    other: FxHashMap<u64, Box<[u64]>>,
    /// Owners below [`IDLE_OWNER`] are task ids, kept in `tasks`.
    dense: bool,
}

impl Owned {
    /// An empty store; `tasks`: the owners below [`IDLE_OWNER`] are task
    /// ids (a task storage map).
    pub(crate) fn new(tasks: bool) -> Owned {
        Owned { dense: tasks, ..Owned::default() }
    }

    /// The slot of a task owner, if `owner` is one.
    #[inline(always)]
    fn task_slot(&self, owner: u64) -> Option<usize> {
        (self.dense && owner < IDLE_OWNER).then_some(owner as usize)
    }

    /// `owner`'s value if `owner` is a task with one (None: any other
    /// case, which [`get_mut`](Self::get_mut) handles).
    #[inline(always)]
    pub(crate) fn task_mut(&mut self, owner: u64) -> Option<&mut [u64]> {
        let t = self.task_slot(owner)?;
        self.tasks.get_mut(t)?.as_deref_mut()
    }

    /// `owner`'s value.
    #[inline]
    pub(crate) fn get_mut(&mut self, owner: u64) -> Option<&mut [u64]> {
        match self.task_slot(owner) {
            Some(t) => self.tasks.get_mut(t)?.as_deref_mut(),
            None => self.other.get_mut(&owner).map(|v| &mut **v),
        }
    }

    /// Gives `owner`, which has none, the value `v`; returns it in place.
    pub(crate) fn insert(&mut self, owner: u64, v: Box<[u64]>) -> &mut [u64] {
        match self.task_slot(owner) {
            Some(t) => {
                if self.tasks.len() <= t {
                    self.tasks.resize_with(t + 1, || None);
                }
                debug_assert!(self.tasks[t].is_none(), "task {t} has a value already");
                self.nr_tasks += 1;
                self.tasks[t].insert(v)
            }
            None => self.other.entry(owner).or_insert(v),
        }
    }

    /// Takes `owner`'s value out.
    pub(crate) fn remove(&mut self, owner: u64) -> Option<Box<[u64]>> {
        match self.task_slot(owner) {
            Some(t) => {
                let v = self.tasks.get_mut(t)?.take();
                self.nr_tasks -= usize::from(v.is_some());
                v
            }
            None => self.other.remove(&owner),
        }
    }

    /// How many owners have a value.
    pub(crate) fn len(&self) -> usize {
        self.nr_tasks + self.other.len()
    }

    /// The owner whose value satisfies `holds`, if any (values are distinct
    /// allocations, so a test for an address inside one finds at most one).
    pub(crate) fn find(&self, holds: impl Fn(&[u64]) -> bool) -> Option<u64> {
        let task = self.tasks.iter().position(|v| v.as_deref().is_some_and(&holds)).map(|t| t as u64);
        task.or_else(|| self.other.iter().find(|(_, v)| holds(v)).map(|(&o, _)| o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_and_other_owners() {
        for dense in [true, false] {
            let mut o = Owned::new(dense);
            assert!(o.get_mut(3).is_none());
            o.insert(3, vec![7].into_boxed_slice());
            o.insert(IDLE_OWNER + 1, vec![8].into_boxed_slice());
            assert_eq!(o.len(), 2);
            assert_eq!(o.get_mut(3).map(|v| v[0]), Some(7));
            assert_eq!(o.get_mut(IDLE_OWNER + 1).map(|v| v[0]), Some(8));
            assert!(o.get_mut(2).is_none() && o.get_mut(400).is_none());
            assert_eq!(o.find(|v| v[0] == 8), Some(IDLE_OWNER + 1));
            assert_eq!(o.find(|v| v[0] == 7), Some(3));
            assert_eq!(o.remove(3).map(|v| v[0]), Some(7));
            assert!(o.remove(3).is_none() && o.remove(9).is_none());
            assert_eq!(o.len(), 1);
            assert_eq!(o.find(|v| v[0] == 7), None);
        }
    }
}
