//! strata-compact: offline verification and rewriting of Strata snapshots.
fn main() {}
