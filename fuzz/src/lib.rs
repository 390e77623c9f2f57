//! schedlab's fuzz targets; see src/targets.rs.
pub mod targets;
