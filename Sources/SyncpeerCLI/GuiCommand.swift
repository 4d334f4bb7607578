internal import FoundationEssentials
internal import Glibc
internal import SyncEngine
internal import SyncpeerWeb

/// `syncpeer gui`: opens the running daemon's dashboard in $BROWSER through a login page
/// in the home, or prints its link with a login code for the user to paste.
struct GuiCommand: Command {
    static let spec = CommandSpec(
        name: "gui",
        abstract: "open the web dashboard in $BROWSER (or print its link)",
        discussion: """
        The daemon serves a dashboard on 127.0.0.1 (see 'syncpeer daemon --gui'): peers,
        folders, transfers and an activity log, live. A login code made from the home's
        key (HOME/gui-token, mode 0600) lets the browser in: good once (even across daemon
        restarts), for two minutes. With $BROWSER set, the code goes into a page only you
        can read, HOME/gui-login.html (mode 0600), and the browser is opened on that file:
        the code is never on a command line or in an environment, which other users of
        this machine can read. Without $BROWSER, or with --no-open, the link with the code
        is printed for you to paste into a browser (do not pass it to a command). The
        browser then keeps a session of this daemon run in a cookie. Run 'syncpeer gui'
        again for a new code. Remove gui-token and restart the daemon to make a new key.
        With --json prints {"url": ...}, and "loginPage" when the browser was opened.
        """,
        options: [OptionSpec("no-open", help: "only print the link with its login code, even when $BROWSER is set")],
        examples: ["syncpeer gui", "BROWSER=firefox syncpeer gui", "syncpeer --home /tmp/alice gui --no-open"])

    let open: Bool

    init(parsing arguments: ParsedArguments) throws(CLIError) {
        open = !arguments.flag("no-open")
    }

    func run(_ context: CommandContext) async throws(CLIError) -> Int32 {
        let home = context.home
        // The daemon must be running: the address file of one that crashed would be stale.
        do { _ = try ControlClient.connect(home: home) } catch { throw CLIError(error) }
        // A daemon that has just started may not have written it yet.
        var text = try? String(contentsOfFile: DashboardServer.addressFile(home), encoding: .utf8)
        for _ in 0..<30 where text == nil {
            try? await Task.sleep(for: .milliseconds(100))
            text = try? String(contentsOfFile: DashboardServer.addressFile(home), encoding: .utf8)
        }
        guard let text, let address = text.split(separator: "\n").first.map(String.init), address.hasPrefix("http://") else {
            throw .engine(.notFound, "the daemon of \(home.path) serves no dashboard: start it without '--gui off'")
        }
        // The daemon made the key when it started its dashboard; never make one here (the
        // running daemon would not know it).
        let key: String?
        do { key = try DashboardAccess.loadToken(home: home) } catch { throw CLIError(error) }
        guard let key else { throw .engine(.notFound, "\(home.path)/gui-token is missing: restart the daemon to make a new key") }
        let code = DashboardAccess.loginCode(key: key)
        guard open, let browser = context.environment["BROWSER"], !browser.isEmpty else {
            // The user's own terminal: the link is for pasting into a browser.
            let link = "\(address)?login=\(code)"
            if context.globals.json {
                context.output.json(["url": link])
            } else {
                context.output.line(link)
            }
            return ExitCode.success
        }
        let page: String
        do { page = try DashboardLoginPage.write(home: home, url: address, code: code) } catch { throw CLIError(error) }
        // The browser's command line holds the page's path only, never the code.
        let arguments = [String](["/usr/bin/env", browser, page]).map { strdup($0) } + [nil]
        defer { arguments.forEach { free($0) } }
        var child = pid_t()
        let started = posix_spawn(&child, "/usr/bin/env", nil, nil, arguments, environ)
        guard started == 0 else {
            throw .failure("cannot run $BROWSER (\(browser)): \(String(cString: strerror(started))); 'syncpeer gui --no-open' prints the link")
        }
        if context.globals.json {
            context.output.json(["url": address, "loginPage": DashboardLoginPage.path(home)])
        } else {
            context.output.line("opened \(address) in \(browser) (login page \(DashboardLoginPage.path(home)), good once, for two minutes)")
        }
        return ExitCode.success
    }
}
