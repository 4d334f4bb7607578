#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import FoundationEssentials
import SyncpeerCLI

// A closed pipe must give an error on write, not kill the process.
signal(SIGPIPE, SIG_IGN)
#if canImport(Glibc)
// At most 8 malloc arenas (glibc's default is 8 per core). Each arena has one lock, and a
// block freed by another thread than the one that allocated it takes that arena's lock:
// with 2 arenas (set when a sender's chunk buffers kept its RSS at ~95 MiB for a 1 GiB
// file), the folder puller's thread slept on those locks ~200 times in B and the daemons'
// other threads as often. 8 arenas: B 1.34 → 1.24 s (tmpfs, 6 pairs), 0.14 CPU-s less; the
// 1 GiB send's peak RSS is the same (62–64 MiB: buffers are pooled and `MemoryTrimmer`
// trims past 80 MiB). (<malloc.h> is not part of the Glibc module: declared here;
// M_ARENA_MAX is -8.)
@_silgen_name("mallopt") func glibcMallopt(_ parameter: Int32, _ value: Int32) -> Int32
_ = glibcMallopt(-8, 8)
// Fixed thresholds instead of glibc's sliding ones. Freeing one large block (a chunk
// buffer of several MiB) raises the sliding mmap threshold to its size and the trim
// threshold to twice that, up to 64 MiB; from then on each thread arena keeps a free top
// of up to that much resident, and malloc_trim(3) does not shrink the top of a thread
// arena. An idle daemon that had scanned 100,000 files kept 150 MiB resident with 2.5 MiB
// in use (8 arenas). M_MMAP_THRESHOLD (-3) at the sliding maximum, 32 MiB, keeps blocks up
// to that size in the arenas as before; M_TRIM_THRESHOLD (-1) at 4 MiB gives back an
// arena's free top past that when a block is freed into it.
_ = glibcMallopt(-3, 32 << 20)
_ = glibcMallopt(-1, 4 << 20)
#endif
#if canImport(Glibc)
// A daemon with large shared folders holds a batch of temporary files, transfers and
// sockets open at once: use what the hard limit allows (up to 65,536) instead of the
// usual soft limit of 1,024.
var openFiles = rlimit()
if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &openFiles) == 0, openFiles.rlim_cur < min(openFiles.rlim_max, 65_536) {
    openFiles.rlim_cur = min(openFiles.rlim_max, 65_536)
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &openFiles)
}
#endif
let code = await CLI.run(Array(CommandLine.arguments.dropFirst()),
                         environment: ProcessInfo.processInfo.environment,
                         output: StandardOutput())
exit(code)
