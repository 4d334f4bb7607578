import SyncEngine
import Testing
@testable import SyncpeerCLI

/// `daemon --relay-pool` and `--global`'s pool, parsed in process (nothing is started).
struct RelayFlagsTests {
    func parse(_ argv: [String]) throws(CLIError) -> DaemonCommand {
        var globals = GlobalSettings()
        var help = false
        let parsed = try ArgumentParser.parse(argv, spec: DaemonCommand.spec, globals: &globals, help: &help)
        return try DaemonCommand(parsing: parsed)
    }

    @Test func aPoolIsUsedOnlyWithGlobalOrWhenNamed() throws {
        #expect(try parse([]).config.relayPools.isEmpty)
        #expect(try parse(["--relay", "relay://192.0.2.1:22067/?id=LYXKCHX-VI3NYZR-ALCJBHF-WMZYSPK-QG6QJA3-MPFYMSO-U56GTUK-NA2MIAW"])
            .config.relayPools.isEmpty)
        #expect(try parse(["--global"]).config.relayPools == [RelayPool.publicDefault])
        let named = ["--global", "--relay-pool", "https://pool.example.org/endpoint", "--relay-pool", "https://127.0.0.1:8443/x"]
        #expect(try parse(named).config.relayPools == ["https://pool.example.org/endpoint", "https://127.0.0.1:8443/x"])
        #expect(throws: CLIError.self) { try parse(["--relay-pool", "http://pool.example.org/endpoint"]) }
    }
}
