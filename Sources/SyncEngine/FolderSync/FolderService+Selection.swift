internal import PeerModel
internal import Dispatch
internal import PeerFiles
internal import PeerIndex
internal import PeerNet
internal import Synchronization

extension FolderService {
    /// `select DIR [PATH ...]`: with `paths`, holds only those subtrees here (empty list:
    /// the whole folder again), freeing what was deselected and fetching what is new;
    /// without, says what is selected.
    func select(directory: String, paths: [String]?) throws(EngineError) -> SelectionResult {
        let folder = try sharedFolder(at: directory)
        var freed = SharedFolder.Freed()
        var need: (files: Int, bytes: Int64)?
        if let paths {
            let selection = try Self.validSelection(paths)
            do { try index.setSelection(folderID: folder.id, paths: selection.paths) } catch { throw .wrapping(error) }
            // In force for serving now: a pull holds `io` (where the selection is loaded)
            // until its batch ends, and what it fetches outside the new selection is no
            // longer served (nor announced) from here on.
            folder.servedIgnores.withLock { $0?.selection = selection }
            folder.heldRulesChanged()
            // Counted before the pull the change queues on io can take anything: all of it.
            let (changed, counted) = folder.io.sync { (folder.selectionChanged(), Result { () throws(IndexError) in try selectionNeed(folder) }) }
            do throws(IndexError) { (freed, need) = (changed, try counted.get()) } catch { throw .index(error) }
            let folderID = folder.id
            queue.async { [self] in announceSelection(folderID) }
        }
        let stored: [String]
        do { stored = try index.selection(folderID: folder.id) } catch { throw .wrapping(error) }
        let needed: (files: Int, bytes: Int64)
        if let need { needed = need } else {
            do throws(IndexError) { needed = try selectionNeed(folder) } catch { throw .index(error) }
        }
        return SelectionResult(folder: folder.id, path: folder.root, selected: stored, freedFiles: freed.files,
                               freedBytes: freed.bytes, keptFiles: freed.kept, neededFiles: needed.files, neededBytes: needed.bytes,
                               receivedBytes: folder.activity.snapshot.received.values.reduce(0, +))
    }

    /// What the folder still has to fetch for what it holds: per member whose changes are
    /// applied here (not send-only towards it), the entries outside the ignores (the
    /// selection among them) that it holds newer than here or that are missing here; the
    /// largest of them. Counted by SQLite row by row (no record loaded). A read that fails
    /// throws (not "nothing needed").
    func selectionNeed(_ folder: SharedFolder) throws(IndexError) -> (files: Int, bytes: Int64) {
        let ignores = folder.servedIgnores.withLock { $0 }
        let counts: ((String, Bool) -> Bool)? = ignores.map { ignores in { !ignores.isIgnored($0, isDirectory: $1) } }
        let roles = try index.folderPeerRoles(folderID: folder.id)
        var need = (files: 0, bytes: Int64(0))
        for member in try index.folderPeers(folderID: folder.id) where roles[member.deviceID]?.role != PeerRole.sendOnly.rawValue {
            let comparison = try index.compareRemote(folderID: folder.id, deviceID: member.deviceID, counts: counts) { ours, theirs in
                VersionVector(theirs).compare(VersionVector(ours)) == .greater
            }
            guard comparison.outOfSyncFiles > need.files else { continue }
            need = (comparison.outOfSyncFiles, comparison.outOfSyncBytes)
        }
        return need
    }

    static func validSelection(_ paths: [String]) throws(EngineError) -> FolderSelection {
        do { return try FolderSelection(paths) } catch { throw .invalidArgument(error.description) }
    }

    /// `tree DIR [PATH]`: the names directly below PATH (the root by default) that some
    /// peer holds, a page at a time in byte order, with their sizes in the cluster and here
    /// and whether the selection holds them.
    func tree(directory: String, path sub: String?, page: PageRequest) throws(EngineError) -> ListPage<TreeItem> {
        let folder = try sharedFolder(at: directory)
        var base = ""
        if let sub, !sub.isEmpty, sub != "." {
            var text = Substring(sub)
            while text.count > 1 && text.hasSuffix("/") { text = text.dropLast() }
            do { base = try SafePath(String(text)).string } catch { throw .invalidArgument("\(sub): \(error.description)") }
        }
        let stored: [String]
        do throws(IndexError) { stored = try index.selection(folderID: folder.id) } catch { throw .index(error) }
        // (A stored selection that no longer parses shows as the whole folder, as it syncs.)
        let selection = (try? FolderSelection(stored)) ?? FolderSelection()
        let want = min(page.limit, PageRequest.maxLimit)
        let entries: [NodeIndex.TreeEntry]
        do {
            entries = try index.clusterTree(folderID: folder.id, directory: base, afterName: page.after,
                                            limit: want + 1)
        } catch { throw .wrapping(error) }
        // Names come in SQLite's byte order, which the cursor follows (Swift's String order
        // is not byte order); a page also ends before `PageRequest.maxBytes` of JSON, as every
        // list does (a path may be 4 KiB: 1,000 of them would pass the line limit).
        var items: [TreeItem] = []
        var bytes = 0
        for entry in entries.prefix(want) {
            let path = base.isEmpty ? entry.name : base + "/" + entry.name
            let held = selection.holdsAll(under: path) ? "all" : entry.isDirectory && selection.overlaps(path) ? "some" : "none"
            let item = TreeItem(path: path, name: entry.name, directory: entry.isDirectory, files: entry.files, bytes: entry.bytes,
                                localFiles: entry.localFiles, localBytes: entry.localBytes, selected: held)
            bytes += JSONValue(encoding: item).encodedLine().utf8.count + 1
            if !items.isEmpty, bytes > PageRequest.maxBytes, page.limit != .max { return ListPage(items: items, next: items.last?.name) }
            items.append(item)
        }
        return ListPage(items: items, next: entries.count > items.count ? items.last?.name : nil)
    }
}
