/* Strata: the C entry of redis.call / redis.pcall. A Lua call into a C function may carry up
 * to LUAI_MAXCSTACK arguments (scripts pass thousands with unpack), more than can be passed
 * on to a second function; this packs them into one table and calls the Rust side (upvalue 1)
 * with (table, count). Being a C function, it also keeps the script's frame on the stack for
 * the error handler (a Lua wrapper would be a tail call). */
#include "lua.h"
#include "lauxlib.h"

static int strata_pack_and_call(lua_State *L) {
    int n = lua_gettop(L);
    int i;
    lua_createtable(L, n, 0);
    lua_insert(L, 1);
    for (i = n; i >= 1; i--) lua_rawseti(L, 1, i);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_pushinteger(L, n);
    lua_call(L, 2, LUA_MULTRET);
    return lua_gettop(L);
}

/* strata_wrap_call(f): a C closure calling f(args_table, count). */
int strata_wrap_call(lua_State *L) {
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_settop(L, 1);
    lua_pushcclosure(L, strata_pack_and_call, 1);
    return 1;
}
