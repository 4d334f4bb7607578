internal import Glibc

/// A bounded set of slots held by connections, with a cap in total and a cap per source
/// address, and fairness: when every slot is taken, a newcomer from a source that holds
/// fewer slots than the busiest source takes the oldest slot of that busiest source. One
/// source (or a few) can therefore never lock the others out, and memory and threads spent
/// on connections that are not trusted yet stay bounded.
///
/// A value type: its owner confines it (a `Mutex`, or the node's queue).
struct SourceSlots<Holder> {
    let total: Int
    let perSource: Int
    /// In arrival order (the oldest first).
    private(set) var holders: [(id: UInt64, source: String, holder: Holder)] = []

    enum Decision {
        case admitted
        /// Admitted in place of `evicted`, whose connection the caller must end.
        case admittedEvicting(Holder)
        /// Not admitted (the caller ends the connection); says why.
        case refused(String)
    }

    init(total: Int, perSource: Int) {
        self.total = total
        self.perSource = perSource
    }

    func count(from source: String) -> Int {
        holders.reduce(0) { $0 + ($1.source == source ? 1 : 0) }
    }

    mutating func admit(id: UInt64, source: String, holder: Holder) -> Decision {
        let mine = count(from: source)
        if mine >= perSource {
            return .refused("\(mine) from \(source) already (at most \(perSource) per address)")
        }
        if holders.count < total {
            holders.append((id, source, holder))
            return .admitted
        }
        var counts: [String: Int] = [:]
        for entry in holders { counts[entry.source, default: 0] += 1 }
        // The busiest source gives up its oldest slot, but only if that leaves it with at
        // least as many as the newcomer's source then has (no ping-pong between equals).
        guard let busiest = counts.max(by: { $0.value < $1.value }), busiest.value > mine + 1,
              let victim = holders.firstIndex(where: { $0.source == busiest.key }) else {
            return .refused("all \(total) slots are taken")
        }
        let evicted = holders.remove(at: victim).holder
        holders.append((id, source, holder))
        return .admittedEvicting(evicted)
    }

    /// Frees the slot of `id` (nothing if it holds none, e.g. it was evicted).
    mutating func release(id: UInt64) {
        holders.removeAll { $0.id == id }
    }

    /// The key that groups addresses into one source: an IPv4 address as it is (an
    /// IPv4-mapped IPv6 address as its IPv4 address), an IPv6 address by its /64 network, which
    /// is what one host or one customer usually gets.
    static func sourceKey(_ host: String) -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        guard host.contains(":"), inet_pton(AF_INET6, host, &bytes) == 1 else { return host }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            return bytes[12..<16].map { String($0) }.joined(separator: ".")
        }
        return bytes[0..<8].map { byte in
            let hex = String(byte, radix: 16)
            return hex.count == 1 ? "0" + hex : hex
        }.joined() + "::/64"
    }
}
