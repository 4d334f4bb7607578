import Foundation
import Testing

/// The dashboard's selection editor: the cluster's tree with checkboxes, saved as `select`.
@Suite(.serialized)
struct DashboardSelectionTests {
    typealias Page = DashboardBrowserTests

    /// Bob unchecks one folder on his page: his copy of it is freed, alice keeps hers, and
    /// the CLI shows the selection the page saved. Holding everything again, the page says
    /// how much is to fetch.
    @Test func uncheckingAFolderOnThePageFreesItHereOnly() throws {
        try Page.scene { env, namespace in
            let fast = FolderSyncTests.environment
            for name in ["bob-recv", "docs/keep", "docs/drop"] { try FileManager.default.createDirectory(atPath: env.home(name), withIntermediateDirectories: true) }
            let alice = try DaemonProcess(env, name: "alice", arguments: ["--gui", "off", "--auto-accept"], environment: fast, namespace: namespace.name)
            defer { alice.stop() }
            let (bob, link) = try Page.daemon(env, "bob", in: namespace, arguments: ["--auto-accept", "--receive-dir", env.home("bob-recv")], environment: fast)
            defer { bob.stop() }
            _ = try env.pair(alice, bob, autoAccepted: true)
            try "a".write(toFile: env.home("docs/keep/a.txt"), atomically: true, encoding: .utf8)
            try "b".write(toFile: env.home("docs/drop/b.txt"), atomically: true, encoding: .utf8)
            let shared = try env.cli(alice, ["share", env.home("docs"), "--with", "bob"])
            try #require(shared.status == 0, "\(shared.stderr)")
            let bobDocs = env.home("bob-recv") + "/docs"
            try FolderSyncTests.eventually("both files reach bob") {
                FileManager.default.fileExists(atPath: bobDocs + "/keep/a.txt") && FileManager.default.fileExists(atPath: bobDocs + "/drop/b.txt")
            }
            let browser = try BrowserDriver(namespace: namespace)
            defer { browser.quit() }
            try browser.open(link)
            let folder = "document.querySelector('#folder-list [data-folder]')"
            try browser.waitUntil("bob's folder on the page", "!!\(folder) && !!\(folder).querySelector('button.select')")
            _ = try browser.eval("\(folder).querySelector('button.select').click(), true")
            let drop = "document.querySelector('#select-tree input.hold[data-path=\"drop\"]')"
            let keep = "document.querySelector('#select-tree input.hold[data-path=\"keep\"]')"
            try browser.waitUntil("the tree with both folders checked", "!!\(drop) && !!\(keep) && \(drop).checked && \(keep).checked")
            try browser.screenshot("selection")
            _ = try browser.eval("\(drop).click(), document.querySelector('#select-editor button.select-save').click(), true")
            try FolderSyncTests.eventually("drop is freed on bob") { !FileManager.default.fileExists(atPath: bobDocs + "/drop/b.txt") }
            let selection = try env.cli(bob, ["select", bobDocs, "--json"])
            #expect(selection.stdout.contains("\"selected\":[\"keep\"]"), "\(selection.stdout)")
            #expect(FileManager.default.fileExists(atPath: env.home("docs/drop/b.txt")), "alice lost what bob left out")
            #expect(FileManager.default.fileExists(atPath: bobDocs + "/keep/a.txt"))

            // Holding everything again: the page says how much is to fetch, and it comes back.
            _ = try browser.eval("\(folder).querySelector('button.select').click(), true")
            try browser.waitUntil("the editor again", "!document.querySelector('#select-editor').hidden && !!\(drop)")
            _ = try browser.eval("document.querySelector('#select-everything').click(), true")
            try browser.waitUntil("the page says what is to fetch", "document.querySelector('#notice').textContent.includes('2 files (1 B) to fetch')")
            try FolderSyncTests.eventually("drop comes back to bob") { FileManager.default.fileExists(atPath: bobDocs + "/drop/b.txt") }
        }
    }
}
