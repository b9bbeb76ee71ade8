#!/usr/bin/env python3
"""Writes docs/benchmarks.md from the measurements benches/report.sh collected.

report.sh runs the servers and strata-bench and leaves one JSON per measurement (strata-bench's
own report plus the server's CPU time and the command line) in $REPORT_RESULTS, and the
redis-benchmark / memtier figures beside them. This script only formats: every figure in the
report comes from a file of this run, and a row without one says "not measured".

Never: writes a figure that no file of this run holds; drops the history of earlier runs.
"""

import glob
import json
import os
import re

env = os.environ
RESULTS = env["REPORT_RESULTS"]
OUT = env["REPORT_OUT"]
CHARTS = env["REPORT_CHARTS"]
HISTORY_START = "<!-- history:start -->"
HISTORY_END = "<!-- history:end -->"
HISTORY_KEEP = 12


def load(name):
    path = os.path.join(RESULTS, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def side(name, ext):
    """(ops/s, command) of a redis-benchmark or memtier figure, or None."""
    path = os.path.join(RESULTS, f"{name}.{ext}")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        rps, command = f.read().rstrip("\n").split("\t", 1)
    return float(rps), command


def ops(r):
    return f"{r['achieved_rate']:,.0f}" if r else "not measured"


def cpu_per_op_us(r):
    if not r or not r["requests"]:
        return None
    return r["server_cpu_s"] * 1e6 / r["requests"]


def fmt(x, digits=3):
    return "-" if x is None else f"{x:.{digits}f}"


def ratio(a, b, digits=2):
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.{digits}f}x"


def lat(r, key):
    p = (r or {}).get("latency_ms") or {}
    return fmt(p.get(key))


def code(command):
    return "`" + command.replace("|", "\\|") + "`"


lines = []
w = lines.append

w("# Benchmarks")
w("")
w("Written by `benches/report.sh` (one command; rerun it to regenerate this page, never edit "
  "the figures by hand). Load from [strata-bench](../tools/README.md#strata-bench), "
  "cross-checked with redis-benchmark (and memtier_benchmark where it is installed). Earlier "
  "runs recorded by hand, with what was tried between them: "
  "[benches/RESULTS.md](../benches/RESULTS.md).")
w("")
w(f"- **Date:** {env['REPORT_DATE']}; Strata commit `{env['REPORT_COMMIT']}`, "
  f"redis-server {env['REPORT_REDIS']}, memcached {env.get('REPORT_MEMCACHED') or 'not installed'}.")
w(f"- **Machine:** {env['REPORT_CORES']} cores ({env['REPORT_CPU']}), {env['REPORT_MEM']}, "
  f"kernel {env['REPORT_KERNEL']}, disk {env['REPORT_DISK']}; load average "
  f"{env['REPORT_LOADAVG']} when the run began.")
if env.get("REPORT_PIN") == "1":
    w(f"- **Placement:** each server alone on CPU {env['REPORT_SERVER_CPU']} (taskset), the load "
      f"on CPU {env['REPORT_CLIENT_CPU']}. Strata `--proactor_threads 1`; redis-server "
      "`--save \"\" --appendonly no`; memcached `-t 1`.")
else:
    w("- **Placement:** not pinned (fewer than 2 CPUs or no taskset): server and load share "
      "the CPUs, so these figures are rough.")
w(f"- **Settings:** `{env['REPORT_SETTINGS']}`.")
w("")

# --- row 1 -------------------------------------------------------------------------------
w("## GET/SET throughput, pipeline 1 and 30")
w("")
pre = load("preload-strata") or load("preload-redis") or {}
pre_keys = f"{pre['keys']:,}" if "keys" in pre else "?"  # the row may not have run (ROWS)
w(f"Closed loop, {pre.get('connections', '?')} connections, {pre.get('value_size', '?')} B values, "
  f"{pre_keys} keys set beforehand (`--preload`), keys drawn uniformly. "
  "CPU per op is the server's CPU time (utime + stime) over the run divided by the requests "
  "answered: on a 2-core machine the client often saturates first, and CPU per op is the "
  "fairer measure of the server.")
w("")
w("| test | pipeline | Strata ops/s | redis-server ops/s | Strata / redis | Strata µs CPU/op "
  "| redis µs CPU/op | redis / Strata CPU per op | Strata p99 ms | redis p99 ms |")
w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
commands = []
history = {}
for test in ("get", "set"):
    for pipe in (1, 30):
        s = load(f"{test}-p{pipe}-strata")
        r = load(f"{test}-p{pipe}-redis")
        sc, rc = cpu_per_op_us(s), cpu_per_op_us(r)
        w(f"| {test.upper()} | {pipe} | {ops(s)} | {ops(r)} | "
          f"{ratio(s and s['achieved_rate'], r and r['achieved_rate'])} | {fmt(sc)} | {fmt(rc)} | "
          f"{ratio(rc, sc)} | {lat(s, 'p99')} | {lat(r, 'p99')} |")
        history[f"{test.upper()} P{pipe}"] = ratio(s and s["achieved_rate"], r and r["achieved_rate"])
        for x in (s, r):
            if x:
                commands.append(x["command_line"])
w("")
w("Commands (each against each server in turn):")
w("")
for c in dict.fromkeys(re.sub(r"--pipeline \d+", "--pipeline P", c) for c in commands):
    w(f"- {code(c)}")
w("")

# Cross-checks: where redis-benchmark or memtier disagree with strata-bench by over 10%.
w("### strata-bench against redis-benchmark and memtier_benchmark")
w("")
w("The same load (connections, pipeline, value size, key space, key names) from the other "
  "tools, against the same server. A difference over 10% is marked **bold**: one of the tools "
  "is then measuring itself rather than the server (on 2 cores, typically the client's own "
  "CPU).")
w("")
w("| server | test | pipeline | strata-bench ops/s | strata-bench client CPU | redis-benchmark ops/s | "
  "difference | memtier ops/s | difference |")
w("|---|---|---:|---:|---:|---:|---:|---:|---:|")
disagree = []
side_commands = []
for name, label in (("strata", "Strata"), ("redis", "redis-server")):
    for test in ("get", "set"):
        for pipe in (1, 30):
            mine = load(f"{test}-p{pipe}-{name}")
            cells = []
            for ext, tool in (("rb", "redis-benchmark"), ("memtier", "memtier_benchmark")):
                other = side(f"{test}-p{pipe}-{name}", ext)
                if not other or not mine:
                    cells += ["not run" if ext == "memtier" else "-", "-"]
                    continue
                side_commands.append(re.sub(r"-n \d+", "-n N", re.sub(r"-P \d+", "-P P", other[1])))
                diff = (other[0] - mine["achieved_rate"]) / mine["achieved_rate"] * 100
                text = f"{diff:+.1f}%"
                if abs(diff) > 10:
                    text = f"**{text}**"
                    disagree.append(
                        f"{tool} on {label} {test.upper()} P{pipe}: {other[0]:,.0f} ops/s against "
                        f"strata-bench's {mine['achieved_rate']:,.0f} ({diff:+.1f}%, "
                        f"{tool} {'higher' if diff > 0 else 'lower'})")
                cells += [f"{other[0]:,.0f}", text]
            if mine:
                w(f"| {label} | {test.upper()} | {pipe} | {ops(mine)} | "
                  f"{mine['client_cpu_percent']:.0f}% | " + " | ".join(cells) + " |")
w("")
if disagree:
    w("Over 10% apart: " + "; ".join(disagree) + ".")
else:
    w("No tool disagrees with strata-bench by more than 10%.")
w("")
for c in dict.fromkeys(side_commands):
    note = " (`-n`: as many requests as strata-bench answered)" if " -n N " in c else ""
    w(f"- {code(c)}{note}")
w("")

# --- the seeds' shapes --------------------------------------------------------------------
w("## The seeds' shapes, one core each")
w("")
w("The shapes of the published comparisons, scaled to one server core: the 1:1 SET:GET mix at "
  "pipeline 75 with 100 B values over sequential keys, and SETs with an expiry range (SET EX), "
  "closed loop, a fresh server each. Server CPU is the share of its one core it used.")
w("")
w("| shape | Strata ops/s | redis-server ops/s | Strata / redis | Strata server CPU "
  "| redis server CPU | Strata µs CPU/op | redis µs CPU/op | redis / Strata CPU per op |")
w("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
shape_commands = []


def cpu_share(r):
    if not r or not r["seconds"]:
        return "-"
    return f"{100 * r['server_cpu_s'] / r['seconds']:.0f}%"


for key, label in (("mix-p75", "1:1 SET:GET, pipeline 75, 100 B, sequential keys"),
                   ("setex-p30", "SET EX, pipeline 30")):
    s_, r_ = load(f"{key}-strata"), load(f"{key}-redis")
    sc, rc = cpu_per_op_us(s_), cpu_per_op_us(r_)
    if s_ and key == "mix-p75":
        label = label.replace("sequential keys", f"{s_['keys']:,} sequential keys")
    if s_ and key == "setex-p30":
        label = label.replace("SET EX", f"SET EX {s_['expiry']} s")
    w(f"| {label} | {ops(s_)} | {ops(r_)} | "
      f"{ratio(s_ and s_['achieved_rate'], r_ and r_['achieved_rate'])} | {cpu_share(s_)} | "
      f"{cpu_share(r_)} | {fmt(sc)} | {fmt(rc)} | {ratio(rc, sc)} |")
    for x in (s_, r_):
        if x:
            shape_commands.append(x["command_line"])
w("")
for c in dict.fromkeys(shape_commands):
    w(f"- {code(c)}")
w("")

# --- row 2 -------------------------------------------------------------------------------
w("## Fixed-rate sweep")
w("")
ss, rs = load("sweep-strata"), load("sweep-redis")
any_sweep = ss or rs
if any_sweep:
    w(f"Open loop: requests leave on a timetable over {any_sweep['connections']} connections, "
      f"{any_sweep['ratio']} SET:GET, {any_sweep['value_size']} B values over "
      f"{any_sweep['keys']:,} preloaded keys, {any_sweep['duration']:g} s per level; latency counts "
      "from each request's scheduled time, so a stall shows. **NS**: not sustained, the achieved "
      "rate under 97% of the requested one. Client CPU is strata-bench's own (one thread): near "
      "100%, the load generator and not the server may be the limit. Send lag is how late the "
      "client wrote requests after their due time (it counts in the latencies): large, the "
      "client, not the server, fell behind.")
    w("")
    w("| requested ops/s | Strata achieved | Strata p50 ms | Strata p99 ms | redis achieved "
      "| redis p50 ms | redis p99 ms | client CPU (Strata / redis runs) "
      "| client send lag p99 ms (Strata / redis runs) |")
    w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def by_rate(s):
        return {lv["rate"]: lv for lv in (s or {}).get("levels", [])}

    sl, rl = by_rate(ss), by_rate(rs)

    def achieved(lv):
        if not lv:
            return "not measured"
        ns = "" if lv.get("sustained", True) else " **NS**"
        return f"{lv['achieved_rate']:,.0f}{ns}"

    def best(levels):
        ok = [rate for rate, lv in levels.items() if lv.get("sustained")]
        return f"{max(ok):,.0f}" if ok else "none"

    for rate in sorted(set(sl) | set(rl)):
        a, b = sl.get(rate), rl.get(rate)
        cpu = " / ".join(f"{lv['client_cpu_percent']:.0f}%" if lv else "-" for lv in (a, b))
        lag = " / ".join(fmt(((lv or {}).get("send_lag_ms") or {}).get("p99")) for lv in (a, b))
        w(f"| {rate:,.0f} | {achieved(a)} | {lat(a, 'p50')} | {lat(a, 'p99')} | {achieved(b)} "
          f"| {lat(b, 'p50')} | {lat(b, 'p99')} | {cpu} | {lag} |")
    w("")
    w(f"Highest sustained level: Strata {best(sl)}/s, redis-server {best(rl)}/s.")
    history["sweep best S/R"] = f"{best(sl)} / {best(rl)}"
    w("")
    rel = os.path.relpath(CHARTS, os.path.dirname(OUT))
    if os.path.exists(os.path.join(CHARTS, "sweep.svg")):
        w(f"![p50 and p99 latency against the requested rate, Strata and redis-server]({rel}/sweep.svg)")
        w("")
    w(f"- {code(any_sweep['command_line'])}, then `strata-bench chart --svg "
      f"docs/benchmarks/sweep.svg Strata=STRATA.json redis-server=REDIS.json`")
else:
    w("Not measured in this run.")
w("")

# --- memcached protocols --------------------------------------------------------------------
w("## memcached protocols")
w("")
mc = load("mc-preload-memcache-strata") or load("mc-preload-memcache-memcached")
if mc:
    w(f"Strata's `--memcached_port` against `memcached -t 1`, closed loop, {mc['connections']} "
      f"connections, {mc['value_size']} B values, {mc['keys']:,} keys preloaded, text protocol "
      "(`memcache`) and binary (`memcache-binary`).")
    w("")
    w("| protocol | test | pipeline | Strata ops/s | memcached ops/s | Strata / memcached "
      "| Strata µs CPU/op | memcached µs CPU/op | memcached / Strata CPU per op "
      "| Strata p99 ms | memcached p99 ms |")
    w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    mc_commands = []
    for proto in ("memcache", "memcache-binary"):
        for test in ("get", "set"):
            for pipe in (1, 30):
                s_ = load(f"mc-{proto}-{test}-p{pipe}-strata")
                m = load(f"mc-{proto}-{test}-p{pipe}-memcached")
                sc, mcpu = cpu_per_op_us(s_), cpu_per_op_us(m)
                w(f"| {proto} | {test} | {pipe} | {ops(s_)} | {ops(m)} | "
                  f"{ratio(s_ and s_['achieved_rate'], m and m['achieved_rate'])} | {fmt(sc)} | "
                  f"{fmt(mcpu)} | {ratio(mcpu, sc)} | {lat(s_, 'p99')} | {lat(m, 'p99')} |")
                if proto == "memcache":  # the history column is the text protocol's
                    history[f"mc {test} P{pipe}"] = ratio(
                        s_ and s_["achieved_rate"], m and m["achieved_rate"])
                for x in (s_, m):
                    if x:
                        mc_commands.append(re.sub(r"--pipeline \d+", "--pipeline P", x["command_line"]))
    w("")
    for c in dict.fromkeys(mc_commands):
        w(f"- {code(c)} (Strata: the port given by `--memcached_port`)")
else:
    w("Not measured in this run.")
w("")

# --- memory per key ----------------------------------------------------------------------------
w("## Memory per key")
w("")


def rss(name):
    path = os.path.join(RESULTS, name + ".rss")
    if not os.path.exists(path):
        return None
    before, after = (int(x) for x in open(path).read().split())
    return before, after


mem_rows = []
for size in (1024, 32):
    cells = {}
    for server in ("strata", "redis", "memcached"):
        r = rss(f"mem-{size}-{server}")
        j = load(f"mem-{size}-{server}")
        if r and j and j.get("keys"):
            cells[server] = ((r[1] - r[0]) * 1024 / j["keys"], j)
    if cells:
        mem_rows.append((size, cells))
if mem_rows:
    keys = next(iter(mem_rows[0][1].values()))[1]["keys"]
    w(f"RSS after SETting {keys:,} keys (12-character names) of the value size less the empty "
      "server's RSS, over the keys: bytes per key, a fresh server for each (lower is better).")
    w("")
    w("| value | Strata B/key | redis-server B/key | memcached B/key | Strata / redis "
      "| Strata / memcached |")
    w("|---:|---:|---:|---:|---:|---:|")
    mem_commands = []
    for size, cells in mem_rows:
        def b(server):
            return f"{cells[server][0]:,.0f}" if server in cells else "not measured"
        st = cells.get("strata", (None,))[0]
        w(f"| {size} B | {b('strata')} | {b('redis')} | {b('memcached')} | "
          f"{ratio(st, cells.get('redis', (None,))[0])} | "
          f"{ratio(st, cells.get('memcached', (None,))[0])} |")
        history[f"mem {size}B S/R"] = ratio(st, cells.get("redis", (None,))[0])
        for _, j in cells.values():
            mem_commands.append(re.sub(r"--value-size \d+", "--value-size B", j["command_line"]))
    w("")
    for c in dict.fromkeys(mem_commands):
        w(f"- {code(c)}, RSS from /proc/PID/status before and after")
else:
    w("Not measured in this run.")
w("")

# --- the other benches/ scripts ------------------------------------------------------------------
# Each ran on its own with the command shown; its printed summary (from the marker line on)
# is copied here as it printed it.
SCRIPT_ROWS = (
    ("types", "Memory of the collection types", r"^RSS after loading",
     "Collections loaded with `redis-cli --pipe` into a fresh Strata and redis-server each; "
     "the goal is Strata / redis <= 0.8 for every type."),
    ("snapshot", "Snapshots under writes: memory and time against BGSAVE", r"^Snapshot of ",
     "Strata's forkless snapshot against redis-server's fork-based BGSAVE under a continuous "
     "SET load; the goal is a peak/idle memory ratio of at most 1.05."),
    ("tiering", "Tiered GET against the disk", r"^Tiering benchmark:",
     "GETs of values offloaded to the SSD tier against the disk's own 4 KiB random-read rate "
     "measured in the same run, RAM per offloaded key, and a hot/cold workload against an "
     "all-in-RAM server."),
    ("hitratio", "Hit ratio", r"^Hit ratio = hits",
     "A cache-aside trace (GET; on a miss SET) replayed into each server at the same memory: "
     "redis-server's allkeys-lru and allkeys-lfu, Strata's --cache_mode in RAM and with the SSD "
     "tier (and memcached, where the script runs it)."),
    ("pubsub", "Pub/sub delivery latency", r"^pub/sub delivery latency:",
     "`strata-bench pubsub`: subscribers on their own connections, one publisher on an open-loop "
     "timetable, latency from each message's scheduled publish time."),
)
for rid, title, marker, about in SCRIPT_ROWS:
    w(f"## {title}")
    w("")
    out = os.path.join(RESULTS, rid + ".out")
    cmd = os.path.join(RESULTS, rid + ".cmd")
    if not os.path.exists(cmd):
        w("Not measured in this run.")
        w("")
        continue
    command = open(cmd).read().strip()
    text = open(out).read().splitlines() if os.path.exists(out) else []
    start = next((i for i, l in enumerate(text) if re.search(marker, l)), None)
    w(about)
    w("")
    if command.endswith("(failed)") or start is None:
        w(f"The script failed in this run: {code(command)}.")
    else:
        w("```")
        w("\n".join(l.rstrip() for l in text[start:]).strip("\n"))
        w("```")
        w("")
        w(f"- {code(command)}")
    w("")

# --- not yet -----------------------------------------------------------------------------
w("## Not measured here")
w("")
not_here = []
if not glob.glob(os.path.join(RESULTS, "*.memtier")):
    not_here.append("memtier_benchmark's closed-loop figures, where it is installed (the "
                    "cross-check table fills in when it is; it is built from source).")
for item in not_here + [
    "The multi-core section: `benches/report_cores.sh --cores N` (Strata on N cores against N "
    "redis-server processes, keys split by hash slot) writes "
    "[benchmarks-cores.md](benchmarks-cores.md) where the machine has more than N CPUs.",
]:
    w(f"- {item}")
w("")

# --- history -----------------------------------------------------------------------------
w("## History")
w("")
w("Newest first; the ratios are Strata / redis-server ops/s (mc: Strata / memcached over the "
  "text protocol; mem: bytes per key) on the machine of that run.")
w("")
cols = ["GET P1", "GET P30", "SET P1", "SET P30", "sweep best S/R", "mc get P30", "mem 1024B S/R"]
w(HISTORY_START)
w("| date | commit | machine | " + " | ".join(cols) + " |")
w("|---|---|---|" + "---:|" * len(cols))
old = []
if os.path.exists(OUT):
    text = open(OUT).read()
    if HISTORY_START in text and HISTORY_END in text:
        block = text.split(HISTORY_START, 1)[1].split(HISTORY_END, 1)[0]
        old = [l for l in block.strip().splitlines()[2:] if l.startswith("|")]
machine = f"{env['REPORT_CORES']} cores, {env['REPORT_KERNEL']}"
new = (f"| {env['REPORT_DATE']} | `{env['REPORT_COMMIT']}` | {machine} | "
       + " | ".join(history.get(c, "-") for c in cols) + " |")
for row in [new] + old[: HISTORY_KEEP - 1]:
    w(row)
w(HISTORY_END)
w("")

os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT + ".tmp", "w") as f:
    f.write("\n".join(lines))
os.replace(OUT + ".tmp", OUT)
