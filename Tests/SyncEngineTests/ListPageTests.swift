import PeerNet
import Foundation
import Testing
@testable import SyncEngine

/// The paging of the control protocol's lists (`PageRequest`): pages hold the list in key
/// order, each within its limits, and a cursor survives the list changing under it.
struct ListPageTests {
    /// Every page of `items` with `limit`, and the cursors between them.
    static func pages(_ items: [String], limit: Int) -> [ListPage<String>] {
        var request = PageRequest(limit: limit)
        var pages: [ListPage<String>] = []
        while pages.count <= items.count {
            let page = request.page(items, key: { $0 }) { $0 }
            pages.append(page)
            guard let next = page.next else { break }
            request.after = next
        }
        return pages
    }

    @Test(arguments: [(0, 3), (1, 3), (8, 3), (9, 3), (9, 1), (5, 200)])
    func pagesHoldTheWholeListInOrder(count: Int, limit: Int) {
        let items = (0..<count).map { "item \($0)" }.shuffled()
        let pages = Self.pages(items, limit: limit)
        #expect(pages.flatMap(\.items) == items.sorted())
        #expect(pages.allSatisfy { $0.items.count <= limit })
        #expect(pages.last?.next == nil && pages.dropLast().allSatisfy { $0.next != nil })
    }

    @Test func aCursorSurvivesItsItemGoingAndNewOnesComing() {
        let first = PageRequest(limit: 2).page(["a", "b", "c", "d"], key: { $0 }) { $0 }
        #expect(first.items == ["a", "b"] && first.next == "b")
        // "b" went, "aa" came before the cursor and "bb" after it: the next page starts after "b".
        let second = PageRequest(limit: 2, after: first.next).page(["a", "aa", "c", "d", "bb"], key: { $0 }) { $0 }
        #expect(second.items == ["bb", "c"])
    }

    @Test func aPageEndsBeforeItsJSONReachesTheByteLimit() {
        let big = (0..<10).map { "\($0)" + String(repeating: "x", count: 100 << 10) }
        let page = PageRequest(limit: 1000).page(big, key: { $0 }) { $0 }
        #expect(page.items.count == 2 && page.next == big.sorted()[1])
        // One item larger than the limit still makes a page (alone).
        let huge = PageRequest().page([String(repeating: "y", count: 300 << 10)], key: { $0 }) { $0 }
        #expect(huge.items.count == 1 && huge.next == nil)
    }

    @Test func onlyThePageIsBuilt() {
        var built = 0
        let page = PageRequest(limit: 3).page(Array(0..<1000), key: { String(format: "%04d", $0) }) { (n: Int) -> Int? in
            built += 1
            return n % 2 == 0 ? n : nil  // odd ones vanish while the page is made
        }
        #expect(page.items == [0, 2, 4] && built == 5)
    }

    @Test func theRequestReadsLimitAndAfter() throws {
        let line = ControlRequest.transfers.json(id: 1, page: PageRequest(limit: 7, after: "k\u{0}1")).encodedLine()
        let parsed = try #require(JSONValue.parse(line))
        #expect(try PageRequest(json: parsed) == PageRequest(limit: 7, after: "k\u{0}1"))
        #expect(try PageRequest(json: ["op": "transfers"]) == PageRequest())
        #expect(try PageRequest(json: ["op": "transfers", "limit": 50_000]).limit == PageRequest.maxLimit)
        for bad: JSONValue in [["limit": 0], ["limit": "ten"], ["after": 3], ["after": .string(String(repeating: "a", count: 20_000))]] {
            #expect(throws: EngineError.self) { try PageRequest(json: bad) }
        }
        // A request that is no list carries no page.
        #expect(ControlRequest.status.json(id: 1, page: PageRequest(limit: 7))["limit"] == nil)
    }
}
