//! Integration tests: every test spawns a real server binary and speaks MCP
//! over stdio with the rmcp client. The model is never live.

mod catalogue;
mod common;
mod executor;
mod lifecycle;
mod preflight;
mod scenarios;
mod scripts;
mod tools;
