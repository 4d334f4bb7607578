/// What a `ServiceAdvertiser` publishes and how.
package struct AdvertiserConfiguration: Sendable {
    package var serviceType: ServiceType
    /// The instance name users see (the first label): 1–63 bytes of UTF-8.
    package var displayName: String
    /// The TCP port the service listens on.
    package var port: UInt16
    /// Published as `id=` in the TXT record.
    package var deviceID: String
    /// Published as `v=` in the TXT record.
    package var protocolVersion: Int
    /// Published beside `id` and `v`.
    package var info: DiscoveryInfo
    /// The SRV target host label (without ".local"); nil derives "syncpeer-<device ID prefix>".
    package var hostName: String?
    package var interfaces: InterfaceSelection
    /// Whether A records (the interfaces' IPv4 addresses) are published: false when the
    /// service does not accept IPv4.
    package var publishesIPv4: Bool = true
    /// Whether AAAA records (the interfaces' IPv6 addresses) are published: false when the
    /// service does not accept IPv6 (it listens on 0.0.0.0, say).
    package var publishesIPv6: Bool = true
    /// TTL of the SRV and A records (RFC 6762 §10: 120 s).
    package var hostRecordTTL: UInt32
    /// TTL of the PTR and TXT records (RFC 6762 §10: 75 minutes).
    package var otherRecordTTL: UInt32
    /// How often interface addresses are re-read.
    package var interfaceRefreshInterval: Duration

    package init(serviceType: ServiceType, displayName: String, port: UInt16, deviceID: String,
                protocolVersion: Int, info: DiscoveryInfo = try! DiscoveryInfo(), hostName: String? = nil,
                interfaces: InterfaceSelection = .automatic, hostRecordTTL: UInt32 = 120,
                otherRecordTTL: UInt32 = 4500, interfaceRefreshInterval: Duration = .seconds(5)) {
        self.serviceType = serviceType
        self.displayName = displayName
        self.port = port
        self.deviceID = deviceID
        self.protocolVersion = protocolVersion
        self.info = info
        self.hostName = hostName
        self.interfaces = interfaces
        self.hostRecordTTL = hostRecordTTL
        self.otherRecordTTL = otherRecordTTL
        self.interfaceRefreshInterval = interfaceRefreshInterval
    }
}

/// The DNS-SD service type enumeration name (RFC 6763 §9).
let serviceEnumerationName = DNSName("_services._dns-sd._udp.local")

/// The records one advertiser publishes (RFC 6763 §4–6, RFC 6762 §6.2), built from its
/// configuration for an instance label and an interface. Pure.
struct AdvertisedRecords: Sendable {
    let configuration: AdvertiserConfiguration
    /// The SRV target, "<host>.local".
    let hostName: DNSName

    func instanceName(_ label: String) -> DNSName {
        DNSName(labelBytes: [Array(label.utf8)] + configuration.serviceType.domain.labels)
    }

    var txtStrings: [[UInt8]] {
        [Array("id=\(configuration.deviceID)".utf8), Array("v=\(configuration.protocolVersion)".utf8)]
            + configuration.info.txtStrings
    }

    func srvRecord(_ label: String, ttl: UInt32? = nil) -> DNSResourceRecord {
        DNSResourceRecord(name: instanceName(label),
                          data: .srv(priority: 0, weight: 0, port: configuration.port, target: hostName),
                          ttl: ttl ?? configuration.hostRecordTTL, cacheFlush: true)
    }

    func txtRecord(_ label: String, ttl: UInt32? = nil) -> DNSResourceRecord {
        DNSResourceRecord(name: instanceName(label), data: .txt(txtStrings),
                          ttl: ttl ?? configuration.otherRecordTTL, cacheFlush: true)
    }

    func ptrRecord(_ label: String, ttl: UInt32? = nil) -> DNSResourceRecord {
        DNSResourceRecord(name: configuration.serviceType.domain, data: .ptr(instanceName(label)),
                          ttl: ttl ?? configuration.otherRecordTTL)
    }

    func enumerationRecord(ttl: UInt32? = nil) -> DNSResourceRecord {
        DNSResourceRecord(name: serviceEnumerationName, data: .ptr(configuration.serviceType.domain),
                          ttl: ttl ?? configuration.otherRecordTTL)
    }

    /// The A and AAAA records of `interface`'s addresses: both families whichever one a
    /// packet goes out over (RFC 6762 §6.2).
    func addressRecords(_ interface: MDNSInterface, ttl: UInt32? = nil) -> [DNSResourceRecord] {
        let v4 = configuration.publishesIPv4 ? interface.addresses : []
        let v6 = configuration.publishesIPv6 ? interface.ipv6Addresses : []
        return v4.map {
            DNSResourceRecord(name: hostName, data: .a($0), ttl: ttl ?? configuration.hostRecordTTL, cacheFlush: true)
        } + v6.map {
            DNSResourceRecord(name: hostName, data: .aaaa($0.bytes), ttl: ttl ?? configuration.hostRecordTTL, cacheFlush: true)
        }
    }

    /// Every record published on `interface`.
    func allRecords(_ label: String, _ interface: MDNSInterface, ttl: UInt32? = nil) -> [DNSResourceRecord] {
        [ptrRecord(label, ttl: ttl), srvRecord(label, ttl: ttl), txtRecord(label, ttl: ttl),
         enumerationRecord(ttl: ttl)] + addressRecords(interface, ttl: ttl)
    }
}
