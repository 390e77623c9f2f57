//! The kernel objects behaviour programs block on: pipes and sockets
//! (bounded message buffers), futex-backed semaphores and barriers, as
//! [`WaitObj`]s, and spinlocks. exec.rs operates them; the workload
//! builders create them.

use std::collections::VecDeque;

use crate::engine::time::Ns;
use crate::engine::TaskId;

/// A wait object: a bounded token counter with FIFO wait lists, modelling a
/// pipe or socket buffer (messages), a futex-backed semaphore, or a barrier.
#[derive(Clone, Debug, Default)]
pub struct WaitObj {
    /// Tokens available (bytes or messages in the buffer, the semaphore's count).
    pub tokens: u64,
    /// The most tokens the object holds; a writer blocks when full.
    pub capacity: u64,
    /// Tasks blocked waiting for a token.
    pub readers: VecDeque<TaskId>,
    /// Tasks blocked waiting for room.
    pub writers: VecDeque<TaskId>,
    /// LLC of the CPU that last posted: a reader in another LLC pulls the
    /// data's cache lines across.
    pub last_post_llc: Option<u32>,
    /// Request stamps carried by the tokens, in order (Some for objects
    /// that carry them: a Post pushes the poster's stamp, a Wait pops it).
    pub stamps: Option<VecDeque<Option<Ns>>>,
    /// Barrier: tasks arrived in the current round.
    pub arrived: u32,
}

/// A spinlock; waiters busy-wait on their CPUs.
#[derive(Clone, Debug, Default)]
pub struct SpinLock {
    /// The task holding the lock.
    pub holder: Option<TaskId>,
    /// Tasks spinning for it, in arrival order.
    pub spinners: Vec<TaskId>,
    /// Times the lock was taken.
    pub acquisitions: u64,
    /// Total time spent spinning on it, ns.
    pub spin_ns: Ns,
}
