//! Compiles the small C helper that gives INCRBYFLOAT Redis' `long double` arithmetic, and the
//! Lua libraries Redis bundles for scripts (cjson, cmsgpack, bit, struct: their C sources as
//! Redis 7.0.15 ships them, MIT/BSD-style licences, in lua-libs/), against the headers of the
//! Lua 5.1 that mlua vendors.
fn main() {
    println!("cargo:rerun-if-changed=src/cmd/longdouble.c");
    cc::Build::new()
        .file("src/cmd/longdouble.c")
        .warnings(true)
        .compile("strata_longdouble");
    println!("cargo:rerun-if-changed=lua-libs");
    cc::Build::new()
        .include("lua-libs/include")
        .files([
            "lua-libs/lua_cjson.c",
            "lua-libs/strbuf.c",
            "lua-libs/fpconv.c",
            "lua-libs/lua_cmsgpack.c",
            "lua-libs/lua_bit.c",
            "lua-libs/lua_struct.c",
            "lua-libs/strata_call.c",
        ])
        .define("ENABLE_CJSON_GLOBAL", None)
        .warnings(false)
        .compile("strata_lualibs");
}
