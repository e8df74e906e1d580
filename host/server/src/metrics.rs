//! `GET /metrics`: Prometheus text of requests, latencies, appends,
//! compactions, processor calls and hooks.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProcessorLabels {
    processor: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabels {
    hook: String,
    outcome: String,
}

fn latency_histogram() -> Histogram {
    // 100 µs to about 26 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

/// The server's metrics.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram, fn() -> Histogram>,
    appends: Counter,
    appended_messages: Counter,
    compactions: Counter,
    context_loads: Counter,
    processor_calls: Family<ProcessorLabels, Counter>,
    processor_failures: Family<ProcessorLabels, Counter>,
    hooks: Family<HookLabels, Counter>,
    sessions: Gauge,
    hot_sessions: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("agent_host");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, route and status",
            requests.clone(),
        );
        let latency = Family::<RouteLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram,
        );
        registry.register(
            "http_request_duration_seconds",
            "Time to answer an HTTP request (to the first byte of a stream), by route",
            latency.clone(),
        );
        let appends = Counter::default();
        registry.register(
            "appends",
            "Append requests acknowledged (durable)",
            appends.clone(),
        );
        let appended_messages = Counter::default();
        registry.register(
            "appended_messages",
            "Messages appended through the API",
            appended_messages.clone(),
        );
        let compactions = Counter::default();
        registry.register(
            "compactions",
            "Summary checkpoints stored",
            compactions.clone(),
        );
        let context_loads = Counter::default();
        registry.register(
            "context_loads",
            "Context windows read from the store (first report of a hot session, or after a write the server did not make)",
            context_loads.clone(),
        );
        let processor_calls = Family::<ProcessorLabels, Counter>::default();
        registry.register(
            "processor_calls",
            "History processor calls, by processor",
            processor_calls.clone(),
        );
        let processor_failures = Family::<ProcessorLabels, Counter>::default();
        registry.register(
            "processor_failures",
            "History processor calls that failed, by processor",
            processor_failures.clone(),
        );
        let hooks = Family::<HookLabels, Counter>::default();
        registry.register(
            "hook_deliveries",
            "Hook deliveries, by hook and outcome (delivered, failed, dropped)",
            hooks.clone(),
        );
        let sessions = Gauge::default();
        registry.register("sessions", "Sessions in the index", sessions.clone());
        let hot_sessions = Gauge::default();
        registry.register(
            "hot_sessions",
            "Sessions held in memory (not yet released)",
            hot_sessions.clone(),
        );
        Metrics {
            registry,
            requests,
            latency,
            appends,
            appended_messages,
            compactions,
            context_loads,
            processor_calls,
            processor_failures,
            hooks,
            sessions,
            hot_sessions,
        }
    }
}

impl Metrics {
    /// One answered request.
    pub fn request(&self, method: &str, route: &str, status: u16, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                method: method.to_owned(),
                route: route.to_owned(),
                status,
            })
            .inc();
        self.latency
            .get_or_create(&RouteLabels {
                route: route.to_owned(),
            })
            .observe(seconds);
    }

    /// One acknowledged append of `messages` messages.
    pub fn append(&self, messages: usize) {
        self.appends.inc();
        self.appended_messages.inc_by(messages as u64);
    }

    /// One stored checkpoint.
    pub fn compaction(&self) {
        self.compactions.inc();
    }

    /// One context window read from the store.
    pub fn context_load(&self) {
        self.context_loads.inc();
    }

    /// One processor call.
    pub fn processor(&self, name: &str, failed: bool) {
        let labels = ProcessorLabels {
            processor: name.to_owned(),
        };
        self.processor_calls.get_or_create(&labels).inc();
        if failed {
            self.processor_failures.get_or_create(&labels).inc();
        }
    }

    /// One hook delivery's outcome.
    pub fn hook(&self, hook: &str, outcome: &str) {
        self.hooks
            .get_or_create(&HookLabels {
                hook: hook.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Sets the session gauges.
    pub fn sessions(&self, indexed: usize, hot: usize) {
        self.sessions.set(indexed as i64);
        self.hot_sessions.set(hot as i64);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut text = String::new();
        encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        text
    }
}
