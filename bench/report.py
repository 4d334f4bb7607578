"""The printed table: each workload's figures for syncpeer, Syncthing and rsync from the same
run, the ratios syncpeer ÷ Syncthing and syncpeer ÷ rsync, the load average at its start;
then the limits and the growth table. The JSON holds everything (results.json)."""
from .procs import GiB, MiB


def mib(x):
    return f"{x / MiB:,.1f} MiB" if isinstance(x, (int, float)) else "—"


def cpu_text(entry):
    cpu = (entry or {}).get("cpu") or {}
    if not cpu:
        return ""
    parts = " + ".join(f"{c['user_s'] + c['system_s']:.2f}" for c in cpu.values())
    return f"CPU-s {parts}"


def rss_text(entry):
    rss = (entry or {}).get("peak_rss") or {}
    values = [v for v in rss.values() if v]
    return "peak RSS " + " / ".join(f"{v / MiB:.0f}" for v in values) + " MiB" if values else ""


def ratio(ours, theirs):
    a, b = (ours or {}).get("seconds"), (theirs or {}).get("seconds")
    return f"{a / b:.2f}" if a and b else "—"


# (label, key of the workload in results[tool]) in the order printed
WORKLOADS = [
    ("A-send, a new file by the send command", "a_send"),
    ("A-share, a new file in a shared folder", "a_share"),
    ("B, new small files in one folder", "b"),
    ("C, 1 MiB rewritten mid-file, from a rescan", "c"),
    ("C, the same, from the write (watchers on)", "c_watch"),
    ("D, a home-like tree from nothing", "d"),
    ("E, a new file to 3 receivers at once", "e"),
    ("E-limited, the same, alice's upload capped", "e_limited"),
    ("F, one change in a large idle folder", "f_change"),
    ("R, A-share through a local relay (strelaysrv)", "relay"),
]


def shape(entry):
    """What the workload moved, from its own figures (the run's sizes may be scaled down)."""
    if not entry:
        return ""
    if entry.get("files") and entry.get("bytes"):
        return f"{entry['files']:,} files, {mib(entry['bytes'])}"
    if entry.get("files"):
        return f"{entry['files']:,} × {entry.get('file_bytes', 0) // 1024} KiB"
    return mib(entry.get("bytes")) if entry.get("bytes") else ""
TOOLS = [("syncpeer", "syncpeer"), ("syncthing", "Syncthing"), ("syncthing_case", "Syncthing caseSensitiveFS"),
         ("rsync", "rsync daemon"), ("rsync_fsync", "rsync daemon --fsync")]


def anchor(results, key):
    """Syncthing's row for a workload: its best configuration measured (the honest anchor).
    A-send is set against Syncthing's A-share (it has no send command)."""
    key = "a_share" if key == "a_send" else key
    rows = [results.get(t, {}).get(key) for t in ("syncthing", "syncthing_case")]
    rows = [r for r in rows if r and r.get("seconds")]
    return min(rows, key=lambda r: r["seconds"]) if rows else None


def workload_rows(results):
    rows = []
    for label, key in WORKLOADS:
        ours = results.get("syncpeer", {}).get(key)
        present = [(t, n, results.get(t, {}).get(key)) for t, n in TOOLS if results.get(t, {}).get(key)]
        if not present:
            continue
        load = next((e.get("load_average") for _, _, e in present if e.get("load_average")), None)
        what = next((shape(e) for _, _, e in present if shape(e)), "")
        rows.append((label, what, "", f"load average {load[0]} at its start" if load else ""))
        st, rs, rf = anchor(results, key), results.get("rsync", {}).get(key), results.get("rsync_fsync", {}).get(key)
        for tool, name, entry in present:
            if "error" in entry and "seconds" not in entry:
                rows.append(("", name, "FAILED", entry["error"][:90]))
                continue
            note = [cpu_text(entry), rss_text(entry)]
            if entry.get("wire_bytes") is not None:
                note.append(f"wire {mib(entry['wire_bytes'])}")
            sent = entry.get("sent_bytes") or {}
            if len(sent) > 2 and entry.get("wire_bytes"):
                note.append(f"alice sent {100 * sent.get('alice', 0) / entry['wire_bytes']:.0f} %")
            if entry.get("relay_cpu_s") is not None:
                note.append(f"relay CPU-s {entry['relay_cpu_s']:.2f}, peak RSS {mib(entry.get('relay_peak_rss'))}; path {entry.get('path')}")
            if entry.get("cpu_s") is not None:
                note.append(f"CPU-s {entry['cpu_s']:.2f} (both ends)")
            if tool == "syncpeer":
                note.insert(0, f"÷ Syncthing {ratio(ours, st)}, ÷ rsync {ratio(ours, rs)}, ÷ rsync --fsync {ratio(ours, rf)}")
            rows.append(("", name, f"{entry['seconds']} s", "; ".join(x for x in note if x)))
    return rows


def f_rows(results):
    rows = []
    for tool, name in TOOLS[:2]:
        f = results.get(tool, {}).get("f")
        if not f or "idle" not in f:
            continue
        idle = f["idle"]
        cpu = ", ".join(f"{n} {v} %" for n, v in idle["cpu_percent"].items())
        rss = ", ".join(f"{n} {mib(v)}" for n, v in idle["max_rss"].items())
        rows.append(("F, idle", f"{name}, {f['files']:,} files", f"{idle['seconds']:.0f} s",
                     f"CPU {cpu}; RSS max {rss}; scanned and in sync {f.get('populate_seconds')} s after the rescan"))
    return rows


def growth_rows(results):
    rows = []
    for entry in results.get("growth", {}).get("a", []):
        if "seconds" in entry:
            per = entry["bytes"] / GiB
            rows.append(("growth A-send", f"{entry['bytes'] / MiB:,.0f} MiB", f"{entry['seconds']} s",
                         f"{entry['seconds'] / per:.2f} s/GiB, {entry['cpu_total_s'] / per:.2f} CPU-s/GiB"))
    for entry in results.get("growth", {}).get("b", []):
        if "seconds" in entry:
            per = entry["files"] / 1000
            rows.append(("growth B", f"{entry['files']:,} files", f"{entry['seconds']} s",
                         f"{entry['seconds'] / per:.3f} s and {entry['cpu_total_s'] / per:.3f} CPU-s per 1,000 files; "
                         + rss_text(entry)))
    return rows


def limit_rows(results):
    limits = results.get("limits", {})
    labels = [("tcp_loopback", "loopback TCP copy, memory→memory"), ("tcp_loopback_file", "loopback TCP, file→file"),
              ("disk_write_fsync", "disk write + fsync"), ("aes256gcm_seal", "AES-256-GCM seal, 64 KiB"),
              ("chacha20poly1305_seal", "ChaCha20-Poly1305 seal, 64 KiB"), ("blake3", "BLAKE3, 1 MiB buffers"),
              ("sha256", "SHA-256, 1 MiB buffers")]
    rows = [("limit", label, f"{limits[k]['mb_s']:,.0f} MB/s", "") for k, label in labels if (limits.get(k) or {}).get("mb_s")]
    chunk = limits.get("fastcdc_chunk_hash") or {}
    if "filechunker_threads2" in chunk:
        rows.append(("limit", "FastCDC + BLAKE3 (2 threads)", f"{chunk['filechunker_threads2']['mb_s']:,.0f} MB/s", ""))
    return rows


def other_rows(results):
    rows = []
    r = results.get("syncpeer", {}).get("resume")
    if r and "seconds" in r:
        rows.append(("resume", "receiver SIGKILLed at 50 % of A-send", f"{r['seconds']} s",
                     f"{r.get('ratio_to_clean_send')}× the clean send; re-sent {mib(r['resent'])} "
                     f"(window {mib(r['window_bytes'])})"))
    lg = results.get("syncpeer", {}).get("large")
    if lg and "seconds" in lg:
        rows.append(("memory", f"A-send of {lg['bytes'] / GiB:g} GiB (largest chunks)", f"{lg['seconds']} s", rss_text(lg)))
    return rows


def table(results):
    rows = workload_rows(results) + f_rows(results) + growth_rows(results) + other_rows(results) + limit_rows(results)
    if not rows:
        return "(nothing measured)"
    w = [max(len(str(r[i])) for r in rows) for i in range(3)]
    lines = [f"{'workload':<{w[0]}}  {'tool':<{w[1]}}  {'value':>{w[2]}}  note",
             f"{'-' * w[0]}  {'-' * w[1]}  {'-' * w[2]}  ----"]
    for a, b, c, d in rows:
        lines.append(f"{a:<{w[0]}}  {b:<{w[1]}}  {c:>{w[2]}}  {d}")
    return "\n".join(lines)
