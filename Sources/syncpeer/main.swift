#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation
import SyncpeerCLI

// A closed pipe must give an error on write, not kill the process.
signal(SIGPIPE, SIG_IGN)
#if canImport(Glibc)
// glibc gives each thread that allocates its own malloc arena and keeps freed chunk buffers
// in it: with Dispatch worker threads moving 1–16 MiB chunks, a sender's RSS grew to
// ~95 MiB for a 1 GiB file (16 MiB window). Two arenas: ~63 MiB.
// (<malloc.h> is not part of the Glibc module: declared here; M_ARENA_MAX is -8.)
@_silgen_name("mallopt") func glibcMallopt(_ parameter: Int32, _ value: Int32) -> Int32
_ = glibcMallopt(-8, 2)
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
