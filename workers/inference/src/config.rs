//! `[inference]`: the server command per model format (data, with placeholders), the idle TTL,
//! readiness and on-demand loading, and where the routing endpoint listens.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// `[inference]`. See docs/OPERATIONS.md.
#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InferenceConfig {
    /// The server command per model format (`gguf`): program and arguments, with `{path}`
    /// (the model file), `{port}` (a loopback port the daemon chose), `{context}`, `{alias}`,
    /// `{dir}` (the model's directory) and `{gpu_layers}` (999 when the model fits an
    /// accelerator's free memory whole, else 0) replaced. Default for `gguf`: `llama-server` when it
    /// is on the children's `PATH`, else `python3 -m llama_cpp.server` (llama-cpp-python).
    pub commands: BTreeMap<String, Vec<String>>,
    /// Unload a model after this many seconds without a request (0: never).
    pub idle_ttl_s: u64,
    /// How long a server may take to answer its model list before its start counts as failed.
    pub ready_timeout_s: u64,
    /// Context length when `load_model` names none.
    pub context: u32,
    /// A request naming a model that is not loaded starts it (a model of the store named by
    /// its repo, or an alias that was unloaded).
    pub on_demand: bool,
    /// Models loaded at once, at most.
    pub max_loaded: usize,
    /// At `max_loaded`, a load unloads the least recently used model that is not pinned and
    /// has no request in flight, instead of refusing (`busy`).
    pub evict: bool,
    /// Requests the endpoint sends one model's server at once; more wait in its queue.
    pub parallel: usize,
    /// Requests that may wait for one model's slots; one more is answered 429 with
    /// `Retry-After`.
    pub queue: usize,
    /// The endpoint's Unix socket; default `<daemon socket>.inference`.
    pub socket: Option<PathBuf>,
    /// Also listen on this loopback address (`127.0.0.1:8080`); off by default.
    pub listen: Option<String>,
    /// How long an unloaded server gets after SIGTERM before the guard's kill.
    pub stop_grace_s: u64,
    /// Connections the endpoint serves at once on each listener (the socket, the port); one
    /// more is answered 503 `too_many_connections` and closed.
    pub max_connections: usize,
    /// A client has this long to send a request's head, and again its body.
    pub request_read_timeout_s: u64,
    /// A client that takes nothing of a response for this long (its socket buffers full) is
    /// cut off: a reader that stalls cannot hold its connection, and its model's in-flight
    /// count, for ever.
    pub response_write_timeout_s: u64,
    /// The key a request on the loopback port must carry (`Authorization: Bearer <key>` or
    /// `x-api-key: <key>`); default `$TOOLVISOR_INFERENCE_API_KEY`. A secret: masked in tool
    /// results, hidden in `Debug`, never logged, never passed on to a model server. The Unix
    /// socket checks its peers' uid instead and needs no key.
    pub api_key: Option<String>,
    /// A server is ready only once the socket listening on its port belongs to its own
    /// process tree (another local process could take the port between the daemon's pick and
    /// the server's bind). Off only for servers whose port another process holds by design
    /// (a container runtime's port proxy).
    pub check_port_owner: bool,
    /// Arguments added to a model's command when it is started for embeddings (the data hub's
    /// `[data] embedding_model`). Default: `--embeddings --pooling mean` for llama-server,
    /// `--embedding true` for llama-cpp-python; another command needs them set.
    pub embedding_args: Option<Vec<String>>,
    /// `[inference.models."owner/name"]` (or `"owner/name:variant"`, which wins over the
    /// repo's): what one model is started with beside its format's command, as Ollama's
    /// Modelfile and LM Studio's per-model settings do.
    pub models: BTreeMap<String, ModelParams>,
}

/// One model's own settings (`[inference.models."owner/name"]`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ModelParams {
    /// Its context when `load_model` names none (before `[inference] context`).
    pub context: Option<u32>,
    /// Arguments added to its server's command, placeholders as in `commands` (a chat
    /// template, a rope scaling, sampling defaults, `--n-gpu-layers` to override the fit's).
    pub args: Vec<String>,
}

impl std::fmt::Debug for InferenceConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InferenceConfig")
            .field("commands", &self.commands)
            .field("idle_ttl_s", &self.idle_ttl_s)
            .field("ready_timeout_s", &self.ready_timeout_s)
            .field("context", &self.context)
            .field("on_demand", &self.on_demand)
            .field("max_loaded", &self.max_loaded)
            .field("evict", &self.evict)
            .field("parallel", &self.parallel)
            .field("queue", &self.queue)
            .field("socket", &self.socket)
            .field("listen", &self.listen)
            .field("stop_grace_s", &self.stop_grace_s)
            .field("max_connections", &self.max_connections)
            .field("request_read_timeout_s", &self.request_read_timeout_s)
            .field("response_write_timeout_s", &self.response_write_timeout_s)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("check_port_owner", &self.check_port_owner)
            .field("embedding_args", &self.embedding_args)
            .field("models", &self.models)
            .finish()
    }
}

impl Default for InferenceConfig {
    fn default() -> Self {
        InferenceConfig {
            commands: BTreeMap::new(),
            idle_ttl_s: 900,
            ready_timeout_s: 120,
            context: 2048,
            on_demand: false,
            max_loaded: 4,
            evict: true,
            parallel: 4,
            queue: 64,
            socket: None,
            listen: None,
            stop_grace_s: 5,
            max_connections: 64,
            request_read_timeout_s: 30,
            response_write_timeout_s: 60,
            api_key: None,
            check_port_owner: true,
            embedding_args: None,
            models: BTreeMap::new(),
        }
    }
}

/// llama-cpp-python's OpenAI-compatible server.
pub fn llama_cpp_python() -> Vec<String> {
    [
        "python3",
        "-m",
        "llama_cpp.server",
        "--model",
        "{path}",
        "--host",
        "127.0.0.1",
        "--port",
        "{port}",
        "--n_ctx",
        "{context}",
        "--model_alias",
        "{alias}",
        "--n_gpu_layers",
        "{gpu_layers}",
    ]
    .map(String::from)
    .to_vec()
}

/// llama.cpp's own server.
pub fn llama_server() -> Vec<String> {
    [
        "llama-server",
        "--model",
        "{path}",
        "--host",
        "127.0.0.1",
        "--port",
        "{port}",
        "--ctx-size",
        "{context}",
        "--alias",
        "{alias}",
        "--n-gpu-layers",
        "{gpu_layers}",
    ]
    .map(String::from)
    .to_vec()
}

/// The environment variable `[inference] api_key` defaults to.
pub const API_KEY_VAR: &str = "TOOLVISOR_INFERENCE_API_KEY";

/// Shortest key accepted: anything shorter is guessable.
const API_KEY_MIN: usize = 16;

impl InferenceConfig {
    /// The loopback port's key: the config's, else `$TOOLVISOR_INFERENCE_API_KEY`.
    pub fn api_key(&self) -> Option<String> {
        self.api_key
            .clone()
            .filter(|k| !k.is_empty())
            .or_else(|| std::env::var(API_KEY_VAR).ok().filter(|k| !k.is_empty()))
    }

    /// The settings of the model `repo`'s `variant`: its own entry, else its repo's.
    pub fn params(&self, repo: &str, variant: &str) -> Option<&ModelParams> {
        let named = format!("{repo}:{variant}");
        let exact = self
            .models
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(&named));
        exact
            .or_else(|| {
                self.models
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(repo))
            })
            .map(|(_, p)| p)
    }

    /// Refuse settings that cannot work, naming the key.
    pub fn check(&self) -> Result<(), String> {
        for (format, cmd) in &self.commands {
            if cmd.is_empty() || cmd[0].is_empty() {
                return Err(format!(
                    "inference.commands.{format} is empty: give the program and its arguments"
                ));
            }
            if !cmd.iter().any(|a| a.contains("{port}")) {
                return Err(format!(
                    "inference.commands.{format} has no {{port}}: the server must listen on the loopback port the daemon chooses"
                ));
            }
        }
        if self.ready_timeout_s == 0 {
            return Err("inference.ready_timeout_s = 0: it must be a positive integer".into());
        }
        if self.context == 0 {
            return Err("inference.context = 0: it must be a positive integer".into());
        }
        for (name, params) in &self.models {
            let (repo, _) = name.split_once(':').unwrap_or((name, ""));
            if repo.split('/').count() != 2 || repo.split('/').any(str::is_empty) {
                return Err(format!(
                    "inference.models.{name:?}: name a model as list_models does, `owner/name` or `owner/name:variant`"
                ));
            }
            if params.context == Some(0) {
                return Err(format!(
                    "inference.models.{name:?}.context = 0: it must be a positive integer"
                ));
            }
            if params.args.iter().any(|a| a.contains("{port}")) {
                return Err(format!(
                    "inference.models.{name:?}.args names {{port}}: the port is the format's command's to give"
                ));
            }
        }
        if let Some(key) = self.api_key()
            && (key.chars().count() < API_KEY_MIN || key.chars().any(|c| c.is_whitespace()))
        {
            return Err(format!(
                "inference.api_key (or ${API_KEY_VAR}) must be at least {API_KEY_MIN} characters without spaces (try `openssl rand -hex 24`)"
            ));
        }
        if self.max_connections == 0 {
            return Err("inference.max_connections = 0: it must be at least 1".into());
        }
        if self.request_read_timeout_s == 0 {
            return Err(
                "inference.request_read_timeout_s = 0: it must be a positive integer".into(),
            );
        }
        if self.response_write_timeout_s == 0 {
            return Err(
                "inference.response_write_timeout_s = 0: it must be a positive integer".into(),
            );
        }
        if self.max_loaded == 0 {
            return Err("inference.max_loaded = 0: it must be at least 1".into());
        }
        if let Some(listen) = &self.listen {
            let addr: std::net::SocketAddr = listen.parse().map_err(|_| {
                format!(
                    "inference.listen = {listen:?}: give a loopback address such as 127.0.0.1:8080"
                )
            })?;
            if !addr.ip().is_loopback() {
                return Err(format!(
                    "inference.listen = {listen:?}: only loopback addresses are allowed"
                ));
            }
        }
        Ok(())
    }

    /// The command for `format`: configured, else the default (llama-server when `path_has`
    /// finds it, else llama-cpp-python); `None` for a format without one.
    pub fn command(&self, format: &str, path_has: impl Fn(&str) -> bool) -> Option<Vec<String>> {
        if let Some(c) = self.commands.get(format) {
            return Some(c.clone());
        }
        (format == "gguf").then(|| {
            if path_has("llama-server") {
                llama_server()
            } else {
                llama_cpp_python()
            }
        })
    }
}

/// `template` with its placeholders replaced.
pub fn render(template: &[String], vars: &[(&str, String)]) -> Vec<String> {
    template
        .iter()
        .map(|a| {
            let mut a = a.clone();
            for (k, v) in vars {
                a = a.replace(&format!("{{{k}}}"), v);
            }
            a
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_models_settings_are_its_variants_else_its_repos_and_bad_ones_are_named() {
        let params = |context: u32| ModelParams {
            context: Some(context),
            args: vec![],
        };
        let mut c = InferenceConfig::default();
        c.models.insert("Org/Model".into(), params(4096));
        c.models.insert("org/model:Q8_0".into(), params(8192));
        assert_eq!(c.params("org/model", "Q4_K_M").unwrap().context, Some(4096));
        assert_eq!(c.params("org/model", "q8_0").unwrap().context, Some(8192));
        assert!(c.params("org/other", "Q8_0").is_none());
        assert!(c.check().is_ok());
        for (name, p, says) in [
            ("model", params(1), "owner/name"),
            ("org/", params(1), "owner/name"),
            ("org/model", params(0), "context = 0"),
            (
                "org/model",
                ModelParams {
                    context: None,
                    args: vec!["--port".into(), "{port}".into()],
                },
                "{port}",
            ),
        ] {
            let mut bad = InferenceConfig::default();
            bad.models.insert(name.into(), p);
            let e = bad.check().unwrap_err();
            assert!(e.contains("inference.models") && e.contains(says), "{e}");
        }
    }

    #[test]
    fn default_command_prefers_llama_server_and_placeholders_render() {
        let c = InferenceConfig::default();
        assert_eq!(c.command("gguf", |_| true).unwrap()[0], "llama-server");
        let py = c.command("gguf", |_| false).unwrap();
        assert_eq!(&py[..3], ["python3", "-m", "llama_cpp.server"]);
        assert!(c.command("safetensors", |_| true).is_none());
        let r = render(&py, &[("path", "/m.gguf".into()), ("port", "4000".into())]);
        assert!(r.contains(&"/m.gguf".to_string()) && r.contains(&"4000".to_string()));
    }

    #[test]
    fn bad_settings_are_named() {
        let mut c = InferenceConfig {
            listen: Some("0.0.0.0:8080".into()),
            ..Default::default()
        };
        assert!(c.check().unwrap_err().contains("loopback"));
        c.listen = None;
        c.commands
            .insert("gguf".into(), vec!["server".into(), "--model".into()]);
        assert!(c.check().unwrap_err().contains("{port}"));
        c.commands.clear();
        c.api_key = Some("short".into());
        let e = c.check().unwrap_err();
        assert!(e.contains("api_key") && !e.contains("short"), "{e}");
    }

    #[test]
    fn the_api_key_never_shows_in_debug() {
        let c = InferenceConfig {
            api_key: Some("sk-0123456789abcdef-secret".into()),
            ..Default::default()
        };
        assert!(c.check().is_ok());
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("secret") && shown.contains("***"),
            "{shown}"
        );
    }
}
