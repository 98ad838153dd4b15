//! One module per part of the document, each filling its part from the host's files and
//! `host_info`.

pub mod cpu;
pub mod kubernetes;
pub mod network;
pub mod storage;
pub mod system;
