//! The end-to-end tests, one test binary: each file beside this one is a module of it.
//!
//! One binary instead of one per file: the 132 binaries each linked the same support code and
//! dependencies, so a fresh build wrote about 5 GB and spent minutes linking, and a CI machine
//! ran out of disk. nextest still runs every test in its own process, so nothing is shared
//! between tests that was not before. Run one file's tests with
//! `cargo nextest run -p toolvisor-tests -E 'test(/^lsp_outside_changes::/)'`.

mod cli_doctor;
mod cli_help;
mod cli_print_config;
mod clients_frames_in_step;
mod clients_python;
mod clients_typescript;
mod contrib_k8s_recipe;
mod data_hub;
mod data_hub_links;
mod data_hybrid;
mod debug_adapters_report;
mod debug_attach_debugpy;
mod debug_attach_pid;
mod debug_breakpoint_options;
mod debug_exception_stops;
mod debug_go_delve;
mod debug_launch_options;
mod debug_lldb_native;
mod debug_ordering;
mod debug_python_session;
mod debug_run_to_and_watch;
mod debug_session_lifecycle;
mod downloads_changed_files;
mod downloads_cli;
mod downloads_free_space;
mod downloads_hub_answers;
mod downloads_jobs;
mod downloads_ranged;
mod downloads_variants;
mod env_children_write_no_bytecode;
mod eval_bridge;
mod eval_inactivity;
mod eval_javascript;
mod eval_kernel_death;
mod eval_magics;
mod eval_python_cells;
mod eval_rich_outputs;
mod files_crash_windows;
mod files_read;
mod files_result_store;
mod files_search;
mod files_special_files;
mod files_write;
mod gates_surface_approval_policy;
mod harness_claude_code;
mod harness_codex;
mod harness_model_reads;
mod harness_printed_config;
mod harness_readme;
mod harness_run_ends;
mod harness_tool_list;
mod harness_vibe_worker;
mod human_ask_user;
mod human_operator_tmux;
mod human_vibe;
mod inference_api_key;
mod inference_endpoint_bounds;
mod inference_llama_server;
mod inference_pool;
mod inference_port_impostor;
mod inference_server_hangs;
mod inference_stalled_client;
mod inference_store_names;
mod lanes_ordering;
mod lanes_pruned;
mod lifecycle_daemon_not_dumpable;
mod lifecycle_drain;
mod lifecycle_escaped_orphans;
mod lifecycle_json_logs;
mod lifecycle_ledger_escapee;
mod lifecycle_ledger_forgery;
mod lifecycle_log_disk_full;
mod lifecycle_memory_given_back;
mod lifecycle_no_orphans;
mod lifecycle_private_state;
mod lifecycle_socket_dir_refused;
mod lifecycle_systemd;
mod lifecycle_text_logs;
mod limits_connections;
mod limits_partial_frames;
mod lsp_apply_code_action;
mod lsp_call_hierarchy;
mod lsp_check_edit;
mod lsp_clangd_macro_uses;
mod lsp_clangd_note_positions;
mod lsp_clangd_partial_index;
mod lsp_code_action_ranges;
mod lsp_crash_restart;
mod lsp_deletions_stay_ready;
mod lsp_dependency_changes;
mod lsp_dependents_on_write;
mod lsp_diagnostics_baseline_before_write;
mod lsp_diagnostics_fresh_after_write;
mod lsp_diagnostics_ledger;
mod lsp_diagnostics_on_write;
mod lsp_edit_format;
mod lsp_edit_symbols;
mod lsp_fake_servers;
mod lsp_go_navigation;
mod lsp_idle_ttl;
mod lsp_inlay_hints;
mod lsp_long_lines;
mod lsp_memory_limit;
mod lsp_nested_roots;
mod lsp_not_available;
mod lsp_outside_change_latency;
mod lsp_outside_changes;
mod lsp_paging;
mod lsp_project_checker_roots;
mod lsp_pylsp_partial_references;
mod lsp_python_navigation;
mod lsp_rename_across_files;
mod lsp_rust_check_diagnostics;
mod lsp_rust_hidden_uses;
mod lsp_rust_navigation;
mod lsp_server_temp_files;
mod lsp_signature_completions;
mod lsp_status_start_rule;
mod lsp_type_hierarchy;
mod lsp_typescript_cold_references;
mod lsp_typescript_navigation;
mod lsp_typescript_nested_projects;
mod lsp_typescript_own_writes;
mod lsp_workspace_diagnostics;
mod lsp_workspace_trust;
mod mcp_2026;
mod mcp_approvals;
mod mcp_autostart;
mod mcp_http_2026_caps;
mod mcp_http_auth;
mod mcp_http_listen;
mod mcp_http_strangers;
mod mcp_http_token_file;
mod mcp_inspector_cli;
mod mcp_python_sdk;
mod mcp_tool_list_size;
mod mcp_typescript_sdk;
mod metrics_prometheus;
mod process_pty;
mod protocol_bad_input;
mod protocol_bincode_long_lists;
mod protocol_call_paths;
mod protocol_end_conversation;
mod protocol_handshake;
mod protocol_missing_arguments;
mod protocol_nesting_limit;
mod protocol_server_uid;
mod python_json_client;
mod scope_data_hub;
mod scope_lsp;
mod scope_structural;
mod security_tree_and_secrets;
mod structural_cli_parity;
mod structural_edit_accept;
mod structural_edit_conflict;
mod structural_edit_conversations;
mod structural_edit_discard;
mod structural_edit_persistence;
mod structural_ignore_rules;
mod structural_memory_bounds;
mod structural_search_cache;
mod structural_search_results;
mod tidy_docs;
mod tools_bash_process;
mod tree_live;

/// A file in this directory without its `mod` line above would never be built or run, and
/// nothing else would say so.
#[test]
fn every_file_beside_main_is_a_module_of_it() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let main = std::fs::read_to_string(dir.join("main.rs")).expect("tests/main.rs");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("tests/") {
        let name = entry.expect("a directory entry").file_name();
        let name = name.to_string_lossy();
        if let Some(module) = name.strip_suffix(".rs")
            && module != "main"
            && !main.lines().any(|l| l == format!("mod {module};"))
        {
            missing.push(module.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "tests/tests/main.rs has no `mod` line for {missing:?}: add one per file, or the file's tests never run"
    );
}
