//! The 0.1 line (plugins built against 0.1.0, 0.1.1 or 0.1.2): bindings generated from its
//! newest frozen text, and the translation between them and the current line's.
//!
//! The two lines' WIT types are the same but for one: 0.2.0 added `kind` to `artifact-spec`.
//! Their Rust types are generated twice, so [`Translate`] converts field by field; a 0.1
//! plugin's artifacts get the kind their media type suggests. The host side
//! of the 0.1 imports hands every call to the current implementation
//! (`crate::interfaces::v0_1`).

#[allow(missing_docs)]
mod generated {
    wasmtime::component::bindgen!({
        path: "../../wit/since_v0.1.2",
        world: "gatherer",
        imports: {
            "factbuoy:plugin/output": async | trappable,
            default: trappable,
        },
        exports: { default: async },
        with: {
            "factbuoy:plugin/output.artifact": crate::bindings::OpenArtifact,
        },
    });
}

pub use generated::*;

use crate::bindings as current;
use current::ArtifactKind;

/// A value of one line's bindings as the same value in the other's.
pub(crate) trait Translate<T> {
    /// The same value, in `T`.
    fn translate(self) -> T;
}

macro_rules! same_value {
    ($($ty:ty),*) => {$(
        impl Translate<$ty> for $ty {
            fn translate(self) -> $ty {
                self
            }
        }
    )*};
}
same_value!(String, bool, u8, u32, u64, i64, f64);

impl<A: Translate<B>, B> Translate<Vec<B>> for Vec<A> {
    fn translate(self) -> Vec<B> {
        self.into_iter().map(Translate::translate).collect()
    }
}

impl<A: Translate<B>, B> Translate<Option<B>> for Option<A> {
    fn translate(self) -> Option<B> {
        self.map(Translate::translate)
    }
}

impl<A: Translate<B>, B, E: Translate<F>, F> Translate<Result<B, F>> for Result<A, E> {
    fn translate(self) -> Result<B, F> {
        self.map(Translate::translate).map_err(Translate::translate)
    }
}

/// Records of interface `$interface`, translated both ways field by field.
macro_rules! records {
    ($interface:ident: $($ty:ident { $($field:ident),* $(,)? })*) => {$(
        impl Translate<current::factbuoy::plugin::$interface::$ty>
            for factbuoy::plugin::$interface::$ty
        {
            fn translate(self) -> current::factbuoy::plugin::$interface::$ty {
                current::factbuoy::plugin::$interface::$ty {
                    $($field: self.$field.translate()),*
                }
            }
        }
        impl Translate<factbuoy::plugin::$interface::$ty>
            for current::factbuoy::plugin::$interface::$ty
        {
            fn translate(self) -> factbuoy::plugin::$interface::$ty {
                factbuoy::plugin::$interface::$ty {
                    $($field: self.$field.translate()),*
                }
            }
        }
    )*};
}

/// Variants and enums of interface `$interface`, translated both ways case by case.
macro_rules! cases {
    ($interface:ident: $($ty:ident { $($case:ident $(($value:ident))?),* $(,)? })*) => {$(
        impl Translate<current::factbuoy::plugin::$interface::$ty>
            for factbuoy::plugin::$interface::$ty
        {
            fn translate(self) -> current::factbuoy::plugin::$interface::$ty {
                use factbuoy::plugin::$interface::$ty as From;
                use current::factbuoy::plugin::$interface::$ty as To;
                match self {
                    $(From::$case $(($value))? => To::$case $(($value.translate()))?),*
                }
            }
        }
        impl Translate<factbuoy::plugin::$interface::$ty>
            for current::factbuoy::plugin::$interface::$ty
        {
            fn translate(self) -> factbuoy::plugin::$interface::$ty {
                use current::factbuoy::plugin::$interface::$ty as From;
                use factbuoy::plugin::$interface::$ty as To;
                match self {
                    $(From::$case $(($value))? => To::$case $(($value.translate()))?),*
                }
            }
        }
    )*};
}

records!(types:
    ParamSpec { name, description, type_, required, default, secret }
    CapabilityRequest { capability, required, reason }
);
cases!(types:
    ParamType { String, Integer, Float, Boolean, Duration, StringList }
    ParamValue { String(v), Integer(v), Float(v), Boolean(v), Duration(v), StringList(v) }
    Capability { HostInfo, ReadPath(v) }
    GatherError { InvalidParameters(v), Unavailable(v), Failed(v) }
);
records!(host_info:
    OsInfo {
        family, name, version, distribution_id, kernel_version, kernel_long_version, hostname,
        architecture,
    }
    Cpu { name, vendor_id, brand, frequency_mhz }
    MemoryInfo {
        total_bytes, available_bytes, used_bytes, free_bytes, swap_total_bytes,
        swap_free_bytes, swap_used_bytes,
    }
    Disk { name, mount_point, file_system, total_bytes, available_bytes, removable, read_only }
    IpNetwork { address, prefix_length }
    NetworkInterface {
        name, mac_address, addresses, mtu, received_bytes, transmitted_bytes
    }
    LoadAverages { one, five, fifteen }
    FilesystemStats {
        fragment_size_bytes, block_size_bytes, blocks_total, blocks_free, blocks_available,
        inodes_total, inodes_free, inodes_available,
    }
    Ipv4Address { device, label, address, prefix_length, broadcast, peer }
    NetFeature { name, available, requested, active, never_changed }
    TimestampingInfo { so_timestamping, phc_index, tx_types, rx_filters }
    EthtoolInfo { features, timestamping }
);
cases!(host_info:
    EthtoolError { NoSuchInterface(v), NotSupported(v), Io(v) }
);
cases!(host_fs:
    LinkError { NotFound(v), NotGranted(v), NotALink(v), Io(v) }
);
records!(progress:
    ProgressUpdate { completed, total, message, warnings, errors }
);
cases!(logging:
    Level { Trace, Debug, Info, Warn, Error }
);
cases!(output:
    OutputError { InvalidName(v), LimitExceeded(v), Io(v), Closed }
);

/// What a 0.1 plugin's `describe` says, in the current types: each artifact gets the kind its
/// media type suggests.
pub(crate) fn plugin_info(info: factbuoy::plugin::types::PluginInfo) -> current::PluginInfo {
    current::PluginInfo {
        name: info.name,
        version: info.version,
        description: info.description,
        parameters: info.parameters.translate(),
        capabilities: info.capabilities.translate(),
        artifacts: info
            .artifacts
            .into_iter()
            .map(|artifact| current::ArtifactSpec {
                kind: default_kind(&artifact.media_type),
                name: artifact.name,
                media_type: artifact.media_type,
                description: artifact.description,
            })
            .collect(),
    }
}

/// The kind a 0.1 plugin's artifact most likely has, from its media type (no keys: 0.1 could
/// not declare them).
fn default_kind(media_type: &str) -> ArtifactKind {
    use factbuoy_protocol::artifacts::ArtifactKind as Written;
    match Written::from_media_type(media_type) {
        Written::Facts { .. } => ArtifactKind::Facts(Vec::new()),
        Written::Table { .. } => ArtifactKind::Table(Vec::new()),
        Written::Log => ArtifactKind::Log,
        Written::Opaque => ArtifactKind::Opaque,
    }
}

/// The parameters of a `gather` call, for a 0.1 plugin.
pub(crate) fn params(
    params: &[(String, current::ParamValue)],
) -> Vec<(String, factbuoy::plugin::types::ParamValue)> {
    params
        .iter()
        .map(|(name, value)| (name.clone(), value.clone().translate()))
        .collect()
}

/// A 0.1 plugin's `gather` error, in the current types.
pub(crate) fn gather_error(error: factbuoy::plugin::types::GatherError) -> current::GatherError {
    error.translate()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_survive_the_way_there_and_back() {
        use current::factbuoy::plugin::host_info::LoadAverages;
        let nan = LoadAverages {
            one: f64::NAN,
            five: 0.5,
            fifteen: f64::INFINITY,
        };
        let old: factbuoy::plugin::host_info::LoadAverages = nan.translate();
        let back: LoadAverages = old.translate();
        assert!(back.one.is_nan());
        assert_eq!((back.five, back.fifteen), (0.5, f64::INFINITY));
        let value = current::ParamValue::StringList(vec!["a".into(), "b".into()]);
        let old: factbuoy::plugin::types::ParamValue = value.clone().translate();
        assert_eq!(Translate::<current::ParamValue>::translate(old), value);
    }
}
