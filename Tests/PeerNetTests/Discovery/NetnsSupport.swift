import Foundation
import Glibc
import PeerNet
import Synchronization
import Testing

// Every test that opens an mDNS socket does so inside network namespaces it creates here
// (and removes in `defer`): multicast never reaches a real interface. Our code enters a
// namespace through `NetnsThread`, a thread that calls setns(2) on itself first; the
// sockets and threads that the advertiser or browser creates from it stay in that
// namespace. Independent implementations run as `ip netns exec NS …` child processes.

enum Netns {
    /// Whether `ip netns` works here (probed once by adding and deleting a namespace).
    static let available: Bool = {
        removeLeftovers()
        let name = "spd-\(getpid())-probe"
        guard (try? ip(["netns", "add", name])) != nil else { return false }
        _ = try? ip(["netns", "del", name])
        return true
    }()

    static let unavailableReason = "ip netns is unavailable (needs root and iproute2): the mDNS tests run only inside network namespaces"

    /// Deletes namespaces "spd-<pid>-…" of test processes that no longer run (a crashed
    /// run cannot execute its `defer`).
    private static func removeLeftovers() {
        guard let list = try? ip(["netns", "list"]) else { return }
        for line in list.split(separator: "\n") {
            let name = String(line.split(separator: " ").first ?? "")
            let parts = name.split(separator: "-")
            guard parts.count == 3, parts[0] == "spd", let pid = Int32(parts[1]) else { continue }
            if pid != getpid(), kill(pid, 0) != 0, errno == ESRCH { _ = try? ip(["netns", "del", name]) }
        }
    }

    private static let counter = Atomic<Int>(0)

    /// A unique name: "spd-<pid>-<n>".
    static func uniqueName() -> String {
        "spd-\(getpid())-\(counter.add(1, ordering: .relaxed).newValue)"
    }

    /// A short unique interface-name suffix (interface names have at most 15 characters).
    static func uniqueSuffix() -> String {
        "\(getpid() % 100_000)x\(counter.add(1, ordering: .relaxed).newValue)"
    }
}

struct CommandFailed: Error, CustomStringConvertible {
    var description: String
}

/// Runs `ip ARGS`; throws with its output when it fails.
@discardableResult
func ip(_ arguments: [String]) throws -> String {
    try runCommand("/usr/sbin/ip", arguments)
}

@discardableResult
func runCommand(_ path: String, _ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    guard process.terminationStatus == 0 else {
        throw CommandFailed(description: "\(path) \(arguments.joined(separator: " ")) failed: \(text)")
    }
    return text
}

/// A network namespace of our own, removed by `remove()`.
final class TestNamespace: Sendable {
    let name: String

    /// A namespace with `lo` up, multicast on, and 224.0.0.0/4 routed to it: one
    /// "machine" on which several nodes meet over loopback.
    static func loopbackOnly() throws -> TestNamespace {
        let ns = try TestNamespace()
        do {
            try ip(["-n", ns.name, "link", "set", "lo", "up"])
            try ip(["-n", ns.name, "link", "set", "lo", "multicast", "on"])
            try ip(["-n", ns.name, "route", "add", "224.0.0.0/4", "dev", "lo"])
        } catch {
            ns.remove()
            throw error
        }
        return ns
    }

    private init() throws {
        name = Netns.uniqueName()
        try ip(["netns", "add", name])
    }

    /// Two namespaces joined by a veth pair: 10.99.0.1 (first) and 10.99.0.2 (second),
    /// multicast routed to the veth ends. Returns the namespaces and interface names.
    static func vethPair() throws -> (TestNamespace, TestNamespace, String, String) {
        try vethPair(ipv4: true, ipv6: false)
    }

    /// A veth pair as above with the chosen families. IPv6: link-local fe80::1 (first) and
    /// fe80::2 (second) only, no other automatic address, no duplicate-address detection
    /// (usable at once); with IPv4 as well (dual stack), also fd99::1 and fd99::2.
    static func vethPair(ipv4: Bool, ipv6: Bool) throws -> (TestNamespace, TestNamespace, String, String) {
        let a = try TestNamespace()
        let b: TestNamespace
        do { b = try TestNamespace() } catch { a.remove(); throw error }
        let suffix = Netns.uniqueSuffix()
        let va = "va\(suffix)", vb = "vb\(suffix)"
        do {
            for ns in [a, b] { try ip(["-n", ns.name, "link", "set", "lo", "up"]) }
            // Created inside the first namespace, so the pair never exists in the root one.
            try ip(["-n", a.name, "link", "add", va, "type", "veth", "peer", "name", vb, "netns", b.name])
            for (ns, dev, n) in [(a, va, 1), (b, vb, 2)] {
                if ipv4 {
                    try ip(["-n", ns.name, "addr", "add", "10.99.0.\(n)/24", "dev", dev])
                }
                if ipv6 {
                    try ip(["-n", ns.name, "link", "set", dev, "addrgenmode", "none"])
                    try ip(["-n", ns.name, "addr", "add", "fe80::\(n)/64", "dev", dev, "nodad"])
                    if ipv4 { try ip(["-n", ns.name, "addr", "add", "fd99::\(n)/64", "dev", dev, "nodad"]) }
                }
                try ip(["-n", ns.name, "link", "set", dev, "up", "multicast", "on"])
                if ipv4 { try ip(["-n", ns.name, "route", "add", "224.0.0.0/4", "dev", dev]) }
            }
        } catch {
            a.remove(); b.remove()
            throw error
        }
        return (a, b, va, vb)
    }

    func remove() {
        _ = try? ip(["netns", "del", name])
    }
}

struct SetnsFailed: Error, CustomStringConvertible {
    var description: String
}

/// A thread that has entered a namespace with setns(2) and runs submitted closures.
/// Everything created from it (sockets, the advertiser's and browser's threads) lives in
/// that namespace. Before running anything it checks that its own namespace is the one
/// asked for (same inode as /var/run/netns/NAME), so nothing ever runs in the root one.
final class NetnsThread: Sendable {
    private let jobs = Mutex<[@Sendable () -> Void]>([])
    private let signal = DispatchSemaphore(value: 0)
    private let finished = Mutex(false)

    init(_ namespace: TestNamespace) throws {
        let ready = DispatchSemaphore(value: 0)
        let outcome = Mutex<String?>("not started")
        let path = "/var/run/netns/\(namespace.name)"
        let thread = Thread { [self] in
            let error = Self.enter(path)
            outcome.withLock { $0 = error }
            ready.signal()
            guard error == nil else { return }
            while true {
                signal.wait()
                let batch = jobs.withLock { j -> [@Sendable () -> Void] in defer { j = [] }; return j }
                for job in batch { job() }
                if finished.withLock({ $0 }) { return }
            }
        }
        thread.start()
        ready.wait()
        if let error = outcome.withLock({ $0 }) { throw SetnsFailed(description: error) }
    }

    private typealias SetnsFunction = @convention(c) (Int32, Int32) -> Int32

    /// Calls setns(fd, CLONE_NEWNET) on the current thread and verifies the result.
    /// Returns an error text, or nil on success.
    private static func enter(_ path: String) -> String? {
        guard let symbol = dlsym(nil, "setns") else { return "setns is not available in libc" }
        let setns = unsafeBitCast(symbol, to: SetnsFunction.self)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "cannot open \(path): \(String(cString: strerror(errno)))" }
        defer { close(fd) }
        guard setns(fd, 0x4000_0000 /* CLONE_NEWNET */) == 0 else {
            return "setns(\(path)) failed: \(String(cString: strerror(errno)))"
        }
        var target = stat(), mine = stat()
        guard stat(path, &target) == 0, stat("/proc/thread-self/ns/net", &mine) == 0,
              target.st_ino == mine.st_ino, target.st_dev == mine.st_dev else {
            return "after setns the thread is not in \(path)"
        }
        return nil
    }

    /// Runs `body` on the namespace thread and returns its result.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) throws -> T {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Result<T, any Error>?>(nil)
        jobs.withLock { $0.append { result.withLock { $0 = Result { try body() } }; done.signal() } }
        signal.signal()
        guard done.wait(timeout: .now() + 30) == .success else { throw Hung(description: "namespace thread job hung") }
        return try result.withLock { $0! }.get()
    }

    /// Ends the thread (after pending jobs).
    func finish() {
        finished.withLock { $0 = true }
        signal.signal()
    }
}

/// Collects a browser's events with their arrival times.
final class EventLog: Sendable {
    private let events = Mutex<[(ContinuousClock.Instant, DiscoveryEvent)]>([])

    func append(_ event: DiscoveryEvent) {
        events.withLock { $0.append((.now, event)) }
    }

    var all: [DiscoveryEvent] { events.withLock { $0.map(\.1) } }

    /// Waits (without blocking the concurrency pool) until some event satisfies `match`;
    /// returns it with its arrival time, or nil after `timeout`.
    func wait(timeout: Duration, _ match: @Sendable (DiscoveryEvent) -> Bool) async -> (ContinuousClock.Instant, DiscoveryEvent)? {
        let deadline = ContinuousClock.now + timeout
        while true {
            let snapshot = events.withLock { $0 }
            if let hit = snapshot.first(where: { match($0.1) }) { return hit }
            if ContinuousClock.now >= deadline { return nil }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    func found(_ displayName: String) -> ServiceInstance? {
        for event in all {
            if case let .found(instance) = event, instance.displayName == displayName { return instance }
        }
        return nil
    }
}

extension DiscoveryEvent {
    var isFound: Bool { if case .found = self { return true }; return false }

    func isFound(_ displayName: String) -> Bool {
        if case let .found(instance) = self { return instance.displayName == displayName }
        return false
    }

    func isLost(_ displayName: String) -> Bool {
        if case let .lost(name) = self { return name.hasPrefix(displayName + ".") }
        return false
    }
}
