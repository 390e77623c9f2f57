//! AFL target: `schedlab_fuzz::targets::ext_ops` (see src/targets.rs).
fn main() {
    afl::fuzz!(|data: &[u8]| schedlab_fuzz::targets::ext_ops(data));
}
