//! The merge itself: for every key, the first of flag, environment, file
//! and default that sets it, with its origin recorded and every value
//! checked (range, consistency) with an error naming the key and the layer
//! that set it.

use super::*;

/// The merge in progress: the file, and the origin of every value picked.
pub(super) struct Merge<'a> {
    pub(super) doc: Option<&'a Document>,
    pub(super) sources: BTreeMap<String, Origin>,
}

impl Merge<'_> {
    /// The first of flag, environment, file and default that has a value
    /// for `key`; records where it came from.
    pub(super) fn pick<T>(
        &mut self,
        key: &str,
        flag: Option<(T, &str)>,
        env: Option<(T, &str)>,
        file: Option<T>,
        default: T,
    ) -> T {
        let (value, origin) = if let Some((v, flag)) = flag {
            (v, Origin::Flag(flag.to_owned()))
        } else if let Some((v, var)) = env {
            (v, Origin::Env(var.to_owned()))
        } else if let (Some(v), Some(doc)) = (file, self.doc) {
            (v, Origin::File(doc.path.clone()))
        } else {
            (default, Origin::Default)
        };
        self.sources.insert(key.to_owned(), origin);
        value
    }

    /// [`Merge::pick`] for a key only the file (or the default) sets.
    fn file_or<T>(&mut self, key: &str, file: Option<T>, default: T) -> T {
        self.pick(key, None, None, file, default)
    }

    /// An error about `key`, at its line in the file when the file set it.
    fn error(&self, key: &str, message: String) -> ConfigError {
        let in_file = matches!(self.sources.get(key), Some(Origin::File(_)));
        let doc = self.doc.filter(|_| in_file);
        ConfigError {
            file: doc.map(|d| d.path.clone()),
            line: doc.and_then(|d| d.line_of(key)),
            key: Some(key.to_owned()),
            message,
        }
    }

    /// `` `key` = value`` and, unless it came from the file the error points
    /// at or from the default, where it came from.
    fn describe(&self, key: &str, value: impl fmt::Display) -> String {
        match self.sources.get(key) {
            Some(origin @ (Origin::Env(_) | Origin::Flag(_))) => {
                format!("`{key}` = {value} (from {origin})")
            }
            _ => format!("`{key}` = {value}"),
        }
    }

    pub(super) fn provider(
        &mut self,
        raw: &RawFile,
        o: &Overrides,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<ProviderSettings>, ConfigError> {
        let env_kind = match env(ENV_PROVIDER) {
            Some(v) => Some(
                v.to_ascii_lowercase()
                    .parse::<ProviderKind>()
                    .map_err(|_| {
                        env_error(
                            ENV_PROVIDER,
                            &v,
                            &format!("expected {}", file::names::<ProviderKind>()),
                        )
                    })?,
            ),
            None => None,
        };
        let file = raw.provider.as_ref();
        let file_kind = file.and_then(|p| p.kind).map(|c| c.0);
        let kind = o
            .provider
            .map(|k| (k, "--provider"))
            .or(env_kind.map(|k| (k, ENV_PROVIDER)));
        if kind.is_none() && file_kind.is_none() {
            // Nothing says which wire format: settings for a provider are a
            // mistake, not something to drop silently.
            if file.is_some() {
                let doc = self.doc.expect("a [provider] table comes from a file");
                return Err(ConfigError {
                    file: Some(doc.path.clone()),
                    line: doc.line_of("provider"),
                    key: Some("provider.kind".to_owned()),
                    message: format!(
                        "[provider] has no `kind`: add kind = {} (or give --provider or {ENV_PROVIDER})",
                        file::names::<ProviderKind>()
                            .trim_start_matches("one of ")
                            .replace(", ", " or ")
                    ),
                });
            }
            let set: Vec<&str> = [
                (o.model.is_some(), "--model"),
                (o.base_url.is_some(), "--base-url"),
                (o.api_key_env.is_some(), "--api-key-env"),
                (o.max_tokens.is_some(), "--max-tokens"),
                (o.temperature.is_some(), "--temperature"),
                (o.no_stream, "--no-stream"),
                (env(ENV_MODEL).is_some(), ENV_MODEL),
                (env(ENV_BASE_URL).is_some(), ENV_BASE_URL),
                (env(ENV_API_KEY_ENV).is_some(), ENV_API_KEY_ENV),
            ]
            .into_iter()
            .filter_map(|(set, name)| set.then_some(name))
            .collect();
            if !set.is_empty() {
                return Err(ConfigError {
                    file: None,
                    line: None,
                    key: Some("provider.kind".to_owned()),
                    message: format!(
                        "provider settings are given ({}) but no provider kind is set: give \
                         --provider openai|anthropic, set {ENV_PROVIDER}, or set `kind` in \
                         [provider]",
                        set.join(", ")
                    ),
                });
            }
            return Ok(None);
        }
        let empty = file::RawProvider::default();
        let file = file.unwrap_or(&empty);
        let kind = self.pick(
            "provider.kind",
            o.provider.map(|k| (k, "--provider")),
            env_kind.map(|k| (k, ENV_PROVIDER)),
            file_kind,
            ProviderKind::OpenAi,
        );
        let defaults = ProviderSettings::new(kind, String::new());
        let model = self.pick(
            "provider.model",
            o.model.clone().map(|m| (m, "--model")),
            env(ENV_MODEL).map(|m| (m, ENV_MODEL)),
            file.model.clone(),
            String::new(),
        );
        if model.is_empty() {
            let origin = &self.sources["provider.kind"];
            let mut err = self.error(
                "provider.kind",
                format!(
                    "the {kind} provider (from {origin}) needs a model: give --model, set \
                     {ENV_MODEL}, or set `model` in [provider]"
                ),
            );
            err.key = Some("provider.model".to_owned());
            return Err(err);
        }
        let base_url = self.pick(
            "provider.base_url",
            o.base_url.clone().map(|u| (u, "--base-url")),
            env(ENV_BASE_URL).map(|u| (u, ENV_BASE_URL)),
            file.base_url.clone(),
            defaults.base_url.clone(),
        );
        let api_key_env = self.pick(
            "provider.api_key_env",
            o.api_key_env.clone().map(|v| (v, "--api-key-env")),
            env(ENV_API_KEY_ENV).map(|v| (v, ENV_API_KEY_ENV)),
            file.api_key_env.clone(),
            defaults.api_key_env.clone().unwrap_or_default(),
        );
        let max_tokens = self.pick(
            "provider.max_tokens",
            o.max_tokens.map(|n| (n, "--max-tokens")),
            None,
            file.max_tokens,
            defaults.max_tokens,
        );
        let temperature = self.pick(
            "provider.temperature",
            o.temperature.map(|t| (Some(t), "--temperature")),
            None,
            file.temperature.map(Some),
            defaults.temperature,
        );
        let stream = self.pick(
            "provider.stream",
            o.no_stream.then_some((false, "--no-stream")),
            None,
            file.stream,
            defaults.stream,
        );
        let timeout = self.file_or(
            "provider.timeout_secs",
            file.timeout_secs.map(Duration::from_secs),
            defaults.timeout,
        );
        let connect_timeout = self.file_or(
            "provider.connect_timeout_secs",
            file.connect_timeout_secs.map(Duration::from_secs),
            defaults.connect_timeout,
        );
        let max_tokens_field = self.file_or(
            "provider.max_tokens_field",
            file.max_tokens_field.map(|c| c.0),
            defaults.max_tokens_field,
        );
        let max_retries = self.file_or(
            "provider.max_retries",
            file.max_retries,
            defaults.max_retries,
        );
        let tools = self.file_or(
            "provider.tools",
            file.tools.as_ref().map(|tools| {
                tools
                    .iter()
                    .map(|t| serde_json::to_value(t).expect("a TOML table is JSON"))
                    .collect()
            }),
            defaults.tools.clone(),
        );
        Ok(Some(ProviderSettings {
            kind,
            base_url,
            model,
            api_key_env: Some(api_key_env).filter(|v| !v.is_empty()),
            max_tokens,
            max_tokens_field,
            temperature,
            stream,
            timeout,
            connect_timeout,
            max_retries,
            tools,
            ..defaults
        }))
    }

    /// `[memory]`, checked: a user name the memory store can hold, and
    /// limits of at least 1 (the retrieval limit at most a page).
    pub(super) fn memory(&mut self, raw: &RawFile) -> Result<crate::MemorySettings, ConfigError> {
        let m = &raw.memory;
        let defaults = crate::MemorySettings::default();
        let user = self.file_or("memory.user", m.user.clone().map(Some), None);
        if let Some(user) = &user
            && !crate::valid_memory_user(user)
        {
            return Err(self.error(
                "memory.user",
                format!("`memory.user` = {user:?} must name a user in 1 to 256 bytes"),
            ));
        }
        let tools = self.file_or("memory.tools", m.tools, defaults.tools);
        let extraction = self.file_or(
            "memory.extraction",
            m.extraction.map(|c| c.0),
            defaults.extraction,
        );
        let extraction_threshold = self.file_or(
            "memory.extraction_threshold",
            m.extraction_threshold,
            defaults.extraction_threshold,
        );
        let retrieval_limit = self.file_or(
            "memory.retrieval_limit",
            m.retrieval_limit,
            defaults.retrieval_limit,
        );
        let recall_tokens = self.file_or(
            "memory.recall_tokens",
            m.recall_tokens,
            defaults.recall_tokens,
        );
        for (key, value, max) in [
            (
                "memory.extraction_threshold",
                extraction_threshold as u64,
                None,
            ),
            (
                "memory.retrieval_limit",
                retrieval_limit as u64,
                Some(crate::MAX_RETRIEVAL_LIMIT as u64),
            ),
            ("memory.recall_tokens", u64::from(recall_tokens), None),
        ] {
            if value == 0 || max.is_some_and(|max| value > max) {
                let range = match max {
                    Some(max) => format!("between 1 and {max}"),
                    None => "at least 1".to_owned(),
                };
                return Err(self.error(
                    key,
                    format!("{} must be {range}", self.describe(key, value)),
                ));
            }
        }
        Ok(crate::MemorySettings {
            user,
            tools,
            extraction,
            extraction_threshold,
            retrieval_limit,
            recall_tokens,
        })
    }

    /// The `[[upstreams]]` of the file, checked: names unique and not
    /// empty, each with models, an http(s) base URL, at most one default.
    pub(super) fn upstreams(
        &mut self,
        raw: &RawFile,
    ) -> Result<Vec<crate::UpstreamSettings>, ConfigError> {
        let mut out: Vec<crate::UpstreamSettings> = Vec::new();
        for (i, u) in raw.upstreams.iter().enumerate() {
            let key = |field: &str| format!("upstreams[{i}].{field}");
            let kind = self.file_or(&key("kind"), Some(u.kind.0), ProviderKind::OpenAi);
            let defaults = ProviderSettings::new(kind, String::new());
            let name = self.file_or(&key("name"), Some(u.name.clone()), String::new());
            let models = self.file_or(&key("models"), Some(u.models.clone()), Vec::new());
            if name.trim().is_empty() {
                return Err(self.error(&key("name"), "an upstream needs a name".to_owned()));
            }
            if out.iter().any(|o| o.name == name) {
                return Err(self.error(
                    &key("name"),
                    format!("two upstreams are named {name:?}; each needs its own name"),
                ));
            }
            if models.is_empty() || models.iter().any(|m| m.is_empty() || m == "*") {
                return Err(self.error(
                    &key("models"),
                    format!(
                        "the upstream {name:?} needs `models`: names, or prefixes ending in `*` (`gpt-*`), none empty; mark one upstream `default = true` for every other model"
                    ),
                ));
            }
            let first = models.iter().find(|m| !m.ends_with('*')).cloned();
            let model = self.file_or(&key("model"), u.model.clone().or(first), String::new());
            if model.is_empty() {
                return Err(self.error(
                    &key("models"),
                    format!(
                        "the upstream {name:?} lists only prefixes: set `model`, the model it is sent when a request names none"
                    ),
                ));
            }
            let base_url = self.file_or(
                &key("base_url"),
                u.base_url.clone(),
                defaults.base_url.clone(),
            );
            if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
                return Err(self.error(
                    &key("base_url"),
                    format!(
                        "`{}` = {base_url:?} must start with http:// or https://",
                        key("base_url")
                    ),
                ));
            }
            let api_key_env = self.file_or(
                &key("api_key_env"),
                u.api_key_env.clone(),
                defaults.api_key_env.clone().unwrap_or_default(),
            );
            let default = self.file_or(&key("default"), u.default, false);
            if default && let Some(other) = out.iter().find(|o| o.default) {
                return Err(self.error(
                    &key("default"),
                    format!(
                        "the upstreams {:?} and {name:?} are both marked default; at most one may be",
                        other.name
                    ),
                ));
            }
            let responses = self.file_or(&key("responses"), u.responses, false);
            if responses && kind != ProviderKind::OpenAi {
                return Err(self.error(
                    &key("responses"),
                    format!(
                        "the upstream {name:?} speaks Anthropic Messages; only an `openai` upstream can serve OpenAI Responses"
                    ),
                ));
            }
            let max_tokens = self.file_or(&key("max_tokens"), u.max_tokens, defaults.max_tokens);
            let max_tokens_field = self.file_or(
                &key("max_tokens_field"),
                u.max_tokens_field.map(|c| c.0),
                defaults.max_tokens_field,
            );
            let timeout = self.file_or(
                &key("timeout_secs"),
                u.timeout_secs.map(Duration::from_secs),
                defaults.timeout,
            );
            if max_tokens == 0 || timeout.is_zero() {
                return Err(self.error(
                    &key(if max_tokens == 0 {
                        "max_tokens"
                    } else {
                        "timeout_secs"
                    }),
                    "must be at least 1".to_owned(),
                ));
            }
            out.push(crate::UpstreamSettings {
                name,
                models,
                default,
                responses,
                provider: ProviderSettings {
                    kind,
                    base_url,
                    model,
                    api_key_env: Some(api_key_env).filter(|v| !v.is_empty()),
                    max_tokens,
                    max_tokens_field,
                    timeout,
                    ..defaults
                },
            });
        }
        Ok(out)
    }

    pub(super) fn context(
        &mut self,
        raw: &RawFile,
        o: &Overrides,
        env: &dyn Fn(&str) -> Option<String>,
        has_provider: bool,
    ) -> Result<ContextSettings, ConfigError> {
        let c = &raw.context;
        let p = &c.pruning;
        let d = ContextSettings {
            summarizer: if has_provider {
                SummarizerKind::Llm
            } else {
                SummarizerKind::Extractive
            },
            ..ContextSettings::default()
        };
        let env_limit = match env(ENV_CONTEXT_LIMIT) {
            Some(v) => Some(v.trim().parse::<u32>().map_err(|_| {
                env_error(
                    ENV_CONTEXT_LIMIT,
                    &v,
                    "expected a whole number of tokens (such as 128000)",
                )
            })?),
            None => None,
        };
        let context_limit = self.pick(
            "context.context_limit",
            o.context_limit.map(|n| (n, "--context-limit")),
            env_limit.map(|n| (n, ENV_CONTEXT_LIMIT)),
            c.context_limit,
            d.context_limit,
        );
        Ok(ContextSettings {
            context_limit,
            response_reserve: self.pick(
                "context.response_reserve",
                o.response_reserve.map(|n| (n, "--response-reserve")),
                None,
                c.response_reserve,
                // As core sizes it for a window: a small window set alone
                // keeps room for history.
                BudgetConfig::for_window(context_limit).response_reserve,
            ),
            tool_definition_tokens: self.file_or(
                "context.tool_definition_tokens",
                c.tool_definition_tokens,
                d.tool_definition_tokens,
            ),
            auto_summarize: self.pick(
                "context.auto_summarize",
                o.no_summarize.then_some((false, "--no-summarize")),
                None,
                c.auto_summarize,
                d.auto_summarize,
            ),
            max_messages_before_summary: self.file_or(
                "context.max_messages_before_summary",
                c.max_messages_before_summary
                    .map(|s| s.0.map(|n| usize::try_from(n).unwrap_or(usize::MAX))),
                d.max_messages_before_summary,
            ),
            max_tokens_before_summary: self.file_or(
                "context.max_tokens_before_summary",
                c.max_tokens_before_summary.map(|s| s.0),
                d.max_tokens_before_summary,
            ),
            summarize_fraction: self.file_or(
                "context.summarize_fraction",
                c.summarize_fraction.map(|s| s.0),
                d.summarize_fraction,
            ),
            min_messages_to_summarize: self.file_or(
                "context.min_messages_to_summarize",
                c.min_messages_to_summarize,
                d.min_messages_to_summarize,
            ),
            keep_last_turns: self.file_or(
                "context.keep_last_turns",
                c.keep_last_turns,
                d.keep_last_turns,
            ),
            min_recent_messages: self.file_or(
                "context.min_recent_messages",
                c.min_recent_messages,
                d.min_recent_messages,
            ),
            summary_share: self.file_or("context.summary_share", c.summary_share, d.summary_share),
            summary_max_words: self.file_or(
                "context.summary_max_words",
                c.summary_max_words,
                d.summary_max_words,
            ),
            summarizer: self.pick(
                "context.summarizer",
                o.summarizer.map(|s| (s, "--summarizer")),
                None,
                c.summarizer.map(|s| s.0),
                d.summarizer,
            ),
            extractive_fallback: self.file_or(
                "context.extractive_fallback",
                c.extractive_fallback,
                d.extractive_fallback,
            ),
            pruning: PruneConfig {
                min_chars: self.file_or(
                    "context.pruning.min_chars",
                    p.min_chars,
                    d.pruning.min_chars,
                ),
                soft_ratio: self.file_or(
                    "context.pruning.soft_ratio",
                    p.soft_ratio,
                    d.pruning.soft_ratio,
                ),
                hard_ratio: self.file_or(
                    "context.pruning.hard_ratio",
                    p.hard_ratio,
                    d.pruning.hard_ratio,
                ),
                keep_chars: self.file_or(
                    "context.pruning.keep_chars",
                    p.keep_chars,
                    d.pruning.keep_chars,
                ),
                protected_assistant_turns: self.file_or(
                    "context.pruning.protected_assistant_turns",
                    p.protected_assistant_turns,
                    d.pruning.protected_assistant_turns,
                ),
                excluded_tools: self.file_or(
                    "context.pruning.excluded_tools",
                    p.excluded_tools.clone(),
                    d.pruning.excluded_tools.clone(),
                ),
            },
            doom_loop_threshold: self.file_or(
                "context.doom_loop_threshold",
                c.doom_loop_threshold,
                d.doom_loop_threshold,
            ),
            max_tool_result_chars: self.file_or(
                "context.max_tool_result_chars",
                c.max_tool_result_chars,
                d.max_tool_result_chars,
            ),
        })
    }

    pub(super) fn processors(
        &mut self,
        raw: &RawFile,
    ) -> Result<Vec<ProcessorSettings>, ConfigError> {
        let Some(doc) = self.doc else {
            return Ok(Vec::new());
        };
        if raw.processors.len() > crate::MAX_PROCESSORS {
            let key = format!("processors[{}]", crate::MAX_PROCESSORS);
            return Err(ConfigError {
                file: Some(doc.path.clone()),
                line: doc.line_of(&format!("{key}.path")),
                key: Some(key),
                message: format!(
                    "the file lists {} processors; at most {} are accepted",
                    raw.processors.len(),
                    crate::MAX_PROCESSORS
                ),
            });
        }
        // Relative paths mean the same whatever the working directory: they
        // are the file's, as in Cargo.toml.
        let folder = doc.path.parent().unwrap_or(Path::new("")).to_owned();
        let defaults = ProcessorOptions::default();
        raw.processors
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let key = |k: &str| format!("processors[{i}].{k}");
                let path = self.file_or(&key("path"), Some(folder.join(&p.path)), PathBuf::new());
                let config = self.file_or(
                    &key("config"),
                    p.config
                        .as_ref()
                        .map(|t| Some(serde_json::to_string(t).expect("a TOML table is JSON"))),
                    None,
                );
                let mut options = ProcessorOptions {
                    config,
                    limits: Limits {
                        deadline: self.file_or(
                            &key("deadline_ms"),
                            p.deadline_ms.map(Duration::from_millis),
                            defaults.limits.deadline,
                        ),
                        memory_bytes: self.file_or(
                            &key("memory_mib"),
                            p.memory_mib.map(|m| m.saturating_mul(1 << 20)),
                            defaults.limits.memory_bytes,
                        ),
                        ..defaults.limits.clone()
                    },
                    on_failure: self.file_or(
                        &key("on_failure"),
                        p.on_failure.map(|c| c.0),
                        defaults.on_failure,
                    ),
                    on_invalid: self.file_or(
                        &key("on_invalid"),
                        p.on_invalid.map(|c| c.0),
                        defaults.on_invalid,
                    ),
                    ..ProcessorOptions::default()
                };
                options.grants.read_dirs = self.file_or(
                    &key("allow_dirs"),
                    p.allow_dirs
                        .as_ref()
                        .map(|dirs| dirs.iter().map(|d| folder.join(d)).collect()),
                    Vec::new(),
                );
                options.grants.clocks = self.file_or(&key("allow_clocks"), p.allow_clocks, false);
                options.grants.random = self.file_or(&key("allow_random"), p.allow_random, false);
                options.grants.summarize =
                    self.file_or(&key("allow_summarize"), p.allow_summarize, false);
                options.grants.count_tokens =
                    self.file_or(&key("allow_count_tokens"), p.allow_count_tokens, false);
                options.grants.memory = self.file_or(&key("allow_memory"), p.allow_memory, false);
                let budget = &mut options.limits.services;
                let d = agent_host_runtime::ServiceBudget::default();
                budget.calls = self.file_or(&key("service_calls"), p.service_calls, d.calls);
                budget.model_tokens =
                    self.file_or(&key("model_tokens"), p.model_tokens, d.model_tokens);
                budget.answer_tokens =
                    self.file_or(&key("answer_tokens"), p.answer_tokens, d.answer_tokens);
                budget.time = self.file_or(
                    &key("service_time_ms"),
                    p.service_time_ms.map(Duration::from_millis),
                    d.time,
                );
                let routes = p.routes.as_ref().map(|r| r.iter().map(|c| c.0).collect());
                let routes: Option<Vec<crate::ProcessorRoute>> =
                    self.file_or(&key("routes"), routes.map(Some), None);
                if routes.as_ref().is_some_and(Vec::is_empty) {
                    return Err(self.error(
                        &key("routes"),
                        "`routes` is empty, so the processor would never run; leave it out to run on every route".to_owned(),
                    ));
                }
                let models = self.file_or(&key("models"), p.models.clone().map(Some), None);
                if let Some(models) = &models {
                    check_models(models).map_err(|e| self.error(&key("models"), e))?;
                }
                let chains = self.file_or(
                    &key("chains"),
                    p.chains.clone(),
                    vec![crate::DEFAULT_CHAIN.to_owned()],
                );
                check_chains(&chains).map_err(|e| self.error(&key("chains"), e))?;
                Ok(ProcessorSettings {
                    path,
                    options,
                    routes,
                    models,
                    chains,
                })
            })
            .collect()
    }

    /// The checks no type can make, each naming its key.
    pub(super) fn check(
        &self,
        c: &ContextSettings,
        provider: Option<&ProviderSettings>,
        store: &str,
        processors: &[ProcessorSettings],
    ) -> Result<(), ConfigError> {
        let fail = |key: &str, message: String| Err(self.error(key, message));
        let ratio = |key: &str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                fail(
                    key,
                    format!("{} must be between 0 and 1", self.describe(key, v)),
                )
            }
        };
        let at_least = |key: &str, v: u64, min: u64, hint: &str| {
            if v >= min {
                Ok(())
            } else {
                fail(
                    key,
                    format!("{} must be at least {min}{hint}", self.describe(key, v)),
                )
            }
        };
        let turned_off = "; to turn the trigger off, write \"off\"";

        at_least("context.context_limit", c.context_limit.into(), 1, "")?;
        let needed = u64::from(c.response_reserve) + u64::from(c.tool_definition_tokens);
        if u64::from(c.context_limit) <= needed {
            let mut parts = vec![self.describe("context.response_reserve", c.response_reserve)];
            if c.tool_definition_tokens > 0 {
                parts.push(
                    self.describe("context.tool_definition_tokens", c.tool_definition_tokens),
                );
            }
            return fail(
                "context.context_limit",
                format!(
                    "{} must be larger than {}: nothing would be left for the history",
                    self.describe("context.context_limit", c.context_limit),
                    parts.join(" plus ")
                ),
            );
        }
        if let Some(n) = c.max_messages_before_summary {
            at_least(
                "context.max_messages_before_summary",
                n as u64,
                1,
                turned_off,
            )?;
        }
        if let Some(n) = c.max_tokens_before_summary {
            at_least("context.max_tokens_before_summary", n, 1, turned_off)?;
        }
        if let Some(f) = c.summarize_fraction
            && !(f > 0.0 && f <= 1.0)
        {
            return fail(
                "context.summarize_fraction",
                format!(
                    "{} must be more than 0 and at most 1{turned_off}",
                    self.describe("context.summarize_fraction", f)
                ),
            );
        }
        at_least(
            "context.min_messages_to_summarize",
            c.min_messages_to_summarize as u64,
            1,
            "",
        )?;
        at_least("context.keep_last_turns", c.keep_last_turns as u64, 1, "")?;
        if !(c.summary_share > 0.0 && c.summary_share < 1.0) {
            return fail(
                "context.summary_share",
                format!(
                    "{} must be more than 0 and less than 1",
                    self.describe("context.summary_share", c.summary_share)
                ),
            );
        }
        at_least(
            "context.summary_max_words",
            c.summary_max_words as u64,
            1,
            "",
        )?;
        if c.summarizer == SummarizerKind::Llm && provider.is_none() {
            return fail(
                "context.summarizer",
                format!(
                    "{} needs a provider, and none is configured: add [provider] (or give \
                     --provider and --model), or use \"extractive\"",
                    self.describe("context.summarizer", "\"llm\"")
                ),
            );
        }
        ratio("context.pruning.soft_ratio", c.pruning.soft_ratio)?;
        ratio("context.pruning.hard_ratio", c.pruning.hard_ratio)?;
        if c.pruning.soft_ratio > c.pruning.hard_ratio {
            return fail(
                "context.pruning.soft_ratio",
                format!(
                    "{} must not be larger than {}: results are trimmed before they are cleared",
                    self.describe("context.pruning.soft_ratio", c.pruning.soft_ratio),
                    self.describe("context.pruning.hard_ratio", c.pruning.hard_ratio)
                ),
            );
        }
        at_least(
            "context.doom_loop_threshold",
            c.doom_loop_threshold as u64,
            2,
            ": one call is never a loop",
        )?;
        at_least(
            "context.max_tool_result_chars",
            c.max_tool_result_chars as u64,
            1,
            "",
        )?;

        if let Some(p) = provider {
            if !(p.base_url.starts_with("http://") || p.base_url.starts_with("https://")) {
                return fail(
                    "provider.base_url",
                    format!(
                        "{} must start with http:// or https://",
                        self.describe("provider.base_url", format!("{:?}", p.base_url))
                    ),
                );
            }
            at_least("provider.max_tokens", p.max_tokens.into(), 1, "")?;
            if let Some(t) = p.temperature
                && !(0.0..=2.0).contains(&t)
            {
                return fail(
                    "provider.temperature",
                    format!(
                        "{} must be between 0 and 2",
                        self.describe("provider.temperature", t)
                    ),
                );
            }
            at_least("provider.timeout_secs", p.timeout.as_secs(), 1, "")?;
            at_least(
                "provider.connect_timeout_secs",
                p.connect_timeout.as_secs(),
                1,
                "",
            )?;
        }
        if store.trim().is_empty() {
            return fail("store.path", "`store.path` must not be empty".to_owned());
        }
        for (i, p) in processors.iter().enumerate() {
            let key = |k: &str| format!("processors[{i}].{k}");
            let deadline = p.options.limits.deadline.as_millis() as u64;
            at_least(&key("deadline_ms"), deadline, 1, "")?;
            let mib = (p.options.limits.memory_bytes >> 20) as u64;
            at_least(&key("memory_mib"), mib, 1, "")?;
            // Building a crate runs its build scripts natively, outside any
            // sandbox: a file never makes that happen.
            let is_crate = p.path.is_dir() || p.path.file_name().is_some_and(|n| n == "Cargo.toml");
            if is_crate {
                return fail(
                    &key("path"),
                    format!(
                        "`{}` = {} is a folder or a Cargo.toml, not a component: a configuration \
                         file names built components only, since building a crate runs its build \
                         scripts natively. Build it with `agent-host processor build {}` and name \
                         the .wasm it writes",
                        key("path"),
                        p.path.display(),
                        p.path.display()
                    ),
                );
            }
        }
        Ok(())
    }
}

/// An environment variable whose value does not parse.
fn env_error(var: &str, value: &str, expected: &str) -> ConfigError {
    ConfigError {
        file: None,
        line: None,
        key: Some(var.to_owned()),
        message: format!("the environment variable {var}={value:?} is not valid: {expected}"),
    }
}

/// The most models one processor entry may list.
const MAX_MODELS: usize = 64;

/// The most chains one processor entry may be in.
const MAX_CHAINS: usize = 16;

/// The longest model name or prefix, and chain name, in bytes.
const MAX_NAME: usize = 256;

/// A processor's `models`: 1 to [`MAX_MODELS`] names or prefixes ending in
/// `*`, none empty, `*` only at the end.
fn check_models(models: &[String]) -> Result<(), String> {
    if models.is_empty() || models.len() > MAX_MODELS {
        return Err(format!(
            "`models` lists {} entries; give 1 to {MAX_MODELS} (leave it out to run for every model)",
            models.len()
        ));
    }
    for (i, m) in models.iter().enumerate() {
        let stem = m.strip_suffix('*').unwrap_or(m);
        if stem.is_empty() || m.len() > MAX_NAME || stem.contains('*') {
            return Err(format!(
                "`models[{i}]` = {:?} must be a model name or a prefix ending in `*` (`gpt-4o*`), not empty, at most {MAX_NAME} bytes, with `*` only at the end (leave `models` out to run for every model)",
                m.chars().take(80).collect::<String>()
            ));
        }
    }
    Ok(())
}

/// A processor's `chains`: 1 to [`MAX_CHAINS`] names of ASCII letters,
/// digits, `-` and `_`, at most 64 bytes each.
fn check_chains(chains: &[String]) -> Result<(), String> {
    if chains.is_empty() || chains.len() > MAX_CHAINS {
        return Err(format!(
            "`chains` lists {} names; give 1 to {MAX_CHAINS} (leave it out for the `{}` chain)",
            chains.len(),
            crate::DEFAULT_CHAIN
        ));
    }
    for (i, c) in chains.iter().enumerate() {
        let fine = !c.is_empty()
            && c.len() <= 64
            && c.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !fine {
            return Err(format!(
                "`chains[{i}]` = {:?} must be 1 to 64 ASCII letters, digits, `-` or `_`",
                c.chars().take(80).collect::<String>()
            ));
        }
    }
    Ok(())
}
