import Foundation
import Glibc
import Synchronization
import Testing

// Daemons with discovery on run only inside network namespaces made here
// (`ip netns exec NS syncpeer daemon …`) and removed in `defer`: multicast never reaches a
// real interface. Names are "spe-<pid>-<n>"; leftovers of crashed runs are removed first.

enum TestNetns {
    static let ipPath = "/usr/sbin/ip"

    /// Whether `ip netns` works here (probed once by adding and deleting a namespace).
    static let available: Bool = {
        guard FileManager.default.isExecutableFile(atPath: ipPath) else { return false }
        removeLeftovers()
        let name = "spe-\(getpid())-probe"
        guard (try? ip(["netns", "add", name])) != nil else { return false }
        _ = try? ip(["netns", "del", name])
        return true
    }()

    static let unavailableReason = "ip netns is unavailable (needs root and iproute2): daemons with discovery run only inside network namespaces, so these tests are skipped"

    private static func removeLeftovers() {
        guard let list = try? ip(["netns", "list"]) else { return }
        for line in list.split(separator: "\n") {
            let name = String(line.split(separator: " ").first ?? "")
            let parts = name.split(separator: "-")
            guard parts.count == 3, parts[0] == "spe", let pid = Int32(parts[1]) else { continue }
            if pid != getpid(), kill(pid, 0) != 0, errno == ESRCH { _ = try? ip(["netns", "del", name]) }
        }
    }

    private static let counter = Atomic<Int>(0)

    static func uniqueName() -> String { "spe-\(getpid())-\(counter.add(1, ordering: .relaxed).newValue)" }

    /// Interface names have at most 15 characters.
    static func uniqueSuffix() -> String { "\(getpid() % 100_000)e\(counter.add(1, ordering: .relaxed).newValue)" }

    struct CommandFailed: Error, CustomStringConvertible { var description: String }

    @discardableResult
    static func ip(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ipPath)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0 else {
            throw CommandFailed(description: "ip \(arguments.joined(separator: " ")) failed: \(text)")
        }
        return text
    }
}

/// A network namespace of our own; `remove()` deletes it (call it in `defer`).
final class TestNamespace: Sendable {
    let name: String

    private init() throws {
        name = TestNetns.uniqueName()
        try TestNetns.ip(["netns", "add", name])
    }

    /// One "machine": `lo` up with multicast on and 224.0.0.0/4 routed to it. Daemons in
    /// it discover each other with `--interface lo`.
    static func loopbackOnly() throws -> TestNamespace {
        let ns = try TestNamespace()
        do {
            try TestNetns.ip(["-n", ns.name, "link", "set", "lo", "up"])
            try TestNetns.ip(["-n", ns.name, "link", "set", "lo", "multicast", "on"])
            try TestNetns.ip(["-n", ns.name, "route", "add", "224.0.0.0/4", "dev", "lo"])
        } catch {
            ns.remove()
            throw error
        }
        return ns
    }

    /// Two "machines" on a LAN: namespaces joined by a veth pair, 10.99.0.1 (first) and
    /// 10.99.0.2 (second), multicast routed to the veth ends. The pair is created inside
    /// the first namespace, so it never exists in the root one.
    static func vethPair() throws -> (first: TestNamespace, second: TestNamespace, firstLink: String, secondLink: String) {
        try vethPair(ipv4: true, ipv6: false)
    }

    /// The same LAN with the chosen families. IPv6: link-local fe80::1 (first) and fe80::2
    /// (second) only, no other automatic address and no duplicate-address detection (usable
    /// at once); with IPv4 as well (dual stack), also fd99::1 and fd99::2.
    static func vethPair(ipv4: Bool, ipv6: Bool) throws -> (first: TestNamespace, second: TestNamespace, firstLink: String, secondLink: String) {
        let a = try TestNamespace()
        let b: TestNamespace
        do { b = try TestNamespace() } catch { a.remove(); throw error }
        let suffix = TestNetns.uniqueSuffix()
        let va = "va\(suffix)", vb = "vb\(suffix)"
        do {
            for ns in [a, b] { try TestNetns.ip(["-n", ns.name, "link", "set", "lo", "up"]) }
            try TestNetns.ip(["-n", a.name, "link", "add", va, "type", "veth", "peer", "name", vb, "netns", b.name])
            for (ns, dev, n) in [(a, va, 1), (b, vb, 2)] {
                var commands: [[String]] = []
                if ipv4 { commands.append(["addr", "add", "10.99.0.\(n)/24", "dev", dev]) }
                if ipv6 {
                    commands.append(["link", "set", dev, "addrgenmode", "none"])
                    commands.append(["addr", "add", "fe80::\(n)/64", "dev", dev, "nodad"])
                    if ipv4 { commands.append(["addr", "add", "fd99::\(n)/64", "dev", dev, "nodad"]) }
                }
                commands.append(["link", "set", dev, "up", "multicast", "on"])
                if ipv4 { commands.append(["route", "add", "224.0.0.0/4", "dev", dev]) }
                for command in commands { try TestNetns.ip(["-n", ns.name] + command) }
            }
        } catch {
            a.remove(); b.remove()
            throw error
        }
        return (a, b, va, vb)
    }

    func remove() {
        _ = try? TestNetns.ip(["netns", "del", name])
    }
}
