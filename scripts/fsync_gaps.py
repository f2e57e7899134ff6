#!/usr/bin/env python3
"""Per file descriptor, from a `perf trace -e fdatasync,pwrite64,pwritev -o FILE -p <mariadbd>`
log: fdatasync count / median / p90, the idle time from the end of each fdatasync to the next
write on the same descriptor (median), and how many fdatasyncs had a write start during them
(a pipelined log writes the next group while the previous one is being synced).

  python3 scripts/fsync_gaps.py trace.txt
"""
import re, sys, statistics, collections
pat = re.compile(r'^\s*([\d.]+) \(\s*([\d.]+) ms\): (\S+)/(\d+) (\w+)\(fd: (\d+)')
ev = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = pat.match(line)
    if not m: continue
    t, d, comm, tid, call, fd = m.groups()
    t = float(t); d = float(d)
    ev[int(fd)].append((t, t + d, call))
for fd, es in sorted(ev.items(), key=lambda kv: -len(kv[1])):
    syncs = [e for e in es if e[2] == 'fdatasync']
    writes = [e for e in es if e[2] != 'fdatasync']
    if len(syncs) < 200: continue
    # gap: for each sync end, the first write starting after it
    ws = sorted(w[0] for w in writes)
    import bisect
    gaps = []
    overl = 0
    for s0, s1, _ in syncs:
        i = bisect.bisect_left(ws, s1)
        if i < len(ws): gaps.append((ws[i] - s1) * 1000)
        # writes started during this fsync
        j = bisect.bisect_left(ws, s0)
        if j < len(ws) and ws[j] < s1: overl += 1
    sd = sorted((s1 - s0) * 1000 for s0, s1, _ in syncs)
    print(f"fd {fd}: {len(syncs)} fdatasync median {statistics.median(sd):.0f} us p90 {sd[int(len(sd)*.9)]:.0f} us; "
          f"{len(writes)} writes; idle gap sync-end->next-write median {statistics.median(gaps):.0f} us; "
          f"fsyncs with a write started during them {overl} ({100*overl/len(syncs):.0f} %)")
