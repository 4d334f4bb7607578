/// Which version of a conflicted file `resolve --keep WHO` keeps: chosen by the device
/// that wrote it, never by where it lies (the file itself or a conflict copy), because the
/// conflict rules may put either side at the path. Pure; tested by tables.
///
/// WHO is a peer's name or a prefix of its device ID (as `PeerResolver` takes them),
/// `local` or this device's name (the version this device wrote), `remote` (the version of
/// the one other device, when exactly one other device wrote one), or `both`.
enum ConflictChoice {
    /// One version of a conflicted file.
    struct Version: Sendable, Equatable {
        /// Its path in the folder: the file itself or a conflict copy.
        var path: String
        /// The short device ID (7 characters) of the device that wrote it.
        var author: String
        var mtimeNs: Int64
        /// Whether it is the file itself (not a copy).
        var atPath: Bool
    }

    /// A device that wrote versions, as the user may name it.
    struct Author: Sendable, Equatable {
        /// Its short device ID (7 characters).
        var short: String
        /// Its whole compact device ID when known (a paired peer, this device), else the short one.
        var deviceID: String
        /// Its name ("?" when no paired peer has that ID).
        var name: String
        var isLocal: Bool

        /// "alice (ABCDEFG)" — what a message names.
        var label: String { name == "?" ? short : "\(name) (\(short))" }
    }

    enum Pick: Sendable, Equatable {
        /// Every version stays in the folder, the copies under ordinary names.
        case both
        /// This version stays at the path; every other one is dropped (and kept aside).
        case version(Version, by: Author)
    }

    /// The version `who` names among `versions`, whose authors are `authors`. The newest of
    /// the chosen author's versions when it wrote several (the file itself on a tie).
    /// Refuses, naming the choices, what names no author or more than one.
    static func pick(_ who: String, versions: [Version], authors: [Author], file: String) throws(EngineError) -> Pick {
        let typed = who.trimmingSpaces()
        if typed.lowercased() == "both" { return .both }
        let present = authors.filter { author in versions.contains { $0.author == author.short } }
        func refuse(_ why: String) -> EngineError {
            let list = present.map(\.label) + ["both"]
            return .invalidArgument("\(why); keep one of: \(list.joined(separator: ", ")) (see 'syncpeer conflicts')")
        }
        let author: Author
        switch typed.lowercased() {
        case "local":
            guard let local = present.first(where: \.isLocal) else { throw refuse("no version of \(file) was written on this device") }
            author = local
        case "remote":
            let others = present.filter { !$0.isLocal }
            guard others.count == 1 else {
                throw refuse(others.isEmpty ? "every version of \(file) was written on this device"
                                            : "'remote' is ambiguous: \(others.count) other devices wrote versions of \(file)")
            }
            author = others[0]
        default:
            let candidates = present.map { PeerResolver.Candidate(deviceID: $0.deviceID, name: $0.name, addresses: []) }
            let found: PeerResolver.Candidate?
            var hint = ""
            do throws(PeerResolver.Failure) {
                if case let .peer(candidate) = try PeerResolver.resolve(typed, among: candidates) { found = candidate } else { found = nil }
            } catch {
                found = nil
                if case let .didYouMean(_, names) = error { hint = " (did you mean \(names[0])?)" }
                if case .ambiguous = error { hint = " (it matches more than one of them)" }
            }
            guard let found else { throw refuse("'\(typed)' wrote no version of \(file)" + hint) }
            author = present.first { $0.deviceID == found.deviceID }!
        }
        let chosen = versions.filter { $0.author == author.short }
            .max { $0.mtimeNs != $1.mtimeNs ? $0.mtimeNs < $1.mtimeNs : (!$0.atPath && $1.atPath) }!
        return .version(chosen, by: author)
    }
}
