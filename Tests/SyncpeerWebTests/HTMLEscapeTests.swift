@testable import SyncpeerWeb
import Testing

/// HTTPResponse.escape: text placed in the dashboard's HTML never opens markup or ends an
/// attribute. Browsers tokenize by code point, so a quote or `<` with a combining mark after
/// it still counts; escaping by Character (or by Foundation's non-literal string search)
/// left them in place.
struct HTMLEscapeTests {
    @Test func everyMarkupCharacterIsEscapedEvenWithACombiningMarkAfterIt() {
        let hostile = "a\"\u{301} onmouseover=alert(1) <\u{338}b>'\u{301}&\u{301}"
        let escaped = HTTPResponse.escape(hostile)
        for raw in ["\"", "<", ">", "'"] {
            #expect(!escaped.unicodeScalars.contains(raw.unicodeScalars.first!), "\(raw) left in \(escaped.debugDescription)")
        }
        #expect(escaped == "a&quot;\u{301} onmouseover=alert(1) &lt;\u{338}b&gt;&#39;\u{301}&amp;\u{301}")
    }

    @Test func plainTextIsUnchanged() {
        #expect(HTTPResponse.escape("syncpeer gui: ok ✓") == "syncpeer gui: ok ✓")
    }
}
