#!/usr/bin/env python3
"""The benchmark's results: from the guests' lines to JSON, then to a table and a plot.

    bench-report.py collect JSON BOOTDIR...
        scripts/bench runs this. Each BOOTDIR is one boot of the two guests:
        plan.txt (the steps; see tests/guest/bench.sh), raw.txt (the guests'
        BENCH lines, each prefixed with the guest's number), boot.json (vCPUs,
        seconds, exit status) and guest1/, guest2/ (folded profiles). The
        settings and facts about the run come from the environment
        (ROXE_BENCH_* and BENCH_*, which scripts/bench exports). Writes JSON
        and exits 1 if any expected sample or profile is missing or invalid.

    bench-report.py report JSON [--png FILE | --no-plot]
        Prints the tables and draws bandwidth against message size (FILE,
        default bench.png next to JSON; needs matplotlib). Works on any
        results.json on its own.

The tables. A cell is one test at one size for one driver, in one
configuration (vCPUs, netdev MTU, QPs); it has one sample per round. Each
driver's column shows the cell's median and, in brackets, its min-max over
the rounds. A ratio (roxe/rxe, roxe/siw, roxe/TCP) is the ratio of the
medians, and its bracket is the range the samples allow: from roxe's worst
sample against the other's best to roxe's best against the other's worst.
The verdict is "win" or "loss" when that whole range is on one side of 1
(every roxe sample beat, or lost to, every sample of the other), "tie" when
it takes in 1, and "n<3" when either side has fewer than 3 samples. For
MB/s and kpps higher is better; for latency and CPU per GB lower is better,
so a win there is a ratio below 1. With more than one configuration, each
is also set against the first (its medians over the first's).

results.json holds "meta" (command, mode, kernel flavour, wire, times,
versions, the boots), "settings", "measurements" (every sample), "summary"
(each cell's count, median, min and max), "devices" (each driver's active
MTU per netdev MTU, from ibv_devinfo), "profiles" and "missing". Each
measurement has cpus, mtu, qps, round, step, driver, test, kind (bw, lat or
tcp), size (bytes), iters (per QP; perftest's -n), attempt (2 or 3 if perftest's clock
calibration or the CM's start failed before, or an rxe or siw run failed), bytes moved, and as they apply:
bw_mib_s and bw_peak_mib_s (MiB/s: perftest's "MB/sec" is 2^20 bytes per
second; iperf3's rate is converted to the same unit), bw_window_mib_s (the
bytes over the client's whole run, start-up included: a lower bound that
does not depend on perftest's clock), msg_rate_mpps, lat_typical_us,
lat_avg_us, lat_min_us, lat_max_us, lat_p99_us; cpu (busy and kernel CPU
seconds of each guest over its window, all its vCPUs added up, and their
sums); cpu_s_per_gb and kernel_cpu_s_per_gb (both guests' CPU seconds per
10^9 bytes moved). Each profile has driver, test, size, side (server is
guest 1, client guest 2), samples (perf's count), cpu_s (the CPU time
they stand for), the folded stacks' file, and shares of that time: idle,
user space and kernel (by the frame that was running), under the driver's
module (stacks through one of its kernel functions) and under its user-space
provider library; "top" lists the functions with the most time of their own
(leaf frames), "module_top" the module's functions with the most time
inside them (their callees included).
"""

import json
import math
import os
import re
import shlex
import statistics
import sys

DRIVERS = ("rxe", "siw", "roxe")
MIB = 1 << 20
MIN_VERDICT = 3
# Frames that mean the CPU had nothing to do (the idle loop under TCG).
IDLE = re.compile(r"(^|;)(default_idle|pv_native_safe_halt|native_safe_halt|cpu_idle_poll|"
                  r"acpi_idle_do_entry|mwait_idle|intel_idle|do_idle)(_\[k\])?(;|$)")
# Each driver's own frames: kernel frames (inferno marks them _[k]) of its
# module (roxe's Rust crate is roxe_main, its C helpers roxe_*), and user
# frames of its libibverbs provider (libroxe's Rust crate is roxe; Debian's
# librxe has no symbols).
MODULE_FRAME = {
    "roxe": re.compile(r"^<*roxe_main::|^<*roxe_"),
    "rxe": re.compile(r"^<*rxe_"),
    "siw": re.compile(r"^<*siw_"),
}
LIBRARY_FRAME = {
    "roxe": re.compile(r"^<*roxe::"),
    "rxe": re.compile(r"librxe"),
    "siw": re.compile(r"libsiw"),
}


def fail(msg):
    print(f"bench-report: error: {msg}", file=sys.stderr)
    sys.exit(1)


# --- collect -----------------------------------------------------------------

def parse_plan(path):
    """Return the plan's steps: [(step, round, mtu, op, args)], numbered as the guests number them."""
    steps, rnd, mtu = [], None, None
    with open(path) as f:
        for n, line in enumerate(f, 1):
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            op, args = words[0], words[1:]
            if op == "round":
                rnd = args[0]
            elif op == "mtu":
                mtu = int(args[0])
            steps.append((n, rnd, mtu, op, args))
    return steps


def parse_raw(path):
    """Return (runs, devices, profiles) from the BENCH lines.

    runs: {step: {attempt: {"client": fields, "server": fields}}};
    devices: [fields]; profiles: {(step, side): fields}.
    """
    runs, devices, profiles = {}, [], {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                guest, *words = shlex.split(line)
                fields = dict(w.split("=", 1) for w in words)
                step = int(fields["step"])
                attempt = int(fields.get("attempt", "1"))
            except (ValueError, KeyError) as e:
                fail(f"{path}:{n}: cannot parse ({e}): {line.strip()}")
            side, kind = fields.get("side"), fields.get("kind")
            if side not in ("client", "server"):
                fail(f"{path}:{n}: no side=: {line.strip()}")
            fields["guest"] = guest
            if kind == "device":
                devices.append(fields)
            elif kind == "profile":
                profiles[(step, side)] = fields
            elif kind == "run":
                sides = runs.setdefault(step, {}).setdefault(attempt, {})
                if side in sides:
                    fail(f"{path}:{n}: a second {side} line for step {step}, attempt {attempt}")
                sides[side] = fields
            else:
                fail(f"{path}:{n}: unknown kind={kind}: {line.strip()}")
    return runs, devices, profiles


def columns(header):
    """perftest's column names: '#bytes', 'BW average[MB/sec]', ..."""
    return [c.strip() for c in re.findall(r"#\S+|[^\[\]#]+?\[[^\]]*\]", header)]


def window(fields):
    hz = int(fields["hz"])
    if hz <= 0 or int(fields["usecs"]) <= 0:
        raise ValueError(f"hz={fields['hz']} usecs={fields['usecs']}")
    return {
        "busy_s": int(fields["busy"]) / hz,
        "kernel_s": int(fields["kern"]) / hz,
        "window_s": int(fields["usecs"]) / 1e6,
    }


def measurement(key, step, attempts):
    """Return (record, None) or (None, reason) for one expected sample."""
    driver, test, size, qps = key["driver"], key["test"], key["size"], key["qps"]
    # The last attempt the client reported on (a run whose clock calibration
    # failed is done again), or else the last one at all.
    reported = [a for a in attempts if "client" in attempts[a]]
    attempt = max(reported or attempts or [1])
    sides = attempts.get(attempt, {})
    client, server = sides.get("client"), sides.get("server")
    if client is None or server is None:
        missing = " and ".join(s for s in ("client", "server") if s not in sides)
        return None, f"no {missing} line (the run did not happen)"
    for side, fields in (("client", client), ("server", server)):
        if fields.get("status") != "ok":
            return None, f"{side} {fields.get('status', '?')} (exit {fields.get('rc', '?')})"
    rec = dict(key, step=step, iters=int(client["iters"]), attempt=attempt)
    try:
        c, s = window(client), window(server)
    except (KeyError, ValueError, ZeroDivisionError) as e:
        return None, f"no CPU window ({e})"
    header, result = client.get("header", ""), client.get("result", "").split()
    try:
        values = [float(v) for v in result]
    except ValueError:
        return None, f"result is not numbers: {client.get('result')!r}"
    if driver == "tcp":
        rec["kind"] = "tcp"
        if len(values) != 2 or values[1] <= 0:
            return None, f"iperf3 gave no bytes and seconds: {client.get('result')!r}"
        rec["bytes"] = int(values[0])
        rec["bw_mib_s"] = values[0] / values[1] / MIB
        rec["seconds"] = values[1]
    else:
        cols = columns(header)
        if len(cols) != len(values):
            return None, f"{len(values)} values under {len(cols)} columns: {header!r} / {client.get('result')!r}"
        row = dict(zip(cols, values))
        if row.get("#bytes") != size:
            return None, f"perftest reported {row.get('#bytes')} bytes, not {size}"
        # perftest's #iterations adds up its QPs: -n is per QP.
        iters = int(row.get("#iterations", 0))
        if iters != rec["iters"] * qps:
            print(f"bench-report: note: step {step} ({driver} {test} {size}): perftest reported {iters} "
                  f"iterations, asked for {rec['iters']} on each of {qps} QPs", file=sys.stderr)
            rec["iters"] = iters // qps
        if test.endswith(("_bw", "_bw_ev")):
            rec["kind"] = "bw"
            if "BW average[MB/sec]" not in row or "MsgRate[Mpps]" not in row:
                return None, f"unexpected perftest columns (want MB/sec and Mpps): {header!r}"
            rec["bytes"] = size * iters
            bw, rate = row["BW average[MB/sec]"], row["MsgRate[Mpps]"]
            if bw <= 0 or rate <= 0:
                return None, f"zero bandwidth or message rate: {client.get('result')!r}"
            # perftest's average bandwidth is its message rate times the
            # size, printed to 0.01 MB/s and 0.000001 Mpps: keep whichever
            # is the more precise (the rate, for small messages), once the
            # two agree.
            from_rate = rate * 1e6 * size / MIB
            if abs(bw - from_rate) > 0.0051 + 0.00000051 * 1e6 * size / MIB:
                return None, f"perftest's bandwidth {bw} MB/s and message rate {rate} Mpps disagree"
            rec["bw_mib_s"] = from_rate if 0.0000005 / rate < 0.005 / bw else bw
            rec["bw_peak_mib_s"] = row.get("BW peak[MB/sec]")
            rec["msg_rate_mpps"] = rate
        else:
            rec["kind"] = "lat"
            if "t_typical[usec]" not in row:
                return None, f"unexpected perftest columns (want t_typical[usec]): {header!r}"
            rec["bytes"] = None
            rec["lat_typical_us"] = row["t_typical[usec]"]
            rec["lat_avg_us"] = row.get("t_avg[usec]")
            rec["lat_min_us"] = row.get("t_min[usec]")
            rec["lat_max_us"] = row.get("t_max[usec]")
            rec["lat_p99_us"] = row.get("99% percentile[usec]")
            if rec["lat_typical_us"] <= 0:
                return None, f"zero latency: {client.get('result')!r}"
    # perftest's clock against the client's own: the run cannot have been
    # slower than the bytes it moved over the whole client process, nor
    # its round trips longer than that process. A check that fails means
    # perftest misjudged its TSC rate.
    if rec["kind"] == "bw" and rec["bw_mib_s"] < 0.9 * rec["bytes"] / MIB / c["window_s"]:
        return None, (f"perftest's {rec['bw_mib_s']:.3g} MB/s is below the {rec['bytes']} bytes over the "
                      f"client's {c['window_s']:.2f} s: its clock is off")
    if rec["kind"] == "lat" and rec["lat_avg_us"] and rec["lat_avg_us"] * rec["iters"] > 1.1e6 * c["window_s"]:
        return None, (f"perftest's {rec['iters']} round trips of {rec['lat_avg_us']:.0f} usec exceed the "
                      f"client's {c['window_s']:.2f} s: its clock is off")
    if rec["kind"] == "bw":
        rec["bw_window_mib_s"] = rec["bytes"] / MIB / c["window_s"]
    rec["cpu"] = {
        "client_busy_s": c["busy_s"], "client_kernel_s": c["kernel_s"], "client_window_s": c["window_s"],
        "server_busy_s": s["busy_s"], "server_kernel_s": s["kernel_s"], "server_window_s": s["window_s"],
        "busy_s": c["busy_s"] + s["busy_s"], "kernel_s": c["kernel_s"] + s["kernel_s"],
    }
    if rec["bytes"]:
        gb = rec["bytes"] / 1e9
        rec["cpu_s_per_gb"] = rec["cpu"]["busy_s"] / gb
        rec["kernel_cpu_s_per_gb"] = rec["cpu"]["kernel_s"] / gb
    return rec, None


def read_folded(path):
    """[(stack, count)] from inferno-collapse-perf's output."""
    out = []
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if stack and count.isdigit():
                out.append((stack, int(count)))
    return out


def profile_summary(driver, folded, top=12):
    """Shares of a profile's CPU time, and the functions with the most time of their own.

    inferno-collapse-perf weighs each stack by cpu-clock's period (ns), so
    the shares are of sampled CPU time.
    """
    total = sum(c for _, c in folded) or 1
    idle = user = kernel = module = library = 0
    own, inside = {}, {}
    mod_re, lib_re = MODULE_FRAME.get(driver), LIBRARY_FRAME.get(driver)
    for stack, count in folded:
        frames = stack.split(";")
        leaf = frames[-1]
        if IDLE.search(stack):
            idle += count
            continue
        if leaf.endswith("_[k]"):
            kernel += count
        else:
            user += count
        own[leaf] = own.get(leaf, 0) + count
        mine = {f.removesuffix("_[k]") for f in frames
                if f.endswith("_[k]") and mod_re and mod_re.search(f.removesuffix("_[k]"))}
        if mine:
            module += count
        for f in mine:
            inside[f] = inside.get(f, 0) + count
        if lib_re and any(lib_re.search(f) for f in frames if not f.endswith("_[k]")):
            library += count
    busy = total - idle

    def ranked(d):
        return [[name.removesuffix("_[k]"), n / total] for name, n in sorted(d.items(), key=lambda kv: -kv[1])[:top]]
    return {
        "cpu_s": total / 1e9,
        "idle_share": idle / total,
        "user_share": user / total,
        "kernel_share": kernel / total,
        "module_share": module / total,
        "module_share_of_busy": module / busy if busy else 0.0,
        "library_share": library / total,
        "top": ranked(own),
        "module_top": ranked(inside),
    }


def collect(out, bootdirs):
    env = os.environ
    try:
        drivers = env["ROXE_BENCH_DRIVERS"].split()
    except KeyError as e:
        fail(f"the settings are not in the environment ({e}): collect is run by scripts/bench")
    measurements, missing, devices, profiles, boots = [], [], [], [], []
    expected_n = 0
    for bdir in bootdirs:
        try:
            with open(os.path.join(bdir, "boot.json")) as f:
                boot = json.load(f)
            cpus = int(boot["cpus"])
            steps = parse_plan(os.path.join(bdir, "plan.txt"))
            runs, devs, profs = parse_raw(os.path.join(bdir, "raw.txt"))
        except (OSError, ValueError, KeyError) as e:
            fail(f"{bdir} is not a benchmark boot folder: {e}")
        boot["dir"] = os.path.basename(bdir)
        boots.append(boot)
        for d in devs:
            devices.append({"cpus": cpus, "mtu": int(d["mtu"]), "round": d["round"], "driver": d["driver"],
                            "guest": int(d["guest"]), "netdev_mtu": d.get("netdev_mtu"),
                            "active_mtu": d.get("active_mtu")})
        for step, rnd, mtu, op, args in steps:
            if op in ("tcp", "bw", "lat"):
                if op == "tcp":
                    key = {"driver": "tcp", "test": "tcp", "size": 0, "qps": 1}
                else:
                    key = {"driver": args[0], "test": args[1], "size": int(args[2]),
                           "qps": int(args[4]) if op == "bw" else 1}
                key = dict(cpus=cpus, mtu=mtu, round=int(rnd), **key)
                expected_n += 1
                rec, why = measurement(key, step, runs.get(step, {}))
                if rec:
                    measurements.append(rec)
                else:
                    missing.append(dict(key, step=step, reason=why))
            elif op == "prof":
                drv, test, size = args[0], args[1], int(args[2])
                for guest, side in ((1, "server"), (2, "client")):
                    expected_n += 1
                    p = profs.get((step, side))
                    what = {"cpus": cpus, "mtu": mtu, "driver": drv, "test": test, "size": size, "side": side,
                            "step": step}
                    path = os.path.join(bdir, f"guest{guest}", p["file"]) if p else None
                    if not p or p.get("status") != "ok" or not os.path.isfile(path):
                        missing.append(dict(what, kind="profile",
                                            reason=f"profile {p.get('status') if p else 'not reported'}"))
                        continue
                    summary = profile_summary(drv, read_folded(path))
                    profiles.append(dict(what, samples=int(p.get("samples", "0") or 0), file=os.path.relpath(path, os.path.dirname(os.path.abspath(out))),
                                         svg=f"profiles/{drv}-{test}-{size}-{side}.svg", **summary))
    settings = {k[len("ROXE_BENCH_"):].lower(): v for k, v in env.items() if k.startswith("ROXE_BENCH_")}
    settings["sizes"] = [int(s) for s in env.get("BENCH_SIZES", "").split()]
    settings["drivers"] = " ".join(drivers)
    meta = {k[len("BENCH_"):].lower(): v for k, v in env.items() if k.startswith("BENCH_")}
    meta.pop("sizes", None)
    for k in ("seconds", "lock_wait_seconds", "vm_rc"):
        if meta.get(k, "").lstrip("-").isdigit():
            meta[k] = int(meta[k])
    meta["boots"] = boots
    doc = {"meta": meta, "settings": settings, "measurements": measurements, "devices": devices,
           "profiles": profiles, "missing": missing}
    doc["summary"] = summary_cells(doc)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"bench-report: {expected_n - len(missing)} of {expected_n} samples and profiles in {out}",
          file=sys.stderr)
    for m in missing:
        print(f"bench-report: MISSING {describe(m)}: {m['reason']}", file=sys.stderr)
    return 1 if missing else 0


def describe(m):
    where = f"{m.get('cpus')} vCPU, MTU {m.get('mtu')}"
    if m.get("kind") == "profile":
        return f"profile {m['driver']} {m['test']} {m['size']} B {m['side']} ({where})"
    q = f", {m['qps']} QPs" if m.get("qps", 1) != 1 else ""
    return f"{m['driver']} {m['test']} {m['size']} B round {m.get('round')} ({where}{q})"


# --- statistics ----------------------------------------------------------------

def metric_value(m, key):
    if key == "kpps":
        return m["msg_rate_mpps"] * 1000 if m.get("msg_rate_mpps") else None
    return m.get(key)


def cells(doc):
    """{(cpus, mtu, qps, driver, test, size): [measurement, ...]}"""
    out = {}
    for m in doc["measurements"]:
        # (Results from before repeats have one configuration, unnamed.)
        key = (m.get("cpus", 1), m.get("mtu", 1500), m.get("qps", 1), m["driver"], m["test"], m["size"])
        out.setdefault(key, []).append(m)
    return out


def side_cpu_per_gb(m, which):
    """One guest's busy CPU seconds per GB moved in measurement `m`
    (`which`: "server", guest 1, or "client", guest 2), or None."""
    busy = (m.get("cpu") or {}).get(f"{which}_busy_s")
    moved = m.get("bytes")
    return busy / (moved / 1e9) if busy is not None and moved else None


def stats(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"n": len(values), "median": statistics.median(values), "min": min(values), "max": max(values)}


def summary_cells(doc):
    out = []
    for key, ms in sorted(cells(doc).items(), key=lambda kv: tuple(str(k) for k in kv[0])):
        for metric in ("bw_mib_s", "kpps", "lat_typical_us", "cpu_s_per_gb"):
            s = stats([metric_value(m, metric) for m in ms])
            if s:
                out.append(dict(zip(("cpus", "mtu", "qps", "driver", "test", "size"), key), metric=metric, **s))
    return out


def compare(a, b, lower_is_better):
    """(ratio of medians, lowest, highest, verdict) of stats a against b, or None."""
    if not a or not b or not b["median"] or not b["min"]:
        return None
    r = a["median"] / b["median"]
    lo, hi = a["min"] / b["max"], a["max"] / b["min"]
    if min(a["n"], b["n"]) < MIN_VERDICT:
        verdict = f"n<{MIN_VERDICT}"
    elif lo > 1:
        verdict = "loss" if lower_is_better else "win"
    elif hi < 1:
        verdict = "win" if lower_is_better else "loss"
    else:
        verdict = "tie"
    return r, lo, hi, verdict


# --- report ------------------------------------------------------------------

def human_size(n):
    for unit, div in (("M", MIB), ("K", 1024)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def fmt(v):
    if v is None:
        return "-"
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:.0f}"
    digits = max(0, 2 - int(math.floor(math.log10(abs(v)))))
    return f"{v:.{digits}f}"


def fmt_stats(s, spread=True):
    if not s:
        return "-"
    if not spread or s["n"] == 1:
        return fmt(s["median"])
    return f"{fmt(s['median'])} [{fmt(s['min'])}-{fmt(s['max'])}]"


def fmt_cmp(c):
    if not c:
        return "-"
    r, lo, hi, verdict = c
    if lo == hi:
        # One sample on each side: there is no range.
        return f"{fmt(r)} {verdict}"
    return f"{fmt(r)} [{fmt(lo)}-{fmt(hi)}] {verdict}"


def configs(doc):
    """The configurations (cpus, mtu, qps) measured, the first (the base) first."""
    s = doc["settings"]
    order = []
    for c in s.get("cpus", "1").split():
        for m in s.get("mtu", "1500").split():
            for q in s.get("qps", "1").split():
                order.append((int(c), int(m), int(q)))
    seen = {(m.get("cpus", 1), m.get("mtu", 1500), m.get("qps", 1)) for m in doc["measurements"]}
    return [k for k in order if k in seen] + sorted(seen - set(order))


def drivers_of(doc):
    wanted = doc["settings"].get("drivers", " ".join(DRIVERS)).split()
    return [d for d in DRIVERS if d in wanted]


def row_specs(doc, qps):
    """(test, size, metric label, value key, lower is better) for each row of a configuration."""
    s = doc["settings"]
    sizes = s.get("sizes", [])
    bw_tests = s.get("bw_tests", "").split()
    lat_tests = s.get("lat_tests", "").split() if qps == 1 else []
    out = []
    for t in bw_tests:
        for size in sizes:
            out.append((t, size, "MB/s", "bw_mib_s", False))
    if sizes:
        for t in bw_tests:
            out.append((t, min(sizes), "kpps", "kpps", False))
    for t in lat_tests:
        out.append((t, 2, "usec typ", "lat_typical_us", True))
    return out


def config_name(cfg, doc=None):
    cpus, mtu, qps = cfg
    text = f"{cpus} vCPU{'s' if cpus > 1 else ''} per guest, netdev MTU {mtu}, {qps} QP{'s' if qps > 1 else ''}"
    if doc:
        act = {}
        for d in doc.get("devices", []):
            if d["cpus"] == cpus and d["mtu"] == mtu:
                act.setdefault(d["driver"], set()).add(str(d["active_mtu"]))
        if act:
            text += " (active MTU " + ", ".join(f"{k} {'/'.join(sorted(v))}" for k, v in sorted(act.items())) + ")"
    return text


def table(doc):
    by = cells(doc)
    drivers = drivers_of(doc)
    others = [d for d in ("rxe", "siw") if d in drivers]
    cfgs = configs(doc)
    out = []
    for cfg in cfgs:
        cpus, mtu, qps = cfg
        tcp = stats([m["bw_mib_s"] for m in by.get((cpus, mtu, 1, "tcp", "tcp", 0), [])])
        specs = row_specs(doc, qps)
        head = ["test", "size", "metric"] + drivers + ["TCP"]
        if "roxe" in drivers:
            head += [f"roxe/{d}" for d in others] + ["roxe/TCP"]
        lines, tally = [], {d: {} for d in others + ["TCP"]}
        for t, size, metric, key, lower in specs:
            st = {d: stats([metric_value(m, key) for m in by.get((cpus, mtu, qps, d, t, size), [])])
                  for d in drivers}
            tcp_v = tcp if metric == "MB/s" else None
            line = [t, human_size(size), metric] + [fmt_stats(st[d]) for d in drivers] + [fmt_stats(tcp_v)]
            if "roxe" in drivers:
                for d, other in [(d, st[d]) for d in others] + [("TCP", tcp_v)]:
                    c = compare(st["roxe"], other, lower)
                    line.append(fmt_cmp(c))
                    if c:
                        tally[d][c[3]] = tally[d].get(c[3], 0) + 1
            lines.append(line)
        rounds = {m.get("round", 1) for m in doc["measurements"]
                  if (m.get("cpus", 1), m.get("mtu", 1500), m.get("qps", 1)) == cfg}
        out.append(f"== {config_name(cfg, doc)}; {len(rounds)} round{'s' if len(rounds) != 1 else ''}\n\n")
        out.append(render(head, lines, 3))
        if "roxe" in drivers:
            out.append("verdicts: " + "; ".join(
                f"roxe against {d}: " + (", ".join(f"{n} {v}" for v, n in sorted(tally[d].items())) or "none")
                for d in others + ["TCP"]) + "\n")
        # CPU per GB moved, for the bandwidth rows.
        chead = ["test", "size"] + drivers + ["TCP"]
        if "roxe" in drivers:
            chead += [f"roxe/{d}" for d in others] + ["roxe/TCP"]
        clines = []
        tcp_cpu = stats([m.get("cpu_s_per_gb") for m in by.get((cpus, mtu, 1, "tcp", "tcp", 0), [])])
        for t, size, metric, key, lower in specs:
            if metric != "MB/s":
                continue
            st = {d: stats([m.get("cpu_s_per_gb") for m in by.get((cpus, mtu, qps, d, t, size), [])])
                  for d in drivers}
            line = [t, human_size(size)] + [fmt_stats(st[d], False) for d in drivers] + [fmt_stats(tcp_cpu, False)]
            if "roxe" in drivers:
                line += [fmt_cmp(compare(st["roxe"], st[d], True)) for d in others]
                line.append(fmt_cmp(compare(st["roxe"], tcp_cpu, True)))
            clines.append(line)
        if clines:
            out.append("\nCPU seconds per GB moved (both guests' busy time over each run, approximate; "
                       "medians):\n\n")
            out.append(render(chead, clines, 2))
        # The passive side alone: the server's busy time (the target of a
        # write or send, the responder of a read). TCP's yardstick is its
        # receiver for data that flows into the passive side, its sender
        # for a read's, whose passive side sends the data.
        tcp_ms = by.get((cpus, mtu, 1, "tcp", "tcp", 0), [])
        tcp_side = {w: stats([side_cpu_per_gb(m, w) for m in tcp_ms]) for w in ("server", "client")}
        phead = ["test", "size"] + drivers + ["TCP rx", "TCP tx"]
        if "roxe" in drivers:
            phead += [f"roxe/{d}" for d in others] + ["roxe/TCP"]
        plines = []
        for t, size, metric, key, lower in specs:
            if metric != "MB/s":
                continue
            st = {d: stats([side_cpu_per_gb(m, "server") for m in by.get((cpus, mtu, qps, d, t, size), [])])
                  for d in drivers}
            line = [t, human_size(size)] + [fmt_stats(st[d], False) for d in drivers]
            line += [fmt_stats(tcp_side["server"], False), fmt_stats(tcp_side["client"], False)]
            if "roxe" in drivers:
                line += [fmt_cmp(compare(st["roxe"], st[d], True)) for d in others]
                yard = tcp_side["client"] if t.startswith("read_bw") else tcp_side["server"]
                line.append(fmt_cmp(compare(st["roxe"], yard, True)))
            plines.append(line)
        if plines and any(v is not None for v in tcp_side.values()):
            out.append("\nCPU seconds per GB on the passive side (the server guest: a write's or send's "
                       "target, a read's responder; medians). roxe/TCP is against TCP's receiver "
                       "(rx), for read against its sender (tx):\n\n")
            out.append(render(phead, plines, 2))
        out.append("\n")
    # Each configuration against the first.
    if len(cfgs) > 1:
        base = cfgs[0]
        for cfg in cfgs[1:]:
            head = ["test", "size", "metric"] + drivers + ["TCP"]
            lines = []
            for t, size, metric, key, lower in row_specs(doc, cfg[2]):
                if metric == "kpps":
                    continue
                line = [t, human_size(size), metric]
                for d in drivers + ["tcp"]:
                    tt, ss = (t, size) if d != "tcp" else ("tcp", 0)
                    if d == "tcp" and metric != "MB/s":
                        line.append("-")
                        continue
                    q = cfg[2] if d != "tcp" else 1
                    qb = base[2] if d != "tcp" else 1
                    a = stats([metric_value(m, key) for m in by.get((cfg[0], cfg[1], q, d, tt, ss), [])])
                    b = stats([metric_value(m, key) for m in by.get((base[0], base[1], qb, d, tt, ss), [])])
                    line.append(fmt_cmp(compare(a, b, lower)))
                lines.append(line)
            out.append(f"== {config_name(cfg)}\n   against {config_name(base)}: ratio of medians "
                       "[range], win = better\n\n")
            out.append(render(head, lines, 3))
            out.append("\n")
    return "".join(out)


def profiles_text(doc):
    profs = doc.get("profiles", [])
    if not profs:
        return ""
    out = ["== profiles (perf, cpu-clock, system-wide; shares of the sampled CPU time)\n"]
    for p in profs:
        out.append(f"\n{p['driver']} {p['test']} {human_size(p['size'])}, {p['side']} "
                   f"(guest {1 if p['side'] == 'server' else 2}): {p['samples']} samples, "
                   f"{p['cpu_s']:.1f} CPU-s; "
                   f"idle {p['idle_share']:.0%}, user {p['user_share']:.0%}, kernel {p['kernel_share']:.0%}; "
                   f"under {p['driver']}'s module {p['module_share']:.0%} "
                   f"({p['module_share_of_busy']:.0%} of the busy time), "
                   f"under its user-space provider {p['library_share']:.0%}\n")
        out.append("  most time of their own:\n")
        for name, share in p["top"][:8]:
            out.append(f"  {share:6.1%}  {name[:110]}\n")
        if p.get("module_top"):
            out.append(f"  most time inside, {p['driver']}'s module functions:\n")
            for name, share in p["module_top"][:8]:
                out.append(f"  {share:6.1%}  {name[:110]}\n")
    return "".join(out)


def render(head, lines, labels):
    """A text table: the first LABELS columns left-aligned, numbers right-aligned."""
    widths = [max(len(str(r[i])) for r in [head] + lines) for i in range(len(head))]

    def one(r):
        return "  ".join(str(c).ljust(w) if i < labels else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    return "\n".join([one(head), "  ".join("-" * w for w in widths)] + [one(r) for r in lines]) + "\n"


def plot(doc, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = cells(doc)
    cfgs = configs(doc)
    if not cfgs:
        return
    cpus, mtu, qps = cfgs[0]
    s = doc["settings"]
    sizes = s.get("sizes", [])
    bw_tests = s.get("bw_tests", "").split()
    lat_tests = s.get("lat_tests", "").split() if qps == 1 else []
    drivers = drivers_of(doc)
    tcp = stats([m["bw_mib_s"] for m in by.get((cpus, mtu, 1, "tcp", "tcp", 0), [])])
    panels = len(bw_tests) + (1 if lat_tests else 0)
    cols = 2 if panels > 1 else 1
    nrows = math.ceil(panels / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(6.5 * cols, 4.2 * nrows), squeeze=False)
    axes = [a for r in axes for a in r]
    style = {"rxe": ("tab:blue", "o"), "siw": ("tab:green", "s"), "roxe": ("tab:red", "^")}
    for ax, t in zip(axes, bw_tests):
        for d in drivers:
            pts = [(size, stats([m["bw_mib_s"] for m in by.get((cpus, mtu, qps, d, t, size), [])])) for size in sizes]
            pts = [(x, st) for x, st in pts if st]
            if pts:
                color, marker = style[d]
                ys = [st["median"] for _, st in pts]
                err = [[y - st["min"] for y, (_, st) in zip(ys, pts)], [st["max"] - y for y, (_, st) in zip(ys, pts)]]
                ax.errorbar([p[0] for p in pts], ys, yerr=err, marker=marker, color=color, capsize=3, label=d)
        if tcp:
            ax.axhline(tcp["median"], color="gray", linestyle="--", label="TCP (iperf3)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sizes, [human_size(x) for x in sizes])
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("bandwidth (MB/s, 2^20 B)")
        ax.set_title(f"ib_{t}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    if lat_tests:
        ax = axes[len(bw_tests)]
        width = 0.8 / max(1, len(drivers))
        for i, d in enumerate(drivers):
            xs, ys, lo, hi = [], [], [], []
            for j, t in enumerate(lat_tests):
                st = stats([m["lat_typical_us"] for m in by.get((cpus, mtu, 1, d, t, 2), [])])
                if st:
                    xs.append(j + (i - (len(drivers) - 1) / 2) * width)
                    ys.append(st["median"])
                    lo.append(st["median"] - st["min"])
                    hi.append(st["max"] - st["median"])
            if xs:
                ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, color=style[d][0], label=d)
        ax.set_xticks(range(len(lat_tests)), [f"ib_{t}" for t in lat_tests])
        ax.set_ylim(bottom=0)
        ax.set_ylabel("typical latency (usec)")
        ax.set_title("latency, 2-byte messages")
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize="small")
    for ax in axes[panels:]:
        ax.set_visible(False)
    meta = doc.get("meta", {})
    fig.suptitle(f"roxe benchmark ({meta.get('mode', '?')}, {meta.get('kernel_flavour', '?')} kernel, "
                 f"{meta.get('started', '?')}, {meta.get('git', '?')}): median and min-max of each cell, "
                 f"{config_name(cfgs[0])}", fontsize="medium")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


def report(path, png, no_plot):
    try:
        with open(path) as f:
            doc = json.load(f)
        doc["measurements"], doc["settings"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"{path} is not a benchmark results file: {e}")
    meta = doc.get("meta", {})
    print(f"roxe benchmark, {meta.get('mode', '?')} mode: {meta.get('command', '?')}")
    wait = meta.get("lock_wait_seconds")
    print(f"started {meta.get('started', '?')}, {meta.get('seconds', '?')} s in the VMs"
          + (f" (after {wait} s waiting for the VM lock)" if wait is not None else "")
          + f"; git {meta.get('git', '?')}")
    print(f"{meta.get('kernel_flavour', '?')} kernel {meta.get('kernel', '?')}; {meta.get('wire', '?')} wire; "
          f"roxe.ko {meta.get('roxe_ko', '?')}")
    print(f"{meta.get('tools', '?')}")
    print("Each cell: median [min-max] over the rounds. Ratios: roxe's median over the other's [the range "
          "its samples allow] and a verdict.\nMB/s is perftest's (2^20 bytes per second); kpps is 1000 "
          "messages a second; usec typ is perftest's typical latency.\n")
    print(table(doc), end="")
    print(profiles_text(doc), end="")
    missing = doc.get("missing", [])
    if missing:
        print(f"\nmissing ({len(missing)}):")
        for m in missing:
            print(f"  {describe(m)}: {m['reason']}")
    if not no_plot:
        png = png or os.path.join(os.path.dirname(os.path.abspath(path)), "bench.png")
        try:
            plot(doc, png)
        except ImportError as e:
            fail(f"cannot plot without matplotlib ({e}): use scripts/bench's venv "
                 f"(/opt/roxe/bench-venv/bin/python3) or --no-plot")
        print(f"\nplot: {png}")
    return 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "collect":
        return collect(argv[2], argv[3:])
    if len(argv) >= 3 and argv[1] == "report":
        rest = argv[3:]
        if rest == ["--no-plot"]:
            return report(argv[2], None, True)
        if len(rest) == 2 and rest[0] == "--png":
            return report(argv[2], rest[1], False)
        if not rest:
            return report(argv[2], None, False)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
