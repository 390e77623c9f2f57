//! AFL target: `schedlab_fuzz::targets::import_perfetto` (see src/targets.rs).
fn main() {
    afl::fuzz!(|data: &[u8]| schedlab_fuzz::targets::import_perfetto(data));
}
