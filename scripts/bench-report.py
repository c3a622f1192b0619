#!/usr/bin/env python3
"""The benchmark's results: from the guests' lines to JSON, then to a table and a plot.

    bench-report.py collect RAW JSON
        scripts/bench runs this. RAW holds the guests' BENCH lines (see
        tests/guest/bench.sh), each prefixed with the guest's number; the
        settings and facts about the run come from the environment
        (ROXE_BENCH_* and BENCH_*, which scripts/bench exports). Writes JSON
        and exits 1 if any expected measurement is missing or invalid.

    bench-report.py report JSON [--png FILE | --no-plot]
        Prints the table (each driver's value and the ratios roxe/rxe,
        roxe/siw and roxe/TCP for every row, then CPU per GB) and draws
        bandwidth against message size (FILE, default bench.png next to
        JSON; needs matplotlib). Works on any results.json on its own.

results.json holds "meta" (command, mode, times, versions), "settings",
"measurements" and "missing". Each measurement has driver, test, kind (bw,
lat or tcp), size (bytes), iters, attempt (2 if perftest's clock
calibration failed the first time), bytes moved, and as they apply:
bw_mib_s and bw_peak_mib_s (MiB/s: perftest's "MB/sec" is 2^20 bytes per
second; iperf3's rate is converted to the same unit), bw_window_mib_s (the
bytes over the client's whole run, start-up included: a lower bound that
does not depend on perftest's clock), msg_rate_mpps,
lat_typical_us, lat_avg_us, lat_min_us, lat_max_us, lat_p99_us; cpu (busy
and kernel CPU seconds of each guest over its window, and their sums);
cpu_s_per_gb and kernel_cpu_s_per_gb (both guests' CPU seconds per 10^9
bytes moved).
"""

import json
import math
import os
import re
import shlex
import sys

DRIVERS = ("rxe", "siw", "roxe")
LAT_SIZE = 2
MIB = 1 << 20


def fail(msg):
    print(f"bench-report: error: {msg}", file=sys.stderr)
    sys.exit(1)


# --- collect -----------------------------------------------------------------

def parse_raw(path):
    """Return {run: {attempt: {"client": fields, "server": fields}}} from the BENCH lines."""
    runs = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                guest, *words = shlex.split(line)
                fields = dict(w.split("=", 1) for w in words)
                attempt = int(fields.get("attempt", "1"))
            except ValueError as e:
                fail(f"{path}:{n}: cannot parse ({e}): {line.strip()}")
            side = fields.get("side")
            run = fields.get("run")
            if side not in ("client", "server") or not run:
                fail(f"{path}:{n}: no side= or run=: {line.strip()}")
            sides = runs.setdefault(run, {}).setdefault(attempt, {})
            if side in sides:
                fail(f"{path}:{n}: a second {side} line for run {run}, attempt {attempt}")
            fields["guest"] = guest
            sides[side] = fields
    return runs


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


def measurement(driver, test, size, runs):
    """Return (record, None) or (None, reason) for one expected measurement."""
    name = "tcp" if driver == "tcp" else f"{driver}-{test}-{size}"
    attempts = runs.get(name, {})
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
    rec = {"driver": driver, "test": test, "size": size, "iters": int(client["iters"]), "attempt": attempt}
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
        iters = int(row.get("#iterations", 0))
        if iters != rec["iters"]:
            print(f"bench-report: note: {name}: perftest reported {iters} iterations, asked for {rec['iters']}",
                  file=sys.stderr)
            rec["iters"] = iters
        if test.endswith("_bw"):
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


def collect(raw, out):
    env = os.environ
    try:
        sizes = [int(s) for s in env["BENCH_SIZES"].split()]
        drivers = env["ROXE_BENCH_DRIVERS"].split()
        bw_tests = env["ROXE_BENCH_BW_TESTS"].split()
        lat_tests = env["ROXE_BENCH_LAT_TESTS"].split()
    except (KeyError, ValueError) as e:
        fail(f"the settings are not in the environment ({e}): collect is run by scripts/bench")
    runs = parse_raw(raw)
    expected = [("tcp", "tcp", 0)]
    for d in drivers:
        expected += [(d, t, s) for t in bw_tests for s in sizes]
        expected += [(d, t, LAT_SIZE) for t in lat_tests]
    measurements, missing = [], []
    for d, t, s in expected:
        rec, why = measurement(d, t, s, runs)
        if rec:
            measurements.append(rec)
        else:
            missing.append({"driver": d, "test": t, "size": s, "reason": why})
    settings = {k[len("ROXE_BENCH_"):].lower(): v for k, v in env.items() if k.startswith("ROXE_BENCH_")}
    settings["sizes"] = sizes
    meta = {k[len("BENCH_"):].lower(): v for k, v in env.items() if k.startswith("BENCH_")}
    meta.pop("sizes", None)
    for k in ("seconds", "lock_wait_seconds", "vm_rc"):
        if meta.get(k, "").lstrip("-").isdigit():
            meta[k] = int(meta[k])
    doc = {"meta": meta, "settings": settings, "measurements": measurements, "missing": missing}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"bench-report: {len(measurements)} of {len(expected)} measurements in {out}", file=sys.stderr)
    for m in missing:
        print(f"bench-report: MISSING {m['driver']} {m['test']} {m['size']} B: {m['reason']}", file=sys.stderr)
    return 1 if missing else 0


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


def ratio(a, b):
    return fmt(a / b) if a is not None and b else "-"


def index(doc):
    return {(m["driver"], m["test"], m["size"]): m for m in doc["measurements"]}


def rows(doc):
    """(label test, size, metric name, value key, per-driver lookup, TCP value or None)."""
    by = index(doc)
    tcp = by.get(("tcp", "tcp", 0))
    s = doc["settings"]
    sizes = s.get("sizes", [])
    bw_tests = s.get("bw_tests", "").split()
    lat_tests = s.get("lat_tests", "").split()
    out = []
    for t in bw_tests:
        for size in sizes:
            out.append((t, size, "MB/s", "bw_mib_s", tcp and tcp["bw_mib_s"]))
    if sizes:
        for t in bw_tests:
            out.append((t, min(sizes), "Mpps", "msg_rate_mpps", None))
    for t in lat_tests:
        out.append((t, LAT_SIZE, "usec typ", "lat_typical_us", None))
    return by, tcp, out


def table(doc):
    by, tcp, spec = rows(doc)
    drivers = [d for d in DRIVERS if d in doc["settings"].get("drivers", " ".join(DRIVERS)).split()]
    head = ["test", "size", "metric"] + drivers + ["TCP", "roxe/rxe", "roxe/siw", "roxe/TCP"]
    lines = []
    for t, size, metric, key, tcp_v in spec:
        vals = {d: by.get((d, t, size), {}).get(key) for d in drivers}
        roxe = vals.get("roxe")
        lines.append([t, human_size(size), metric] + [fmt(vals[d]) for d in drivers] +
                     [fmt(tcp_v), ratio(roxe, vals.get("rxe")), ratio(roxe, vals.get("siw")), ratio(roxe, tcp_v)])
    out = [render(head, lines, 3)]
    # CPU per GB moved, for the bandwidth rows.
    chead = ["test", "size"] + drivers + ["TCP", "roxe/rxe", "roxe/siw", "roxe/TCP"]
    clines = []
    tcp_cpu = tcp and tcp.get("cpu_s_per_gb")
    for t, size, metric, key, tcp_v in spec:
        if metric != "MB/s":
            continue
        vals = {d: by.get((d, t, size), {}).get("cpu_s_per_gb") for d in drivers}
        roxe = vals.get("roxe")
        clines.append([t, human_size(size)] + [fmt(vals[d]) for d in drivers] +
                      [fmt(tcp_cpu), ratio(roxe, vals.get("rxe")), ratio(roxe, vals.get("siw")),
                       ratio(roxe, tcp_cpu)])
    if clines:
        out.append("\nCPU seconds per GB moved (both guests' busy time over each run, approximate):\n")
        out.append(render(chead, clines, 2))
    return "".join(out)


def render(head, lines, labels):
    """A text table: the first LABELS columns left-aligned, numbers right-aligned."""
    widths = [max(len(str(r[i])) for r in [head] + lines) for i in range(len(head))]

    def one(r):
        return "  ".join(str(c).ljust(w) if i < labels else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([one(head), "  ".join("-" * w for w in widths)] + [one(r) for r in lines]) + "\n"


def plot(doc, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by, tcp, _ = rows(doc)
    s = doc["settings"]
    sizes = s.get("sizes", [])
    bw_tests = s.get("bw_tests", "").split()
    lat_tests = s.get("lat_tests", "").split()
    drivers = [d for d in DRIVERS if d in s.get("drivers", " ".join(DRIVERS)).split()]
    panels = len(bw_tests) + (1 if lat_tests else 0)
    cols = 2 if panels > 1 else 1
    nrows = math.ceil(panels / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(6.5 * cols, 4.2 * nrows), squeeze=False)
    axes = [a for r in axes for a in r]
    style = {"rxe": ("tab:blue", "o"), "siw": ("tab:green", "s"), "roxe": ("tab:red", "^")}
    for ax, t in zip(axes, bw_tests):
        for d in drivers:
            pts = [(size, by[(d, t, size)]["bw_mib_s"]) for size in sizes if (d, t, size) in by]
            if pts:
                color, marker = style[d]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, label=d)
        if tcp:
            ax.axhline(tcp["bw_mib_s"], color="gray", linestyle="--", label="TCP (iperf3)")
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
            xs, ys = [], []
            for j, t in enumerate(lat_tests):
                m = by.get((d, t, LAT_SIZE))
                if m:
                    xs.append(j + (i - (len(drivers) - 1) / 2) * width)
                    ys.append(m["lat_typical_us"])
            if xs:
                ax.bar(xs, ys, width, color=style[d][0], label=d)
        ax.set_xticks(range(len(lat_tests)), [f"ib_{t}" for t in lat_tests])
        ax.set_ylim(bottom=0)
        ax.set_ylabel("typical latency (usec)")
        ax.set_title(f"latency, {LAT_SIZE}-byte messages")
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize="small")
    for ax in axes[panels:]:
        ax.set_visible(False)
    meta = doc.get("meta", {})
    fig.suptitle(f"roxe benchmark ({meta.get('mode', '?')}, {meta.get('started', '?')}, {meta.get('git', '?')}): "
                 "two TCG guests, compare ratios, not absolute values", fontsize="medium")
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
          + f"; git {meta.get('git', '?')}; roxe.ko {meta.get('roxe_ko', '?')}")
    print(f"kernel {meta.get('kernel', '?')}; {meta.get('tools', '?')}")
    print("MB/s is perftest's (2^20 bytes per second); usec typ is perftest's typical latency.\n")
    print(table(doc), end="")
    missing = doc.get("missing", [])
    if missing:
        print(f"\nmissing ({len(missing)}):")
        for m in missing:
            print(f"  {m['driver']} {m['test']} {human_size(m['size'])}: {m['reason']}")
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
    if len(argv) == 4 and argv[1] == "collect":
        return collect(argv[2], argv[3])
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
