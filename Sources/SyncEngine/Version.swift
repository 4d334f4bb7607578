extension SyncEngine {
    /// The software version, shown by `syncpeer --version` and sent in the hello.
    package static let version = "0.1.0"
}

/// Namespace for engine-wide constants.
package enum SyncEngine {}
