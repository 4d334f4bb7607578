import Foundation
import Glibc
import Synchronization

/// Runs a process with its standard output and error on a pseudo-terminal of a given
/// width, and keeps everything it draws: the test reads the frames a user would see.
final class PseudoTerminal {
    let process = Process()
    private let master: Int32
    private let data = CollectedOutput()
    private let reader: Thread

    /// `input`: its standard input (default: none); `launch`: how `syncpeer ARGS` is started
    /// (default: as is; e.g. through `ip netns exec`).
    init(_ arguments: [String], environment: [String: String], columns: UInt16 = 60, rows: UInt16 = 24,
         input: FileHandle = FileHandle.nullDevice, launch: (String, [String]) -> (String, [String]) = { ($0, $1) }) throws {
        // posix_openpt/grantpt/unlockpt/ptsname are not in the Glibc module: the same through
        // /dev/ptmx and its ioctls (unlock the slave, ask its number).
        master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard master >= 0 else { throw POSIXError(.ENOTTY) }
        var unlock: Int32 = 0
        var number: UInt32 = 0
        let setLock: UInt = 0x4004_5431, getNumber: UInt = 0x8004_5430   // TIOCSPTLCK, TIOCGPTN
        guard ioctl(master, setLock, &unlock) == 0, ioctl(master, getNumber, &number) == 0 else {
            close(master)
            throw POSIXError(.ENOTTY)
        }
        var size = winsize(ws_row: rows, ws_col: columns, ws_xpixel: 0, ws_ypixel: 0)
        _ = ioctl(master, UInt(TIOCSWINSZ), &size)
        let slave = open("/dev/pts/\(number)", O_RDWR | O_NOCTTY)
        guard slave >= 0 else { close(master); throw POSIXError(.ENOTTY) }
        let terminal = FileHandle(fileDescriptor: slave, closeOnDealloc: true)
        let (executable, launchArguments) = launch(SyncpeerRunner.binary, arguments)
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = launchArguments
        process.environment = environment
        process.standardOutput = terminal
        process.standardError = terminal
        process.standardInput = input
        let fd = master
        let data = self.data
        reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = read(fd, &buffer, buffer.count)
                if n <= 0 { return }  // EIO once every writer closed its side
                data.append(buffer[0..<n])
            }
        }
        try process.run()
        try terminal.close()
        reader.start()
    }

    /// Everything drawn so far, escape sequences included.
    var raw: String { data.text }

    /// Waits for the process to end; returns its exit status.
    func wait() -> Int32 {
        process.waitUntilExit()
        // Let the reader take what is still in the terminal's buffer.
        Thread.sleep(forTimeInterval: 0.2)
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        close(master)
    }

    /// The lines a user saw, each redraw of a line one frame: the drawn text split at
    /// carriage returns and newlines, escape sequences (cursor moves, colours) removed.
    static func frames(_ raw: String) -> [String] {
        plain(raw).split(whereSeparator: { $0 == "\r" || $0 == "\n" || $0 == "\r\n" })
            .map { String($0).trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// The text without ANSI escape sequences (CSI: ESC [ parameters letter).
    static func plain(_ raw: String) -> String {
        var out = ""
        var iterator = raw.unicodeScalars.makeIterator()
        while let scalar = iterator.next() {
            guard scalar == "\u{1b}" else { out.unicodeScalars.append(scalar); continue }
            guard iterator.next() == "[" else { continue }
            while let next = iterator.next(), !(("A"..."Z").contains(next) || ("a"..."z").contains(next)) {}
        }
        return out
    }
}

/// Output a reader thread collects while the test reads it (a terminal's, a pipe's).
final class CollectedOutput: Sendable {
    private let bytes = Mutex(Data())
    func append(_ more: some Sequence<UInt8>) { bytes.withLock { $0.append(contentsOf: more) } }
    var text: String { bytes.withLock { String(decoding: $0, as: UTF8.self) } }
}
