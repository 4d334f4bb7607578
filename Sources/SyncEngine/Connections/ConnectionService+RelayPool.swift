internal import Dispatch
internal import FoundationEssentials
internal import PeerCrypto
internal import PeerNet
internal import Synchronization

/// `daemon --relay-pool URL` (and `--global`): a thread asks the pools for their relays,
/// measures how fast a few of them answer and joins the fastest (`RelayPool.choose`), as
/// Syncthing's dynamic relay client does. They are then joined, dialled through and announced
/// like the relays given with `--relay`. A pool that cannot be read or lists nothing usable is
/// reported, and asked again later (`poolRetry`, growing to `poolRetryMaximum`).
extension ConnectionService {
    static let poolRetry: Duration = .seconds(30)
    static let poolRetryMaximum: Duration = .seconds(900)

    var relayPools: [RelayPool] { config.relayPools.compactMap { try? RelayPool(parsing: $0) } }

    /// Any thread but `queue`.
    func startRelayPools(tls: TLSIdentity) {
        let pools = relayPools
        guard !pools.isEmpty else { return }
        OSThread.start(name: "syncpeer-relay-pool") { [self] in
            var delay = Self.poolRetry
            while !stopped {
                var listed: [RelayEndpoint] = []
                let wait = delay
                for pool in pools {
                    do throws(EngineError) {
                        listed += try pool.fetch()
                    } catch {
                        queue.async { [self] in emitError(nil, "\(error.description) (asking again in \(wait))") }
                    }
                }
                let configured = relayEndpoints
                let chosen = RelayPool.choose(Array(Set(listed)).filter { !configured.contains($0) })
                if !chosen.isEmpty {
                    poolRelays.withLock { $0 = chosen }
                    for relay in chosen { startMembership(of: relay, tls: tls) }
                    return
                }
                if !listed.isEmpty {
                    let count = listed.count
                    queue.async { [self] in
                        emitError(nil, "none of the \(count) relays the relay pools listed answered (asking again in \(wait))")
                    }
                }
                let until = ContinuousClock.now + delay
                while ContinuousClock.now < until, !stopped { OSThread.sleep(for: .seconds(0.5)) }
                delay = min(delay * 2, Self.poolRetryMaximum)
            }
        }
    }
}
