/// `select`: the subtrees a folder holds on this node, and what a change freed here.
package struct SelectionResult: Sendable, Equatable, Codable {
    package var folder: String
    package var path: String
    /// The selected subtrees, relative to the folder's root; empty: the whole folder.
    package var selected: [String]
    /// Deselected files removed here (peers keep them) and their bytes.
    package var freedFiles: Int
    package var freedBytes: Int64
    /// Deselected files left on disk: no peer holds their version, or they changed.
    package var keptFiles: Int
    /// What is still to fetch for the selection: entries inside it that a member holds newer
    /// than here, or that are missing here (the most any one member has; 0 once all is
    /// here), and the bytes of those that are files.
    package var neededFiles = 0
    package var neededBytes: Int64 = 0
    /// Bytes this folder has fetched from peers since the daemon started (it grows while a
    /// fetch moves: `select --wait` follows it).
    package var receivedBytes: Int64 = 0
}

/// `tree`: one name directly below a directory of the folder, as the cluster has it.
package struct TreeItem: Sendable, Equatable, Codable {
    /// Relative to the folder's root.
    package var path: String
    package var name: String
    package var directory: Bool
    /// Live files at or below it that some peer holds, and their bytes.
    package var files: Int64
    package var bytes: Int64
    /// Live files at or below it held here, and their bytes.
    package var localFiles: Int64
    package var localBytes: Int64
    /// How much of it the selection holds: all, some (a directory with a selected path
    /// below it) or none.
    package var selected: String
}
