//! MCP over Streamable HTTP: rmcp's service at `/mcp` inside an axum router
//! with authentication, health endpoints and a draining shutdown.

// Wired into `serve --http` by the HTTP server (in progress).
#![allow(dead_code)]

pub(crate) mod auth;
