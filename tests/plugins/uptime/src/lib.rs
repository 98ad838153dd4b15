//! The README's plugin example, as the README writes it (build.rs copies it out).

include!(concat!(env!("OUT_DIR"), "/readme_example.rs"));
