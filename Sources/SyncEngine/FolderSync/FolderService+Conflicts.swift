#if canImport(Glibc)
internal import Glibc
#endif
internal import Dispatch
internal import FoundationEssentials
internal import PeerFiles
internal import PeerIndex

/// Conflicts: each conflicted file with its versions named by the device that wrote them
/// (`conflicts`), and settling one by keeping one device's version or all of them
/// (`resolve`). A dropped version is never deleted: it goes to the versions store.
extension FolderService {
    /// Conflicted files in every shared folder, each with its versions (the file itself
    /// first, then its copies, oldest first), one page by folder label and path. `localName`
    /// is this device's name. An index that cannot be read fails the list with its cause (not "no conflicts").
    func conflicts(_ page: PageRequest, localName: String) throws(EngineError) -> ListPage<ConflictInfo> {
        let list = sharedFolders()
        var groups: [(folder: SharedFolder, relative: String, copies: [String])] = []
        let peers: [PeerRecord]
        do throws(IndexError) {
            peers = try index.peers()
            for folder in list {
                // Keyed by bytes: an NFC and an NFD name are two files, with copies of their own.
                var byOriginal: [PathKey: [String]] = [:]
                for copy in try conflictCopies(folder.id) {
                    byOriginal[PathKey(try original(ofCopy: copy, in: folder.id) ?? ConflictName.parse(copy)?.original ?? copy), default: []].append(copy)
                }
                groups += byOriginal.map { (folder, $0.key.string, $0.value) }
            }
        } catch { throw .index(error) }
        // Only the page's files are looked into (their versions' authors and sizes).
        var failure: IndexError?
        let answer = page.page(groups, key: { $0.folder.label + "\u{0}" + $0.folder.id + "\u{0}" + $0.relative }) { folder, relative, copies -> ConflictInfo? in
            let all: [ConflictChoice.Version]
            do throws(IndexError) { all = try conflictVersions(of: relative, copies: copies, in: folder) } catch {
                failure = failure ?? error
                return nil
            }
            // A page holds whole files: one file's versions are listed up to a bound.
            let versions = Array(all.prefix(ConflictInfo.listedVersions))
            let authors = conflictAuthors(versions, peers: peers, localName: localName)
            return ConflictInfo(folder: folder.label, original: folder.root + "/" + relative,
                                moreVersions: all.count > versions.count ? all.count - versions.count : nil, versions: versions.map { version in
                let author = authors.first { $0.short == version.author }
                var info = stat()
                let present = lstat(folder.root + "/" + version.path, &info) == 0
                return ConflictVersion(path: folder.root + "/" + version.path, device: version.author, name: author?.name ?? "?",
                                       local: author?.isLocal ?? false, size: present ? Int64(info.st_size) : 0,
                                       time: version.mtimeNs / 1_000_000)
            })
        }
        if let failure { throw .index(failure) }
        return answer
    }

    /// The path a conflict copy was made for. A shortened copy name (a long original) holds
    /// only the start of it: the index's live paths with that start are checked (a read
    /// that fails throws: the copy is not listed under a wrong name).
    func original(ofCopy copy: String, in folderID: String) throws(IndexError) -> String? {
        guard let prefix = ConflictName.shortenedOriginalPrefix(of: copy) else { return ConflictName.parse(copy)?.original }
        let glob = prefix.map { "*?[".contains($0) ? "[\($0)]" : String($0) }.joined() + "*"
        let candidates = try index.livePaths(folderID: folderID, matching: glob)
        return candidates.first { $0 != copy && ConflictName.isCopy(copy, of: $0) } ?? ConflictName.parse(copy)?.original
    }

    /// The versions of `relative` on disk: the file itself (if there is one) and its copies.
    /// A copy's author is in its name; the file's is the index's `modifiedBy`, or this
    /// device when the file changed since it was last scanned (an edit made here). An index
    /// that cannot say throws (the file is not shown as ours).
    func conflictVersions(of relative: String, copies: [String], in folder: SharedFolder) throws(IndexError) -> [ConflictChoice.Version] {
        var versions: [ConflictChoice.Version] = []
        var info = stat()
        if lstat(folder.root + "/" + relative, &info) == 0 {
            let mtime = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
            var author = String(localDevice.prefix(7))
            if let record = try index.file(folderID: folder.id, path: relative), !record.deleted,
               record.mtimeNs == mtime, record.size == Int64(info.st_size) || (info.st_mode & S_IFMT) != S_IFREG {
                author = String(record.modifiedBy.prefix(7))
            }
            versions.append(.init(path: relative, author: author, mtimeNs: mtime, atPath: true))
        }
        var copyVersions: [ConflictChoice.Version] = []
        for copy in copies {
            guard let parsed = ConflictName.parse(copy), lstat(folder.root + "/" + copy, &info) == 0 else { continue }
            let mtime = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
            copyVersions.append(.init(path: copy, author: parsed.device, mtimeNs: mtime, atPath: false))
        }
        return versions + copyVersions.sorted { ($0.mtimeNs, $0.path) < ($1.mtimeNs, $1.path) }
    }

    /// The devices that wrote `versions`, named: this device, a paired peer whose ID starts
    /// with the short ID, or "?".
    func conflictAuthors(_ versions: [ConflictChoice.Version], peers: [PeerRecord], localName: String) -> [ConflictChoice.Author] {
        var seen = Set<String>()
        return versions.compactMap { version in
            guard seen.insert(version.author).inserted else { return nil }
            if localDevice.hasPrefix(version.author) {
                return .init(short: version.author, deviceID: localDevice, name: localName, isLocal: true)
            }
            let matches = peers.filter { $0.deviceID.hasPrefix(version.author) }
            guard matches.count == 1 else { return .init(short: version.author, deviceID: version.author, name: "?", isLocal: false) }
            return .init(short: version.author, deviceID: matches[0].deviceID, name: matches[0].name, isLocal: false)
        }
    }

    /// Settles a conflict on `path` (the file itself): `keep` names the device whose version
    /// stays at the path (`ConflictChoice`), every other version kept in the versions store
    /// (`syncpeer restore` brings one back); or `both`: the copies get ordinary names. Every
    /// device follows by sync.
    func resolveConflict(path: String, keep: String, localName: String) throws(EngineError) -> ResolveResult {
        let list = sharedFolders()
        let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
        guard let folder = list.first(where: { absolute.hasPrefix($0.root + "/") }) else {
            throw .notFound("\(path) is not in a shared folder")
        }
        let relative = String(absolute.dropFirst(folder.root.count + 1))
        let copies: [String]
        let peers: [PeerRecord]
        do throws(IndexError) {
            copies = try conflictCopies(folder.id).filter { ConflictName.isCopy($0, of: relative) }.sorted()
            peers = try index.peers()
        } catch { throw .index(error) }
        guard !copies.isEmpty else { throw .notFound("\(path) has no conflict copies; see 'syncpeer conflicts'") }
        let result: Result<ResolveResult, EngineError> = folder.io.sync { () -> Result<ResolveResult, EngineError> in
            // On the folder's io queue: no pull changes the versions between the choice and the moves.
            let versions: [ConflictChoice.Version]
            do throws(IndexError) { versions = try conflictVersions(of: relative, copies: copies, in: folder) } catch { return .failure(.index(error)) }
            let pick: ConflictChoice.Pick
            do throws(EngineError) {
                pick = try ConflictChoice.pick(keep, versions: versions, authors: conflictAuthors(versions, peers: peers, localName: localName),
                                               file: absolute)
            } catch { return .failure(error) }
            defer { folder.fullScanPaths(copies + [relative]) }
            switch pick {
            case .both:
                return keepBoth(absolute, copies: copies, in: folder)
            case let .version(chosen, author):
                return keepOnly(chosen, by: author, of: absolute, relative: relative, versions: versions, in: folder)
            }
        }
        return try result.get()
    }

    /// `both`: each copy gets an ordinary name next to the file (a name taken meanwhile is
    /// never replaced).
    private func keepBoth(_ absolute: String, copies: [String], in folder: SharedFolder) -> Result<ResolveResult, EngineError> {
        guard let handle = try? DirectoryHandle(path: URL(fileURLWithPath: absolute).deletingLastPathComponent().path) else {
            return .failure(.io(path: absolute, reason: "cannot open its folder"))
        }
        let name = URL(fileURLWithPath: absolute).lastPathComponent
        var failures: [String] = []
        for copy in copies {
            let copyName = String(copy.split(separator: "/").last ?? Substring(copy))
            let unique = handle.uniqueName(for: name)
            do { try handle.move(copyName, to: handle, as: unique) } catch {
                failures.append("\(copy): cannot rename it to \(unique): \(error)")
                folder.report("resolve \(copy): cannot rename it to \(unique): \(error)")
            }
        }
        // The new names last before the scan records them (and peers are told).
        fsync(handle.fd)
        guard failures.isEmpty else { return .failure(.io(path: absolute, reason: failures.joined(separator: "; "))) }
        return .success(ResolveResult(path: absolute, kept: "both", copies: copies, versions: []))
    }

    /// One device's version stays at the path; the others are kept in the versions store,
    /// under the file's own path (`history`, `restore`), before they go. A version that
    /// cannot be kept (the folder's policy is `none`, the store cannot be written) stays
    /// where it is, and the result is a failure.
    private func keepOnly(_ chosen: ConflictChoice.Version, by author: ConflictChoice.Author, of absolute: String, relative: String,
                          versions: [ConflictChoice.Version], in folder: SharedFolder) -> Result<ResolveResult, EngineError> {
        var kept: [String] = []
        var failures: [String] = []
        func keepAside(_ version: ConflictChoice.Version, removing: Bool) throws(EngineError) {
            var record: FileRecord?
            do throws(IndexError) { record = try index.file(folderID: folder.id, path: version.path) } catch { throw .index(error) }
            record?.path = relative
            guard let keeper = self.versions, let record,
                  let id = keeper.keepFile(at: folder.root + "/" + version.path, as: record, reason: "conflict") else {
                throw .io(path: folder.root + "/" + version.path, reason: "cannot keep it in the versions store (see 'syncpeer versions "
                          + "\(folder.root)'; 'resolve --keep both' keeps every copy in the folder)")
            }
            kept.append(String(localDevice.prefix(7)) + "-" + String(id))
            if removing, Glibc.unlink(folder.root + "/" + version.path) != 0, errno != ENOENT {
                throw .io(path: folder.root + "/" + version.path, reason: "kept, but cannot remove it: \(String(cString: strerror(errno)))")
            }
        }
        if !chosen.atPath {
            if let current = versions.first(where: \.atPath) {
                do throws(EngineError) { try keepAside(current, removing: false) } catch { return .failure(error) }
            }
            guard Glibc.rename(folder.root + "/" + chosen.path, absolute) == 0 else {
                let reason = String(cString: strerror(errno))
                return .failure(.io(path: absolute, reason: "cannot move \(chosen.path) there: \(reason)"
                                    + (kept.isEmpty ? "" : "; the version that was there is kept as \(kept[0])")))
            }
        }
        for version in versions where !version.atPath && version.path != chosen.path {
            do throws(EngineError) { try keepAside(version, removing: true) } catch {
                failures.append("\(version.path): \(error.description)")
                folder.report("resolve \(version.path): \(error.description)")
            }
        }
        // The chosen version's move to the path lasts before the scan records it.
        if !chosen.atPath { DurableNames.syncDirectory(URL(fileURLWithPath: absolute).deletingLastPathComponent().path) }
        guard failures.isEmpty else { return .failure(.io(path: absolute, reason: failures.joined(separator: "; "))) }
        return .success(ResolveResult(path: absolute, kept: author.short, name: author.name,
                                      copies: versions.filter { !$0.atPath }.map(\.path), versions: kept,
                                      restore: kept.isEmpty ? nil : "syncpeer restore \(absolute) --version ID"))
    }
}
