//! The system calls real mode makes, each wrapped once. All `unsafe` of the
//! real executor lives here.

use std::io;

pub use libc::pid_t;

fn check(r: libc::c_long) -> io::Result<libc::c_long> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// This thread's CPU time (CLOCK_THREAD_CPUTIME_ID) in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec { tv_sec: (ns / 1_000_000_000) as libc::time_t, tv_nsec: (ns % 1_000_000_000) as libc::c_long }
}

/// clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) until `at`, as cyclictest.
pub fn sleep_until(at: u64) {
    let ts = timespec(at);
    loop {
        // SAFETY: ts is a valid timespec; no remainder is needed for TIMER_ABSTIME.
        let r = unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
        if r != libc::EINTR {
            return;
        }
    }
}

/// gettid(2): the calling thread's id.
pub fn gettid() -> pid_t {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as pid_t }
}

/// sched_yield(2).
pub fn sched_yield() {
    // SAFETY: no arguments.
    unsafe { libc::sched_yield() };
}

/// The CPU this thread runs on.
pub fn current_cpu() -> u32 {
    // SAFETY: no arguments.
    unsafe { libc::sched_getcpu().max(0) as u32 }
}

/// `struct sched_attr` (include/uapi/linux/sched/types.h), SCHED_ATTR_SIZE_VER0.
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

/// Scheduling policies as sched_setattr(2) takes them (include/uapi/linux/sched.h).
pub const SCHED_OTHER: u32 = 0;
/// SCHED_FIFO.
pub const SCHED_FIFO: u32 = 1;
/// SCHED_RR.
pub const SCHED_RR: u32 = 2;
/// SCHED_BATCH.
pub const SCHED_BATCH: u32 = 3;
/// SCHED_IDLE.
pub const SCHED_IDLE: u32 = 5;
/// SCHED_EXT (6.12+).
pub const SCHED_EXT: u32 = 7;

/// sched_setattr(tid, policy, nice, RT priority, custom slice) — the slice
/// goes in sched_runtime, which fair tasks read as their request since 6.12.
pub fn sched_setattr(tid: pid_t, policy: u32, nice: i32, prio: u32, slice_ns: u64) -> io::Result<()> {
    let attr = SchedAttr { size: std::mem::size_of::<SchedAttr>() as u32, sched_policy: policy, sched_nice: nice, sched_priority: prio, sched_runtime: slice_ns, ..Default::default() };
    // SAFETY: attr is a valid sched_attr whose size field matches its layout.
    check(unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &attr as *const SchedAttr, 0u32) }).map(|_| ())
}

/// sched_setaffinity(tid, cpus).
pub fn sched_setaffinity(tid: pid_t, cpus: &[usize]) -> io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is valid; CPU_SET stays within it for cpu < CPU_SETSIZE.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c < libc::CPU_SETSIZE as usize {
            // SAFETY: c is within the set.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
    }
    // SAFETY: set is a valid cpu_set_t of the size passed.
    check(unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) } as libc::c_long).map(|_| ())
}

/// Sets this thread's name (comm), cut to 15 bytes.
pub fn set_thread_name(name: &str) {
    let mut buf = [0u8; 16];
    for (i, b) in name.bytes().take(15).enumerate() {
        buf[i] = if b == 0 { b'_' } else { b };
    }
    // SAFETY: buf is NUL-terminated.
    unsafe { libc::prctl(libc::PR_SET_NAME, buf.as_ptr()) };
}

/// An anonymous shared mapping, inherited across fork.
pub fn map_shared(len: usize) -> io::Result<*mut u8> {
    // SAFETY: an anonymous mapping with no address hint.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len.max(1), libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0) };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p as *mut u8)
    }
}

/// # Safety
/// `p`/`len` must come from `map_shared` and nothing may use the mapping after.
pub unsafe fn unmap(p: *mut u8, len: usize) {
    libc::munmap(p as *mut libc::c_void, len.max(1));
}

/// A pipe (non-blocking both ends, so waits go through poll with a deadline).
pub fn pipe() -> io::Result<(i32, i32)> {
    let mut fds = [0i32; 2];
    // SAFETY: fds has room for two descriptors.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } as libc::c_long)?;
    Ok((fds[0], fds[1]))
}

/// A unix stream socket pair (hackbench's default), non-blocking.
pub fn socketpair() -> io::Result<(i32, i32)> {
    let mut fds = [0i32; 2];
    // SAFETY: fds has room for two descriptors.
    check(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) } as libc::c_long)?;
    Ok((fds[0], fds[1]))
}

/// Waits until `fd` is readable (or writable) or `deadline` passes; false on timeout.
pub fn poll_until(fd: i32, write: bool, deadline: u64) -> bool {
    let events = if write { libc::POLLOUT } else { libc::POLLIN };
    loop {
        let now = now_ns();
        if now >= deadline {
            return false;
        }
        let ms = ((deadline - now) / 1_000_000).clamp(1, 1000) as i32;
        let mut p = libc::pollfd { fd, events, revents: 0 };
        // SAFETY: p is one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        if r > 0 {
            return true;
        }
    }
}

/// read(2) / write(2) of a whole message on a non-blocking descriptor,
/// waiting with poll; false when the deadline passed first.
pub fn xfer(fd: i32, buf: &mut [u8], write: bool, deadline: u64) -> bool {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the pointer and length stay within buf.
        let r = unsafe {
            if write {
                libc::write(fd, buf[done..].as_ptr() as *const libc::c_void, buf.len() - done)
            } else {
                libc::read(fd, buf[done..].as_mut_ptr() as *mut libc::c_void, buf.len() - done)
            }
        };
        if r > 0 {
            done += r as usize;
            continue;
        }
        if r == 0 {
            return false; // EOF: the other end is gone
        }
        let e = io::Error::last_os_error().raw_os_error();
        if e == Some(libc::EAGAIN) || e == Some(libc::EINTR) {
            if !poll_until(fd, write, deadline) {
                return false;
            }
            continue;
        }
        return false;
    }
    true
}

/// FUTEX_WAIT on a shared word while it holds `val`, until `deadline`.
pub fn futex_wait(word: &std::sync::atomic::AtomicU32, val: u32, deadline: u64) {
    let now = now_ns();
    if now >= deadline {
        return;
    }
    let ts = timespec((deadline - now).min(100_000_000));
    // SAFETY: word is a valid, aligned u32 for the lifetime of the call.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, val, &ts as *const libc::timespec, 0, 0) };
}

/// FUTEX_WAKE of up to `n` waiters (shared, not private: waiters may be in other processes).
pub fn futex_wake(word: &std::sync::atomic::AtomicU32, n: i32) {
    // SAFETY: word is a valid, aligned u32.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, n, 0, 0, 0) };
}

/// fork(2): 0 in the child, the child's pid in the parent.
pub fn fork() -> io::Result<pid_t> {
    // SAFETY: the child only runs the executor, which uses glibc's fork-safe
    // allocator and its own descriptors and mappings.
    check(unsafe { libc::fork() } as libc::c_long).map(|p| p as pid_t)
}

/// The child dies with its parent (prctl PR_SET_PDEATHSIG).
pub fn die_with_parent() {
    // SAFETY: plain prctl.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
}

/// _exit(2): ends a forked worker without running the parent's exit handlers.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and runs no atexit handlers (the parent owns those).
    unsafe { libc::_exit(code) }
}

/// kill(2); a negative `pid` signals a process group.
pub fn kill(pid: pid_t, sig: i32) {
    // SAFETY: plain kill.
    unsafe { libc::kill(pid, sig) };
}

/// Stops `leader`'s process group (spawned with `process_group(0)`) and
/// everything in it: SIGTERM first, so scripts run their cleanup traps,
/// then, once the leader has exited or `grace` has passed, SIGKILL for
/// whatever is left (a qemu or a compiler that ignored SIGTERM), and the
/// leader reaped.
pub fn stop_group(leader: &mut std::process::Child, grace: std::time::Duration) {
    let pgid = leader.id() as pid_t;
    kill(-pgid, libc::SIGTERM);
    let t0 = std::time::Instant::now();
    while t0.elapsed() < grace && matches!(leader.try_wait(), Ok(None)) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    kill(-pgid, libc::SIGKILL);
    let _ = leader.wait();
    // Until the last of the group is gone (reaped by its new parent).
    let t0 = std::time::Instant::now();
    // SAFETY: kill with signal 0 only checks that the group exists.
    while unsafe { libc::kill(-pgid, 0) } == 0 && t0.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// waitpid(pid, WNOHANG): Some(status) once the child has exited.
pub fn try_wait(pid: pid_t) -> Option<i32> {
    let mut status = 0;
    // SAFETY: status is writable.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    (r == pid || r < 0).then_some(status)
}

/// close(2), errors ignored.
pub fn close(fd: i32) {
    // SAFETY: closing a descriptor this process owns.
    unsafe { libc::close(fd) };
}

static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Catches SIGINT, SIGTERM and SIGHUP into a flag, so the controller can kill
/// and reap every child before it exits.
pub fn catch_interrupts() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(sig, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t) };
    }
}

/// Restores default signal dispositions in a worker process; SIGCHLD is
/// ignored there so forked children (stress fork) are reaped by the kernel.
pub fn default_signals_in_child() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: setting a default disposition.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
    // SAFETY: setting a disposition.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
}

/// A signal caught by [`catch_interrupts`] has arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Forgets a caught signal and restores the default dispositions.
pub fn clear_interrupts() {
    INTERRUPTED.store(false, std::sync::atomic::Ordering::SeqCst);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: setting a default disposition.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
}

/// The effective user is root.
pub fn is_root() -> bool {
    // SAFETY: no arguments.
    unsafe { libc::geteuid() == 0 }
}

/// RLIMIT_RTPRIO's soft limit: the highest RT priority an unprivileged process may set.
pub fn rtprio_limit() -> u64 {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: r is writable.
    unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut r) };
    #[allow(clippy::unnecessary_cast)] // rlim_t is u64 here, u32 on some other targets
    let cur = r.rlim_cur as u64;
    cur
}

/// The online CPUs this process may use.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: zeroed cpu_set_t is valid and of the size passed.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is writable.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return vec![0];
    }
    // SAFETY: reading bits within the set.
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

/// mount -t tracefs nodev `at`.
pub fn mount_tracefs(at: &std::path::Path) -> io::Result<()> {
    let at = std::ffi::CString::new(at.as_os_str().as_encoded_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: every pointer is a NUL-terminated string that outlives the call; no mount data.
    let r = unsafe { libc::mount(c"nodev".as_ptr(), at.as_ptr(), c"tracefs".as_ptr(), 0, std::ptr::null()) };
    check(r as libc::c_long).map(|_| ())
}

/// umount `at` (fails with EBUSY while it is in use).
pub fn umount(at: &std::path::Path) -> io::Result<()> {
    let at = std::ffi::CString::new(at.as_os_str().as_encoded_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a NUL-terminated path that outlives the call.
    check(unsafe { libc::umount(at.as_ptr()) } as libc::c_long).map(|_| ())
}

/// USER_HZ, the unit of /proc/stat.
pub fn clock_ticks() -> u64 {
    // SAFETY: plain sysconf.
    (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).max(1) as u64
}

/// prctl(PR_SET_TIMERSLACK): this thread's timer slack in ns (0 restores
/// the default it inherited).
pub fn set_timer_slack(ns: u64) -> io::Result<()> {
    // SAFETY: plain prctl with an integer argument.
    check(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong) } as libc::c_long).map(|_| ())
}

/// prctl(PR_GET_TIMERSLACK): this thread's timer slack in ns.
pub fn timer_slack() -> u64 {
    // SAFETY: plain prctl.
    (unsafe { libc::prctl(libc::PR_GET_TIMERSLACK) }).max(0) as u64
}

/// waitpid(pid, 0): blocks until the child has exited; its status.
pub fn wait_child(pid: pid_t) -> io::Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: status is writable.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(status);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// A blocking pipe as two files: (read end, write end), close-on-exec.
pub fn pipe_files() -> io::Result<(std::fs::File, std::fs::File)> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0i32; 2];
    // SAFETY: fds has room for two descriptors.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } as libc::c_long)?;
    // SAFETY: pipe2 just returned these two descriptors, owned by nothing else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((std::fs::File::from(r), std::fs::File::from(w)))
}
