//! Fork placement (`sched_balance_find_dst_cpu()` in fair.c): a new task
//! goes down the forking CPU's domains from the widest, at each level into
//! the idlest group, then to that group's idlest CPU.

use crate::engine::time::Ns;
use crate::engine::{Cpu, TaskId};
use crate::machine::cpumask::CpuMask;
use crate::sched::balance::{GroupStats, GroupType, GROUPS_AHEAD};
use crate::sched::group_memo::GroupMemo;
use crate::sched::group_tree::{Walk, TREE_MIN_GROUPS};
use crate::sched::sim::Sim;
use crate::sched::topology::{Group, SchedDomain};

/// What a fork walk of a domain finds: the forking CPU's own group (its
/// type and statistics) and the idlest other group (with its span).
type Picks<'a> = (Option<(GroupType, GroupStats)>, Option<(GroupType, GroupStats, &'a CpuMask)>);

impl Sim {
    /// Fork balancing (sched_balance_find_dst_cpu): walk down from the
    /// widest domain, at each level into the idlest group, then its idlest CPU.
    pub(crate) fn find_idlest_cpu(&self, p: TaskId, this_cpu: Cpu, prev: Cpu, mut memo: Option<&mut GroupMemo>) -> Cpu {
        let allowed = &self.task(p).cpus_allowed;
        let everywhere = self.task(p).nr_cpus_allowed as usize == self.nr_cpus();
        let mut cpu = this_cpu;
        let mut level = self.domains[cpu as usize].len();
        // A task allowed everywhere meets every (non-empty) span.
        if level == 0 || !everywhere && !self.domains[cpu as usize][level - 1].span.intersects(allowed) {
            return prev;
        }
        // The idle CPUs of the next level's span, when known: the own
        // group's of the level just passed at the same CPU.
        let mut span_idle = None;
        while level > 0 {
            let domains = &self.domains[cpu as usize];
            let (sd, parent) = (&domains[level - 1], domains.get(level));
            level -= 1;
            if !sd.flags.balance_fork {
                span_idle = None;
                continue;
            }
            if everywhere {
                if let Some(m) = memo.as_deref_mut() {
                    let local;
                    (local, span_idle) = self.idle_mostly_local(sd, parent, span_idle, m);
                    if local {
                        debug_assert_eq!(self.find_idlest_group(sd, p, cpu, None), None, "cpu{cpu} stays local at {}", sd.level);
                        continue;
                    }
                }
            }
            let Some(group) = self.find_idlest_group(sd, p, cpu, memo.as_deref_mut()) else { continue };
            let new_cpu = self.find_idlest_group_cpu(&group, p, cpu);
            if new_cpu == cpu {
                continue;
            }
            let weight = sd.span_weight;
            span_idle = None;
            cpu = new_cpu;
            level = self.domains[cpu as usize].iter().take_while(|d| d.span_weight < weight).count();
        }
        cpu
    }

    /// Whether find_idlest_group() keeps a task allowed everywhere in
    /// `sd`'s own group for want of idle CPUs elsewhere: the own group has
    /// spare capacity (the least busy type, so no other group is of a
    /// less busy one) and at least as many idle CPUs as all the other
    /// groups together, so at least as many as the idlest of them. The
    /// domain's idle CPUs are `span_idle` when the caller knows them,
    /// otherwise counted in `parent`'s own group, which is the domain's
    /// span, from the statistics `memo` keeps: a group or two read instead
    /// of every group of the domain (once the CPUs of a node are busy,
    /// every fork of a burst stays local so at every level). Also returns
    /// the own group's idle CPUs, when read (the next level's span).
    fn idle_mostly_local(&self, sd: &SchedDomain, parent: Option<&SchedDomain>, span_idle: Option<u32>, memo: &mut GroupMemo) -> (bool, Option<u32>) {
        let Some(own) = own_group(sd) else { return (false, None) };
        let Some(ls) = self.memo_stats(&own, memo) else { return (false, None) };
        let (own_idle, has_spare) = (ls.idle_cpus, ls.classify(sd.imbalance_pct as u64) == GroupType::HasSpare);
        if !has_spare {
            return (false, Some(own_idle));
        }
        let span = parent.and_then(own_group);
        let idle = match span_idle {
            Some(n) => {
                debug_assert_eq!(Some(n), span.map(|g| self.group_stats(g.cpus).idle_cpus), "the idle CPUs of {}'s span", sd.level);
                n
            }
            None => {
                let Some(g) = span else { return (false, Some(own_idle)) };
                debug_assert_eq!(g.mask, &sd.span, "the parent's own group is not the domain's span");
                let Some(ss) = self.memo_stats(&g, memo) else { return (false, Some(own_idle)) };
                ss.idle_cpus
            }
        };
        (own_idle >= idle - own_idle, Some(own_idle))
    }

    /// A shared group's statistics from `memo`, summed and kept there
    /// first if it does not keep them.
    fn memo_stats<'m>(&self, g: &Group<'_>, memo: &'m mut GroupMemo) -> Option<&'m GroupStats> {
        match memo.get(g.id) {
            Some(s) => debug_assert_eq!(*s, self.group_stats(g.cpus), "kept statistics of group {} are stale", g.id),
            None => memo.put(g.id, &self.group_stats(g.cpus)),
        }
        memo.get(g.id)
    }

    /// find_idlest_group(); with `memo`, a group's statistics are taken
    /// from it when kept there, and kept there when summed, and a task
    /// allowed everywhere is placed through the span's tree there.
    fn find_idlest_group(&self, sd: &SchedDomain, p: TaskId, this_cpu: Cpu, mut memo: Option<&mut GroupMemo>) -> Option<CpuMask> {
        let everywhere = self.task(p).nr_cpus_allowed as usize == self.nr_cpus();
        let pct = sd.imbalance_pct as u64;
        let by_tree = match memo.as_deref_mut() {
            Some(m) if everywhere => self.idlest_by_tree(sd, pct, m),
            _ => None,
        };
        let (local, idlest) = match by_tree {
            Some(picks) => {
                debug_assert_eq!(picks, self.idlest_by_walk(sd, p, this_cpu, pct, None), "the tree and the walk disagree");
                picks
            }
            None => self.idlest_by_walk(sd, p, this_cpu, pct, memo),
        };
        let (ity, is, g) = idlest?;
        let Some((lty, ls)) = local else { return Some(g.clone()) };
        if lty < ity {
            return None;
        }
        if lty > ity {
            return Some(g.clone());
        }
        match lty {
            GroupType::HasSpare => {
                // Stay local unless the other group has clearly more idle CPUs.
                if ls.idle_cpus >= is.idle_cpus || (is.idle_cpus - ls.idle_cpus) <= 1 && ls.nr_running <= is.nr_running + 1 && ls.idle_cpus > 0 {
                    None
                } else {
                    Some(g.clone())
                }
            }
            _ => {
                if 100 * ls.avg_load <= pct * is.avg_load {
                    None
                } else {
                    Some(g.clone())
                }
            }
        }
    }

    /// The forking CPU's own group and the idlest other one, by walking
    /// the domain's groups in the CPU's order (the first of equally idle
    /// ones wins).
    fn idlest_by_walk<'a>(&self, sd: &'a SchedDomain, p: TaskId, this_cpu: Cpu, pct: u64, mut memo: Option<&mut GroupMemo>) -> Picks<'a> {
        let allowed = &self.task(p).cpus_allowed;
        let everywhere = self.task(p).nr_cpus_allowed as usize == self.nr_cpus();
        let mut local: Option<(GroupType, GroupStats)> = None;
        let mut idlest: Option<(GroupType, GroupStats, &CpuMask)> = None;
        // `this_cpu`'s domain lists its own group first.
        let mut ahead = sd.groups.groups().skip(GROUPS_AHEAD);
        for (i, g) in sd.groups.groups().enumerate() {
            if memo.is_none() {
                self.prefetch_group(ahead.next());
            }
            if !everywhere && !g.intersects(allowed) {
                continue;
            }
            let s = self.kept_group_stats(&g, memo.as_deref_mut());
            let ty = s.classify(pct);
            debug_assert_eq!(i == 0, g.contains(this_cpu), "cpu{this_cpu}'s own group is not its first");
            if i == 0 {
                local = Some((ty, s));
                continue;
            }
            let better = match &idlest {
                None => true,
                Some((ity, is, _)) => {
                    ty < *ity
                        || (ty == *ity
                            && match ty {
                                GroupType::HasSpare => (s.idle_cpus, std::cmp::Reverse(s.nr_running)) > (is.idle_cpus, std::cmp::Reverse(is.nr_running)),
                                _ => s.avg_load < is.avg_load,
                            })
                }
            };
            if better {
                idlest = Some((ty, s, g.mask));
            }
        }
        (local, idlest)
    }

    /// [`Self::idlest_by_walk`] through the span's tree in `memo`, for a
    /// task allowed on every CPU. None when the domain's groups are not a
    /// shared span walked as a rotation.
    fn idlest_by_tree<'a>(&self, sd: &'a SchedDomain, pct: u64, memo: &mut GroupMemo) -> Option<Picks<'a>> {
        let (first, lists) = sd.groups.shared().filter(|(_, l)| l.len() >= TREE_MIN_GROUPS)?;
        let local = sd.groups.rotation()?;
        let (ls, pick, _) = memo.tree_pick(Walk::Idlest, first, lists.len(), pct, local, |k| self.group_stats(&lists[k]))?;
        let idlest = pick.map(|(k, s)| (s.classify(pct), s, sd.groups.shared_group(k).mask));
        Some((Some((ls.classify(pct), ls)), idlest))
    }

    fn find_idlest_group_cpu(&self, group: &CpuMask, p: TaskId, this_cpu: Cpu) -> Cpu {
        let allowed = &self.task(p).cpus_allowed;
        let now = self.now();
        let mut best_idle: Option<(Ns, std::cmp::Reverse<Ns>, Cpu)> = None;
        let mut least: Option<(u64, u32, Cpu)> = None;
        for c in group.and(allowed).iter() {
            let c = c as Cpu;
            if self.idle_cpu(c) {
                let since = self.rq(c).idle_since.unwrap_or(now);
                let exit = self.costs.idle_exit_ns(now - since);
                // Shallowest idle state first, then the most recently idled.
                let key = (exit, std::cmp::Reverse(since), c);
                if best_idle.is_none_or(|b| key < b) {
                    best_idle = Some(key);
                }
            } else {
                let key = (self.cpu_load(c), self.rq(c).nr_running, c);
                if least.is_none_or(|l| key < l) {
                    least = Some(key);
                }
            }
        }
        best_idle.map(|b| b.2).or(least.map(|l| l.2)).unwrap_or(this_cpu)
    }
}

/// `sd`'s own group when it is shared (kept in the group memo) and the
/// CPU's walk is a rotation of the shared order (its own group is where
/// the walk starts); read directly, not through the walk's iterator.
fn own_group(sd: &SchedDomain) -> Option<Group<'_>> {
    let (first, _) = sd.groups.shared()?;
    let k = sd.groups.rotation()?;
    let g = sd.groups.shared_group(k);
    debug_assert_eq!(g.id, first + k as u32);
    Some(g)
}
