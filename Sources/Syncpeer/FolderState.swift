/// What a shared folder is doing (`Session.Event.folderChanged`, `FolderStatus.state`).
public enum FolderState: String, Sendable, Equatable, CaseIterable {
    case scanning, syncing, idle
    /// Some paths cannot be pulled now and are tried again by themselves.
    case retrying
    /// Stopped (see its error), or paths that wait for a change.
    case error
    /// Paused (`syncpeer pause`): neither scanned nor pulled until resumed.
    case paused
    /// The folder was shared with us, or a member left it (events only).
    case shared, unshared
    /// Something else changed (a member, a setting): read `Session.folders` again.
    case changed

    /// The engine's state of the same name (its cases are these; none: `.changed`). By raw
    /// value, since the engine's `FolderState` is hidden behind this one here.
    init(engine rawValue: String?) {
        self = rawValue.flatMap(FolderState.init(rawValue:)) ?? .changed
    }
}
