//! `debug watch {expression}`: a data breakpoint (watchpoint) through `dataBreakpointInfo`
//! and `setDataBreakpoints`, where the adapter advertises `supportsDataBreakpoints`
//! (lldb-dap; debugpy does not). A variable named by `expression` is looked up in the
//! container `reference`, else in the frame's scopes, so the adapter is asked about it the
//! way the protocol means (a variable in a container); an expression that is no variable
//! there goes to the adapter as is (lldb-dap evaluates it as an address: `&p->n`).
//! Watches belong to the session: they end with it.

use super::*;

impl Debuggers {
    pub(super) async fn watch(
        &self,
        session: &Arc<Session>,
        args: &DebugArgs,
    ) -> Result<DebugWatchResult, ToolError> {
        let expression = need("watch", "expression", &args.expression)?
            .trim()
            .to_string();
        if expression.is_empty() {
            return Err(err(
                ErrorKind::InvalidArgs,
                "debug watch: `expression` is empty",
                "name the variable to watch (`total`), as `variables` shows it",
            ));
        }
        super::breakpoints::require_capability(
            session,
            "watch",
            "supportsDataBreakpoints",
            "data breakpoints (`watch`)",
        )?;
        self.require_stopped(session, "watch")?;
        let frame = self.frame(session, "watch", args.frame_id).await?;
        let container = match args.reference {
            Some(r) => Some(r),
            None => self.container_of(session, frame, &expression).await?,
        };
        let mut asked = json!({"name": expression});
        if let Some(r) = container {
            asked["variablesReference"] = json!(r);
        }
        if let Some(f) = frame {
            asked["frameId"] = json!(f);
        }
        let info = self
            .request(session, "watch", "dataBreakpointInfo", Some(asked))
            .await?;
        let description = info["description"].as_str().unwrap_or("").to_string();
        let Some(data_id) = info["dataId"].as_str().filter(|d| !d.is_empty()) else {
            return Err(err(
                ErrorKind::InvalidArgs,
                format!(
                    "debug watch: the {} adapter cannot watch {expression:?}: {}",
                    session.adapter,
                    if description.is_empty() {
                        "it gave no data id and no reason"
                    } else {
                        description.as_str()
                    }
                ),
                "watch a variable in scope at this stop (`scopes` and `variables` list them), or pass the `reference` of its container; lldb also takes an address expression (`&p->n`)",
            ));
        };
        let access = info["accessTypes"]
            .as_array()
            .filter(|a| !a.is_empty() && !a.iter().any(|t| t == "write"))
            .and_then(|a| a.first())
            .and_then(Value::as_str)
            .unwrap_or("write")
            .to_string();
        let mut dap: Vec<Value> = lock(&session.watches)
            .iter()
            .map(|(d, _)| d.clone())
            .collect();
        dap.push(json!({"dataId": data_id, "accessType": access}));
        let body = self
            .request(
                session,
                "watch",
                "setDataBreakpoints",
                Some(json!({ "breakpoints": dap })),
            )
            .await?;
        let answered = body["breakpoints"].as_array().cloned().unwrap_or_default();
        let answer = answered.last().cloned().unwrap_or(Value::Null);
        let shown = DebugWatch {
            expression,
            data_id: data_id.to_string(),
            description,
            access_type: access,
            verified: answer["verified"].as_bool().unwrap_or(false),
            message: answer["message"].as_str().map(str::to_string),
        };
        let watches: Vec<DebugWatch> = {
            let mut watches = lock(&session.watches);
            watches.push((dap.last().cloned().unwrap_or(Value::Null), shown.clone()));
            watches.iter().map(|(_, s)| s.clone()).collect()
        };
        let note = (!shown.verified).then(|| {
            "the adapter did not verify the watch (a hardware watchpoint may be unavailable here: its message says why)".into()
        });
        Ok(DebugWatchResult {
            watch: shown,
            watches,
            note,
        })
    }

    /// The scope of `frame` that holds a variable named `name` (at most the non-expensive
    /// scopes are listed), or `None`.
    async fn container_of(
        &self,
        session: &Arc<Session>,
        frame: Option<i64>,
        name: &str,
    ) -> Result<Option<i64>, ToolError> {
        let Some(frame) = frame else {
            return Ok(None);
        };
        let body = self
            .request(session, "watch", "scopes", Some(json!({"frameId": frame})))
            .await?;
        for scope in body["scopes"].as_array().cloned().unwrap_or_default() {
            let reference = scope["variablesReference"].as_i64().unwrap_or(0);
            if reference <= 0
                || scope["expensive"].as_bool().unwrap_or(false)
                || scope["presentationHint"] == "registers"
            {
                continue;
            }
            let vars = self
                .request(
                    session,
                    "watch",
                    "variables",
                    Some(json!({"variablesReference": reference})),
                )
                .await?;
            let found = vars["variables"]
                .as_array()
                .is_some_and(|v| v.iter().any(|v| v["name"] == name));
            if found {
                return Ok(Some(reference));
            }
        }
        Ok(None)
    }
}
