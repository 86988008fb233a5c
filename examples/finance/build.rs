//! Links the example server with packed relative relocations (`DT_RELR`)
//! and, under lld, with its start-up functions laid out together.
//!
//! A position-independent Rust binary carries a 24-byte relocation for
//! every pointer in its read-only data (vtables, string tables, panic
//! locations): 47,000 of them here, 1.1 MB of `.rela.dyn` that the loader
//! reads at every start. Packed they take 13 KB: the binary is 1.1 MB
//! smaller and a started server maps 1–2 MB less of it (docs/benchmarks.md,
//! issue 44's weight). lld and GNU ld ≥ 2.38 write the packed form; glibc
//! runs it from 2.36 on, and an older glibc refuses the binary by name
//! (`GLIBC_ABI_DT_RELR not found`) rather than misloading it.
//!
//! `startup.order` (written by `scripts/startup-order`) lists the functions
//! the server runs from its start to its first answers. A started server
//! touches about 2 MB of its 20 MB of code; scattered, every touched page
//! brought the 64 KiB around it, and the server held 9.5 MB of its own code
//! after start; laid out first and together, about 2 MB (docs/benchmarks.md,
//! sixth round). Only lld reads the file, and rustc links with lld on
//! `x86_64-unknown-linux-gnu` from 1.90 on unless told otherwise: with any
//! other target, compiler or linker setting the binary keeps the default
//! layout. Names the linker does not find (a dependency upgraded since the
//! file was written) are skipped silently.
use std::path::Path;
use std::process::Command;

fn main() {
    let env = |key: &str| std::env::var(key).unwrap_or_default();
    if env("CARGO_CFG_TARGET_OS") == "linux" && env("CARGO_CFG_TARGET_ENV") == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=startup.order");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let order = Path::new(&env("CARGO_MANIFEST_DIR")).join("startup.order");
    if order.exists() && links_with_lld(&env) {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether rustc links this build with its own lld: the default for
/// `x86_64-unknown-linux-gnu` from Rust 1.90 on, unless a linker or
/// linker feature is chosen by configuration.
fn links_with_lld(env: &dyn Fn(&str) -> String) -> bool {
    if env("TARGET") != "x86_64-unknown-linux-gnu"
        || !env("RUSTC_LINKER").is_empty()
        || env("CARGO_ENCODED_RUSTFLAGS").contains("link")
    {
        return false;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(output) = Command::new(rustc).arg("--version").output() else {
        return false;
    };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let version = String::from_utf8_lossy(&output.stdout);
    let minor = version
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.split('.').nth(1))
        .and_then(|m| m.parse::<u32>().ok());
    matches!(minor, Some(m) if m >= 90)
}
