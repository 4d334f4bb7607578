import Testing
@testable import SyncEngine

/// The old keeper's tree (HOME/versions/FOLDER-ID/…, each file named as a conflict copy) read
/// back into the paths its files were kept for, as the import at start takes them in.
@Suite struct KeptFolderImportTests {
    @Test func aKeptNameGivesBackItsPathAndAuthor() {
        let plain = KeptFolderImport.original(of: "sub/notes.sync-conflict-20231114-221320-ABCDEFG.txt")
        #expect(plain.path == "sub/notes.txt" && plain.device == "ABCDEFG")
        // The second version kept under a taken name got " (1)" before its extension.
        let numbered = KeptFolderImport.original(of: "sub/notes.sync-conflict-20231114-221320-ABCDEFG (1).txt")
        #expect(numbered.path == "sub/notes.txt" && numbered.device == "ABCDEFG")
        // No extension: the number went before the conflict suffix (`SafePath.numberedName`).
        #expect(KeptFolderImport.original(of: "Makefile (12).sync-conflict-20231114-221320-XYZ1234").path == "Makefile")
        // A kept directory: its files are versions of the paths under the directory's own path.
        let inDirectory = KeptFolderImport.original(of: "project.sync-conflict-20231114-221320-ABCDEFG/plan.txt")
        #expect(inDirectory.path == "project/plan.txt" && inDirectory.device == "ABCDEFG")
        // A conflict copy kept again: only the outer name comes off.
        #expect(KeptFolderImport.original(of: "a.sync-conflict-20200101-000000-AAAAAAA.sync-conflict-20231114-221320-BBBBBBB.txt").path
            == "a.sync-conflict-20200101-000000-AAAAAAA.txt")
    }

    @Test func aNameTheOldKeeperDidNotMakeIsTakenAsItIs() {
        #expect(KeptFolderImport.original(of: "notes (1).txt").path == "notes (1).txt")
        #expect(KeptFolderImport.original(of: "dir/report (draft).txt") == ("dir/report (draft).txt", nil))
        #expect(KeptFolderImport.unnumbered("report (draft).txt") == "report (draft).txt")
        #expect(KeptFolderImport.unnumbered("report (3).txt") == "report.txt")
    }

    @Test func aFolderIDThatIsNotAPlainNameIsOneComponent() {
        #expect(KeptFolderImport.component("abcde-fghij") == "abcde-fghij")
        let tagged = KeptFolderImport.component("../../escape")
        #expect(tagged.hasPrefix("id-") && !tagged.contains("/") && !tagged.contains(".."))
    }
}
