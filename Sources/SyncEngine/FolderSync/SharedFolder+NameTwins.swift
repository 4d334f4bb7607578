internal import Dispatch
internal import PeerFiles
internal import Synchronization

/// Names of the folder that another name of their directory equals under Unicode
/// normalization (`NormalizationTwins`): both are synced byte-exact, and the folder says
/// so in `status`, in an event when their number changes, and in the dashboard, because
/// a peer whose file system normalizes names cannot hold both.
final class NameTwinsReport: Sendable {
    struct Found: Equatable {
        /// Directory → names in it that have a twin (directories without any left out).
        var directories: [PathKey: Int] = [:]
        /// The first of them (paths), at most `NormalizationTwins.examplesKept`.
        var names: [String] = []
        var count: Int { directories.values.reduce(0, +) }
    }

    /// Directories with twins kept at most (past that, more are not counted).
    static let directoriesKept = 10_000

    private let found = Mutex(Found())
    /// Directories waiting for `SharedFolder.listTwins`, whether a listing is scheduled, and
    /// when the last one ran.
    private let listing = Mutex<(pending: Set<PathKey>, scheduled: Bool, last: ContinuousClock.Instant?)>(([], false, nil))

    /// One listing per folder at most this often: a peer that sends twins page after page
    /// makes us list a large directory only so often.
    static let listingInterval = Duration.seconds(5)

    /// Adds directories to list (at most `SharedFolder.twinDirectoriesPerPull` wait; more are
    /// counted by the next scan). Returns in how long to list them, or nil when a listing is
    /// scheduled already.
    func wantListing(_ directories: some Sequence<PathKey>) -> Duration? {
        listing.withLock { state in
            for directory in directories where state.pending.count < SharedFolder.twinDirectoriesPerPull {
                state.pending.insert(directory)
            }
            guard !state.scheduled, !state.pending.isEmpty else { return nil }
            state.scheduled = true
            return state.last.map { max(.zero, Self.listingInterval - (ContinuousClock.now - $0)) } ?? .zero
        }
    }

    /// The directories to list now.
    func takeListing() -> [PathKey] {
        listing.withLock { state in
            defer { state = ([], false, .now) }
            return state.pending.sorted()
        }
    }

    var current: Found { found.withLock { $0 } }

    /// Takes what a scan found in the directories it listed: a scan of the whole folder
    /// replaces the figures, a scan of some paths those of the directories it found twins in
    /// (a directory whose twins went away is cleared by the next whole scan), the listing
    /// after a pull (`countTwins`) those of the directories it listed.
    /// Returns what to report when the count changed and some names collide.
    func record(_ summary: ScanSummary, whole: Bool) -> String? {
        let (before, after) = found.withLock { found -> (Found, Found) in
            let before = found
            if whole { found = Found() }
            for (directory, count) in summary.normalizationTwins
            where found.directories[directory] != nil || found.directories.count < Self.directoriesKept {
                found.directories[directory] = count > 0 ? count : nil
            }
            let known = Set(found.names.map(PathKey.init(_:)))
            let new = summary.normalizationTwinNames.filter { !known.contains(PathKey($0)) }
            found.names += new.prefix(max(0, NormalizationTwins.examplesKept - found.names.count))
            return (before, found)
        }
        guard after.count != before.count, after.count > 0 else { return nil }
        let example = after.names.first.map { " (e.g. \"\(NameDisplay.escaped($0))\")" } ?? ""
        return "\(after.count) names equal another name of their folder under Unicode normalization\(example): "
            + "both are kept and synced here, but a file system that normalizes names (macOS, Windows) holds only one; see 'syncpeer status'"
    }
}

extension SharedFolder {
    /// Directories waiting for a listing at most (more wait for the next scan).
    static let twinDirectoriesPerPull = 64

    /// Counts the twins again in the directories where twins are among `paths` (a pull's),
    /// from one listing of each (no stat, no descent): names that arrived beside their twin
    /// are counted without waiting for a scan. At once, or once `listingInterval` has passed
    /// since the last listing. On `io`.
    func countTwins(among paths: [String]) {
        dispatchPrecondition(condition: .onQueue(io))
        let twins = NormalizationTwins.find(paths.pathKeys.map(\.string))
        guard !twins.isEmpty else { return }
        let parents = twins.map { path in path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "" }
        guard let delay = nameTwins.wantListing(parents.pathKeys) else { return }
        if delay == .zero { return listTwins() }
        let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
        io.asyncAfter(deadline: .now() + seconds) { [weak self] in self?.listTwins() }
    }

    /// Lists the directories `countTwins` wants and records their twins. On `io`.
    private func listTwins() {
        dispatchPrecondition(condition: .onQueue(io))
        let directories = nameTwins.takeListing().map(\.string)
        let ignores = self.ignores
        guard stopped == nil, !directories.isEmpty, let root = try? DirectoryHandle(path: root) else { return }
        var summary = ScanSummary()
        for directory in directories {
            let handle: DirectoryHandle?
            if directory.isEmpty {
                handle = root
            } else {
                handle = (try? SafePath(directory).resolve(under: root)).flatMap { try? $0.directory.openSubdirectory($0.name) }
            }
            guard let names = try? handle?.entryNames() else { continue }
            let synced = names.filter { name in
                let path = directory.isEmpty ? name : directory + "/" + name
                return !FolderApplier.isTempName(name) && !(directory.isEmpty && name == FolderRoot.markerName)
                    && !ignores.isIgnored(path, isDirectory: false)
            }
            let found = NormalizationTwins.find(synced)
            summary.normalizationTwins[PathKey(directory)] = found.count
            for name in found.prefix(NormalizationTwins.examplesKept - summary.normalizationTwinNames.count) {
                summary.normalizationTwinNames.append(directory.isEmpty ? name : directory + "/" + name)
            }
        }
        if let message = nameTwins.record(summary, whole: false) { report(message) }
    }
}
