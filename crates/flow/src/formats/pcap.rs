//! pcap / pcapng (placeholder while the module is written).
