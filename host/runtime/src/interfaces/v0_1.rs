//! The interfaces a 0.1 plugin imports (`@0.1.x` names), each call handed to the current
//! line's implementation and its answer translated back ([`Translate`]). The two lines' imports
//! are the same, so nothing here decides anything.

use wasmtime::component::Resource;

use crate::bindings::OpenArtifact;
use crate::bindings::factbuoy::plugin as current;
use crate::bindings::v0_1::Translate;
use crate::bindings::v0_1::factbuoy::plugin::{
    host_fs, host_info, logging, output, progress, types,
};
use crate::instance::InstanceState;

impl types::Host for InstanceState {}

impl host_info::Host for InstanceState {
    fn os(&mut self) -> wasmtime::Result<host_info::OsInfo> {
        Ok(current::host_info::Host::os(self)?.translate())
    }
    fn cpus(&mut self) -> wasmtime::Result<Vec<host_info::Cpu>> {
        Ok(current::host_info::Host::cpus(self)?.translate())
    }
    fn physical_core_count(&mut self) -> wasmtime::Result<Option<u32>> {
        current::host_info::Host::physical_core_count(self)
    }
    fn memory(&mut self) -> wasmtime::Result<host_info::MemoryInfo> {
        Ok(current::host_info::Host::memory(self)?.translate())
    }
    fn disks(&mut self) -> wasmtime::Result<Vec<host_info::Disk>> {
        Ok(current::host_info::Host::disks(self)?.translate())
    }
    fn network_interfaces(&mut self) -> wasmtime::Result<Vec<host_info::NetworkInterface>> {
        Ok(current::host_info::Host::network_interfaces(self)?.translate())
    }
    fn load_average(&mut self) -> wasmtime::Result<host_info::LoadAverages> {
        Ok(current::host_info::Host::load_average(self)?.translate())
    }
    fn uptime_seconds(&mut self) -> wasmtime::Result<u64> {
        current::host_info::Host::uptime_seconds(self)
    }
    fn boot_time_seconds(&mut self) -> wasmtime::Result<u64> {
        current::host_info::Host::boot_time_seconds(self)
    }
    fn filesystem_usage(
        &mut self,
        mount_points: Vec<String>,
    ) -> wasmtime::Result<Vec<Option<host_info::FilesystemStats>>> {
        Ok(current::host_info::Host::filesystem_usage(self, mount_points)?.translate())
    }
    fn ipv4_addresses(&mut self) -> wasmtime::Result<Vec<host_info::Ipv4Address>> {
        Ok(current::host_info::Host::ipv4_addresses(self)?.translate())
    }
    fn existing_markers(&mut self) -> wasmtime::Result<Vec<String>> {
        current::host_info::Host::existing_markers(self)
    }
    fn is_chroot(&mut self) -> wasmtime::Result<Option<bool>> {
        current::host_info::Host::is_chroot(self)
    }
    fn tz_variable(&mut self) -> wasmtime::Result<Option<String>> {
        current::host_info::Host::tz_variable(self)
    }
    fn ethtool(&mut self, name: String) -> wasmtime::Result<host_info::EthtoolInfo> {
        Ok(current::host_info::Host::ethtool(self, name)?.translate())
    }
}

impl host_fs::Host for InstanceState {
    fn read_link(&mut self, path: String) -> wasmtime::Result<Result<String, host_fs::LinkError>> {
        Ok(current::host_fs::Host::read_link(self, path)?.translate())
    }
}

impl progress::Host for InstanceState {
    fn report(&mut self, update: progress::ProgressUpdate) -> wasmtime::Result<()> {
        current::progress::Host::report(self, update.translate())
    }
}

impl logging::Host for InstanceState {
    fn log(&mut self, level: logging::Level, message: String) -> wasmtime::Result<()> {
        current::logging::Host::log(self, level.translate(), message)
    }
}

impl output::Host for InstanceState {
    async fn create(
        &mut self,
        name: String,
        media_type: String,
    ) -> wasmtime::Result<Result<Resource<OpenArtifact>, output::OutputError>> {
        let created = current::output::Host::create(self, name, media_type).await?;
        Ok(created.map_err(Translate::translate))
    }
}

impl output::HostArtifact for InstanceState {
    async fn write(
        &mut self,
        handle: Resource<OpenArtifact>,
        chunk: Vec<u8>,
    ) -> wasmtime::Result<Result<(), output::OutputError>> {
        let written = current::output::HostArtifact::write(self, handle, chunk).await?;
        Ok(written.map_err(Translate::translate))
    }

    async fn finish(
        &mut self,
        handle: Resource<OpenArtifact>,
    ) -> wasmtime::Result<Result<(), output::OutputError>> {
        let finished = current::output::HostArtifact::finish(self, handle).await?;
        Ok(finished.map_err(Translate::translate))
    }

    async fn drop(&mut self, handle: Resource<OpenArtifact>) -> wasmtime::Result<()> {
        current::output::HostArtifact::drop(self, handle).await
    }
}
