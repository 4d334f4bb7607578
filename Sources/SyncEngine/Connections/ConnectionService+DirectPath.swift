internal import Foundation

/// Relay → direct: a relay carries a paired peer's session only while no direct path
/// works. Every `directRetryInterval`, a connected relayed session's peer is dialled at the
/// addresses known for it (nearby, discovery servers' answers, stored), one per try, and
/// looked up again at the discovery servers. A direct session that completes its handshake
/// replaces the relayed one (`begin`: direct wins over relayed at both ends), and the
/// transfers under way go on in it, as after any duplicate session.
extension ConnectionService {
    /// On `queue`, at every tick.
    func tryDirectPaths() {
        let now = ContinuousClock.now
        for session in sessions.values where session.relayHost != nil && session.machine.state == .connected {
            guard let due = session.nextDirectTry else {
                session.nextDirectTry = now + config.directRetryInterval
                continue
            }
            guard now >= due else { continue }
            session.nextDirectTry = now + config.directRetryInterval
            let device = session.deviceKey
            startLookup(device: device)
            let addresses = knownAddresses(of: device)
            guard !addresses.isEmpty else { continue }
            let address = addresses[session.directTries % addresses.count]
            session.directTries += 1
            // Failures are expected (that is why the relay carries it): not reported.
            startDial(address: address, expected: device, context: nil, progress: nil, completion: nil, quiet: true)
        }
    }
}
