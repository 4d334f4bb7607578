internal import FoundationEssentials
package import PeerCrypto
internal import PeerNet
internal import Synchronization

/// One wormhole between two sides: the code, the SPAKE2 exchange in the `pake` phase, the
/// key confirmation in the `version` phase, then numbered application messages, each in a
/// SecretBox under a key of its own (sender's side, phase).
///
///     sender:   allocate → code → claim → open → add pake ┐
///     receiver:             code → claim → open → add pake ┤→ key → add version → release
///     both:     their version opens? (no: wrong code, close "scary") → messages "0", "1", …
///
/// One thread uses the session; `abandon` may come from another (Ctrl-C). Its mutable state
/// sits in two `Mutex`es: what `receive` holds back, and what `abandon` shares.
package final class WormholeSession: Sendable {
    /// The application id of file and text transfer; every Magic Wormhole client uses it.
    package static let fileTransferAppID = "lothar.com/wormhole/text-or-file-xfer"
    /// Application messages held back waiting for an earlier phase.
    static let maxPendingPhases = 16

    package let code: WormholeCode
    private let mailbox: MailboxClient
    private let mailboxID: String
    private let key: SecureBytes
    /// What the other side's `version` message said (its `app_versions`).
    package let peerAppVersions: [String: String]
    /// What the other side said it can do beyond Magic Wormhole when it is syncpeer
    /// (`app_versions.syncpeer.abilities`; at most `maxAbilities`, each at most 64 bytes).
    package let peerAbilities: Set<String>
    static let maxAbilities = 16
    /// The receiving side: the next phase to hand out and the later ones that came early.
    private struct Receiving {
        var nextInPhase = 0
        var pending: [Int: [UInt8]] = [:]
    }
    private let receiving = Mutex(Receiving())
    /// Shared with `abandon`, which may run on another thread (Ctrl-C).
    private struct Shared {
        var nextOutPhase = 0
        var closed = false
        var onAbandon: [@Sendable () -> Void] = []
    }
    private let shared = Mutex(Shared())

    /// Opens a wormhole. With no `code`, allocates a nameplate and makes one, passing it to
    /// `onCode` before waiting for the other side; with one, joins it. Returns once the
    /// other side proved it holds the same code; throws `wrongCode` if it does not.
    package static func open(url: String, appID: String = fileTransferAppID, code given: WormholeCode?,
                            timeout: Duration = .seconds(30), waitForPeer: Duration? = nil,
                            appVersions: [String: Any] = [:], onCode: (WormholeCode) -> Void = { _ in }) throws(WormholeError) -> WormholeSession {
        let mailbox = try MailboxClient.connect(url: url, appid: appID, timeout: timeout)
        var mailboxID: String?
        do {
            let code = try given ?? WormholeCode.random(nameplate: mailbox.allocate())
            let nameplate = code.nameplate
            let id = try mailbox.claim(nameplate)
            mailboxID = id
            try mailbox.open(id)
            onCode(code)
            let spake = SPAKE2Symmetric(password: Array(code.description.utf8), identity: Array(appID.utf8))
            try mailbox.add(phase: "pake", body: JSONValue.bytes(of: ["pake_v1": hex(spake.outboundMessage)])!)
            let deadline = waitForPeer.map { ContinuousClock.now + $0 }
            var early: [MailboxClient.Message] = []
            var theirPake: [UInt8]?
            while theirPake == nil {
                let message = try mailbox.nextMessage(deadline: deadline)
                if message.phase == "pake" {
                    guard let object = JSONValue.object(parsing: message.body),
                          let text = object["pake_v1"] as? String, let bytes = bytes(fromHex: text)
                    else { throw WormholeError.protocolViolation("malformed pake message") }
                    theirPake = bytes
                } else {
                    guard early.count < maxPendingPhases else { throw WormholeError.protocolViolation("too many messages before the key exchange") }
                    early.append(message)
                }
            }
            let key: SecureBytes
            do { key = try spake.finish(theirPake!) } catch { throw WormholeError.protocolViolation("bad pake message: \(error)") }
            let versions: [String: Any] = ["app_versions": appVersions]
            let versionBox = try SecretBox(key: phaseKey(key, side: mailbox.side, phase: "version"))
            try mailbox.add(phase: "version", body: versionBox.seal(try Self.encoded(versions)))
            try? mailbox.release(nameplate)
            // Their version: the first message that opens proves they hold the code.
            var theirs: MailboxClient.Message? = early.first { $0.phase == "version" }
            early.removeAll { $0.phase == "version" }
            while theirs == nil {
                let message = try mailbox.nextMessage(deadline: deadline)
                if message.phase == "version" { theirs = message } else {
                    guard early.count < maxPendingPhases else { throw WormholeError.protocolViolation("too many messages before the version") }
                    early.append(message)
                }
            }
            guard let plain = try? SecretBox(key: phaseKey(key, side: theirs!.side, phase: "version")).open(theirs!.body) else {
                throw WormholeError.wrongCode
            }
            let peerVersions = JSONValue.object(parsing: plain) ?? [:]
            let session = WormholeSession(code: code, mailbox: mailbox, mailboxID: id, key: key,
                                          peerAppVersions: (peerVersions["app_versions"] as? [String: Any]) ?? [:])
            for message in early { try session.accept(message) }
            return session
        } catch let error as WormholeError {
            mailbox.close(mailboxID, mood: error == .wrongCode ? "scary" : "errory")
            throw error
        } catch {
            mailbox.close(mailboxID, mood: "errory")
            throw .protocolViolation("\(error)")
        }
    }

    private init(code: WormholeCode, mailbox: MailboxClient, mailboxID: String, key: SecureBytes, peerAppVersions: [String: Any]) {
        self.code = code
        self.mailbox = mailbox
        self.mailboxID = mailboxID
        self.key = key
        self.peerAppVersions = peerAppVersions.mapValues { "\($0)" }
        let abilities = ((peerAppVersions["syncpeer"] as? [String: Any])?["abilities"] as? [Any]) ?? []
        peerAbilities = Set(abilities.prefix(Self.maxAbilities).compactMap { $0 as? String }.filter { $0.utf8.count <= 64 })
    }

    /// The `app_versions` syncpeer sends: the abilities only another syncpeer reads (a plain
    /// Magic Wormhole client ignores keys it does not know).
    package static func appVersions(abilities: [String]) -> [String: Any] {
        ["syncpeer": ["abilities": abilities]]
    }

    static func phaseKey(_ key: SecureBytes, side: String, phase: String) -> SecureBytes {
        HKDFSHA256.derive(inputKeyMaterial: key, info: Array("wormhole:phase:".utf8) + SHA256.hash(Array(side.utf8)) + SHA256.hash(Array(phase.utf8)), length: 32)
    }

    /// A key for `purpose` derived from the shared key (Magic Wormhole's `derive_key`).
    package func deriveKey(purpose: String, length: Int = 32) -> SecureBytes {
        HKDFSHA256.derive(inputKeyMaterial: key, info: Array(purpose.utf8), length: length)
    }

    private static func encoded(_ object: [String: Any]) throws(WormholeError) -> [UInt8] {
        guard let bytes = JSONValue.bytes(of: object) else { throw .protocolViolation("cannot encode a message") }
        return bytes
    }

    /// Sends the next application message as a JSON object.
    package func send(_ object: [String: Any]) throws(WormholeError) {
        let data = try Self.encoded(object)
        let phase: String? = shared.withLock { state in
            guard !state.closed else { return nil }
            defer { state.nextOutPhase += 1 }
            return String(state.nextOutPhase)
        }
        guard let phase else { throw .transfer("cancelled") }
        let box: SecretBox
        do { box = try SecretBox(key: Self.phaseKey(key, side: mailbox.side, phase: phase)) } catch { throw .protocolViolation("\(error)") }
        try mailbox.add(phase: phase, body: box.seal(data))
    }

    /// The next application message from the other side, in phase order, as a JSON object.
    /// Throws `remote` when it is `{"error": …}`.
    package func receive(deadline: ContinuousClock.Instant? = nil) throws(WormholeError) -> [String: Any] {
        var plain = takeNextInPhase()
        while plain == nil {
            try accept(try mailbox.nextMessage(deadline: deadline))
            plain = takeNextInPhase()
        }
        guard let plain, let object = JSONValue.object(parsing: plain) else {
            throw .protocolViolation("an application message is not a JSON object")
        }
        if let error = object["error"] { throw .remote(String("\(error)".prefix(300))) }
        return object
    }

    /// The held message of the next phase, if it came; the phase after it is next then.
    private func takeNextInPhase() -> [UInt8]? {
        receiving.withLock { state in
            guard let plain = state.pending.removeValue(forKey: state.nextInPhase) else { return nil }
            state.nextInPhase += 1
            return plain
        }
    }

    private func accept(_ message: MailboxClient.Message) throws(WormholeError) {
        guard let phase = Int(message.phase) else { return }
        // nil: a phase already handed out or held; false: past the window of held phases.
        let fits: Bool? = receiving.withLock { state in
            guard phase >= state.nextInPhase, state.pending[phase] == nil else { return nil }
            return state.pending.count < Self.maxPendingPhases && phase < state.nextInPhase + Self.maxPendingPhases
        }
        guard let fits else { return }
        guard fits else { throw .protocolViolation("too many messages out of order") }
        guard let plain = try? SecretBox(key: Self.phaseKey(key, side: message.side, phase: message.phase)).open(message.body) else {
            throw .protocolViolation("a message did not decrypt")
        }
        receiving.withLock { $0.pending[phase] = plain }
    }

    /// Closes the mailbox ("happy" when the exchange succeeded) and the connection.
    package func close(mood: String = "happy") {
        let first = shared.withLock { state in
            defer { state.closed = true }
            return !state.closed
        }
        if first { mailbox.close(mailboxID, mood: mood) }
    }

    /// Runs `body` when the session is abandoned (to close a Transit connection).
    package func onAbandon(_ body: @escaping @Sendable () -> Void) {
        shared.withLock { $0.onAbandon.append(body) }
    }

    /// From any thread (Ctrl-C): tells the other side `{"error": reason}`, closes the mailbox
    /// and every connection registered with `onAbandon`; the thread using the session then
    /// fails with an error.
    package func abandon(_ reason: String) {
        let hooks: [@Sendable () -> Void]? = shared.withLock { state in
            guard !state.closed else { return nil }
            return state.onAbandon
        }
        guard let hooks else { return }
        try? send(["error": reason])
        shared.withLock { $0.closed = true }
        mailbox.abandon(mailboxID, mood: "errory")
        for hook in hooks { hook() }
    }
}
