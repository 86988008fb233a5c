//! Integration tests: every test spawns a real server binary and speaks MCP
//! over stdio with the rmcp client. The model is never live.

mod agent;
mod app_view;
mod asking;
mod batch;
mod catalogue;
mod charts;
mod common;
mod docs;
mod executor;
mod fake_model;
mod governance_executor;
mod governance_sandbox;
mod governance_storage;
mod governance_transport;
mod http;
mod http_auth;
mod http_direct;
mod http_hostile;
mod http_sessions;
mod lifecycle;
mod limits;
mod mcp_tasks;
mod model_view;
mod policy;
mod preflight;
mod receipts;
mod scenarios;
mod scripts;
mod storage_faults;
mod task_states;
mod tasks;
mod tenants;
mod tools;
mod tracing;
mod zygote;
