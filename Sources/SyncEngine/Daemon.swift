internal import Glibc
internal import PeerNet

/// A running node with its home lock and control socket: what `syncpeer daemon` runs.
package final class Daemon: Sendable {
    package let node: Node
    package let listenAddress: String
    let lock: HomeLock
    let control: ControlServer

    private init(node: Node, listenAddress: String, lock: HomeLock, control: ControlServer) {
        self.node = node
        self.listenAddress = listenAddress
        self.lock = lock
        self.control = control
    }

    /// Locks the home (one daemon per home), opens the node, listens, opens the control
    /// socket. `onEvent` sees every event from the start (including `listening`).
    /// `whenLocked` runs once the lock is held and before anything else: the place to clear
    /// what a crashed daemon of this home left (a daemon refused by the lock changes no file
    /// of the home, so the running one's stay).
    package static func start(home: NodeHome, config: NodeConfig, whenLocked: () -> Void = {},
                             onEvent: @escaping @Sendable (NodeEvent) -> Void) throws(EngineError) -> Daemon {
        // A home never initialised has no key: say what to do (not a lock-file error about
        // a folder that does not exist).
        guard access(home.keyFile, F_OK) == 0 else { throw .notInitialised(home: home.path) }
        let lock: HomeLock
        do { lock = try HomeLock.acquire(path: home.lockFile) } catch {
            throw .network("\(error.description) (home \(home.path))")
        }
        whenLocked()
        var config = config
        config.afterPowerLoss = RunningMarker.begin(home: home, bootID: config.bootID)
        let node = try Node.open(home: home, config: config)
        _ = node.subscribe(onEvent)
        let control = ControlServer(node: node, path: home.controlSocket)
        try control.start()
        let address: String
        do { address = try node.start() } catch {
            control.stop()
            throw error
        }
        return Daemon(node: node, listenAddress: address, lock: lock, control: control)
    }

    /// Says goodbye to every peer, closes the sockets and releases the home.
    package func stop() {
        control.stop()
        node.stop()
        RunningMarker.end(home: node.home)
        lock.release()
    }
}
