//! BPF's division semantics on x86-64: `x / 0 == 0`, `x % 0 == x`, and
//! `MIN / -1 == MIN`, `MIN % -1 == 0` for signed division.
//!
//! x86 raises #DE (SIGFPE) for those. A SIGFPE handler decodes the faulting
//! `div`/`idiv` (legacy prefixes, REX, opcode F6/F7 with ModRM reg 6 or 7,
//! SIB, displacement), reads the divisor from the register or memory
//! operand, writes the BPF result into RAX/RDX (AL/AH for the byte form)
//! and resumes after the instruction. It does so only when the faulting
//! instruction lies in the text of a loaded scheduler; any other SIGFPE
//! goes to the previous disposition (by default, the process dies as it
//! would have). On aarch64 the hardware already returns 0 and `msub`
//! yields x for `x % 0`, so nothing is installed there.

use std::sync::atomic::{AtomicUsize, Ordering};

const SLOTS: usize = 256;
/// Registered executable ranges [start, end); (0, 0) is a free slot.
static RANGES: [(AtomicUsize, AtomicUsize); SLOTS] = [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; SLOTS];

/// Registers executable ranges; returns their slots for [`unregister`].
pub(super) fn register(ranges: &[(usize, usize)]) -> Vec<usize> {
    install();
    super::fault::install();
    let mut slots = Vec::new();
    for &(start, end) in ranges {
        for (i, (s, e)) in RANGES.iter().enumerate() {
            if s.compare_exchange(0, start, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                e.store(end, Ordering::Release);
                slots.push(i);
                break;
            }
        }
    }
    slots
}

pub(super) fn unregister(slots: &[usize]) {
    for &i in slots {
        RANGES[i].1.store(0, Ordering::Release);
        RANGES[i].0.store(0, Ordering::Release);
    }
}

/// Whether `ip` lies in the text of a loaded scheduler (also used by
/// fault.rs).
pub(super) fn in_scheduler_text(ip: usize) -> bool {
    RANGES.iter().any(|(s, e)| {
        let (s, e) = (s.load(Ordering::Acquire), e.load(Ordering::Acquire));
        s != 0 && ip >= s && ip < e
    })
}

/// Where the divisor is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Operand {
    /// A register by x86 number (0 = rAX .. 15 = r15); `high_byte` for AH..BH.
    Reg { reg: u8, high_byte: bool },
    /// base + index * scale + disp, or RIP-relative (from the next instruction).
    Mem { base: Option<u8>, index: Option<(u8, u8)>, disp: i64, rip_relative: bool },
}

/// A decoded `div`/`idiv`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DivInsn {
    pub len: usize,
    /// Operand size in bytes: 1, 2, 4 or 8.
    pub size: u8,
    pub signed: bool,
    pub operand: Operand,
}

/// Decodes the instruction at the start of `code`, if it is a div or idiv.
pub(super) fn decode(code: &[u8]) -> Option<DivInsn> {
    let mut i = 0;
    let mut opsize16 = false;
    while let Some(&b) = code.get(i) {
        match b {
            0x66 => opsize16 = true,
            0x67 | 0xF0 | 0xF2 | 0xF3 | 0x2E | 0x36 | 0x3E | 0x26 | 0x64 | 0x65 => {}
            _ => break,
        }
        i += 1;
        if i > 14 {
            return None;
        }
    }
    let mut rex = 0u8;
    if let Some(&b) = code.get(i) {
        if b & 0xF0 == 0x40 {
            rex = b;
            i += 1;
        }
    }
    let (w, x, b_) = (rex & 8 != 0, (rex >> 1) & 1, rex & 1);
    let op = *code.get(i)?;
    i += 1;
    let size = match op {
        0xF6 => 1,
        0xF7 if w => 8,
        0xF7 if opsize16 => 2,
        0xF7 => 4,
        _ => return None,
    };
    let modrm = *code.get(i)?;
    i += 1;
    let (md, reg, rm) = (modrm >> 6, (modrm >> 3) & 7, modrm & 7);
    let signed = match reg {
        6 => false,
        7 => true,
        _ => return None,
    };
    if md == 3 {
        let high_byte = size == 1 && rex == 0 && (4..8).contains(&rm);
        let reg = if high_byte { rm - 4 } else { rm | (b_ << 3) };
        return Some(DivInsn { len: i, size, signed, operand: Operand::Reg { reg, high_byte } });
    }
    let (mut base, mut index, mut rip_relative) = (Some(rm | (b_ << 3)), None, false);
    let mut disp_len = match md {
        1 => 1,
        2 => 4,
        _ => 0,
    };
    if rm == 4 {
        let sib = *code.get(i)?;
        i += 1;
        let (scale, idx, bs) = (sib >> 6, ((sib >> 3) & 7) | (x << 3), sib & 7);
        if idx != 4 {
            index = Some((idx, 1u8 << scale));
        }
        base = Some(bs | (b_ << 3));
        if bs == 5 && md == 0 {
            base = None;
            disp_len = 4;
        }
    } else if rm == 5 && md == 0 {
        base = None;
        rip_relative = true;
        disp_len = 4;
    }
    let disp = match disp_len {
        1 => *code.get(i)? as i8 as i64,
        4 => i32::from_le_bytes(code.get(i..i + 4)?.try_into().ok()?) as i64,
        _ => 0,
    };
    i += disp_len;
    Some(DivInsn { len: i, size, signed, operand: Operand::Mem { base, index, disp, rip_relative } })
}

/// BPF's (quotient, remainder) where x86 faults, for `size`-byte operands;
/// `dividend` and `divisor` hold the operands in their low bits. None if
/// the fault is of another kind (not C code: a dividend whose high half is
/// not the extension of the low half).
pub(super) fn bpf_result(size: u8, signed: bool, dividend: u64, divisor: u64) -> Option<(u64, u64)> {
    let bits = size as u32 * 8;
    let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let (n, d) = (dividend & mask, divisor & mask);
    if d == 0 {
        return Some((0, n));
    }
    let min = 1u64 << (bits - 1);
    (signed && d == mask && n == min).then_some((min, 0))
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod imp {
    use std::sync::Once;

    use super::*;

    static INSTALL: Once = Once::new();
    static mut OLD: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::uninit();

    /// x86 register number -> index in `gregs`.
    fn greg(reg: u8) -> usize {
        (match reg {
            0 => libc::REG_RAX,
            1 => libc::REG_RCX,
            2 => libc::REG_RDX,
            3 => libc::REG_RBX,
            4 => libc::REG_RSP,
            5 => libc::REG_RBP,
            6 => libc::REG_RSI,
            7 => libc::REG_RDI,
            n => libc::REG_R8 + (n as i32 - 8),
        }) as usize
    }

    extern "C" fn on_sigfpe(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: the kernel passes a ucontext_t for SA_SIGINFO handlers; we
        // only touch the general registers of the interrupted thread.
        let uc = unsafe { &mut *ctx.cast::<libc::ucontext_t>() };
        let g = &mut uc.uc_mcontext.gregs;
        let rip = g[libc::REG_RIP as usize] as usize;
        // SAFETY: reading the siginfo the kernel passed.
        let code = unsafe { (*info).si_code };
        // FPE_INTDIV (1) and FPE_INTOVF (2), <asm-generic/siginfo.h>.
        if (code == 1 || code == 2) && in_scheduler_text(rip) {
            // SAFETY: `rip` is inside a loaded object's executable segment,
            // so up to 15 bytes from it are mapped (segments end on a page
            // boundary past their last instruction).
            let bytes = unsafe { std::slice::from_raw_parts(rip as *const u8, 15) };
            if let Some(d) = decode(bytes) {
                let divisor = match d.operand {
                    Operand::Reg { reg, high_byte } => {
                        let v = g[greg(reg)] as u64;
                        if high_byte {
                            v >> 8
                        } else {
                            v
                        }
                    }
                    Operand::Mem { base, index, disp, rip_relative } => {
                        let mut a = if rip_relative { (rip + d.len) as i64 } else { 0 };
                        a = a.wrapping_add(base.map_or(0, |b| g[greg(b)])).wrapping_add(disp);
                        if let Some((i, s)) = index {
                            a = a.wrapping_add(g[greg(i)].wrapping_mul(s as i64));
                        }
                        // SAFETY: the CPU just read this operand before
                        // raising #DE, so it is mapped and readable.
                        unsafe {
                            match d.size {
                                1 => *(a as *const u8) as u64,
                                2 => (a as *const u16).read_unaligned() as u64,
                                4 => (a as *const u32).read_unaligned() as u64,
                                _ => (a as *const u64).read_unaligned(),
                            }
                        }
                    }
                };
                let rax = g[libc::REG_RAX as usize] as u64;
                let rdx = g[libc::REG_RDX as usize] as u64;
                let dividend = if d.size == 1 { rax & 0xff } else { rax };
                if let Some((q, r)) = bpf_result(d.size, d.signed, dividend, divisor) {
                    let (nrax, nrdx) = match d.size {
                        1 => ((rax & !0xffff) | ((r & 0xff) << 8) | (q & 0xff), rdx),
                        2 => ((rax & !0xffff) | (q & 0xffff), (rdx & !0xffff) | (r & 0xffff)),
                        4 => (q & 0xffff_ffff, r & 0xffff_ffff),
                        _ => (q, r),
                    };
                    g[libc::REG_RAX as usize] = nrax as i64;
                    g[libc::REG_RDX as usize] = nrdx as i64;
                    g[libc::REG_RIP as usize] = (rip + d.len) as i64;
                    return;
                }
            }
        }
        // Another arithmetic fault of hosted code ends its call (fault.rs).
        // SAFETY: the arguments the kernel passed this handler.
        if unsafe { super::super::fault::try_recover(sig, info, ctx) } {
            return;
        }
        // Not ours: restore the previous disposition and let the
        // instruction fault again under it.
        // SAFETY: OLD was filled by sigaction() before this handler could run.
        unsafe { libc::sigaction(sig, (&raw const OLD).cast(), std::ptr::null_mut()) };
    }

    pub(crate) fn install() {
        INSTALL.call_once(|| {
            // SAFETY: a zeroed sigaction is valid; we fill handler, flags and
            // an empty mask, and save the previous action in OLD, written
            // only here, once.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_sigfpe as *const () as usize;
                sa.sa_flags = libc::SA_SIGINFO;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(libc::SIGFPE, &sa, (&raw mut OLD).cast());
            }
        });
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(super) use imp::install;

/// Nothing to do where division by zero does not trap.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
pub fn install() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_div_forms() {
        // div %esi
        assert_eq!(
            decode(&[0xF7, 0xF6]),
            Some(DivInsn { len: 2, size: 4, signed: false, operand: Operand::Reg { reg: 6, high_byte: false } })
        );
        // idiv %r9 (REX.WB)
        assert_eq!(
            decode(&[0x49, 0xF7, 0xF9]),
            Some(DivInsn { len: 3, size: 8, signed: true, operand: Operand::Reg { reg: 9, high_byte: false } })
        );
        // divb %ah (no REX: rm 4 is AH)
        assert_eq!(decode(&[0xF6, 0xF4]).unwrap().operand, Operand::Reg { reg: 0, high_byte: true });
        // divw %cx
        assert_eq!(decode(&[0x66, 0xF7, 0xF1]).unwrap().size, 2);
        // idivl -0x14(%rbp)
        assert_eq!(
            decode(&[0xF7, 0x7D, 0xEC]),
            Some(DivInsn {
                len: 3,
                size: 4,
                signed: true,
                operand: Operand::Mem { base: Some(5), index: None, disp: -0x14, rip_relative: false }
            })
        );
        // divq 0x10(%rax,%rbx,8)
        assert_eq!(
            decode(&[0x48, 0xF7, 0x74, 0xD8, 0x10]).unwrap().operand,
            Operand::Mem { base: Some(0), index: Some((3, 8)), disp: 0x10, rip_relative: false }
        );
        // divl 0x100(%rip)
        let d = decode(&[0xF7, 0x35, 0x00, 0x01, 0x00, 0x00]).unwrap();
        assert_eq!((d.len, d.operand), (6, Operand::Mem { base: None, index: None, disp: 0x100, rip_relative: true }));
        // mul and neg (F7 /4, /3) are not divisions.
        assert_eq!(decode(&[0xF7, 0xE6]), None);
        assert_eq!(decode(&[0xF7, 0xDE]), None);
    }

    #[test]
    fn bpf_results() {
        assert_eq!(bpf_result(8, false, 42, 0), Some((0, 42)));
        assert_eq!(bpf_result(4, true, 0xffff_fffb, 0), Some((0, 0xffff_fffb)));
        assert_eq!(bpf_result(4, true, 0x8000_0000, 0xffff_ffff), Some((0x8000_0000, 0)));
        assert_eq!(bpf_result(8, true, 1 << 63, u64::MAX), Some((1 << 63, 0)));
        assert_eq!(bpf_result(8, false, 1 << 63, u64::MAX), None);
        assert_eq!(bpf_result(4, true, 5, 3), None);
    }
}
