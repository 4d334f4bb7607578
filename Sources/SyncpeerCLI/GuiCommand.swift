internal import Foundation
internal import SyncEngine
internal import SyncpeerWeb

/// `syncpeer gui`: prints the running daemon's dashboard link, with its key, and opens it
/// in $BROWSER when that is set.
struct GuiCommand: Command {
    static let spec = CommandSpec(
        name: "gui",
        abstract: "print the web dashboard's link (and open it in $BROWSER)",
        discussion: """
        The daemon serves a dashboard on 127.0.0.1 (see 'syncpeer daemon --gui'): peers,
        folders, transfers and an activity log, live. The link holds a login code made
        from the home's key (HOME/gui-token, mode 0600): good once, for two minutes. The
        browser then keeps a session of this daemon run in a cookie, and the address bar
        shows the plain address. Run 'syncpeer gui' again for a new link. Remove gui-token
        and restart the daemon to make a new key.
        With --json prints {"url": ...}.
        """,
        options: [OptionSpec("no-open", help: "only print the link, even when $BROWSER is set")],
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
        let link = "\(address)?login=\(DashboardAccess.loginCode(key: key))"
        if context.globals.json {
            context.output.json(["url": link])
        } else {
            context.output.line(link)
        }
        if open, let browser = context.environment["BROWSER"], !browser.isEmpty {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [browser, link]
            try? process.run()
        }
        return ExitCode.success
    }
}
