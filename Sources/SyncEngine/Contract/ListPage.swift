internal import PeerCrypto
package import PeerNet

/// Paging for every list the control protocol answers (docs/PROTOCOL.md, "Paging"): the
/// request may carry `"limit"` (items per page) and `"after"` (the `next` of the page
/// before); the answer holds one page as its `result`, and `"next"` beside it while more
/// follow. A page also ends before `maxBytes` of JSON, so an answer line stays far below the
/// control socket's line limit whatever its items hold.
///
/// Items are ordered by a key (a string, unique in its list) and `after` is the key of the
/// last item shown: a page starts with the first item whose key sorts after it, so an item
/// added or removed between two pages never shifts the others.
package struct PageRequest: Sendable, Equatable {
    /// Items per page when the request names no `limit`.
    package static let defaultLimit = 200
    /// The most items a page holds, whatever `limit` asks.
    package static let maxLimit = 1000
    /// A page ends before its items' JSON reaches this many bytes (the line limit is 1 MiB).
    package static let maxBytes = 256 << 10
    /// The longest `after` taken (a key is a few path or name components).
    static let maxCursorBytes = 16 << 10

    package var limit: Int
    package var after: String?
    /// `maxBytes`, except for `everything`.
    private var byteBudget = PageRequest.maxBytes

    package init(limit: Int = PageRequest.defaultLimit, after: String? = nil) {
        self.limit = min(max(1, limit), Self.maxLimit)
        self.after = after
    }

    /// The whole list as one page: for callers in this process (the Swift API), never for
    /// an answer on the control socket.
    package static var everything: PageRequest {
        var request = PageRequest()
        request.limit = .max
        request.byteBudget = .max
        return request
    }

    /// Reads `limit` and `after` from a request object (both optional).
    package init(json request: JSONValue) throws(EngineError) {
        var limit = Self.defaultLimit
        if let value = request["limit"], value != .null {
            guard let number = value.intValue, number > 0 else { throw .invalidArgument("\"limit\" must be a positive number") }
            limit = number
        }
        var after: String?
        if let value = request["after"], value != .null {
            guard let text = value.stringValue, text.utf8.count <= Self.maxCursorBytes else {
                throw .invalidArgument("\"after\" must be the \"next\" of the page before")
            }
            after = text
        }
        self.init(limit: limit, after: after)
    }

    /// Adds `limit` and `after` to a request object.
    func add(to object: inout [String: JSONValue]) {
        object["limit"] = JSONValue(limit)
        if let after { object["after"] = .string(after) }
    }

    /// The page of `sources` (in any order) this request asks for: sorted by `key`, the
    /// first after `after`, at most `limit` of them and fewer than `maxBytes` of JSON.
    /// Only the page's items are built (`build` may read the index; nil skips a source).
    package func page<Source, Item: Encodable>(_ sources: [Source], key: (Source) -> String,
                                              build: (Source) -> Item?) -> ListPage<Item> {
        var keyed = sources.map { (key: key($0), source: $0) }
        if let after { keyed.removeAll { !($0.key > after) } }
        keyed.sort { $0.key < $1.key }
        var items: [Item] = []
        var bytes = 0
        var last: String?
        for entry in keyed {
            if items.count == limit { return ListPage(items: items, next: last) }
            guard let item = build(entry.source) else {
                last = entry.key
                continue
            }
            if byteBudget != .max {
                let size = JSONValue(encoding: item).encodedLine().utf8.count + 1
                if !items.isEmpty, bytes + size > byteBudget { return ListPage(items: items, next: last) }
                bytes += size
            }
            items.append(item)
            last = entry.key
        }
        return ListPage(items: items, next: nil)
    }
}

/// One page of a list: its items and, while more follow, the `after` of the next page.
package struct ListPage<Item: Encodable>: Encodable {
    package var items: [Item]
    package var next: String?

    package init(items: [Item], next: String?) {
        self.items = items
        self.next = next
    }

    /// The same page with each item transformed.
    package func map<Other>(_ transform: (Item) -> Other) -> ListPage<Other> {
        ListPage<Other>(items: items.map(transform), next: next)
    }
}

// The keys the lists without an index of their own are paged by: their display order.

extension PeerSummary {
    /// By name, then device.
    var pageKey: String { peer.name + "\u{0}" + peer.id.description }
}

extension BrowsedPeer {
    /// By instance name, then device.
    var pageKey: String { instance + "\u{0}" + peer.id.description }
}
