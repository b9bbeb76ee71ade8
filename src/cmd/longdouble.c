/*
 * INCRBYFLOAT in C's `long double`, as Redis computes it: Rust has no 80-bit float, and users
 * expect Redis' exact answers (0.1 + 0.2 -> "0.3", 17 decimals, trailing zeros trimmed).
 * Pure functions: no globals, no allocation.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LD_MAX_CHARS (5 * 1024)

/* Redis' string2ld: the whole string must be a number, no leading space, no NaN. */
static int parse_ld(const char *s, size_t len, long double *out) {
    char buf[LD_MAX_CHARS];
    char *end;
    long double v;
    if (len == 0 || len >= sizeof(buf)) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    v = strtold(buf, &end);
    if (isspace((unsigned char)buf[0]) || end[0] != '\0' ||
        (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || fpclassify(v) == FP_ZERO)) ||
        errno == EINVAL || isnan(v))
        return 0;
    *out = v;
    return 1;
}

/*
 * cur (NULL when the key is missing) + incr, written to out as Redis' "human" long double text.
 * Returns 0 on success, 1 when cur is not a float, 2 when incr is not a float, 3 when the
 * result is NaN or infinite, 4 when out is too small.
 */
int strata_incrbyfloat(const char *cur, size_t cur_len, const char *incr, size_t incr_len,
                       char *out, size_t out_cap, size_t *out_len) {
    long double a = 0, b = 0, v;
    int l;
    if (cur != NULL && !parse_ld(cur, cur_len, &a)) return 1;
    if (!parse_ld(incr, incr_len, &b)) return 2;
    v = a + b;
    if (isnan(v) || isinf(v)) return 3;
    l = snprintf(out, out_cap, "%.17Lf", v);
    if (l < 0 || (size_t)l + 1 > out_cap) return 4;
    if (strchr(out, '.') != NULL) {
        char *p = out + l - 1;
        while (*p == '0') {
            p--;
            l--;
        }
        if (*p == '.') l--;
    }
    if (l == 2 && out[0] == '-' && out[1] == '0') {
        out[0] = '0';
        l = 1;
    }
    *out_len = (size_t)l;
    return 0;
}
