//! AFL target: `schedlab_fuzz::targets::tracefs` (see src/targets.rs).
fn main() {
    afl::fuzz!(|data: &[u8]| schedlab_fuzz::targets::tracefs(data));
}
