internal import Glibc

/// Runs one responder's or querier's socket loop on the calling (dedicated) thread: waits
/// for datagrams, a wake-up or the next tick (`tick` ≤ 50 ms), re-reads the interfaces
/// every `refreshInterval`, and returns when `shouldStop()` is true.
func runMDNSLoop(socket: MDNSSocket, wake: WakePipe, refreshInterval: Duration,
                 shouldStop: () -> Bool,
                 onPacket: (MDNSPacket) -> Void,
                 onTick: (ContinuousClock.Instant) -> Void,
                 onInterfacesChanged: () -> Void) {
    var nextRefresh = ContinuousClock.now + refreshInterval
    while !shouldStop() {
        let descriptors = socket.descriptors
        var fds = [pollfd(fd: wake.readFD, events: Int16(POLLIN), revents: 0)]
            + descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        _ = poll(&fds, nfds_t(fds.count), 50)
        if fds[0].revents != 0 { wake.drain() }
        if shouldStop() { return }
        for (i, fd) in descriptors.enumerated() where fds[i + 1].revents & Int16(POLLIN) != 0 {
            var count = 0
            while count < 64, let packet = socket.receive(from: fd) {
                onPacket(packet)
                count += 1
            }
        }
        let now = ContinuousClock.now
        if now >= nextRefresh {
            nextRefresh = now + refreshInterval
            if socket.refreshInterfaces() { onInterfacesChanged() }
        }
        onTick(now)
    }
}

/// A random duration in `range` milliseconds.
func randomMilliseconds(_ range: ClosedRange<Int>) -> Duration {
    .milliseconds(Int.random(in: range))
}
