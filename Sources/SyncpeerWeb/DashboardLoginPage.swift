internal import FoundationEssentials
package import SyncEngine

/// The page `syncpeer gui` opens the browser on: `HOME/gui-login.html`, mode 0600, a form
/// that POSTs a fresh login code to the dashboard's `/login` as soon as it loads. The code
/// so never goes on the browser's command line or into its environment, which every local
/// user can read in /proc; the browser is given only the file's path, and only this user
/// can read the file. Each run replaces the page; the code in it is good once, for two
/// minutes, like any login code.
package enum DashboardLoginPage {
    package static func path(_ home: NodeHome) -> String { home.path + "/gui-login.html" }

    /// Writes the page for `code` and the dashboard at `url` (`http://HOST:PORT/`); returns
    /// the page's `file://` URL.
    package static func write(home: NodeHome, url: String, code: String) throws(EngineError) -> String {
        try PrivateFile.write(Array(html(url: url, code: code).utf8), to: path(home), replacing: true)
        return URL(fileURLWithPath: path(home)).absoluteString
    }

    /// The form submits itself; its button is for a browser that runs no script on files.
    static func html(url: String, code: String) -> String {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">
        <title>syncpeer: logging in</title></head>
        <body><form method="post" action="\(HTTPResponse.escape(url))login">
        <input type="hidden" name="code" value="\(HTTPResponse.escape(code))">
        <p>Opening the syncpeer dashboard… <button type="submit">Open it</button></p></form>
        <script>document.forms[0].submit()</script></body></html>

        """
    }
}
