internal import PeerCrypto
internal import SyncEngine
internal import Wormhole

/// `syncpeer pair --code [CODE]`: the running daemon's node and whoever holds the code swap
/// keys through a wormhole (`WormholePairing`), then the daemon pins the other's key
/// (control op `pair-key`) and dials it.
struct WormholePair: Sendable {
    let code: String?
    let mailbox: String

    func run(_ context: CommandContext) throws(CLIError) -> Int32 {
        let identity: Identity
        do { identity = try NodeSetup.loadIdentity(home: context.home) } catch { throw CLIError(error) }
        // The daemon answers first: no code is handed out for a node that could not record the pairing.
        let status = try context.call(.status, as: NodeStatus.self)
        let session: WormholeSession
        do throws(WormholeError) {
            let given = try code.map { c throws(WormholeError) in try WormholeCode(parsing: c) }
            session = try WormholeSession.open(url: mailbox, code: given,
                                               appVersions: WormholeSession.appVersions(abilities: [WormholePairing.ability])) { code in
                guard given == nil else { return }
                WormholeCodeEvent.announce(code, context, text: "Pairing code is: \(code)\nOn the other computer, run:\n\n  syncpeer pair --code \(code)\n\n")
            }
        } catch { throw CLIError(error) }
        let interrupt = InterruptWatch { session.abandon("pairing cancelled (Ctrl-C)") }
        defer { interrupt.stop() }
        let peer: WormholePairing.Peer
        do throws(WormholeError) {
            // Concrete addresses: a wildcard listen address ("[::]:22000") tells the other side nothing.
            peer = try WormholePairing.exchange(session, keyPair: identity.keyPair, name: status.name,
                                                addresses: status.addresses ?? [status.listen])
        } catch {
            session.close(mood: "errory")
            return try WormholeInterrupted.check(interrupt, error, context)
        }
        let result: PeerResult
        do { result = try context.call(.pairKey(key: peer.keyHex, name: peer.name, addresses: peer.addresses), as: PeerResult.self) } catch {
            session.abandon("the other side could not record the pairing")
            throw error
        }
        do throws(WormholeError) {
            try WormholePairing.confirmRecorded(session)
            session.close()
        } catch {
            // Paired on one side only is no pairing: undone here too.
            session.close(mood: "errory")
            _ = try? context.call(.unpair(peer: result.peer.id.description), as: PeerResult.self)
            throw CLIError.failure("not paired: the other side did not record the pairing (\(error.description))")
        }
        // Both sides know each other now: connect (a failure is no error: the daemons dial
        // each other again, or find each other by discovery).
        let connected = (try? context.call(.connect(peer: result.peer.id.description), as: PeerResult.self)) != nil
        context.print(result, text: "Paired with \(EventRenderer.peerName(result.peer))" + (connected ? "" : " (not connected yet)"))
        return ExitCode.success
    }
}
