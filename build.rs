//! Compiles the small C helper that gives INCRBYFLOAT Redis' `long double` arithmetic.
fn main() {
    println!("cargo:rerun-if-changed=src/cmd/longdouble.c");
    cc::Build::new()
        .file("src/cmd/longdouble.c")
        .warnings(true)
        .compile("strata_longdouble");
}
