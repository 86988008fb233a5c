//! Links the app with packed relative relocations (`DT_RELR`).
//!
//! A position-independent Rust binary carries a 24-byte relocation for
//! every pointer in its read-only data (vtables, string tables, panic
//! locations): 47,000 in the example server, 1.1 MB of `.rela.dyn` that the loader
//! reads at every start. Packed they take 13 KB: the binary is 1.1 MB
//! smaller and a started server maps 1–2 MB less of it (docs/benchmarks.md,
//! issue 44's weight). lld and GNU ld ≥ 2.38 write the packed form; glibc
//! runs it from 2.36 on, and an older glibc refuses the binary by name
//! (`GLIBC_ABI_DT_RELR not found`) rather than misloading it.
fn main() {
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    if target("CARGO_CFG_TARGET_OS") == "linux" && target("CARGO_CFG_TARGET_ENV") == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
