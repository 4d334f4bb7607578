internal import Glibc
internal import Synchronization

/// A read-only window of a file mapped into memory (`mmap`, populated at once), so that a
/// chunk is encrypted or hashed straight from the page cache instead of being copied out of
/// it by `pread` first (A-send: 0.26 of the sender's 1.18 CPU-s per GiB went to those copies).
///
/// A mapped file that shrinks under us would raise SIGBUS on the first access past its new
/// end, which kills the process. So every window is registered with a guard: a SIGBUS at an
/// address inside a live window maps a page of zeros there instead and counts a fault in the
/// window's slot. Whoever read through the window checks `faulted` after reading: the bytes
/// it read were not the file's (the file changed since it was scanned). A SIGBUS anywhere
/// else goes to the action that was there before the guard.
///
/// Not thread-safe: one reader at a time (the bytes may be read by one thread while it holds
/// the window). At most `MappedWindow.slotCount` windows are mapped at once; beyond that, and
/// where mapping fails, `map` returns nil and the caller reads with `pread`.
package final class MappedWindow {
    /// File offset of `bytes[0]`.
    package let offset: UInt64
    /// The mapped bytes (`count` as asked, from `offset`).
    package let bytes: UnsafeRawBufferPointer
    private let mapping: UnsafeMutableRawPointer
    private let mappingLength: Int
    private let slot: Int
    private let faultsAtStart: UInt

    /// Slots of windows that may be mapped at once (a guard's scan of them is a few loads).
    package static let slotCount = 64

    /// Maps `count` bytes at `offset` of `fd` (populated), or nil: nothing to map, the file is
    /// shorter than that now, no slot is free, or `mmap` failed.
    package static func map(fd: Int32, offset: UInt64, count: Int) -> MappedWindow? {
        guard count > 0, SignalGuard.installed else { return nil }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, UInt64(st.st_size) >= offset + UInt64(count) else { return nil }
        let page = UInt64(SignalGuard.pageSize)
        let start = offset & ~(page - 1)
        let length = Int(offset - start) + count
        guard let slot = SignalGuard.acquire() else { return nil }
        guard let base = mmap(nil, length, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, off_t(start)), base != MAP_FAILED else {
            SignalGuard.release(slot)
            return nil
        }
        return MappedWindow(offset: offset, count: count, mapping: base, length: length, slot: slot)
    }

    private init(offset: UInt64, count: Int, mapping: UnsafeMutableRawPointer, length: Int, slot: Int) {
        self.offset = offset
        self.mapping = mapping
        self.mappingLength = length
        self.slot = slot
        bytes = UnsafeRawBufferPointer(start: mapping + (length - count), count: count)
        faultsAtStart = SignalGuard.faults(slot)
        SignalGuard.register(slot, start: UInt(bitPattern: mapping), end: UInt(bitPattern: mapping) + UInt(length))
    }

    deinit {
        SignalGuard.unregister(slot)
        munmap(mapping, mappingLength)
        SignalGuard.release(slot)
    }

    /// Whether any read through the window touched a page the file no longer has (it read
    /// zeros there): the file changed, what was read is not its content.
    package var faulted: Bool { SignalGuard.faults(slot) != faultsAtStart }

    /// Whether `offset ..< offset + count` lies inside the window.
    package func covers(offset: UInt64, count: Int) -> Bool {
        offset >= self.offset && offset + UInt64(count) <= self.offset + UInt64(bytes.count)
    }

    /// The bytes at file offset `offset` (inside the window).
    package func slice(offset: UInt64, count: Int) -> UnsafeRawBufferPointer {
        precondition(covers(offset: offset, count: count))
        return UnsafeRawBufferPointer(rebasing: bytes[Int(offset - self.offset)..<(Int(offset - self.offset) + count)])
    }
}

/// The SIGBUS guard of mapped windows: a fixed table of slots (start, end, faults), read by
/// the handler without locks (each word is written whole; a window's own slot is written
/// before it is read through, by the thread that reads it), taken and given back under a
/// mutex.
enum SignalGuard {
    static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
    /// start, end, faults of each slot; start 0: not in use.
    nonisolated(unsafe) static let table: UnsafeMutablePointer<UInt> = {
        let table = UnsafeMutablePointer<UInt>.allocate(capacity: 3 * MappedWindow.slotCount)
        table.initialize(repeating: 0, count: 3 * MappedWindow.slotCount)
        return table
    }()
    /// The action SIGBUS had before the guard: what a fault outside every window gets.
    nonisolated(unsafe) static let previous: UnsafeMutablePointer<sigaction> = {
        let previous = UnsafeMutablePointer<sigaction>.allocate(capacity: 1)
        previous.initialize(to: sigaction())
        return previous
    }()
    private static let free = Mutex<[Int]>(Array((0..<MappedWindow.slotCount).reversed()))

    /// Installs the handler once; false if it could not be installed (then nothing is mapped).
    static let installed: Bool = {
        _ = table
        _ = previous
        var action = sigaction()
        action.__sigaction_handler.sa_sigaction = { _, info, _ in SignalGuard.handle(info) }
        action.sa_flags = SA_SIGINFO | SA_ONSTACK
        sigemptyset(&action.sa_mask)
        return sigaction(SIGBUS, &action, previous) == 0
    }()

    static func acquire() -> Int? { free.withLock { $0.popLast() } }
    static func release(_ slot: Int) { free.withLock { $0.append(slot) } }

    static func register(_ slot: Int, start: UInt, end: UInt) {
        (table + 3 * slot + 1).pointee = end
        (table + 3 * slot).pointee = start
    }

    static func unregister(_ slot: Int) {
        (table + 3 * slot).pointee = 0
    }

    static func faults(_ slot: Int) -> UInt { (table + 3 * slot + 2).pointee }

    /// In the signal handler: only loads, stores, `mmap` and `sigaction` (async-signal-safe).
    static func handle(_ info: UnsafeMutablePointer<siginfo_t>?) {
        let address = UInt(bitPattern: info?.pointee._sifields._sigfault.si_addr)
        for slot in 0..<MappedWindow.slotCount {
            let start = (table + 3 * slot).pointee
            guard start != 0, address >= start, address < (table + 3 * slot + 1).pointee else { continue }
            let page = UnsafeMutableRawPointer(bitPattern: address & ~UInt(pageSize - 1))
            let zeros = mmap(page, pageSize, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
            if zeros != MAP_FAILED {
                (table + 3 * slot + 2).pointee &+= 1
                return  // the read is retried, and reads zeros
            }
            break
        }
        // Not a window's: the earlier action takes it when the access faults again.
        sigaction(SIGBUS, previous, nil)
    }
}
