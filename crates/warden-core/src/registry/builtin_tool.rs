//! The one list of the server's built-in tools.
//!
//! The registry reserves these names so no guard can take them; the MCP
//! layer (`warden::mcp::builtins`) maps each variant to its implementation
//! with an exhaustive `match`. Both read this enum, so there is one list:
//! adding a variant fails to compile until the MCP layer has an impl for
//! it, and a built-in cannot exist without its name being reserved.
//! This module names tools only; it never runs one.

/// A tool the server provides itself. Every built-in is here, including
/// `run_coding_task` when the `agent` feature is off (its name stays
/// reserved, so an app's guards do not change meaning with a feature).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinTool {
    RunCodingTask,
    RunScript,
    RunBatch,
    ListTasks,
    GetTaskResult,
    ListArtifacts,
    ReadArtifact,
    ListGuards,
    SearchGuards,
    DescribeGuard,
    BundleCoverage,
    CheckBacktest,
    VerifyReceipt,
    ReplayTask,
}

impl BuiltinTool {
    /// Every built-in, each once, in tools/list order.
    pub const ALL: &[BuiltinTool] = &[
        BuiltinTool::RunCodingTask,
        BuiltinTool::RunScript,
        BuiltinTool::RunBatch,
        BuiltinTool::ListTasks,
        BuiltinTool::GetTaskResult,
        BuiltinTool::ListArtifacts,
        BuiltinTool::ReadArtifact,
        BuiltinTool::ListGuards,
        BuiltinTool::SearchGuards,
        BuiltinTool::DescribeGuard,
        BuiltinTool::BundleCoverage,
        BuiltinTool::CheckBacktest,
        BuiltinTool::VerifyReceipt,
        BuiltinTool::ReplayTask,
    ];

    /// The MCP tool name: the only place each name is written.
    pub const fn name(self) -> &'static str {
        match self {
            BuiltinTool::RunCodingTask => "run_coding_task",
            BuiltinTool::RunScript => "run_script",
            BuiltinTool::RunBatch => "run_batch",
            BuiltinTool::ListTasks => "list_tasks",
            BuiltinTool::GetTaskResult => "get_task_result",
            BuiltinTool::ListArtifacts => "list_artifacts",
            BuiltinTool::ReadArtifact => "read_artifact",
            BuiltinTool::ListGuards => "list_guards",
            BuiltinTool::SearchGuards => "search_guards",
            BuiltinTool::DescribeGuard => "describe_guard",
            BuiltinTool::BundleCoverage => "bundle_coverage",
            BuiltinTool::CheckBacktest => "check_backtest",
            BuiltinTool::VerifyReceipt => "verify_receipt",
            BuiltinTool::ReplayTask => "replay_task",
        }
    }

    /// The built-in with this tool name, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|tool| tool.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::BuiltinTool;

    #[test]
    fn all_lists_each_variant_once() {
        // ALL is complete and has no repeat: the match below has no wildcard,
        // so a new variant fails to compile here until it is counted.
        let mut seen = [0usize; 14];
        for tool in BuiltinTool::ALL {
            let slot = match tool {
                BuiltinTool::RunCodingTask => 0,
                BuiltinTool::RunScript => 1,
                BuiltinTool::RunBatch => 2,
                BuiltinTool::ListTasks => 3,
                BuiltinTool::GetTaskResult => 4,
                BuiltinTool::ListArtifacts => 5,
                BuiltinTool::ReadArtifact => 6,
                BuiltinTool::ListGuards => 7,
                BuiltinTool::DescribeGuard => 8,
                BuiltinTool::BundleCoverage => 9,
                BuiltinTool::CheckBacktest => 10,
                BuiltinTool::VerifyReceipt => 11,
                BuiltinTool::ReplayTask => 12,
                BuiltinTool::SearchGuards => 13,
            };
            seen[slot] += 1;
        }
        assert_eq!(seen, [1; 14]);
    }

    #[test]
    fn names_round_trip_and_are_distinct() {
        // Each name maps back to its own variant, so no two share a name.
        for tool in BuiltinTool::ALL {
            assert_eq!(BuiltinTool::from_name(tool.name()), Some(*tool));
        }
        assert_eq!(BuiltinTool::from_name("echo"), None);
    }
}
