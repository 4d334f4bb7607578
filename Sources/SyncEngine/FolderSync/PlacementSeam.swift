internal import Synchronization

/// A test's hook into `FolderApplier.place`, between a batch's renames and the check that
/// their directories are still in place: a test moves a directory there to have the applier
/// take its files back, as when a user moves it at that moment. Nothing is set but in tests.
enum PlacementSeam {
    /// Called with the folder's root and the paths just renamed into place (on `io`).
    static let hook = Mutex<(@Sendable (String, [String]) -> Void)?>(nil)

    static func afterRenames(root: String, _ paths: @autoclosure () -> [String]) {
        guard let hook = hook.withLock({ $0 }) else { return }
        hook(root, paths())
    }
}
