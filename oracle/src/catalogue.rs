//! The EC2 instance types generated scenarios pick from: real types with the sizes EC2 documents
//! for them (vCPUs, memory, the ENIs of their default network card and the IPv4 addresses per
//! ENI; Amazon EC2 User Guide, "Instance type specifications" and "Maximum IP addresses per
//! network interface"). Both sides of a comparison read the same answer. Pure data.

use serde::{Deserialize, Serialize};

/// One instance type as DescribeInstanceTypes and DescribeInstanceTypeOfferings describe it, in
/// the compact form the oracle turns into EC2's shapes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceType {
    pub name: String,
    pub vcpus: u32,
    #[serde(rename = "memoryMiB")]
    pub memory_mib: u64,
    /// `x86_64` or `arm64`, as EC2 names them.
    pub architectures: Vec<String>,
    /// `on-demand`, and `spot` where EC2 sells it as spot.
    pub usage_classes: Vec<String>,
    pub maximum_network_interfaces: u32,
    pub ipv4_addresses_per_interface: u32,
    /// The zones EC2 offers it in.
    pub zones: Vec<String>,
}

/// Name, vCPUs, memory (MiB), EC2 architecture, ENIs, IPv4 addresses per ENI.
const TYPES: &[(&str, u32, u64, &str, u32, u32)] = &[
    ("t3.micro", 2, 1024, "x86_64", 2, 2),
    ("t3.small", 2, 2048, "x86_64", 3, 4),
    ("t3.medium", 2, 4096, "x86_64", 3, 6),
    ("t3.large", 2, 8192, "x86_64", 3, 12),
    ("m5.large", 2, 8192, "x86_64", 3, 10),
    ("m5.xlarge", 4, 16384, "x86_64", 4, 15),
    ("m5.2xlarge", 8, 32768, "x86_64", 4, 15),
    ("m5.4xlarge", 16, 65536, "x86_64", 8, 30),
    ("m5.24xlarge", 96, 393_216, "x86_64", 15, 50),
    ("c5.large", 2, 4096, "x86_64", 3, 10),
    ("c5.xlarge", 4, 8192, "x86_64", 4, 15),
    ("c5.2xlarge", 8, 16384, "x86_64", 4, 15),
    ("r5.large", 2, 16384, "x86_64", 3, 10),
    ("r5.xlarge", 4, 32768, "x86_64", 4, 15),
    ("m7i.large", 2, 8192, "x86_64", 3, 10),
    ("m7i.xlarge", 4, 16384, "x86_64", 4, 15),
    ("c7i.large", 2, 4096, "x86_64", 3, 10),
    ("m6a.large", 2, 8192, "x86_64", 3, 10),
    ("c6i.large", 2, 4096, "x86_64", 3, 10),
    ("r6i.large", 2, 16384, "x86_64", 3, 10),
    ("m6g.medium", 1, 4096, "arm64", 2, 4),
    ("m6g.large", 2, 8192, "arm64", 3, 10),
    ("m6g.xlarge", 4, 16384, "arm64", 4, 15),
    ("c6g.large", 2, 4096, "arm64", 3, 10),
    ("c7g.large", 2, 4096, "arm64", 3, 10),
    ("c7g.xlarge", 4, 8192, "arm64", 4, 15),
    ("m7g.large", 2, 8192, "arm64", 3, 10),
    ("m7g.xlarge", 4, 16384, "arm64", 4, 15),
    ("r6g.large", 2, 16384, "arm64", 3, 10),
    ("t4g.small", 2, 2048, "arm64", 3, 4),
    ("t4g.medium", 2, 4096, "arm64", 3, 6),
];

/// How many types there are to pick from.
pub fn len() -> usize {
    TYPES.len()
}

/// The `index`th type, offered in `zones`, as spot too unless `no_spot`.
pub fn instance_type(index: usize, zones: Vec<String>, no_spot: bool) -> InstanceType {
    let (name, vcpus, memory_mib, arch, enis, ips) = TYPES[index % TYPES.len()];
    let mut usage_classes = vec!["on-demand".to_owned()];
    if !no_spot {
        usage_classes.push("spot".to_owned());
    }
    InstanceType {
        name: name.to_owned(),
        vcpus,
        memory_mib,
        architectures: vec![arch.to_owned()],
        usage_classes,
        maximum_network_interfaces: enis,
        ipv4_addresses_per_interface: ips,
        zones,
    }
}

/// The families (the part before the dot) of the catalogue, for requirements to name.
pub fn families() -> Vec<&'static str> {
    let mut families: Vec<&str> = TYPES.iter().filter_map(|t| t.0.split('.').next()).collect();
    families.dedup();
    families
}

/// Every type name, for requirements to name.
pub fn names() -> Vec<&'static str> {
    TYPES.iter().map(|t| t.0).collect()
}
