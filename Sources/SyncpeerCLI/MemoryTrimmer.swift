#if canImport(Glibc)
@preconcurrency internal import Glibc
#endif
internal import Dispatch

/// Hands freed heap memory back to the kernel (`malloc_trim`) when the daemon's resident
/// size grows past `threshold`, checked every `interval`.
///
/// glibc keeps the free space between live heap blocks resident. How much of it there is
/// depends on the order in which threads allocate and free, so the same work peaks at very
/// different sizes: indexing 100,000 small files (make bench, index_100k) peaked at 72 MiB in
/// most runs and at 98–163 MiB in others, with the same ~72 MiB in use. A trim returns those
/// free pages; a block in use is never touched. Below the threshold nothing is done, so a
/// transfer, whose buffers are reused from the heap, pays nothing (1 GiB A-send: 46–62 MiB).
final class MemoryTrimmer: @unchecked Sendable {
    // @unchecked: `afterLastTrim` is touched only on `queue`, by the timer's handler.
    static let threshold = 80 << 20
    /// Once trimmed, the next trim waits until the resident size has grown this much more:
    /// memory that is really in use is not trimmed over and over.
    static let growth = 8 << 20
    static let interval = DispatchTimeInterval.milliseconds(100)

    /// Whether to trim, for a resident size of `resident` bytes when the last trim left
    /// `afterLastTrim` (0 before the first).
    static func shouldTrim(resident: Int, afterLastTrim: Int) -> Bool {
        resident > threshold && resident >= afterLastTrim + growth
    }

    private let queue = DispatchQueue(label: "syncpeer.memory-trim", qos: .utility)
    private let timer: any DispatchSourceTimer
    private var afterLastTrim = 0

    init() {
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + Self.interval, repeating: Self.interval, leeway: .milliseconds(20))
        timer.setEventHandler { [weak self] in self?.check() }
    }

    func start() { timer.resume() }
    func stop() { timer.cancel() }

    private func check() {
        guard let resident = Self.residentBytes(), Self.shouldTrim(resident: resident, afterLastTrim: afterLastTrim) else { return }
        _ = trimmerMallocTrim(0)
        afterLastTrim = Self.residentBytes() ?? resident
    }

    /// The process's resident size (`/proc/self/statm`), nil where there is none.
    static func residentBytes() -> Int? {
        let fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        // "size resident shared text lib data dt", in pages.
        let fields = buffer[..<n].split(separator: UInt8(ascii: " "))
        guard fields.count >= 2, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

/// malloc_trim(3) (<malloc.h> is not part of the Glibc module).
@_silgen_name("malloc_trim") private func trimmerMallocTrim(_ pad: Int) -> Int32
