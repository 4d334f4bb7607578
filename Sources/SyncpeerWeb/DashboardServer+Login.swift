internal import FoundationEssentials

/// The login: the code from the page `syncpeer gui` writes, or from a pasted link, for a
/// session (docs/PROTOCOL.md, "Dashboard").
extension DashboardServer {
    /// `POST /login`, `code=CODE` form-encoded, from the page `syncpeer gui` writes: a session,
    /// and a page that moves on to `/`. Not a 303: that move would continue the file page's
    /// navigation, which is cross-site, and the browser would not send the SameSite=Strict
    /// cookie with it; the refresh of a page of this origin is same-site.
    func login(_ request: HTTPRequest) -> HTTPResponse {
        guard access.loginOriginAllowed(request) else { return .text(403, "requests from another origin are refused") }
        guard request.header("content-type")?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true else {
            return .text(415, "the body must be application/x-www-form-urlencoded")
        }
        let form = HTTPRequestParser.parseQuery(String(decoding: request.body, as: UTF8.self)) ?? [:]
        guard access.redeem(form["code"]) else {
            return .page(401, Self.loginPage("This login page was used already or is older than two minutes: run 'syncpeer gui' again."))
        }
        let page = """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=/">
            <title>syncpeer</title></head><body><p><a href="/">Open the dashboard</a></p></body></html>
            """
        return HTTPResponse(status: 200, headers: [("Content-Type", "text/html; charset=utf-8"), ("Set-Cookie", access.openSession())],
                            body: Array(page.utf8))
    }

    static func loginPage(_ why: String) -> String {
        """
        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>syncpeer</title></head>
        <body><h1>syncpeer</h1><p>\(HTTPResponse.escape(why))</p><pre>syncpeer gui</pre></body></html>
        """
    }
}
