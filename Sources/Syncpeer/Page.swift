/// One page of a list that grows with use (`Session.folders(after:limit:)`,
/// `Session.conflicts(after:limit:)`): its items and, while more follow, the `after` that
/// reads the next page.
public struct Page<Item: Sendable>: Sendable {
    public let items: [Item]
    /// Pass it as `after` for the next page; nil on the last page.
    public let next: String?

    /// Items per page when none is asked; at most 1,000 are given whatever is asked.
    public static var defaultLimit: Int { 200 }
}

extension Page: Equatable where Item: Equatable {}
