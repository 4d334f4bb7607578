"""`make bench`: syncpeer next to Syncthing and rsync on the same workloads, on loopback.

Benchmark harness only (never part of the product). Modules:
  procs     processes we start (killed by PID), CPU and memory from /proc, bytes on a socket
  files     generated data: random files, many small files, a home-like tree
  limits    this machine's own limits (TCP copy, disk, crypto, chunking)
  peers     syncpeer under test: daemons, groups of paired nodes
  anchors   what it is measured against: Syncthing nodes and groups, an rsync daemon
  send      A-send (`syncpeer send`), its resume after a SIGKILL, the large-file memory run
  folders   folder workloads run the same way for every tool: A-share, B, C, D, E, F
  rsync     rsync's rows of B, C and D
  growth    how cost grows: A at several sizes, B at several counts
  report    the table, ratios to Syncthing and rsync, JSON
"""
