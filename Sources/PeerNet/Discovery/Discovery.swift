// DNS-SD over multicast DNS (RFC 6762, RFC 6763), IPv4 and IPv6.
//
// - `DNSMessage` and friends: a pure codec (name compression, typed `DNSError`s; a
//   tolerant decoding that skips a record it cannot parse and keeps the rest).
// - `ServiceType`, `DiscoveryInfo`: the naming rules (as Multipeer Connectivity's).
// - `ServiceAdvertiser`: publishes `<name>._<type>._tcp.local` (PTR, SRV, TXT with
//   `id`/`v`/info, A, AAAA), probes and renames "name (2)"…, announces, answers, says goodbye.
// - `ServiceBrowser`: continuous querying with a TTL cache; found/updated/lost events.
//
// Each advertiser and browser owns one UDP socket per family on port 5353 (0.0.0.0 and
// [::], SO_REUSEADDR and SO_REUSEPORT, so several share a host; 224.0.0.251 and ff02::fb)
// and one thread that receives and runs the timers. Multicasts leave from the interface's
// own address. `start()` creates both from the calling thread, so they live in that
// thread's network namespace; the tests use this to run everything inside namespaces of
// their own (setns(2) on a dedicated thread), and nothing else in this module changes
// namespaces. Own packets come back through multicast loopback and are recognised by
// their content.
