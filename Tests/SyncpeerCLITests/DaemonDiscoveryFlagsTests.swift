import SyncEngine
import Testing
@testable import SyncpeerCLI

/// `syncpeer daemon`'s discovery flags, parsed in process (nothing is started).
struct DaemonDiscoveryFlagsTests {
    func parse(_ argv: [String]) throws(CLIError) -> DaemonCommand {
        var globals = GlobalSettings()
        var help = false
        let parsed = try ArgumentParser.parse(argv, spec: DaemonCommand.spec, globals: &globals, help: &help)
        return try DaemonCommand(parsing: parsed)
    }

    @Test func defaultsAreForRealUsers() throws {
        let command = try parse([])
        #expect(command.config.discovery && command.config.visible)
        #expect(command.config.serviceType == "syncpeer")
        #expect(command.config.discoveryInfo.isEmpty && command.config.interfaces.isEmpty)
        #expect(!command.interfacesGiven)
    }

    @Test func everyFlagLandsInTheConfig() throws {
        let command = try parse(["--no-discovery", "--invisible", "--service-type", "team-a", "--info", "room=kitchen",
                                 "--info", "floor=2=3", "--interface", "eth0", "--interface", "wlan0"])
        #expect(!command.config.discovery && !command.config.visible)
        #expect(command.config.serviceType == "team-a")
        #expect(command.config.discoveryInfo == ["room": "kitchen", "floor": "2=3"])
        #expect(command.config.interfaces == ["eth0", "wlan0"] && command.interfacesGiven)
    }

    @Test func repeatedInfoKeyIsAnError() {
        #expect(throws: CLIError.usage("--info: the key 'a' is given twice")) { try parse(["--info", "a=1", "--info", "a=2"]) }
    }

    @Test func interfaceEnvironmentIsCommaSeparated() {
        #expect(DaemonCommand.interfaces(fromEnvironment: "lo") == ["lo"])
        #expect(DaemonCommand.interfaces(fromEnvironment: " eth0, wlan0 ,,") == ["eth0", "wlan0"])
        #expect(DaemonCommand.interfaces(fromEnvironment: nil).isEmpty)
    }
}
