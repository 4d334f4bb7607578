#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation
import SyncpeerCLI

// A closed pipe must give an error on write, not kill the process.
signal(SIGPIPE, SIG_IGN)
let code = await CLI.run(Array(CommandLine.arguments.dropFirst()),
                         environment: ProcessInfo.processInfo.environment,
                         output: StandardOutput())
exit(code)
