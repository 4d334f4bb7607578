public import Foundation

/// How a resource (a file or folder sent with `sendResource`) ended at the receiver
/// (`Session.Event.resourceFinished`).
public enum ResourceState: Sendable, Equatable {
    /// In place, at this URL.
    case completed(URL?)
    /// Cancelled by either end.
    case cancelled
    /// The receiver said no.
    case declined
    /// Offered, never answered, and the sender went away.
    case withdrawn
    /// Gave up; the reason is for people (a full disk, a failing write).
    case failed(reason: String)
}
